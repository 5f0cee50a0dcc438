// Causal linear attention (see tttlab/nn/linear_attention.hpp).
#include "tttlab/nn/linear_attention.hpp"

#include "checks.hpp"

namespace tttlab {
namespace {

using Index = Eigen::Index;
using nn_detail::require_shape;

// A fresh state becomes zeros of the right shape; a used one must match.
template <class S>
void prepare_state(const char* op, LinearAttentionState<S>& state, Index D, Index d) {
  if (state.kv.size() == 0 && state.tokens == 0) {
    state.kv.setZero(D, d);
    return;
  }
  require_shape(op, "state.kv", state.kv, D, d,
                "[D, d] of the first call; clear() the state for another shape");
}

// The checks every form of the forward starts with; returns the head width d.
template <class S>
Index check_forward(const char* op, ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                    const Mat<S>& Z) {
  const Index d = nn_detail::qkv_head_width(op, Q, K, V, heads);
  nn_detail::require_distinct_from_qkv(op, "output", Z, Q, K, V);
  return d;
}

}  // namespace

template <class S>
void linear_attention_forward(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                              Mat<S>& Z) {
  const char* op = "linear_attention_forward";
  const Index T = Q.rows(), D = Q.cols(), d = check_forward<S>(op, Q, K, V, heads, Z);
  Z.resize(T, D);
  // Eigen's triangular products take the address of element (0, 0), even of an empty matrix.
  if (T == 0) return;
  Mat<S> A(T, T);
  for (int h = 0; h < heads; ++h) {
    A.template triangularView<Eigen::Lower>() =
        Q.middleCols(h * d, d) * K.middleCols(h * d, d).transpose();
    Z.middleCols(h * d, d).noalias() =
        A.template triangularView<Eigen::Lower>() * V.middleCols(h * d, d);
  }
}

template <class S>
void linear_attention_backward(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                               ConstMatRef<S> dZ, Mat<S>& dQ, Mat<S>& dK, Mat<S>& dV) {
  const char* op = "linear_attention_backward";
  const Index T = Q.rows(), D = Q.cols();
  const Index d = nn_detail::check_qkv_backward(op, Q, K, V, heads, "dZ", dZ, "output", dQ, dK, dV);
  dQ.resize(T, D);
  dK.resize(T, D);
  dV.resize(T, D);
  if (T == 0) return;
  Mat<S> A(T, T), dA(T, T);
  for (int h = 0; h < heads; ++h) {
    const auto Qh = Q.middleCols(h * d, d), Kh = K.middleCols(h * d, d);
    const auto Vh = V.middleCols(h * d, d);
    const auto dZh = dZ.middleCols(h * d, d);
    A.template triangularView<Eigen::Lower>() = Qh * Kh.transpose();
    dA.template triangularView<Eigen::Lower>() = dZh * Vh.transpose();
    // Transposed lower triangles are the upper triangles of the transposes (Eigen 3.4 cannot
    // transpose a triangular view of a non-const matrix).
    dV.middleCols(h * d, d).noalias() = A.transpose().template triangularView<Eigen::Upper>() * dZh;
    dQ.middleCols(h * d, d).noalias() = dA.template triangularView<Eigen::Lower>() * Kh;
    dK.middleCols(h * d, d).noalias() = dA.transpose().template triangularView<Eigen::Upper>() * Qh;
  }
}

template <class S>
void linear_attention_recurrent(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                                LinearAttentionState<S>& state, Mat<S>& Z) {
  const char* op = "linear_attention_recurrent";
  const Index n = Q.rows(), D = Q.cols(), d = check_forward<S>(op, Q, K, V, heads, Z);
  prepare_state<S>(op, state, D, d);
  Z.resize(n, D);
  for (Index t = 0; t < n; ++t)
    for (int h = 0; h < heads; ++h) {
      auto Sh = state.kv.middleRows(h * d, d);
      Sh.noalias() += K.row(t).segment(h * d, d).transpose() * V.row(t).segment(h * d, d);
      Z.row(t).segment(h * d, d).noalias() = Q.row(t).segment(h * d, d) * Sh;
    }
  state.tokens += n;
}

template <class S>
void linear_attention_chunk(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                            LinearAttentionState<S>& state, Mat<S>& Z) {
  const char* op = "linear_attention_chunk";
  const Index n = Q.rows(), D = Q.cols(), d = check_forward<S>(op, Q, K, V, heads, Z);
  prepare_state<S>(op, state, D, d);
  linear_attention_forward<S>(Q, K, V, heads, Z);  // the within-chunk part
  if (n == 0) return;
  for (int h = 0; h < heads; ++h) {
    auto Sh = state.kv.middleRows(h * d, d);
    Z.middleCols(h * d, d).noalias() += Q.middleCols(h * d, d) * Sh;  // the part before the chunk
    Sh.noalias() += K.middleCols(h * d, d).transpose() * V.middleCols(h * d, d);
  }
  state.tokens += n;
}

#define TTTLAB_INSTANTIATE(S)                                                                      \
  template void linear_attention_forward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, int,  \
                                            Mat<S>&);                                             \
  template void linear_attention_backward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, int, \
                                             ConstMatRef<S>, Mat<S>&, Mat<S>&, Mat<S>&);          \
  template void linear_attention_recurrent<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>,     \
                                              int, LinearAttentionState<S>&, Mat<S>&);            \
  template void linear_attention_chunk<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, int,    \
                                          LinearAttentionState<S>&, Mat<S>&);
TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab
