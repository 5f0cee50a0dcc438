// Command-line options that describe a model (shared by train, bench and ablate): a preset, the layer
// kind and backbone, and overrides of every field.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tttlab/model/config.hpp"

namespace tttlab::cli {

struct ModelOptions {
  std::string preset = "tiny";
  std::string layer = "ttt-linear";
  std::string backbone = "m";
  int hidden_size = 0, layers = 0, heads = 0, intermediate_size = 0;  // 0: the preset's
  int mini_batch = 16;
  double base_lr = -1;  // < 0: the official default (default_ttt_base_lr)
  int remat_group = 0;
  int mamba2_d_state = 0, mamba2_headdim = 0, mamba2_chunk = 0;  // 0: ModelConfig's defaults
  int deltanet_chunk = 0;                                      // 0: ModelConfig's default
  int lact_chunk = 0;                                          // 0: ModelConfig's default
  int lact_heads = 0;                                          // 0: ModelConfig's default
  bool lact_muon = false;
  bool no_inner_ln = false, no_inner_residual = false, no_inner_bias = false;
  bool fixed_eta = false, no_token_index = false, frozen_token_index = false, fixed_w0 = false, fixed_views = false;

  void add_to(CLI::App* cmd);
  // The configuration the options describe; CLI::ValidationError (exit status 2) when invalid.
  ModelConfig build(const CLI::App* cmd) const;
};

}  // namespace tttlab::cli
