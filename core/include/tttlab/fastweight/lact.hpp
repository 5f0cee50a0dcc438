// tttlab/fastweight/lact.hpp — LaCT's inner loop ("Test-Time Training Done Right", large-chunk TTT)
// for ONE head of ONE sequence (docs/MATH.md §11.10), as its authors' block_causal_lact_swiglu
// computes it (tests/reference/README.md, "LaCT against its authors' PyTorch inner loop").
//
// State: the fast weights of a SwiGLU MLP, in the reference's layout (column vectors inside f):
//   W0, W2 [d_h, d_k], W1 [d_v, d_h],   f_W(x) = W1 (silu(W0 x) ⊙ (W2 x))
// and as row vectors here: f_W(x) = (silu(x W0ᵀ) ⊙ (x W2ᵀ)) W1ᵀ.
//
// Inputs (already projected; nothing is normalised here: LaCT's layer L2-normalises q and k first):
//   q, k       [T, d_k]   read and write keys
//   v          [T, d_v]   values
//   lr0, lr1, lr2 [T]     per-token rates of W0, W1, W2 (the layer's softplus output)
//   momentum   [T]        per-token momentum (the layer's sigmoid output); empty: no momentum
//   W          the initial fast weights
//   chunk      C ≥ 1, the chunk size (LaCT's default 2048)
//   muon       orthogonalise each step by 5 Newton–Schulz iterations
//
// The loop (§11.10). The tokens are cut into chunks of C; every chunk but the last is read, then
// learnt from; the last one (from the last multiple of C below T, so C tokens when C divides T) is
// only read. For chunk c with weights W (from before the chunk):
//   o_t = f_W(q_t)                                        (apply: reads before the write)
//   G_i = −Σ_{t∈c} η_{i,t} ∇_{W_i} ℓ_t,   ℓ_t = −⟨f_W(k_t), v_t⟩   (one gradient: the chunk's sum)
//   M_i = G_i + m̄_c M_i,   m̄_c = mean_{t∈c} momentum_t,   M_i = 0 at the start (M_i = G_i
//                                                                    without momentum)
//   U_i = NS5(M_i) with Muon, else M_i;   W_i ← W_i + U_i
//   every row r: W_i[r] ← W_i[r] / (‖W_i[r]‖ + 1e-5) · ‖W_i[r] at the start of the sequence‖
//
// Two ways of computing it: lact_forward takes the whole sequence; lact_stream takes it in pieces
// of any length (one token when decoding), buffering the current chunk's keys, values, rates and
// momentum and updating when a token arrives after a full chunk. They are the same function
// (agreement to rounding in fp64: tests/core/test_lact.cpp). There is no parallel form over
// chunks: each chunk's weights depend on the last update nonlinearly. The backward is the manual
// reverse of this loop (every input, the initial weights and the rates included), checked against
// central finite differences in fp64 (tests/core/test_lact.cpp) and against autograd through the
// reference (tests/core/test_lact_fixtures.cpp).
//
// Ownership: callers own every argument; the functions write only their outputs. Arguments are
// validated first (std::invalid_argument, one line). Instantiated for float and double.
#pragma once

#include <array>
#include <functional>

#include "tttlab/tensor.hpp"

