// tttlab/nn/linear_attention.hpp — causal linear attention, the baseline of the TTT paper's
// Theorem 1: TTT-Linear with one mini-batch over the sequence, W0 = 0, no LayerNorm, no residual,
// no bias and η ≡ 1 (½-loss convention) IS this layer (docs/MATH.md §9.1; §10, oracle 4).
//
// Per head h (columns h·d .. (h+1)·d − 1 of every [T, D] matrix, d = D / heads), no scaling and no
// normalisation:
//   z_t = Σ_{s ≤ t} (q_t · k_s) v_s
// Three forms compute the same function:
//   quadratic  Z_h = tril(Q_h K_hᵀ)·V_h  (tril keeps the diagonal)   linear_attention_forward
//   recurrent  S_t = S_{t−1} + k_tᵀ v_t,  z_t = q_t·S_t  ([d, d] state)  linear_attention_recurrent
//   chunked    Z_h = Q_h·S + tril(Q_h K_hᵀ)·V_h,  S ← S + K_hᵀ V_h        linear_attention_chunk
// The recurrent and chunked forms CONTINUE a LinearAttentionState, so a sequence fed in any pieces
// gives the same Z as the quadratic form over the whole of it.
//
// Shapes (conventions of tttlab/nn/views.hpp): Q, K, V, Z, dZ, dQ, dK, dV [T, D]. No parameters, so
// the backward (of the quadratic form from a zero state) only OVERWRITES dQ, dK, dV. With
// A = tril(Q_h K_hᵀ) and dA = tril(dZ_h V_hᵀ):
//   dV_h = Aᵀ·dZ_h,   dQ_h = dA·K_h,   dK_h = dAᵀ·Q_h
#pragma once

#include "tttlab/nn/views.hpp"

namespace tttlab {

template <class S>
void linear_attention_forward(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                              Mat<S>& Z);

template <class S>
void linear_attention_backward(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                               ConstMatRef<S> dZ, Mat<S>& dQ, Mat<S>& dK, Mat<S>& dV);

// The running sums of all heads. kv is [D, d]: rows h·d .. (h+1)·d − 1 are head h's
// S = Σ_s k_sᵀ v_s ([d, d], k and v as rows). A default-constructed (or cleared) state is the
// empty prefix and takes its shape from the first call. Owned by the caller; not thread-safe.
template <class S>
struct LinearAttentionState {
  Mat<S> kv;
  Eigen::Index tokens = 0;  // how many tokens have been absorbed
  void clear() {
    kv.resize(0, 0);
    tokens = 0;
  }
};

// Token by token (the definition as an RNN). Z [n, D] is OVERWRITTEN; the state is advanced.
template <class S>
void linear_attention_recurrent(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                                LinearAttentionState<S>& state, Mat<S>& Z);

// One chunk with matrix products. Z [n, D] is OVERWRITTEN; the state is advanced by the chunk.
template <class S>
void linear_attention_chunk(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                            LinearAttentionState<S>& state, Mat<S>& Z);

}  // namespace tttlab
