// Private helpers shared by the inner loop's forward (inner.cpp) and backward (inner_backward.cpp):
// the reconstruction target, the inner-loss gradient, the inner model's forward on the keys and the
// GELU of TTT-MLP on whole matrices.
#pragma once

#include "tttlab/nn/activation_arrays.hpp"
#include "tttlab/ttt/inner.hpp"
#include "tttlab/ttt/ln_l2.hpp"

namespace tttlab::inner_detail {

// R = target of the reconstruction: V − K with the residual (f(k) = k + g(k)), V without.
template <class S>
Mat<S> target(const InnerOptions& opt, ConstMatRef<S> K, ConstMatRef<S> V) {
  if (opt.residual) return V - K;
  return V;
}

// G = ∂ℓ/∂Z for every row: the fused LN + L2 gradient, or plain Z − R without the LN.
template <class S>
void loss_grad(const InnerOptions& opt, const InnerHeadParams<S>& p, const Mat<S>& Z, const Mat<S>& R,
               Mat<S>& G) {
  if (opt.layer_norm)
    ln_l2_grad<S>(Z, R, p.ln_weight, p.ln_bias, S(opt.ln_eps), G);
  else
    G = Z - R;
}

template <class S>
Mat<S> gelu(const Mat<S>& Z) {
  Mat<S> out;
  gelu_tanh_array<S>(Z, out);
  return out;
}

template <class S>
Mat<S> gelu_grad(const Mat<S>& Z) {
  Mat<S> out;
  gelu_tanh_grad_array<S>(Z, out);
  return out;
}

// X W + b for every row of X, b only with a bias: the inner model's affine layers.
template <class S, class X>
Mat<S> affine(const InnerOptions& opt, const X& x, const Mat<S>& W, const RowVec<S>& b) {
  Mat<S> Z = x * W;
  if (opt.bias) Z.rowwise() += b;
  return Z;
}

// TTT-MLP's forward on the keys K (docs/MATH.md §5): Z1 = K W1 + b1, X2 = gelu(Z1), Z2 = X2 W2 + b2.
template <class S>
struct MlpForward {
  Mat<S> Z1, X2, Z2;
};

template <class S>
MlpForward<S> mlp_forward(const InnerOptions& opt, ConstMatRef<S> K, const InnerWeights<S>& w) {
  MlpForward<S> f;
  f.Z1 = affine<S>(opt, K, w.W1, w.b1);
  f.X2 = gelu(f.Z1);
  f.Z2 = affine<S>(opt, f.X2, w.W2, w.b2);
  return f;
}

}  // namespace tttlab::inner_detail