namespace tttlab {

// The fast weights of one head (layout above).
template <class S>
struct LactWeights {
  Mat<S> w0;  // [d_h, d_k]
  Mat<S> w1;  // [d_v, d_h]
  Mat<S> w2;  // [d_h, d_k]
};

// Newton–Schulz as the reference's zeropower_via_newtonschulz5 (in S, where the reference casts to
// bfloat16): a tall G is transposed, X = G / (‖G‖_F + 1e-7), then five steps
// X ← a X + (b A + c A²) X with A = X Xᵀ and (a, b, c) = (4.0848, −6.8946, 2.9270),
// (3.9505, −6.3029, 2.6377), (3.7418, −5.5913, 2.3037), (2.8769, −3.1427, 1.2046),
// (2.8366, −3.0525, 1.2012); transposed back.
template <class S>
Mat<S> lact_newton_schulz5(const Mat<S>& G);
// Its backward: ∂L/∂G given ∂L/∂NS5(G) (recomputes the five steps).
template <class S>
Mat<S> lact_newton_schulz5_backward(const Mat<S>& G, const Mat<S>& dOut);

// The chunk loss the observer reports: the mean over the chunk's tokens of ℓ_t = −⟨f_W(k_t), v_t⟩
// (the loss whose rate-weighted gradient the update descends; the rates differ per weight, so no
// single weighted loss is descended).
template <class S>
S lact_chunk_loss(const LactWeights<S>& W, ConstMatRef<S> k, ConstMatRef<S> v);

// What the forward reports after each chunk. References are valid only during the callback.
template <class S>
struct LactChunkStep {
  long chunk = 0;        // 0-based
  long first_token = 0;  // its tokens: [first_token, first_token + tokens)
  long tokens = 0;
  bool updated = false;  // false for the last chunk (only read)
  S momentum = 0;        // m̄_c as applied (0 without momentum or without an update)
  S loss_before = 0;     // lact_chunk_loss before the update
  S loss_after = 0;      // after it (= loss_before for the last chunk)
  const LactWeights<S>* weights_before = nullptr;  // the weights the chunk is read with
  const LactWeights<S>* weights_after = nullptr;   // after the update and the renormalisation
};

template <class S>
using LactObserver = std::function<void(const LactChunkStep<S>&)>;

template <class S>
struct LactOutput {
  Mat<S> o;                // [T, d_v]
  LactWeights<S> weights;  // after the last update: the weights the last chunk is read with
  int updates = 0;         // ⌊(T − 1) / C⌋ for T ≥ 1
};

// The forward. The observer (if set) is called after every chunk; without one no loss is computed.
template <class S>
LactOutput<S> lact_forward(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v, const Vec<S>& lr0,
                           const Vec<S>& lr1, const Vec<S>& lr2, const Vec<S>& momentum,
                           const LactWeights<S>& W, int chunk, bool muon,
                           const LactObserver<S>& observer = {});

template <class S>
struct LactGrads {
  Mat<S> dq, dk, dv;        // [T, d_k], [T, d_k], [T, d_v]
  Vec<S> dlr0, dlr1, dlr2;  // [T]
  Vec<S> dmomentum;         // [T]; empty without momentum
  LactWeights<S> dW;        // of the initial weights (through the renormalisation's target
                            // norms too)
};

// Gradients of a scalar loss L(o, W_final) with respect to every input, given dO = ∂L/∂o [T, d_v]
// and dW_final = ∂L/∂(LactOutput::weights) (each matrix empty for zero). Recomputes the forward and
// keeps every chunk's weights (3 · chunks weight sets).
template <class S>
LactGrads<S> lact_backward(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v, const Vec<S>& lr0,
                           const Vec<S>& lr1, const Vec<S>& lr2, const Vec<S>& momentum,
                           const LactWeights<S>& W, int chunk, bool muon, ConstMatRef<S> dO,
                           const LactWeights<S>& dW_final);

// The stream: the state of lact_forward between two pieces of a sequence.
template <class S>
struct LactStreamState {
  LactWeights<S> weights;           // the weights the next token is read with
  LactWeights<S> momentum;          // M (zero without momentum)
  std::array<Vec<S>, 3> row_norms;  // of the initial w0, w1, w2: the renormalisation's targets
  Mat<S> k, v;                      // the current chunk's tokens so far [n, d_k], [n, d_v], n ≤ C
  Vec<S> lr0, lr1, lr2, m;          // [n] (m empty without momentum)
  int chunk = 0;
  bool muon = false;
  bool use_momentum = false;
  long tokens = 0;  // read so far
  int updates = 0;  // made so far
};

// The state before the first token, from the initial weights.
template <class S>
LactStreamState<S> lact_stream_start(const LactWeights<S>& W, int chunk, bool muon,
                                     bool use_momentum);
// Reads the next tokens (any number, ≥ 0) and returns their outputs [n, d_v]; momentum has n
// entries when the state was started with momentum, none otherwise.
template <class S>
Mat<S> lact_stream(LactStreamState<S>& state, ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                   const Vec<S>& lr0, const Vec<S>& lr1, const Vec<S>& lr2, const Vec<S>& momentum);

}  // namespace tttlab
