// app/course/exercise.hpp — graded exercises: reading the ```exercise block's key, marking what a
// student types, and the student's attempts as the lesson pane shows and the progress file keeps them.
//
// A numeric answer is a number the student types: "1056", "1,056", "1.05e3", "8.3 %" (when the unit is
// %); a short calculation ("8*32^2 + 5*32") is read too. It is right within the exercise's tolerance
// of the key. An expression answer is typed in the exercise's variables ("4*d^2 + 5*d"): it is right
// when it equals the key, within the tolerance, at every comparison point, so that a formula that
// happens to give the right number at one point does not pass. Expressions are read by muParser:
// + − * / ^, parentheses, sqrt, exp, log and ln (both the natural logarithm), log2, log10, abs, and
// the constants _pi and _e. Input the app cannot read is not an attempt: it gets a message saying why.
//
// Everything here is UI-free and unit-tested; the lesson pane draws it (gui/lessons/exercise_card.*).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "course/lesson.hpp"

namespace tttlab::course {

class ProgressStore;

// ---- reading the block (the lesson parser calls these; errors are LessonError without a location)

// "0.01" (absolute) or "2 %" (relative to the key). Throws LessonError.
void parse_tolerance(std::string_view text, Exercise& e);
// "d = 32, T = 2048" (one point) or "d = 32; d = 8; d = 100" (several, separated by ";"). Every point
// gives every variable, in the same order. Throws LessonError.
void parse_vars(std::string_view text, Exercise& e);
// The key must read and be finite at every point (a number key: once). With a single point given, two
// more points are derived from it (every variable scaled and shifted) where the key is finite, so an
// expression is always compared at two or three points. Throws LessonError.
void prepare_key(Exercise& e);

// The key's value (a number answer) or its value at comparison point `point` (an expression answer).
double key_value(const Exercise& e, std::size_t point = 0);
// The key for students: the number with its unit, or the expression as written.
std::string key_text(const Exercise& e);

// What `tttlab lessons check` reports about an exercise's key: "" when it is sound, else why not (the
// key does not read or is not finite, is not marked right when typed as an answer, a relative
// tolerance on a zero key, a tolerance so wide that 0 passes, a key not read when typed with its
// unit, an expression that is the same number at every point).
std::string audit_exercise(const Exercise& e);

// ---- marking a student's answer

struct Mark {
  enum class Kind { Right, Wrong, Unreadable } kind = Kind::Unreadable;
  std::string message;  // Unreadable: what to fix, in words for students
};

// Reads a typed number: digits with an optional sign, decimal point, exponent, thousands commas
// ("1,056"), a decimal comma ("0,5"), spaces, and the exercise's unit at the end ("8.3 %"); failing
// that, a calculation without variables ("2^10"). nullopt and `why` when it cannot be read.
std::optional<double> read_student_number(std::string_view text, const std::string& unit, std::string* why);
Mark mark_answer(const Exercise& e, std::string_view typed);

// ---- the student's work on a lesson's exercises

struct ExerciseState {
  std::string input;        // the input box
  std::string answer;       // the last answer that was read (and recorded)
  int attempts = 0;         // readable answers checked
  bool right = false;
  bool first_right = false; // right at the first attempt
  bool shown = false;       // the student asked to see the answer
  std::string message;      // why the last input could not be read ("" when it could)
};

class ExerciseBook {
 public:
  // After this many wrong attempts the explanation is shown (when the teacher allows answers).
  static constexpr int kAttemptsBeforeExplain = 3;

  ExerciseBook() = default;
  // `progress` may be null (nothing is recorded). Earlier attempts are restored from it.
  ExerciseBook(std::vector<Exercise> exercises, std::string lesson_name, ProgressStore* progress);

  std::size_t size() const { return m_exercises.size(); }
  const Exercise& exercise(int i) const { return m_exercises.at(static_cast<std::size_t>(i)); }
  const ExerciseState& state(int i) const { return m_states.at(static_cast<std::size_t>(i)); }
  std::string& input(int i) { return m_states.at(static_cast<std::size_t>(i)).input; }

  // Whether "Check my answer" may be pressed: not once right, nor after the answer was shown.
  bool can_check(int i) const;
  // Marks the input box. A readable answer is an attempt: counted, recorded and saved. An unreadable
  // one only sets the state's message.
  Mark check(int i);
  // "Show the answer": the explanation opens and checking stops (the record keeps the attempts).
  void show_answer(int i);
  // Whether the explanation (and the key) is shown: once right, or, where answers are allowed, after
  // kAttemptsBeforeExplain attempts or "Show the answer".
  bool explained(int i, bool answers_allowed) const;

 private:
  void record(int i);

  std::vector<Exercise> m_exercises;
  std::string m_lesson;
  ProgressStore* m_progress = nullptr;
  std::vector<ExerciseState> m_states;
};

}  // namespace tttlab::course
