// DeltaNet and Gated DeltaNet as layers (tttlab/seq/deltanet_layer.hpp, docs/MATH.md §11.8): the
// manual backward against central differences for every parameter and the input, the chunked
// (training) form against token-by-token decoding, and the layers inside a model: config.json, the
// parameter count and checkpoint layout, save and load, training and an exact resume, greedy decoding,
// and the refusals of bad configurations.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/nn/grad_check.hpp"
#include "core/tiny_run.hpp"
#include "core/word_corpus.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/decoder.hpp"
#include "tttlab/model/memory.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/seq/deltanet_layer.hpp"
#include "tttlab/train/trainer.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {
namespace fs = std::filesystem;
namespace {

// Prints the seed so that a failure can be replayed.
std::uint64_t dn_announce(std::uint64_t seed) {
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

Mat<double> dn_random_mat(Eigen::Index r, Eigen::Index c, Rng& rng) {
  Mat<double> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = rng.normal();
  return m;
}

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

// Every entry of every parameter and of the input against central differences of ⟨W, y⟩, y from the
// chunked form (forward_train). T = 11 with chunks of 4: two full chunks and a short one.
TEST_P(DeltaNetLayerTest, BackwardMatchesFiniteDifferencesForEveryParameterAndTheInput) {
  const bool gated = GetParam();
  const std::uint64_t seed = dn_announce(gated ? 5151 : 4141);
  DeltaNetLayer<double> layer = dn_random_layer(dn_config(gated, 8, 2, 3, 4), seed);
  Rng rng(seed + 1);
  const int T = 11;
  Mat<double> x = dn_random_mat(T, 8, rng);
  const Mat<double> W = dn_random_mat(T, 8, rng);
  Mat<double> y, dx;
  const auto cache = layer.forward_train(x, y);
  auto grads = layer.zeros_like();
  layer.backward(*cache, W, *grads, dx);
  auto loss = [&] {
    Mat<double> out;
    layer.forward_train(x, out);
    return (out.array() * W.array()).sum();
  };
  auto fd = [&](double& v) { return test::central_difference(v, loss); };
  const double sx = std::max(1.0, dx.cwiseAbs().maxCoeff());
  for (Eigen::Index i = 0; i < x.size(); ++i)
    EXPECT_NEAR(dx.data()[i], fd(x.data()[i]), 1e-7 * sx) << "x[" << i << "]";
  std::vector<Eigen::Map<Mat<double>>> gs, ps;
  std::vector<std::string> names;
  grads->for_each_param([&](Eigen::Map<Mat<double>> m, const std::string& n) {
    gs.push_back(m);
    names.push_back(n);
  });
  layer.for_each_param([&](Eigen::Map<Mat<double>> m, const std::string&) { ps.push_back(m); });
  std::vector<std::string> want{"q_proj.weight",  "k_proj.weight",   "v_proj.weight",
                                "b_proj.weight",  "q_conv1d.weight", "k_conv1d.weight",
                                "v_conv1d.weight"};
  if (gated) want.insert(want.end(), {"a_proj.weight", "A_log", "dt_bias", "g_proj.weight"});
  want.insert(want.end(), {"o_norm.weight", "o_proj.weight"});
  EXPECT_EQ(names, want);
  ASSERT_EQ(gs.size(), ps.size());
  for (size_t k = 0; k < gs.size(); ++k) {
    const double s = std::max(1.0, gs[k].cwiseAbs().maxCoeff());
    EXPECT_GT(gs[k].cwiseAbs().maxCoeff(), 1e-4) << names[k] << " carries no gradient to check";
    for (Eigen::Index i = 0; i < ps[k].size(); ++i)
      EXPECT_NEAR(gs[k].data()[i], fd(ps[k].data()[i]), 1e-7 * s) << names[k] << "[" << i << "]";
  }
}

// The chunked form of training against the primal form one token at a time (decoding), and a
// streamed prefill in pieces: T = 37 with chunks of 8 (not a multiple), relative to the output's scale.
TEST_P(DeltaNetLayerTest, ChunkedTrainingFormEqualsTokenByTokenDecodingInFp64) {
  const bool gated = GetParam();
  const std::uint64_t seed = dn_announce(gated ? 777 : 778);
  const DeltaNetLayer<double> layer = dn_random_layer(dn_config(gated, 12, 3, 4, 8), seed);
  Rng rng(seed + 1);
  const int T = 37;
  const Mat<double> x = dn_random_mat(T, 12, rng);
  Mat<double> y_train;
  layer.forward_train(x, y_train);
  const double scale = y_train.cwiseAbs().maxCoeff();
  ASSERT_GT(scale, 1e-3);
  auto st = layer.start();
  Mat<double> y_dec(T, 12);
  for (int t = 0; t < T; ++t) y_dec.row(t) = layer.forward(*st, x.middleRows(t, 1));
  EXPECT_EQ(st->tokens, T);
  const double err = (y_dec - y_train).cwiseAbs().maxCoeff() / scale;
  std::printf("[   INFO   ] %s: max |decode − train| / max |y| = %.3g\n",
              gated ? "gated-deltanet" : "deltanet", err);
  EXPECT_LE(err, 1e-12);
  // Prefill in pieces of 5, 13 and 19 tokens (the chunked form continuing the carried state).
  auto pre = layer.start();
  Mat<double> y_pre(T, 12);
  for (auto [a, n] : {std::pair{0, 5}, {5, 13}, {18, 19}})
    y_pre.middleRows(a, n) = layer.forward(*pre, x.middleRows(a, n));
  EXPECT_LE((y_pre - y_train).cwiseAbs().maxCoeff() / scale, 1e-12);
  // The float layer tracks the double one.
  DeltaNetParams<float> pf;
  const DeltaNetParams<double>& pd = layer.params();
  pf.q_proj = pd.q_proj.cast<float>(), pf.k_proj = pd.k_proj.cast<float>();
  pf.v_proj = pd.v_proj.cast<float>(), pf.b_proj = pd.b_proj.cast<float>();
  pf.q_conv = pd.q_conv.cast<float>(), pf.k_conv = pd.k_conv.cast<float>();
  pf.v_conv = pd.v_conv.cast<float>(), pf.a_proj = pd.a_proj.cast<float>();
  pf.A_log = pd.A_log.cast<float>(), pf.dt_bias = pd.dt_bias.cast<float>();
  pf.g_proj = pd.g_proj.cast<float>(), pf.o_norm = pd.o_norm.cast<float>();
  pf.o_proj = pd.o_proj.cast<float>();
  const DeltaNetLayer<float> lf(layer.config(), pf);
  Mat<float> yf;
  lf.forward_train(x.cast<float>(), yf);
  EXPECT_LE((yf.cast<double>() - y_train).cwiseAbs().maxCoeff() / scale, 1e-4);
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

std::string dn_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

TEST(DeltaNetLayer, BadConfigurationsAreClearErrors) {
  DeltaNetConfig bad = dn_config(false, 12, 5, 4, 8);
  EXPECT_NE(dn_error_of([&] { bad.validate(); }).find("heads (5) must divide width (12)"),
            std::string::npos);
  bad = dn_config(true, 12, 3, 0, 8);
  EXPECT_NE(dn_error_of([&] { bad.validate(); }).find("conv_kernel must be positive"),
            std::string::npos);
  bad = dn_config(true, 12, 3, 4, 0);
  EXPECT_NE(dn_error_of([&] { bad.validate(); }).find("chunk_size must be positive"),
            std::string::npos);
  // Parameters of the other variant are refused with their name and shape.
  Rng rng(1);
  DeltaNetParams<double> p = DeltaNetParams<double>::init(dn_config(false, 12, 3, 4, 8), 0.02, rng);
  EXPECT_NE(dn_error_of([&] {
              DeltaNetLayer<double>(dn_config(true, 12, 3, 4, 8), p);
            }).find("a_proj.weight must be [12, 3]"),
            std::string::npos);
  for (SeqLayerKind kind : {SeqLayerKind::DeltaNet, SeqLayerKind::GatedDeltaNet}) {
    ModelConfig c = testing::tiny_model({.seq_layer = kind, .mamba = true});
    EXPECT_NE(dn_error_of([&] { c.validate(); }).find("uses the Transformer backbone (t)"),
              std::string::npos);
    c.mamba_backbone = false;
    EXPECT_NO_THROW(c.validate());
    c.deltanet_chunk_size = 0;
    EXPECT_NE(dn_error_of([&] {
                c.validate();
              }).find("tttlab_deltanet_chunk_size must be positive, got 0"),
              std::string::npos);
    c.deltanet_chunk_size = 8;
    c.num_attention_heads = 3;
    EXPECT_NE(dn_error_of([&] {
                c.validate();
              }).find("num_attention_heads (3) must divide hidden_size (16)"),
              std::string::npos);
  }
  EXPECT_NE(
      dn_error_of([] { seq_layer_from_string("delta-net"); }).find("deltanet, gated-deltanet"),
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

std::vector<int> dn_random_tokens(int n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<int> t(n);
  for (int& v : t) v = static_cast<int>(rng.below(256));
  return t;
}

fs::path dn_temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() /
               ("tttlab_test_deltanet_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST_P(DeltaNetModelTest, ConfigJsonParameterCountAndCheckpointLayoutFollowTheConfig) {
  const SeqLayerKind kind = GetParam();
  ModelConfig c = dn_model(kind);
  c.deltanet_chunk_size = 5;
  c.conv_kernel = 3;
  const ModelConfig back = ModelConfig::from_json(c.to_json());
  EXPECT_EQ(back.seq_layer, kind);
  EXPECT_FALSE(back.mamba_backbone);
  EXPECT_EQ(back.deltanet_chunk_size, 5);
  EXPECT_EQ(back.to_json(), c.to_json());
  Model<float> m(c, 1);
  EXPECT_EQ(static_cast<long>(count_params(c)), m.num_params());
  std::vector<NamedTensor> sd = state_dict(m);
  std::erase_if(sd, [](const NamedTensor& t) { return t.name == "lm_head.weight"; });
  const std::vector<TensorShape> want = checkpoint_tensor_shapes(c);
  ASSERT_EQ(want.size(), sd.size());
  for (std::size_t i = 0; i < sd.size(); ++i) {
    EXPECT_EQ(want[i].name, sd[i].name);
    EXPECT_EQ(want[i].shape, sd[i].shape) << sd[i].name;
  }
  // FLA's state_dict shapes: nn.Linear [out, in], Conv1d [channels, 1, K], per-head vectors.
  auto shape_of = [&](const std::string& n) {
    for (const auto& t : sd)
      if (t.name == "model.layers.1.seq_modeling_block." + n) return t.shape;
    return std::vector<std::int64_t>{};
  };
  using Shape = std::vector<std::int64_t>;
  EXPECT_EQ(shape_of("q_proj.weight"), (Shape{16, 16}));
  EXPECT_EQ(shape_of("b_proj.weight"), (Shape{2, 16}));
  EXPECT_EQ(shape_of("k_conv1d.weight"), (Shape{16, 1, 3}));
  EXPECT_EQ(shape_of("o_norm.weight"), (Shape{8}));
  const bool gated = kind == SeqLayerKind::GatedDeltaNet;
  EXPECT_EQ(shape_of("a_proj.weight"), gated ? (Shape{2, 16}) : Shape{});
  EXPECT_EQ(shape_of("A_log"), gated ? (Shape{2}) : Shape{});
  EXPECT_EQ(shape_of("g_proj.weight"), gated ? (Shape{16, 16}) : Shape{});
  EXPECT_GT(estimate_memory(c, MemoryUse{}), 0u);
}

// Through the whole model: sampled parameters of the mixers against central differences, the
// training loss equal to the streaming evaluation's.
TEST_P(DeltaNetModelTest, ModelGradientMatchesFiniteDifferences) {
  const SeqLayerKind kind = GetParam();
  const std::uint64_t seed = dn_announce(kind == SeqLayerKind::DeltaNet ? 31 : 32);
  ModelConfig c = dn_model(kind);
  c.initializer_range = 0.3;
  Model<double> model(c, seed);
  auto grads = model.zeros_like();
  const std::vector<int> tokens = dn_random_tokens(20, seed + 1);  // T = 19: a short last chunk
  const CrossEntropyStats st = model.train_sequence(tokens, {}, 19, *grads);
  EXPECT_NEAR(st.loss_sum, model.eval_sequence(tokens, {}).loss_sum, 1e-10);
  auto loss = [&] { return model.eval_sequence(tokens, {}).loss_sum / 19.0; };
  std::vector<std::pair<std::string, Eigen::Map<Mat<double>>>> gs, ps;
  grads->for_each_param(
      [&](Eigen::Map<Mat<double>> m, const std::string& n) { gs.emplace_back(n, m); });
  model.for_each_param(
      [&](Eigen::Map<Mat<double>> m, const std::string& n) { ps.emplace_back(n, m); });
  ASSERT_EQ(gs.size(), ps.size());
  Rng pick(seed + 2);
  int checked = 0;
  for (size_t k = 0; k < ps.size(); ++k) {
    if (ps[k].first.find("seq_modeling_block") == std::string::npos) continue;
    for (int r = 0; r < 3; ++r) {
      const Eigen::Index i = static_cast<Eigen::Index>(pick.below(ps[k].second.size()));
      const double fd = test::central_difference(ps[k].second.data()[i], loss);
      EXPECT_NEAR(gs[k].second.data()[i], fd, 1e-6 * std::max(1.0, std::abs(fd)))
          << ps[k].first << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * (kind == SeqLayerKind::GatedDeltaNet ? 13 : 9) * 3);
}

// Greedy decoding from the CPU engine, one token at a time, is reproducible and picks the argmax of
// the whole forward's logits at every position (the whole forward fed the greedy bytes).
TEST_P(DeltaNetModelTest, GreedyDecodingIsReproducibleAndTheWholeForwardsArgmax) {
  const std::uint64_t seed = dn_announce(GetParam() == SeqLayerKind::DeltaNet ? 11 : 12);
  ModelConfig c = dn_model(GetParam());
  c.initializer_range = 0.2;
  const Model<float> model(c, seed);
  const std::vector<int> prompt = dn_random_tokens(6, seed);
  auto greedy = [&] {
    const auto dec = make_cpu_decoder(model);
    std::vector<float> logits;
    dec->feed(prompt, logits);
    std::vector<int> out = prompt;
    for (int i = 0; i < 24; ++i) {
      const int next =
          static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(next);
      dec->feed(std::span<const int>(&out.back(), 1), logits);
    }
    return out;
  };
  const std::vector<int> a = greedy(), b = greedy();
  EXPECT_EQ(a, b);
  auto whole_stream = model.start();
  const Mat<float> whole =
      model.forward(*whole_stream, std::span<const int>(a).first(a.size() - 1));
  int distinct = 0;
  for (std::size_t t = prompt.size() - 1; t + 1 < a.size(); ++t) {
    Eigen::Index arg = 0;
    whole.row(static_cast<Eigen::Index>(t)).maxCoeff(&arg);
    EXPECT_EQ(arg, a[t + 1]) << "position " << t;
    distinct += a[t + 1] != a[prompt.size()];
  }
  EXPECT_GT(distinct, 0)
      << "the greedy bytes are all the same: the check would not see a wrong position";
}

TEST_P(DeltaNetModelTest, CheckpointSaveAndLoadGiveBitwiseTheSameEvalLoss) {
  const fs::path dir = dn_temp_dir("ckpt");
  const ModelConfig c = dn_model(GetParam());
  Model<float> m(c, 5);
  save_model_safetensors(m, dir / "model.safetensors");
  Model<float> other(c, 6);
  const std::vector<int> tokens = dn_random_tokens(30, 8);
  EXPECT_NE(m.eval_sequence(tokens, {}).loss_sum, other.eval_sequence(tokens, {}).loss_sum);
  load_model_safetensors(other, dir / "model.safetensors");
  EXPECT_EQ(m.eval_sequence(tokens, {}).loss_sum, other.eval_sequence(tokens, {}).loss_sum);
  auto s1 = m.start(), s2 = other.start();
  EXPECT_EQ(m.forward(*s1, tokens), other.forward(*s2, tokens));
  // The other variant's model refuses the file, naming a tensor it lacks or does not expect.
  const bool gated = GetParam() == SeqLayerKind::GatedDeltaNet;
  Model<float> wrong(dn_model(gated ? SeqLayerKind::DeltaNet : SeqLayerKind::GatedDeltaNet), 7);
  std::string why;
  try {
    load_model_safetensors(wrong, dir / "model.safetensors");
  } catch (const std::exception& e) {
    why = e.what();
  }
  EXPECT_NE(why.find(gated ? "unexpected tensor 'model.layers.0.seq_modeling_block.a_proj.weight'"
                           : "model.layers.0.seq_modeling_block.a_proj.weight' is missing"),
            std::string::npos)
      << why;
  fs::remove_all(dir);
}

// A tiny two-block model on the word corpus: the loss falls well below chance in 30 steps, and a run
// saved after 10 steps and resumed continues the same loss curve exactly.
TEST_P(DeltaNetModelTest, TrainingLossFallsAndAResumedRunContinuesExactly) {
  const fs::path dir = dn_temp_dir(std::string("train_") + to_string(GetParam()));
  TrainConfig cfg = testing::tiny_train_config(
      testing::write_word_corpus(dir, 6000),
      {.steps = 30, .batch = 4, .seq_len = 32, .seed = 7, .threads = 2, .eval_windows = 8},
      {.hidden = 32, .layers = 2, .intermediate = 64, .seq_layer = GetParam(), .mamba = false});
  cfg.model.deltanet_chunk_size = 8;
  std::vector<double> straight;
  double before = 0, after = 0;
  {
    Trainer t(cfg, TextData::load(cfg));
    before = t.evaluate(8).loss;
    while (!t.finished()) {
      straight.push_back(t.step().loss);
      ASSERT_TRUE(std::isfinite(straight.back()));
      if (straight.size() == 10) t.save(dir / "run");
    }
    after = t.evaluate(8).loss;
  }
  std::printf("[   INFO   ] %s: eval loss %.3f -> %.3f nats after 30 steps\n",
              to_string(GetParam()).c_str(), before, after);
  EXPECT_NEAR(before, std::log(256.0), 0.3);
  EXPECT_LT(after, before - 1.5);
  auto resumed = Trainer::resume(dir / "run");
  EXPECT_EQ(resumed->config().model.seq_layer, GetParam());
  std::vector<double> rest;
  while (!resumed->finished()) rest.push_back(resumed->step().loss);
  EXPECT_EQ(rest, std::vector<double>(straight.begin() + 10, straight.end()));
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Kinds, DeltaNetModelTest,
                         ::testing::Values(SeqLayerKind::DeltaNet, SeqLayerKind::GatedDeltaNet),
                         [](const ::testing::TestParamInfo<SeqLayerKind>& p) {
                           return p.param == SeqLayerKind::DeltaNet ? "DeltaNet" : "GatedDeltaNet";
                         });

}  // namespace
}  // namespace tttlab
