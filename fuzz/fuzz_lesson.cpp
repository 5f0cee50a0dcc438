// fuzz_lesson: any text read as a lesson (app/course/lesson.hpp: front matter, Markdown, the
// predict / check / question / experiment blocks), then each Markdown part through the document model
// the Lessons panel draws (app/course/markdown.hpp, md4c).
//
// Contract checked: parse_lesson either throws LessonError ("file:line: ...") or returns a lesson whose
// parts point at existing predictions, questions and checks, with at least one prediction and one
// check, whose conditions can be evaluated; parse_markdown takes any of its Markdown parts.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "course/exercise.hpp"
#include "course/lesson.hpp"
#include "fuzz_check.hpp"
#include "course/markdown.hpp"

namespace {

using namespace tttlab::course;

// Every condition must give an answer for any measured value, NaN and infinities included.
void evaluate(const Expectation& e) {
  for (const double x : {0.0, -1.0, 1.0, e.a, e.b, std::numeric_limits<double>::infinity(),
                         std::numeric_limits<double>::quiet_NaN()})
    (void)e.holds(x);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = tttlab::fuzz::as_text(data, size);
  Lesson lesson;
  try {
    lesson = parse_lesson(text, "lessons/99-fuzz.md");
  } catch (const LessonError&) {
    return 0;
  }
  FUZZ_CHECK(!lesson.predictions.empty() && !lesson.checks.empty());
  FUZZ_CHECK(lesson.minutes >= 1 && lesson.minutes <= 600);
  for (const LessonPart& part : lesson.parts) {
    switch (part.kind) {
      case LessonPart::Kind::Markdown:
        try {
          (void)tttlab::course::parse_markdown(part.markdown);
        } catch (const std::runtime_error&) {  // md4c refused the text (or is not built in)
        }
        break;
      case LessonPart::Kind::Prediction:
        FUZZ_CHECK(part.index >= 0 && static_cast<std::size_t>(part.index) < lesson.predictions.size());
        break;
      case LessonPart::Kind::Question:
        FUZZ_CHECK(part.index >= 0 && static_cast<std::size_t>(part.index) < lesson.questions.size());
        break;
      case LessonPart::Kind::Check:
        FUZZ_CHECK(part.index >= 0 && static_cast<std::size_t>(part.index) < lesson.checks.size());
        break;
      case LessonPart::Kind::Exercise: {
        FUZZ_CHECK(part.index >= 0 && static_cast<std::size_t>(part.index) < lesson.exercises.size());
        // Any typed text gets a mark, never a crash: the key itself and a slice of the input.
        const auto& x = lesson.exercises[static_cast<std::size_t>(part.index)];
        (void)tttlab::course::mark_answer(x, x.answer);
        (void)tttlab::course::mark_answer(x, std::string_view(text).substr(0, 64));
        break;
      }
    }
  }
  for (const Prediction& p : lesson.predictions) {
    for (const Choice& c : p.choices) evaluate(c.when);
    if (p.is_slider()) FUZZ_CHECK(p.slider_min < p.slider_max && p.tolerance > 0);
    (void)p.right_choice(0.5);
    (void)lesson.scene_of(p.experiment);  // every experiment a block names is defined
  }
  for (const Check& c : lesson.checks) {
    evaluate(c.expect);
    (void)lesson.scene_of(c.experiment);
  }
  return 0;
}
