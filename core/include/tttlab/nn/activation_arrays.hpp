// tttlab/nn/activation_arrays.hpp — whole-matrix forms of the activations of tttlab/nn/activations.hpp.
// Same formulas, written with Eigen array expressions so that fp32 runs on Eigen's vectorised
// logistic and tanh instead of one libm call per element (the element-wise part dominated the
// SwiGLU and GELU-gate timings otherwise).
#pragma once

#include "tttlab/nn/activations.hpp"
#include "tttlab/tensor.hpp"

namespace tttlab {

// silu(a) = a·σ(a). Eigen's logistic is 1/(1 + exp(−a)) in fp64 (exp overflow gives 0, not NaN)
// and a rational fit accurate to a few ulps in fp32.
template <class S>
void silu_array(const Mat<S>& A, Mat<S>& out) {
  out = (A.array() * A.array().logistic()).matrix();
}

// silu′(a) = σ(a)·(1 + a·(1 − σ(a))).
template <class S>
void silu_grad_array(const Mat<S>& A, Mat<S>& out) {
  out = A.array().logistic().matrix();
  out = (out.array() * (S(1) + A.array() * (S(1) - out.array()))).matrix();
}

// gelu(a) = ½a(1 + tanh(c(a + k a³))), the tanh approximation (docs/MATH.md §5).
template <class S>
void gelu_tanh_array(const Mat<S>& A, Mat<S>& out) {
  const auto a = A.array();
  out = (S(0.5) * a * (S(1) + (S(k_gelu_c) * (a + S(k_gelu_a) * a.cube())).tanh())).matrix();
}

// gelu′(a) = ½(1 + t) + ½a(1 − t²)·c(1 + 3k a²),  t = tanh(c(a + k a³)).
template <class S>
void gelu_tanh_grad_array(const Mat<S>& A, Mat<S>& out) {
  const auto a = A.array();
  out = (S(k_gelu_c) * (a + S(k_gelu_a) * a.cube())).tanh().matrix();  // t
  const auto t = out.array();
  out = (S(0.5) * (S(1) + t) +
         S(0.5) * a * (S(1) - t.square()) * (S(k_gelu_c) * (S(1) + S(3 * k_gelu_a) * a.square())))
            .matrix();
}

}  // namespace tttlab
