// Theorem 2 (docs/MATH.md §9.2): the Nadaraya–Watson estimator with kernel exp(q·k/√d), computed by
// plain loops, equals the softmax-attention layer's own per-head output — on random layers (fp64 to
// ~1e-12 relative, fp32 to float rounding) and on a random softmax-attention language model through
// Model::mixer_input. The kernel weights are causal and sum to 1; negative controls (a wrong kernel
// scale, the keys without RoPE, a training set that leaves out the current pair) must fail visibly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "tttlab/analysis/nonparametric.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {
namespace {

// A layer whose scores are O(1) (the default init, N(0, 0.02²), gives nearly flat weights, which
// would make a wrong kernel scale hard to notice).
template <class S>
SoftmaxAttentionLayer<S> random_layer(int width, int heads, std::uint64_t seed, double stddev) {
  AttentionConfig cfg;
  cfg.width = width;
  cfg.heads = heads;
  Rng rng(seed);
  return SoftmaxAttentionLayer<S>(cfg, AttentionParams<S>::init(cfg, [&] { return stddev / 0.02 * rng.normal(); }));
}

template <class S>
Mat<S> random_input(long T, int width, std::uint64_t seed) {
  Rng rng(seed, 1);
  Mat<S> x(T, width);
  for (long i = 0; i < x.size(); ++i) x.data()[i] = static_cast<S>(rng.normal());
  return x;
}

template <class S>
double worst_rel_diff(const SoftmaxAttentionLayer<S>& layer, const Mat<S>& x) {
  double worst = 0;
  for (const auto& h : softmax_attention_heads<S>(layer, x)) {
    const auto nw = nadaraya_watson(h.Q, h.K, h.V, h.kernel_scale);
    worst = std::max(worst, compare_with_attention(nw, h.Z).max_rel_diff);
  }
  return worst;
}

TEST(Nonparametric, EstimatorEqualsTheLayerInDouble) {
  for (std::uint64_t seed : {11u, 12u, 13u}) {
    std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
    const auto layer = random_layer<double>(48, 4, seed, 0.25);
    const Mat<double> x = random_input<double>(57, 48, seed);
    const double rel = worst_rel_diff(layer, x);
    std::printf("  fp64: max |ŷ − Z| / max |Z| = %.3g\n", rel);
    EXPECT_LT(rel, 1e-12) << "seed " << seed;
  }
}

TEST(Nonparametric, EstimatorEqualsTheLayerInFloat) {
  const std::uint64_t seed = 21;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  const auto layer = random_layer<float>(48, 4, seed, 0.25);
  const Mat<float> x = random_input<float>(57, 48, seed);
  const double rel = worst_rel_diff(layer, x);
  std::printf("  fp32: max |ŷ − Z| / max |Z| = %.3g\n", rel);
  EXPECT_LT(rel, 1e-5);
  EXPECT_GT(rel, 0.0) << "float rounding should show: the layer did not run in float";
}

TEST(Nonparametric, WeightsAreCausalAndSumToOne) {
  const std::uint64_t seed = 31;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  const auto layer = random_layer<double>(32, 2, seed, 0.3);
  const auto heads = softmax_attention_heads<double>(layer, random_input<double>(40, 32, seed));
  ASSERT_EQ(heads.size(), 2u);
  for (const auto& h : heads) {
    const auto nw = nadaraya_watson(h.Q, h.K, h.V, h.kernel_scale);
    ASSERT_EQ(nw.weights.rows(), 40);
    ASSERT_EQ(nw.weights.cols(), 40);
    const auto c = compare_with_attention(nw, h.Z);
    EXPECT_LT(c.row_sum_err, 1e-14);
    EXPECT_EQ(nw.weights(0, 0), 1.0) << "the first token has one pair to average";
    for (long t = 0; t < 40; ++t)
      for (long i = 0; i < 40; ++i) {
        if (i > t) {
          EXPECT_EQ(nw.weights(t, i), 0.0) << "a later pair is not in the training set";
        } else {
          EXPECT_GT(nw.weights(t, i), 0.0) << "the kernel is positive";
        }
      }
    for (long t = 0; t < 40; ++t) {
      const auto ut = static_cast<std::size_t>(t);
      EXPECT_GE(c.effective_pairs[ut], 1.0 - 1e-12);
      EXPECT_LE(c.effective_pairs[ut], static_cast<double>(t + 1) + 1e-9);
      EXPECT_NEAR(c.max_weight[ut], nw.weights.row(t).maxCoeff(), 0.0);
    }
  }
}

TEST(Nonparametric, FlatKernelAveragesEveryPair) {
  // q = 0 makes every κ equal: ŷ_t is the plain mean of v_0 … v_t, t + 1 effective pairs.
  const long T = 9;
  const Mat<double> Q = Mat<double>::Zero(T, 4);
  Rng rng(41);
  Mat<double> K(T, 4), V(T, 3);
  for (long i = 0; i < K.size(); ++i) K.data()[i] = rng.normal();
  for (long i = 0; i < V.size(); ++i) V.data()[i] = rng.normal();
  const auto nw = nadaraya_watson(Q, K, V, 0.5);
  Mat<double> mean(T, 3);
  for (long t = 0; t < T; ++t) mean.row(t) = V.topRows(t + 1).colwise().mean();
  const auto c = compare_with_attention(nw, mean);
  EXPECT_LT(c.max_abs_diff, 1e-14);
  for (long t = 0; t < T; ++t) {
    EXPECT_NEAR(c.effective_pairs[static_cast<std::size_t>(t)], static_cast<double>(t + 1), 1e-9);
    EXPECT_NEAR(c.entropy[static_cast<std::size_t>(t)], std::log(static_cast<double>(t + 1)), 1e-12);
  }
}

TEST(Nonparametric, NegativeControlsFail) {
  const std::uint64_t seed = 51;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  const auto layer = random_layer<double>(48, 4, seed, 0.25);
  const auto heads = softmax_attention_heads<double>(layer, random_input<double>(50, 48, seed));
  double wrong_scale = 0, no_rope = 0, no_current = 0;
  for (const auto& h : heads) {
    // The kernel exp(q·k) of the paper's statement, without this layer's 1/√d.
    wrong_scale = std::max(wrong_scale, compare_with_attention(nadaraya_watson(h.Q, h.K, h.V, 1.0), h.Z).max_rel_diff);
    // Keys at the wrong positions: every key rotated one position further (pairs (2m, 2m+1) by ω_m),
    // as if RoPE had counted from 1.
    Mat<double> K = h.K;
    const long d = K.cols();
    for (long t = 0; t < K.rows(); ++t)
      for (long m = 0; m < d / 2; ++m) {
        const double w = std::pow(1e4, -2.0 * static_cast<double>(m) / static_cast<double>(d));
        const double a = K(t, 2 * m), b = K(t, 2 * m + 1);
        K(t, 2 * m) = a * std::cos(w) - b * std::sin(w);
        K(t, 2 * m + 1) = a * std::sin(w) + b * std::cos(w);
      }
    no_rope = std::max(no_rope, compare_with_attention(nadaraya_watson(h.Q, K, h.V, h.kernel_scale), h.Z).max_rel_diff);
    // The training set D_{t−1} instead of D_t (the pair of token t itself left out), for t ≥ 1.
    const long T = h.Q.rows();
    const auto nw = nadaraya_watson(h.Q.bottomRows(T - 1), h.K.topRows(T - 1), h.V.topRows(T - 1), h.kernel_scale);
    // Row t − 1 of this estimator pairs q_t with k_0 … k_{t−1}.
    no_current = std::max(no_current, compare_with_attention(nw, h.Z.bottomRows(T - 1)).max_rel_diff);
  }
  std::printf("  wrong scale %.3g, keys shifted one position %.3g, current pair left out %.3g\n", wrong_scale, no_rope,
              no_current);
  EXPECT_GT(wrong_scale, 1e-2);
  EXPECT_GT(no_rope, 1e-4);
  EXPECT_GT(no_current, 1e-2);
  EXPECT_THROW(compare_with_attention(nadaraya_watson(heads[0].Q, heads[0].K, heads[0].V, 1.0), heads[0].Z.leftCols(2)),
               std::invalid_argument);
  EXPECT_THROW(nadaraya_watson(heads[0].Q, heads[0].K.topRows(3), heads[0].V, 1.0), std::invalid_argument);
}

TEST(Nonparametric, RandomLanguageModelThroughItsOwnBlockInput) {
  // The app's path: an untrained tiny softmax-attention model, the input that block 1's layer sees.
  ModelConfig cfg = ModelConfig::preset("tiny");
  cfg.seq_layer = SeqLayerKind::SoftmaxAttention;
  cfg.mamba_backbone = false;
  const std::uint64_t seed = 0;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  const Model<float> model(cfg, seed);
  const std::string text = "the cat sat on the mat, and the cat sat on the hat.";
  const std::vector<int> tokens(text.begin(), text.end());
  const Mat<float> x = model.mixer_input(tokens, 1);
  const auto* layer = dynamic_cast<const SoftmaxAttentionLayer<float>*>(&model.mixer(1));
  ASSERT_NE(layer, nullptr);
  const double rel32 = worst_rel_diff(*layer, x);
  // The same layer in double, from the same float weights and input.
  const AttentionParams<float>& p = layer->params();
  const SoftmaxAttentionLayer<double> layer64(
      layer->config(), AttentionParams<double>{p.wq.cast<double>(), p.wk.cast<double>(), p.wv.cast<double>(),
                                               p.wo.cast<double>()});
  const Mat<double> x64 = x.cast<double>();
  const double rel64 = worst_rel_diff(layer64, x64);
  std::printf("  fp32 %.3g, fp64 %.3g\n", rel32, rel64);
  EXPECT_LT(rel32, 1e-5);
  EXPECT_LT(rel64, 1e-12);
  // Untrained: scores near 0, so the kernel is nearly flat and about every stored pair counts.
  const auto h = softmax_attention_heads<double>(layer64, x64)[0];
  const auto c = compare_with_attention(nadaraya_watson(h.Q, h.K, h.V, h.kernel_scale), h.Z);
  const double T = static_cast<double>(tokens.size());
  EXPECT_GT(c.effective_pairs.back(), 0.9 * T);
}

TEST(Nonparametric, StateSizes) {
  EXPECT_EQ(nonparametric_state_numbers(100, 32), 6400);
  EXPECT_EQ(ttt_linear_state_numbers(32), 1024);
  EXPECT_EQ(nonparametric_state_numbers(0, 32), 0);
}

}  // namespace
}  // namespace tttlab
