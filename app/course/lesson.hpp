// app/course/lesson.hpp — a lesson of the course: its text, the view it opens (its scene), the
// predictions it asks for, the questions with hints and answers, and the claims the engine checks.
//
// A lesson is ONE Markdown file in lessons/ (lessons/README.md is the teachers' guide to the format):
//
//   ---                                   front matter, required, first line of the file
//   title: One gradient step per token
//   goal: See that reading a token is one gradient step on the hidden state.
//   duration: 25                          minutes, for the course page
//   scene: 01-one-step-per-token.tttlab   the view it opens (a .tttlab state next to the lesson)
//   ---
//   # 1. One gradient step per token      ordinary Markdown from here on …
//
//   ```predict                            … with five kinds of fenced blocks the app turns into widgets
//   ask: After 30 tokens, is the loss before the step above or below the loss at W₀?
//   measure: gain_from_context            a measure of the lesson's experiment (experiments.hpp)
//   choice: Below: the state has learned from the context. | > 0.01
//   choice: About the same.                                | -0.01 .. 0.01
//   choice: Above: learning made it worse.                 | < -0.01
//   ```
//   ```check                              a claim the engine verifies (`tttlab lessons check`)
//   claim: After the first 30 tokens, ℓ(W_{t−1}; x_t) stays below ℓ(W_0; x_t) on average.
//   measure: gain_from_context
//   expect: > 0
//   ```
//   ```question
//   ask: …            hint: …            answer: …
//   ```
//   ```experiment                         an extra experiment: another scene, a named set of measures
//   id: reduction
//   scene: 07-theorem-1.tttlab
//   ```
//   ```exercise                           an answer the student types, checked by the app (exercise.hpp)
//   id: state-size          ask: …        answer: 8*d^2 + 5*d       vars: d = 32
//   tolerance: 0.5 %        unit: …       explain: …   (shown once the student has answered)
//   ```
//
// Inside a block, a line "key: value" starts a field (keys are the ones listed per block); any other
// line continues the field above, so long text may wrap. A block's `experiment:` field (predict, check)
// names the experiment whose measure it reads; without it, the lesson's own scene.
//
// Parsing is strict: an unknown block kind or key, a missing field, a bad range, a measure the
// experiment does not have, or an exercise whose tolerance or key does not read (or whose key is not
// finite at its points) is a LessonError that names the file and the line.
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tttlab::course {

class LessonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A condition on a measured value, as written after "expect:" or after "|" in a choice:
//   "> x", ">= x", "< x", "<= x", "a .. b" (inclusive), "x ± tol" (also "x +- tol").
struct Expectation {
  enum class Kind { Greater, GreaterEqual, Less, LessEqual, Between } kind = Kind::Greater;
  double a = 0, b = 0;  // the bound(s); Between: [a, b]
  std::string text;     // as written, for reports

  bool holds(double value) const;
  static Expectation parse(std::string_view text);  // throws LessonError (message without location)
};

struct Choice {
  std::string text;
  Expectation when;  // the choice is right when the measured value satisfies this
};

// "Predict, then reveal": the student commits to an answer, the engine runs the experiment, and the
// lesson compares. Either multiple choice (choices non-empty) or a value on a slider.
struct Prediction {
  std::string id;           // unique in the lesson (default: predict-N)
  std::string ask;
  std::string experiment;   // "" = the lesson's scene
  std::string measure;
  std::vector<Choice> choices;
  // Slider: range and how close counts as right (absolute).
  double slider_min = 0, slider_max = 1, tolerance = 0;
  std::string unit;         // shown after the slider's value
  std::string reveal;       // optional text shown with the result
  int line = 0;             // where it starts in the file

  bool is_slider() const { return choices.empty(); }
  // Choices written in percent (a choice's text has "%"): the measure is a fraction, its conditions
  // are written as fractions (0.4 for 40 %), and the app shows the measured value as a percentage so
  // that it reads like the choices (the parser rejects a bound outside [−1, 1] on such a prediction).
  bool in_percent() const;
  // Index of the first choice that holds for `measured` (−1: none).
  int right_choice(double measured) const;
};

struct Question {
  std::string ask, hint, answer;
  int line = 0;
};

// A graded exercise: the student types a number, or an expression in the variables of `vars`, and the
// app marks it (course/exercise.hpp does the checking).
struct Exercise {
  std::string id;       // unique in the lesson (default: exercise-N)
  std::string ask;
  std::string answer;   // the key as written: a number, or an expression in the variables
  // How close counts as right: absolute, or relative to the key's value (`relative`, a fraction).
  double tolerance = 0.01;
  bool relative = true;
  std::string unit;     // optional ("%", "bits/byte", …): shown after the input; "%" may be typed
  // Expression answers: the points where the student's expression and the key are compared (each a
  // value for every variable, in the order of `var_names`). Empty: the answer is a number.
  std::vector<std::string> var_names;
  std::vector<std::vector<double>> points;
  std::string explain;  // shown after the student has answered (or given up)
  int line = 0;

  bool is_expression() const { return !var_names.empty(); }
};

struct Check {
  std::string claim;        // in the lesson's words
  std::string experiment;   // "" = the lesson's scene
  std::string measure;
  Expectation expect;
  // A machine-dependent claim (a speed): reported with its measured value and spread, never failed
  // on the number alone (the lesson's text must then show both outcomes).
  bool depends_on_device = false;
  int line = 0;
};

// A scene other than the lesson's own (to check several views from one lesson).
struct ExtraExperiment {
  std::string id;
  std::filesystem::path scene;  // resolved next to the lesson
  int line = 0;
  // Where the block stood in the text, for a handout's figure: before parts[part], and `offset` bytes
  // into it when that part is Markdown (the text either side of the block stays one Markdown part).
  std::size_t part = 0, offset = 0;
};

// The lesson's Markdown with the blocks above cut out, in reading order: prose, then a widget, ….
struct LessonPart {
  enum class Kind { Markdown, Prediction, Question, Check, Exercise } kind = Kind::Markdown;
  std::string markdown;  // Kind::Markdown
  int index = 0;         // into predictions / questions / checks / exercises
};

struct Lesson {
  std::filesystem::path file;
  std::string name;       // file stem: "01-one-step-per-token" (what `lessons check NAME` takes)
  std::string title, goal;
  int minutes = 0;
  std::filesystem::path scene;  // resolved next to the lesson
  std::vector<LessonPart> parts;
  std::vector<Prediction> predictions;
  std::vector<Question> questions;
  std::vector<Check> checks;
  std::vector<Exercise> exercises;
  std::vector<ExtraExperiment> experiments;

  // The scene of an experiment id ("" = the lesson's own). Throws LessonError if unknown.
  const std::filesystem::path& scene_of(const std::string& experiment) const;
};

// Whether a line of a lesson's Markdown opens one of its reveal sections ("## The reveal", also
// "## The reveal: …"). Such a section runs to the next level-1 or level-2 heading; it states the
// answers, so student packs seal it and students' handouts leave it out.
inline bool is_reveal_heading(std::string_view line) { return line.starts_with("## The reveal"); }

// `s` without the spaces, tabs and line ends around it: how the lesson format reads a field's value.
std::string trim(std::string_view s);

// Parses one lesson. `text` is the file's content; `file` names it in errors and anchors the scene
// paths. Throws LessonError("lessons/03-x.md:14: …").
Lesson parse_lesson(std::string_view text, const std::filesystem::path& file);
// Reads (at most 1 MiB) and parses. Throws LessonError.
Lesson read_lesson(const std::filesystem::path& file);

// The course: every NN-*.md of a folder (README.md and COURSE.md excluded), in file-name order.
struct Course {
  std::filesystem::path dir;
  std::vector<Lesson> lessons;
  // Lessons that failed to parse: file and message (the app lists them; `lessons check` fails them).
  std::vector<std::pair<std::filesystem::path, std::string>> errors;

  const Lesson* find(std::string_view name) const;  // by name, or by its number prefix ("03")
  // The parse error of the lesson file that `name` names the same way (nullptr when none failed):
  // asking for a malformed lesson says what is wrong with it and where, not that there is none.
  const std::string* find_error(std::string_view name) const;
};
Course load_course(const std::filesystem::path& dir);

}  // namespace tttlab::course
