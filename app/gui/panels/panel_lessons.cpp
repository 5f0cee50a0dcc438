// Lessons — short Markdown lessons (lessons/*.md) a teacher can run in class. Each names a .tttlab
// state; "Open this lesson's view" loads it (every setting, the seed, classroom mode), and the lesson
// text stays one click away in this panel. Rendered from md4c's parse (lessons/markdown.hpp).
#include <imgui.h>
#include <imgui_internal.h>  // ImTextCharFromUtf8

#include <algorithm>
#include <nlohmann/json.hpp>

#include "gui/app_requests.hpp"
#include "gui/engine/resources.hpp"
#include "gui/fonts.hpp"
#include "gui/lessons/markdown.hpp"
#include "gui/panels/panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/plot_common.hpp"
#include "gui/state/json_fields.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

namespace fs = std::filesystem;

constexpr ImU32 kLink = IM_COL32(120, 176, 255, 255);
constexpr ImU32 kEmphasis = IM_COL32(236, 206, 140, 255);
constexpr ImU32 kCodeBg = IM_COL32(38, 41, 49, 255);

bool has_all_glyphs(ImFont* font, const std::string& text) {
  const char* s = text.c_str();
  const char* end = s + text.size();
  while (s < end) {
    unsigned int c = 0;
    s += ImTextCharFromUtf8(&c, s, end);
    if (c >= 0x80 && !font->FindGlyphNoFallback(static_cast<ImWchar>(c))) return false;
  }
  return true;
}

// Lays out runs of text with word wrapping; returns the link clicked, if any.
class RunLayout {
 public:
  RunLayout(float x0, float width) : x0_(x0), width_(width) {}

  std::string draw(const std::vector<MdRun>& runs, ImU32 base, ImFont* base_font) {
    const Fonts& f = fonts();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 start = ImGui::GetCursorScreenPos();
    y_ = start.y;
    x_ = x0_;
    line_h_ = base_font->FontSize * 1.42f;
    std::string clicked;
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const bool hovered_window = ImGui::IsWindowHovered();
    for (const auto& r : runs) {
      ImFont* font = r.code ? (has_all_glyphs(f.mono, r.text) ? f.mono : base_font) : (r.strong ? f.bold : base_font);
      const float size = r.code ? base_font->FontSize * 0.95f : base_font->FontSize;
      const ImU32 col = !r.link.empty() ? kLink : (r.em ? kEmphasis : base);
      // Words with the spaces after them; explicit newlines break the line.
      std::size_t i = 0;
      while (i < r.text.size()) {
        if (r.text[i] == '\n') {
          newline();
          ++i;
          continue;
        }
        std::size_t j = i;
        while (j < r.text.size() && r.text[j] != ' ' && r.text[j] != '\n') ++j;
        while (j < r.text.size() && r.text[j] == ' ') ++j;
        const std::string word = r.text.substr(i, j - i);
        const float w = font->CalcTextSizeA(size, FLT_MAX, 0.0f, word.c_str()).x;
        if (x_ > x0_ && x_ + w > x0_ + width_) newline();
        const ImVec2 p(x_, y_ + (line_h_ - size) * 0.5f);
        if (r.code) {
          const float tw = font->CalcTextSizeA(size, FLT_MAX, 0.0f, word.c_str(), word.c_str() + word.find_last_not_of(' ') + 1).x;
          dl->AddRectFilled(ImVec2(p.x - 2, p.y - 1), ImVec2(p.x + tw + 2, p.y + size + 1), kCodeBg, 3.0f);
        }
        dl->AddText(font, size, p, col, word.c_str());
        if (!r.link.empty()) {
          const float tw = font->CalcTextSizeA(size, FLT_MAX, 0.0f, word.c_str(), word.c_str() + word.find_last_not_of(' ') + 1).x;
          const ImVec2 a(p.x, p.y), b(p.x + tw, p.y + size);
          dl->AddLine(ImVec2(a.x, b.y), ImVec2(b.x, b.y), plot::with_alpha(kLink, 0.6f));
          if (hovered_window && mouse.x >= a.x && mouse.x < b.x && mouse.y >= a.y && mouse.y < b.y + 2) {
            ImGui::SetMouseCursor(ImGuiMouseCursor_Hand);
            ImGui::SetTooltip(fs::path(r.link).extension() == ".tttlab" ? "Open this view: %s" : "%s", r.link.c_str());
            if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) clicked = r.link;
          }
        }
        x_ += w;
        i = j;
      }
    }
    ImGui::SetCursorScreenPos(start);
    ImGui::Dummy(ImVec2(width_, y_ + line_h_ - start.y));
    return clicked;
  }

 private:
  void newline() {
    x_ = x0_;
    y_ += line_h_;
  }
  float x0_, width_, x_ = 0, y_ = 0, line_h_ = 0;
};

