// core/src/seq/short_conv_branch.hpp — internal to core/src/seq: the front of the blocks that the
// delta-rule family shares (DeltaNet and Gated DeltaNet, tttlab/seq/deltanet_layer.hpp; Titans,
// tttlab/seq/titans_layer.hpp; docs/MATH.md §11.8–§11.9).
//
// One branch (q, k or v) per token x [1, D], rows as everywhere here:
//
//   u = x W  [D, D] (no bias),   c = conv(u)  (depthwise causal, width K, no bias: FLA's
//   ShortConvolution),   a = silu(c)
//
// Streaming: ShortConvHistory keeps the last K−1 inputs u of each branch's convolution (oldest first,
// [K−1, D]), as tttlab/nn/causal_conv.hpp's `history`; a fresh sequence starts from zeros.
//
// Per-head L2 normalisation of a [T, H·d] matrix, heads side by side in the columns:
//   â_h = a_h · s / sqrt(‖a_h‖² + ε)
// with s = 1 computed as a division (one rounding), any other s as a product with s / sqrt(·).
//
// The names live in tttlab::seq_detail (not in an anonymous namespace) so that the unity builds, which
// compile several of core's sources in one translation unit, see one definition.
#pragma once

#include <string>

#include "tttlab/seq/sequence_layer.hpp"
#include "tttlab/tensor.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab::seq_detail {

// One branch's forward values, all [T, D]: the projection u, the convolution's output c, silu(c).
template <class S>
struct ShortConvBranch {
  Mat<S> u, c, a;
};

// The q, k and v branches' convolution histories.
template <class S>
struct ShortConvHistory {
  Mat<S> q, k, v;  // [K−1, D] each
  static ShortConvHistory zeros(int K, int D);
};

// u = x W, c = conv(u) continuing `history` (left holding the last K−1 inputs), a = silu(c).
template <class S>
void short_conv_branch_forward(ConstMatRef<S> x, const Mat<S>& W, const Mat<S>& conv_w,
                               Mat<S>& history, ShortConvBranch<S>& out);

// The backward of one branch over a whole sequence from a zero history: given da = ∂L/∂a, ADDS into
// gW [D, D] and g_conv [D, K], and ADDS x's part into dx [T, D].
template <class S>
void short_conv_branch_backward(const Mat<S>& x, const Mat<S>& W, const Mat<S>& conv_w,
                                const ShortConvBranch<S>& br, const Mat<S>& da, Mat<S>& gW,
                                Mat<S>& g_conv, Mat<S>& dx);

// out = the per-head L2 normalisation of a [T, H·d] above (resized).
template <class S>
void l2_normalize_heads(const Mat<S>& a, int d, S scale, S eps, Mat<S>& out);

// The backward of l2_normalize_heads: du_h = s (g_h − a_h (a_h·g_h)/n²) / n, n = sqrt(‖a_h‖² + ε),
// with the same division-or-product rule for s. Overwrites da (resized).
template <class S>
void l2_normalize_heads_backward(const Mat<S>& a, const Mat<S>& dout, int d, S scale, S eps,
                                 Mat<S>& da);

template <class S>
S seq_sigmoid(S z) {
  return S(1) / (S(1) + std::exp(-z));
}

// Initialisation: entries N(0, std), and U[lo, hi), drawn in storage order.
template <class S>
Mat<S> seq_normal_mat(Eigen::Index r, Eigen::Index c, double std, Rng& rng);
template <class S>
Mat<S> seq_uniform_mat(Eigen::Index r, Eigen::Index c, double lo, double hi, Rng& rng);
// A convolution weight [D, K] with PyTorch's Conv1d default U(±1/√K) (fan-in K).
template <class S>
Mat<S> seq_conv_init(int D, int K, Rng& rng);

// Throws std::invalid_argument("<layer> layer: <name> must be [r, c], got [rows, cols]") unless the
// shape matches.
void require_param_shape(const char* layer, Eigen::Index rows, Eigen::Index cols, Eigen::Index r,
                         Eigen::Index c, const char* name);

// Visits a matrix or a row parameter under its name (SequenceLayer::for_each_param).
template <class S>
void visit_param(const ParamVisitor<S>& f, Mat<S>& m, const char* name) {
  f(Eigen::Map<Mat<S>>(m.data(), m.rows(), m.cols()), name);
}
template <class S>
void visit_param(const ParamVisitor<S>& f, RowVec<S>& m, const char* name) {
  f(Eigen::Map<Mat<S>>(m.data(), 1, m.cols()), name);
}

}  // namespace tttlab::seq_detail
