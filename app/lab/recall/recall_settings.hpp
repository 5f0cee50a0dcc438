// app/lab/recall/recall_settings.hpp — the recall lab's entry of a state file.
//
//   "width", "pairs" (an increasing list), "sequences", "seed", "map_memory", "map_pairs", "eta_linear",
//   "mamba_decay":
//   checked against the module's limits
//   "view": {"log_x": true, "members": ["ttt_linear", ...]} (the memories plotted: recall::memory_id
//   values, each once; absent: recall_default_members(), the five the lab had first)
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

// The first recall::kFirstMemories ids, in recall::Memory order.
std::vector<std::string> recall_default_members();
// Throws std::invalid_argument unless `members` holds 1 to recall::kMemories known ids, each once
// (the message lists the accepted ids).
void validate_recall_members(const std::vector<std::string>& members);

struct RecallPanelSettings : PanelSettings<RecallPanelSettings> {
  RecallSettings run;
  bool log_x = true;
  std::vector<std::string> members = recall_default_members();

  static const SettingsFields<RecallPanelSettings>& fields();
  std::vector<Command> commands() const { return {RecallRun{run}}; }
};

}  // namespace tttlab::lab
