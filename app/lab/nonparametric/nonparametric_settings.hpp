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
#include "lab/state/settings_fields.hpp"

namespace tttlab::lab {

struct NonparametricPanelSettings : PanelSettings<NonparametricPanelSettings> {
  NonparametricConfig run;
  long position = -1;  // the position t on show (−1: the last)

  static const SettingsFields<NonparametricPanelSettings>& fields();
  std::vector<Command> commands() const { return {NonparametricRun{run}}; }
};

}  // namespace tttlab::lab
