// tttlab/nn/activations.hpp — scalar activations used by the TTT layers and the model.
// GELU is ALWAYS the tanh approximation (docs/MATH.md §5), as in every official implementation.
#pragma once

#include <cmath>

namespace tttlab {

inline constexpr double k_gelu_c = 0.7978845608028654;  // sqrt(2/pi)
inline constexpr double k_gelu_a = 0.044715;

template <class S>
S sigmoid(S x) {
  // Split by sign so that exp never overflows.
  if (x >= S(0)) return S(1) / (S(1) + std::exp(-x));
  const S e = std::exp(x);
  return e / (S(1) + e);
}

// gelu(x) = ½x(1 + tanh(c(x + a x³)))
template <class S>
S gelu_tanh(S x) {
  const S t = std::tanh(S(k_gelu_c) * (x + S(k_gelu_a) * x * x * x));
  return S(0.5) * x * (S(1) + t);
}

// d gelu / dx (docs/MATH.md §5).
template <class S>
S gelu_tanh_grad(S x) {
  const S u = S(k_gelu_c) * (x + S(k_gelu_a) * x * x * x);
  const S t = std::tanh(u);
  const S du = S(k_gelu_c) * (S(1) + S(3 * k_gelu_a) * x * x);
  return S(0.5) * (S(1) + t) + S(0.5) * x * (S(1) - t * t) * du;
}

// d² gelu / dx² (needed by the outer backward through TTT-MLP's inner gradient).
template <class S>
S gelu_tanh_grad2(S x) {
  const S u = S(k_gelu_c) * (x + S(k_gelu_a) * x * x * x);
  const S t = std::tanh(u);
  const S du = S(k_gelu_c) * (S(1) + S(3 * k_gelu_a) * x * x);
  const S d2u = S(k_gelu_c) * S(6 * k_gelu_a) * x;
  const S sech2 = S(1) - t * t;
  // d/dx [½(1+t) + ½ x sech² du] = ½ sech² du + ½ sech² du + ½ x (−2 t sech² du²) + ½ x sech² d2u
  return sech2 * du - x * t * sech2 * du * du + S(0.5) * x * sech2 * d2u;
}

template <class S>
S silu(S x) {
  return x * sigmoid(x);
}

}  // namespace tttlab
