// Theorem 2 checked numerically (see tttlab/analysis/nonparametric.hpp).
#include "tttlab/analysis/nonparametric.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tttlab {

template <class S>
std::vector<AttentionHeadValues> softmax_attention_heads(const SoftmaxAttentionLayer<S>& layer, ConstMatRef<S> x) {
  const AttentionConfig& cfg = layer.config();
  const int d = cfg.width / cfg.heads;
  const auto tr = layer.trace(x);
  std::vector<AttentionHeadValues> heads(static_cast<std::size_t>(cfg.heads));
  for (int h = 0; h < cfg.heads; ++h) {
    AttentionHeadValues& o = heads[static_cast<std::size_t>(h)];
    o.Q = tr.Q.middleCols(h * d, d).template cast<double>();
    o.K = tr.K.middleCols(h * d, d).template cast<double>();
    o.V = tr.V.middleCols(h * d, d).template cast<double>();
    o.Z = tr.Z.middleCols(h * d, d).template cast<double>();
    o.kernel_scale = 1.0 / std::sqrt(static_cast<double>(d));  // the layer's scale (docs/MATH.md §8.6)
  }
  return heads;
}

NadarayaWatson nadaraya_watson(const Mat<double>& Q, const Mat<double>& K, const Mat<double>& V, double scale) {
  const long T = Q.rows(), d = Q.cols(), dv = V.cols();
  if (K.rows() != T || V.rows() != T || K.cols() != d)
    throw std::invalid_argument("nadaraya_watson: Q, K, V must have T rows and Q, K the same width");
  NadarayaWatson nw;
  nw.weights = Mat<double>::Zero(T, T);
  nw.output = Mat<double>::Zero(T, dv);
  std::vector<double> s(static_cast<std::size_t>(T)), kappa(static_cast<std::size_t>(T));
  for (long t = 0; t < T; ++t) {
    // The exponents c·q_t·k_i of the training set D_t = {(k_i, v_i) : i ≤ t}.
    double top = -HUGE_VAL;
    for (long i = 0; i <= t; ++i) {
      double dot = 0;
      for (long j = 0; j < d; ++j) dot += Q(t, j) * K(i, j);
      s[static_cast<std::size_t>(i)] = scale * dot;
      top = std::max(top, s[static_cast<std::size_t>(i)]);
    }
    // κ(q_t, k_i)·e^(−top): the common factor cancels between numerator and denominator.
    double den = 0;
    for (long i = 0; i <= t; ++i) {
      kappa[static_cast<std::size_t>(i)] = std::exp(s[static_cast<std::size_t>(i)] - top);
      den += kappa[static_cast<std::size_t>(i)];
    }
    for (long i = 0; i <= t; ++i) {
      const double k = kappa[static_cast<std::size_t>(i)];
      for (long j = 0; j < dv; ++j) nw.output(t, j) += k * V(i, j);
      nw.weights(t, i) = k / den;
    }
    for (long j = 0; j < dv; ++j) nw.output(t, j) /= den;
  }
  return nw;
}

NonparametricComparison compare_with_attention(const NadarayaWatson& nw, const Mat<double>& Z) {
  if (Z.rows() != nw.output.rows() || Z.cols() != nw.output.cols())
    throw std::invalid_argument("compare_with_attention: the attention output has shape [" + std::to_string(Z.rows()) +
                                ", " + std::to_string(Z.cols()) + "], the estimator's [" +
                                std::to_string(nw.output.rows()) + ", " + std::to_string(nw.output.cols()) + "]");
  const long T = Z.rows();
  NonparametricComparison c;
  c.token_diff.assign(static_cast<std::size_t>(T), 0.0);
  c.effective_pairs.assign(static_cast<std::size_t>(T), 0.0);
  c.max_weight.assign(static_cast<std::size_t>(T), 0.0);
  c.entropy.assign(static_cast<std::size_t>(T), 0.0);
  for (long t = 0; t < T; ++t) {
    const auto ut = static_cast<std::size_t>(t);
    for (long j = 0; j < Z.cols(); ++j) {
      c.token_diff[ut] = std::max(c.token_diff[ut], std::abs(nw.output(t, j) - Z(t, j)));
      c.max_abs_output = std::max(c.max_abs_output, std::abs(Z(t, j)));
    }
    c.max_abs_diff = std::max(c.max_abs_diff, c.token_diff[ut]);
    double sum = 0, sq = 0, ent = 0, top = 0;
    for (long i = 0; i <= t; ++i) {
      const double w = nw.weights(t, i);
      sum += w;
      sq += w * w;
      if (w > 0) ent -= w * std::log(w);
      top = std::max(top, w);
    }
    c.row_sum_err = std::max(c.row_sum_err, std::abs(sum - 1.0));
    c.effective_pairs[ut] = sq > 0 ? 1.0 / sq : 0.0;
    c.max_weight[ut] = top;
    c.entropy[ut] = ent;
  }
  c.max_rel_diff = c.max_abs_output > 0 ? c.max_abs_diff / c.max_abs_output : c.max_abs_diff;
  return c;
}

template std::vector<AttentionHeadValues> softmax_attention_heads<float>(const SoftmaxAttentionLayer<float>&,
                                                                         ConstMatRef<float>);
template std::vector<AttentionHeadValues> softmax_attention_heads<double>(const SoftmaxAttentionLayer<double>&,
                                                                          ConstMatRef<double>);

}  // namespace tttlab
