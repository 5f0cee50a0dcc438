#include "course/course_session.hpp"

#include <cctype>
#include <cstdlib>

#include "course/classroom.hpp"
#include "lab/engine/resources.hpp"

namespace tttlab::course::course_session {
namespace {

namespace fs = std::filesystem;

std::optional<fs::path> g_progress_path;
std::unique_ptr<CourseSession> g_session;
std::optional<std::string> g_start;
std::optional<fs::path> g_lessons_dir;
fs::path g_applied_pack;  // the pack whose classroom settings were applied (once per course)

void apply_pack_classroom(const std::optional<CoursePack>& pack) {
  const fs::path dir = pack ? pack->dir : fs::path();
  if (dir == g_applied_pack) return;  // a reload of the same course keeps what the teacher unlocked
  g_applied_pack = dir;
  classroom::clear_lock();
  if (!pack) return;
  if (pack->classroom_locked) {
    ClassroomState teacher = pack->classroom.value_or(ClassroomState{});
    teacher.enabled = true;
    classroom::lock(teacher, pack->keys.course_id);
  } else if (pack->classroom) {
    classroom::set(*pack->classroom);
  }
}

void load_lessons(CourseSession& s) {
  s.course = course::Course{};
  s.error.clear();
  s.pack.reset();
  std::string looked;
  const auto dir = lessons_dir(&looked);
  if (!dir) {
    s.error = "The lessons folder was not found (looked in " + looked + ").";
    return;
  }
  try {
    s.pack = open_pack(*dir);
    apply_pack_classroom(s.pack);
    s.course = course::load_course(*dir);
  } catch (const std::exception& e) {
    s.course = course::Course{};
    s.course.dir = *dir;
    s.error = e.what();
  }
}

}  // namespace

std::optional<fs::path> lessons_dir(std::string* looked) {
  if (g_lessons_dir) {
    if (looked) *looked = g_lessons_dir->string();
    return g_lessons_dir;
  }
  if (const char* env = std::getenv("TTTLAB_LESSONS"); env && *env) {
    if (looked) *looked = std::string(env) + " ($TTTLAB_LESSONS)";
    return fs::path(env);
  }
  std::string where;
  auto found = lab::find_resource("lessons", &where);
  if (looked) *looked = where;
  return found;
}

void set_lessons_dir(fs::path dir) {
  g_lessons_dir = std::move(dir);
  if (g_session) reload();
}

void set_progress_path(fs::path path) {
  g_progress_path = std::move(path);
  if (g_session) g_session->progress = std::make_unique<course::ProgressStore>(*g_progress_path);
}

CourseSession& get() {
  if (!g_session) {
    g_session = std::make_unique<CourseSession>();
    load_lessons(*g_session);
    g_session->progress =
        std::make_unique<course::ProgressStore>(g_progress_path ? *g_progress_path : course::ProgressStore::default_path());
  }
  return *g_session;
}

void reload() {
  CourseSession& s = get();
  load_lessons(s);
  ++s.generation;
}

void request_start(std::string lesson_name) { g_start = std::move(lesson_name); }

std::optional<std::string> take_start_request() {
  auto r = std::move(g_start);
  g_start.reset();
  return r;
}

int lesson_number(const std::string& name) {
  int n = 0;
  std::size_t i = 0;
  for (; i < name.size() && i < 6 && std::isdigit(static_cast<unsigned char>(name[i])); ++i) n = n * 10 + (name[i] - '0');
  return i == 0 ? 0 : n;
}

}  // namespace tttlab::course::course_session
