// tttlab/train/ablation.hpp — the rows of the TTT paper's Table 1, as model configurations.
//
// Each row changes one thing from the row before it (Sun et al., Table 1):
//   1 linear-attention   linear attention (Theorem 1's baseline), Transformer backbone
//   2 ttt-equivalence    TTT-Linear with one mini-batch over the sequence (b = T), W0 = 0 fixed, no
//                        LN, no residual, no bias, η ≡ 1 (λ = 1, τ = 1), no RoPE, no post-norm: the
//                        same function as row 1 (a test proves it)
//   3 +learnable-W0      W0 learned from N(0, 0.02)
//   4 +ln-residual       f(k) = k + LN(kW + b): LN, residual and bias inside the inner model; the
//                        layer also gets the official layer's RoPE and post-norm from here on
//   5 +mini-batch-16     b = 16 instead of b = T (still fixed η: λ = 1, τ = 1)
//   6 +learnable-eta     the official η: λ = η_base σ(xθ + β)/d with η_base = 1, τ_i = 1/i + δ_i
//   7 +mamba-backbone    the Mamba backbone: pre-conv, shared Q/K with convs, GELU gate
// Row 7 is the official TTT-Linear (M). All rows share the preset's width, depth and heads.
#pragma once

#include <string>
#include <vector>

#include "tttlab/model/config.hpp"

namespace tttlab {

struct AblationRow {
  std::string name;
  std::string change;   // what this row adds, for the table
  ModelConfig model;
};

// The seven rows for a base preset and training sequence length T.
std::vector<AblationRow> table1_rows(const ModelConfig& base, int seq_len);

}  // namespace tttlab
