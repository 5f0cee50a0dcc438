// The --checkpoint option of the commands that read a trained model (eval, generate, states, export,
// probe), and how they refuse a model whose numbers are not finite.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/validators.hpp"
#include "tttlab/model/checkpoint.hpp"

namespace tttlab::cli {

inline constexpr const char* kCheckpointHelp = "A run directory or a checkpoint directory";

// --checkpoint DIR (a path that is not empty); the caller marks it required where it is.
inline CLI::Option* add_checkpoint_option(CLI::App* cmd, std::string& checkpoint,
                                          const std::string& help = kCheckpointHelp) {
  return cmd->add_option("--checkpoint", checkpoint, help)->check(non_empty_path());
}

// The model gave a loss, logit or state that is not finite on the command's input: the command fails
// (exit status 1) naming the checkpoint's folder, before it prints any result.
[[noreturn]] inline void refuse_non_finite_model(const std::string& checkpoint) {
  throw NonFiniteModelError(non_finite_model_message(resolve_checkpoint(checkpoint).string()));
}

}  // namespace tttlab::cli
