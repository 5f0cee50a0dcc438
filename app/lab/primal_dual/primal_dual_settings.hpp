// app/lab/primal_dual/primal_dual_settings.hpp — primal vs dual's entry of a state file.
//
//   "head": {…}, "precision" ("double"|"float"), "timing_reps" (1 … 50), "linear_attention",
//   "gpu_math" ("fp32"|"tf32"): checked against the module's limits
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/primal_dual/primal_dual_types.hpp"
#include "lab/state/json_fields.hpp"

namespace tttlab::lab {

// The default: a model's head with W0 random, the text once.
PrimalDualConfig primal_dual_config_default();
// Absent keys keep primal_dual_config_default(); throws StateError naming the field.
PrimalDualConfig primal_dual_config_from(const FieldReader& r);
nlohmann::json to_json(const PrimalDualConfig& c);

struct PrimalDualPanelSettings {
  PrimalDualConfig run = primal_dual_config_default();

  static PrimalDualPanelSettings defaults() { return {}; }
  static PrimalDualPanelSettings from(const FieldReader& r) { return {primal_dual_config_from(r)}; }
  nlohmann::json to_json() const { return lab::to_json(run); }
  std::vector<Command> commands() const { return {PrimalDualRun{run}}; }
  static std::vector<Command> scene(const FieldReader& entry, const FieldReader&) {
    return from(entry).commands();
  }
};

}  // namespace tttlab::lab
