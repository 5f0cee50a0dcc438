// tttlab/nn/norms.hpp — RMSNorm and full-width LayerNorm over the features of each token.
//
// RMSNorm (the model's pre-norms seq_norm, ffn_norm, conv norm and the final ln_f; docs/MATH.md §8.2):
//   r_t = 1 / sqrt(mean_j X[t,j]² + ε),   Y[t,j] = X[t,j] · r_t · w[j]
// LayerNorm (the TTT layer's post_norm over the full width D; docs/MATH.md §8.1), BIASED variance:
//   μ_t = mean_j X[t,j],  σ_t = sqrt(mean_j (X[t,j] − μ_t)² + ε),  x̂ = (X − μ_t)/σ_t,
//   Y[t,j] = x̂[t,j]·γ[j] + β[j]
// ε defaults to 1e-6 (k_norm_eps) for both, as in the official configs.
//
// Shapes (conventions of tttlab/nn/views.hpp): X, Y, dY, dX [T, D]; w, γ, β and their grads [D].
// Rows are independent. Arithmetic is in S: fp32 inputs accumulate the mean of squares in fp32
// (as the official code, which runs these norms in fp32) and fp64 inputs in fp64.
// The backward recomputes r_t (or μ_t, σ_t) from X: O(T·D), cheaper than storing and reading them.
//
// Backward (g = dY ⊙ w, resp. dY ⊙ γ):
//   RMSNorm:   dX_t = r_t·g_t − r_t³·(g_t·x_t)/D · x_t          (OVERWRITTEN)
//              dw  += Σ_t dY_t ⊙ x_t·r_t                         (ADDED to)
//   LayerNorm: dX_t = (1/σ_t)(g_t − mean(g_t) − x̂_t·mean(g_t ⊙ x̂_t))  (OVERWRITTEN)
//              dγ  += Σ_t dY_t ⊙ x̂_t,   dβ += Σ_t dY_t           (ADDED to)
#pragma once

#include "tttlab/nn/views.hpp"

namespace tttlab {

template <class S>
void rms_norm_forward(ConstMatRef<S> X, ConstRowRef<S> w, Mat<S>& Y, S eps = S(k_norm_eps));

template <class S>
void rms_norm_backward(ConstMatRef<S> X, ConstRowRef<S> w, ConstMatRef<S> dY, Mat<S>& dX,
                       RowRef<S> dw, S eps = S(k_norm_eps));

template <class S>
void layer_norm_forward(ConstMatRef<S> X, ConstRowRef<S> gamma, ConstRowRef<S> beta, Mat<S>& Y,
                        S eps = S(k_norm_eps));

template <class S>
void layer_norm_backward(ConstMatRef<S> X, ConstRowRef<S> gamma, ConstMatRef<S> dY, Mat<S>& dX,
                         RowRef<S> dgamma, RowRef<S> dbeta, S eps = S(k_norm_eps));

}  // namespace tttlab
