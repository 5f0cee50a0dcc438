// Causal multi-head softmax attention (see tttlab/nn/attention.hpp).
#include "tttlab/nn/attention.hpp"

#include <algorithm>
#include <cmath>

#include "checks.hpp"

namespace tttlab {
namespace {

using Index = Eigen::Index;
using nn_detail::require_distinct;
using nn_detail::require_shape;

template <class S>
S attention_scale(Index d) {
  return S(1.0 / std::sqrt(double(d)));
}

// Row i of P holds scores against keys 0..L−1 and may see keys 0..offset+i: softmax over those,
// zero for the rest. Only the visible entries are read, so the masked ones may hold anything.
template <class S>
void causal_softmax_rows(Mat<S>& P, Index offset) {
  for (Index i = 0; i < P.rows(); ++i) {
    const Index n = std::min(offset + i + 1, P.cols());
    auto row = P.row(i).head(n).array();
    row = (row - row.maxCoeff()).exp();
    row /= row.sum();
    P.row(i).tail(P.cols() - n).setZero();
  }
}

// P [T, T] (lower triangle valid) = causal softmax of scale·Qh·Khᵀ for a whole sequence.
template <class S>
void causal_probs(ConstMatRef<S> Qh, ConstMatRef<S> Kh, S scale, Mat<S>& P) {
  const Index T = Qh.rows();
  P.resize(T, T);
  P.template triangularView<Eigen::Lower>() = (scale * Qh) * Kh.transpose();
  causal_softmax_rows(P, 0);
}

}  // namespace

template <class S>
void causal_attention_forward(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                              Mat<S>& O) {
  const char* op = "causal_attention_forward";
  const Index T = Q.rows(), D = Q.cols(), d = nn_detail::qkv_head_width(op, Q, K, V, heads);
  nn_detail::require_distinct_from_qkv(op, "O", O, Q, K, V);
  const S scale = attention_scale<S>(d);
  O.resize(T, D);
  // Eigen's triangular products take the address of element (0, 0), even of an empty matrix.
  if (T == 0) return;
  Mat<S> P;
  for (int h = 0; h < heads; ++h) {
    causal_probs<S>(Q.middleCols(h * d, d), K.middleCols(h * d, d), scale, P);
    O.middleCols(h * d, d).noalias() =
        P.template triangularView<Eigen::Lower>() * V.middleCols(h * d, d);
  }
}

template <class S>
void causal_attention_backward(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                               ConstMatRef<S> dO, Mat<S>& dQ, Mat<S>& dK, Mat<S>& dV) {
  const char* op = "causal_attention_backward";
  const Index T = Q.rows(), D = Q.cols();
  const Index d =
      nn_detail::check_qkv_backward(op, Q, K, V, heads, "dO", dO, "dQ/dK/dV", dQ, dK, dV);
  const S scale = attention_scale<S>(d);
  dQ.resize(T, D);
  dK.resize(T, D);
  dV.resize(T, D);
  if (T == 0) return;
  Mat<S> P, dS(T, T);
  for (int h = 0; h < heads; ++h) {
    const auto Qh = Q.middleCols(h * d, d), Kh = K.middleCols(h * d, d);
    const auto Vh = V.middleCols(h * d, d);
    const auto dOh = dO.middleCols(h * d, d);
    causal_probs<S>(Qh, Kh, scale, P);
    // (lower P)ᵀ is written as the upper triangle of Pᵀ: Eigen 3.4 cannot transpose a triangular
    // view of a non-const matrix.
    dV.middleCols(h * d, d).noalias() = P.transpose().template triangularView<Eigen::Upper>() * dOh;
    // dP on the lower triangle, then dS = P ⊙ (dP − δ) row by row with δ_i = Σ_j P_ij dP_ij.
    dS.template triangularView<Eigen::Lower>() = dOh * Vh.transpose();
    for (Index i = 0; i < T; ++i) {
      auto p = P.row(i).head(i + 1).array();
      auto g = dS.row(i).head(i + 1).array();
      const S delta = (p * g).sum();
      g = p * (g - delta);
    }
    dQ.middleCols(h * d, d).noalias() = dS.template triangularView<Eigen::Lower>() * Kh;
    dQ.middleCols(h * d, d) *= scale;
    dK.middleCols(h * d, d).noalias() = dS.transpose().template triangularView<Eigen::Upper>() * Qh;
    dK.middleCols(h * d, d) *= scale;
  }
}

template <class S>
void KvCache<S>::reserve(Eigen::Index tokens, Eigen::Index width) {
  if (keys.cols() != width) {
    keys.resize(0, width);
    values.resize(0, width);
    length = 0;
  }
  if (keys.rows() < tokens) {
    keys.conservativeResize(tokens, width);
    values.conservativeResize(tokens, width);
  }
}

template <class S>
void KvCache<S>::append(ConstMatRef<S> K, ConstMatRef<S> V) {
  const char* op = "KvCache::append";
  require_shape(op, "V", V, K.rows(), K.cols(), "same as K");
  if (length > 0 && K.cols() != keys.cols())
    nn_detail::fail(op, "K is " + nn_detail::shape_str(K.rows(), K.cols()) +
                            " but the cache holds tokens of width " + std::to_string(keys.cols()) +
                            "; clear() the cache for a new model");
  const Index need = length + K.rows();
  if (keys.cols() != K.cols() || keys.rows() < need)
    reserve(std::max<Index>(need, 2 * keys.rows()), K.cols());
  keys.middleRows(length, K.rows()) = K;
  values.middleRows(length, K.rows()) = V;
  length = need;
}

template <class S>
void causal_attention_forward_cached(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V,
                                     int heads, KvCache<S>& cache, Mat<S>& O) {
  const char* op = "causal_attention_forward_cached";
  const Index n = Q.rows(), D = Q.cols(), d = nn_detail::qkv_head_width(op, Q, K, V, heads);
  require_distinct(op, "O", O, "Q", Q);
  require_distinct(op, "O", O, "cache.keys", cache.keys);
  require_distinct(op, "O", O, "cache.values", cache.values);
  const Index offset = cache.length;  // global position of the chunk's first token
  cache.append(K, V);
  const Index L = cache.length;
  const S scale = attention_scale<S>(d);
  O.resize(n, D);
  if (n == 0) return;
  Mat<S> P(n, L);
  for (int h = 0; h < heads; ++h) {
    P.noalias() =
        (scale * Q.middleCols(h * d, d)) * cache.keys.topRows(L).middleCols(h * d, d).transpose();
    causal_softmax_rows(P, offset);
    O.middleCols(h * d, d).noalias() = P * cache.values.topRows(L).middleCols(h * d, d);
  }
}

namespace {

// Row i of the band: softmax over keys [lo, hi] of scale·q·kᵀ (one head), as causal_softmax_rows.
template <class S, class Q, class Kb>
RowVec<S> windowed_probs(const Q& q, const Kb& keys, S scale) {
  RowVec<S> p = (scale * q) * keys.transpose();
  p = (p.array() - p.maxCoeff()).exp();
  p /= p.sum();
  return p;
}

}  // namespace

template <class S>
void windowed_attention_forward(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                                int window, Mat<S>& O) {
  if (window <= 0) return causal_attention_forward<S>(Q, K, V, heads, O);
  const char* op = "windowed_attention_forward";
  const Index T = Q.rows(), D = Q.cols(), d = nn_detail::qkv_head_width(op, Q, K, V, heads);
  nn_detail::require_distinct_from_qkv(op, "O", O, Q, K, V);
  const S scale = attention_scale<S>(d);
  O.resize(T, D);
  for (int h = 0; h < heads; ++h)
    for (Index t = 0; t < T; ++t) {
      const Index lo = std::max<Index>(0, t - window + 1), n = t - lo + 1;
      const RowVec<S> p =
          windowed_probs<S>(Q.row(t).segment(h * d, d), K.block(lo, h * d, n, d), scale);
      O.row(t).segment(h * d, d).noalias() = p * V.block(lo, h * d, n, d);
    }
}

template <class S>
void windowed_attention_backward(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                                 int window, ConstMatRef<S> dO, Mat<S>& dQ, Mat<S>& dK,
                                 Mat<S>& dV) {
  if (window <= 0) return causal_attention_backward<S>(Q, K, V, heads, dO, dQ, dK, dV);
  const char* op = "windowed_attention_backward";
  const Index T = Q.rows(), D = Q.cols();
  const Index d =
      nn_detail::check_qkv_backward(op, Q, K, V, heads, "dO", dO, "dQ/dK/dV", dQ, dK, dV);
  const S scale = attention_scale<S>(d);
  dQ.setZero(T, D);
  dK.setZero(T, D);
  dV.setZero(T, D);
  for (int h = 0; h < heads; ++h)
    for (Index t = 0; t < T; ++t) {
      const Index lo = std::max<Index>(0, t - window + 1), n = t - lo + 1;
      const auto q = Q.row(t).segment(h * d, d);
      const auto keys = K.block(lo, h * d, n, d);
      const auto g = dO.row(t).segment(h * d, d);
      const RowVec<S> p = windowed_probs<S>(q, keys, scale);
      // dV_s += p_s dO_t;  dP_s = dO_t · V_s;  dS = p ⊙ (dP − p·dP)
      dV.block(lo, h * d, n, d).noalias() += p.transpose() * g;
      RowVec<S> ds = g * V.block(lo, h * d, n, d).transpose();
      ds = (p.array() * (ds.array() - (p.array() * ds.array()).sum())).matrix();
      dQ.row(t).segment(h * d, d).noalias() += scale * (ds * keys);
      dK.block(lo, h * d, n, d).noalias() += scale * (ds.transpose() * q);
    }
}

template <class S>
void windowed_attention_forward_cached(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V,
                                       int heads, int window, KvCache<S>& cache, Mat<S>& O) {
  if (window <= 0) return causal_attention_forward_cached<S>(Q, K, V, heads, cache, O);
  const char* op = "windowed_attention_forward_cached";
  const Index n = Q.rows(), D = Q.cols(), d = nn_detail::qkv_head_width(op, Q, K, V, heads);
  require_distinct(op, "O", O, "Q", Q);
  require_distinct(op, "O", O, "cache.keys", cache.keys);
  require_distinct(op, "O", O, "cache.values", cache.values);
  const Index before = cache.length;  // index of the chunk's first token in the cache
  cache.append(K, V);
  const S scale = attention_scale<S>(d);
  O.resize(n, D);
  for (int h = 0; h < heads; ++h)
    for (Index i = 0; i < n; ++i) {
      const Index t = before + i, lo = std::max<Index>(0, t - window + 1), m = t - lo + 1;
      const RowVec<S> p =
          windowed_probs<S>(Q.row(i).segment(h * d, d), cache.keys.block(lo, h * d, m, d), scale);
      O.row(i).segment(h * d, d).noalias() = p * cache.values.block(lo, h * d, m, d);
    }
  const Index keep = std::min<Index>(cache.length, window - 1);
  if (keep < cache.length) {
    const Index from = cache.length - keep;
    for (Index r = 0; r < keep; ++r) {  // forward copy: row r never overlaps a row still to be read
      cache.keys.row(r) = cache.keys.row(from + r);
      cache.values.row(r) = cache.values.row(from + r);
    }
    cache.length = keep;
  }
}

#define TTTLAB_INSTANTIATE(S)                                                                      \
  template void causal_attention_forward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, int,   \
                                            Mat<S>&);                                              \
  template void causal_attention_backward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, int,  \
                                             ConstMatRef<S>, Mat<S>&, Mat<S>&, Mat<S>&);           \
  template struct KvCache<S>;                                                                      \
  template void causal_attention_forward_cached<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, \
                                                   int, KvCache<S>&, Mat<S>&);                     \
  template void windowed_attention_forward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, int, \
                                              int, Mat<S>&);                                       \
  template void windowed_attention_backward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>,     \
                                               int, int, ConstMatRef<S>, Mat<S>&, Mat<S>&,         \
                                               Mat<S>&);                                           \
  template void windowed_attention_forward_cached<S>(                                              \
      ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, int, int, KvCache<S>&, Mat<S>&);
TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab
