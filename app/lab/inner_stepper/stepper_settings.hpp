// app/lab/inner_stepper/stepper_settings.hpp — the inner-loop stepper's entry of a state file: the head
// and its text, where playback stands, and the view's options.
//
//   "head": {…}                 the head_config object, checked against the stepper's limits
//   "text_file": "notes/essay.txt"  (optional) a student's own text: its first bytes replace the head's text
//   "cursor": 103, "speed": 8, "loop": false
//   "view": {"smoothing": 0, "log_losses": false, "colours": "shared"|"fixed"|"per_matrix",
//            "layer": "W1"|"W2"}
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/engine/head_config.hpp"
#include "lab/state/settings_fields.hpp"

namespace tttlab::lab {

// How heat-map colours map to values.
//   SharedPerToken: W_{t−1} and W_t share one range (what changed is visible); ΔW, the gradient term
//                   and the vectors each use their own. The default.
//   FixedOverRun:   one range per kind of matrix over all computed tokens (robust 95th percentile),
//                   so magnitudes compare across tokens while stepping.
//   PerMatrix:      every map its own largest |value|.
enum class StepperColourScale { SharedPerToken, FixedOverRun, PerMatrix };

struct StepperPanelSettings : PanelSettings<StepperPanelSettings> {
  HeadConfig head;
  // A student's own text file (data_source.hpp, read_view_text): empty, or the file whose first bytes are
  // head.text. A state file names it, and opening the state reads it again: a file that is gone or
  // cannot be read is an error then, not a silent switch to the text saved beside it.
  std::string text_file;
  long cursor = 103;  // mid-way through the seventh mini-batch with the defaults (b = 16)
  double speed = 8.0;
  bool loop = false;
  double smoothing = 0.0;
  bool log_losses = false;
  StepperColourScale colours = StepperColourScale::SharedPerToken;
  int layer = 0;  // TTT-MLP: which weight matrix is shown (0: W1, 1: W2)

  static const SettingsFields<StepperPanelSettings>& fields();
  // What the panel sends the engine: the playback speed, then the head with the cursor.
  std::vector<Command> commands() const;
  // A lesson's scene: the head with every token computed (its measures read the whole text).
  static std::vector<Command> scene(const FieldReader& entry, const FieldReader& panels);
};

}  // namespace tttlab::lab
