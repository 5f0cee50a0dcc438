// app/lab/evolution/evolution_settings.hpp — the hidden-state evolution's entry of a state file.
//
//   "head": {…}       the head_config object, checked against the evolution module's limits
//   "text_file": "…"  (optional) a student's own text: its first bytes replace the head's text
//   "cursor": -1      the token on show (−1: the last)
//   "view": {"layer": "W1"|"W2", "map": "delta"|"weights", "spectrum": "delta"|"weights", "play_speed": 30}
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/engine/head_config.hpp"
#include "lab/state/settings_fields.hpp"

namespace tttlab::lab {

struct EvolutionPanelSettings : PanelSettings<EvolutionPanelSettings> {
  HeadConfig head;
  // A student's own text file (data_source.hpp, read_view_text): empty, or the file whose first bytes are
  // head.text. A state file names it, and opening the state reads it again: a file that is gone or
  // cannot be read is an error then, not a silent switch to the text saved beside it.
  std::string text_file;
  long cursor = -1;        // −1: the last token
  int layer = 0;           // TTT-MLP: 0 = W1, 1 = W2
  bool show_delta = true;  // the map shows W_t − W_0 (true) or W_t
  bool spectrum_of_delta = true;
  double play_speed = 30.0;  // tokens per second

  // Block 1, head 2 of the shipped model.
  static EvolutionPanelSettings defaults();
  static const SettingsFields<EvolutionPanelSettings>& fields();
  std::vector<Command> commands() const { return {EvolutionConfigure{head}}; }
};

}  // namespace tttlab::lab