class LessonsPanel final : public Panel {
 public:
  const char* id() const override { return "lessons"; }
  const char* name() const override { return "Lessons"; }
  const char* summary() const override {
    return "Short lessons for the classroom: each explains one idea and opens the view that shows it.";
  }
  std::vector<ClassroomControl> classroom_controls() const override {
    return {{"lessons.list", "Lessons: the list of lessons (students stay on one)"}};
  }

  void sync(CommandSink&) override {}
  nlohmann::json save_state() const override { return {{"lesson", selected_}}; }
  std::function<void()> parse_state(const nlohmann::json& j, const std::string& path) override {
    const FieldReader r(j, path);
    const std::string sel = r.string("lesson", 256, "");
    return [this, sel] { selected_ = sel; };
  }

  void draw(const Snapshot&, CommandSink&) override {
    if (!loaded_) load();
    const bool list = classroom::visible("lessons.list");
    if (list) {
      const float controls_w = 20.0f * ImGui::GetFontSize();
      ImGui::BeginChild("##controls", ImVec2(controls_w, 0), false);
      draw_list();
      ImGui::EndChild();
      ImGui::SameLine(0, 16);
    }
    ImGui::BeginChild("##lesson", ImVec2(0, 0), false);
    draw_lesson();
    ImGui::EndChild();
  }

 private:
  void load() {
    loaded_ = true;
    std::string looked;
    const auto dir = find_resource("lessons", &looked);
    if (!dir) {
      error_ = "The lessons folder was not found (looked in " + looked + ").";
      return;
    }
    dir_ = *dir;
    lessons_ = load_lessons(*dir);
    if (lessons_.empty()) error_ = "No lessons (*.md) in " + dir->string() + ".";
  }

  const Lesson* current() const {
    for (const auto& l : lessons_)
      if (l.file.filename().string() == selected_) return &l;
    return lessons_.empty() ? nullptr : &lessons_.front();
  }

  void draw_list() {
    widgets::section_label("LESSONS");
    const Lesson* cur = current();
    for (const auto& l : lessons_) {
      ImGui::PushID(l.file.filename().string().c_str());
      if (ImGui::Selectable(l.title.c_str(), &l == cur, 0, ImVec2(0, ImGui::GetFrameHeight())))
        selected_ = l.file.filename().string();
      ImGui::PopID();
    }
    ImGui::Dummy(ImVec2(0, 6));
    if (ImGui::Button("Reload the lessons", ImVec2(-1, 0))) {
      lessons_.clear();
      error_.clear();
      loaded_ = false;
    }
    ImGui::Dummy(ImVec2(0, 6));
    std::error_code ec;
    const fs::path rel = dir_.lexically_relative(fs::current_path(ec));
    const bool inside = !ec && !rel.empty() && rel.string().rfind("..", 0) != 0;
    widgets::note(("Lessons are the Markdown files in " + (inside ? rel : dir_).string() +
                   ". Each links to a .tttlab state; a teacher can add lessons there (the first .tttlab link is the "
                   "lesson's view) and save states with File → Save state, classroom mode included.")
                      .c_str());
  }

