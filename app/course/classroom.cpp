#include "course/classroom.hpp"

#include <nlohmann/json.hpp>
#include <optional>

#include "course/course_key.hpp"
#include "lab/state/json_fields.hpp"

namespace tttlab::course::classroom {
namespace {
ClassroomState g_state;
std::optional<ClassroomState> g_locked;  // the teacher's floor while a pack locks it
std::string g_locked_course;

// What a locked pack allows: at least the teacher's restrictions, whatever the student or a state
// file asks for.
ClassroomState enforce(ClassroomState s) {
  if (!g_locked) return s;
  s.enabled = true;
  s.hidden.insert(g_locked->hidden.begin(), g_locked->hidden.end());
  s.hide_panel_list = s.hide_panel_list || g_locked->hide_panel_list;
  s.allow_hints = s.allow_hints && g_locked->allow_hints;
  s.allow_answers = s.allow_answers && g_locked->allow_answers;
  return s;
}
}  // namespace

const ClassroomState& state() { return g_state; }
void set(ClassroomState s) { g_state = enforce(std::move(s)); }

void lock(const ClassroomState& teacher, std::string course_id) {
  g_locked = teacher;
  g_locked_course = std::move(course_id);
  g_state = enforce(teacher);
}

bool locked() { return g_locked.has_value(); }

bool unlock(std::string_view key_hex) {
  if (!g_locked) return true;
  const auto key = CourseKey::from_hex(key_hex);
  if (!key || key->derive().course_id != g_locked_course) return false;
  clear_lock();
  return true;
}

void clear_lock() {
  g_locked.reset();
  g_locked_course.clear();
}

bool visible(std::string_view control) {
  return !g_state.enabled || g_state.hidden.find(std::string(control)) == g_state.hidden.end();
}

bool hints_allowed() { return !g_state.enabled || g_state.allow_hints; }
bool answers_allowed() { return !g_state.enabled || g_state.allow_answers; }

nlohmann::json to_json(const ClassroomState& s) {
  return {{"enabled", s.enabled},
          {"hidden", nlohmann::json(std::vector<std::string>(s.hidden.begin(), s.hidden.end()))},
          {"hide_panel_list", s.hide_panel_list},
          {"allow_hints", s.allow_hints},
          {"allow_answers", s.allow_answers}};
}

ClassroomState from_json(const FieldReader& r) {
  ClassroomState s;
  s.enabled = r.boolean("enabled", false);
  s.hide_panel_list = r.boolean("hide_panel_list", false);
  s.hidden = r.string_set("hidden", 256, 128);
  s.allow_hints = r.boolean("allow_hints", true);
  s.allow_answers = r.boolean("allow_answers", true);
  return s;
}

}  // namespace tttlab::course::classroom
