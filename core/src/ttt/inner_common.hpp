// Private helpers shared by the inner loop's forward (inner.cpp) and backward (inner_backward.cpp):
// the reconstruction target, the inner-loss gradient and the GELU of TTT-MLP on whole matrices.
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

}  // namespace tttlab::inner_detail
