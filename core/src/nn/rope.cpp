// Interleaved RoPE (see tttlab/nn/rope.hpp).
#include "tttlab/nn/rope.hpp"

#include <algorithm>
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
  // The TTT layers use positions t mod b, so few distinct values: compute each angle once.
  long max_pos = 0;
  for (long p : positions) {
    if (p < 0) throw std::invalid_argument("rope: positions must be >= 0");
    max_pos = std::max(max_pos, p);
  }
  const bool table = max_pos < T;
  std::vector<S> cos_t, sin_t;
  if (table) {
    cos_t.resize(std::size_t(max_pos + 1) * (d / 2));
    sin_t.resize(cos_t.size());
    for (long p = 0; p <= max_pos; ++p)
      for (Eigen::Index m = 0; m < d / 2; ++m) {
        // Frequencies and angles in double whatever S is, so fp32 and fp64 rotate by the same angle.
        const double phi = sign * double(p) * std::pow(rope_theta, -2.0 * double(m) / double(d));
        cos_t[p * (d / 2) + m] = S(std::cos(phi));
        sin_t[p * (d / 2) + m] = S(std::sin(phi));
      }
  }
  for (Eigen::Index m = 0; m < d / 2; ++m) {
    const double freq = std::pow(rope_theta, -2.0 * double(m) / double(d));
    for (Eigen::Index t = 0; t < T; ++t) {
      const double phi = sign * double(positions[t]) * freq;
      const S c = table ? cos_t[positions[t] * (d / 2) + m] : S(std::cos(phi));
      const S s = table ? sin_t[positions[t] * (d / 2) + m] : S(std::sin(phi));
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
