// fuzz_state_file: any text read as a .tttlab state file (app/lab/state/state_file.hpp): the
// envelope (parse_state), then every panel's run settings through the readers the panels and the
// lesson checker share (app/lab/state/run_settings.hpp), each on the entry of its own panel id.
//
// Contract checked: parse_state and every reader either succeed or throw StateError (one line naming
// the field); nothing else may escape, since the app shows exactly that error in a popup.
#include "fuzz_check.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/run_settings.hpp"
#include "lab/state/state_file.hpp"

namespace {

using namespace tttlab::lab;

template <class Read>
void read_panel(const FieldReader& panels, const char* id, Read read) {
  try {
    read(panels.object(id));
  } catch (const StateError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nlohmann::json state;
  try {
    state = parse_state(tttlab::fuzz::as_text(data, size), "fuzz.tttlab");
  } catch (const StateError&) {
    return 0;
  }
  // parse_state promises an object with the right format and, when present, an object "panels".
  FUZZ_CHECK(state.is_object());
  const nlohmann::json empty = nlohmann::json::object();
  const auto it = state.find("panels");
  const FieldReader panels(it == state.end() ? empty : *it, "panels");

  read_panel(panels, "primal_dual", [](const FieldReader& r) { (void)primal_dual_config_from(r); });
  read_panel(panels, "inner_curves", [](const FieldReader& r) { (void)curves_settings_from(r, CurvesSettings{}); });
  read_panel(panels, "minibatch", [](const FieldReader& r) { (void)sweep_settings_from(r, SweepSettings{}); });
  read_panel(panels, "evaluation", [](const FieldReader& r) { (void)eval_settings_from(r, EvalSettings{}); });
  read_panel(panels, "evolution", [](const FieldReader& r) { (void)evolution_head_from(r); });
  read_panel(panels, "inner_stepper", [](const FieldReader& r) { (void)stepper_head_from(r); });
  read_panel(panels, "nonparametric", [](const FieldReader& r) { (void)nonparametric_config_from(r); });
  read_panel(panels, "recall", [](const FieldReader& r) { (void)recall_settings_from(r, RecallSettings{}); });
  read_panel(panels, "training", [](const FieldReader& r) {
    (void)train_settings_from(r.object("settings"), TrainSettings{});
  });

  // What was read writes back: the state serialises (the app's Save) without throwing.
  (void)state.dump(2);
  return 0;
}
