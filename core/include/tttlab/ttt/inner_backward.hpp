// tttlab/ttt/inner_backward.hpp — the outer-loop gradient through one head's inner loop.
//
// The forward (inner.hpp) contains a gradient step, so its backward is SECOND ORDER: it differentiates
// through the fused LN + L2 gradient G(Z, R; γ, β) and, for TTT-MLP, through gelu′. Derivation: docs/MATH.md
// §7.3 for TTT-Linear, §7.4 for TTT-MLP (comments in inner_backward.cpp). Everything is
// checked against central finite differences in fp64 (tests/core/test_ttt_backward.cpp).
//
// Scope: a whole sequence from a fresh state (pos = 0), the training case. Mini-batches are walked in
// reverse; each one recomputes its own forward intermediates from the state at its start.
//
// Gradient checkpointing through time: with checkpoint_group = g > 0, the forward keeps only the state at
// the start of every g-th mini-batch, and the backward recomputes the states inside a group just before
// walking it (memory: n/g + g states instead of n). g = 0 keeps every state. The arithmetic is the same
// either way, so the gradients are bit-identical for every g (docs/MATH.md §10, oracle 9).
#pragma once

#include "tttlab/ttt/inner.hpp"

namespace tttlab {

// Gradients of one head's inner loop. Activations' gradients are overwritten; all members are resized.
template <class S>
struct InnerGrads {
  Mat<S> dQ, dK, dV;          // [T, d]
  Vec<S> dlambda;             // [T]
  Vec<S> dtau;                // [b]
  RowVec<S> dln_weight;       // dγ [d]
  RowVec<S> dln_bias;         // dβ [d]
  InnerWeights<S> dW0;        // same shapes as W0
};

// Given dO = ∂L/∂O [T, d], computes every gradient of L through inner_forward_dual run from
// InnerState::start(W0). The final state is not an output (its gradient is zero).
template <class S>
void inner_backward(const InnerOptions& opt, const InnerHeadParams<S>& p, ConstMatRef<S> Q,
                    ConstMatRef<S> K, ConstMatRef<S> V, const Vec<S>& lambda,
                    const InnerWeights<S>& W0, ConstMatRef<S> dO, InnerGrads<S>& grads,
                    int checkpoint_group = 0);

}  // namespace tttlab
