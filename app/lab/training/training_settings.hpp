// app/lab/training/training_settings.hpp — the Training panel's entry of a state file.
//
//   "settings": {layer, backbone, preset, data, mini_batch, base_lr, lr, steps, batch_size, seq_len,
//                seed, threads, device, gpus (1 … 1024; more than 1 only with device auto or cuda),
//                eval_every, eval_windows, checkpoint_every, runs_dir}   the next run's settings
//   "name": ""            the next run's name
//   "runs": ["dir", …]    the run directories shown (reopened from disk, never retrained)
//   "view": {"smoothing": 0.8, "log_loss": false, "x": "step"|"tokens"|"time"}
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/training/training_types.hpp"

namespace tttlab::lab {

// The "settings" object; absent keys keep `defaults`. The panel and the lesson checker (a scene that
// follows a training run) read it here.
TrainSettings train_settings_from(const FieldReader& settings, TrainSettings defaults);
nlohmann::json to_json(const TrainSettings& t);

enum class TrainingXAxis { Step, Tokens, Time };

struct TrainingPanelSettings {
  TrainSettings train;
  std::string name;
  double smoothing = 0.8;
  bool log_loss = false;
  TrainingXAxis x = TrainingXAxis::Step;
  std::vector<std::string> open_runs;  // run directories shown (opened, or started here)

  // The default data source.
  static TrainingPanelSettings defaults();
  // Absent keys keep the defaults; throws StateError naming the field.
  static TrainingPanelSettings from(const FieldReader& r);
  nlohmann::json to_json() const;
  // The runs of the file, opened again from their directories (their metrics and latest checkpoints).
  std::vector<Command> commands() const;
  static std::vector<Command> scene(const FieldReader& entry, const FieldReader&) {
    return from(entry).commands();
  }
};

}  // namespace tttlab::lab
