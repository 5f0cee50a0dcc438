// app/course/classroom.hpp — classroom mode: a teacher hides chosen controls (the model picker, the
// training hyper-parameters, …) so that a lesson's view cannot drift from what the lesson is about,
// and saves that choice in the .tttlab state file with the rest of the view.
//
// Each panel lists the controls it can hide (Panel::classroom_controls, ids like "training.settings")
// and asks visible(id) before drawing one. Hidden controls are hidden only while the mode is on;
// switching it off (View menu, or Ctrl+Shift+K) shows everything again. UI thread only.
//
// A course pack may lock the teacher's settings (course_pack.hpp): while locked, set() can only add to
// them — the mode stays on, the teacher's hidden controls stay hidden, hints and answers stay as
// restricted as the teacher chose — until the teacher types the course key (unlock()).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <string_view>

namespace tttlab::lab {
class FieldReader;
}  // namespace tttlab::lab

namespace tttlab::course {

using lab::FieldReader;

struct ClassroomControl {
  const char* id;     // "<panel id>.<control>", stable (state files store it)
  const char* label;  // what the teacher reads in the classroom dialog
};

struct ClassroomState {
  bool enabled = false;
  std::set<std::string> hidden;  // control ids
  bool hide_panel_list = false;  // also hide the sidebar's panel list (students stay on one panel)
  // The lessons' questions: whether students may reveal the hints and the answers (while the mode is
  // on; off, both are always allowed). Files written before these existed read as allowed.
  bool allow_hints = true;
  bool allow_answers = true;
  bool operator==(const ClassroomState&) const = default;
};

namespace classroom {

const ClassroomState& state();
void set(ClassroomState s);
// False while classroom mode is on and `control` is hidden.
bool visible(std::string_view control);
// Whether a lesson's hints / answers may be revealed now (classroom mode off, or the teacher allows it).
bool hints_allowed();
bool answers_allowed();

// Locks `teacher` (applied at once) for the course whose id is `course_id` (course_key.hpp).
void lock(const ClassroomState& teacher, std::string course_id);
bool locked();
// Lifts the lock when `key_hex` is the locked course's key (64 hex digits); false otherwise.
bool unlock(std::string_view key_hex);
// Lifts the lock without a key: for a new course (another pack, or the plain lessons folder).
void clear_lock();

nlohmann::json to_json(const ClassroomState& s);
// Throws StateError naming the field under `r.path()`.
ClassroomState from_json(const FieldReader& r);

}  // namespace classroom
}  // namespace tttlab::course