  void draw_lesson() {
    const Fonts& f = fonts();
    if (!error_.empty()) {
      widgets::panel_title("Lessons", "");
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kError), "%s", error_.c_str());
      return;
    }
    const Lesson* l = current();
    if (!l) return;
    const float width = std::min(ImGui::GetContentRegionAvail().x - 16.0f, f.regular->FontSize * 52.0f);
    if (!l->state.empty()) {
      if (ImGui::Button("Open this lesson's view", ImVec2(0, ImGui::GetFrameHeight() * 1.3f))) request_open_state(l->state);
      ImGui::SameLine(0, 10);
      ImGui::PushFont(f.small);
      ImGui::AlignTextToFramePadding();
      ImGui::TextDisabled("%s", l->state.filename().string().c_str());
      ImGui::PopFont();
      ImGui::Dummy(ImVec2(0, 6));
    }
    const float x0 = ImGui::GetCursorScreenPos().x;
    std::string clicked;
    for (const auto& b : l->doc.blocks) {
      switch (b.kind) {
        case MdBlockKind::Heading: {
          ImFont* font = b.level == 1 ? f.large : f.bold;
          ImGui::Dummy(ImVec2(0, b.level == 1 ? 2.0f : 8.0f));
          RunLayout lay(x0, width);
          const std::string c = lay.draw(b.runs, colors::kText, font);
          if (!c.empty()) clicked = c;
          if (b.level == 1) {
            const ImVec2 p = ImGui::GetCursorScreenPos();
            ImGui::GetWindowDrawList()->AddLine(ImVec2(p.x, p.y + 2), ImVec2(p.x + width, p.y + 2), IM_COL32(60, 64, 74, 255));
            ImGui::Dummy(ImVec2(0, 8));
          }
          break;
        }
        case MdBlockKind::Paragraph:
        case MdBlockKind::Quote: {
          const float indent = b.kind == MdBlockKind::Quote ? 14.0f : 0.0f;
          const ImVec2 p = ImGui::GetCursorScreenPos();
          RunLayout lay(x0 + indent, width - indent);
          const std::string c = lay.draw(b.runs, b.kind == MdBlockKind::Quote ? colors::kTextDim : colors::kText, f.regular);
          if (!c.empty()) clicked = c;
          if (b.kind == MdBlockKind::Quote)
            ImGui::GetWindowDrawList()->AddLine(ImVec2(p.x + 3, p.y), ImVec2(p.x + 3, ImGui::GetCursorScreenPos().y - 4),
                                                colors::kAccent, 3.0f);
          ImGui::Dummy(ImVec2(0, 6));
          break;
        }
        case MdBlockKind::ListItem: {
          const float indent = 18.0f * static_cast<float>(std::max(1, b.level));
          const ImVec2 p = ImGui::GetCursorScreenPos();
          const std::string marker = b.number > 0 ? std::to_string(b.number) + "." : "\xE2\x80\xA2";
          ImGui::GetWindowDrawList()->AddText(f.regular, f.regular->FontSize,
                                              ImVec2(x0 + indent - 14.0f - (b.number > 0 ? 6.0f : 0.0f),
                                                     p.y + f.regular->FontSize * 0.21f),
                                              colors::kTextDim, marker.c_str());
          RunLayout lay(x0 + indent, width - indent);
          const std::string c = lay.draw(b.runs, colors::kText, f.regular);
          if (!c.empty()) clicked = c;
          ImGui::Dummy(ImVec2(0, 2));
          break;
        }
        case MdBlockKind::Code: {
          std::string text;
          for (const auto& r : b.runs) text += r.text;
          // DejaVu Sans Mono lacks some maths symbols (ℓ): such a block is set in the sans font.
          ImFont* font = has_all_glyphs(f.mono, text) ? f.mono : f.regular;
          const ImVec2 sz = font->CalcTextSizeA(font->FontSize, FLT_MAX, 0.0f, text.c_str());
          const ImVec2 p = ImGui::GetCursorScreenPos();
          ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + width, p.y + sz.y + 14.0f), kCodeBg, 4.0f);
          ImGui::GetWindowDrawList()->AddText(font, font->FontSize, ImVec2(p.x + 10, p.y + 7), IM_COL32(210, 214, 222, 255),
                                              text.c_str());
          ImGui::Dummy(ImVec2(width, sz.y + 14.0f));
          ImGui::Dummy(ImVec2(0, 6));
          break;
        }
        case MdBlockKind::Rule: {
          const ImVec2 p = ImGui::GetCursorScreenPos();
          ImGui::GetWindowDrawList()->AddLine(ImVec2(p.x, p.y + 6), ImVec2(p.x + width, p.y + 6), IM_COL32(60, 64, 74, 255));
          ImGui::Dummy(ImVec2(width, 14.0f));
          break;
        }
      }
    }
    if (!clicked.empty() && fs::path(clicked).extension() == ".tttlab" && clicked.find("://") == std::string::npos)
      request_open_state(fs::path(clicked).is_absolute() ? fs::path(clicked) : l->file.parent_path() / clicked);
  }

  bool loaded_ = false;
  std::string error_;
  fs::path dir_;
  std::vector<Lesson> lessons_;
  std::string selected_;
};

}  // namespace

std::unique_ptr<Panel> make_lessons_panel() { return std::make_unique<LessonsPanel>(); }

}  // namespace tttlab::gui
