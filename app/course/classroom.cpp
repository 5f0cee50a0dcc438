#include "course/classroom.hpp"

#include <nlohmann/json.hpp>

#include "lab/state/json_fields.hpp"

namespace tttlab::course::classroom {
namespace {
ClassroomState g_state;
}

const ClassroomState& state() { return g_state; }
void set(ClassroomState s) { g_state = std::move(s); }

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
