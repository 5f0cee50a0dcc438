// DeltaNet and Gated DeltaNet as layers (tttlab/seq/deltanet_layer.hpp, docs/MATH.md §11.8), through
// the shared checks of tests/core/layer_test_util.hpp: the manual backward against central differences
// for every parameter and the input, the chunked (training) form against token-by-token decoding, and
// the layers inside a model: config.json, the parameter count and checkpoint layout, save and load,
// training and an exact resume, greedy decoding; and what is DeltaNet's own: its initialisation and
// the refusals of bad configurations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/layer_test_util.hpp"
#include "tttlab/seq/deltanet_layer.hpp"

namespace tttlab {
namespace {

using layer_test::error_of;

// A small layer whose every path carries signal: projections of σ = 0.5 (β spread over (0, 1)), the
// decay's dt around 0.3–2 (dt_bias ~ N(0, 1)) and A_log near 0 so that α spans (0, 1), and the norm's
// weight away from 1.
DeltaNetLayer<double> dn_random_layer(const DeltaNetConfig& cfg, std::uint64_t seed) {
  Rng rng(seed);
  DeltaNetParams<double> p = DeltaNetParams<double>::init(cfg, 0.5, rng);
  if (cfg.gated)
    for (int h = 0; h < cfg.heads; ++h) {
      p.dt_bias(h) = rng.normal();
      p.A_log(h) = std::log(0.2 + rng.uniform());
    }
  for (Eigen::Index i = 0; i < p.o_norm.size(); ++i) p.o_norm(i) = 1 + 0.5 * rng.normal();
  return DeltaNetLayer<double>(cfg, p);
}

DeltaNetConfig dn_config(bool gated, int width, int heads, int K, int chunk) {
  DeltaNetConfig c;
  c.width = width, c.heads = heads, c.conv_kernel = K, c.chunk_size = chunk, c.gated = gated;
  return c;
}

class DeltaNetLayerTest : public ::testing::TestWithParam<bool> {};

// T = 11 with chunks of 4: two full chunks and a short one.
TEST_P(DeltaNetLayerTest, BackwardMatchesFiniteDifferencesForEveryParameterAndTheInput) {
  const bool gated = GetParam();
  const std::uint64_t seed = layer_test::announce(gated ? 5151 : 4141);
  DeltaNetLayer<double> layer = dn_random_layer(dn_config(gated, 8, 2, 3, 4), seed);
  std::vector<std::string> want{"q_proj.weight",  "k_proj.weight",   "v_proj.weight",
                                "b_proj.weight",  "q_conv1d.weight", "k_conv1d.weight",
                                "v_conv1d.weight"};
  if (gated) want.insert(want.end(), {"a_proj.weight", "A_log", "dt_bias", "g_proj.weight"});
  want.insert(want.end(), {"o_norm.weight", "o_proj.weight"});
  layer_test::expect_backward_matches_finite_differences(layer, 11, seed, want);
}

// T = 37 with chunks of 8 (not a multiple).
TEST_P(DeltaNetLayerTest, ChunkedTrainingFormEqualsTokenByTokenDecodingInFp64) {
  const bool gated = GetParam();
  const std::uint64_t seed = layer_test::announce(gated ? 777 : 778);
  DeltaNetLayer<double> layer = dn_random_layer(dn_config(gated, 12, 3, 4, 8), seed);
  Rng rng(seed + 1);
  const Mat<double> x = layer_test::random_mat(37, 12, rng);
  const Mat<double> y =
      layer_test::expect_streaming_equals_training(layer, x, gated ? "gated-deltanet" : "deltanet");
  DeltaNetLayer<float> lf(layer.config(), DeltaNetParams<float>::zeros(layer.config()));
  EXPECT_LE(layer_test::float_copy_deviation(layer, lf, x, y), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Variants, DeltaNetLayerTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Gated" : "Plain";
                         });

TEST(DeltaNetLayer, InitialisationFollowsMamba2sDecayAndPyTorchsConvolution) {
  Rng rng(3);
  const DeltaNetConfig cfg = dn_config(true, 32, 8, 4, 16);
  const DeltaNetParams<double> p = DeltaNetParams<double>::init(cfg, 0.02, rng);
  for (int h = 0; h < cfg.heads; ++h) {
    const double dt = std::log1p(std::exp(p.dt_bias(h)));
    EXPECT_GE(dt, 0.001 - 1e-12);
    EXPECT_LE(dt, 0.1 + 1e-12);
    EXPECT_GE(std::exp(p.A_log(h)), 1.0);
    EXPECT_LE(std::exp(p.A_log(h)), 16.0);
  }
  EXPECT_EQ(p.o_norm, RowVec<double>::Ones(4));
  EXPECT_LE(p.q_conv.cwiseAbs().maxCoeff(), 0.5);  // U(±1/√K), K = 4
  const DeltaNetParams<double> plain =
      DeltaNetParams<double>::init(dn_config(false, 32, 8, 4, 16), 0.02, rng);
  EXPECT_EQ(plain.g_proj.size(), 0);
  EXPECT_EQ(plain.A_log.size(), 0);
}

TEST(DeltaNetLayer, BadConfigurationsAreClearErrors) {
  DeltaNetConfig bad = dn_config(false, 12, 5, 4, 8);
  EXPECT_NE(error_of([&] { bad.validate(); }).find("heads (5) must divide width (12)"),
            std::string::npos);
  bad = dn_config(true, 12, 3, 0, 8);
  EXPECT_NE(error_of([&] { bad.validate(); }).find("conv_kernel must be positive"),
            std::string::npos);
  bad = dn_config(true, 12, 3, 4, 0);
  EXPECT_NE(error_of([&] { bad.validate(); }).find("chunk_size must be positive"),
            std::string::npos);
  // Parameters of the other variant are refused with their name and shape.
  Rng rng(1);
  DeltaNetParams<double> p = DeltaNetParams<double>::init(dn_config(false, 12, 3, 4, 8), 0.02, rng);
  EXPECT_NE(error_of([&] {
              DeltaNetLayer<double>(dn_config(true, 12, 3, 4, 8), p);
            }).find("a_proj.weight must be [12, 3]"),
            std::string::npos);
  for (SeqLayerKind kind : {SeqLayerKind::DeltaNet, SeqLayerKind::GatedDeltaNet}) {
    ModelConfig c = testing::tiny_model({.seq_layer = kind, .mamba = true});
    EXPECT_NE(error_of([&] { c.validate(); }).find("uses the Transformer backbone (t)"),
              std::string::npos);
    c.mamba_backbone = false;
    EXPECT_NO_THROW(c.validate());
    c.deltanet_chunk_size = 0;
    EXPECT_NE(
        error_of([&] { c.validate(); }).find("tttlab_deltanet_chunk_size must be positive, got 0"),
        std::string::npos);
    c.deltanet_chunk_size = 8;
    c.num_attention_heads = 3;
    EXPECT_NE(error_of([&] {
                c.validate();
              }).find("num_attention_heads (3) must divide hidden_size (16)"),
              std::string::npos);
  }
  EXPECT_NE(error_of([] { seq_layer_from_string("delta-net"); }).find("deltanet, gated-deltanet"),
            std::string::npos);
  EXPECT_EQ(seq_layer_from_string("deltanet"), SeqLayerKind::DeltaNet);
  EXPECT_EQ(seq_layer_from_string("gated-deltanet"), SeqLayerKind::GatedDeltaNet);
}

// ---- inside a model ------------------------------------------------------------------------------

ModelConfig dn_model(SeqLayerKind kind, int layers = 2) {
  ModelConfig c = testing::tiny_model({.hidden = 16,
                                       .heads = 2,
                                       .layers = layers,
                                       .intermediate = 32,
                                       .seq_layer = kind,
                                       .mamba = false});
  c.deltanet_chunk_size = 8;
  return c;
}

class DeltaNetModelTest : public ::testing::TestWithParam<SeqLayerKind> {};

TEST_P(DeltaNetModelTest, ConfigJsonParameterCountAndCheckpointLayoutFollowTheConfig) {
  const SeqLayerKind kind = GetParam();
  ModelConfig c = dn_model(kind);
  c.deltanet_chunk_size = 5;
  c.conv_kernel = 3;
  EXPECT_EQ(ModelConfig::from_json(c.to_json()).deltanet_chunk_size, 5);
  // FLA's state_dict shapes: nn.Linear [out, in], Conv1d [channels, 1, K], per-head vectors.
  const std::vector<NamedTensor> sd = layer_test::expect_checkpoint_layout_follows_config(c);
  auto shape_of = [&](const std::string& n) { return layer_test::block_tensor_shape(sd, n); };
  using Shape = std::vector<std::int64_t>;
  EXPECT_EQ(shape_of("q_proj.weight"), (Shape{16, 16}));
  EXPECT_EQ(shape_of("b_proj.weight"), (Shape{2, 16}));
  EXPECT_EQ(shape_of("k_conv1d.weight"), (Shape{16, 1, 3}));
  EXPECT_EQ(shape_of("o_norm.weight"), (Shape{8}));
  const bool gated = kind == SeqLayerKind::GatedDeltaNet;
  EXPECT_EQ(shape_of("a_proj.weight"), gated ? (Shape{2, 16}) : Shape{});
  EXPECT_EQ(shape_of("A_log"), gated ? (Shape{2}) : Shape{});
  EXPECT_EQ(shape_of("g_proj.weight"), gated ? (Shape{16, 16}) : Shape{});
}

// T = 19: a short last chunk.
TEST_P(DeltaNetModelTest, ModelGradientMatchesFiniteDifferences) {
  const SeqLayerKind kind = GetParam();
  layer_test::expect_model_gradient_matches_finite_differences(
      dn_model(kind), layer_test::announce(kind == SeqLayerKind::DeltaNet ? 31 : 32), 20,
      kind == SeqLayerKind::GatedDeltaNet ? 13 : 9);
}

TEST_P(DeltaNetModelTest, GreedyDecodingIsReproducibleAndTheWholeForwardsArgmax) {
  layer_test::expect_greedy_decoding_is_the_whole_forwards_argmax(
      dn_model(GetParam()), layer_test::announce(GetParam() == SeqLayerKind::DeltaNet ? 11 : 12));
}

// The other variant's model refuses the file, naming a tensor it lacks or does not expect.
TEST_P(DeltaNetModelTest, CheckpointSaveAndLoadGiveBitwiseTheSameEvalLoss) {
  const bool gated = GetParam() == SeqLayerKind::GatedDeltaNet;
  layer_test::expect_checkpoint_round_trip(
      dn_model(GetParam()), dn_model(gated ? SeqLayerKind::DeltaNet : SeqLayerKind::GatedDeltaNet),
      gated ? "unexpected tensor 'model.layers.0.seq_modeling_block.a_proj.weight'"
            : "model.layers.0.seq_modeling_block.a_proj.weight' is missing",
      "deltanet");
}

TEST_P(DeltaNetModelTest, TrainingLossFallsAndAResumedRunContinuesExactly) {
  layer_test::expect_training_falls_and_resumes_exactly(
      {.hidden = 32, .layers = 2, .intermediate = 64, .seq_layer = GetParam(), .mamba = false},
      [](ModelConfig& m) { m.deltanet_chunk_size = 8; }, to_string(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Kinds, DeltaNetModelTest,
                         ::testing::Values(SeqLayerKind::DeltaNet, SeqLayerKind::GatedDeltaNet),
                         [](const ::testing::TestParamInfo<SeqLayerKind>& p) {
                           return p.param == SeqLayerKind::DeltaNet ? "DeltaNet" : "GatedDeltaNet";
                         });

}  // namespace
}  // namespace tttlab
