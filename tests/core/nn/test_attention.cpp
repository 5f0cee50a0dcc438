// Causal softmax attention: forward against a scalar-loop reference of the definition, causality,
// backward against central differences (fp64) for Q, K and V, the KV-cache streaming form against
// the full forward for several chunkings, stability with large scores, fp32 against fp64; and the
// sliding-window form (LaCT's local attention) against the same reference restricted to the window,
// its backward against central differences, its cached form, and window ≤ 0 or ≥ T as the causal
// attention.
#include <vector>

#include "core/nn/grad_check.hpp"
#include "tttlab/nn/attention.hpp"

namespace tttlab {
namespace {

// window > 0: query t sees keys t − window < u ≤ t only.
Mat<double> attention_reference(const Mat<double>& Q, const Mat<double>& K, const Mat<double>& V,
                                int heads, int window = 0) {
  const Eigen::Index T = Q.rows(), d = Q.cols() / heads;
  Mat<double> O = Mat<double>::Zero(T, Q.cols());
  for (int h = 0; h < heads; ++h)
    for (Eigen::Index t = 0; t < T; ++t) {
      std::vector<double> s(t + 1);
      double m = -INFINITY;
      const Eigen::Index lo = window > 0 ? std::max<Eigen::Index>(0, t - window + 1) : 0;
      for (Eigen::Index u = lo; u <= t; ++u) {
        double acc = 0;
        for (Eigen::Index j = 0; j < d; ++j) acc += Q(t, h * d + j) * K(u, h * d + j);
        s[u] = acc / std::sqrt(double(d));
        m = std::max(m, s[u]);
      }
      double z = 0;
      for (Eigen::Index u = lo; u <= t; ++u) z += std::exp(s[u] - m);
      for (Eigen::Index u = lo; u <= t; ++u)
        for (Eigen::Index j = 0; j < d; ++j)
          O(t, h * d + j) += std::exp(s[u] - m) / z * V(u, h * d + j);
    }
  return O;
}

struct Shape {
  int T, heads, d;
};

TEST(CausalAttention, ForwardMatchesDefinition) {
  std::mt19937_64 rng(51);
  for (Shape s : {Shape{7, 2, 3}, Shape{1, 1, 4}, Shape{9, 3, 2}}) {
    const int D = s.heads * s.d;
    const Mat<double> Q = test::random_mat(s.T, D, rng, 1.5), K = test::random_mat(s.T, D, rng),
                      V = test::random_mat(s.T, D, rng);
    Mat<double> O;
    causal_attention_forward<double>(Q, K, V, s.heads, O);
    EXPECT_TRUE(test::all_close("attention T=" + std::to_string(s.T), O,
                                attention_reference(Q, K, V, s.heads), {1e-13, 1e-14}));
  }
}

TEST(CausalAttention, FutureTokensDoNotChangeThePast) {
  std::mt19937_64 rng(52);
  const Mat<double> Q = test::random_mat(8, 4, rng), K = test::random_mat(8, 4, rng),
                    V = test::random_mat(8, 4, rng);
  Mat<double> O, O2;
  causal_attention_forward<double>(Q, K, V, 2, O);
  Mat<double> Q2 = Q, K2 = K, V2 = V;
  Q2.bottomRows(3).setRandom();
  K2.bottomRows(3).setRandom();
  V2.bottomRows(3).setRandom();
  causal_attention_forward<double>(Q2, K2, V2, 2, O2);
  EXPECT_EQ(Mat<double>(O.topRows(5)), Mat<double>(O2.topRows(5)));
  EXPECT_NE(Mat<double>(O.bottomRows(3)), Mat<double>(O2.bottomRows(3)));
}

TEST(CausalAttention, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(53);
  for (Shape s : {Shape{5, 2, 3}, Shape{4, 1, 2}}) {
    const int D = s.heads * s.d;
    const Mat<double> Q = test::random_mat(s.T, D, rng), K = test::random_mat(s.T, D, rng),
                      V = test::random_mat(s.T, D, rng), G = test::random_mat(s.T, D, rng);
    test::expect_qkv_gradients(causal_attention_forward<double>, causal_attention_backward<double>,
                               Q, K, V, G, s.heads);
  }
}

TEST(CausalAttention, CachedStreamingMatchesFullForward) {
  std::mt19937_64 rng(54);
  const int T = 11, heads = 2, D = 8;
  const Mat<double> Q = test::random_mat(T, D, rng), K = test::random_mat(T, D, rng),
                    V = test::random_mat(T, D, rng);
  Mat<double> full;
  causal_attention_forward<double>(Q, K, V, heads, full);
  KvCache<double> cache;
  for (const std::vector<int>& chunks :
       {std::vector<int>(T, 1), std::vector<int>{3, 1, 4, 0, 3}, std::vector<int>{T}}) {
    cache.clear();
    Mat<double> streamed(T, D), O;
    int start = 0;
    for (int n : chunks) {
      causal_attention_forward_cached<double>(Q.middleRows(start, n), K.middleRows(start, n),
                                              V.middleRows(start, n), heads, cache, O);
      ASSERT_EQ(O.rows(), n);
      streamed.middleRows(start, n) = O;
      start += n;
    }
    ASSERT_EQ(start, T);
    EXPECT_EQ(cache.length, T);
    // Same sums in another order (dense vs triangular products): a few ulps.
    EXPECT_TRUE(test::all_close("streamed in " + std::to_string(chunks.size()) + " chunks",
                                streamed, full, {1e-14, 1e-15}));
  }
  // A cache of another width is refused until cleared.
  EXPECT_THROW(causal_attention_forward_cached<double>(Q.leftCols(4), K.leftCols(4), V.leftCols(4),
                                                       heads, cache, full),
               std::invalid_argument);
  cache.clear();
  Mat<double> O;
  causal_attention_forward_cached<double>(Q.leftCols(4), K.leftCols(4), V.leftCols(4), heads, cache,
                                          O);
  EXPECT_EQ(cache.length, T);
}

// Scores in the thousands: exp would overflow even in fp64 without the row maximum subtracted.
TEST(CausalAttention, StableForLargeScores) {
  std::mt19937_64 rng(55);
  const Mat<double> Q = test::random_mat(6, 4, rng, 3000.0), K = test::random_mat(6, 4, rng),
                    V = test::random_mat(6, 4, rng);
  Mat<double> O;
  causal_attention_forward<double>(Q, K, V, 2, O);
  EXPECT_TRUE(test::all_close("large scores", O, attention_reference(Q, K, V, 2), {1e-12, 1e-13}));
  Mat<float> Of, dQ, dK, dV;
  const Mat<float> Qf = Q.cast<float>(), Kf = K.cast<float>(), Vf = V.cast<float>();
  causal_attention_forward<float>(Qf, Kf, Vf, 2, Of);
  causal_attention_backward<float>(Qf, Kf, Vf, 2, Mat<float>::Ones(6, 4), dQ, dK, dV);
  EXPECT_TRUE(Of.allFinite() && dQ.allFinite() && dK.allFinite() && dV.allFinite());
}

TEST(CausalAttention, Fp32AgreesWithFp64) {
  std::mt19937_64 rng(56);
  const int T = 32, heads = 4, D = 32;
  const Mat<double> Q = test::random_mat(T, D, rng), K = test::random_mat(T, D, rng),
                    V = test::random_mat(T, D, rng), G = test::random_mat(T, D, rng);
  // Scores of O(1), exp, and sums over ≤ 32 keys in fp32: ≲ 1e-5 absolute on O(1) results.
  test::expect_fp32_agrees_with_fp64({"O", "dQ", "dK", "dV"}, {1e-5, 1e-5}, [&](auto s) {
    using S = decltype(s);
    const Mat<S> Qs = Q.cast<S>(), Ks = K.cast<S>(), Vs = V.cast<S>();
    Mat<S> O, dQ, dK, dV;
    causal_attention_forward<S>(Qs, Ks, Vs, heads, O);
    causal_attention_backward<S>(Qs, Ks, Vs, heads, G.cast<S>(), dQ, dK, dV);
    return std::tuple{O, dQ, dK, dV};
  });
}

TEST(CausalAttention, EmptySequenceGivesEmptyResults) {
  const Mat<double> E(0, 6);
  Mat<double> O = Mat<double>::Ones(2, 2), dQ, dK, dV;
  causal_attention_forward<double>(E, E, E, 2, O);
  causal_attention_backward<double>(E, E, E, 2, E, dQ, dK, dV);
  EXPECT_EQ(O.rows(), 0);
  EXPECT_EQ(O.cols(), 6);
  EXPECT_EQ(dK.rows(), 0);
}

TEST(CausalAttention, RejectsBadArguments) {
  const Mat<double> Q = Mat<double>::Ones(3, 6);
  Mat<double> O;
  EXPECT_THROW(causal_attention_forward<double>(Q, Q, Q, 4, O), std::invalid_argument);
  EXPECT_THROW(causal_attention_forward<double>(Q, Q, Q, 0, O), std::invalid_argument);
  EXPECT_THROW(causal_attention_forward<double>(Q, Q.topRows(2), Q, 2, O), std::invalid_argument);
  Mat<double> dQ, dV;
  EXPECT_THROW(causal_attention_backward<double>(Q, Q, Q, 2, Q, dQ, dQ, dV), std::invalid_argument);
}

// ---- sliding window -------------------------------------------------------------------------------

TEST(WindowedAttention, ForwardMatchesDefinitionRestrictedToTheWindow) {
  std::mt19937_64 rng(61);
  for (Shape s : {Shape{9, 2, 3}, Shape{1, 1, 4}, Shape{12, 3, 2}})
    for (int window : {1, 2, 4, 7}) {
      const int D = s.heads * s.d;
      const Mat<double> Q = test::random_mat(s.T, D, rng, 1.5), K = test::random_mat(s.T, D, rng),
                        V = test::random_mat(s.T, D, rng);
      Mat<double> O;
      windowed_attention_forward<double>(Q, K, V, s.heads, window, O);
      EXPECT_TRUE(test::all_close("window " + std::to_string(window) + ", T=" + std::to_string(s.T),
                                  O, attention_reference(Q, K, V, s.heads, window),
                                  {1e-13, 1e-14}));
    }
}

// window ≤ 0 is the causal attention itself (bit for bit); a window of T or more covers every key,
// so the band's own sums give the causal attention to rounding.
TEST(WindowedAttention, NoLimitIsTheCausalAttention) {
  std::mt19937_64 rng(62);
  const int T = 10, heads = 2, D = 6;
  const Mat<double> Q = test::random_mat(T, D, rng), K = test::random_mat(T, D, rng),
                    V = test::random_mat(T, D, rng), G = test::random_mat(T, D, rng);
  Mat<double> causal, dQc, dKc, dVc;
  causal_attention_forward<double>(Q, K, V, heads, causal);
  causal_attention_backward<double>(Q, K, V, heads, G, dQc, dKc, dVc);
  Mat<double> O, dQ, dK, dV;
  windowed_attention_forward<double>(Q, K, V, heads, 0, O);
  EXPECT_EQ(O, causal);
  windowed_attention_backward<double>(Q, K, V, heads, -1, G, dQ, dK, dV);
  EXPECT_EQ(dQ, dQc);
  EXPECT_EQ(dK, dKc);
  EXPECT_EQ(dV, dVc);
  for (int window : {T, T + 5}) {
    windowed_attention_forward<double>(Q, K, V, heads, window, O);
    EXPECT_TRUE(test::all_close("window " + std::to_string(window), O, causal, {1e-14, 1e-15}));
    windowed_attention_backward<double>(Q, K, V, heads, window, G, dQ, dK, dV);
    EXPECT_TRUE(test::all_close("dQ", dQ, dQc, {1e-13, 1e-14}));
    EXPECT_TRUE(test::all_close("dK", dK, dKc, {1e-13, 1e-14}));
    EXPECT_TRUE(test::all_close("dV", dV, dVc, {1e-13, 1e-14}));
  }
  // A window shorter than T differs from the causal attention (the check can fail).
  windowed_attention_forward<double>(Q, K, V, heads, 3, O);
  EXPECT_GT((O - causal).cwiseAbs().maxCoeff(), 1e-3);
}

TEST(WindowedAttention, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(63);
  for (Shape s : {Shape{9, 2, 3}, Shape{6, 1, 2}})
    for (int window : {1, 3, 5}) {
      const int D = s.heads * s.d;
      const Mat<double> Q = test::random_mat(s.T, D, rng), K = test::random_mat(s.T, D, rng),
                        V = test::random_mat(s.T, D, rng), G = test::random_mat(s.T, D, rng);
      auto fwd = [window](ConstMatRef<double> q, ConstMatRef<double> k, ConstMatRef<double> v,
                          int h, Mat<double>& o) {
        windowed_attention_forward<double>(q, k, v, h, window, o);
      };
      auto bwd = [window](ConstMatRef<double> q, ConstMatRef<double> k, ConstMatRef<double> v,
                          int h, ConstMatRef<double> g, Mat<double>& dq, Mat<double>& dk,
                          Mat<double>& dv) {
        windowed_attention_backward<double>(q, k, v, h, window, g, dq, dk, dv);
      };
      test::expect_qkv_gradients(fwd, bwd, Q, K, V, G, s.heads);
    }
}

// Chunks of any size (one token at a time, uneven pieces, the whole sequence) give the whole
// forward, and the cache keeps only the last window − 1 tokens.
TEST(WindowedAttention, CachedStreamingMatchesFullForwardAndKeepsOnlyTheWindow) {
  std::mt19937_64 rng(64);
  const int T = 13, heads = 2, D = 8, window = 4;
  const Mat<double> Q = test::random_mat(T, D, rng), K = test::random_mat(T, D, rng),
                    V = test::random_mat(T, D, rng);
  Mat<double> full;
  windowed_attention_forward<double>(Q, K, V, heads, window, full);
  for (const std::vector<int>& chunks :
       {std::vector<int>(T, 1), std::vector<int>{3, 1, 6, 0, 3}, std::vector<int>{T}}) {
    KvCache<double> cache;
    Mat<double> streamed(T, D), O;
    int start = 0;
    for (int n : chunks) {
      windowed_attention_forward_cached<double>(Q.middleRows(start, n), K.middleRows(start, n),
                                                V.middleRows(start, n), heads, window, cache, O);
      ASSERT_EQ(O.rows(), n);
      streamed.middleRows(start, n) = O;
      start += n;
      EXPECT_EQ(cache.length, std::min(start, window - 1));
      EXPECT_LE(cache.keys.rows(), 2 * (T + window));
    }
    ASSERT_EQ(start, T);
    EXPECT_TRUE(test::all_close("streamed in " + std::to_string(chunks.size()) + " chunks",
                                streamed, full, {1e-14, 1e-15}));
    EXPECT_EQ(Mat<double>(cache.keys.topRows(window - 1)), Mat<double>(K.bottomRows(window - 1)));
  }
}

TEST(WindowedAttention, RejectsBadArguments) {
  const Mat<double> Q = Mat<double>::Ones(4, 6), K5 = Mat<double>::Ones(5, 6);
  Mat<double> O, dQ, dK, dV;
  EXPECT_THROW(windowed_attention_forward<double>(Q, K5, Q, 2, 3, O), std::invalid_argument);
  EXPECT_THROW(windowed_attention_forward<double>(Q, Q, Q, 4, 3, O), std::invalid_argument);
  EXPECT_THROW(windowed_attention_backward<double>(Q, Q, Q, 2, 3, K5, dQ, dK, dV),
               std::invalid_argument);
}

}  // namespace
}  // namespace tttlab
