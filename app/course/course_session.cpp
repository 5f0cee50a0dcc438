#include "course/course_session.hpp"

#include <cctype>

#include "lab/engine/resources.hpp"

namespace tttlab::course::course_session {
namespace {

namespace fs = std::filesystem;

std::optional<fs::path> g_progress_path;
std::unique_ptr<CourseSession> g_session;
std::optional<std::string> g_start;

void load_lessons(CourseSession& s) {
  s.course = course::Course{};
  s.error.clear();
  std::string looked;
  const auto dir = lab::find_resource("lessons", &looked);
  if (!dir) {
    s.error = "The lessons folder was not found (looked in " + looked + ").";
    return;
  }
  try {
    s.course = course::load_course(*dir);
  } catch (const std::exception& e) {
    s.course = course::Course{};
    s.course.dir = *dir;
    s.error = e.what();
  }
}

}  // namespace

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
