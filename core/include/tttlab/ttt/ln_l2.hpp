// tttlab/ttt/ln_l2.hpp — the inner loss of the TTT layers and its fused gradient.
//
// For one row z [d] with target r [d], LayerNorm weights γ, β [d] and ε:
//   μ = mean(z),  σ = sqrt(mean((z−μ)²) + ε)  (BIASED variance),  x̂ = (z−μ)/σ,  y = γ⊙x̂ + β
//   ℓ = ½‖y − r‖²           (summed over the d features, not averaged: the 1/d lives in η)
//   g = ∂ℓ/∂z = (1/σ)·P(ĝ),  ĝ = γ⊙(y − r),  P(u) = u − mean(u) − x̂·mean(u⊙x̂)
// (ttt-spec.md §3 step 3, "fused LN + L2 backward"). With the LayerNorm switched off, y = z and g = z − r.
//
// Shapes: Z, R, G are [n, d] row-major, one row per token. Rows are independent.
#pragma once

#include "tttlab/tensor.hpp"

namespace tttlab {

// Row-wise LayerNorm: Y = γ⊙x̂ + β. Y may not alias Z.
template <class S>
void layer_norm_rows(ConstMatRef<S> Z, const RowVec<S>& gamma, const RowVec<S>& beta, S eps,
                     Mat<S>& Y);

// Fused gradient of ½‖LN(z) − r‖² with respect to z, row-wise; optionally also the losses [n].
template <class S>
void ln_l2_grad(ConstMatRef<S> Z, ConstMatRef<S> R, const RowVec<S>& gamma, const RowVec<S>& beta,
                S eps, Mat<S>& G, Vec<S>* losses = nullptr);

// The loss alone, ½‖LN(z) − r‖² (or ½‖z − r‖² with use_ln = false), for one row.
template <class S>
S ln_l2_loss(const RowVec<S>& z, const RowVec<S>& r, const RowVec<S>& gamma,
             const RowVec<S>& beta, S eps, bool use_ln);

}  // namespace tttlab
