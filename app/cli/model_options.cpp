// Shared model options (see model_options.hpp).
#include "cli/model_options.hpp"
#include "cli/validators.hpp"

namespace tttlab::cli {

void ModelOptions::add_to(CLI::App* cmd) {
  cmd->add_option("--preset", preset, "Model size: tiny (~1M parameters), small (~11M), 125m")
      ->check(CLI::IsMember({"tiny", "small", "125m"}))->capture_default_str();
  cmd->add_option("--layer", layer, "Sequence layer")
      ->check(CLI::IsMember(seq_layer_names()))
      ->capture_default_str();
  cmd->add_option("--backbone", backbone,
                  "m: Mamba-style (pre-conv, shared Q/K + convs, gate); t: Transformer (mamba2, deltanet, "
                  "gated-deltanet, titans, lact: always t, their default)")
      ->check(CLI::IsMember({"t", "m"}))->capture_default_str();
  cmd->add_option("--hidden-size", hidden_size, "Override the width D")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--layers", layers, "Override the number of blocks")->check(CLI::Range(1, 1024));
  cmd->add_option("--heads", heads, "Override the number of heads (must divide D)")->check(CLI::Range(1, 1 << 12));
  cmd->add_option("--intermediate-size", intermediate_size, "Override the SwiGLU width")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-b,--mini-batch", mini_batch, "TTT inner mini-batch size b >= 1 (titans: the memory's mini-batch)")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--base-lr", base_lr, "TTT eta_base (default 1.0 for ttt-linear, 0.1 for ttt-mlp)")->check(finite_range(0.0, 1e6));
  cmd->add_option("--remat-group", remat_group, "Recompute the inner loop in groups of N mini-batches (0: keep all states)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--mamba2-d-state", mamba2_d_state, "Mamba-2: the state size N per head (default 64)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--mamba2-headdim", mamba2_headdim, "Mamba-2: channels per head P, dividing 2 * D (default 64)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--mamba2-chunk", mamba2_chunk, "Mamba-2: the chunk length of the training scan (default 64)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--deltanet-chunk", deltanet_chunk,
                  "DeltaNet, Gated DeltaNet: the chunk length of the chunked (UT) form in training and evaluation "
                  "(default 64; heads from --heads, convolution width conv_kernel 4; CPU only)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--lact-chunk", lact_chunk,
                  "LaCT: the fast weights' chunk C and the attention's window (default 64; attention heads from "
                  "--heads; CPU only)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--lact-heads", lact_heads, "LaCT: the fast weights' heads, dividing D (default 2)")
      ->check(CLI::Range(1, 1 << 12));
  cmd->add_flag("--lact-muon", lact_muon, "LaCT: orthogonalise each fast-weight update (Muon, 5 Newton-Schulz steps)");
  cmd->add_flag("--no-inner-ln", no_inner_ln, "Variant: no LayerNorm inside the inner model");
  cmd->add_flag("--no-inner-residual", no_inner_residual, "Variant: no residual in the inner model (target V)");
  cmd->add_flag("--no-inner-bias", no_inner_bias, "Variant: no inner bias");
  cmd->add_flag("--fixed-eta", fixed_eta, "Variant: eta = eta_base/d for every token (no learned gate)");
  auto* no_tau = cmd->add_flag("--no-token-index", no_token_index, "Variant: tau_i = 1 (sum of gradients, plain mini-batch GD)");
  cmd->add_flag("--frozen-token-index", frozen_token_index,
                "Variant: tau_i = 1/i with delta not trained (the mean of the mini-batch's gradients)")
      ->excludes(no_tau);
  cmd->add_flag("--fixed-w0", fixed_w0, "Variant: W0 fixed at zero instead of learned");
  cmd->add_flag("--fixed-views", fixed_views,
                "Variant: the self-supervised task's views (theta_K, theta_V, theta_Q and the Q/K convolutions) "
                "stay at their random initialisation: a fixed task instead of a learned one (TTT layers, CPU)");
}

ModelConfig ModelOptions::build(const CLI::App* cmd) const {
  const CLI::Option* given = cmd ? cmd->get_option_no_throw("--backbone") : nullptr;
  try {
    return build_model_config(*this, given && given->count() > 0);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
}

}  // namespace tttlab::cli
