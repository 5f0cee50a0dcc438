// app/course/progress.hpp — what a student has done in the course, kept between sessions.
//
// One small JSON file, by default $XDG_CONFIG_HOME/tttlab/course-progress.json (~/.config/… when
// XDG_CONFIG_HOME is unset; $TTTLAB_PROGRESS overrides the whole path):
//
//   { "format": "tttlab-course-progress", "version": 1, "student": "Ada L. (2b)",
//     "lessons": { "01-one-step-per-token": {
//       "finished": true,
//       "predictions": { "gap": { "choice": 0, "value": 0.0, "revealed": true, "right": false,
//                                 "measured": 0.12, "committed_at": "2026-03-02T14:05:09Z",
//                                 "retries": [ { "choice": 1, "value": 0.0, "right": true,
//                                                "at": "2026-03-02T14:07:41Z" } ] } },
//       "exercises": { "state-size": { "answer": "8352", "right": true, "attempts": 1,
//                                      "first_right": true, "at": "2026-11-28T23:41:16Z" } } } } }
//
// A prediction's record is the student's FIRST committed answer, and it is final: once committed
// (`committed_at`, ISO-8601 UTC), its choice and value never change; only revealed / right / measured
// are filled in when the engine measures it. "Predict again" followed by a new lock-in appends an
// entry to `retries` (its `right` is filled in when that answer is measured), so a teacher sees both
// the first answer and every later one. Files written before `committed_at` and `retries` existed
// still read: their records count as committed, with no time and no retries.
//
// "exercises" holds the graded exercises (course/exercise.hpp): the last answer the student typed that
// could be read, whether it is right, how many such attempts, whether the first one was right, and
// when the last was made. Files written before exercises existed have no "exercises" and still read.
//
// Written atomically after every change. A missing file is an empty progress; an unreadable or
// malformed one is reported (ProgressStore::error) and left untouched on disk until the student's next
// change replaces it, so nothing is lost silently.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tttlab::course {

// A later answer after "Predict again".
struct PredictionRetry {
  int choice = -1;
  double value = 0;
  bool right = false;  // once measured
  std::string at;      // when it was locked in (ISO-8601 UTC)
};

struct PredictionRecord {
  int choice = -1;     // multiple choice: the index picked
  double value = 0;    // slider: the value set
  bool revealed = false;
  bool right = false;  // once revealed
  double measured = 0;
  std::string committed_at;  // when the first answer was locked in ("" in files older than the field)
  std::vector<PredictionRetry> retries;
};

// Now, as ISO-8601 UTC ("2026-03-02T14:05:09Z"): the times in the record.
std::string utc_now_iso8601();

struct ExerciseRecord {
  std::string answer;        // the text the student typed, last attempt
  bool right = false;
  int attempts = 0;
  bool first_right = false;  // right at the first attempt
  std::string at;            // ISO 8601 UTC of the last attempt
};

struct LessonProgress {
  bool finished = false;
  std::map<std::string, PredictionRecord> predictions;  // by prediction id
  std::map<std::string, ExerciseRecord> exercises;      // by exercise id
};

class ProgressStore {
 public:
  // The default location (see above).
  static std::filesystem::path default_path();

  explicit ProgressStore(std::filesystem::path path);  // reads it (errors: see error())

  const std::filesystem::path& path() const { return m_path; }
  const std::string& error() const { return m_error; }  // last read or write failure, "" if none

  const LessonProgress* lesson(const std::string& name) const;
  LessonProgress& edit(const std::string& name);  // creates the entry
  // Writes the file atomically; on failure keeps the data in memory and sets error().
  bool save();
  int finished_count() const;
  // The name or ID the student gave once, for the progress a teacher collects ("" until then).
  const std::string& student() const { return m_student; }
  void set_student(std::string name) { m_student = std::move(name); }

 private:
  std::filesystem::path m_path;
  std::map<std::string, LessonProgress> m_lessons;
  std::string m_student;
  std::string m_error;
};

}  // namespace tttlab::course
