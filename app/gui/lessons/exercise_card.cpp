#include "gui/lessons/exercise_card.hpp"

#include <imgui.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "course/classroom.hpp"
#include "gui/fonts.hpp"
#include "gui/lessons/lesson_widgets.hpp"
#include "gui/lessons/markdown_view.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

using lesson_ui::small_wrapped;

// Orange, beside the lesson pane's blue predictions, pink questions and green checks (one palette).
constexpr ImU32 kExerciseEdge = IM_COL32(230, 159, 0, 255);
constexpr std::size_t kMaxInput = 256;

std::string attempts_text(int n) { return n == 1 ? "1 attempt" : std::to_string(n) + " attempts"; }

}  // namespace

void draw_exercise_card(course::ExerciseBook& book, int i, float width) {
  const course::Exercise& x = book.exercise(i);
  const course::ExerciseState& st = book.state(i);
  const bool answers = classroom::answers_allowed();
  ImGui::PushID("exercise");
  ImGui::PushID(i);
  {
    lesson_ui::Card card(width, kExerciseEdge);
    const float w = card.inner_width();
    lesson_ui::card_label(st.right ? "EXERCISE  \xC2\xB7  SOLVED" : "EXERCISE", kExerciseEdge);
    draw_inline_markdown(x.ask, w, colors::kText, fonts().bold);
    ImGui::Dummy(ImVec2(0, 4));
    if (x.is_expression()) {
      std::string names;
      for (const auto& n : x.var_names) names += (names.empty() ? "" : ", ") + n;
      small_wrapped(colors::kTextDim, "Answer with a formula in " + names +
                                          ": + - * / ^ and parentheses, sqrt, exp, ln. Write products with *, "
                                          "as in 4*d^2.");
    }

    // The input box and the button; Enter checks too.
    const bool can_check = book.can_check(i);
    char buf[kMaxInput] = {};
    const std::string& in = book.input(i);
    std::memcpy(buf, in.data(), std::min(in.size(), kMaxInput - 1));
    const char* button = "Check my answer";
    const float bw = ImGui::CalcTextSize(button).x + ImGui::GetStyle().FramePadding.x * 2;
    const float unit_w = x.unit.empty() ? 0.0f : ImGui::CalcTextSize(x.unit.c_str()).x + 8.0f;
    const bool one_row = w - bw - unit_w - 10.0f >= w * 0.45f;
    ImGui::SetNextItemWidth(one_row ? w - bw - unit_w - 10.0f : w - unit_w);
    ImGui::BeginDisabled(!can_check);
    const bool enter = ImGui::InputText("##answer", buf, sizeof buf, ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::EndDisabled();
    if (can_check) book.input(i) = buf;
    if (!x.unit.empty()) {
      ImGui::SameLine(0, 6);
      ImGui::AlignTextToFramePadding();
      ImGui::TextUnformatted(x.unit.c_str());
    }
    if (one_row) ImGui::SameLine(0, 10);
    ImGui::BeginDisabled(!can_check);
    if ((ImGui::Button(button) || enter) && can_check) book.check(i);
    ImGui::EndDisabled();

    if (!st.message.empty()) small_wrapped(colors::kError, st.message);
    if (st.attempts > 0) {
      ImGui::Dummy(ImVec2(0, 2));
      if (st.right) {
        const float size = ImGui::GetFontSize();
        const ImVec2 p = ImGui::GetCursorScreenPos();
        lesson_ui::check_mark(ImVec2(p.x, p.y + size * 0.15f), size * 0.85f, colors::kGood);
        ImGui::Indent(size * 1.3f);
        ImGui::PushStyleColor(ImGuiCol_Text, colors::kGood);
        ImGui::TextWrapped("Right: %s is the answer (%s%s).", st.answer.c_str(), attempts_text(st.attempts).c_str(),
                           st.first_right ? ", right the first time" : "");
        ImGui::PopStyleColor();
        ImGui::Unindent(size * 1.3f);
      } else {
        ImGui::PushStyleColor(ImGuiCol_Text, colors::kWarning);
        ImGui::TextWrapped("Not right: %s (%s so far).", st.answer.c_str(), attempts_text(st.attempts).c_str());
        ImGui::PopStyleColor();
      }
    }
    const bool explained = book.explained(i, answers);
    if (!st.right && !explained) {
      if (!answers) {
        ImGui::BeginDisabled();
        ImGui::SmallButton("Your teacher has hidden the answers");
        ImGui::EndDisabled();
      } else {
        if (ImGui::SmallButton("Show the answer")) book.show_answer(i);
        if (ImGui::IsItemHovered())
          ImGui::SetTooltip("Shows the answer and how to get it; after that this exercise cannot be checked again");
        if (st.attempts > 0 && st.attempts < course::ExerciseBook::kAttemptsBeforeExplain) {
          ImGui::SameLine(0, 10);
          ImGui::AlignTextToFramePadding();
          ImGui::TextDisabled("The answer opens after %d attempts.", course::ExerciseBook::kAttemptsBeforeExplain);
        }
      }
    }
    if (explained) {
      ImGui::Dummy(ImVec2(0, 4));
      lesson_ui::card_label("THE ANSWER", colors::kTextDim);
      // A formula as code: its * and ^ are not Markdown.
      const std::string key = course::key_text(x);
      draw_inline_markdown(x.is_expression() ? "`" + key + "`" : "**" + key + "**", w, colors::kText);
      draw_inline_markdown(x.explain, w, colors::kText);
    }
  }
  ImGui::PopID();
  ImGui::PopID();
}

}  // namespace tttlab::gui
