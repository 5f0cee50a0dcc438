// app/lab/inner_curves/curves_settings.hpp — the inner-loss curves' entry of a state file.
//
//   "model_id", "data", "seq_len" (8 … 2048), "sequences" (1 … 256): what is computed
//   "member" ("ttt", or a fast_weight_presets() id: that member on toy heads), "toy_d" (2 … 64),
//   "toy_seed", "toy_heads" (1 … 16), "toy_mini_batch" (1 … 1024), "toy_eta_base": the toy heads
//   (curves_types.hpp); missing: TTT, as before
//   "view": {"smoothing": 0.6, "log_scale": false, "shared_y": true}
//   "shipped_run": "<name>" (optional): the shipped run (assets/models/<name>/checkpoint-<step>) that can stand in
//                  for the training run: "Use the shipped run (no training)" replays it
// A model_id of kFollowTrainingId follows the next training run; "shipped-run:<name>" replays a shipped
// run's checkpoints (model_library.hpp).
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/inner_curves/curves_types.hpp"
#include "lab/state/settings_fields.hpp"

namespace tttlab::lab {

struct CurvesPanelSettings : PanelSettings<CurvesPanelSettings> {
  CurvesSettings run;
  double smoothing = 0.6;
  bool log_scale = false;
  bool shared_y = true;  // one y range for every block
  // The shipped run that may replace following a training run ("": none offered). A lesson's scene
  // names the one made from its own run's settings, so the student may take the lesson without training.
  std::string shipped_run;

  // The default data source.
  static CurvesPanelSettings defaults();
  static const SettingsFields<CurvesPanelSettings>& fields();
  std::vector<Command> commands() const;
  // A lesson's scene; curves that follow a training run also start the scene's Training-panel run
  // (panels.training.settings).
  static std::vector<Command> scene(const FieldReader& entry, const FieldReader& panels);
};

}  // namespace tttlab::lab
