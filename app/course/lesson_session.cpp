#include "course/lesson_session.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"

namespace tttlab::course {

namespace fs = std::filesystem;

LessonSession::LessonSession(course::Lesson lesson, course::ProgressStore* progress)
    : m_lesson(std::move(lesson)), m_progress(progress) {
  m_docs.resize(m_lesson.parts.size());
  for (std::size_t i = 0; i < m_lesson.parts.size(); ++i) {
    if (m_lesson.parts[i].kind != course::LessonPart::Kind::Markdown) continue;
    try {
      m_docs[i] = parse_markdown(m_lesson.parts[i].markdown);
    } catch (const std::exception& e) {
      MdBlock b;
      b.runs.push_back(MdRun{std::string("This part of the lesson could not be shown: ") + e.what(), false, false, false, {}});
      m_docs[i].blocks.push_back(std::move(b));
    }
  }
  // The pane's header shows the title: a level-1 heading opening the lesson's text would repeat it.
  for (std::size_t i = 0; i < m_lesson.parts.size(); ++i) {
    if (m_lesson.parts[i].kind != course::LessonPart::Kind::Markdown) break;
    if (m_docs[i].blocks.empty()) continue;
    if (m_docs[i].blocks.front().kind == MdBlockKind::Heading && m_docs[i].blocks.front().level == 1)
      m_docs[i].blocks.erase(m_docs[i].blocks.begin());
    break;
  }
  m_preds.resize(m_lesson.predictions.size());
  m_hints.assign(m_lesson.questions.size(), false);
  m_answers.assign(m_lesson.questions.size(), false);
  m_exercises = ExerciseBook(m_lesson.exercises, m_lesson.name, m_progress);
  const course::LessonProgress* lp = m_progress ? m_progress->lesson(m_lesson.name) : nullptr;
  for (std::size_t i = 0; i < m_preds.size(); ++i) {
    const course::Prediction& p = m_lesson.predictions[i];
    PredictionState& s = m_preds[i];
    s.value = p.is_slider() ? 0.5 * (p.slider_min + p.slider_max) : 0.0;
    if (!lp) continue;
    const auto it = lp->predictions.find(p.id);
    if (it == lp->predictions.end()) continue;
    const course::PredictionRecord& r = it->second;
    // A record whose choice no longer exists (the lesson was edited) is not restored.
    if (!p.is_slider() && (r.choice < 0 || r.choice >= static_cast<int>(p.choices.size()))) continue;
    s.choice = r.choice;
    if (p.is_slider() && std::isfinite(r.value)) s.value = r.value;
    s.locked = true;
    if (r.revealed) {
      s.revealed = true;
      s.measured = r.measured;
      s.right_choice = p.is_slider() ? -1 : p.right_choice(r.measured);
      s.right = p.is_slider() ? std::abs(s.value - r.measured) <= p.tolerance : s.choice == s.right_choice;
    }
  }
}

void LessonSession::choose(int i, int choice) {
  PredictionState& s = m_preds.at(static_cast<std::size_t>(i));
  if (!s.locked) s.choice = choice;
}

void LessonSession::set_value(int i, double value) {
  PredictionState& s = m_preds.at(static_cast<std::size_t>(i));
  if (!s.locked) s.value = value;
}

bool LessonSession::lock(int i) {
  PredictionState& s = m_preds.at(static_cast<std::size_t>(i));
  const course::Prediction& p = m_lesson.predictions.at(static_cast<std::size_t>(i));
  if (s.locked || (!p.is_slider() && s.choice < 0)) return false;
  s.locked = true;
  record(i);
  return true;
}

void LessonSession::forget(int i) {
  PredictionState& s = m_preds.at(static_cast<std::size_t>(i));
  const course::Prediction& p = m_lesson.predictions.at(static_cast<std::size_t>(i));
  s = PredictionState{};
  s.value = p.is_slider() ? 0.5 * (p.slider_min + p.slider_max) : 0.0;
  if (m_progress) {
    m_progress->edit(m_lesson.name).predictions.erase(p.id);
    m_progress->save();
  }
}

void LessonSession::record(int i) {
  if (!m_progress) return;
  const PredictionState& s = m_preds.at(static_cast<std::size_t>(i));
  course::PredictionRecord r;
  r.choice = s.choice;
  r.value = s.value;
  r.revealed = s.revealed;
  r.right = s.right;
  r.measured = s.measured;
  m_progress->edit(m_lesson.name).predictions[m_lesson.predictions.at(static_cast<std::size_t>(i)).id] = r;
  m_progress->save();
}

std::optional<fs::path> LessonSession::begin_run(const std::string& experiment, const Snapshot& snap) {
  m_run_error.clear();
  m_last_experiment = experiment;
  try {
    const fs::path& scene = m_lesson.scene_of(experiment);
    const nlohmann::json state = lab::read_state_file(scene);
    const std::string panel = course::scene_panel(state);
    if (panel.empty() || course::measures_of(panel).empty())
      throw course::LessonError("this experiment's view has nothing the app can measure");
    Run r;
    r.experiment = experiment;
    r.panel = panel;
    r.scene = state;
    r.baseline = course::view_generation(panel, snap);
    m_run = r;
    return scene;
  } catch (const std::exception& e) {  // LessonError, StateError
    m_run.reset();
    m_run_error = std::string("The experiment could not start: ") + e.what();
    return std::nullopt;
  }
}

void LessonSession::cancel_run() { m_run.reset(); }

const std::string& LessonSession::running_experiment() const {
  static const std::string none;
  return m_run ? m_run->experiment : none;
}

void LessonSession::poll(const Snapshot& snap, bool engine_quiet, CommandSink& sink) {
  if (!m_run) return;
  const bool fresh = course::view_generation(m_run->panel, snap) > m_run->baseline;
  // Quiescent at the previous poll, which came after the scene was posted: this frame's snapshot was
  // taken later, so it holds the engine's answer to that scene.
  const bool settled = m_run->quiet_before;
  m_run->quiet_before = engine_quiet;
  std::optional<course::Measures> m;
  try {
    m = course::read_measures(m_run->panel, snap);
  } catch (const std::exception& e) {
    // Only the engine's answer to this scene counts: an error in an older view (a view never set up
    // reads "waiting for settings") is not this experiment's.
    if (!fresh && !settled) return;
    m_run.reset();
    m_run_error = std::string("The experiment failed: ") + e.what();
    return;
  }
  if (m && (fresh || settled)) {
    const std::string experiment = m_run->experiment;
    m_run.reset();
    apply_measures(experiment, *m);
    return;
  }
  if (!m && settled && !m_run->posted) {
    // The view is all the panel asked for, but not all the measures need: ask for the scene itself.
    m_run->posted = true;
    m_run->quiet_before = false;
    try {
      course::post_scene(m_run->scene, sink);
    } catch (const std::exception& e) {
      m_run.reset();
      m_run_error = std::string("The experiment could not start: ") + e.what();
    }
  }
}

void LessonSession::apply_measures(const std::string& experiment, const course::Measures& measures) {
  m_measures[experiment] = measures;
  for (std::size_t i = 0; i < m_preds.size(); ++i) {
    const course::Prediction& p = m_lesson.predictions[i];
    PredictionState& s = m_preds[i];
    if (p.experiment != experiment || !s.locked) continue;
    const auto it = measures.find(p.measure);
    if (it == measures.end()) {
      s.error = "The experiment did not report the value this prediction is about.";
      continue;
    }
    s.error.clear();
    s.revealed = true;
    s.measured = it->second.value;
    s.lo = it->second.lo;
    s.hi = it->second.hi;
    if (p.is_slider()) {
      s.right_choice = -1;
      s.right = std::abs(s.value - s.measured) <= p.tolerance;
    } else {
      s.right_choice = p.right_choice(s.measured);
      s.right = s.choice >= 0 && s.choice == s.right_choice;
    }
    record(static_cast<int>(i));
  }
}

const course::Measures* LessonSession::measures(const std::string& experiment) const {
  const auto it = m_measures.find(experiment);
  return it == m_measures.end() ? nullptr : &it->second;
}

LessonSession::CheckState LessonSession::check(int i) const {
  const course::Check& c = m_lesson.checks.at(static_cast<std::size_t>(i));
  CheckState out;
  const course::Measures* m = measures(c.experiment);
  if (!m) return out;
  out.known = true;
  const auto it = m->find(c.measure);
  if (it == m->end()) {
    out.missing = true;
    return out;
  }
  out.measured = it->second;
  out.holds = c.expect.holds(it->second.value);
  return out;
}

bool LessonSession::check_would_spoil(int i) const {
  const course::Check& c = m_lesson.checks.at(static_cast<std::size_t>(i));
  for (std::size_t k = 0; k < m_preds.size(); ++k)
    if (m_lesson.predictions[k].experiment == c.experiment && m_lesson.predictions[k].measure == c.measure &&
        !m_preds[k].revealed)
      return true;
  return false;
}

bool LessonSession::finished() const {
  const course::LessonProgress* lp = m_progress ? m_progress->lesson(m_lesson.name) : nullptr;
  return lp && lp->finished;
}

void LessonSession::set_finished(bool finished) {
  if (!m_progress) return;
  m_progress->edit(m_lesson.name).finished = finished;
  m_progress->save();
}

}  // namespace tttlab::course
