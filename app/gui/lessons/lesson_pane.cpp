#include "gui/lessons/lesson_pane.hpp"

#include <imgui.h>
#include <imgui_internal.h>  // SetNextWindowScroll

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "course/classroom.hpp"
#include "lab/engine/snapshot.hpp"
#include "gui/fonts.hpp"
#include "course/course_session.hpp"
#include "gui/lab.hpp"
#include "gui/lessons/exercise_card.hpp"
#include "gui/lessons/lesson_widgets.hpp"
#include "gui/lessons/markdown_view.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

namespace fs = std::filesystem;
using lesson_ui::Card;
using lesson_ui::small_wrapped;
using lesson_ui::wrapped;

constexpr ImU32 kPredictEdge = IM_COL32(94, 158, 255, 255);
constexpr ImU32 kQuestionEdge = IM_COL32(204, 121, 167, 255);
constexpr ImU32 kCheckEdge = IM_COL32(0, 158, 115, 255);
constexpr ImU32 kRightBg = IM_COL32(0, 158, 115, 60);
using colors::kCardBg;
using colors::kCardEdge;
using colors::kRule;
constexpr colors::Color kHoverBg = colors::kHoverTint;
constexpr ImU32 kChosenBg = IM_COL32(94, 158, 255, 28);

ImVec4 v4(ImU32 c) { return ImGui::ColorConvertU32ToFloat4(c); }


void rule(float width) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddLine(ImVec2(p.x, p.y + 5), ImVec2(p.x + width, p.y + 5), kRule);
  ImGui::Dummy(ImVec2(width, 12));
}

// Progress of the engine's running jobs (0 when there is none).
double job_progress(const Snapshot& snap) {
  double p = 0;
  for (const auto& j : snap.jobs)
    if (j.outcome == JobOutcome::Running) p = std::max(p, j.progress);
  return p;
}

void start_run(LessonSession& s, const std::string& experiment, const Snapshot& snap, const LessonPaneHost& host,
               bool shipped_run = false) {
  if (auto scene = s.begin_run(experiment, snap, shipped_run)) {
    if (!host.open_scene || !host.open_scene(*scene)) s.cancel_run();
  }
}

// The button that runs an experiment, or the engine's progress while it runs, or why it could not.
void run_controls(LessonSession& s, const std::string& experiment, const char* label, const Snapshot& snap,
                  const LessonPaneHost& host) {
  if (s.running() && s.running_experiment() == experiment) {
    lesson_ui::spinner(7.0f, colors::kAccent);
    ImGui::AlignTextToFramePadding();
    const double p = job_progress(snap);
    if (p > 0.0)
      ImGui::TextColored(v4(colors::kTextDim), "The engine is measuring… %d%%", static_cast<int>(p * 100.0));
    else
      ImGui::TextColored(v4(colors::kTextDim), "The engine is measuring…");
    ImGui::SameLine(0, 10);
    if (ImGui::SmallButton("Stop waiting")) s.cancel_run();
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Stop waiting for this measurement (you can run it again)");
  } else {
    ImGui::BeginDisabled(s.running());
    if (ImGui::Button(label)) start_run(s, experiment, snap, host);
    // An experiment that trains a run may use the run's shipped checkpoints instead.
    if (s.offers_shipped_run(experiment)) {
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("Trains the lesson's run and follows its checkpoints");
      const char* shipped = "Use the shipped run (no training)";
      // Beside it where the pane is wide enough, else below (a narrow pane, a large zoom).
      const float need = ImGui::CalcTextSize(shipped).x + 2 * ImGui::GetStyle().FramePadding.x + 8;
      if (ImGui::GetContentRegionAvail().x - ImGui::GetItemRectSize().x > need) ImGui::SameLine(0, 8);
      if (ImGui::Button(shipped)) start_run(s, experiment, snap, host, true);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("The checkpoints of the same run, made with the same settings and shipped with the app: "
                          "the view replays them as if it followed the run, and nothing trains");
    }
    ImGui::EndDisabled();
    if (s.running()) {
      ImGui::SameLine();
      ImGui::AlignTextToFramePadding();
      ImGui::TextDisabled("another experiment is running");
    }
  }
  if (!s.run_error().empty() && s.last_run_experiment() == experiment && !s.running())
    small_wrapped(colors::kError, s.run_error());
}

