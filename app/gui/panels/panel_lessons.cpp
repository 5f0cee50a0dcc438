// Lessons — the course page: every lesson of the course (lessons/*.md, app/course/lesson.hpp) with its
// number, title, goal and duration, whether the student has finished it (the course progress), and a
// Start button that docks the lesson beside its live view (the app opens the lesson's scene like
// File → Open). Lesson files that fail to parse are listed with the reason, for the teacher.
#include <imgui.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gui/fonts.hpp"
#include "course/course_session.hpp"
#include "gui/lessons/lesson_widgets.hpp"
#include "gui/lessons/markdown_view.hpp"
#include "gui/panels/panel.hpp"
#include "gui/panels/widgets.hpp"
#include "lab/state/json_fields.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

namespace fs = std::filesystem;
using lesson_ui::Card;

ImVec4 v4(ImU32 c) { return ImGui::ColorConvertU32ToFloat4(c); }

class LessonsPanel final : public Panel {
 public:
  const char* id() const override { return "lessons"; }
  const char* name() const override { return "Lessons"; }
  const char* summary() const override {
    return "The course: lessons that each explain one idea beside the live view that shows it.";
  }
  std::vector<ClassroomControl> classroom_controls() const override {
    return {{"lessons.list", "Lessons: the other lessons of the course (students stay on one)"}};
  }

  void sync(CommandSink&) override {}
  nlohmann::json save_state() const override { return {{"lesson", m_selected}}; }
  std::function<void()> parse_state(const nlohmann::json& j, const std::string& path) override {
    const FieldReader r(j, path);
    const std::string sel = r.string("lesson", 256, "");
    return [this, sel] { m_selected = sel; };
  }

  void draw(const Snapshot&, CommandSink&) override {
    CourseSession& cs = course_session::get();
    const course::Course& course = cs.course;
    if (!cs.open_lesson.empty()) m_selected = cs.open_lesson;

    int total = 0, finished = 0;
    for (const auto& l : course.lessons) {
      total += l.minutes;
      finished += is_finished(cs, l.name) ? 1 : 0;
    }
    std::string line = std::to_string(course.lessons.size()) + (course.lessons.size() == 1 ? " lesson" : " lessons");
    if (total > 0) line += "  \xC2\xB7  about " + lesson_ui::minutes_text(total) + " in all";
    line += "  \xC2\xB7  " + std::to_string(finished) + " of " + std::to_string(course.lessons.size()) + " finished";
    widgets::panel_title("The course", line.c_str());
    ImGui::Dummy(ImVec2(0, 6));

    ImGui::BeginChild("##course", ImVec2(0, 0), false);
    const Fonts& f = fonts();
    const float width = std::min(ImGui::GetContentRegionAvail().x - 8.0f, f.regular->FontSize * 54.0f);
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + width);
    if (!cs.error.empty()) ImGui::TextColored(v4(colors::kError), "%s", cs.error.c_str());
    if (cs.progress && !cs.progress->error().empty())
      ImGui::TextColored(v4(colors::kWarning), "Your progress: %s", cs.progress->error().c_str());
    if (course.lessons.empty() && cs.error.empty())
      ImGui::TextColored(v4(colors::kTextDim), "There are no lessons in %s yet.", course.dir.string().c_str());
    if (!course.lessons.empty() && finished == 0) {
      ImGui::TextColored(v4(colors::kTextDim),
                         "Start with lesson 1. Each lesson opens beside the view it is about: first you predict "
                         "what the engine will show, then you run the experiment and compare.");
      ImGui::Dummy(ImVec2(0, 6));
    }
    ImGui::PopTextWrapPos();

    const bool only_one = !classroom::visible("lessons.list") && course.find(key(m_selected)) != nullptr;
    for (const auto& l : course.lessons) {
      if (only_one && &l != course.find(key(m_selected))) continue;
      draw_lesson_row(cs, l, width);
    }

