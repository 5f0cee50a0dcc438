// tttlab/ttt/inner.hpp — the TTT inner loop for ONE head of ONE sequence.
//
// This is the part of a TTT layer that learns at test time (docs/MATH.md §3–§6). Its inputs are the
// head's already-projected views of the sequence, and its output is the head's block of the layer
// output before the post-norm:
//
//   Q, K, V   [T, d]   test view, training view, label view (after convs and RoPE)
//   λ         [T]      per-token learning rate  λ_t = η_base·σ(x_t·θ_h + β_h)/d   (see eta.hpp)
//   τ         [b]      token-index scale        τ_i = max(1/i + δ_i, 0), i = 1..b  (see eta.hpp)
//   γ, β      [d]      the inner LayerNorm, used inside the loss and on the output
//   state     the inner model's weights (W1, b1 [, W2, b2]) plus mini-batch bookkeeping
//   → O       [T, d]   O_t = q_t + LN(f(q_t; W_t))   (official: residual and LN on)
//
// Mini-batch gradient descent, official form: the gradients of all tokens of a mini-batch are taken
// at the state at the START of the mini-batch; token i (1-based position in its mini-batch) is read
// out with  W_i = W − τ_i Σ_{j≤i} λ_j ∇_W ℓ_j  (the η matrix E[i,j] = τ_i λ_j, tril including the
// diagonal), and the state is committed with i = b at the end of each mini-batch.
//
// Two forms compute the same function (tests prove it to ~1e-15 in fp64):
//   inner_forward_dual    per mini-batch matrix products; never forms W_i inside a mini-batch.
//   inner_forward_primal  token by token; materialises W_t and can report every step to an observer.
// Both CONTINUE a stream: they start from `state` (which may sit in the middle of a mini-batch) and
// leave it where the input ends. A sequence split into any chunks, each run by either form, gives the
// same outputs as one run over the whole sequence. When T is not a multiple of b the last mini-batch is
// short and stays open (uncommitted) in the state, exactly as the official code treats the remainder.
//
// Ownership: callers own every argument; functions write only `state`, `out`, and what the observer
// is handed for the duration of one callback. Not thread-safe on one state; distinct heads may run on
// distinct threads.
#pragma once

#include <functional>
#include <vector>

#include "tttlab/tensor.hpp"

namespace tttlab {

enum class InnerModel { Linear, MLP };

// Options of the inner model f and its loss. Defaults match the official code.
struct InnerOptions {
  InnerModel model = InnerModel::Linear;
  int mini_batch = 16;       // b ≥ 1. b = 1 is online GD; b ≥ T is batch GD (one mini-batch).
  int mlp_expansion = 4;     // TTT-MLP hidden width = mlp_expansion · d.
  bool layer_norm = true;    // f(k) = LN(k W + c) (on) or k W + c (off). Also the output LN.
  bool residual = true;      // f(k) = k + LN(...): target V − K and output Q + ... (on); target V (off).
  bool bias = true;          // inner biases b1 (and b2) exist and learn (on), or are absent (off).
  double ln_eps = 1e-6;      // ε of the inner LayerNorm (official Flax/PyTorch value).
};

// The inner model's weights for one head. Linear uses W1 [d, d], b1 [1, d]. MLP uses W1 [d, h],
// b1 [1, h], W2 [h, d], b2 [1, d] with h = mlp_expansion·d. Unused members are empty (size 0).
// The same struct doubles as the gradient accumulators (same shapes).
template <class S>
struct InnerWeights {
  Mat<S> W1;
  RowVec<S> b1;
  Mat<S> W2;
  RowVec<S> b2;

  static InnerWeights zeros(const InnerOptions& opt, int d);
  void set_zero();
  // this −= s · other, member by member (used to materialise W_i = W − τ_i·A).
  void sub_scaled(const InnerWeights& other, S s);
};

// The streaming state of one head: what a decoder keeps between tokens (docs/MATH.md §6).
//   base  = the committed state at the start of the current mini-batch,
//   acc   = Σ_{j<pos} λ_j ∇ℓ_j over the tokens already seen in this mini-batch (zero when pos = 0),
//   pos   = how many tokens of the current mini-batch were consumed, 0 ≤ pos < b.
// The weights in effect after the last token are  base − τ_pos·acc  (current_weights()).
template <class S>
struct InnerState {
  InnerWeights<S> base;
  InnerWeights<S> acc;
  int pos = 0;

