// app/lab/recall/recall_settings.hpp — the recall lab's entry of a state file.
//
//   "width", "pairs" (an increasing list), "sequences", "seed", "map_memory", "map_pairs", "eta_linear",
//   "mamba_decay":
//   checked against the module's limits
//   "view": {"log_x": true}
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/recall/recall_types.hpp"
#include "lab/state/settings_fields.hpp"

namespace tttlab::lab {

// The run part; absent keys keep `defaults`; throws StateError naming the field.
RecallSettings recall_settings_from(const FieldReader& r, RecallSettings defaults);
nlohmann::json to_json(const RecallSettings& s);

struct RecallPanelSettings : PanelSettings<RecallPanelSettings> {
  RecallSettings run;
  bool log_x = true;

  static const SettingsFields<RecallPanelSettings>& fields();
  std::vector<Command> commands() const { return {RecallRun{run}}; }
};

}  // namespace tttlab::lab
