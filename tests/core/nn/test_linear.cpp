// Dense layer: forward against a scalar-loop reference, backward against central differences
// (fp64) for X, W and b, accumulation semantics, fp32 against fp64, and shape errors.
#include "tttlab/nn/linear.hpp"

#include "core/nn/grad_check.hpp"

namespace tttlab {
namespace {

using test::check_gradient;
using test::dot;

Mat<double> linear_reference(const Mat<double>& X, const Mat<double>& W, const RowVec<double>* b) {
  Mat<double> Y(X.rows(), W.cols());
  for (Eigen::Index t = 0; t < X.rows(); ++t)
    for (Eigen::Index o = 0; o < W.cols(); ++o) {
      double acc = b ? (*b)(o) : 0.0;
      for (Eigen::Index i = 0; i < X.cols(); ++i) acc += X(t, i) * W(i, o);
      Y(t, o) = acc;
    }
  return Y;
}

TEST(Linear, ForwardMatchesScalarReference) {
  std::mt19937_64 rng(11);
  const Mat<double> X = test::random_mat(7, 5, rng), W = test::random_mat(5, 3, rng);
  const RowVec<double> b = test::random_row(3, rng);
  Mat<double> Y;
  linear_forward<double>(X, W, Y);
  EXPECT_TRUE(test::all_close("X·W", Y, linear_reference(X, W, nullptr), {1e-14, 1e-14}));
  linear_forward<double>(X, W, b, Y);
  EXPECT_TRUE(test::all_close("X·W + b", Y, linear_reference(X, W, &b), {1e-14, 1e-14}));
}

TEST(Linear, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(12);
  Mat<double> X = test::random_mat(4, 3, rng), W = test::random_mat(3, 5, rng);
  RowVec<double> b = test::random_row(5, rng);
  const Mat<double> G = test::random_mat(4, 5, rng);  // upstream dL/dY
  auto loss = [&] {
    Mat<double> Y;
    linear_forward<double>(X, W, b, Y);
    return dot(G, Y);
  };
  Mat<double> dX;
  Mat<double> dW = Mat<double>::Zero(3, 5);
  RowVec<double> db = RowVec<double>::Zero(5);
  linear_backward<double>(X, W, G, &dX, dW, db);
  EXPECT_TRUE(check_gradient("X", X, dX, loss));
  EXPECT_TRUE(check_gradient("W", W, dW, loss));
  EXPECT_TRUE(check_gradient("b", b, db, loss));

  // Without bias: same dX and dW.
  Mat<double> dX2;
  Mat<double> dW2 = Mat<double>::Zero(3, 5);
  linear_backward<double>(X, W, G, &dX2, dW2);
  EXPECT_EQ(dX2, dX);
  EXPECT_EQ(dW2, dW);
}

TEST(Linear, ParameterGradientsAccumulateActivationGradientsOverwrite) {
  std::mt19937_64 rng(13);
  const Mat<double> X = test::random_mat(4, 3, rng), W = test::random_mat(3, 2, rng);
  const Mat<double> G = test::random_mat(4, 2, rng);
  Mat<double> dX = Mat<double>::Constant(9, 9, 5.0);  // stale content of another shape
  Mat<double> dW = Mat<double>::Zero(3, 2);
  RowVec<double> db = RowVec<double>::Zero(2);
  linear_backward<double>(X, W, G, &dX, dW, db);
  const Mat<double> dX1 = dX, dW1 = dW;
  const RowVec<double> db1 = db;
  linear_backward<double>(X, W, G, &dX, dW, db);
  EXPECT_EQ(dX, dX1);
  EXPECT_TRUE(test::all_close("dW twice", dW, (2 * dW1).eval(), {1e-15, 0}));
  EXPECT_TRUE(test::all_close("db twice", db, (2 * db1).eval(), {1e-15, 0}));
  // dX may be skipped; a gradient may be a view into a larger buffer.
  Mat<double> big = Mat<double>::Zero(5, 4);
  linear_backward<double>(X, W, G, nullptr, big.block(1, 1, 3, 2));
  EXPECT_EQ(Mat<double>(big.block(1, 1, 3, 2)), dW1);
  EXPECT_EQ(big.col(0).squaredNorm() + big.row(0).squaredNorm() + big.row(4).squaredNorm(), 0.0);
}

TEST(Linear, Fp32AgreesWithFp64) {
  std::mt19937_64 rng(14);
  const int T = 16, in = 32, out = 24;
  const Mat<double> X = test::random_mat(T, in, rng), W = test::random_mat(in, out, rng, 0.2);
  const RowVec<double> b = test::random_row(out, rng);
  const Mat<double> G = test::random_mat(T, out, rng);
  // Dot products of length ≤ 32 of O(1) terms: fp32 rounding ≈ √32·6e-8·|terms| ≲ 1e-6; 1e-5
  // absolute leaves margin, and is far below any indexing or transposition error (O(1)).
  test::expect_fp32_agrees_with_fp64({"Y", "dX", "dW", "db"}, {1e-5, 1e-5}, [&](auto s) {
    using S = decltype(s);
    const Mat<S> Xs = X.cast<S>(), Ws = W.cast<S>(), Gs = G.cast<S>();
    Mat<S> Y, dX, dW = Mat<S>::Zero(in, out);
    RowVec<S> db = RowVec<S>::Zero(out);
    linear_forward<S>(Xs, Ws, b.cast<S>(), Y);
    linear_backward<S>(Xs, Ws, Gs, &dX, dW, db);
    return std::tuple{Y, dX, dW, db};
  });
}

TEST(Linear, RejectsBadShapesAndAliasing) {
  Mat<double> X = Mat<double>::Ones(4, 3), W = Mat<double>::Ones(2, 5), Y;
  EXPECT_THROW(linear_forward<double>(X, W, Y), std::invalid_argument);
  Mat<double> W2 = Mat<double>::Ones(3, 3);
  RowVec<double> b = RowVec<double>::Ones(2);
  EXPECT_THROW(linear_forward<double>(X, W2, b, Y), std::invalid_argument);
  EXPECT_THROW(linear_forward<double>(X, W2, X), std::invalid_argument);  // in place
  Mat<double> dW = Mat<double>::Zero(3, 4);                               // wrong shape
  EXPECT_THROW(linear_backward<double>(X, W2, X, nullptr, dW), std::invalid_argument);
  try {
    linear_forward<double>(X, W, Y);
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "linear_forward: W is [2, 5] but must be [3, 5] (rows of W = width of X)");
  }
}

}  // namespace
}  // namespace tttlab
