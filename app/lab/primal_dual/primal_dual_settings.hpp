// app/lab/primal_dual/primal_dual_settings.hpp — primal vs dual's entry of a state file.
//
//   "head": {…}, "precision" ("double"|"float"), "timing_reps" (1 … 50), "linear_attention",
//   "chunk" (1 … 2048: the chunked form of a member other than TTT), "gpu_math" ("fp32"|"tf32"): checked
//   against the module's limits
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/primal_dual/primal_dual_types.hpp"
#include "lab/state/settings_fields.hpp"

namespace tttlab::lab {

// The default: a model's head with W0 random, the text once.
PrimalDualConfig primal_dual_config_default();

struct PrimalDualPanelSettings : PanelSettings<PrimalDualPanelSettings> {
  PrimalDualConfig run = primal_dual_config_default();

  static const SettingsFields<PrimalDualPanelSettings>& fields();
  std::vector<Command> commands() const { return {PrimalDualRun{run}}; }
};

}  // namespace tttlab::lab
