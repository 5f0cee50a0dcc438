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
#include "lab/state/json_fields.hpp"

namespace tttlab::lab {

struct GenerationPanelSettings {
  GenSettings gen;
  int block = 0, head = 0;
  bool all_heads = true;  // tint by the mean ‖ΔW‖ over the block's heads (else the chosen head)

  static GenerationPanelSettings defaults() { return {}; }
  // Absent keys keep the defaults; throws StateError naming the field.
  static GenerationPanelSettings from(const FieldReader& r);
  nlohmann::json to_json() const;
  std::vector<Command> commands() const { return {GenerateStart{gen}}; }
  static std::vector<Command> scene(const FieldReader& entry, const FieldReader&) {
    return from(entry).commands();
  }
};

}  // namespace tttlab::lab
