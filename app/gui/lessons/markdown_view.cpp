#include "gui/lessons/markdown_view.hpp"

#include <imgui_internal.h>  // ImTextCharFromUtf8

#include <algorithm>
#include <cfloat>
#include <filesystem>
#include <unordered_map>

#include "gui/fonts.hpp"
#include "gui/lessons/lesson_widgets.hpp"
#include "gui/plot/plot_common.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

namespace fs = std::filesystem;

// The lessons' text colours follow the theme (gui/theme.hpp), so a lesson reads on light and dark.
using colors::kCodeBg;
using colors::kEmphasis;
using colors::kLink;
using colors::kRule;

// Lays out runs of text with word wrapping; returns the link clicked, if any.
class RunLayout {
 public:
  RunLayout(float x0, float width) : m_x0(x0), m_width(width) {}

  std::string draw(const std::vector<MdRun>& runs, ImU32 base, ImFont* base_font) {
    const Fonts& f = fonts();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 start = ImGui::GetCursorScreenPos();
    y_ = start.y;
    x_ = m_x0;
    m_line_h = base_font->FontSize * 1.42f;
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
        if (x_ > m_x0 && x_ + w > m_x0 + m_width) newline();
        const ImVec2 p(x_, y_ + (m_line_h - size) * 0.5f);
        const std::size_t last = word.find_last_not_of(' ');
        const char* word_end = word.c_str() + (last == std::string::npos ? 0 : last + 1);
        if (r.code) {
          const float tw = font->CalcTextSizeA(size, FLT_MAX, 0.0f, word.c_str(), word_end).x;
          dl->AddRectFilled(ImVec2(p.x - 2, p.y - 1), ImVec2(p.x + tw + 2, p.y + size + 1), kCodeBg, 3.0f);
        }
        lesson_ui::add_text(dl, font, size, p, col, word.c_str(), word.c_str() + word.size());
        if (!r.link.empty()) {
          const float tw = font->CalcTextSizeA(size, FLT_MAX, 0.0f, word.c_str(), word_end).x;
          const ImVec2 a(p.x, p.y), b(p.x + tw, p.y + size);
          dl->AddLine(ImVec2(a.x, b.y), ImVec2(b.x, b.y), plot::with_alpha(kLink, 0.6f));
          if (hovered_window && mouse.x >= a.x && mouse.x < b.x && mouse.y >= a.y && mouse.y < b.y + 2) {
            ImGui::SetMouseCursor(ImGuiMouseCursor_Hand);
            ImGui::SetTooltip(fs::path(r.link).extension() == ".tttlab" ? "Open this view" : "%s", r.link.c_str());
            if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) clicked = r.link;
          }
        }
        x_ += w;
        i = j;
      }
    }
    ImGui::SetCursorScreenPos(start);
    ImGui::Dummy(ImVec2(m_width, y_ + m_line_h - start.y));
    return clicked;
  }

 private:
  void newline() {
    x_ = m_x0;
    y_ += m_line_h;
  }
  float m_x0, m_width, x_ = 0, y_ = 0, m_line_h = 0;
};

}  // namespace

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

std::string draw_runs(const std::vector<MdRun>& runs, float x0, float width, ImU32 color, ImFont* font) {
  RunLayout lay(x0, width);
  return lay.draw(runs, color, font);
}

