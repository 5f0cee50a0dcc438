// app/course/lesson_session.hpp — one lesson as the student works through it, beside its live
// view: "predict, then reveal" (choose, lock in, run the experiment, compare with the measurement),
// the hints and answers opened, the engine's checks, and "finished". Everything here is UI-free and
// unit-tested; the lesson pane (lesson_pane.hpp) draws it. UI thread only.
//
// Sealed predictions: nothing may give a prediction's answer away before the student has committed
// to one.
//  - Progressive disclosure: the lesson is read in order and stops after the first prediction that
//    is not locked in (visible_parts()); the text, "Try this" steps, the reveal, checks, questions
//    and later predictions after it appear once it is locked.
//  - The view is veiled (veiled()) while any prediction not locked in asks about the experiment the
//    view shows: the lesson's own scene at first, then the experiment last opened by a run or by a
//    link in the lesson's text to one of its scenes (view_opened, scene_opened).
//  - A check opens (check_open(), and check() reports a value) only when every prediction above it is
//    locked in and no prediction on the same value is still unrevealed (check_would_spoil), however
//    the value was measured.
//  - The first committed answer is final in the progress record; "Predict again" and a new lock-in
//    add a retry (progress.hpp). The card shows the first answer beside the current one.
//
// Running an experiment: begin_run() names the scene to open (the app opens it like File → Open, which
// posts the view's settings to the engine) and notes the view's generation in the snapshot of that
// frame. poll() is then called once per frame; it takes the measures (course::read_measures) when the
// view is complete AND either newer than that generation, or the engine was quiescent at the previous
// poll (a view asked for exactly what it already shows keeps its generation; its measures are right).
// Then apply_measures() reveals every locked prediction on that experiment and records it.
// A panel may show less than its measures need (the stepper computes up to its cursor only): when the
// engine has gone quiet and the measures are still incomplete, poll() posts the scene itself once
// (course::post_scene, what `tttlab lessons check` runs) and waits again.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "course/exercise.hpp"
#include "course/experiments.hpp"
#include "course/lesson.hpp"
#include "course/progress.hpp"
#include "lab/engine/command.hpp"
#include "course/markdown.hpp"

namespace tttlab::lab {
struct Snapshot;
}  // namespace tttlab::lab

namespace tttlab::course {

using lab::CommandSink;
using lab::Snapshot;

class LessonSession {
 public:
  struct PredictionState {
    int choice = -1;       // multiple choice: the student's pick (−1: none yet)
    double value = 0;      // slider: the student's value
    bool locked = false;   // committed: cannot change until "predict again"
    bool revealed = false;
    bool right = false;
    double measured = 0;
    std::optional<double> lo, hi;  // the measurement's spread, when this session measured it
    int right_choice = -1;         // the choice the measurement makes right (−1: none of them)
    std::string error;             // the experiment did not report what this prediction asks about
  };
  struct CheckState {
    bool known = false;  // measured in this session
    course::Measurement measured;
    bool holds = false;
    bool missing = false;  // the experiment did not report the measure
  };

  // `progress` may be null (nothing is recorded). The student's earlier answers are restored from it.
  LessonSession(course::Lesson lesson, course::ProgressStore* progress);

  const course::Lesson& lesson() const { return m_lesson; }
  // The Markdown parts, parsed (same order as lesson().parts; empty documents for the other kinds),
  // without the level-1 heading that opens the lesson (the pane's header shows the title).
  const MdDocument& part_doc(std::size_t part) const { return m_docs.at(part); }

  // ---- predictions
  const PredictionState& prediction(int i) const { return m_preds.at(static_cast<std::size_t>(i)); }
  void choose(int i, int choice);
  void set_value(int i, double value);
  // Commits the student's answer, records it and saves. The first commit is the prediction's record
  // (final); a later one, after forget(), is recorded as a retry. False when nothing is chosen or it is
  // locked.
  bool lock(int i);
  // "Predict again": unlocks the prediction so the student can answer again. The record keeps the
  // first answer; the next lock() adds a retry.
  void forget(int i);
  // What the progress record holds for prediction i: the first committed answer (committed() false:
  // none yet) and its retries. Kept here too when no progress file is kept.
  const course::PredictionRecord& record(int i) const { return m_records.at(static_cast<std::size_t>(i)); }
  bool committed(int i) const { return m_committed.at(static_cast<std::size_t>(i)); }

