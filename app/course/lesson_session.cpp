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
  m_records.resize(m_preds.size());
  m_committed.assign(m_preds.size(), false);
  m_retrying.assign(m_preds.size(), false);
  m_hints.assign(m_lesson.questions.size(), false);
  m_answers.assign(m_lesson.questions.size(), false);
  m_preds_before_check.assign(m_lesson.checks.size(), 0);
  {
    int preds = 0;
    for (const course::LessonPart& part : m_lesson.parts) {
      if (part.kind == course::LessonPart::Kind::Prediction) ++preds;
      if (part.kind == course::LessonPart::Kind::Check)
        m_preds_before_check.at(static_cast<std::size_t>(part.index)) = preds;
    }
  }
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
    const auto valid = [&](int choice) {
      return p.is_slider() || (choice >= 0 && choice < static_cast<int>(p.choices.size()));
    };
    // A record whose choice no longer exists (the lesson was edited) is not restored.
    if (!valid(r.choice)) continue;
    m_records[i] = r;
    m_committed[i] = true;
    // The answer locked in now: the last retry, else the first answer.
    int choice = r.choice;
    double value = r.value;
    if (!r.retries.empty() && valid(r.retries.back().choice)) {
      choice = r.retries.back().choice;
      value = r.retries.back().value;
      m_retrying[i] = true;
    }
    s.choice = choice;
    if (p.is_slider() && std::isfinite(value)) s.value = value;
    s.locked = true;
    if (r.revealed) {
      s.revealed = true;
      s.measured = r.measured;
      s.right_choice = p.is_slider() ? -1 : p.right_choice(r.measured);
      s.right = judge(static_cast<int>(i), s.choice, s.value, r.measured);
    }
  }
}

bool LessonSession::judge(int i, int choice, double value, double measured) const {
  const course::Prediction& p = m_lesson.predictions.at(static_cast<std::size_t>(i));
  if (p.is_slider()) return std::abs(value - measured) <= p.tolerance;
  return choice >= 0 && choice == p.right_choice(measured);
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
  const auto u = static_cast<std::size_t>(i);
  PredictionState& s = m_preds.at(u);
  const course::Prediction& p = m_lesson.predictions.at(u);
  if (s.locked || (!p.is_slider() && s.choice < 0)) return false;
  s.locked = true;
  course::PredictionRecord& r = m_records[u];
  if (!m_committed[u]) {
    // The first answer: the record, final from now on.
    r = course::PredictionRecord{};
    r.choice = s.choice;
    r.value = s.value;
    r.committed_at = course::utc_now_iso8601();
    m_committed[u] = true;
    m_retrying[u] = false;
  } else {
    course::PredictionRetry t;
    t.choice = s.choice;
    t.value = s.value;
    t.at = course::utc_now_iso8601();
    r.retries.push_back(std::move(t));
    m_retrying[u] = true;
  }
  save_record(i);
  return true;
}

void LessonSession::forget(int i) {
  const auto u = static_cast<std::size_t>(i);
  PredictionState& s = m_preds.at(u);
  const course::Prediction& p = m_lesson.predictions.at(u);
  s = PredictionState{};
  s.value = p.is_slider() ? 0.5 * (p.slider_min + p.slider_max) : 0.0;
  m_retrying[u] = false;  // nothing is locked in now; the record is untouched
}

void LessonSession::save_record(int i) {
  if (!m_progress) return;
  const auto u = static_cast<std::size_t>(i);
  m_progress->edit(m_lesson.name).predictions[m_lesson.predictions.at(u).id] = m_records.at(u);
  m_progress->save();
}

std::size_t LessonSession::visible_parts() const {
  for (std::size_t k = 0; k < m_lesson.parts.size(); ++k) {
    const course::LessonPart& part = m_lesson.parts[k];
    if (part.kind == course::LessonPart::Kind::Prediction && !m_preds.at(static_cast<std::size_t>(part.index)).locked)
      return k + 1;
  }
  return m_lesson.parts.size();
}

