// app/lab/designer/designer_settings.hpp — the designer's entry of a state file.
//
//   "state", "loss", "retention", "optimizer", "rate", "granularity": the design, in
//   tttlab/fastweight/rule.hpp's spellings;
//   "width", "seed", "eta", "decay", "weight_decay", "momentum", "chunk": its parameters;
//   "compare" (a member's id), "pairs" (an increasing list), "sequences", "curve_pairs":
//   checked against the module's limits
//   "view": {"log_x": false}
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "lab/designer/designer_types.hpp"
#include "lab/engine/command.hpp"
#include "lab/state/settings_fields.hpp"

namespace tttlab::lab {

// The run part; absent keys keep `defaults`; throws StateError naming the field.
DesignerSettings designer_settings_from(const FieldReader& r, DesignerSettings defaults);
nlohmann::json to_json(const DesignerSettings& s);

struct DesignerPanelSettings : PanelSettings<DesignerPanelSettings> {
  DesignerSettings run;
  bool log_x = false;

  static const SettingsFields<DesignerPanelSettings>& fields();
  std::vector<Command> commands() const { return {DesignerRun{run}}; }
};

}  // namespace tttlab::lab
