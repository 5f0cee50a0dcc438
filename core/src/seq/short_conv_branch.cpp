// The short-convolution branch and the per-head L2 normalisation shared by the delta-rule-style
// blocks (core/src/seq/short_conv_branch.hpp).
#include "short_conv_branch.hpp"

#include <cmath>
#include <stdexcept>

#include "tttlab/nn/activation_arrays.hpp"
#include "tttlab/nn/causal_conv.hpp"

namespace tttlab::seq_detail {

template <class S>
ShortConvHistory<S> ShortConvHistory<S>::zeros(int K, int D) {
  ShortConvHistory h;
  h.q = h.k = h.v = Mat<S>::Zero(K - 1, D);
  return h;
}

template <class S>
void short_conv_branch_forward(ConstMatRef<S> x, const Mat<S>& W, const Mat<S>& conv_w,
                               Mat<S>& history, ShortConvBranch<S>& out) {
  const RowVec<S> no_bias = RowVec<S>::Zero(W.cols());
  out.u.noalias() = x * W;
  causal_conv_forward<S>(out.u, conv_w, no_bias, history, out.c);
  silu_array<S>(out.c, out.a);
}

template <class S>
void short_conv_branch_backward(const Mat<S>& x, const Mat<S>& W, const Mat<S>& conv_w,
                                const ShortConvBranch<S>& br, const Mat<S>& da, Mat<S>& gW,
                                Mat<S>& g_conv, Mat<S>& dx) {
  Mat<S> ds;
  silu_grad_array<S>(br.c, ds);
  const Mat<S> dc = (da.array() * ds.array()).matrix();
  Mat<S> du;
  RowVec<S> no_bias_grad = RowVec<S>::Zero(W.cols());  // the convolutions have no bias
  causal_conv_backward<S>(br.u, conv_w, dc, du, g_conv, no_bias_grad);
  gW.noalias() += x.transpose() * du;
  dx.noalias() += du * W.transpose();
}

template <class S>
void l2_normalize_heads(const Mat<S>& a, int d, S scale, S eps, Mat<S>& out) {
  const Eigen::Index T = a.rows(), H = a.cols() / d;
  out.resize(T, a.cols());
  for (Eigen::Index t = 0; t < T; ++t)
    for (Eigen::Index h = 0; h < H; ++h) {
      const auto s = a.row(t).segment(h * d, d);
      const S n = std::sqrt(s.squaredNorm() + eps);
      if (scale == S(1))
        out.row(t).segment(h * d, d) = s / n;
      else
        out.row(t).segment(h * d, d) = s * (scale / n);
    }
}

template <class S>
void l2_normalize_heads_backward(const Mat<S>& a, const Mat<S>& dout, int d, S scale, S eps,
                                 Mat<S>& da) {
  const Eigen::Index T = a.rows(), H = a.cols() / d;
  da.resize(T, a.cols());
  for (Eigen::Index t = 0; t < T; ++t)
    for (Eigen::Index h = 0; h < H; ++h) {
      const auto u = a.row(t).segment(h * d, d);
      const auto g = dout.row(t).segment(h * d, d);
      const S n2 = u.squaredNorm() + eps, n = std::sqrt(n2);
      if (scale == S(1))
        da.row(t).segment(h * d, d) = (g - u * (u.dot(g) / n2)) / n;
      else
        da.row(t).segment(h * d, d) = (scale / n) * (g - u * (u.dot(g) / n2));
    }
}

template <class S>
Mat<S> seq_normal_mat(Eigen::Index r, Eigen::Index c, double std, Rng& rng) {
  Mat<S> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = S(std * rng.normal());
  return m;
}

template <class S>
Mat<S> seq_uniform_mat(Eigen::Index r, Eigen::Index c, double lo, double hi, Rng& rng) {
  Mat<S> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = S(lo + (hi - lo) * rng.uniform());
  return m;
}

template <class S>
Mat<S> seq_conv_init(int D, int K, Rng& rng) {
  const double bound = 1.0 / std::sqrt(double(K));
  return seq_uniform_mat<S>(D, K, -bound, bound, rng);
}

void require_param_shape(const char* layer, Eigen::Index rows, Eigen::Index cols, Eigen::Index r,
                         Eigen::Index c, const char* name) {
  if (rows != r || cols != c)
    throw std::invalid_argument(std::string(layer) + " layer: " + name + " must be [" +
                                std::to_string(r) + ", " + std::to_string(c) + "], got [" +
                                std::to_string(rows) + ", " + std::to_string(cols) + "]");
}

#define TTTLAB_SEQ_DETAIL_INSTANTIATE(S)                                                          \
  template struct ShortConvHistory<S>;                                                            \
  template void short_conv_branch_forward<S>(ConstMatRef<S>, const Mat<S>&, const Mat<S>&,        \
                                             Mat<S>&, ShortConvBranch<S>&);                       \
  template void short_conv_branch_backward<S>(const Mat<S>&, const Mat<S>&, const Mat<S>&,        \
                                              const ShortConvBranch<S>&, const Mat<S>&, Mat<S>&,  \
                                              Mat<S>&, Mat<S>&);                                  \
  template void l2_normalize_heads<S>(const Mat<S>&, int, S, S, Mat<S>&);                         \
  template void l2_normalize_heads_backward<S>(const Mat<S>&, const Mat<S>&, int, S, S, Mat<S>&); \
  template Mat<S> seq_normal_mat<S>(Eigen::Index, Eigen::Index, double, Rng&);                    \
  template Mat<S> seq_uniform_mat<S>(Eigen::Index, Eigen::Index, double, double, Rng&);           \
  template Mat<S> seq_conv_init<S>(int, int, Rng&);
TTTLAB_SEQ_DETAIL_INSTANTIATE(float)
TTTLAB_SEQ_DETAIL_INSTANTIATE(double)
#undef TTTLAB_SEQ_DETAIL_INSTANTIATE

}  // namespace tttlab::seq_detail
