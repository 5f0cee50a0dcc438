// Interleaved RoPE (see tttlab/nn/rope.hpp).
#include "tttlab/nn/rope.hpp"

#include <cmath>
#include <stdexcept>

namespace tttlab {
namespace {

template <class S>
void rotate(MatRef<S> X, int heads, const std::vector<long>& positions, double rope_theta,
            double sign) {
  const Eigen::Index T = X.rows(), D = X.cols();
  if (heads <= 0 || D % heads != 0) throw std::invalid_argument("rope: heads must divide the width");
  const Eigen::Index d = D / heads;
  if (d % 2 != 0) throw std::invalid_argument("rope: head dim must be even");
  if (static_cast<Eigen::Index>(positions.size()) != T)
    throw std::invalid_argument("rope: one position per row is required");
  for (Eigen::Index m = 0; m < d / 2; ++m) {
    // Frequencies in double whatever S is, so fp32 and fp64 rotate by the same angle.
    const double freq = std::pow(rope_theta, -2.0 * double(m) / double(d));
    for (Eigen::Index t = 0; t < T; ++t) {
      const double phi = sign * double(positions[t]) * freq;
      const S c = S(std::cos(phi)), s = S(std::sin(phi));
      for (Eigen::Index h = 0; h < heads; ++h) {
        S& a = X(t, h * d + 2 * m);
        S& b = X(t, h * d + 2 * m + 1);
        const S a0 = a, b0 = b;
        a = a0 * c - b0 * s;
        b = a0 * s + b0 * c;
      }
    }
  }
}

}  // namespace

template <class S>
void rope_apply(MatRef<S> X, int heads, const std::vector<long>& positions, double rope_theta) {
  rotate<S>(X, heads, positions, rope_theta, +1.0);
}

template <class S>
void rope_backward(MatRef<S> dY, int heads, const std::vector<long>& positions, double rope_theta) {
  rotate<S>(dY, heads, positions, rope_theta, -1.0);
}

template void rope_apply<float>(MatRef<float>, int, const std::vector<long>&, double);
template void rope_apply<double>(MatRef<double>, int, const std::vector<long>&, double);
template void rope_backward<float>(MatRef<float>, int, const std::vector<long>&, double);
template void rope_backward<double>(MatRef<double>, int, const std::vector<long>&, double);

}  // namespace tttlab
