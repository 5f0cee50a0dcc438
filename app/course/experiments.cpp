// app/course/experiments.cpp — measures read off the engine's views (see experiments.hpp).
#include "course/experiments.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <thread>

#include "course/lesson.hpp"
#include "lab/engine/engine.hpp"
#include "lab/features.hpp"
#include "lab/models/model_library.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"
#include "tttlab/io/limits.hpp"

namespace tttlab::course {
namespace fs = std::filesystem;

namespace {

// Whether the scene's active view is the inner-loss curves following a training run.
bool follows_training(const nlohmann::json& state) {
  try {
    return scene_panel(state) == lab::kInnerCurvesId &&
           state.at("panels").at(lab::kInnerCurvesId).value("model_id", std::string()) == lab::kFollowTrainingId;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace

const std::vector<std::string>& measurable_panels() {
  static const std::vector<std::string> panels = [] {
    std::vector<std::string> ids;
    for (const lab::Feature& f : lab::features())
      if (f.measures) ids.push_back(f.id);
    return ids;
  }();
  return panels;
}

const std::vector<MeasureInfo>& measures_of(std::string_view panel) {
  static const std::vector<MeasureInfo> none;
  const lab::Feature* f = lab::find_feature(panel);
  return f && f->measures ? f->measures->infos : none;
}

std::string scene_panel(const nlohmann::json& state) {
  try {
    const lab::FieldReader top(state, "");
    return top.string("active_panel", 64, "");
  } catch (const lab::StateError& e) {
    throw LessonError(e.what());
  }
}

void post_scene(const nlohmann::json& state, lab::CommandSink& sink) {
  const std::string panel = scene_panel(state);
  const lab::Feature* feature = lab::find_feature(panel);
  if (!feature || !feature->measures) {
    std::string views;
    for (const std::string& p : measurable_panels()) views += (views.empty() ? "" : ", ") + p;
    throw LessonError("the scene's view \"" + panel + "\" has no measures (views that do: " + views + ")");
  }
  std::vector<lab::Command> commands;
  try {
    const lab::FieldReader panels(state.at("panels"), "panels");
    commands = feature->scene(panels.object(panel), panels);
  } catch (const lab::StateError& e) {
    throw LessonError(std::string("the scene's settings: ") + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw LessonError(std::string("the scene has no panels: ") + e.what());
  }
  for (lab::Command& c : commands) sink.post(std::move(c));
}

std::optional<Measures> read_measures(std::string_view panel, const lab::Snapshot& s) {
  const lab::Feature* f = lab::find_feature(panel);
  if (!f || !f->measures) throw LessonError("the view \"" + std::string(panel) + "\" has no measures");
  try {
    return f->measures->read(s);
  } catch (const lab::MeasureError& e) {
    throw LessonError(e.what());
  }
}

std::uint64_t view_generation(std::string_view panel, const lab::Snapshot& s) {
  const lab::Feature* f = lab::find_feature(panel);
  return f && f->measures ? f->measures->generation(s) : 0;
}

std::string scene_shipped_run(const nlohmann::json& state) {
  if (!follows_training(state)) return "";
  try {
    const std::string name = state.at("panels").at(lab::kInnerCurvesId).value("shipped_run", std::string());
    return name.empty() ? "" : lab::kShippedRunPrefix + name;
  } catch (const nlohmann::json::exception&) {
    return "";
  }
}

nlohmann::json with_shipped_run(nlohmann::json state) {
  const std::string id = scene_shipped_run(state);
  if (id.empty()) throw LessonError("this experiment has no shipped run: it follows no training run, or names none");
  state["panels"][lab::kInnerCurvesId]["model_id"] = id;
  return state;
}

Measures run_scene(const fs::path& scene, std::chrono::seconds timeout,
                   const std::function<void(double)>& progress, std::vector<std::string>* notes,
                   bool shipped_run) {
  nlohmann::json state;
  lab::KeyLog keys;
  try {
    state = lab::read_state_file(scene);
  } catch (const lab::StateError& e) {
    throw LessonError(e.what());
  }
  if (shipped_run) state = with_shipped_run(std::move(state));
  const std::string panel = scene_panel(state);
  // A scene that follows a training run trains in a fresh temporary folder, removed afterwards (the
  // engine, declared after it, is stopped and its run threads joined first).
  struct TempDir {
    fs::path path;
    ~TempDir() {
      std::error_code ec;
      if (!path.empty()) fs::remove_all(path, ec);
    }
  } runs_dir;
  if (follows_training(state)) {
    static std::atomic<unsigned> counter{0};
    std::error_code ec;
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    runs_dir.path = fs::temp_directory_path(ec) /
                    ("tttlab-lesson-runs-" + std::to_string(stamp) + "-" + std::to_string(counter++));
    fs::create_directories(runs_dir.path, ec);
    if (ec) throw LessonError("cannot create a temporary folder for the training run: " + ec.message());
    state["panels"]["training"]["settings"]["runs_dir"] = runs_dir.path.string();
  }
  lab::Engine engine(lab::make_engine_modules());
  engine.start();
  post_scene(state, engine);
  // Only the settings the check reads are judged: the scene's panel (and the run it follows), without
  // its "view" block, the display settings that only the window reads (and judges).
  for (const std::string& k : keys.unknown(state)) {
    if (k.rfind("panels." + panel + ".", 0) != 0 && k.rfind("panels.training.settings.", 0) != 0) continue;
    if (k == "panels." + panel + ".view" || k.rfind("panels." + panel + ".view.", 0) == 0) continue;
    const std::string note = clip(scene.generic_string(), 240) + ": unknown key \"" + clip(k) + "\" (ignored)";
    if (notes)
      notes->push_back(note);
    else
      std::fprintf(stderr, "tttlab: note: %s\n", note.c_str());
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto last_report = t0;
  for (;;) {
    const auto snap = engine.snapshot();
    if (snap) {
      if (auto m = read_measures(panel, *snap)) return *m;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - t0 > timeout)
      throw LessonError(scene.generic_string() + ": the experiment did not finish within " +
                        std::to_string(timeout.count()) + " s");
    if (progress && now - last_report > std::chrono::seconds(1) && snap) {
      last_report = now;
      double p = 0;
      for (const auto& j : snap->jobs) p = std::max(p, j.progress);
      progress(p);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace tttlab::course
