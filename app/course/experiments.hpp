// app/course/experiments.hpp — what a lesson's experiment measures, read off the same engine views
// that the app's panels draw.
//
// A lesson's experiment is its scene: a .tttlab state whose active panel is the view. The panel's
// engine module computes the view (the same code the window shows); a MEASURE is a named number read
// off that view, e.g. "max_rel_diff" of the primal-vs-dual comparison. Each feature lists its own
// (lab/measures.hpp, lab/features.cpp); this file finds them by the scene's panel id. The app reads
// measures from its live snapshot to reveal a prediction; `tttlab lessons check` runs the scene headless
// on a private engine (run_scene) and compares each measure with the lesson's claim.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lab/measures.hpp"

namespace tttlab::lab {
struct Snapshot;
class CommandSink;
}  // namespace tttlab::lab

namespace tttlab::course {

using lab::MeasureInfo;
using lab::Measurement;
using lab::Measures;

// The panels whose views lessons can measure, and their measures.
const std::vector<std::string>& measurable_panels();
// Empty when the panel has no measures.
const std::vector<MeasureInfo>& measures_of(std::string_view panel_id);

// The active panel of a parsed state ("" when it has none). Throws LessonError on a malformed state.
std::string scene_panel(const nlohmann::json& state);

// Posts the commands that make the engine compute the scene's view (its active panel's settings).
// Inner-loss curves that follow "training" also start the scene's Training-panel run (see run_scene).
// Throws LessonError when the scene's panel cannot be measured or its settings are invalid.
void post_scene(const nlohmann::json& state, lab::CommandSink& sink);

// The measures of `panel` read off a snapshot, once that panel's computation is complete (nullopt
// while it runs or before it started). Throws LessonError if the computation failed.
std::optional<Measures> read_measures(std::string_view panel, const lab::Snapshot& snapshot);

// The generation of the panel's view in a snapshot (0: none yet). Each new request of a view raises
// it: after posting a scene, wait for a view newer than the one seen before posting, so that a
// finished earlier computation is not read as the answer. (The stepper and evolution views keep their
// generation when asked for exactly what they already show: their measures are then already right.)
std::uint64_t view_generation(std::string_view panel, const lab::Snapshot& snapshot);

// The shipped run that can stand in for the training run the scene follows: "shipped-run:<name>"
// (lab/models/model_library.hpp) when the scene's active view is the inner-loss curves following
// "training" and its entry names one (panels.inner_curves.shipped_run), else "".
std::string scene_shipped_run(const nlohmann::json& state);
// The scene with its curves replaying that shipped run instead of following the training run; posted,
// it trains nothing. Throws LessonError when the scene offers no shipped run.
nlohmann::json with_shipped_run(nlohmann::json state);

// Headless: a private engine computes the scene (the file's active panel) and the measures are read
// when it is done. A scene whose inner-loss curves name the model "training" (lab::kFollowTrainingId)
// follows a training run: post_scene also starts the scene's Training-panel run (panels.training.
// settings), run_scene points its runs_dir at a fresh temporary folder (removed afterwards), and the
// measures are read when the run has finished and the view shows its last checkpoint. `progress` (optional) is called about every second with 0..1. Throws LessonError
// (unreadable scene, the computation failed, or it took longer than `timeout`).
// Keys of the scene's view settings that nothing reads (a typo: the view then runs with the default)
// are notes, "SCENE: unknown key "panels.x.y" (ignored)": into `notes` when given, else one line each
// on stderr. `shipped_run`: run the scene as with_shipped_run makes it (its shipped run replayed, no
// training).
Measures run_scene(const std::filesystem::path& scene, std::chrono::seconds timeout,
                   const std::function<void(double)>& progress = {}, std::vector<std::string>* notes = nullptr,
                   bool shipped_run = false);

}  // namespace tttlab::course
