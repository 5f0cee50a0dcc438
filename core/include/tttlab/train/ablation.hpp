// tttlab/train/ablation.hpp — the rows of the TTT paper's Table 1, as model configurations.
//
// The chain: each row changes one thing from the row before it (Sun et al., Table 1; the row
// definitions are compared with the paper and the official code in docs/RESULTS.md, "Table 1: row
// definitions"). λ is the per-token rate, τ the token-index scale (docs/MATH.md §2.3), d the head dim.
//   1 linear-attention   linear attention without feature map or normalizer (the paper's "Linear attn.
//                        improved"), Transformer backbone
//   2 ttt-equivalence    TTT-Linear with one mini-batch over the sequence (b = T), W0 = 0 fixed, no
//                        LN, no residual, no bias, fixed λ = 1, τ = 1 (the sum of the gradients), no
//                        RoPE, no post-norm: the same function as row 1 (a test proves it)
//   3 +learnable-W0      W0 learned from N(0, 0.02)
//   4 +ln-residual       f(k) = k + LN(kW + b): LN, residual and bias inside the inner model; the
//                        layer also gets the official layer's RoPE and post-norm from here on. λ drops
//                        to the fixed 1/(2d) (η_base = 0.5), the official gate's value at
//                        initialisation (η_base σ(0)/d with η_base = 1), so that row 6 changes only
//                        learnability, not the scale
//   5 +mini-batch-16     b = 16, τ_i = 1/i with δ frozen at 0: each mini-batch step applies the MEAN
//                        of its gradients, as the official code does (λ still fixed at 1/(2d))
//   6 +learnable-eta     the official η: the learned gate λ = η_base σ(xθ + β)/d with η_base = 1 and
//                        the learned offsets δ in τ_i = max(1/i + δ_i, 0)
//   7 +mamba-backbone    the Mamba backbone: pre-conv, shared Q/K with convs, GELU gate
// Row 7 is the official TTT-Linear (M). All rows share the preset's width, depth and heads.
//
// Rows printed after the chain and NOT part of the paper's chain, each compared with one chain row:
//   5a mini-batch-16-sum  diagnostic: row 5 with τ = 1, the SUM of the mini-batch's gradients, a variant
//                         the official code cannot express (compared with row 5)
//   M2 mamba2             the paper's main baseline: Mamba-2 (the SSD layer, docs/MATH.md §8.8) with the
//                         Transformer backbone and its default sizes (compared with row 7, TTT-Linear (M))
#pragma once

#include <string>
#include <vector>

#include "tttlab/model/config.hpp"

namespace tttlab {

struct AblationRow {
  std::string id;       // "1".."7" for the chain, "5a" and "M2" outside it
  std::string name;     // e.g. "+mini-batch-16"
  std::string change;   // what this row adds, for the table
  bool in_chain = true; // false: a row outside the paper's chain
  ModelConfig model;
  std::string compare_with;  // outside the chain: the id of the chain row it is compared with
};

// The seven chain rows followed by the rows outside the chain, for a base preset and training sequence
// length T (every row's max_position_embeddings is T; rows 2–4 use b = T).
std::vector<AblationRow> table1_rows(const ModelConfig& base, int seq_len);

// One line with a row's key settings: layer, b, τ, λ, W0, LN/residual/bias, RoPE, post-norm and
// backbone, e.g. "ttt-linear b=16 tau=1/i(delta frozen) lambda=0.5/d fixed W0=learned LN+res+bias
// rope post-norm backbone=t". b is written "T" when it equals max_position_embeddings.
std::string ablation_settings(const ModelConfig& m);

}  // namespace tttlab
