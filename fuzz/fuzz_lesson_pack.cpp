// fuzz_lesson_pack: a lesson folder made from the input, loaded as the app and `tttlab lessons` load a
// course (app/course/lesson.hpp: load_course), then every scene each lesson names read as a saved
// view (app/lab/state/state_file.hpp: read_state_file, scene_panel).
//
// Input: parts separated by a line "%%%%": the first is the lesson, written as 01-pack.md; the others
// are its views, written as scene-1.tttlab, scene-2.tttlab, ... (a lesson names them in its front
// matter and experiment blocks). The seeds are lessons of lessons/ with their views.
//
// Contract checked: load_course never throws; a lesson either loads or is listed with its error; every
// error message is one line with no raw control byte (what a crafted lesson puts in its fields or its
// views must not reach the terminal); each scene either reads or throws StateError.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "course/experiments.hpp"
#include "course/lesson.hpp"
#include "fuzz_check.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"
#include "tttlab/io/atomic_file.hpp"

namespace {

namespace fs = std::filesystem;

bool one_printable_line(const std::string& s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

void check_scene(const fs::path& scene) {
  try {
    const nlohmann::json state = tttlab::lab::read_state_file(scene);
    (void)tttlab::course::scene_panel(state);
  } catch (const tttlab::lab::StateError& e) {
    FUZZ_CHECK(one_printable_line(e.what()));
  } catch (const tttlab::course::LessonError& e) {
    FUZZ_CHECK(one_printable_line(e.what()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path dir = fs::temp_directory_path() / ("tttlab-fuzz-pack-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);

  const std::string input = tttlab::fuzz::as_text(data, size);
  std::vector<std::string> parts;
  std::size_t begin = 0;
  for (std::size_t at; (at = input.find("\n%%%%\n", begin)) != std::string::npos && parts.size() < 8; begin = at + 6)
    parts.push_back(input.substr(begin, at - begin));
  parts.push_back(input.substr(begin));
  tttlab::write_file_atomic(dir / "01-pack.md", std::string_view(parts[0]));
  for (std::size_t i = 1; i < parts.size(); ++i)
    tttlab::write_file_atomic(dir / ("scene-" + std::to_string(i) + ".tttlab"), std::string_view(parts[i]));

  const tttlab::course::Course course = tttlab::course::load_course(dir);
  FUZZ_CHECK(course.lessons.size() + course.errors.size() == 1);
  for (const auto& [file, message] : course.errors) FUZZ_CHECK(one_printable_line(message));
  for (const tttlab::course::Lesson& lesson : course.lessons) {
    check_scene(lesson.scene);
    for (const auto& x : lesson.experiments) check_scene(x.scene);
  }
  fs::remove_all(dir, ec);
  return 0;
}