// One choice of a multiple-choice prediction: a radio mark and the wrapped text, the whole row
// clickable. After the reveal, the right choice is tinted green with a check mark.
bool choice_row(int k, const std::string& text, bool chosen, bool locked, bool revealed, bool is_right, float width) {
  ImFont* font = fonts().regular;
  const float size = font->FontSize;
  const float mark = size * 1.1f;
  const float text_w = width - mark - 14.0f - (revealed ? size * 1.4f : 0.0f);
  const ImVec2 tsz = font->CalcTextSizeA(size, FLT_MAX, text_w, text.c_str());
  const float h = std::max(tsz.y, size) + 10.0f;
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::PushID(k);
  const bool clicked = ImGui::InvisibleButton("##choice", ImVec2(width, h)) && !locked;
  const bool hovered = ImGui::IsItemHovered() && !locked;
  ImGui::PopID();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 q(p.x + width, p.y + h);
  if (revealed && is_right)
    dl->AddRectFilled(p, q, kRightBg, 4.0f);
  else if (hovered)
    dl->AddRectFilled(p, q, kHoverBg, 4.0f);
  else if (chosen)
    dl->AddRectFilled(p, q, kChosenBg, 4.0f);
  const ImVec2 c(p.x + 4.0f + mark * 0.5f, p.y + 5.0f + size * 0.5f);
  const ImU32 ring = chosen ? colors::kAccent : (locked ? colors::kTextFaint : colors::kTextDim);
  dl->AddCircle(c, mark * 0.5f - 1.0f, ring, 24, 1.5f);
  if (chosen) dl->AddCircleFilled(c, mark * 0.25f, colors::kAccent, 16);
  const ImU32 col = locked && !chosen && !(revealed && is_right) ? colors::kTextDim : colors::kText;
  lesson_ui::add_text(dl, font, size, ImVec2(p.x + mark + 12.0f, p.y + 5.0f), col, text.c_str(),
                      text.c_str() + text.size(), text_w);
  if (revealed && is_right) lesson_ui::check_mark(ImVec2(q.x - size * 1.3f, p.y + 5.0f), size * 0.9f, colors::kGood);
  if (hovered) ImGui::SetMouseCursor(ImGuiMouseCursor_Hand);
  ImGui::Dummy(ImVec2(0, 2));
  return clicked;
}

std::string slider_format(const std::string& unit) {
  std::string f = "%.3g";
  if (!unit.empty()) {
    f += " ";
    for (char ch : unit) {
      f += ch;
      if (ch == '%') f += '%';
    }
  }
  return f;
}

