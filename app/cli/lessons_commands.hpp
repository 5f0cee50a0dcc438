// The `tttlab lessons` subcommands for teachers, registered by cmd_lessons.cpp:
//   pack      (lessons_pack.cpp)      a student pack without the answer key, and the course key
//   export    (lessons_pack.cpp)      a student's signed progress export, headless
//   progress  (lessons_progress.cpp)  a class's exports verified and put in one table
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

}  // namespace tttlab::cli
