// SwiGLU feed-forward and the GELU output gate: forward against scalar loops written from the
// definitions (independent of activations.hpp), backward against central differences (fp64) for
// every input and weight, fp32 against fp64.
#include "core/nn/grad_check.hpp"
#include "tttlab/nn/gelu_gate.hpp"
#include "tttlab/nn/swiglu.hpp"

namespace tttlab {
namespace {

using test::check_gradient;
using test::dot;

Mat<double> swiglu_reference(const Mat<double>& X, const Mat<double>& Wg, const Mat<double>& Wu,
                             const Mat<double>& Wd) {
  const Eigen::Index T = X.rows(), D = X.cols(), F = Wg.cols();
  Mat<double> H(T, F), Y = Mat<double>::Zero(T, D);
  for (Eigen::Index t = 0; t < T; ++t)
    for (Eigen::Index f = 0; f < F; ++f) {
      double a = 0, b = 0;
      for (Eigen::Index i = 0; i < D; ++i) {
        a += X(t, i) * Wg(i, f);
        b += X(t, i) * Wu(i, f);
      }
      H(t, f) = a / (1 + std::exp(-a)) * b;
    }
  for (Eigen::Index t = 0; t < T; ++t)
    for (Eigen::Index j = 0; j < D; ++j)
      for (Eigen::Index f = 0; f < F; ++f) Y(t, j) += H(t, f) * Wd(f, j);
  return Y;
}

Mat<double> gelu_gate_reference(const Mat<double>& X, const Mat<double>& Wg, const Mat<double>& Z) {
  Mat<double> Out(Z.rows(), Z.cols());
  for (Eigen::Index t = 0; t < Z.rows(); ++t)
    for (Eigen::Index j = 0; j < Z.cols(); ++j) {
      double a = 0;
      for (Eigen::Index i = 0; i < X.cols(); ++i) a += X(t, i) * Wg(i, j);
      const double g = 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
      Out(t, j) = g * Z(t, j);
    }
  return Out;
}

TEST(Swiglu, ForwardMatchesDefinition) {
  std::mt19937_64 rng(31);
  const Mat<double> X = test::random_mat(5, 6, rng), Wg = test::random_mat(6, 9, rng),
                    Wu = test::random_mat(6, 9, rng), Wd = test::random_mat(9, 6, rng);
  Mat<double> Y;
  SwigluCache<double> cache;
  swiglu_forward<double>(X, Wg, Wu, Wd, Y, cache);
  EXPECT_TRUE(test::all_close("swiglu", Y, swiglu_reference(X, Wg, Wu, Wd), {1e-13, 1e-13}));
}

TEST(Swiglu, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(32);
  const int T = 4, D = 3, F = 5;
  Mat<double> X = test::random_mat(T, D, rng), Wg = test::random_mat(D, F, rng),
              Wu = test::random_mat(D, F, rng), Wd = test::random_mat(F, D, rng);
  const Mat<double> G = test::random_mat(T, D, rng);
  auto loss = [&] {
    Mat<double> Y;
    SwigluCache<double> c;
    swiglu_forward<double>(X, Wg, Wu, Wd, Y, c);
    return dot(G, Y);
  };
  Mat<double> Y, dX;
  SwigluCache<double> cache;
  swiglu_forward<double>(X, Wg, Wu, Wd, Y, cache);
  Mat<double> dWg = Mat<double>::Zero(D, F), dWu = Mat<double>::Zero(D, F),
              dWd = Mat<double>::Zero(F, D);
  swiglu_backward<double>(X, Wg, Wu, Wd, cache, G, dX, dWg, dWu, dWd);
  EXPECT_TRUE(check_gradient("X", X, dX, loss));
  EXPECT_TRUE(check_gradient("W_gate", Wg, dWg, loss));
  EXPECT_TRUE(check_gradient("W_up", Wu, dWu, loss));
  EXPECT_TRUE(check_gradient("W_down", Wd, dWd, loss));
}

TEST(Swiglu, Fp32AgreesWithFp64AndChecksCache) {
  std::mt19937_64 rng(33);
  const int T = 16, D = 32, F = 48;
  const Mat<double> X = test::random_mat(T, D, rng), Wg = test::random_mat(D, F, rng, 0.2),
                    Wu = test::random_mat(D, F, rng, 0.2), Wd = test::random_mat(F, D, rng, 0.2),
                    G = test::random_mat(T, D, rng);
  Mat<double> Y64, dX64, dWg64 = Mat<double>::Zero(D, F), dWu64 = Mat<double>::Zero(D, F),
                         dWd64 = Mat<double>::Zero(F, D);
  SwigluCache<double> c64;
  swiglu_forward<double>(X, Wg, Wu, Wd, Y64, c64);
  swiglu_backward<double>(X, Wg, Wu, Wd, c64, G, dX64, dWg64, dWu64, dWd64);
  const Mat<float> Xf = X.cast<float>(), Wgf = Wg.cast<float>(), Wuf = Wu.cast<float>(),
                   Wdf = Wd.cast<float>(), Gf = G.cast<float>();
  Mat<float> Y32, dX32, dWg32 = Mat<float>::Zero(D, F), dWu32 = Mat<float>::Zero(D, F),
                        dWd32 = Mat<float>::Zero(F, D);
  SwigluCache<float> c32;
  swiglu_forward<float>(Xf, Wgf, Wuf, Wdf, Y32, c32);
  swiglu_backward<float>(Xf, Wgf, Wuf, Wdf, c32, Gf, dX32, dWg32, dWu32, dWd32);
  // Two chained products with sums of ≤ 48 terms of O(1) in fp32: ≲ 1e-5 absolute.
  const test::Tolerance tol{1e-5, 2e-5};
  EXPECT_TRUE(test::all_close("Y", Y32, Y64, tol));
  EXPECT_TRUE(test::all_close("dX", dX32, dX64, tol));
  EXPECT_TRUE(test::all_close("dW_gate", dWg32, dWg64, tol));
  EXPECT_TRUE(test::all_close("dW_up", dWu32, dWu64, tol));
  EXPECT_TRUE(test::all_close("dW_down", dWd32, dWd64, tol));
  // A cache from a forward on another sequence length is refused.
  SwigluCache<float> stale;
  swiglu_forward<float>(Xf.topRows(3), Wgf, Wuf, Wdf, Y32, stale);
  EXPECT_THROW(swiglu_backward<float>(Xf, Wgf, Wuf, Wdf, stale, Gf, dX32, dWg32, dWu32, dWd32),
               std::invalid_argument);
  EXPECT_THROW(swiglu_forward<float>(Xf, Wgf, Wdf, Wdf, Y32, stale), std::invalid_argument);
}

TEST(GeluGate, ForwardMatchesDefinition) {
  std::mt19937_64 rng(34);
  const Mat<double> X = test::random_mat(5, 6, rng), Wg = test::random_mat(6, 4, rng),
                    Z = test::random_mat(5, 4, rng);
  Mat<double> Out;
  GeluGateCache<double> cache;
  gelu_gate_forward<double>(X, Wg, Z, Out, cache);
  EXPECT_TRUE(test::all_close("gelu_gate", Out, gelu_gate_reference(X, Wg, Z), {1e-13, 1e-14}));
}

TEST(GeluGate, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(35);
  const int T = 4, Din = 3, D = 5;
  Mat<double> X = test::random_mat(T, Din, rng), Wg = test::random_mat(Din, D, rng),
              Z = test::random_mat(T, D, rng);
  const Mat<double> G = test::random_mat(T, D, rng);
  auto loss = [&] {
    Mat<double> Out;
    GeluGateCache<double> c;
    gelu_gate_forward<double>(X, Wg, Z, Out, c);
    return dot(G, Out);
  };
  Mat<double> Out, dX, dZ;
  GeluGateCache<double> cache;
  gelu_gate_forward<double>(X, Wg, Z, Out, cache);
  Mat<double> dWg = Mat<double>::Zero(Din, D);
  gelu_gate_backward<double>(X, Wg, Z, cache, G, dX, dWg, dZ);
  EXPECT_TRUE(check_gradient("X", X, dX, loss));
  EXPECT_TRUE(check_gradient("W_g", Wg, dWg, loss));
  EXPECT_TRUE(check_gradient("Z", Z, dZ, loss));
}

TEST(GeluGate, Fp32AgreesWithFp64) {
  std::mt19937_64 rng(36);
  const int T = 16, D = 32;
  const Mat<double> X = test::random_mat(T, D, rng), Wg = test::random_mat(D, D, rng, 0.3),
                    Z = test::random_mat(T, D, rng), G = test::random_mat(T, D, rng);
  // Products of length 32 in fp32, then elementwise tanh: ≲ 1e-5 absolute.
  test::expect_fp32_agrees_with_fp64({"Out", "dX", "dW_g", "dZ"}, {1e-5, 1e-5}, [&](auto s) {
    using S = decltype(s);
    const Mat<S> Xs = X.cast<S>(), Wgs = Wg.cast<S>(), Zs = Z.cast<S>();
    Mat<S> O, dX, dZ, dWg = Mat<S>::Zero(D, D);
    GeluGateCache<S> cache;
    gelu_gate_forward<S>(Xs, Wgs, Zs, O, cache);
    gelu_gate_backward<S>(Xs, Wgs, Zs, cache, G.cast<S>(), dX, dWg, dZ);
    return std::tuple{O, dX, dWg, dZ};
  });
}

// Pre-activations up to ±100: the vectorised fp32 logistic and tanh saturate cleanly (no inf/NaN in
// values or gradients) and still agree with the fp64 definitions.
TEST(GatedActivations, SaturateCleanlyForLargeInputs) {
  Mat<double> X(1, 1);
  Mat<double> pre(1, 9);
  pre << -100, -30, -9.5, -2, 0, 2, 9.5, 30, 100;
  const Mat<double> Wg = pre, Z = Mat<double>::Ones(1, 9), ones = Mat<double>::Ones(1, 9);
  X << 1.0;
  for (bool fp32 : {false, true}) {
    Mat<double> out, dX, dZ, dW = Mat<double>::Zero(1, 9), Y, dXs, dWg = Mat<double>::Zero(1, 9),
                          dWu = Mat<double>::Zero(1, 9), dWd = Mat<double>::Zero(9, 1);
    if (fp32) {
      const Mat<float> Xf = X.cast<float>(), Wf = Wg.cast<float>(), Zf = Z.cast<float>(),
                       Gf = ones.cast<float>(), Wu = Mat<float>::Ones(1, 9),
                       Wd = Mat<float>::Ones(9, 1), G1 = Mat<float>::Ones(1, 1);
      Mat<float> o, a, b, y, e, g = Mat<float>::Zero(1, 9), h = Mat<float>::Zero(1, 9),
                             k = Mat<float>::Zero(9, 1);
      Mat<float> dwf = Mat<float>::Zero(1, 9);
      GeluGateCache<float> gc;
      gelu_gate_forward<float>(Xf, Wf, Zf, o, gc);
      gelu_gate_backward<float>(Xf, Wf, Zf, gc, Gf, a, dwf, b);
      SwigluCache<float> sc;
      swiglu_forward<float>(Xf, Wf, Wu, Wd, y, sc);
      swiglu_backward<float>(Xf, Wf, Wu, Wd, sc, G1, e, g, h, k);
      out = o.cast<double>();
      dW = dwf.cast<double>();
      dZ = b.cast<double>();
      Y = y.cast<double>();
      dWg = g.cast<double>();
    } else {
      GeluGateCache<double> gc;
      gelu_gate_forward<double>(X, Wg, Z, out, gc);
      gelu_gate_backward<double>(X, Wg, Z, gc, ones, dX, dW, dZ);
      SwigluCache<double> sc;
      swiglu_forward<double>(X, Wg, Mat<double>::Ones(1, 9), Mat<double>::Ones(9, 1), Y, sc);
      swiglu_backward<double>(X, Wg, Mat<double>::Ones(1, 9), Mat<double>::Ones(9, 1), sc,
                              Mat<double>::Ones(1, 1), dXs, dWg, dWu, dWd);
    }
    EXPECT_TRUE(out.allFinite() && dW.allFinite() && dZ.allFinite() && Y.allFinite() &&
                dWg.allFinite())
        << (fp32 ? "fp32" : "fp64");
    // gelu(a) → a for a ≫ 0, → 0 for a ≪ 0; its slope → 1 and 0. silu likewise.
    Mat<double> gelu_ref(1, 9), silu_ref(1, 9), silu_slope(1, 9);
    for (int j = 0; j < 9; ++j) {
      const double a = pre(0, j);
      gelu_ref(0, j) = 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
      const double s = 1 / (1 + std::exp(-a));
      silu_ref(0, j) = a * s;
      silu_slope(0, j) = s * (1 + a * (1 - s));  // dY/dW_gate[0, j] with X = 1, W_up = 1
    }
    // fp32: a few ulps of values up to 100 (≈ 1e-5), and the fit error of the vectorised logistic.
    const test::Tolerance tol = fp32 ? test::Tolerance{1e-6, 2e-5} : test::Tolerance{1e-14, 1e-14};
    EXPECT_TRUE(test::all_close(fp32 ? "gelu fp32" : "gelu fp64", dZ, gelu_ref, tol));
    EXPECT_TRUE(test::all_close(fp32 ? "swiglu fp32" : "swiglu fp64", Y,
                                Mat<double>::Constant(1, 1, silu_ref.sum()), tol));
    EXPECT_TRUE(
        test::all_close(fp32 ? "silu slope fp32" : "silu slope fp64", dWg, silu_slope, tol));
  }
}

}  // namespace
}  // namespace tttlab
