// Causal linear attention: quadratic form against the definition, the recurrent and chunked
// streaming forms against the quadratic form, backward against central differences (fp64), fp32
// against fp64, and the TTT limit of docs/MATH.md §10, oracle 4 (TTT-Linear, one mini-batch, W0 = 0, no LN,
// no residual, no bias, η ≡ 1 gives exactly this layer).
#include <vector>

#include "core/nn/grad_check.hpp"
#include "tttlab/nn/linear_attention.hpp"
#include "tttlab/ttt/inner.hpp"

namespace tttlab {
namespace {

Mat<double> linear_attention_reference(const Mat<double>& Q, const Mat<double>& K,
                                       const Mat<double>& V, int heads) {
  const Eigen::Index T = Q.rows(), d = Q.cols() / heads;
  Mat<double> Z = Mat<double>::Zero(T, Q.cols());
  for (int h = 0; h < heads; ++h)
    for (Eigen::Index t = 0; t < T; ++t)
      for (Eigen::Index s = 0; s <= t; ++s) {
        double qk = 0;
        for (Eigen::Index j = 0; j < d; ++j) qk += Q(t, h * d + j) * K(s, h * d + j);
        for (Eigen::Index j = 0; j < d; ++j) Z(t, h * d + j) += qk * V(s, h * d + j);
      }
  return Z;
}

TEST(LinearAttention, ForwardMatchesDefinition) {
  std::mt19937_64 rng(61);
  const Mat<double> Q = test::random_mat(7, 6, rng), K = test::random_mat(7, 6, rng),
                    V = test::random_mat(7, 6, rng);
  for (int heads : {1, 2, 3}) {
    Mat<double> Z;
    linear_attention_forward<double>(Q, K, V, heads, Z);
    EXPECT_TRUE(test::all_close("heads " + std::to_string(heads), Z,
                                linear_attention_reference(Q, K, V, heads), {1e-13, 1e-13}));
  }
}

TEST(LinearAttention, RecurrentAndChunkedFormsMatchQuadraticForm) {
  std::mt19937_64 rng(62);
  const int T = 13, heads = 2, D = 8;
  const Mat<double> Q = test::random_mat(T, D, rng), K = test::random_mat(T, D, rng),
                    V = test::random_mat(T, D, rng);
  Mat<double> full;
  linear_attention_forward<double>(Q, K, V, heads, full);

  LinearAttentionState<double> state;
  Mat<double> Z;
  linear_attention_recurrent<double>(Q, K, V, heads, state, Z);
  // Same sums, another association order: a few ulps of the O(10) outputs.
  EXPECT_TRUE(test::all_close("recurrent", Z, full, {1e-13, 1e-13}));
  EXPECT_EQ(state.tokens, T);
  // The final state is Σ_s k_sᵀ v_s per head.
  for (int h = 0; h < heads; ++h) {
    const Mat<double> S = K.middleCols(h * 4, 4).transpose() * V.middleCols(h * 4, 4);
    EXPECT_TRUE(test::all_close("state of head " + std::to_string(h),
                                Mat<double>(state.kv.middleRows(h * 4, 4)), S, {1e-13, 1e-13}));
  }

  // Chunks of uneven sizes, alternating the chunked and the recurrent form on one state.
  state.clear();
  Mat<double> streamed(T, D);
  int start = 0, i = 0;
  for (int n : {4, 1, 0, 5, 3}) {
    const auto q = Q.middleRows(start, n), k = K.middleRows(start, n), v = V.middleRows(start, n);
    if (i++ % 2 == 0)
      linear_attention_chunk<double>(q, k, v, heads, state, Z);
    else
      linear_attention_recurrent<double>(q, k, v, heads, state, Z);
    streamed.middleRows(start, n) = Z;
    start += n;
  }
  ASSERT_EQ(start, T);
  EXPECT_TRUE(test::all_close("chunked + recurrent", streamed, full, {1e-13, 1e-13}));

  // A state of another shape is refused until cleared.
  EXPECT_THROW(linear_attention_chunk<double>(Q.leftCols(4), K.leftCols(4), V.leftCols(4), heads,
                                              state, Z),
               std::invalid_argument);
}

TEST(LinearAttention, EmptySequenceGivesEmptyResults) {
  const Mat<double> E(0, 6);
  Mat<double> Z = Mat<double>::Ones(2, 2), dQ, dK, dV;
  linear_attention_forward<double>(E, E, E, 3, Z);
  EXPECT_EQ(Z.rows(), 0);
  linear_attention_backward<double>(E, E, E, 3, E, dQ, dK, dV);
  EXPECT_EQ(dV.rows(), 0);
  LinearAttentionState<double> state;
  linear_attention_chunk<double>(E, E, E, 3, state, Z);
  EXPECT_EQ(state.kv, Mat<double>::Zero(6, 2));
}

TEST(LinearAttention, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(63);
  for (int heads : {1, 2}) {
    const Mat<double> Q = test::random_mat(5, 6, rng), K = test::random_mat(5, 6, rng),
                      V = test::random_mat(5, 6, rng), G = test::random_mat(5, 6, rng);
    test::expect_qkv_gradients(linear_attention_forward<double>, linear_attention_backward<double>, Q, K, V,
                               G, heads);
  }
}

TEST(LinearAttention, Fp32AgreesWithFp64) {
  std::mt19937_64 rng(64);
  const int T = 32, heads = 4, D = 32;
  const Mat<double> Q = test::random_mat(T, D, rng, 0.5), K = test::random_mat(T, D, rng, 0.5),
                    V = test::random_mat(T, D, rng), G = test::random_mat(T, D, rng);
  // Outputs grow like √T (sums of up to 32 terms of O(0.5)), so relative 2e-5 on values of O(5)
  // plus an absolute 2e-5 for cancelling sums.
  const test::Tolerance tol{2e-5, 2e-5};
  test::expect_fp32_agrees_with_fp64({"Z", "dQ", "dK", "dV"}, tol, [&](auto s) {
    using S = decltype(s);
    const Mat<S> Qs = Q.cast<S>(), Ks = K.cast<S>(), Vs = V.cast<S>();
    Mat<S> Z, dQ, dK, dV;
    linear_attention_forward<S>(Qs, Ks, Vs, heads, Z);
    linear_attention_backward<S>(Qs, Ks, Vs, heads, G.cast<S>(), dQ, dK, dV);
    return std::tuple{Z, dQ, dK, dV};
  });
  // The recurrent form in fp32 against the parallel form in fp64.
  Mat<double> Z64;
  linear_attention_forward<double>(Q, K, V, heads, Z64);
  Mat<float> R32;
  LinearAttentionState<float> state;
  linear_attention_recurrent<float>(Q.cast<float>(), K.cast<float>(), V.cast<float>(), heads, state, R32);
  EXPECT_TRUE(test::all_close("Z recurrent fp32", R32, Z64, tol));
}

// docs/MATH.md §10, oracle 4 (§9.1) against the engine's own TTT inner loop, head by head.
TEST(LinearAttention, IsTttLinearWithOneMiniBatchAndNoNorm) {
  std::mt19937_64 rng(65);
  const int T = 12, heads = 2, d = 4, D = heads * d;
  const Mat<double> Q = test::random_mat(T, D, rng), K = test::random_mat(T, D, rng),
                    V = test::random_mat(T, D, rng);
  Mat<double> Z;
  linear_attention_forward<double>(Q, K, V, heads, Z);
  InnerOptions opt;
  opt.model = InnerModel::Linear;
  opt.mini_batch = T;
  opt.layer_norm = false;
  opt.residual = false;
  opt.bias = false;
  InnerHeadParams<double> p;
  p.ln_weight = RowVec<double>::Ones(d);
  p.ln_bias = RowVec<double>::Zero(d);
  p.tau = Vec<double>::Ones(T);  // η[i, j] = τ_i λ_j = 1
  const Vec<double> lambda = Vec<double>::Ones(T);
  for (int h = 0; h < heads; ++h) {
    InnerState<double> state = InnerState<double>::start(InnerWeights<double>::zeros(opt, d));
    Mat<double> out;
    inner_forward_dual<double>(opt, p, Q.middleCols(h * d, d), K.middleCols(h * d, d),
                               V.middleCols(h * d, d), lambda, state, out);
    EXPECT_TRUE(test::all_close("TTT limit, head " + std::to_string(h), out,
                                Mat<double>(Z.middleCols(h * d, d)), {1e-13, 1e-13}));
  }
}

}  // namespace
}  // namespace tttlab
