// tttlab/analysis/nonparametric.hpp — Theorem 2 of the TTT paper, checked numerically: causal softmax
// attention is the Nadaraya–Watson estimator, a nonparametric learner whose "training set" at token t
// is every pair seen so far (docs/MATH.md §9.2).
//
// For one head with queries, keys and values q_t, k_i, v_i (rows of Q, K, V, each [T, d]):
//   training set at t   D_t = {(k_i, v_i) : i ≤ t}
//   kernel              κ(q, k) = exp(c · q·k)          c = 1/√d in this project's attention (§8.6)
//   prediction          ŷ_t = Σ_{i≤t} κ(q_t, k_i) v_i / Σ_{j≤t} κ(q_t, k_j)
//   kernel weights      w_ti = κ(q_t, k_i) / Σ_{j≤t} κ(q_t, k_j)   (i ≤ t; 0 for i > t)
// nadaraya_watson() computes these with plain loops in double precision, sharing no code with the
// attention in tttlab/nn/attention.hpp, so comparing ŷ with the layer's own output Z tests the theorem
// rather than restating the implementation. The layer's Z comes from softmax_attention_heads(), which
// runs the layer's own training forward (SoftmaxAttentionLayer::trace).
//
// The learner's "state" is D_t itself: 2·t·d numbers after t tokens, growing with the context, where
// TTT-Linear keeps a fixed d × d matrix W (docs/MATH.md §6).
#pragma once

#include <vector>

#include "tttlab/seq/attention_layers.hpp"
#include "tttlab/tensor.hpp"

namespace tttlab {

// One head of a softmax-attention layer as the layer computed it, converted to double.
struct AttentionHeadValues {
  Mat<double> Q, K, V;  // [T, d]; Q and K after RoPE, as the scores use them
  Mat<double> Z;        // [T, d]: the layer's attention output for this head (before o_proj)
  double kernel_scale = 0;  // the layer's score scale c = 1/√d
};

// Every head of `layer` reading x [T, D] from the empty prefix (one forward of the layer's own code,
// in the layer's precision S). Returns H heads in order.
template <class S>
std::vector<AttentionHeadValues> softmax_attention_heads(const SoftmaxAttentionLayer<S>& layer, ConstMatRef<S> x);

struct NadarayaWatson {
  Mat<double> weights;  // [T, T] lower triangular: w_ti (row t sums to 1)
  Mat<double> output;   // [T, d]: ŷ_t
};

// The estimator above with kernel exp(scale · q·k). Q, K [T, d], V [T, dv]. Each row's exponents
// are shifted by their maximum before exp: that multiplies every κ(q_t, ·) by the same constant,
// which cancels in the ratio, and keeps exp finite for any scale. Throws std::invalid_argument on
// mismatched shapes.
NadarayaWatson nadaraya_watson(const Mat<double>& Q, const Mat<double>& K, const Mat<double>& V, double scale);

// ŷ against the layer's output, and how concentrated the kernel is.
struct NonparametricComparison {
  double max_abs_diff = 0;    // max over t, j of |ŷ − Z|[t, j]
  double max_abs_output = 0;  // max |Z|
  double max_rel_diff = 0;    // max_abs_diff / max_abs_output (max_abs_diff when Z ≡ 0)
  double row_sum_err = 0;     // max_t |Σ_i w_ti − 1|
  std::vector<double> token_diff;       // [T] max_j |ŷ − Z|[t, j]
  std::vector<double> effective_pairs;  // [T] 1 / Σ_i w_ti²: t + 1 for uniform weights, 1 for one pair
  std::vector<double> max_weight;       // [T] max_i w_ti
  std::vector<double> entropy;          // [T] −Σ_i w_ti ln w_ti (nats)
};
// Throws std::invalid_argument when Z's shape differs from nw.output's.
NonparametricComparison compare_with_attention(const NadarayaWatson& nw, const Mat<double>& Z);

// State sizes in numbers: the stored pairs after t tokens (t keys and t values of width d) and
// TTT-Linear's weight matrix W (d × d; its bias adds d more and is left out, as in the paper).
inline long nonparametric_state_numbers(long t, int d) { return 2 * t * static_cast<long>(d); }
inline long ttt_linear_state_numbers(int d) { return static_cast<long>(d) * d; }

}  // namespace tttlab
