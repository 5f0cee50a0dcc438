// The `tttlab lessons` subcommands for teachers, registered by cmd_lessons.cpp:
//   pack      (lessons_pack.cpp)      a student pack without the answer key, and the course key
//   export    (lessons_pack.cpp)      a student's signed progress export, headless
//   progress  (lessons_progress.cpp)  a class's exports verified and put in one table
// and the pictures of `handout --figures` (lessons_figures.cpp).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace CLI {
class App;
}

namespace tttlab::cli {

// `lessons_dir`: the folder `tttlab lessons --dir` gave ("" when none).
void register_lessons_pack(CLI::App& lessons, const std::shared_ptr<std::string>& lessons_dir);
void register_lessons_progress(CLI::App& lessons);

// The lessons folder: `dir` when given, else $TTTLAB_LESSONS or lessons/ of this installation. Prints
// why on stderr and returns nullopt when there is none.
std::optional<std::filesystem::path> lessons_folder(const std::string& dir);

// Whether this build and this session can render a lesson's view to a picture: the desktop app is
// built, and there is a display for its OpenGL context (or TTTLAB_GL=egl). When not, `why_not` says
// what to do (run under xvfb-run, or leave out --figures).
bool views_can_render(std::string& why_not);
// Renders the view of the state file `scene` to the PNG `png` with the app's offscreen screenshot
// (`tttlab gui --screenshot`, after the engine has computed the view). Throws std::runtime_error saying
// why when no picture was written. `notes`: what the renderer said on success (e.g. that the engine was
// still busy when it captured), or "".
void render_view(const std::filesystem::path& scene, const std::filesystem::path& png, std::string* notes);

}  // namespace tttlab::cli
