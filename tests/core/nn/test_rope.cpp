// RoPE (the lead's tttlab/nn/rope.hpp): rope_apply against the complex-multiply definition of the
// interleaved pairing, the per-mini-batch position reset of docs/MATH.md §10, oracle 10, rope_backward
// against central differences (fp64), orthogonality, fp32 against fp64.
#include "tttlab/nn/rope.hpp"

#include <complex>
#include <vector>

#include "core/nn/grad_check.hpp"

namespace tttlab {
namespace {

using test::check_gradient;
using test::dot;

// Pair m of each head, (x[2m], x[2m+1]) read as a + ib, multiplied by e^{i·p·θ_m} with
// θ_m = rope_theta^(−2m/d).
Mat<double> rope_by_complex_multiply(const Mat<double>& X, int heads,
                                     const std::vector<long>& positions, double rope_theta) {
  const Eigen::Index d = X.cols() / heads;
  Mat<double> Y(X.rows(), X.cols());
  for (Eigen::Index t = 0; t < X.rows(); ++t)
    for (int h = 0; h < heads; ++h)
      for (Eigen::Index m = 0; m < d / 2; ++m) {
        const double theta = std::pow(rope_theta, -2.0 * double(m) / double(d));
        const std::complex<double> z(X(t, h * d + 2 * m), X(t, h * d + 2 * m + 1));
        const std::complex<double> r = z * std::polar(1.0, double(positions[t]) * theta);
        Y(t, h * d + 2 * m) = r.real();
        Y(t, h * d + 2 * m + 1) = r.imag();
      }
  return Y;
}

TEST(Rope, MatchesComplexMultiplyDefinition) {
  std::mt19937_64 rng(71);
  const std::vector<long> positions{0, 1, 2, 7, 15, 100, 2047, 5};
  for (double rope_theta : {10000.0, 500.0}) {
    for (int heads : {1, 3}) {
      const Mat<double> X = test::random_mat(8, 12, rng);
      Mat<double> Y = X;
      rope_apply<double>(Y, heads, positions, rope_theta);
      // Angles up to 2047 rad: cos/sin of them carry ≈ 2047·1.1e-16 of absolute error.
      EXPECT_TRUE(test::all_close("theta " + std::to_string(rope_theta) + ", heads " +
                                      std::to_string(heads),
                                  Y, rope_by_complex_multiply(X, heads, positions, rope_theta),
                                  {1e-13, 1e-13}));
    }
  }
  // Position 0 is the identity; each pair keeps its length.
  const Mat<double> X = test::random_mat(2, 8, rng);
  Mat<double> Y = X;
  rope_apply<double>(Y, 2, {0, 9}, 10000.0);
  EXPECT_EQ(Mat<double>(Y.row(0)), Mat<double>(X.row(0)));
  for (int m = 0; m < 4; ++m)
    EXPECT_NEAR(std::hypot(Y(1, 2 * m), Y(1, 2 * m + 1)), std::hypot(X(1, 2 * m), X(1, 2 * m + 1)),
                1e-15);
}

// docs/MATH.md §10, oracle 10: the TTT layers pass p = t mod b, so tokens t and t + b with the same raw
// q/k are rotated identically. Global positions (the Transformer's) rotate them differently.
TEST(Rope, PositionsResetEveryMiniBatch) {
  std::mt19937_64 rng(72);
  const int b = 4, T = 3 * b, D = 8;
  Mat<double> X(T, D);
  X.topRows(b) = test::random_mat(b, D, rng);
  X.middleRows(b, b) = X.topRows(b);
  X.bottomRows(b) = X.topRows(b);
  std::vector<long> reset(T), global(T);
  for (int t = 0; t < T; ++t) {
    reset[t] = t % b;
    global[t] = t;
  }
  Mat<double> Yr = X, Yg = X;
  rope_apply<double>(Yr, 2, reset, 10000.0);
  rope_apply<double>(Yg, 2, global, 10000.0);
  for (int t = 0; t + b < T; ++t) {
    EXPECT_EQ(Mat<double>(Yr.row(t)), Mat<double>(Yr.row(t + b))) << "t = " << t;
    EXPECT_NE(Mat<double>(Yg.row(t)), Mat<double>(Yg.row(t + b))) << "t = " << t;
  }
}

TEST(Rope, BackwardMatchesFiniteDifferencesAndInvertsForward) {
  std::mt19937_64 rng(73);
  Mat<double> X = test::random_mat(5, 6, rng);
  const Mat<double> G = test::random_mat(5, 6, rng);
  const std::vector<long> positions{3, 0, 1, 9, 4};
  auto loss = [&] {
    Mat<double> Y = X;
    rope_apply<double>(Y, 3, positions, 10000.0);
    return dot(G, Y);
  };
  Mat<double> dX = G;
  rope_backward<double>(dX, 3, positions, 10000.0);
  EXPECT_TRUE(check_gradient("X", X, dX, loss));
  // R(−φ)·R(φ) = I.
  Mat<double> Y = X;
  rope_apply<double>(Y, 3, positions, 10000.0);
  rope_backward<double>(Y, 3, positions, 10000.0);
  EXPECT_TRUE(test::all_close("backward ∘ forward", Y, X, {1e-15, 1e-15}));
}

TEST(Rope, Fp32AgreesWithFp64AndRejectsBadShapes) {
  std::mt19937_64 rng(74);
  const Mat<double> X = test::random_mat(16, 32, rng);
  std::vector<long> positions(16);
  for (int t = 0; t < 16; ++t) positions[t] = (7 * t) % 16;
  Mat<double> Y64 = X;
  rope_apply<double>(Y64, 4, positions, 10000.0);
  Mat<float> Y32 = X.cast<float>();
  rope_apply<float>(Y32, 4, positions, 10000.0);
  // The angles are computed in double for both; fp32 rounds cos, sin and two products.
  EXPECT_TRUE(test::all_close("fp32", Y32, Y64, {1e-6, 1e-6}));
  Mat<double> Z = X;
  EXPECT_THROW(rope_apply<double>(Z, 3, positions, 10000.0), std::invalid_argument);   // 32 % 3
  EXPECT_THROW(rope_apply<double>(Z, 32, positions, 10000.0), std::invalid_argument);  // odd d
  EXPECT_THROW(rope_apply<double>(Z, 4, {0, 1}, 10000.0), std::invalid_argument);
}

}  // namespace
}  // namespace tttlab
