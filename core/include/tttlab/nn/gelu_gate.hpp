// tttlab/nn/gelu_gate.hpp — the output gate of the Mamba-backbone TTT layer (docs/MATH.md §8.1):
//
//   A = X·W_g,   Out = gelu_tanh(A) ⊙ Z
//
// X is the layer input (the seq-normed hidden state) and Z the post-normed TTT output; GELU is the
// tanh approximation (tttlab/nn/activations.hpp). W_g has no bias.
//
// Shapes (conventions of tttlab/nn/views.hpp):
//   X [T, D_in]   W_g [D_in, D]   Z, Out [T, D]        (in the model D_in = D)
//
// The forward fills a GeluGateCache (A and gelu(A), [T, D] each) that the backward reads; it is plain
// storage owned by the caller and valid only for the inputs of the forward that filled it.
//
// Backward, given dOut [T, D]:
//   dZ = dOut ⊙ gelu(A)                 (OVERWRITTEN)
//   dA = dOut ⊙ Z ⊙ gelu′(A)
//   dW_g += Xᵀ·dA                       (ADDED to)
//   dX = dA·W_gᵀ                        (OVERWRITTEN)
#pragma once

#include "tttlab/nn/views.hpp"

namespace tttlab {

template <class S>
struct GeluGateCache {
  Mat<S> pre;  // A = X·W_g     [T, D]
  Mat<S> act;  // gelu_tanh(A)  [T, D]
};

template <class S>
void gelu_gate_forward(ConstMatRef<S> X, ConstMatRef<S> W_g, ConstMatRef<S> Z, Mat<S>& Out,
                       GeluGateCache<S>& cache);

template <class S>
void gelu_gate_backward(ConstMatRef<S> X, ConstMatRef<S> W_g, ConstMatRef<S> Z,
                        const GeluGateCache<S>& cache, ConstMatRef<S> dOut, Mat<S>& dX,
                        MatRef<S> dW_g, Mat<S>& dZ);

}  // namespace tttlab
