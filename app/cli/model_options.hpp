// Command-line options that describe a model (shared by train, bench and ablate): a preset, the layer
// kind and backbone, and overrides of every field.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tttlab/model/model_choice.hpp"

namespace tttlab::cli {

// The flags bind straight into the fields of ModelChoice (tttlab/model/model_choice.hpp).
struct ModelOptions : ModelChoice {
  void add_to(CLI::App* cmd);
  // The configuration the options describe; CLI::ValidationError (exit status 2) when invalid.
  ModelConfig build(const CLI::App* cmd) const;
};

}  // namespace tttlab::cli
