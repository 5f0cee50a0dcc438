// docs/MATH.md §10, oracle 1: the fused LN + L2 gradient against central finite differences (fp64),
// and against itself in fp32.
#include <gtest/gtest.h>

#include <random>

#include "tttlab/ttt/ln_l2.hpp"

namespace tttlab {
namespace {

template <class S>
RowVec<S> random_row(int d, std::mt19937_64& rng, double scale = 1.0) {
  std::normal_distribution<double> n(0.0, scale);
  RowVec<S> r(d);
  for (int i = 0; i < d; ++i) r(i) = S(n(rng));
  return r;
}

TEST(LnL2Grad, MatchesFiniteDifferencesFp64) {
  std::mt19937_64 rng(1);
  for (int d : {4, 16, 64}) {
    const int n = 5;
    Mat<double> Z(n, d), R(n, d);
    for (int i = 0; i < n; ++i) {
      Z.row(i) = random_row<double>(d, rng, 2.0);
      R.row(i) = random_row<double>(d, rng);
    }
    const RowVec<double> gamma = random_row<double>(d, rng).array() + 1.0;
    const RowVec<double> beta = random_row<double>(d, rng);
    Mat<double> G;
    Vec<double> losses;
    ln_l2_grad<double>(Z, R, gamma, beta, 1e-6, G, &losses);
    const double h = 1e-6;
    double max_err = 0;
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(losses(i), ln_l2_loss<double>(Z.row(i), R.row(i), gamma, beta, 1e-6, true), 1e-14);
      for (int j = 0; j < d; ++j) {
        RowVec<double> zp = Z.row(i), zm = Z.row(i);
        zp(j) += h;
        zm(j) -= h;
        const double fd = (ln_l2_loss<double>(zp, R.row(i), gamma, beta, 1e-6, true) -
                           ln_l2_loss<double>(zm, R.row(i), gamma, beta, 1e-6, true)) /
                          (2 * h);
        max_err = std::max(max_err, std::abs(fd - G(i, j)));
      }
    }
    // Oracle 1's bound: central differences carry a rounding error of about
    // ε_mach·ℓ/h, and ℓ grows with d (≈ 60 at d = 64 here), so the bound is 1e-7.
    EXPECT_LT(max_err, 1e-7) << "d = " << d;
  }
}

TEST(LnL2Grad, Fp32AgreesWithFp64) {
  std::mt19937_64 rng(2);
  const int n = 8, d = 32;
  Mat<double> Z(n, d), R(n, d);
  for (int i = 0; i < n; ++i) {
    Z.row(i) = random_row<double>(d, rng);
    R.row(i) = random_row<double>(d, rng);
  }
  const RowVec<double> gamma = RowVec<double>::Ones(d), beta = RowVec<double>::Zero(d);
  Mat<double> G64;
  ln_l2_grad<double>(Z, R, gamma, beta, 1e-6, G64);
  Mat<float> G32;
  ln_l2_grad<float>(Z.cast<float>(), R.cast<float>(), gamma.cast<float>(), beta.cast<float>(),
                    1e-6f, G32);
  // fp32 rounding of O(1) values through a handful of reductions of length 32.
  EXPECT_LT((G32.cast<double>() - G64).cwiseAbs().maxCoeff(), 1e-5);
}

}  // namespace
}  // namespace tttlab
