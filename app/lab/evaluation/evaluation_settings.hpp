// app/lab/evaluation/evaluation_settings.hpp — the Evaluation panel's entry of a state file.
//
//   "models" (1 … 8 library ids), "data", "seq_len" (8 … 4096), "windows" (1 … 1024)
//   "view": {"smoothing": 0.9, "log_x": false}
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/evaluation/evaluation_types.hpp"
#include "lab/state/settings_fields.hpp"

namespace tttlab::lab {

struct EvaluationPanelSettings : PanelSettings<EvaluationPanelSettings> {
  EvalSettings eval;
  double smoothing = 0.9;
  bool log_x = false;

  // The default data source; the shipped model against an untrained TTT-Linear.
  static EvaluationPanelSettings defaults();
  static const SettingsFields<EvaluationPanelSettings>& fields();
  std::vector<Command> commands() const { return {EvaluationRun{eval}}; }
};

}  // namespace tttlab::lab
