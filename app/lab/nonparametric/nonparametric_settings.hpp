// app/lab/nonparametric/nonparametric_settings.hpp — the nonparametric learner's (Theorem 2) entry of a
// state file.
//
//   "model_id", "block", "attention_head" (not "head": that key is the head_config object of the other
//   panels), "text", "data", "offset", "tokens", "precision" ("double"|"float"): checked against the
//   module's limits
//   "view": {"position": -1}   the position t on show (−1: the last)
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/nonparametric/nonparametric_types.hpp"
#include "lab/state/json_fields.hpp"

namespace tttlab::lab {

// Absent keys keep NonparametricConfig's defaults; throws StateError naming the field.
NonparametricConfig nonparametric_config_from(const FieldReader& r);
nlohmann::json to_json(const NonparametricConfig& c);

struct NonparametricPanelSettings {
  NonparametricConfig run;
  long position = -1;  // the position t on show (−1: the last)

  static NonparametricPanelSettings defaults() { return {}; }
  static NonparametricPanelSettings from(const FieldReader& r);
  nlohmann::json to_json() const;
  std::vector<Command> commands() const { return {NonparametricRun{run}}; }
  static std::vector<Command> scene(const FieldReader& entry, const FieldReader&) {
    return from(entry).commands();
  }
};

}  // namespace tttlab::lab
