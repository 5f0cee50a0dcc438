// app/lab/minibatch/minibatch_settings.hpp — the mini-batch lab's entry of a state file.
//
//   "mode" ("evaluate"|"train"), "model_id", "layer" ("ttt-linear"|"ttt-mlp"), "data", "seq_len",
//   "windows", "train_steps", "seed": the sweep
//   "ghost": {…the same keys…}   the sweep drawn in grey (absent keys: the sweep's values)
//   "view": {"smoothing": 0.7, "log_time": true}
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/minibatch/minibatch_types.hpp"
#include "lab/state/settings_fields.hpp"

namespace tttlab::lab {

struct MiniBatchPanelSettings : PanelSettings<MiniBatchPanelSettings> {
  SweepSettings sweep;
  std::optional<SweepSettings> ghost;  // the sweep drawn in grey (state files restore it)
  double smoothing = 0.7;
  bool log_time = true;

  // The default data source.
  static MiniBatchPanelSettings defaults();
  static const SettingsFields<MiniBatchPanelSettings>& fields();
  // The ghost's sweep first, then this one after it, so that the engine draws both.
  std::vector<Command> commands() const;
  // A lesson's scene: the sweep alone (its measures read the current sweep only).
  static std::vector<Command> scene(const FieldReader& entry, const FieldReader& panels);
};

}  // namespace tttlab::lab
