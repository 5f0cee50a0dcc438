// tttlab/ttt/eta.hpp — the inner learning rate η of the TTT layers (docs/MATH.md §2.3).
//
// Official: for head h, token j and position i (1-based) in the mini-batch,
//   λ_{h,j} = η_base · σ(x_j·θ_h + β_h) / d        per-token, data-dependent gate
//   τ_i     = max(1/i + δ_i, 0)                    learnable token-index scale, δ ∈ R^b (init 0)
//   E[i, j] = τ_i · λ_{h,j}   for j ≤ i            (token i applies the MEAN of the λ-weighted
//                                                   gradients of tokens 1..i when δ = 0)
// x_j is the layer input (full width D). The 1/d is there because the inner loss is summed over d.
//
// The paper's simpler variants are options:
//   EtaGate::Fixed        λ_j = η_base / d for every token (no data-dependent gate)
//   token_index = false   τ_i = 1: token i applies the SUM of the gradients (plain mini-batch GD)
//   token_index_learnable = false   τ_i = max(1/i + δ_i, 0) with δ not trained (its gradient is 0,
//                                   so δ keeps its initial 0: τ_i = 1/i, the mean of the gradients)
#pragma once

#include "tttlab/tensor.hpp"

namespace tttlab {

enum class EtaGate { Learned, Fixed };

struct EtaOptions {
  double base_lr = 1.0;        // η_base: 1.0 for TTT-Linear, 0.1 for TTT-MLP (official)
  EtaGate gate = EtaGate::Learned;
  bool token_index = true;     // τ_i = max(1/i + δ_i, 0) (on) or 1 (off)
  bool token_index_learnable = true;  // δ trained (true) or its gradient zeroed (false); only with token_index
};

// τ [b] from the learnable offsets δ [b].
template <class S>
Vec<S> token_index_scale(const EtaOptions& opt, const RowVec<S>& delta);

// λ [T] for one head: x [T, D], theta [D] (row h of θ_lr [H, D]), bias β_h, head dim d.
template <class S>
Vec<S> per_token_lr(const EtaOptions& opt, ConstMatRef<S> x, const RowVec<S>& theta, S bias, int d);

}  // namespace tttlab
