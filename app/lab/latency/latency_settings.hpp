// app/lab/latency/latency_settings.hpp — the latency lab's entry of a state file.
//
//   "layers" (a list of ttt-linear, ttt-mlp, softmax-attention, linear-attention, mamba2), "preset"
//   ("tiny"|"small"), "max_context", "repeats", "decode_tokens", "seed": the run, checked against the
//   module's limits
//   "view": {"log_time": true, "spread": true}
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/latency/latency_types.hpp"
#include "lab/state/settings_fields.hpp"

namespace tttlab::lab {

// The run part; absent keys keep `defaults`; throws StateError naming the field.
LatencySettings latency_settings_from(const FieldReader& r, LatencySettings defaults);
nlohmann::json to_json(const LatencySettings& s);

struct LatencyPanelSettings : PanelSettings<LatencyPanelSettings> {
  LatencySettings run;
  bool log_time = true;  // a log y axis (the x axis, T, is always logarithmic)
  bool spread = true;    // draw each point's quartiles as thin lines around it

  static const SettingsFields<LatencyPanelSettings>& fields();
  std::vector<Command> commands() const { return {LatencyRun{run}}; }
};

}  // namespace tttlab::lab