    if (!course.errors.empty()) {
      ImGui::Dummy(ImVec2(0, 8));
      widgets::section_label("LESSON FILES THAT COULD NOT BE READ");
      for (const auto& [file, message] : course.errors) {
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + width);
        ImGui::PushFont(f.bold);
        ImGui::TextUnformatted(file.filename().string().c_str());
        ImGui::PopFont();
        ImGui::TextColored(v4(colors::kError), "%s", message.c_str());
        ImGui::PopTextWrapPos();
        ImGui::Dummy(ImVec2(0, 4));
      }
    }

    ImGui::Dummy(ImVec2(0, 10));
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + width);
    widgets::note(("For teachers: the lessons are the Markdown files in " + shown_dir(course.dir) +
                   ". After editing one, reload the course; a lesson with a mistake is listed above with the "
                   "line to fix.")
                      .c_str());
    ImGui::PopTextWrapPos();
    if (ImGui::SmallButton("Reload the course")) course_session::reload();
    ImGui::EndChild();
  }

 private:
  static bool is_finished(const CourseSession& cs, const std::string& name) {
    const course::LessonProgress* lp = cs.progress ? cs.progress->lesson(name) : nullptr;
    return lp && lp->finished;
  }
  // Older state files name the lesson by its file ("01-x.md"); the course finds it by name or number.
  static std::string key(const std::string& s) {
    const fs::path p(s);
    return p.extension() == ".md" ? p.stem().string() : s;
  }
  static std::string shown_dir(const fs::path& dir) {
    std::error_code ec;
    const fs::path rel = dir.lexically_relative(fs::current_path(ec));
    const bool inside = !ec && !rel.empty() && rel.string().rfind("..", 0) != 0;
    return (inside ? rel : dir).string();
  }

  void draw_lesson_row(CourseSession& cs, const course::Lesson& l, float width) {
    const Fonts& f = fonts();
    const bool done = is_finished(cs, l.name);
    const bool open = cs.open_lesson == l.name;
    ImGui::PushID(l.name.c_str());
    {
      Card card(width, done ? colors::kGood : (open ? colors::kAccent : colors::kPlotFrame));
      const float inner = card.inner_width();
      const float d = f.large->FontSize * 1.5f;
      // A finished lesson is opened to review it, not started again.
      const char* label = open ? "Continue" : done ? "Review" : "Start";
      const float button_w = std::max(ImGui::CalcTextSize("Continue").x, ImGui::CalcTextSize("Review").x) +
                             ImGui::GetStyle().FramePadding.x * 4;
      const ImVec2 top = ImGui::GetCursorScreenPos();
      lesson_ui::badge(course_session::lesson_number(l.name), done, d);
      // Title, goal, duration.
      const float text_x = top.x + d + 14.0f;
      const float text_w = std::max(80.0f, inner - d - 14.0f - button_w - 14.0f);
      ImGui::SetCursorScreenPos(ImVec2(text_x, top.y));
      ImGui::BeginGroup();
      std::string head;
      if (const int n = course_session::lesson_number(l.name); n > 0) head = "LESSON " + std::to_string(n);
      if (l.minutes > 0) head += (head.empty() ? "" : "  \xC2\xB7  ") + lesson_ui::minutes_text(l.minutes);
      if (done) head += "  \xC2\xB7  FINISHED";
      ImGui::PushFont(f.small);
      ImGui::TextColored(v4(done ? colors::kGood : colors::kTextDim), "%s", head.c_str());
      ImGui::PopFont();
      draw_inline_markdown(l.title, text_w, colors::kText, f.bold);
      if (!l.goal.empty()) draw_inline_markdown(l.goal, text_w, colors::kTextDim);
      ImGui::EndGroup();
      // Start.
      ImGui::SetCursorScreenPos(ImVec2(top.x + inner - button_w, top.y + 4.0f));
      if (open) ImGui::PushStyleColor(ImGuiCol_Button, colors::kButtonOn.vec4());
      if (ImGui::Button(label, ImVec2(button_w, ImGui::GetFrameHeight() * 1.2f))) {
        m_selected = l.name;
        course_session::request_start(l.name);
      }
      if (open) ImGui::PopStyleColor();
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip(open ? "Back to this lesson" : "Open this lesson beside its view");
    }
    ImGui::PopID();
  }

  std::string m_selected;  // the lesson started last (classroom mode can keep students on it)
};

}  // namespace

std::unique_ptr<Panel> make_lessons_panel() { return std::make_unique<LessonsPanel>(); }

}  // namespace tttlab::gui
