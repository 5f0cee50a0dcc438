// app/gui/lessons/lesson_widgets.hpp — the small pieces the course page and the lesson pane share: a
// card (a framed block with a coloured edge), a spinner, a check mark, and how durations and measured
// values are written for students. UI thread only.
#pragma once

#include <imgui.h>

#include <optional>
#include <string>

#include "course/lesson.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui::lesson_ui {

// A framed block `width` wide from the cursor; everything drawn between construction and destruction
// is inside it (an ImGui group, text wrapped to the inside). Not nestable.
class Card {
 public:
  Card(float width, ImU32 edge, ImU32 background = colors::kCardBg);
  ~Card();
  Card(const Card&) = delete;
  Card& operator=(const Card&) = delete;
  float inner_width() const { return m_inner; }
  float left() const { return x_; }  // screen x where the inside starts

 private:
  ImDrawList* m_dl;
  ImVec2 m_p0;
  float m_width, m_inner, x_;
  ImU32 m_edge, m_background;
};

// Text drawn straight into a draw list (a word of a paragraph, a choice, the veil). Draw lists are
// invisible to ImGui's log, so this also logs the text while logging is on (ImGui::LogToBuffer):
// that is how a test reads everything the lessons draw.
void add_text(ImDrawList* dl, ImFont* font, float size, ImVec2 pos, ImU32 color, const char* begin,
              const char* end = nullptr, float wrap_width = 0.0f);

// Text in `color`, wrapped to the window (ImGui::TextWrapped); small_wrapped in the small font.
void wrapped(ImU32 color, const std::string& text);
void small_wrapped(ImU32 color, const std::string& text);
// "PREDICT" style small caps in `color`.
void card_label(const char* text, ImU32 color);
// A spinning arc `radius` px, then the cursor continues on the same line.
void spinner(float radius, ImU32 color);
// A check mark of size `size` at screen position `pos`.
void check_mark(ImVec2 pos, float size, ImU32 color);
// A round badge `diameter` wide at the cursor: a check mark when `done`, else the number (0: none).
void badge(int number, bool done, float diameter);

// 25 → "25 min", 125 → "2 h 05 min".
std::string minutes_text(int minutes);
// A number for students: 4 significant digits, "2.5 × 10⁻¹⁶" for very small or large magnitudes.
std::string number_text(double value, int digits = 4);
// A measured value for students: 4 significant digits, with its spread "(lo – hi)" when known, and a
// unit when given.
std::string measured_text(double value, std::optional<double> lo = std::nullopt,
                          std::optional<double> hi = std::nullopt, const std::string& unit = "");
// The measured value of a prediction, as its reveal writes it: a percentage when its choices are
// written in percent (0.4893 → "48.93 %"), else the number with the prediction's unit. The lesson leak
// test formats the values it searches for with this, so the two must stay one function.
std::string measured_text(const course::Prediction& p, double value, std::optional<double> lo = std::nullopt,
                          std::optional<double> hi = std::nullopt);
// The measured value of a check, as its result line writes it: the number, as its `expect:` is written.
std::string measured_text(const course::Check& c, double value, std::optional<double> lo = std::nullopt,
                          std::optional<double> hi = std::nullopt);

}  // namespace tttlab::gui::lesson_ui
