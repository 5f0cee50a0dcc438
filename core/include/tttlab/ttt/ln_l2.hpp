// tttlab/ttt/ln_l2.hpp — the inner loss of the TTT layers and its fused gradient.
//
// For one row z [d] with target r [d], LayerNorm weights γ, β [d] and ε:
//   μ = mean(z),  σ = sqrt(mean((z−μ)²) + ε)  (BIASED variance),  x̂ = (z−μ)/σ,  y = γ⊙x̂ + β
//   ℓ = ½‖y − r‖²           (summed over the d features, not averaged: the 1/d lives in η)
//   g = ∂ℓ/∂z = (1/σ)·P(ĝ),  ĝ = γ⊙(y − r),  P(u) = u − mean(u) − x̂·mean(u⊙x̂)
// (docs/MATH.md §3.2, "fused LN + L2 backward"). With the LayerNorm switched off, y = z and g = z − r.
//
// Shapes: Z, R, G are [n, d] row-major, one row per token. Rows are independent.
#pragma once

#include "tttlab/tensor.hpp"

namespace tttlab {

// Row-wise LayerNorm: Y = γ⊙x̂ + β (the inner loss's and the head output's LN; the same function as
// nn/norms.hpp's layer_norm_forward, which it calls). Y may not alias Z.
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

// ---- Backward (for the outer loop) -----------------------------------------------------------------
// Gradients of activations are OVERWRITTEN (resized); gradients of parameters are ADDED to.

// Backward of layer_norm_rows: given dY, writes dZ and adds to dgamma, dbeta.
template <class S>
void layer_norm_rows_backward(ConstMatRef<S> Z, const RowVec<S>& gamma, S eps, ConstMatRef<S> dY,
                              Mat<S>& dZ, RowVec<S>& dgamma, RowVec<S>& dbeta);

// Backward of ln_l2_grad (the "second-order" kernel of docs/MATH.md §7.2): given dG = ∂L/∂G,
// writes dZ and dR and adds to dgamma, dbeta.
template <class S>
void ln_l2_grad_backward(ConstMatRef<S> Z, ConstMatRef<S> R, const RowVec<S>& gamma,
                         const RowVec<S>& beta, S eps, ConstMatRef<S> dG, Mat<S>& dZ, Mat<S>& dR,
                         RowVec<S>& dgamma, RowVec<S>& dbeta);

}  // namespace tttlab
