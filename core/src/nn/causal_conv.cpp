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
  // Tap by tap over the whole sequence: each tap is a column-scaled copy of a shifted block.
  y = bias.replicate(T, 1);
  for (Eigen::Index j = 0; j < K; ++j)
    y.array() += ext.middleRows(j, T).array().rowwise() * w.col(j).transpose().array();
  history = ext.bottomRows(K - 1);
}

template <class S>
void causal_conv_backward(ConstMatRef<S> u, const Mat<S>& w, ConstMatRef<S> dy, Mat<S>& du,
                          Mat<S>& dw, RowVec<S>& dbias) {
  const Eigen::Index T = u.rows(), D = u.cols(), K = w.cols();
  if (w.rows() != D || dy.rows() != T || dy.cols() != D || dw.rows() != D || dw.cols() != K ||
      dbias.size() != D)
    throw std::invalid_argument("causal_conv_backward: u, dy must be [T, D], w and dw [D, K], dbias [D]");
  du = Mat<S>::Zero(T, D);
  dbias += dy.colwise().sum();
  // Tap j of output t reads input s = t − (K−1) + j: rows [0, T − shift) of u meet rows
  // [shift, T) of dy, with shift = K − 1 − j.
  for (Eigen::Index j = 0; j < K; ++j) {
    const Eigen::Index shift = K - 1 - j, n = T - shift;
    if (n <= 0) continue;
    du.topRows(n).array() += dy.bottomRows(n).array().rowwise() * w.col(j).transpose().array();
    dw.col(j) += (dy.bottomRows(n).array() * u.topRows(n).array()).colwise().sum().transpose().matrix();
  }
}

template void causal_conv_forward<float>(ConstMatRef<float>, const Mat<float>&, const RowVec<float>&, Mat<float>&, Mat<float>&);
template void causal_conv_forward<double>(ConstMatRef<double>, const Mat<double>&, const RowVec<double>&, Mat<double>&, Mat<double>&);
template void causal_conv_backward<float>(ConstMatRef<float>, const Mat<float>&, ConstMatRef<float>, Mat<float>&, Mat<float>&, RowVec<float>&);
template void causal_conv_backward<double>(ConstMatRef<double>, const Mat<double>&, ConstMatRef<double>, Mat<double>&, Mat<double>&, RowVec<double>&);

}  // namespace tttlab
