// GELU output gate of the Mamba-backbone TTT layer (see tttlab/nn/gelu_gate.hpp).
#include "tttlab/nn/gelu_gate.hpp"

#include "tttlab/nn/activation_arrays.hpp"
#include "checks.hpp"

namespace tttlab {

using nn_detail::require_distinct;
using nn_detail::require_shape;

template <class S>
void gelu_gate_forward(ConstMatRef<S> X, ConstMatRef<S> W_g, ConstMatRef<S> Z, Mat<S>& Out,
                       GeluGateCache<S>& cache) {
  const char* op = "gelu_gate_forward";
  require_shape(op, "W_g", W_g, X.cols(), W_g.cols(), "rows of W_g = width of X");
  require_shape(op, "Z", Z, X.rows(), W_g.cols(), "one row per token of X, columns of W_g");
  require_distinct(op, "Out", Out, "X", X);
  require_distinct(op, "Out", Out, "Z", Z);
  cache.pre.noalias() = X * W_g;
  gelu_tanh_array(cache.pre, cache.act);
  Out.resize(Z.rows(), Z.cols());
  Out = cache.act.cwiseProduct(Z);
}

template <class S>
void gelu_gate_backward(ConstMatRef<S> X, ConstMatRef<S> W_g, ConstMatRef<S> Z,
                        const GeluGateCache<S>& cache, ConstMatRef<S> dOut, Mat<S>& dX,
                        MatRef<S> dW_g, Mat<S>& dZ) {
  const char* op = "gelu_gate_backward";
  const Eigen::Index T = X.rows(), D = W_g.cols();
  require_shape(op, "W_g", W_g, X.cols(), D, "rows of W_g = width of X");
  require_shape(op, "Z", Z, T, D, "one row per token of X, columns of W_g");
  require_shape(op, "dOut", dOut, T, D, "same as Z");
  require_shape(op, "cache.pre", cache.pre, T, D, "filled by gelu_gate_forward on this X");
  require_shape(op, "cache.act", cache.act, T, D, "filled by gelu_gate_forward on this X");
  require_shape(op, "dW_g", dW_g, X.cols(), D, "same as W_g");
  require_distinct(op, "dX", dX, "dOut", dOut);
  require_distinct(op, "dZ", dZ, "dOut", dOut);
  require_distinct(op, "dX", dX, "X", X);
  require_distinct(op, "dZ", dZ, "Z", Z);
  nn_detail::require_separate_outputs<Mat<S>>(op, {&dX, &dZ});
  dZ.resize(T, D);
  dZ = dOut.cwiseProduct(cache.act);
  Mat<S> dA;
  gelu_tanh_grad_array(cache.pre, dA);
  dA.array() *= dOut.array() * Z.array();
  dW_g.noalias() += X.transpose() * dA;
  dX.resize(T, X.cols());
  dX.noalias() = dA * W_g.transpose();
}

#define TTTLAB_INSTANTIATE(S)                                                                  \
  template void gelu_gate_forward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, Mat<S>&, \
                                     GeluGateCache<S>&);                                      \
  template void gelu_gate_backward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>,         \
                                      const GeluGateCache<S>&, ConstMatRef<S>, Mat<S>&,       \
                                      MatRef<S>, Mat<S>&);
TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab
