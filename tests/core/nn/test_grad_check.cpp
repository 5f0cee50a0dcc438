// The gradient-check helper must be able to fail: it accepts an exact gradient and rejects one
// that is off by 1e-5 in a single element (a bug far smaller than any real backward mistake).
#include "core/nn/grad_check.hpp"

namespace tttlab {
namespace {

using test::check_gradient;

TEST(GradCheck, AcceptsExactGradientRejectsPerturbedOne) {
  std::mt19937_64 rng(7);
  Mat<double> x = test::random_mat(3, 4, rng);
  const Mat<double> c = test::random_mat(3, 4, rng);
  // L = Σ c ⊙ sin(x) + ½‖x‖²; ∂L/∂x = c ⊙ cos(x) + x.
  auto loss = [&] { return (c.array() * x.array().sin()).sum() + 0.5 * x.squaredNorm(); };
  const Mat<double> exact = (c.array() * x.array().cos() + x.array()).matrix();
  EXPECT_TRUE(check_gradient("x", x, exact, loss));

  Mat<double> wrong = exact;
  wrong(2, 1) += 1e-5;
  const ::testing::AssertionResult r = check_gradient("x", x, wrong, loss);
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("(2, 1)"), std::string::npos) << r.message();

  Mat<double> transposed_bug = exact;
  std::swap(transposed_bug(0, 1), transposed_bug(1, 0));
  EXPECT_FALSE(check_gradient("x", x, transposed_bug, loss));
}

TEST(GradCheck, AllCloseReportsNaN) {
  Mat<double> a = Mat<double>::Zero(2, 2), b = Mat<double>::Zero(2, 2);
  a(1, 1) = NAN;
  EXPECT_FALSE(test::all_close("nan", a, b, {1e-3, 1e-3}));
}

}  // namespace
}  // namespace tttlab
