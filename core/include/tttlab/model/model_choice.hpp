// tttlab/model/model_choice.hpp — a model described as a person asks for one: a preset, the layer kind
// and backbone, and overrides of single fields. `tttlab train`, `bench` and `ablate` read it from their
// flags (app/cli/model_options.hpp) and tttlab.train (python/) from its keywords; both turn it into a
// ModelConfig here, so that the same words give the same model.
#pragma once

#include <string>

#include "tttlab/model/config.hpp"

namespace tttlab {

struct ModelChoice {
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
};

// The configuration `c` describes, validated (std::invalid_argument with the reason). The layers that
// sit only in the Transformer block (Mamba-2, the delta rules, Titans, LaCT) take backbone "t" unless
// `backbone_given` (the caller asked for c.backbone explicitly), which validate() then refuses.
ModelConfig build_model_config(const ModelChoice& c, bool backbone_given);

}  // namespace tttlab