  static InnerState start(const InnerWeights<S>& initial);  // fresh sequence from W0
  InnerWeights<S> current_weights(const Vec<S>& tau) const;
};

// Per-head constants of one inner loop.
template <class S>
struct InnerHeadParams {
  RowVec<S> ln_weight;  // γ [d]
  RowVec<S> ln_bias;    // β [d]
  Vec<S> tau;           // τ [b] (token-index scale, one entry per position in a mini-batch)
};

// What the primal form reports for each token t (the paper's Fig. 5 losses and the update itself).
// References are valid only during the callback.
template <class S>
struct InnerStepRecord {
  long token = 0;        // index of the token within the call's input
  int pos = 0;           // 0-based position in its mini-batch (pos = b−1 commits the state)
  S lambda = 0;          // λ_t: this token's own gradient weight
  S tau = 0;             // τ_{pos+1}: the scale applied to the accumulated gradients at this token
  S loss_initial = 0;    // ℓ(W_0; x_t)   with W_0 the sequence's initial state (if given)
  S loss_before = 0;     // ℓ(W_{t−1}; x_t)
  S loss_after = 0;      // ℓ(W_t; x_t)
  const RowVec<S>* k = nullptr;        // k_t [d] (the key / training view)
  const RowVec<S>* grad_z = nullptr;   // ∂ℓ_t/∂z at the mini-batch start state: Linear g_t [d],
                                       // MLP: the gradient at Z1 [h]. ∇_W1 ℓ_t = k_tᵀ·grad_z.
  const RowVec<S>* x2 = nullptr;       // MLP only: gelu(Z1) row [h] (the key of layer 2)
  const RowVec<S>* grad_z2 = nullptr;  // MLP only: the gradient at Z2 [d]. ∇_W2 ℓ_t = x2ᵀ·grad_z2.
  const InnerWeights<S>* w_before = nullptr;  // W_{t−1}
  const InnerWeights<S>* w_after = nullptr;   // W_t
  const RowVec<S>* output = nullptr;          // o_t [d]
};

template <class S>
using InnerObserver = std::function<void(const InnerStepRecord<S>&)>;

// Dual form. Q, K, V: [T, d]; lambda: [T]; out: resized to [T, d]. Continues `state`.
template <class S>
void inner_forward_dual(const InnerOptions& opt, const InnerHeadParams<S>& p, ConstMatRef<S> Q,
                        ConstMatRef<S> K, ConstMatRef<S> V, const Vec<S>& lambda,
                        InnerState<S>& state, Mat<S>& out);

// Primal form. Same contract as the dual form; in addition calls `observer` (if set) after each
// token. `initial` (optional) is the sequence's W_0 for ℓ(W_0; x_t); without it loss_initial is 0.
template <class S>
void inner_forward_primal(const InnerOptions& opt, const InnerHeadParams<S>& p, ConstMatRef<S> Q,
                          ConstMatRef<S> K, ConstMatRef<S> V, const Vec<S>& lambda,
                          InnerState<S>& state, Mat<S>& out,
                          const InnerObserver<S>& observer = {},
                          const InnerWeights<S>* initial = nullptr);

// The inner loss  ℓ(W; k, v) = ½‖f(k; W) − target‖²  for one token with weights W (both models,
// every option). target = v − k with the residual, v without.
template <class S>
S inner_loss(const InnerOptions& opt, const InnerHeadParams<S>& p, const InnerWeights<S>& W,
             const RowVec<S>& k, const RowVec<S>& v);

// The inner model's read-out for one token without the output residual/LN: z = f_raw(q; W)
// (Linear: qW1 + b1; MLP: gelu(qW1 + b1)W2 + b2). Used by the primal form and by probes.
template <class S>
RowVec<S> inner_apply(const InnerOptions& opt, const InnerWeights<S>& W, const RowVec<S>& q);

}  // namespace tttlab
