// `tttlab lessons pack --student DIR (--teacher KEYFILE | --key KEYFILE) [--lessons SRC]
//  [--classroom STATE] [--lock-classroom]`: the course for students, its answer key sealed
// (app/course/course_pack.hpp), and the course key for the teacher.
//
// `tttlab lessons export --student NAME --out FILE [--progress FILE]`: the signed progress export the
// app's File → Export progress… writes, for scripts and tests (the lessons folder, a pack or not,
// comes from `tttlab lessons --dir`).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <system_error>

#include "cli/commands.hpp"
#include "cli/lessons_commands.hpp"
#include "cli/validators.hpp"
#include "course/course_pack.hpp"
#include "course/course_session.hpp"
#include "course/progress.hpp"
#include "course/progress_export.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"
#include "tttlab/build_config.hpp"
#include "tttlab/io/limits.hpp"

namespace tttlab::cli {
namespace {

namespace fs = std::filesystem;

struct PackArgs {
  std::string student_dir, teacher_key, key, source, classroom_state;
  bool lock = false;
};

void pack(const PackArgs& a, const std::string& dir_option) {
  if (a.teacher_key.empty() == a.key.empty()) {
    std::fprintf(stderr, "tttlab lessons pack: give --teacher KEYFILE (a new course key is written there) or --key "
                         "KEYFILE (the key of a course packed before), one of the two\n");
    return set_exit_code(2);
  }
  const auto source = lessons_folder(a.source.empty() ? dir_option : a.source);
  if (!source) return set_exit_code(1);
  course::PackOptions o;
  o.source = *source;
  o.out = a.student_dir;
  o.lock_classroom = a.lock;
  if (!a.classroom_state.empty()) {
    try {
      const nlohmann::json doc = lab::read_state_file(a.classroom_state);
      if (!doc.contains("classroom")) {
        std::fprintf(stderr, "tttlab lessons pack: %s has no classroom settings (set them in the app: View → "
                             "Classroom settings…, then save the state)\n", printable(a.classroom_state).c_str());
        return set_exit_code(1);
      }
      o.classroom = course::classroom::from_json(lab::FieldReader(doc["classroom"], "classroom"));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tttlab lessons pack: %s\n", printable(e.what()).c_str());
      return set_exit_code(1);
    }
  }
  bool wrote_key = false;
  try {
    course::CourseKey key = course::CourseKey::generate();
    if (!a.key.empty()) {
      key = course::CourseKey::read(a.key);
    } else {
      key.write(a.teacher_key);  // first: a pack nobody holds the key to would be useless
      wrote_key = true;
    }
    const int n = course::write_student_pack(o, key);
    std::printf("packed %d lessons into %s (course %s)\n", n, printable(a.student_dir).c_str(),
                key.derive().course_id.c_str());
    if (wrote_key)
      std::printf("the course key is in %s: keep it; students must not have it (it unlocks classroom mode and "
                  "verifies their progress)\n", printable(a.teacher_key).c_str());
    set_exit_code(0);
  } catch (const std::exception& e) {
    if (wrote_key) {
      std::error_code ec;
      fs::remove(a.teacher_key, ec);
    }
    std::fprintf(stderr, "tttlab lessons pack: %s\n", printable(e.what()).c_str());
    set_exit_code(1);
  }
}

struct ExportArgs {
  std::string student, out, progress;
};

void export_progress(const ExportArgs& a, const std::string& dir_option) {
  const auto dir = lessons_folder(dir_option);
  if (!dir) return set_exit_code(1);
  try {
    const auto pack = course::open_pack(*dir);
    const fs::path progress = a.progress.empty() ? course::ProgressStore::default_path() : fs::path(a.progress);
    course::export_progress(progress, a.student, pack ? &*pack : nullptr, TTTLAB_VERSION_STRING, a.out);
    std::printf("wrote %s (%s)\n", printable(a.out).c_str(), pack ? "signed for the course" : "unkeyed: no course pack");
    set_exit_code(0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tttlab lessons export: %s\n", printable(e.what()).c_str());
    set_exit_code(1);
  }
}

}  // namespace

std::optional<fs::path> lessons_folder(const std::string& dir) {
  fs::path d = dir;
  if (d.empty()) {
    std::string looked;
    const auto found = course::course_session::lessons_dir(&looked);
    if (!found) {
      std::fprintf(stderr, "tttlab lessons: the lessons folder was not found (looked in %s); give --dir\n",
                   printable(looked).c_str());
      return std::nullopt;
    }
    d = *found;
  }
  std::error_code ec;
  if (!fs::is_directory(d, ec)) {
    std::fprintf(stderr, "tttlab lessons: %s is not a folder\n", printable(d.string()).c_str());
    return std::nullopt;
  }
  return d;
}

void register_lessons_pack(CLI::App& lessons, const std::shared_ptr<std::string>& lessons_dir) {
  auto args = std::make_shared<PackArgs>();
  auto* p = lessons.add_subcommand(
      "pack",
      "Write the course for students into a new folder, with every reveal, answer, expected range and "
      "reveal section sealed; the app and `tttlab lessons --dir DIR` open it. See lessons/README.md.");
  p->add_option("--student", args->student_dir, "The new folder for the student pack (must not exist, or be empty)")
      ->required()
      ->check(non_empty_path());
  p->add_option("--teacher", args->teacher_key, "Write a new course key to this file (never overwritten; mode 0600)")
      ->check(non_empty_path());
  p->add_option("--key", args->key, "Re-pack the course whose key is in this file (as --teacher wrote it)")
      ->check(CLI::ExistingFile);
  p->add_option("--lessons", args->source, "The teacher's lessons folder (default: --dir, or lessons/ of this installation)")
      ->check(CLI::ExistingDirectory);
  p->add_option("--classroom", args->classroom_state,
                "Take the classroom settings from this .tttlab state (View → Classroom settings…, then save)")
      ->check(CLI::ExistingFile);
  p->add_flag("--lock-classroom", args->lock,
              "Students cannot switch classroom mode off or show what it hides; the course key unlocks it");
  p->callback([args, lessons_dir] { pack(*args, *lessons_dir); });

  auto e_args = std::make_shared<ExportArgs>();
  auto* e = lessons.add_subcommand(
      "export", "Write a student's progress as one signed file for the teacher (as File → Export progress… does).");
  e->add_option("--student", e_args->student, "The student's name or ID")->required()->check(CLI::Validator(
      [](std::string& s) { return s.empty() || s.size() > 200 ? std::string("1 to 200 characters") : std::string(); },
      "NAME"));
  e->add_option("--out", e_args->out, "The file to write")->required()->check(non_empty_path());
  e->add_option("--progress", e_args->progress, "The progress file (default: $TTTLAB_PROGRESS, else ~/.config/tttlab/course-progress.json)")
      ->check(non_empty_path());
  e->callback([e_args, lessons_dir] { export_progress(*e_args, *lessons_dir); });
}

}  // namespace tttlab::cli
