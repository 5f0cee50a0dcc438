// Depthwise causal convolution (see tttlab/nn/causal_conv.hpp).
#include "tttlab/nn/causal_conv.hpp"

#include <stdexcept>

namespace tttlab {

template <class S>
void causal_conv_forward(ConstMatRef<S> u, const Mat<S>& w, const RowVec<S>& bias,
                         Mat<S>& history, Mat<S>& y) {
  const Eigen::Index T = u.rows(), D = u.cols(), K = w.cols();
  if (w.rows() != D || bias.size() != D) throw std::invalid_argument("causal_conv: w must be [D, K], bias [D]");
  if (history.rows() != K - 1 || history.cols() != D)
    throw std::invalid_argument("causal_conv: history must be [K-1, D]");
  // The padded stream [history; u], so tap j of output t reads row t + j.
  Mat<S> ext(K - 1 + T, D);
  ext.topRows(K - 1) = history;
  ext.bottomRows(T) = u;
  y.resize(T, D);
  for (Eigen::Index t = 0; t < T; ++t) {
    RowVec<S> acc = bias;
    for (Eigen::Index j = 0; j < K; ++j) acc.array() += w.col(j).transpose().array() * ext.row(t + j).array();
    y.row(t) = acc;
  }
  history = ext.bottomRows(K - 1);
}

template <class S>
void causal_conv_backward(ConstMatRef<S> u, const Mat<S>& w, ConstMatRef<S> dy, Mat<S>& du,
                          Mat<S>& dw, RowVec<S>& dbias) {
  const Eigen::Index T = u.rows(), D = u.cols(), K = w.cols();
  du = Mat<S>::Zero(T, D);
  for (Eigen::Index t = 0; t < T; ++t) {
    dbias += dy.row(t);
    for (Eigen::Index j = 0; j < K; ++j) {
      const Eigen::Index s = t - (K - 1) + j;  // input row read by tap j of output t
      if (s < 0) continue;
      du.row(s).array() += w.col(j).transpose().array() * dy.row(t).array();
      dw.col(j).array() += (dy.row(t).array() * u.row(s).array()).transpose();
    }
  }
}

template void causal_conv_forward<float>(ConstMatRef<float>, const Mat<float>&, const RowVec<float>&, Mat<float>&, Mat<float>&);
template void causal_conv_forward<double>(ConstMatRef<double>, const Mat<double>&, const RowVec<double>&, Mat<double>&, Mat<double>&);
template void causal_conv_backward<float>(ConstMatRef<float>, const Mat<float>&, ConstMatRef<float>, Mat<float>&, Mat<float>&, RowVec<float>&);
template void causal_conv_backward<double>(ConstMatRef<double>, const Mat<double>&, ConstMatRef<double>, Mat<double>&, Mat<double>&, RowVec<double>&);

}  // namespace tttlab
