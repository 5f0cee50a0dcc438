// tttlab/nn/swiglu.hpp — the block's feed-forward: SwiGLU without biases (docs/MATH.md §8.2).
//
//   A = X·W_gate,  B = X·W_up,  H = silu(A) ⊙ B,  Y = H·W_down        silu(a) = a·σ(a)
//
// Shapes (conventions of tttlab/nn/views.hpp; F = the FFN width, "intermediate_size"):
//   X, Y [T, D]    W_gate, W_up [D, F]    W_down [F, D]    (official JAX names: w1, w3, w2)
//
// The forward fills a SwigluCache with the [T, F] intermediates that the backward reads; keeping them
// costs 4·T·F numbers and saves the backward two of its products. The cache is plain storage owned by
// the caller: reusing one cache across calls reuses its memory. It is valid for the X and weights of
// the forward that filled it; passing it to a backward with other inputs gives wrong gradients.
//
// Backward, given dY [T, D]:
//   dH = dY·W_downᵀ,  dA = dH ⊙ B ⊙ silu′(A),  dB = dH ⊙ silu(A),   silu′(a) = σ(a)(1 + a(1 − σ(a)))
//   dW_down += Hᵀ·dY,  dW_gate += Xᵀ·dA,  dW_up += Xᵀ·dB            (ADDED to)
//   dX = dA·W_gateᵀ + dB·W_upᵀ                                       (OVERWRITTEN)
#pragma once

#include "tttlab/nn/views.hpp"

namespace tttlab {

template <class S>
struct SwigluCache {
  Mat<S> gate;    // A = X·W_gate          [T, F]
  Mat<S> up;      // B = X·W_up            [T, F]
  Mat<S> act;     // silu(A)               [T, F]
  Mat<S> hidden;  // H = silu(A) ⊙ B       [T, F]
};

template <class S>
void swiglu_forward(ConstMatRef<S> X, ConstMatRef<S> W_gate, ConstMatRef<S> W_up,
                    ConstMatRef<S> W_down, Mat<S>& Y, SwigluCache<S>& cache);

template <class S>
void swiglu_backward(ConstMatRef<S> X, ConstMatRef<S> W_gate, ConstMatRef<S> W_up,
                     ConstMatRef<S> W_down, const SwigluCache<S>& cache, ConstMatRef<S> dY,
                     Mat<S>& dX, MatRef<S> dW_gate, MatRef<S> dW_up, MatRef<S> dW_down);

}  // namespace tttlab