std::string draw_markdown(const MdDocument& doc, float width) {
  const Fonts& f = fonts();
  const float x0 = ImGui::GetCursorScreenPos().x;
  std::string clicked;
  const auto keep = [&clicked](const std::string& c) {
    if (!c.empty()) clicked = c;
  };
  for (const auto& b : doc.blocks) {
    switch (b.kind) {
      case MdBlockKind::Heading: {
        ImFont* font = b.level == 1 ? f.large : f.bold;
        ImGui::Dummy(ImVec2(0, b.level == 1 ? 2.0f : 8.0f));
        keep(draw_runs(b.runs, x0, width, colors::kText, font));
        if (b.level == 1) {
          const ImVec2 p = ImGui::GetCursorScreenPos();
          ImGui::GetWindowDrawList()->AddLine(ImVec2(p.x, p.y + 2), ImVec2(p.x + width, p.y + 2), kRule);
          ImGui::Dummy(ImVec2(0, 8));
        }
        break;
      }
      case MdBlockKind::Paragraph:
      case MdBlockKind::Quote: {
        const bool quote = b.kind == MdBlockKind::Quote;
        const float indent = quote ? 14.0f : 0.0f;
        const ImVec2 p = ImGui::GetCursorScreenPos();
        keep(draw_runs(b.runs, x0 + indent, width - indent, quote ? colors::kTextDim : colors::kText, f.regular));
        if (quote)
          ImGui::GetWindowDrawList()->AddLine(ImVec2(p.x + 3, p.y), ImVec2(p.x + 3, ImGui::GetCursorScreenPos().y - 4),
                                              colors::kAccent, 3.0f);
        ImGui::Dummy(ImVec2(0, 6));
        break;
      }
      case MdBlockKind::ListItem: {
        const float indent = 18.0f * static_cast<float>(std::max(1, b.level));
        const ImVec2 p = ImGui::GetCursorScreenPos();
        const std::string marker = b.number > 0 ? std::to_string(b.number) + "." : "\xE2\x80\xA2";
        lesson_ui::add_text(ImGui::GetWindowDrawList(), f.regular, f.regular->FontSize,
                                            ImVec2(x0 + indent - 14.0f - (b.number > 0 ? 6.0f : 0.0f),
                                                   p.y + f.regular->FontSize * 0.21f),
                                            colors::kTextDim, marker.c_str());
        keep(draw_runs(b.runs, x0 + indent, width - indent, colors::kText, f.regular));
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
        ImDrawList* dl = ImGui::GetWindowDrawList();
        dl->AddRectFilled(p, ImVec2(p.x + width, p.y + sz.y + 14.0f), kCodeBg, 4.0f);
        // A line wider than the column is clipped to the box rather than drawn over what is beside it.
        dl->PushClipRect(p, ImVec2(p.x + width - 4.0f, p.y + sz.y + 14.0f), true);
        lesson_ui::add_text(dl, font, font->FontSize, ImVec2(p.x + 10, p.y + 7), colors::kCodeText, text.c_str(),
                            text.c_str() + text.size());
        dl->PopClipRect();
        ImGui::Dummy(ImVec2(width, sz.y + 14.0f));
        if (sz.x + 20.0f > width && ImGui::IsItemHovered()) {
          ImGui::BeginTooltip();
          ImGui::PushFont(font);
          ImGui::TextUnformatted(text.c_str());
          ImGui::PopFont();
          ImGui::EndTooltip();
        }
        ImGui::Dummy(ImVec2(0, 6));
        break;
      }
      case MdBlockKind::Rule: {
        const ImVec2 p = ImGui::GetCursorScreenPos();
        ImGui::GetWindowDrawList()->AddLine(ImVec2(p.x, p.y + 6), ImVec2(p.x + width, p.y + 6), kRule);
        ImGui::Dummy(ImVec2(width, 14.0f));
        break;
      }
    }
  }
  return clicked;
}

void draw_inline_markdown(const std::string& text, float width, ImU32 color, ImFont* font) {
  static std::unordered_map<std::string, MdDocument> cache;
  if (!font) font = fonts().regular;
  auto it = cache.find(text);
  if (it == cache.end()) {
    if (cache.size() > 512) cache.clear();
    MdDocument doc;
    try {
      doc = parse_markdown(text);
    } catch (const std::exception&) {
      doc.blocks.push_back(MdBlock{MdBlockKind::Paragraph, 0, 0, {MdRun{text, false, false, false, {}}}});
    }
    it = cache.emplace(text, std::move(doc)).first;
  }
  const float x0 = ImGui::GetCursorScreenPos().x;
  bool first = true;
  for (const auto& b : it->second.blocks) {
    if (!first) ImGui::Dummy(ImVec2(0, 4));
    first = false;
    const float indent = b.kind == MdBlockKind::ListItem ? 14.0f : 0.0f;
    draw_runs(b.runs, x0 + indent, width - indent, color, font);
  }
}

}  // namespace tttlab::gui
