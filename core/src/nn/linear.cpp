// Dense layer (see tttlab/nn/linear.hpp).
#include "tttlab/nn/linear.hpp"

#include "checks.hpp"

namespace tttlab {
namespace {

using nn_detail::require_shape;

template <class S>
void check_forward(const char* op, ConstMatRef<S> X, ConstMatRef<S> W, const Mat<S>& Y) {
  require_shape(op, "W", W, X.cols(), W.cols(), "rows of W = width of X");
  nn_detail::require_distinct(op, "Y", Y, "X", X);
  nn_detail::require_distinct(op, "Y", Y, "W", W);
}

template <class S>
void backward_core(const char* op, ConstMatRef<S> X, ConstMatRef<S> W, ConstMatRef<S> dY,
                   Mat<S>* dX, MatRef<S> dW) {
  require_shape(op, "W", W, X.cols(), W.cols(), "rows of W = width of X");
  require_shape(op, "dY", dY, X.rows(), W.cols(), "one row per token of X, columns of W");
  require_shape(op, "dW", dW, W.rows(), W.cols(), "same as W");
  if (dX) {
    nn_detail::require_distinct(op, "dX", *dX, "dY", dY);
    nn_detail::require_distinct(op, "dX", *dX, "W", W);
    dX->resize(X.rows(), X.cols());
    dX->noalias() = dY * W.transpose();
  }
  dW.noalias() += X.transpose() * dY;
}

}  // namespace

template <class S>
void linear_forward(ConstMatRef<S> X, ConstMatRef<S> W, Mat<S>& Y) {
  check_forward<S>("linear_forward", X, W, Y);
  Y.resize(X.rows(), W.cols());
  Y.noalias() = X * W;
}

template <class S>
void linear_forward(ConstMatRef<S> X, ConstMatRef<S> W, ConstRowRef<S> b, Mat<S>& Y) {
  check_forward<S>("linear_forward", X, W, Y);
  require_shape("linear_forward", "b", b, 1, W.cols(), "one entry per output column");
  Y.resize(X.rows(), W.cols());
  Y.noalias() = X * W;
  Y.rowwise() += b;
}

template <class S>
void linear_backward(ConstMatRef<S> X, ConstMatRef<S> W, ConstMatRef<S> dY, Mat<S>* dX,
                     MatRef<S> dW) {
  backward_core<S>("linear_backward", X, W, dY, dX, dW);
}

template <class S>
void linear_backward(ConstMatRef<S> X, ConstMatRef<S> W, ConstMatRef<S> dY, Mat<S>* dX,
                     MatRef<S> dW, RowRef<S> db) {
  require_shape("linear_backward", "db", db, 1, W.cols(), "same as b");
  backward_core<S>("linear_backward", X, W, dY, dX, dW);
  db += dY.colwise().sum();
}

#define TTTLAB_INSTANTIATE(S)                                                                     \
  template void linear_forward<S>(ConstMatRef<S>, ConstMatRef<S>, Mat<S>&);                      \
  template void linear_forward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstRowRef<S>, Mat<S>&);      \
  template void linear_backward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, Mat<S>*,      \
                                   MatRef<S>);                                                   \
  template void linear_backward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, Mat<S>*,      \
                                   MatRef<S>, RowRef<S>);
TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab
