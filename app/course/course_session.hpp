// app/course/course_session.hpp — the course as the app holds it: the lessons (course::Course,
// read from the lessons folder that find_resource finds), the student's progress (ProgressStore),
// and the lesson the student asked to start. Shared by the course page (the Lessons panel) and the
// app, which docks the started lesson beside its view. No drawing here. UI thread only.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "course/course_pack.hpp"
#include "course/lesson.hpp"
#include "course/progress.hpp"

namespace tttlab::course {

struct CourseSession {
  course::Course course;
  std::string error;  // the lessons folder was not found (the course is then empty)
  std::optional<course::CoursePack> pack;  // when the folder is a student pack (course_pack.hpp)
  std::unique_ptr<course::ProgressStore> progress;
  std::string open_lesson;  // the lesson docked beside the view now ("" when none); set by the app
  int generation = 0;       // raised by reload(): lessons held from before may have changed
};

namespace course_session {

// Where the progress is kept; call before the first get() (default: ProgressStore::default_path()).
// Screenshots and benchmarks pass a path of their own so that they never show a student's progress.
void set_progress_path(std::filesystem::path path);
// The lessons folder: the one given to set_lessons_dir(), else $TTTLAB_LESSONS, else lessons/ where
// find_resource finds it. nullopt when none is found (`looked` lists where it looked).
std::optional<std::filesystem::path> lessons_dir(std::string* looked = nullptr);
// Reads the course from `dir` from now on (a student pack, or another lessons folder): `tttlab gui
// --lessons DIR` and File → Open course pack. Reloads when the course was already loaded.
void set_lessons_dir(std::filesystem::path dir);
// The course, loaded on first use. A pack's classroom settings are applied when its course is first
// loaded (and locked when the pack locks them).
CourseSession& get();
// Reads the lessons folder again (after a teacher edited a lesson); the progress is kept.
void reload();

// The course page asks for a lesson; the app takes the request at the start of the next frame, opens
// the lesson's scene like File → Open and docks the lesson beside it.
void request_start(std::string lesson_name);
std::optional<std::string> take_start_request();

// "01-one-step-per-token" → 1 (the number the course page shows); 0 when the name has none.
int lesson_number(const std::string& name);

}  // namespace course_session
}  // namespace tttlab::course
