// app/lab/generation/generation_settings.hpp — the Generation panel's entry of a state file.
//
//   "model_id", "prompt" (not empty), "temperature" (0 … 10), "top_k" (0 … 256), "max_tokens",
//   "seed", "tokens_per_second"
//   "view": {"block": 0, "head": 0, "tint": "block"|"head"}
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/generation/generation_types.hpp"
#include "lab/state/settings_fields.hpp"

namespace tttlab::lab {

struct GenerationPanelSettings : PanelSettings<GenerationPanelSettings> {
  GenSettings gen;
  int block = 0, head = 0;
  bool all_heads = true;  // tint by the mean ‖ΔW‖ over the block's heads (else the chosen head)

  static const SettingsFields<GenerationPanelSettings>& fields();
  std::vector<Command> commands() const { return {GenerateStart{gen}}; }
};

}  // namespace tttlab::lab
