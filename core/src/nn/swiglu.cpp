// SwiGLU feed-forward (see tttlab/nn/swiglu.hpp).
#include "tttlab/nn/swiglu.hpp"

#include "tttlab/nn/activation_arrays.hpp"
#include "checks.hpp"

namespace tttlab {
namespace {

using nn_detail::require_distinct;
using nn_detail::require_shape;

template <class S>
void check_weights(const char* op, ConstMatRef<S> X, ConstMatRef<S> W_gate, ConstMatRef<S> W_up,
                   ConstMatRef<S> W_down) {
  const Eigen::Index D = X.cols(), F = W_gate.cols();
  require_shape(op, "W_gate", W_gate, D, F, "[D, F] with D = width of X");
  require_shape(op, "W_up", W_up, D, F, "same as W_gate");
  require_shape(op, "W_down", W_down, F, D, "[F, D], the transpose shape of W_gate");
}

}  // namespace

template <class S>
void swiglu_forward(ConstMatRef<S> X, ConstMatRef<S> W_gate, ConstMatRef<S> W_up,
                    ConstMatRef<S> W_down, Mat<S>& Y, SwigluCache<S>& cache) {
  const char* op = "swiglu_forward";
  check_weights<S>(op, X, W_gate, W_up, W_down);
  require_distinct(op, "Y", Y, "X", X);
  cache.gate.noalias() = X * W_gate;
  cache.up.noalias() = X * W_up;
  silu_array(cache.gate, cache.act);
  cache.hidden = cache.act.cwiseProduct(cache.up);
  Y.resize(X.rows(), X.cols());
  Y.noalias() = cache.hidden * W_down;
}

template <class S>
void swiglu_backward(ConstMatRef<S> X, ConstMatRef<S> W_gate, ConstMatRef<S> W_up,
                     ConstMatRef<S> W_down, const SwigluCache<S>& cache, ConstMatRef<S> dY,
                     Mat<S>& dX, MatRef<S> dW_gate, MatRef<S> dW_up, MatRef<S> dW_down) {
  const char* op = "swiglu_backward";
  check_weights<S>(op, X, W_gate, W_up, W_down);
  const Eigen::Index T = X.rows(), D = X.cols(), F = W_gate.cols();
  require_shape(op, "dY", dY, T, D, "same as X");
  require_shape(op, "cache.gate", cache.gate, T, F, "filled by swiglu_forward on this X");
  require_shape(op, "cache.up", cache.up, T, F, "filled by swiglu_forward on this X");
  require_shape(op, "cache.act", cache.act, T, F, "filled by swiglu_forward on this X");
  require_shape(op, "cache.hidden", cache.hidden, T, F, "filled by swiglu_forward on this X");
  require_shape(op, "dW_gate", dW_gate, D, F, "same as W_gate");
  require_shape(op, "dW_up", dW_up, D, F, "same as W_up");
  require_shape(op, "dW_down", dW_down, F, D, "same as W_down");
  require_distinct(op, "dX", dX, "X", X);
  require_distinct(op, "dX", dX, "dY", dY);

  dW_down.noalias() += cache.hidden.transpose() * dY;
  Mat<S> dH(T, F);
  dH.noalias() = dY * W_down.transpose();
  const Mat<S> dB = dH.cwiseProduct(cache.act);
  // dA = dH ⊙ B ⊙ silu′(A), reusing dH's storage.
  Mat<S> grad;
  silu_grad_array(cache.gate, grad);
  dH.array() *= cache.up.array() * grad.array();
  dW_gate.noalias() += X.transpose() * dH;
  dW_up.noalias() += X.transpose() * dB;
  dX.resize(T, D);
  dX.noalias() = dH * W_gate.transpose();
  dX.noalias() += dB * W_up.transpose();
}

#define TTTLAB_INSTANTIATE(S)                                                                 \
  template void swiglu_forward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>,            \
                                  ConstMatRef<S>, Mat<S>&, SwigluCache<S>&);                 \
  template void swiglu_backward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>,           \
                                   ConstMatRef<S>, const SwigluCache<S>&, ConstMatRef<S>,    \
                                   Mat<S>&, MatRef<S>, MatRef<S>, MatRef<S>);
TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab
