// tttlab/fastweight/titans.hpp — the inner loop of Titans' memory, as flash-linear-attention's
// reference computes it (fla/ops/titans/naive.py, chunk_titans_linear_ref), for ONE head of ONE
// sequence (docs/MATH.md §11.9).
//
// Inputs (already projected; no convolution or scale is applied here):
//   q, k, v   [T, D]   read key, write key, value (K = V = D: the inner loss has a residual k)
//   w, b      [D]      the LayerNorm's weight and bias, shared by the inner loss and the output
//   theta     [T]      the inner learning rate θ_t
//   alpha     [T]      the forgetting (weight decay) α_t: the memory keeps 1 − α_t of itself
//   eta       [T]      the momentum η_t (the "surprise" carried from token to token)
//   M0        [D, D]   the initial memory; the momentum starts at S_0 = 0
//   mini_batch         b ≥ 1: gradients are taken at the memory of the mini-batch's start (b = 1:
//                      every token's own gradient); FLA's chunk_size
//   eps                the LayerNorm's ε (FLA's default 1e-6)
//   → o [T, D], the final memory M_T, momentum S_T, and the memory at the last mini-batch's start
//
// The recurrence, row-vector convention (o = q M, as matrix_rules.hpp), with c(t) the first token of
// t's mini-batch and M_{c(t)−1} the memory before it:
//   z   = k_t M_{c(t)−1},  ẑ = (z − mean z) / σ,  σ = sqrt(var z + eps)   (biased variance)
//   g   = (w ⊙ ẑ + b − (v_t − k_t)) ⊙ w          the residual of TTT's LN + residual loss, times w
//   u_t = D·g − (Σg + ẑ·Σ(g ⊙ ẑ)) / (σ D)        FLA's "v_new" (see below)
//   S_t = η_t S_{t−1} − 2 θ_t k_tᵀ u_t
//   M_t = (1 − α_t) M_{t−1} + S_t
//   o_t = y + w ⊙ LN(y) + b,  y = q_t M_t           read AFTER the write
// FLA's u_t is not the gradient of its loss ℓ = ½‖w ⊙ LN(k M) + b + k − v‖² with respect to z (that
// is (D·g − Σg − ẑ·Σ(g ⊙ ẑ)) / (σ D), as in TTT's dual form): an operator precedence puts D·g
// outside the division. We compute FLA's u_t (the fixture pins it) and say so in §11.9.
//
// Forms (the same function for every b: agreement to rounding in fp64, tests/core/test_titans.cpp):
//   titans_primal   token by token (titans_step); can report every step to an observer.
//   titans_chunked  per mini-batch: all b values u from the start memory at once, then the outputs
//                   and the end state in closed form, M_i = β_i M_p + f_i S_p − 2 Σ_{j≤i} G_ij k_jᵀ u_j
//                   with β, f, G the products of (1 − α) and η inside the mini-batch (§11.9).
// Per-token gradients (b = 1) and mini-batch gradients (b > 1) are different functions; §11.9 gives
// their measured difference. titans_backward is the manual backward of the primal form.
//
// Ownership: callers own every argument; the functions write only their outputs. Arguments are
// validated first (std::invalid_argument). Instantiated for float and double.
#pragma once

#include <functional>

#include "tttlab/tensor.hpp"