void LessonSession::scene_opened(const fs::path& scene) {
  const auto same = [&scene](const fs::path& a) {
    if (a.empty()) return false;
    std::error_code ec;
    if (fs::equivalent(a, scene, ec)) return true;
    return fs::weakly_canonical(a, ec) == fs::weakly_canonical(scene, ec);
  };
  if (same(m_lesson.scene)) {
    m_view = std::string();
    return;
  }
  for (const course::ExtraExperiment& e : m_lesson.experiments)
    if (same(e.scene)) {
      m_view = e.id;
      return;
    }
  m_view.reset();
}

bool LessonSession::veiled() const {
  if (!m_view) return false;
  for (std::size_t i = 0; i < m_preds.size(); ++i)
    if (!m_preds[i].locked && m_lesson.predictions[i].experiment == *m_view) return true;
  return false;
}

bool LessonSession::offers_shipped_run(const std::string& experiment) const {
  // The pane asks every frame: the scene file is read once.
  if (const auto it = m_offers_shipped.find(experiment); it != m_offers_shipped.end()) return it->second;
  bool offers = false;
  try {
    offers = !course::scene_shipped_run(lab::read_state_file(m_lesson.scene_of(experiment))).empty();
  } catch (const std::exception&) {  // LessonError, StateError: begin_run says why
  }
  m_offers_shipped[experiment] = offers;
  return offers;
}

std::optional<fs::path> LessonSession::begin_run(const std::string& experiment, const Snapshot& snap,
                                                 bool shipped_run) {
  m_run_error.clear();
  m_last_experiment = experiment;
  try {
    const fs::path& scene = m_lesson.scene_of(experiment);
    const nlohmann::json state = lab::read_state_file(scene);
    const std::string panel = course::scene_panel(state);
    if (panel.empty() || course::measures_of(panel).empty())
      throw course::LessonError("this experiment's view has nothing the app can measure");
    Run r;
    m_view = experiment;  // the app opens this scene now
    r.experiment = experiment;
    r.panel = panel;
    r.scene = shipped_run ? course::with_shipped_run(state) : state;
    // The app opens the scene file as it is (its view waits for a run); the replay follows at once.
    r.post_first = shipped_run;
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
  if (m_run->post_first) {
    m_run->post_first = false;
    post_run_scene(sink);
    return;
  }
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
    post_run_scene(sink);
  }
}

void LessonSession::post_run_scene(CommandSink& sink) {
  m_run->posted = true;
  m_run->quiet_before = false;
  try {
    course::post_scene(m_run->scene, sink);
  } catch (const std::exception& e) {
    m_run.reset();
    m_run_error = std::string("The experiment could not start: ") + e.what();
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
    s.right_choice = p.is_slider() ? -1 : p.right_choice(s.measured);
    s.right = judge(static_cast<int>(i), s.choice, s.value, s.measured);
    // The first answer is judged by its first measurement and keeps that verdict; a retry gets its own.
    course::PredictionRecord& r = m_records[i];
    if (!r.revealed) {
      r.revealed = true;
      r.measured = s.measured;
      r.right = judge(static_cast<int>(i), r.choice, r.value, s.measured);
    }
    if (m_retrying[i] && !r.retries.empty()) r.retries.back().right = s.right;
    save_record(static_cast<int>(i));
  }
}

const course::Measures* LessonSession::measures(const std::string& experiment) const {
  const auto it = m_measures.find(experiment);
  return it == m_measures.end() ? nullptr : &it->second;
}

LessonSession::CheckState LessonSession::check(int i) const {
  const course::Check& c = m_lesson.checks.at(static_cast<std::size_t>(i));
  CheckState out;
  if (!check_open(i)) return out;
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

bool LessonSession::check_open(int i) const {
  const int before = m_preds_before_check.at(static_cast<std::size_t>(i));
  for (int k = 0; k < before; ++k)
    if (!m_preds.at(static_cast<std::size_t>(k)).locked) return false;
  return !check_would_spoil(i);
}

bool LessonSession::check_would_spoil(int i) const { return check_spoiler(i) >= 0; }

int LessonSession::check_spoiler(int i) const {
  const course::Check& c = m_lesson.checks.at(static_cast<std::size_t>(i));
  for (std::size_t k = 0; k < m_preds.size(); ++k)
    if (m_lesson.predictions[k].experiment == c.experiment && m_lesson.predictions[k].measure == c.measure &&
        !m_preds[k].revealed)
      return static_cast<int>(k);
  return -1;
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