// The answer on record: the first one committed is final, so after "Predict again" the card says what
// it was, its verdict, and how many times the student answered again.
void first_answer_line(const LessonSession& s, int i) {
  const course::Prediction& p = s.lesson().predictions.at(static_cast<std::size_t>(i));
  const course::PredictionRecord& r = s.record(i);
  if (!s.committed(i) || (r.retries.empty() && s.prediction(i).locked)) return;
  std::string answer;
  if (p.is_slider())
    answer = lesson_ui::measured_text(r.value, std::nullopt, std::nullopt, p.unit);
  else if (r.choice >= 0 && r.choice < static_cast<int>(p.choices.size()))
    answer = p.choices[static_cast<std::size_t>(r.choice)].text;
  if (answer.size() > 60) {
    std::size_t cut = 57;
    while (cut > 0 && (static_cast<unsigned char>(answer[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
    answer = answer.substr(0, cut) + "\xE2\x80\xA6";
  }
  std::string line = "Your first prediction: " + answer;
  line += r.revealed ? (r.right ? " (right)" : " (not right)") : "";
  if (!r.retries.empty())
    line += "  \xC2\xB7  " + std::to_string(r.retries.size()) + (r.retries.size() == 1 ? " retry" : " retries");
  ImGui::Dummy(ImVec2(0, 2));
  small_wrapped(colors::kTextFaint, line);
}

void draw_prediction(LessonSession& s, int i, const Snapshot& snap, const LessonPaneHost& host, float width) {
  const course::Prediction& p = s.lesson().predictions.at(static_cast<std::size_t>(i));
  const LessonSession::PredictionState& st = s.prediction(i);
  ImGui::PushID("prediction");
  ImGui::PushID(i);
  {
    Card card(width, kPredictEdge);
    const float w = card.inner_width();
    lesson_ui::card_label(st.locked ? "YOUR PREDICTION" : "PREDICT FIRST", colors::kAccent);
    draw_inline_markdown(p.ask, w, colors::kText, fonts().bold);
    ImGui::Dummy(ImVec2(0, 4));

    if (!p.is_slider()) {
      for (int k = 0; k < static_cast<int>(p.choices.size()); ++k)
        if (choice_row(k, p.choices[static_cast<std::size_t>(k)].text, st.choice == k, st.locked, st.revealed,
                       st.right_choice == k, w))
          s.choose(i, k);
    } else {
      double v = st.value;
      const double lo = p.slider_min, hi = p.slider_max;
      ImGui::SetNextItemWidth(w);
      ImGui::BeginDisabled(st.locked);
      if (ImGui::SliderScalar("##value", ImGuiDataType_Double, &v, &lo, &hi, slider_format(p.unit).c_str()))
        s.set_value(i, v);
      ImGui::EndDisabled();
      if (!st.locked) small_wrapped(colors::kTextFaint, "Drag to your guess, or Ctrl+click to type it.");
    }
    ImGui::Dummy(ImVec2(0, 4));

    if (!st.locked) {
      const bool ready = p.is_slider() || st.choice >= 0;
      ImGui::BeginDisabled(!ready);
      if (ImGui::Button("Lock in my prediction")) s.lock(i);
      ImGui::EndDisabled();
      if (s.veiled() && s.view_experiment() == p.experiment)
        small_wrapped(colors::kTextDim, "The view beside the lesson opens once you have locked it in.");
      else if (!ready)
        small_wrapped(colors::kTextDim, "Choose an answer first.");
    } else if (!st.revealed) {
      small_wrapped(colors::kTextDim, "Locked in. Now let the engine measure it:");
      run_controls(s, p.experiment, "Run the experiment", snap, host);
    } else {
      // The reveal: the measurement, the verdict, the student's own prediction beside it.
      ImGui::Dummy(ImVec2(0, 2));
      lesson_ui::card_label("THE ENGINE MEASURED", colors::kTextDim);
      ImGui::PushFont(fonts().large);
      wrapped(colors::kText, lesson_ui::measured_text(p, st.measured, st.lo, st.hi));
      ImGui::PopFont();
      if (st.lo && st.hi && (*st.lo != st.measured || *st.hi != st.measured))
        small_wrapped(colors::kTextFaint, "In brackets: the lowest and highest of the repeated measurements.");
      if (p.is_slider()) {
        wrapped(colors::kText, "You predicted " + lesson_ui::measured_text(st.value, std::nullopt, std::nullopt, p.unit) +
                                   ".");
        if (st.right)
          wrapped(colors::kGood, "Within " + lesson_ui::measured_text(p.tolerance, std::nullopt, std::nullopt, p.unit) +
                                     " of the measurement: you predicted it.");
        else
          wrapped(colors::kWarning, "More than " +
                                        lesson_ui::measured_text(p.tolerance, std::nullopt, std::nullopt, p.unit) +
                                        " away: not this time. What made the real value different?");
      } else if (st.right) {
        wrapped(colors::kGood, "You predicted it: your answer is the one the measurement supports.");
      } else if (st.right_choice < 0) {
        wrapped(colors::kWarning, "The measured value fits none of the answers; ask your teacher about it.");
      } else {
        wrapped(colors::kWarning, "Not this time: the measurement supports the answer marked in green.");
      }
      if (!p.reveal.empty()) {
        ImGui::Dummy(ImVec2(0, 4));
        draw_inline_markdown(p.reveal, w, colors::kText);
      }
      ImGui::Dummy(ImVec2(0, 4));
      if (!s.running() || s.running_experiment() != p.experiment) {
        ImGui::BeginDisabled(s.running());
        if (ImGui::SmallButton("Run it again")) start_run(s, p.experiment, snap, host);
        ImGui::EndDisabled();
        ImGui::SameLine(0, 10);
        if (ImGui::SmallButton("Predict again")) s.forget(i);
      } else {
        run_controls(s, p.experiment, "Run it again", snap, host);
      }
    }
    if (!st.error.empty()) small_wrapped(colors::kError, st.error);
    first_answer_line(s, i);
  }
  ImGui::PopID();
  ImGui::PopID();
}

// A button that reveals text, or says the teacher hid it.
void reveal_button(const char* show, const char* hide, const char* hidden_by_teacher, bool allowed, bool shown,
                   const std::function<void(bool)>& set) {
  if (!allowed) {
    ImGui::BeginDisabled();
    ImGui::Button(hidden_by_teacher);
    ImGui::EndDisabled();
    return;
  }
  if (ImGui::Button(shown ? hide : show)) set(!shown);
}

void draw_question(LessonSession& s, int i, float width) {
  const course::Question& q = s.lesson().questions.at(static_cast<std::size_t>(i));
  ImGui::PushID("question");
  ImGui::PushID(i);
  {
    Card card(width, kQuestionEdge);
    const float w = card.inner_width();
    lesson_ui::card_label("THINK ABOUT IT", kQuestionEdge);
    draw_inline_markdown(q.ask, w, colors::kText, fonts().bold);
    ImGui::Dummy(ImVec2(0, 4));
    const bool hints = classroom::hints_allowed(), answers = classroom::answers_allowed();
    const char* hint_label = !hints ? "Your teacher has hidden the hints" : (s.hint_shown(i) ? "Hide the hint" : "Hint");
    const char* answer_label =
        !answers ? "Your teacher has hidden the answers" : (s.answer_shown(i) ? "Hide the answer" : "Answer");
    const ImGuiStyle& style = ImGui::GetStyle();
    const float bw1 = ImGui::CalcTextSize(hint_label).x + style.FramePadding.x * 2;
    const float bw2 = ImGui::CalcTextSize(answer_label).x + style.FramePadding.x * 2;
    if (!q.hint.empty())
      reveal_button("Hint", "Hide the hint", "Your teacher has hidden the hints", hints, s.hint_shown(i),
                    [&](bool on) { s.show_hint(i, on); });
    if (!q.answer.empty()) {
      if (!q.hint.empty() && bw1 + bw2 + 10.0f <= w) ImGui::SameLine(0, 10);
      reveal_button("Answer", "Hide the answer", "Your teacher has hidden the answers", answers, s.answer_shown(i),
                    [&](bool on) { s.show_answer(i, on); });
    }
    if (hints && s.hint_shown(i) && !q.hint.empty()) {
      ImGui::Dummy(ImVec2(0, 2));
      lesson_ui::card_label("HINT", colors::kTextDim);
      draw_inline_markdown(q.hint, w, colors::kText);
    }
    if (answers && s.answer_shown(i) && !q.answer.empty()) {
      ImGui::Dummy(ImVec2(0, 2));
      lesson_ui::card_label("ANSWER", colors::kTextDim);
      draw_inline_markdown(q.answer, w, colors::kText);
    }
  }
  ImGui::PopID();
  ImGui::PopID();
}

void draw_check(LessonSession& s, int i, const Snapshot& snap, const LessonPaneHost& host, float width) {
  const course::Check& c = s.lesson().checks.at(static_cast<std::size_t>(i));
  const LessonSession::CheckState st = s.check(i);
  ImGui::PushID("check");
  ImGui::PushID(i);
  {
    Card card(width, kCheckEdge);
    const float w = card.inner_width();
    draw_inline_markdown("**The engine checks:** " + c.claim, w, colors::kText);
    ImGui::Dummy(ImVec2(0, 2));
    if (!st.known) {
      const int spoiler = s.check_spoiler(i);
      if (!s.check_open(i) && spoiler < 0)
        small_wrapped(colors::kTextDim, "It can be checked once you have locked in the predictions above.");
      else if (spoiler >= 0)
        small_wrapped(colors::kTextDim, s.prediction(spoiler).locked
                                            ? "Its result appears once your prediction on this value is revealed."
                                            : "Its result appears once you have made the prediction on this value.");
      else
        run_controls(s, c.experiment, "Check it now", snap, host);
    } else if (st.missing) {
      small_wrapped(colors::kWarning, "The experiment did not report this value.");
    } else {
      const std::string value = lesson_ui::measured_text(c, st.measured.value, st.measured.lo, st.measured.hi);
      if (c.depends_on_device || st.measured.depends_on_device) {
        wrapped(colors::kText, "On this computer: " + value + ".");
        small_wrapped(colors::kTextDim,
                      "Speeds depend on the computer, so this one is reported, not judged: compare it with the "
                      "lesson's text.");
      } else {
        const float size = ImGui::GetFontSize();
        const ImVec2 p = ImGui::GetCursorScreenPos();
        if (st.holds) lesson_ui::check_mark(ImVec2(p.x, p.y + size * 0.15f), size * 0.85f, colors::kGood);
        ImGui::Indent(size * 1.3f);
        wrapped(st.holds ? colors::kGood : colors::kError,
                std::string(st.holds ? "It holds: " : "It does not hold here: ") + "the engine measured " + value +
                    " (the lesson expects " + c.expect.text + ").");
        ImGui::Unindent(size * 1.3f);
      }
    }
  }
  ImGui::PopID();
  ImGui::PopID();
}

}  // namespace

void begin_lesson_pane_window(const char* id, ImVec2 size, bool from_top) {
  // Applied inside this frame's Begin (ImGui::SetScrollY would wait for the next frame).
  if (from_top) ImGui::SetNextWindowScroll(ImVec2(0.0f, 0.0f));
  ImGui::BeginChild(id, size, false, ImGuiWindowFlags_AlwaysUseWindowPadding);
}

void draw_lesson_pane(LessonSession& s, const Snapshot& snap, CommandSink& sink, const LessonPaneHost& host) {
  s.poll(snap, host.engine_quiet ? host.engine_quiet() : false, sink);
  const Fonts& f = fonts();
  const course::Lesson& L = s.lesson();
  const float width = std::min(ImGui::GetContentRegionAvail().x, f.regular->FontSize * 44.0f);
  const float x0 = ImGui::GetCursorScreenPos().x;

  // Header: which lesson, how long, the way out.
  const int number = course_session::lesson_number(L.name);
  std::string head = number > 0 ? "LESSON " + std::to_string(number) : std::string("LESSON");
  if (L.minutes > 0) head += "  \xC2\xB7  " + lesson_ui::minutes_text(L.minutes);
  ImGui::PushFont(f.small);
  ImGui::AlignTextToFramePadding();
  ImGui::TextColored(v4(colors::kAccent), "%s", head.c_str());
  ImGui::PopFont();
  const char* leave = "\xC3\x97  Leave lesson";
  const float leave_w = ImGui::CalcTextSize(leave).x + ImGui::GetStyle().FramePadding.x * 2;
  ImGui::SameLine(0, 0);
  const ImVec2 at = ImGui::GetCursorScreenPos();
  ImGui::SetCursorScreenPos(ImVec2(std::max(at.x + 10.0f, x0 + width - leave_w), at.y));
  if (ImGui::Button(leave) && host.leave) host.leave();
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("Back to the normal layout (Ctrl+L brings the lesson back)");
  ImGui::Dummy(ImVec2(0, 2));
  draw_inline_markdown(L.title, width, colors::kText, f.large);
  if (!L.goal.empty()) {
    ImGui::Dummy(ImVec2(0, 2));
    draw_inline_markdown(L.goal, width, colors::kTextDim);
  }
  rule(width);

  // The lesson, part by part, up to the first prediction not locked in: what follows it (the text,
  // "Try this", the reveal, checks, questions, later predictions) could give its answer away.
  const std::size_t shown = s.visible_parts();
  for (std::size_t k = 0; k < shown; ++k) {
    const course::LessonPart& part = L.parts[k];
    switch (part.kind) {
      case course::LessonPart::Kind::Markdown: {
        ImGui::PushID(static_cast<int>(k));
        const std::string link = draw_markdown(s.part_doc(k), width);
        ImGui::PopID();
        if (!link.empty() && fs::path(link).extension() == ".tttlab" && link.find("://") == std::string::npos &&
            host.open_scene) {
          const fs::path scene = fs::path(link).is_absolute() ? fs::path(link) : L.file.parent_path() / link;
          if (host.open_scene(scene)) s.scene_opened(scene);
        }
        break;
      }
      case course::LessonPart::Kind::Prediction: draw_prediction(s, part.index, snap, host, width); break;
      case course::LessonPart::Kind::Question: draw_question(s, part.index, width); break;
      case course::LessonPart::Kind::Check: draw_check(s, part.index, snap, host, width); break;
      case course::LessonPart::Kind::Exercise: draw_exercise_card(s.exercises(), part.index, width); break;
    }
  }
  if (shown < L.parts.size()) {
    ImGui::Dummy(ImVec2(0, 2));
    small_wrapped(colors::kTextDim, "Lock in your prediction to read on.");
  }

  // The end of the lesson.
  rule(width);
  if (!s.finished()) {
    if (ImGui::Button("I have finished this lesson", ImVec2(width, ImGui::GetFrameHeight() * 1.3f)))
      s.set_finished(true);
    small_wrapped(colors::kTextFaint, "The course page marks it, and remembers it on this computer.");
  } else {
    const float size = ImGui::GetFontSize();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    lesson_ui::check_mark(ImVec2(p.x, p.y + ImGui::GetStyle().FramePadding.y + size * 0.1f), size * 0.85f,
                          colors::kGood);
    ImGui::SetCursorScreenPos(ImVec2(p.x + size * 1.3f, p.y));
    ImGui::AlignTextToFramePadding();
    ImGui::TextColored(v4(colors::kGood), "You have finished this lesson.");
    ImGui::SameLine(0, 12);
    if (ImGui::SmallButton("Not finished after all")) s.set_finished(false);
  }
  if (!host.next_lesson.empty() && host.start_lesson) {
    ImGui::Dummy(ImVec2(0, 4));
    const std::string label = "Next lesson: " + host.next_lesson_title + "  \xE2\x86\x92";
    if (ImGui::Button(label.c_str())) host.start_lesson(host.next_lesson);
  }
  if (const std::string e = s.progress_error(); !e.empty()) {
    ImGui::Dummy(ImVec2(0, 4));
    small_wrapped(colors::kWarning, e);
  }
  ImGui::Dummy(ImVec2(0, 24));
}

void draw_lesson_veil(const LessonSession& s) {
  const Fonts& f = fonts();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const ImVec2 q(p.x + avail.x, p.y + avail.y);
  dl->AddRectFilled(p, q, kCardBg, 8.0f);
  dl->AddRect(p, q, kCardEdge, 8.0f);

  const float text_w = std::min(avail.x - 60.0f, f.regular->FontSize * 28.0f);
  const char* main_text = "Make your prediction in the lesson first; the view opens when you have.";
  (void)s;
  const std::string sub = "\xE2\x86\x90  The question is in the lesson, on the left. The engine prepares the view "
                          "meanwhile.";
  const ImVec2 m = f.large->CalcTextSizeA(f.large->FontSize, FLT_MAX, text_w, main_text);
  const ImVec2 n = f.regular->CalcTextSizeA(f.regular->FontSize, FLT_MAX, text_w, sub.c_str());
  const float block_h = m.y + 14.0f + n.y;
  const float y = p.y + std::max(20.0f, (avail.y - block_h) * 0.42f);
  const float x = p.x + std::max(20.0f, (avail.x - text_w) * 0.5f);
  // A closed eye: the view is there, not shown yet.
  const ImVec2 eye(x + text_w * 0.5f, y - 34.0f);
  const float r = 18.0f;
  dl->PathArcTo(ImVec2(eye.x, eye.y - r * 0.9f), r * 1.35f, 0.75f, 2.39f, 20);
  dl->PathStroke(colors::kTextFaint, 0, 2.0f);
  for (int k = -2; k <= 2; ++k) {
    const float a = 1.5708f + static_cast<float>(k) * 0.36f;
    const ImVec2 b(eye.x + std::cos(a) * r * 1.35f, eye.y - r * 0.9f + std::sin(a) * r * 1.35f);
    dl->AddLine(b, ImVec2(b.x + std::cos(a) * 6.0f, b.y + std::sin(a) * 6.0f), colors::kTextFaint, 2.0f);
  }
  lesson_ui::add_text(dl, f.large, f.large->FontSize, ImVec2(x, y), colors::kText, main_text, nullptr, text_w);
  lesson_ui::add_text(dl, f.regular, f.regular->FontSize, ImVec2(x, y + m.y + 14.0f), colors::kTextDim, sub.c_str(),
                      sub.c_str() + sub.size(), text_w);
  ImGui::Dummy(avail);
}

}  // namespace tttlab::gui
