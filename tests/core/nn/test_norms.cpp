// RMSNorm and LayerNorm: forward against scalar-loop references of the definitions, backward
// against central differences (fp64) for every input and parameter, fp32 against fp64.
#include "tttlab/nn/norms.hpp"

#include "core/nn/grad_check.hpp"

namespace tttlab {
namespace {

using test::check_gradient;
using test::dot;

constexpr double k_eps = 1e-6;

Mat<double> rms_reference(const Mat<double>& X, const RowVec<double>& w) {
  Mat<double> Y(X.rows(), X.cols());
  for (Eigen::Index t = 0; t < X.rows(); ++t) {
    double ms = 0;
    for (Eigen::Index j = 0; j < X.cols(); ++j) ms += X(t, j) * X(t, j);
    ms /= double(X.cols());
    for (Eigen::Index j = 0; j < X.cols(); ++j) Y(t, j) = X(t, j) / std::sqrt(ms + k_eps) * w(j);
  }
  return Y;
}

Mat<double> ln_reference(const Mat<double>& X, const RowVec<double>& g, const RowVec<double>& b) {
  Mat<double> Y(X.rows(), X.cols());
  const double D = double(X.cols());
  for (Eigen::Index t = 0; t < X.rows(); ++t) {
    double mu = 0, var = 0;
    for (Eigen::Index j = 0; j < X.cols(); ++j) mu += X(t, j);
    mu /= D;
    for (Eigen::Index j = 0; j < X.cols(); ++j) var += (X(t, j) - mu) * (X(t, j) - mu);
    var /= D;  // biased
    for (Eigen::Index j = 0; j < X.cols(); ++j)
      Y(t, j) = (X(t, j) - mu) / std::sqrt(var + k_eps) * g(j) + b(j);
  }
  return Y;
}

TEST(RmsNorm, ForwardMatchesDefinition) {
  std::mt19937_64 rng(21);
  const Mat<double> X = test::random_mat(6, 10, rng, 3.0);
  const RowVec<double> w = test::random_row(10, rng);
  Mat<double> Y;
  rms_norm_forward<double>(X, w, Y);
  EXPECT_TRUE(test::all_close("rms_norm", Y, rms_reference(X, w), {1e-14, 1e-14}));
  // With w = 1 every row has mean square 1/(1 + ε/ms).
  rms_norm_forward<double>(X, RowVec<double>::Ones(10), Y);
  for (Eigen::Index t = 0; t < 6; ++t) {
    const double ms = X.row(t).squaredNorm() / 10;
    EXPECT_NEAR(Y.row(t).squaredNorm() / 10, ms / (ms + k_eps), 1e-14);
  }
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(22);
  Mat<double> X = test::random_mat(4, 6, rng);
  RowVec<double> w = test::random_row(6, rng);
  const Mat<double> G = test::random_mat(4, 6, rng);
  auto loss = [&] {
    Mat<double> Y;
    rms_norm_forward<double>(X, w, Y);
    return dot(G, Y);
  };
  Mat<double> dX;
  RowVec<double> dw = RowVec<double>::Zero(6);
  rms_norm_backward<double>(X, w, G, dX, dw);
  EXPECT_TRUE(check_gradient("X", X, dX, loss));
  EXPECT_TRUE(check_gradient("w", w, dw, loss));
  // Inputs of size 1e-4, comparable with √ε = 1e-3: ε is not negligible, and the gradients are
  // ~1e3. The loss curves on the scale √ε, so h shrinks with the inputs to 1e-8 (h = 1e-6 would be
  // 1 % of the values, a truncation error ≈ (1e-6/1e-3)² relative); the rounding floor
  // u·Σ|terms|/h ≈ 2e-7 absolute is then ≈ 1e-10 of these gradients.
  X *= 1e-4;
  rms_norm_backward<double>(X, w, G, dX, dw.setZero());
  EXPECT_TRUE(check_gradient("X (tiny inputs)", X, dX, loss, {1e-7, 1e-6}, 1e-8));
}

TEST(RmsNorm, Fp32AgreesWithFp64) {
  std::mt19937_64 rng(23);
  const Mat<double> X = test::random_mat(16, 64, rng, 2.0), G = test::random_mat(16, 64, rng);
  const RowVec<double> w = test::random_row(64, rng);
  // Sums of 64 (rows) or 16 (columns) O(1) products in fp32: ≲ 64·6e-8 ≈ 4e-6 worst case.
  test::expect_fp32_agrees_with_fp64({"Y", "dX", "dw"}, {1e-5, 1e-5}, [&](auto s) {
    using S = decltype(s);
    const Mat<S> Xs = X.cast<S>(), Gs = G.cast<S>();
    const RowVec<S> ws = w.cast<S>();
    Mat<S> Y, dX;
    RowVec<S> dw = RowVec<S>::Zero(64);
    rms_norm_forward<S>(Xs, ws, Y);
    rms_norm_backward<S>(Xs, ws, Gs, dX, dw);
    return std::tuple{Y, dX, dw};
  });
}

TEST(LayerNorm, ForwardMatchesDefinition) {
  std::mt19937_64 rng(24);
  Mat<double> X = test::random_mat(6, 10, rng, 2.0);
  X.col(3).array() += 5.0;  // a non-zero mean per row
  const RowVec<double> g = test::random_row(10, rng), b = test::random_row(10, rng);
  Mat<double> Y;
  layer_norm_forward<double>(X, g, b, Y);
  EXPECT_TRUE(test::all_close("layer_norm", Y, ln_reference(X, g, b), {1e-13, 1e-14}));
  // With γ = 1, β = 0: zero mean and (biased) variance var/(var + ε) per row.
  layer_norm_forward<double>(X, RowVec<double>::Ones(10), RowVec<double>::Zero(10), Y);
  for (Eigen::Index t = 0; t < 6; ++t) {
    const double mu = X.row(t).mean();
    const double var = (X.row(t).array() - mu).square().mean();
    EXPECT_NEAR(Y.row(t).mean(), 0.0, 1e-15);
    EXPECT_NEAR(Y.row(t).squaredNorm() / 10, var / (var + k_eps), 1e-14);
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(25);
  Mat<double> X = test::random_mat(4, 6, rng);
  X.col(0).array() += 2.0;
  RowVec<double> g = test::random_row(6, rng), b = test::random_row(6, rng);
  const Mat<double> G = test::random_mat(4, 6, rng);
  auto loss = [&] {
    Mat<double> Y;
    layer_norm_forward<double>(X, g, b, Y);
    return dot(G, Y);
  };
  Mat<double> dX;
  RowVec<double> dg = RowVec<double>::Zero(6), db = RowVec<double>::Zero(6);
  layer_norm_backward<double>(X, g, G, dX, dg, db);
  EXPECT_TRUE(check_gradient("X", X, dX, loss));
  EXPECT_TRUE(check_gradient("gamma", g, dg, loss));
  EXPECT_TRUE(check_gradient("beta", b, db, loss));
}

TEST(LayerNorm, Fp32AgreesWithFp64) {
  std::mt19937_64 rng(26);
  const Mat<double> X = test::random_mat(16, 64, rng, 2.0), G = test::random_mat(16, 64, rng);
  const RowVec<double> g = test::random_row(64, rng), b = test::random_row(64, rng);
  // As for RMSNorm: reductions of ≤ 64 O(1) terms in fp32.
  test::expect_fp32_agrees_with_fp64({"Y", "dX", "dgamma", "dbeta"}, {1e-5, 1e-5}, [&](auto s) {
    using S = decltype(s);
    const Mat<S> Xs = X.cast<S>(), Gs = G.cast<S>();
    const RowVec<S> gs = g.cast<S>();
    Mat<S> Y, dX;
    RowVec<S> dg = RowVec<S>::Zero(64), db = RowVec<S>::Zero(64);
    layer_norm_forward<S>(Xs, gs, b.cast<S>(), Y);
    layer_norm_backward<S>(Xs, gs, Gs, dX, dg, db);
    return std::tuple{Y, dX, dg, db};
  });
}

TEST(Norms, RejectBadShapes) {
  const Mat<double> X = Mat<double>::Ones(3, 4);
  Mat<double> Y, dX;
  RowVec<double> w5 = RowVec<double>::Ones(5), w4 = RowVec<double>::Ones(4);
  EXPECT_THROW(rms_norm_forward<double>(X, w5, Y), std::invalid_argument);
  EXPECT_THROW(layer_norm_forward<double>(X, w4, w5, Y), std::invalid_argument);
  EXPECT_THROW(rms_norm_backward<double>(X, w4, X, dX, w5), std::invalid_argument);
}

}  // namespace
}  // namespace tttlab
