#include "course/lesson_session.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"

namespace tttlab::course {

namespace fs = std::filesystem;

LessonSession::LessonSession(course::Lesson lesson, course::ProgressStore* progress)
    : lesson_(std::move(lesson)), progress_(progress) {
  docs_.resize(lesson_.parts.size());
  for (std::size_t i = 0; i < lesson_.parts.size(); ++i) {
    if (lesson_.parts[i].kind != course::LessonPart::Kind::Markdown) continue;
    try {
      docs_[i] = parse_markdown(lesson_.parts[i].markdown);
    } catch (const std::exception& e) {
      MdBlock b;
      b.runs.push_back(MdRun{std::string("This part of the lesson could not be shown: ") + e.what(), false, false, false, {}});
      docs_[i].blocks.push_back(std::move(b));
    }
  }
  // The pane's header shows the title: a level-1 heading opening the lesson's text would repeat it.
  for (std::size_t i = 0; i < lesson_.parts.size(); ++i) {
    if (lesson_.parts[i].kind != course::LessonPart::Kind::Markdown) break;
    if (docs_[i].blocks.empty()) continue;
    if (docs_[i].blocks.front().kind == MdBlockKind::Heading && docs_[i].blocks.front().level == 1)
      docs_[i].blocks.erase(docs_[i].blocks.begin());
    break;
  }
  preds_.resize(lesson_.predictions.size());
  hints_.assign(lesson_.questions.size(), false);
  answers_.assign(lesson_.questions.size(), false);
  const course::LessonProgress* lp = progress_ ? progress_->lesson(lesson_.name) : nullptr;
  for (std::size_t i = 0; i < preds_.size(); ++i) {
    const course::Prediction& p = lesson_.predictions[i];
    PredictionState& s = preds_[i];
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
  PredictionState& s = preds_.at(static_cast<std::size_t>(i));
  if (!s.locked) s.choice = choice;
}

void LessonSession::set_value(int i, double value) {
  PredictionState& s = preds_.at(static_cast<std::size_t>(i));
  if (!s.locked) s.value = value;
}

bool LessonSession::lock(int i) {
  PredictionState& s = preds_.at(static_cast<std::size_t>(i));
  const course::Prediction& p = lesson_.predictions.at(static_cast<std::size_t>(i));
  if (s.locked || (!p.is_slider() && s.choice < 0)) return false;
  s.locked = true;
  record(i);
  return true;
}

void LessonSession::forget(int i) {
  PredictionState& s = preds_.at(static_cast<std::size_t>(i));
  const course::Prediction& p = lesson_.predictions.at(static_cast<std::size_t>(i));
  s = PredictionState{};
  s.value = p.is_slider() ? 0.5 * (p.slider_min + p.slider_max) : 0.0;
  if (progress_) {
    progress_->edit(lesson_.name).predictions.erase(p.id);
    progress_->save();
  }
}

void LessonSession::record(int i) {
  if (!progress_) return;
  const PredictionState& s = preds_.at(static_cast<std::size_t>(i));
  course::PredictionRecord r;
  r.choice = s.choice;
  r.value = s.value;
  r.revealed = s.revealed;
  r.right = s.right;
  r.measured = s.measured;
  progress_->edit(lesson_.name).predictions[lesson_.predictions.at(static_cast<std::size_t>(i)).id] = r;
  progress_->save();
}

std::optional<fs::path> LessonSession::begin_run(const std::string& experiment, const Snapshot& snap) {
  run_error_.clear();
  last_experiment_ = experiment;
  try {
    const fs::path& scene = lesson_.scene_of(experiment);
    const nlohmann::json state = lab::read_state_file(scene);
    const std::string panel = course::scene_panel(state);
    if (panel.empty() || course::measures_of(panel).empty())
      throw course::LessonError("this experiment's view has nothing the app can measure");
    Run r;
    r.experiment = experiment;
    r.panel = panel;
    r.scene = state;
    r.baseline = course::view_generation(panel, snap);
    run_ = r;
    return scene;
  } catch (const std::exception& e) {  // LessonError, StateError
    run_.reset();
    run_error_ = std::string("The experiment could not start: ") + e.what();
    return std::nullopt;
  }
}

void LessonSession::cancel_run() { run_.reset(); }

const std::string& LessonSession::running_experiment() const {
  static const std::string none;
  return run_ ? run_->experiment : none;
}

void LessonSession::poll(const Snapshot& snap, bool engine_quiet, CommandSink& sink) {
  if (!run_) return;
  const bool fresh = course::view_generation(run_->panel, snap) > run_->baseline;
  // Quiescent at the previous poll, which came after the scene was posted: this frame's snapshot was
  // taken later, so it holds the engine's answer to that scene.
  const bool settled = run_->quiet_before;
  run_->quiet_before = engine_quiet;
  std::optional<course::Measures> m;
  try {
    m = course::read_measures(run_->panel, snap);
  } catch (const std::exception& e) {
    // Only the engine's answer to this scene counts: an error in an older view (a view never set up
    // reads "waiting for settings") is not this experiment's.
    if (!fresh && !settled) return;
    run_.reset();
    run_error_ = std::string("The experiment failed: ") + e.what();
    return;
  }
  if (m && (fresh || settled)) {
    const std::string experiment = run_->experiment;
    run_.reset();
    apply_measures(experiment, *m);
    return;
  }
  if (!m && settled && !run_->posted) {
    // The view is all the panel asked for, but not all the measures need: ask for the scene itself.
    run_->posted = true;
    run_->quiet_before = false;
    try {
      course::post_scene(run_->scene, sink);
    } catch (const std::exception& e) {
      run_.reset();
      run_error_ = std::string("The experiment could not start: ") + e.what();
    }
  }
}

void LessonSession::apply_measures(const std::string& experiment, const course::Measures& measures) {
  measures_[experiment] = measures;
  for (std::size_t i = 0; i < preds_.size(); ++i) {
    const course::Prediction& p = lesson_.predictions[i];
    PredictionState& s = preds_[i];
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
  const auto it = measures_.find(experiment);
  return it == measures_.end() ? nullptr : &it->second;
}

LessonSession::CheckState LessonSession::check(int i) const {
  const course::Check& c = lesson_.checks.at(static_cast<std::size_t>(i));
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
  const course::Check& c = lesson_.checks.at(static_cast<std::size_t>(i));
  for (std::size_t k = 0; k < preds_.size(); ++k)
    if (lesson_.predictions[k].experiment == c.experiment && lesson_.predictions[k].measure == c.measure &&
        !preds_[k].revealed)
      return true;
  return false;
}

bool LessonSession::finished() const {
  const course::LessonProgress* lp = progress_ ? progress_->lesson(lesson_.name) : nullptr;
  return lp && lp->finished;
}

void LessonSession::set_finished(bool finished) {
  if (!progress_) return;
  progress_->edit(lesson_.name).finished = finished;
  progress_->save();
}

}  // namespace tttlab::course
