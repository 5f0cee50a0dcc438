// Depthwise causal convolution (the lead's tttlab/nn/causal_conv.hpp): forward against the
// definition, causal_conv_backward against central differences (fp64) for u, w and bias, chunked
// streaming through the history against one call, fp32 against fp64.
#include "tttlab/nn/causal_conv.hpp"

#include <vector>

#include "core/nn/grad_check.hpp"

namespace tttlab {
namespace {

using test::check_gradient;
using test::dot;

// y_t[c] = Σ_j w[c, j]·u_{t−K+1+j}[c] + bias[c], zero before the sequence.
Mat<double> conv_reference(const Mat<double>& u, const Mat<double>& w, const RowVec<double>& bias) {
  const Eigen::Index T = u.rows(), D = u.cols(), K = w.cols();
  Mat<double> y(T, D);
  for (Eigen::Index t = 0; t < T; ++t)
    for (Eigen::Index c = 0; c < D; ++c) {
      double acc = bias(c);
      for (Eigen::Index j = 0; j < K; ++j) {
        const Eigen::Index s = t - K + 1 + j;
        if (s >= 0) acc += w(c, j) * u(s, c);
      }
      y(t, c) = acc;
    }
  return y;
}

TEST(CausalConv, ForwardMatchesDefinition) {
  std::mt19937_64 rng(81);
  for (int K : {1, 2, 4}) {
    const Mat<double> u = test::random_mat(7, 5, rng), w = test::random_mat(5, K, rng);
    const RowVec<double> bias = test::random_row(5, rng);
    Mat<double> history = Mat<double>::Zero(K - 1, 5), y;
    causal_conv_forward<double>(u, w, bias, history, y);
    EXPECT_TRUE(test::all_close("K = " + std::to_string(K), y, conv_reference(u, w, bias),
                                {1e-15, 1e-15}));
  }
}

TEST(CausalConv, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(82);
  const int T = 6, D = 3, K = 4;  // T > K so that every tap meets both padding and data
  Mat<double> u = test::random_mat(T, D, rng), w = test::random_mat(D, K, rng);
  RowVec<double> bias = test::random_row(D, rng);
  const Mat<double> G = test::random_mat(T, D, rng);
  auto loss = [&] {
    Mat<double> history = Mat<double>::Zero(K - 1, D), y;
    causal_conv_forward<double>(u, w, bias, history, y);
    return dot(G, y);
  };
  Mat<double> du, dw = Mat<double>::Zero(D, K);
  RowVec<double> dbias = RowVec<double>::Zero(D);
  causal_conv_backward<double>(u, w, G, du, dw, dbias);
  EXPECT_TRUE(check_gradient("u", u, du, loss));
  EXPECT_TRUE(check_gradient("w", w, dw, loss));
  EXPECT_TRUE(check_gradient("bias", bias, dbias, loss));
  // dw and dbias are ADDED to, du is overwritten.
  const Mat<double> du1 = du, dw1 = dw;
  causal_conv_backward<double>(u, w, G, du, dw, dbias);
  EXPECT_EQ(du, du1);
  EXPECT_TRUE(test::all_close("dw after two calls", dw, Mat<double>(2 * dw1), {1e-15, 0}));
}

TEST(CausalConv, ChunkedStreamingMatchesOneCall) {
  std::mt19937_64 rng(83);
  const int T = 11, D = 4, K = 4;
  const Mat<double> u = test::random_mat(T, D, rng), w = test::random_mat(D, K, rng);
  const RowVec<double> bias = test::random_row(D, rng);
  Mat<double> history = Mat<double>::Zero(K - 1, D), full;
  causal_conv_forward<double>(u, w, bias, history, full);
  history.setZero();
  Mat<double> streamed(T, D), y;
  int start = 0;
  for (int n : {1, 2, 0, 5, 1, 2}) {
    causal_conv_forward<double>(u.middleRows(start, n), w, bias, history, y);
    streamed.middleRows(start, n) = y;
    start += n;
  }
  ASSERT_EQ(start, T);
  EXPECT_EQ(streamed, full);
  EXPECT_EQ(history, Mat<double>(u.bottomRows(K - 1)));
}

TEST(CausalConv, Fp32AgreesWithFp64) {
  std::mt19937_64 rng(84);
  const int T = 32, D = 16, K = 4;
  const Mat<double> u = test::random_mat(T, D, rng), w = test::random_mat(D, K, rng),
                    G = test::random_mat(T, D, rng);
  const RowVec<double> bias = test::random_row(D, rng);
  // Sums of ≤ 4 (outputs, du) or ≤ 32 (dw, dbias) O(1) products in fp32.
  test::expect_fp32_agrees_with_fp64({"y", "du", "dw", "dbias"}, {1e-5, 1e-5}, [&](auto s) {
    using S = decltype(s);
    const Mat<S> us = u.cast<S>(), ws = w.cast<S>();
    Mat<S> h = Mat<S>::Zero(K - 1, D), y, du, dw = Mat<S>::Zero(D, K);
    RowVec<S> db = RowVec<S>::Zero(D);
    causal_conv_forward<S>(us, ws, bias.cast<S>(), h, y);
    causal_conv_backward<S>(us, ws, G.cast<S>(), du, dw, db);
    return std::tuple{y, du, dw, db};
  });
}

}  // namespace
}  // namespace tttlab
