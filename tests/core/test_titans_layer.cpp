// Titans as a layer (tttlab/seq/titans_layer.hpp, docs/MATH.md §11.9), through the shared checks of
// tests/core/layer_test_util.hpp: the manual backward against central differences for every parameter
// and the input, the chunked (training) form against token-by-token decoding, and the layer inside a
// model: config.json, the parameter count and checkpoint layout, save and load, training and an exact
// resume, greedy decoding; and what is Titans' own: its initial rates and the refusals of bad
// configurations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/layer_test_util.hpp"
#include "tttlab/seq/titans_layer.hpp"

namespace tttlab {
namespace {

// A small layer whose every path carries signal: projections of σ = 0.5 (θ, α, η spread over their
// ranges), biases near 0, the memory's LayerNorm and the output norm away from 1 and 0.
TitansLayer<double> titans_random_layer(const TitansLayerConfig& cfg, std::uint64_t seed) {
  Rng rng(seed);
  TitansParams<double> p = TitansParams<double>::init(cfg, 0.5, rng);
  for (auto* b : {&p.theta_bias, &p.alpha_bias, &p.eta_bias})
    for (Eigen::Index i = 0; i < b->size(); ++i) (*b)(i) = 0.5 * rng.normal();
  for (Eigen::Index i = 0; i < p.ln_weight.size(); ++i) {
    p.ln_weight.data()[i] = 1 + 0.3 * rng.normal();
    p.ln_bias.data()[i] = 0.3 * rng.normal();
  }
  for (Eigen::Index i = 0; i < p.o_norm.size(); ++i) p.o_norm(i) = 1 + 0.5 * rng.normal();
  return TitansLayer<double>(cfg, p);
}

TitansLayerConfig titans_config(int width, int heads, int K, int mini_batch) {
  TitansLayerConfig c;
  c.width = width, c.heads = heads, c.conv_kernel = K, c.mini_batch = mini_batch;
  return c;
}

// T = 11 with mini-batches of 4: two full ones and a short one.
TEST(TitansLayer, BackwardMatchesFiniteDifferencesForEveryParameterAndTheInput) {
  const std::uint64_t seed = layer_test::announce(6161);
  TitansLayer<double> layer = titans_random_layer(titans_config(8, 2, 3, 4), seed);
  layer_test::expect_backward_matches_finite_differences(
      layer, 11, seed,
      {"q_proj.weight", "k_proj.weight", "v_proj.weight", "q_conv1d.weight", "k_conv1d.weight",
       "v_conv1d.weight", "theta_proj.weight", "theta_proj.bias", "alpha_proj.weight",
       "alpha_proj.bias", "eta_proj.weight", "eta_proj.bias", "ttt_norm.weight", "ttt_norm.bias",
       "o_norm.weight", "g_proj.weight", "o_proj.weight"});
}

// T = 37 with mini-batches of 8 (not a multiple; the prefill's pieces end inside a mini-batch).
TEST(TitansLayer, ChunkedTrainingFormEqualsTokenByTokenDecodingInFp64) {
  const std::uint64_t seed = layer_test::announce(779);
  TitansLayer<double> layer = titans_random_layer(titans_config(12, 3, 4, 8), seed);
  Rng rng(seed + 1);
  const Mat<double> x = layer_test::random_mat(37, 12, rng);
  const Mat<double> y = layer_test::expect_streaming_equals_training(layer, x, "titans");
  TitansLayer<float> lf(layer.config(), TitansParams<float>::zeros(layer.config()));
  const double e32 = layer_test::float_copy_deviation(layer, lf, x, y);
  std::printf("[   INFO   ] titans: max |fp32 − fp64| / max |y| = %.3g\n", e32);
  // fp32 rounding is amplified by FLA's write (about σ·D times a gradient step, MATH.md §11.9): 7e-5
  // in the Release build, 1.3e-4 in the sanitizer build (-O1, other contractions). A wrong form
  // is off by order one.
  EXPECT_LE(e32, 1e-3);
}

TEST(TitansLayer, InitialisationStartsWithASmallRateLittleForgettingAndMomentum) {
  Rng rng(3);
  const TitansLayerConfig cfg = titans_config(32, 8, 4, 16);
  const TitansParams<double> p = TitansParams<double>::init(cfg, 0.02, rng);
  auto sig = [](double z) { return 1 / (1 + std::exp(-z)); };
  for (int h = 0; h < cfg.heads; ++h) {
    EXPECT_NEAR(sig(p.theta_bias(h)), 0.1, 1e-12);
    EXPECT_NEAR(sig(p.alpha_bias(h)), 0.01, 1e-12);
    EXPECT_NEAR(sig(p.eta_bias(h)), 0.9, 1e-12);
  }
  EXPECT_EQ(p.ln_weight, Mat<double>::Ones(8, 4));
  EXPECT_EQ(p.ln_bias, Mat<double>::Zero(8, 4));
  EXPECT_EQ(p.o_norm, RowVec<double>::Ones(4));
  EXPECT_LE(p.q_conv.cwiseAbs().maxCoeff(), 0.5);  // U(±1/√K), K = 4
}

TEST(TitansLayer, BadConfigurationsAreClearErrors) {
  using layer_test::error_of;
  TitansLayerConfig bad = titans_config(12, 5, 4, 8);
  EXPECT_NE(error_of([&] { bad.validate(); }).find("heads (5) must divide width (12)"),
            std::string::npos);
  bad = titans_config(12, 3, 0, 8);
  EXPECT_NE(error_of([&] { bad.validate(); }).find("conv_kernel must be positive"),
            std::string::npos);
  bad = titans_config(12, 3, 4, 0);
  EXPECT_NE(error_of([&] { bad.validate(); }).find("mini_batch must be positive"),
            std::string::npos);
  bad = titans_config(12, 3, 4, 8);
  bad.ln_eps = 0;
  EXPECT_NE(error_of([&] { bad.validate(); }).find("ln_eps must be positive and finite"),
            std::string::npos);
  // Parameters of another shape are refused with their name and shape.
  Rng rng(1);
  const TitansParams<double> p = TitansParams<double>::init(titans_config(12, 3, 4, 8), 0.02, rng);
  EXPECT_NE(error_of([&] {
              TitansLayer<double>(titans_config(12, 4, 4, 8), p);
            }).find("theta_proj.weight must be [12, 4]"),
            std::string::npos);
  ModelConfig c = testing::tiny_model({.seq_layer = SeqLayerKind::Titans, .mamba = true});
  EXPECT_NE(error_of([&] { c.validate(); }).find("uses the Transformer backbone (t)"),
            std::string::npos);
  c.mamba_backbone = false;
  EXPECT_NO_THROW(c.validate());
  c.num_attention_heads = 3;
  EXPECT_NE(
      error_of([&] { c.validate(); }).find("num_attention_heads (3) must divide hidden_size (16)"),
      std::string::npos);
  EXPECT_NE(error_of([] { seq_layer_from_string("titan"); }).find("gated-deltanet, titans or lact"),
            std::string::npos);
  EXPECT_EQ(seq_layer_from_string("titans"), SeqLayerKind::Titans);
  // It trains and decodes on the GPU (tests/kernels/test_train_cuda.cpp, test_decode_cuda.cpp).
  EXPECT_EQ(gpu_kernels_missing(SeqLayerKind::Titans), "");
  EXPECT_EQ(gpu_decoder_missing(SeqLayerKind::Titans), "");
}

// ---- inside a model ------------------------------------------------------------------------------

const testing::TinyModel kTitansModel{.hidden = 16,
                                      .heads = 2,
                                      .layers = 2,
                                      .intermediate = 32,
                                      .mini_batch = 8,
                                      .seq_layer = SeqLayerKind::Titans,
                                      .mamba = false};

TEST(TitansModel, ConfigJsonParameterCountAndCheckpointLayoutFollowTheConfig) {
  ModelConfig c = testing::tiny_model(kTitansModel);
  c.mini_batch_size = 5;
  c.conv_kernel = 3;
  EXPECT_EQ(ModelConfig::from_json(c.to_json()).mini_batch_size, 5);
  EXPECT_EQ(c.titans_config().mini_batch, 5);
  const std::vector<NamedTensor> sd = layer_test::expect_checkpoint_layout_follows_config(c);
  using Shape = std::vector<std::int64_t>;
  auto shape_of = [&](const std::string& n) { return layer_test::block_tensor_shape(sd, n); };
  EXPECT_EQ(shape_of("q_proj.weight"), (Shape{16, 16}));
  EXPECT_EQ(shape_of("theta_proj.weight"), (Shape{2, 16}));
  EXPECT_EQ(shape_of("eta_proj.bias"), (Shape{2}));
  EXPECT_EQ(shape_of("k_conv1d.weight"), (Shape{16, 1, 3}));
  EXPECT_EQ(shape_of("ttt_norm.weight"), (Shape{2, 8}));
  EXPECT_EQ(shape_of("o_norm.weight"), (Shape{8}));
  // One head: the memory's LayerNorm [1, d] is stored as [d], in the config's layout and the model's.
  c.num_attention_heads = 1;
  layer_test::expect_checkpoint_layout_follows_config(c);
}

// T = 19: a short last mini-batch.
TEST(TitansModel, ModelGradientMatchesFiniteDifferences) {
  layer_test::expect_model_gradient_matches_finite_differences(testing::tiny_model(kTitansModel),
                                                               layer_test::announce(33), 20, 17);
}

TEST(TitansModel, GreedyDecodingIsReproducibleAndTheWholeForwardsArgmax) {
  layer_test::expect_greedy_decoding_is_the_whole_forwards_argmax(testing::tiny_model(kTitansModel),
                                                                  layer_test::announce(13));
}

// A DeltaNet model refuses the file, naming a tensor it does not expect.
TEST(TitansModel, CheckpointSaveAndLoadGiveBitwiseTheSameEvalLoss) {
  const ModelConfig c = testing::tiny_model(kTitansModel);
  ModelConfig dc = c;
  dc.seq_layer = SeqLayerKind::DeltaNet;
  layer_test::expect_checkpoint_round_trip(c, dc, "model.layers.0.seq_modeling_block.", "titans");
}

TEST(TitansModel, TrainingLossFallsAndAResumedRunContinuesExactly) {
  layer_test::expect_training_falls_and_resumes_exactly(
      {.hidden = 32,
       .layers = 2,
       .intermediate = 64,
       .mini_batch = 8,
       .seq_layer = SeqLayerKind::Titans,
       .mamba = false},
      [](ModelConfig&) {}, "titans");
}

}  // namespace
}  // namespace tttlab