  // ---- what may be shown
  // The lesson's parts to draw, from the first: up to and including the first prediction that is not
  // locked in (all of them when every prediction is locked).
  std::size_t visible_parts() const;
  // The view now shows `experiment` ("" = the lesson's scene): called by begin_run, and by the app
  // when it opens the lesson's scene.
  void view_opened(const std::string& experiment) { m_view = experiment; }
  // The app opened this scene file (a link in the lesson's text): one of the lesson's experiments, or a
  // view no prediction asks about.
  void scene_opened(const std::filesystem::path& scene);
  // The experiment the view shows (nothing when it shows a scene that is not one of the lesson's).
  const std::optional<std::string>& view_experiment() const { return m_view; }
  // True while a prediction that is not locked in asks about the experiment the view shows: the live
  // view stays veiled.
  bool veiled() const;

  // ---- questions
  bool hint_shown(int i) const { return m_hints.at(static_cast<std::size_t>(i)); }
  bool answer_shown(int i) const { return m_answers.at(static_cast<std::size_t>(i)); }
  void show_hint(int i, bool on) { m_hints.at(static_cast<std::size_t>(i)) = on; }
  void show_answer(int i, bool on) { m_answers.at(static_cast<std::size_t>(i)) = on; }

  // ---- graded exercises (course/exercise.hpp)
  ExerciseBook& exercises() { return m_exercises; }
  const ExerciseBook& exercises() const { return m_exercises; }

  // ---- experiments
  // Starts measuring `experiment` ("" = the lesson's scene) from this frame's snapshot. Returns the
  // scene file the app must open now, or nothing (run_error() says why).
  // `shipped_run`: the experiment follows a training run and offers_shipped_run(): its shipped run is
  // replayed instead (course::with_shipped_run, posted at the next poll), and nothing trains.
  std::optional<std::filesystem::path> begin_run(const std::string& experiment, const Snapshot& snap,
                                                 bool shipped_run = false);
  // Whether `experiment`'s scene follows a training run that a shipped run can stand in for
  // (course::scene_shipped_run): the student may then use it instead of training.
  bool offers_shipped_run(const std::string& experiment) const;
  // The app could not open the scene: the run is abandoned (its own error popup explains why).
  void cancel_run();
  // Once per frame, before anything can begin a run in that frame. `engine_quiet`: Engine::quiescent()
  // now; `sink`: where the scene is posted if the view alone does not complete the measures.
  void poll(const Snapshot& snap, bool engine_quiet, CommandSink& sink);
  bool running() const { return m_run.has_value(); }
  const std::string& running_experiment() const;
  const std::string& run_error() const { return m_run_error; }
  // The experiment of the last begin_run (where run_error() belongs).
  const std::string& last_run_experiment() const { return m_last_experiment; }
  // Reveals the locked predictions of `experiment` with these measures and records them.
  void apply_measures(const std::string& experiment, const course::Measures& measures);
  const course::Measures* measures(const std::string& experiment) const;

  // ---- checks
  // The check's measurement; nothing (known false) while the check is not open, even when its
  // experiment has been measured.
  CheckState check(int i) const;
  // True when every prediction above the check is locked in and none on the same value waits for its
  // reveal: "Check it now" and the result may be shown.
  bool check_open(int i) const;
  // True while a prediction on the same value is not revealed yet: the check's result would give its
  // answer away, so it waits.
  bool check_would_spoil(int i) const;
  // The prediction that makes check_would_spoil true (−1: none).
  int check_spoiler(int i) const;

  // ---- the lesson as a whole
  bool finished() const;
  void set_finished(bool finished);
  // The progress file's problem, if any ("" when none or no progress is kept).
  std::string progress_error() const { return m_progress ? m_progress->error() : std::string(); }

 private:
  // Posts the running experiment's scene (once); a scene the engine refuses ends the run with its reason.
  void post_run_scene(CommandSink& sink);

  struct Run {
    std::string experiment, panel;
    nlohmann::json scene;
    std::uint64_t baseline = 0;
    bool quiet_before = false;
    bool posted = false;  // the scene itself was posted (once)
    bool post_first = false;  // post it at the next poll (the shipped run: the file alone would train)
  };
  void save_record(int i);
  // Right or not, for an answer to prediction i measured as `measured`.
  bool judge(int i, int choice, double value, double measured) const;

  course::Lesson m_lesson;
  course::ProgressStore* m_progress;
  mutable std::map<std::string, bool> m_offers_shipped;  // offers_shipped_run, read once per experiment
  std::vector<MdDocument> m_docs;
  std::vector<PredictionState> m_preds;
  std::vector<course::PredictionRecord> m_records;
  std::vector<bool> m_committed;  // a first answer is on record
  std::vector<bool> m_retrying;   // the answer locked in now is a retry (the last of the record's retries)
  std::vector<int> m_preds_before_check;  // how many predictions come before each check in the text
  std::optional<std::string> m_view = std::string();
  std::vector<bool> m_hints, m_answers;
  ExerciseBook m_exercises;
  std::map<std::string, course::Measures> m_measures;
  std::optional<Run> m_run;
  std::string m_run_error, m_last_experiment;
};

}  // namespace tttlab::course