namespace tttlab {

// The hyper-parameters of the inner loop.
struct TitansInner {
  int mini_batch = 1;  // b
  double eps = 1e-6;   // the LayerNorm's ε
};

// The recurrent state after t tokens: what decoding carries.
template <class S>
struct TitansState {
  Mat<S> memory;    // M_t [D, D]
  Mat<S> momentum;  // S_t [D, D]
  Mat<S> start;     // M at the start of the current mini-batch (gradients are taken here)
  long tokens = 0;  // t
  // M_0 = m0, S_0 = 0, t = 0.
  static TitansState begin(ConstMatRef<S> m0);
};

// One token: advances `st` by (q, k, v, θ, α, η) and returns o_t [D]. titans_primal is this in a loop.
template <class S>
RowVec<S> titans_step(TitansState<S>& st, const RowVec<S>& q, const RowVec<S>& k,
                      const RowVec<S>& v, const RowVec<S>& w, const RowVec<S>& b, S theta, S alpha,
                      S eta, const TitansInner& inner);

// The inner loss the step pretends to descend (it steps by 2θ·u), ℓ(M) = ‖w ⊙ LN(k M) + b + k − v‖².
template <class S>
S titans_loss(const Mat<S>& memory, const RowVec<S>& k, const RowVec<S>& v, const RowVec<S>& w,
              const RowVec<S>& b, double eps);

// What the primal form reports for token t. References are valid only during the callback.
template <class S>
struct TitansStep {
  long token = 0;
  S theta = 0, alpha = 0, eta = 0;
  S loss_before = 0;                      // ℓ(M_{t−1}; k_t, v_t)
  S loss_after = 0;                       // ℓ(M_t; k_t, v_t)
  const Mat<S>* memory_before = nullptr;  // M_{t−1}
  const Mat<S>* memory_after = nullptr;   // M_t
  const Mat<S>* momentum = nullptr;       // S_t
  const RowVec<S>* output = nullptr;      // o_t
};

template <class S>
using TitansObserver = std::function<void(const TitansStep<S>&)>;

template <class S>
struct TitansOutput {
  Mat<S> o;  // [T, D]
  TitansState<S> state;
};

template <class S>
TitansOutput<S> titans_primal(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                              const RowVec<S>& w, const RowVec<S>& b, const Vec<S>& theta,
                              const Vec<S>& alpha, const Vec<S>& eta, ConstMatRef<S> M0,
                              const TitansInner& inner, const TitansObserver<S>& observer = {});

template <class S>
TitansOutput<S> titans_chunked(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                               const RowVec<S>& w, const RowVec<S>& b, const Vec<S>& theta,
                               const Vec<S>& alpha, const Vec<S>& eta, ConstMatRef<S> M0,
                               const TitansInner& inner);

// Both forms continuing a carried state (streaming: a prefix already read, possibly ending inside a
// mini-batch; the chunked form then first completes that mini-batch). The M0 forms above are these
// from TitansState::begin(M0).
template <class S>
TitansOutput<S> titans_primal(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                              const RowVec<S>& w, const RowVec<S>& b, const Vec<S>& theta,
                              const Vec<S>& alpha, const Vec<S>& eta, const TitansState<S>& from,
                              const TitansInner& inner, const TitansObserver<S>& observer = {});
template <class S>
TitansOutput<S> titans_chunked(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                               const RowVec<S>& w, const RowVec<S>& b, const Vec<S>& theta,
                               const Vec<S>& alpha, const Vec<S>& eta, const TitansState<S>& from,
                               const TitansInner& inner);

// Gradients of a scalar loss L(o, M_T) with respect to every input.
template <class S>
struct TitansGrads {
  Mat<S> dq, dk, dv;            // [T, D]
  RowVec<S> dw, db;             // [D]
  Vec<S> dtheta, dalpha, deta;  // [T]
  Mat<S> dM0;                   // [D, D]
};

// Backward of the primal form, given dO = ∂L/∂o [T, D] and dM_T = ∂L/∂M_T [D, D]. Recomputes and
// keeps the T + 1 memories and momenta (2·T·D² numbers).
template <class S>
TitansGrads<S> titans_backward(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                               const RowVec<S>& w, const RowVec<S>& b, const Vec<S>& theta,
                               const Vec<S>& alpha, const Vec<S>& eta, ConstMatRef<S> M0,
                               const TitansInner& inner, ConstMatRef<S> dO,
                               ConstMatRef<S> dM_final);

// The same gradients by the chunked form: a mini-batch at a time in reverse, its outputs' and end
// state's adjoints taken through the closed form titans_chunked evaluates (products of [L, D] and
// [L, L] matrices instead of T rank-one steps), θ, α, η through the coefficients' recursions. Keeps
// the memory and momentum entering each mini-batch only (2·⌈T/b⌉·D² numbers). Equal to
// titans_backward to rounding (tests/core/test_titans.cpp); what the layer's CPU backward runs.
template <class S>
TitansGrads<S> titans_backward_chunked(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                                       const RowVec<S>& w, const RowVec<S>& b, const Vec<S>& theta,
                                       const Vec<S>& alpha, const Vec<S>& eta, ConstMatRef<S> M0,
                                       const TitansInner& inner, ConstMatRef<S> dO,
                                       ConstMatRef<S> dM_final);

}  // namespace tttlab
