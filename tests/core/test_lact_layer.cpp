// LaCT as a layer (tttlab/seq/lact_layer.hpp, docs/MATH.md §11.10 "LaCT as a layer"), through the
// shared checks of tests/core/layer_test_util.hpp: the manual backward against central differences
// for every parameter (the rates' projection, the momentum's and the initial fast weights included)
// and the input, the training form against token-by-token decoding and a streamed prefill, and the
// layer inside a model: config.json, the parameter count and checkpoint layout, save and load,
// training and an exact resume, greedy decoding; and what is LaCT's own: its initialisation and the
// refusals of bad configurations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/layer_test_util.hpp"
#include "tttlab/seq/lact_layer.hpp"

namespace tttlab {
namespace {

using layer_test::error_of;

// A small layer whose every path carries signal: projections of σ = 0.5, biases spread so that the
// rates (softplus around 1e-3 · e^{±}) and the momentum vary, a base rate of 0.05 so that the updates
// move the fast weights visibly, the output scale's bias at 1 (silu(1) ≈ 0.73, not ≈ 0 as at
// initialisation), qk_scale and qk_offset and the output norm away from 1 and 0.
LactLayer<double> lact_random_layer(const LactLayerConfig& cfg, std::uint64_t seed) {
  Rng rng(seed);
  LactParams<double> p = LactParams<double>::init(cfg, 0.5, rng);
  for (Eigen::Index i = 0; i < p.lr_bias.size(); ++i) p.lr_bias(i) = 0.5 * rng.normal();
  for (Eigen::Index i = 0; i < p.momentum_bias.size(); ++i) p.momentum_bias(i) = rng.normal();
  for (Eigen::Index i = 0; i < p.scale_bias.size(); ++i) p.scale_bias(i) = 1 + 0.3 * rng.normal();
  for (Eigen::Index i = 0; i < p.qk_scale.size(); ++i) {
    p.qk_scale.data()[i] = 1 + 0.3 * rng.normal();
    p.qk_offset.data()[i] = 0.3 * rng.normal();
  }
  for (Eigen::Index i = 0; i < p.ttt_norm.size(); ++i) p.ttt_norm(i) = 1 + 0.5 * rng.normal();
  return LactLayer<double>(cfg, p);
}

LactLayerConfig lact_config(int width, int attn_heads, int lact_heads, int chunk, bool muon) {
  LactLayerConfig c;
  c.width = width, c.attn_heads = attn_heads, c.lact_heads = lact_heads;
  c.chunk_size = c.window = chunk;
  c.use_muon = muon;
  c.base_lr = 0.05;
  return c;
}

std::vector<std::string> lact_param_names(int heads, bool momentum) {
  std::vector<std::string> n{"qkv.weight", "qk_scale", "qk_offset"};
  for (const char* w : {"w0", "w1", "w2"})
    for (int h = 0; h < heads; ++h) n.push_back(std::string(w) + "[" + std::to_string(h) + "]");
  n.insert(n.end(), {"lr_proj.weight", "lr_proj.bias"});
  if (momentum) n.insert(n.end(), {"momentum_proj.0.weight", "momentum_proj.0.bias"});
  n.insert(n.end(),
           {"ttt_scale_proj.weight", "ttt_scale_proj.bias", "ttt_norm.weight", "o_proj.weight"});
  return n;
}

class LactLayerTest : public ::testing::TestWithParam<bool> {};  // Muon off, on

// T = 11 with chunks of 4: two updates, and a last chunk of 3 only read; the window of 4 cuts the
// attention too.
TEST_P(LactLayerTest, BackwardMatchesFiniteDifferencesForEveryParameterAndTheInput) {
  const bool muon = GetParam();
  const std::uint64_t seed = layer_test::announce(muon ? 7272 : 7171);
  LactLayer<double> layer = lact_random_layer(lact_config(8, 2, 2, 4, muon), seed);
  layer_test::expect_backward_matches_finite_differences(layer, 11, seed,
                                                         lact_param_names(2, true));
}

// T = 37 with chunks of 8 (not a multiple; the prefill's pieces end inside chunks).
TEST_P(LactLayerTest, TrainingFormEqualsTokenByTokenDecodingInFp64) {
  const bool muon = GetParam();
  const std::uint64_t seed = layer_test::announce(muon ? 882 : 881);
  LactLayer<double> layer = lact_random_layer(lact_config(12, 3, 2, 8, muon), seed);
  Rng rng(seed + 1);
  const Mat<double> x = layer_test::random_mat(37, 12, rng);
  const Mat<double> y = layer_test::expect_streaming_equals_training(layer, x, "lact");
  LactLayer<float> lf(layer.config(), LactParams<float>::zeros(layer.config()));
  const double e32 = layer_test::float_copy_deviation(layer, lf, x, y);
  std::printf("[   INFO   ] lact: max |fp32 − fp64| / max |y| = %.3g\n", e32);
  EXPECT_LE(e32, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Optimiser, LactLayerTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Muon" : "Momentum";
                         });

// Without momentum the layer has no momentum projection, and its backward still matches.
TEST(LactLayer, WithoutMomentumBackwardMatchesFiniteDifferences) {
  const std::uint64_t seed = layer_test::announce(7373);
  LactLayerConfig cfg = lact_config(8, 4, 1, 5, false);
  cfg.use_momentum = false;
  LactLayer<double> layer = lact_random_layer(cfg, seed);
  layer_test::expect_backward_matches_finite_differences(layer, 12, seed,
                                                         lact_param_names(1, false));
}

// The fast weights change what the layer reads: the same tokens after a different first chunk give
// a different output once an update has been made (a layer that ignored its state would not).
TEST(LactLayer, TheUpdateChangesLaterOutputs) {
  const std::uint64_t seed = layer_test::announce(991);
  LactLayerConfig cfg = lact_config(8, 2, 2, 4, false);
  cfg.window =
      1;  // the attention sees only the current token: only the fast weights carry the past
  const LactLayer<double> layer = lact_random_layer(cfg, seed);
  Rng rng(seed + 1);
  Mat<double> a = layer_test::random_mat(8, 8, rng), b = a;
  b.topRows(4) = layer_test::random_mat(4, 8, rng);
  Mat<double> ya, yb;
  layer.forward_train(a, ya);
  layer.forward_train(b, yb);
  EXPECT_GT((ya.bottomRows(4) - yb.bottomRows(4)).cwiseAbs().maxCoeff(), 1e-6);
}

TEST(LactLayer, InitialisationFollowsTheAuthors) {
  Rng rng(3);
  LactLayerConfig cfg = lact_config(64, 4, 2, 16, false);
  cfg.base_lr = 1e-3;
  const LactParams<double> p = LactParams<double>::init(cfg, 0.02, rng);
  EXPECT_EQ(p.qk_scale, Mat<double>::Ones(64, 2));
  EXPECT_EQ(p.qk_offset, Mat<double>::Zero(64, 2));
  EXPECT_EQ(p.ttt_norm, RowVec<double>::Ones(32));
  EXPECT_EQ(p.lr_bias, RowVec<double>::Zero(6));
  // w0, w2 ~ N(0, 1/√d_f), w1 ~ N(0, 1/√d_h): 2048 entries each, the sample std within 5%.
  auto sd = [](const Mat<double>& m) { return std::sqrt(m.squaredNorm() / double(m.size())); };
  EXPECT_NEAR(sd(p.w0), 1 / std::sqrt(32.0), 0.05 / std::sqrt(32.0));
  EXPECT_NEAR(sd(p.w1), 1 / std::sqrt(32.0), 0.05 / std::sqrt(32.0));
  EXPECT_NEAR(sd(p.qkv), 0.02, 0.001);
  // The rates start at the base rate: softplus(0 + softplus⁻¹(1e-3)) = 1e-3 for x = 0.
  const LactLayer<double> layer(cfg, p);
  EXPECT_GT(layer.forward_flops(256), 0.0);
}

TEST(LactLayer, BadConfigurationsAreClearErrors) {
  LactLayerConfig bad = lact_config(12, 5, 2, 8, false);
  EXPECT_NE(error_of([&] { bad.validate(); }).find("attn_heads (5) must divide width (12)"),
            std::string::npos);
  bad = lact_config(12, 2, 5, 8, false);
  EXPECT_NE(error_of([&] { bad.validate(); }).find("lact_heads (5) must divide width (12)"),
            std::string::npos);
  bad = lact_config(12, 4, 2, 8, false);
  EXPECT_NE(error_of([&] { bad.validate(); }).find("RoPE needs an even attention head dim, got 3"),
            std::string::npos);
  bad = lact_config(12, 2, 2, 0, false);
  EXPECT_NE(error_of([&] { bad.validate(); }).find("chunk_size must be positive"),
            std::string::npos);
  bad = lact_config(12, 2, 2, 8, false);
  bad.base_lr = 0;
  EXPECT_NE(error_of([&] { bad.validate(); }).find("base_lr must be positive and finite"),
            std::string::npos);
  // Parameters of another shape are refused with their name and shape.
  Rng rng(1);
  const LactParams<double> p = LactParams<double>::init(lact_config(12, 2, 2, 8, false), 0.02, rng);
  EXPECT_NE(error_of([&] {
              LactLayer<double>(lact_config(12, 2, 3, 8, false), p);
            }).find("w0 must be [12, 4]"),
            std::string::npos);
}

// The refusals of the model's configuration: the backbone, the heads, the chunk, the layer's name.
TEST(LactModel, BadModelConfigurationsAreClearErrors) {
  ModelConfig c = testing::tiny_model({.seq_layer = SeqLayerKind::Lact, .mamba = true});
  EXPECT_NE(error_of([&] { c.validate(); }).find("uses the Transformer backbone (t)"),
            std::string::npos);
  c.mamba_backbone = false;
  EXPECT_NO_THROW(c.validate());
  c.lact_heads = 3;
  EXPECT_NE(
      error_of([&] { c.validate(); }).find("tttlab_lact_heads (3) must divide hidden_size (16)"),
      std::string::npos);
  c.lact_heads = 2;
  c.lact_chunk_size = 0;
  EXPECT_NE(error_of([&] { c.validate(); }).find("tttlab_lact_chunk_size must be positive, got 0"),
            std::string::npos);
  c.lact_chunk_size = 8;
  c.num_attention_heads = 16;  // d_a = 1: RoPE needs pairs
  EXPECT_NE(error_of([&] { c.validate(); }).find("RoPE needs an even head dim, got 1"),
            std::string::npos);
  EXPECT_NE(error_of([] { seq_layer_from_string("lact-swiglu"); }).find("titans or lact"),
            std::string::npos);
  EXPECT_EQ(seq_layer_from_string("lact"), SeqLayerKind::Lact);
  // It trains and decodes on the GPU (tests/kernels/test_train_cuda.cpp, test_decode_cuda.cpp).
  EXPECT_EQ(gpu_kernels_missing(SeqLayerKind::Lact), "");
  EXPECT_EQ(gpu_decoder_missing(SeqLayerKind::Lact), "");
}

// ---- inside a model ------------------------------------------------------------------------------

const testing::TinyModel kLactModel{.hidden = 16,
                                    .heads = 2,
                                    .layers = 2,
                                    .intermediate = 32,
                                    .seq_layer = SeqLayerKind::Lact,
                                    .mamba = false};

ModelConfig lact_model() {
  ModelConfig c = testing::tiny_model(kLactModel);
  c.lact_chunk_size = 8;
  c.lact_heads = 2;
  return c;
}

TEST(LactModel, ConfigJsonParameterCountAndCheckpointLayoutFollowTheConfig) {
  ModelConfig c = lact_model();
  c.lact_chunk_size = 5;
  c.lact_heads = 4;
  c.lact_muon = true;
  const ModelConfig back = ModelConfig::from_json(c.to_json());
  EXPECT_EQ(back.lact_chunk_size, 5);
  EXPECT_EQ(back.lact_heads, 4);
  EXPECT_TRUE(back.lact_muon);
  EXPECT_EQ(c.lact_config().window, 5);
  // Only LaCT's files carry its keys.
  EXPECT_EQ(testing::tiny_model({}).to_json().find("tttlab_lact"), std::string::npos);
  const std::vector<NamedTensor> sd = layer_test::expect_checkpoint_layout_follows_config(c);
  using Shape = std::vector<std::int64_t>;
  auto shape_of = [&](const std::string& n) { return layer_test::block_tensor_shape(sd, n); };
  EXPECT_EQ(shape_of("qkv.weight"), (Shape{48, 16}));
  EXPECT_EQ(shape_of("qk_scale"), (Shape{16, 2}));
  EXPECT_EQ(shape_of("w0"), (Shape{4, 4, 4}));
  EXPECT_EQ(shape_of("w1"), (Shape{4, 4, 4}));
  EXPECT_EQ(shape_of("lr_proj.weight"), (Shape{12, 16}));
  EXPECT_EQ(shape_of("lr_proj.bias"), (Shape{12}));
  EXPECT_EQ(shape_of("momentum_proj.0.weight"), (Shape{4, 16}));
  EXPECT_EQ(shape_of("ttt_scale_proj.bias"), (Shape{4}));
  EXPECT_EQ(shape_of("ttt_norm.weight"), (Shape{4}));
  EXPECT_EQ(shape_of("o_proj.weight"), (Shape{16, 16}));
  // One fast-weight head: the stack keeps its leading axis, [1, d_h, d_f].
  c.lact_heads = 1;
  const std::vector<NamedTensor> one = layer_test::expect_checkpoint_layout_follows_config(c);
  EXPECT_EQ(layer_test::block_tensor_shape(one, "w2"), (Shape{1, 16, 16}));
}

// T = 19 with chunks of 8: two updates and a short last chunk. 17 mixer tensors per block (the
// initial fast weights visited per head: w0, w1, w2 twice each).
TEST(LactModel, ModelGradientMatchesFiniteDifferences) {
  layer_test::expect_model_gradient_matches_finite_differences(lact_model(),
                                                               layer_test::announce(37), 20, 17);
}

TEST(LactModel, GreedyDecodingIsReproducibleAndTheWholeForwardsArgmax) {
  layer_test::expect_greedy_decoding_is_the_whole_forwards_argmax(lact_model(),
                                                                  layer_test::announce(17));
}

// A Titans model refuses the file, naming a tensor it does not expect.
TEST(LactModel, CheckpointSaveAndLoadGiveBitwiseTheSameEvalLoss) {
  ModelConfig other = lact_model();
  other.seq_layer = SeqLayerKind::Titans;
  layer_test::expect_checkpoint_round_trip(lact_model(), other,
                                           "model.layers.0.seq_modeling_block.", "lact");
}

TEST(LactModel, TrainingLossFallsAndAResumedRunContinuesExactly) {
  layer_test::expect_training_falls_and_resumes_exactly(
      {.hidden = 32,
       .layers = 2,
       .intermediate = 64,
       .seq_layer = SeqLayerKind::Lact,
       .mamba = false},
      [](ModelConfig& m) { m.lact_chunk_size = 8; }, "lact");
}

}  // namespace
}  // namespace tttlab
