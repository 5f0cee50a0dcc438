// Mamba-2 (tttlab/seq/mamba2_layer.hpp, docs/MATH.md §8.8): the recurrent and chunked forms agree in
// fp64, streaming in any chunks equals one call, the manual backward matches central differences for
// every parameter and the input, and the layer works inside a model: config.json, the parameter count,
// the checkpoint layout and round trip, streaming decode, and training.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/layer_test_util.hpp"
#include "core/nn/grad_check.hpp"
#include "core/tiny_run.hpp"
#include "core/word_corpus.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/decoder.hpp"
#include "tttlab/model/memory.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/seq/mamba2_layer.hpp"
#include "tttlab/train/trainer.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {
namespace fs = std::filesystem;
namespace {

// Prints the seed so that a failure can be replayed.
std::uint64_t announce(std::uint64_t seed) {
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

// A small layer whose every path carries signal: the reference initialisation, then dt around 0.3–2
// (dt_bias ~ N(0, 1)) so that the decays exp(dt·A) span (0, 1) instead of staying near 1, and D and
// the norm's weight away from 1.
Mamba2Layer<double> random_layer(const Mamba2Config& cfg, std::uint64_t seed) {
  Rng rng(seed);
  Mamba2Params<double> p = Mamba2Params<double>::init(cfg, 0.4, rng);
  for (int h = 0; h < cfg.heads(); ++h) {
    p.dt_bias(h) = rng.normal();
    p.A_log(h) = std::log(0.2 + rng.uniform());
    p.D(h) = rng.normal();
  }
  for (Eigen::Index i = 0; i < p.norm_w.size(); ++i) p.norm_w(i) = 1 + 0.5 * rng.normal();
  return Mamba2Layer<double>(cfg, p);
}

Mat<double> random_mat(Eigen::Index r, Eigen::Index c, Rng& rng) {
  Mat<double> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = rng.normal();
  return m;
}

Mamba2Config small_layer_config() {
  Mamba2Config c;
  c.width = 12;
  c.d_state = 5;
  c.d_conv = 4;
  c.expand = 2;    // d_inner = 24
  c.headdim = 8;   // 3 heads
  c.chunk_size = 8;
  return c;
}

TEST(Mamba2, RecurrentAndChunkedFormsAgreeInFp64) {
  const std::uint64_t seed = announce(20261129);
  const Mamba2Config cfg = small_layer_config();
  const Mamba2Layer<double> layer = random_layer(cfg, seed);
  Rng rng(seed + 1);
  const int T = 37;  // four full chunks of 8 and a short one
  const Mat<double> x = random_mat(T + 6, cfg.width, rng);
  auto rec = layer.start(), chk = layer.start();
  const Mat<double> y_rec = layer.forward(*rec, x.topRows(T), Mamba2Form::Recurrent);
  const Mat<double> y_chk = layer.forward(*chk, x.topRows(T), Mamba2Form::Chunked);
  Mat<double> y_train;
  layer.forward_train(x.topRows(T), y_train);
  const double scale = y_rec.cwiseAbs().maxCoeff();
  ASSERT_GT(scale, 0.1);
  EXPECT_LT((y_rec - y_chk).cwiseAbs().maxCoeff(), 1e-13 * scale);
  EXPECT_LT((y_rec - y_train).cwiseAbs().maxCoeff(), 1e-13 * scale);
  // The states each form carries are the same: six more tokens, each way, give the same outputs.
  const Mat<double> more_rec = layer.forward(*rec, x.bottomRows(6), Mamba2Form::Recurrent);
  const Mat<double> more_chk = layer.forward(*chk, x.bottomRows(6), Mamba2Form::Recurrent);
  EXPECT_LT((more_rec - more_chk).cwiseAbs().maxCoeff(), 1e-13 * scale);
  // And the float instantiation computes the same function to float's rounding.
  Mamba2Params<float> pf;
  const Mamba2Params<double>& pd = layer.params();
  pf.in_proj = pd.in_proj.cast<float>(), pf.conv_w = pd.conv_w.cast<float>(), pf.conv_b = pd.conv_b.cast<float>();
  pf.dt_bias = pd.dt_bias.cast<float>(), pf.A_log = pd.A_log.cast<float>(), pf.D = pd.D.cast<float>();
  pf.norm_w = pd.norm_w.cast<float>(), pf.out_proj = pd.out_proj.cast<float>();
  const Mamba2Layer<float> lf(cfg, pf);
  Mat<float> yf;
  lf.forward_train(x.topRows(T).cast<float>(), yf);
  EXPECT_LT((yf.cast<double>() - y_rec).cwiseAbs().maxCoeff(), 1e-4 * scale);
}

TEST(Mamba2, StreamingInAnyChunksEqualsOneCall) {
  const std::uint64_t seed = announce(7);
  const Mamba2Config cfg = small_layer_config();
  const Mamba2Layer<double> layer = random_layer(cfg, seed);
  Rng rng(seed + 1);
  const int T = 30;
  const Mat<double> x = random_mat(T, cfg.width, rng);
  const Mat<double> whole = layer.forward(x);
  const double scale = whole.cwiseAbs().maxCoeff();
  for (const Mamba2Form form : {Mamba2Form::Recurrent, Mamba2Form::Chunked}) {
    // Chunks of 1 (decoding), shorter than the convolution, across the scan's chunk boundaries.
    const std::vector<int> pieces = {1, 1, 2, 3, 9, 1, 5, 8};
    auto st = layer.start();
    Mat<double> y(T, cfg.width);
    int at = 0;
    for (int n : pieces) {
      y.middleRows(at, n) = layer.forward(*st, x.middleRows(at, n), form);
      at += n;
    }
    ASSERT_EQ(at, T);
    EXPECT_EQ(st->tokens, T);
    EXPECT_LT((y - whole).cwiseAbs().maxCoeff(), 1e-13 * scale) << (form == Mamba2Form::Chunked ? "chunked" : "recurrent");
  }
}

// Every entry of every parameter and of the input against central differences of ⟨W, y⟩, y from the
// chunked form (forward_train). T = 11 with chunks of 4: two full chunks and a short one, so the
// gradient crosses chunk boundaries through the carried state.
TEST(Mamba2, BackwardMatchesFiniteDifferencesForEveryParameterAndTheInput) {
  const std::uint64_t seed = announce(424242);
  Mamba2Config cfg;
  cfg.width = 6, cfg.d_state = 3, cfg.d_conv = 3, cfg.expand = 2, cfg.headdim = 4, cfg.chunk_size = 4;
  Mamba2Layer<double> layer = random_layer(cfg, seed);
  layer_test::expect_backward_matches_finite_differences(
      layer, 11, seed,
      {"in_proj.weight", "conv1d.weight", "conv1d.bias", "dt_bias", "A_log", "D", "norm.weight",
       "out_proj.weight"},
      1e-3);
}

TEST(Mamba2, InitialisationFollowsTheReference) {
  Mamba2Config cfg;
  cfg.width = 64, cfg.headdim = 8;  // 16 heads
  Rng rng(3);
  const Mamba2Params<double> p = Mamba2Params<double>::init(cfg, 0.02, rng);
  for (int h = 0; h < cfg.heads(); ++h) {
    const double dt = std::log1p(std::exp(p.dt_bias(h)));  // softplus(dt_bias) is the initial dt
    EXPECT_GE(dt, 0.001 - 1e-12);
    EXPECT_LE(dt, 0.1 + 1e-12);
    EXPECT_GE(std::exp(p.A_log(h)), 1.0);
    EXPECT_LE(std::exp(p.A_log(h)), 16.0);
    EXPECT_EQ(p.D(h), 1.0);
  }
  EXPECT_EQ(p.norm_w, RowVec<double>::Ones(cfg.d_inner()));
  EXPECT_LE(p.conv_w.cwiseAbs().maxCoeff(), 0.5);  // U(±1/√K), K = 4
  EXPECT_EQ(p.in_proj.cols(), 2 * 128 + 2 * 16 + 16);
}

TEST(Mamba2, BadConfigurationsAreClearErrors) {
  auto error_of = [](const auto& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  Mamba2Config bad = small_layer_config();
  bad.headdim = 7;
  EXPECT_NE(error_of([&] { bad.validate(); }).find("headdim (7) must divide d_inner"), std::string::npos);
  ModelConfig c = testing::tiny_model({.seq_layer = SeqLayerKind::Mamba2, .mamba = true});
  c.mamba2_headdim = 8;
  EXPECT_NE(error_of([&] { c.validate(); }).find("Transformer backbone (t)"), std::string::npos);
  c.mamba_backbone = false;
  EXPECT_NO_THROW(c.validate());
  c.mamba2_headdim = 5;
  EXPECT_NE(error_of([&] { c.validate(); }).find("tttlab_mamba2_headdim (5) must divide"), std::string::npos);
  c.mamba2_headdim = 8;
  c.mamba2_d_state = 0;
  EXPECT_NE(error_of([&] { c.validate(); }).find("tttlab_mamba2_d_state must be positive"), std::string::npos);
  EXPECT_NE(error_of([] { seq_layer_from_string("mamba"); }).find("softmax-attention, mamba2, "), std::string::npos);
  EXPECT_EQ(seq_layer_from_string("mamba2"), SeqLayerKind::Mamba2);
}

ModelConfig mamba2_model(int layers = 2) {
  ModelConfig c = testing::tiny_model(
      {.hidden = 16, .layers = layers, .intermediate = 32, .seq_layer = SeqLayerKind::Mamba2, .mamba = false});
  c.mamba2_d_state = 8;
  c.mamba2_headdim = 8;  // d_inner 32: 4 heads
  c.mamba2_chunk_size = 8;
  return c;
}

TEST(Mamba2, ConfigJsonRoundTripsTheLayerAndItsSizes) {
  ModelConfig c = mamba2_model();
  c.mamba2_d_conv = 3;
  c.mamba2_expand = 3;
  const ModelConfig back = ModelConfig::from_json(c.to_json());
  EXPECT_EQ(back.seq_layer, SeqLayerKind::Mamba2);
  EXPECT_FALSE(back.mamba_backbone);
  EXPECT_EQ(back.mamba2_d_state, 8);
  EXPECT_EQ(back.mamba2_d_conv, 3);
  EXPECT_EQ(back.mamba2_expand, 3);
  EXPECT_EQ(back.mamba2_headdim, 8);
  EXPECT_EQ(back.mamba2_chunk_size, 8);
  EXPECT_EQ(back.to_json(), c.to_json());
}

TEST(Mamba2, ModelParameterCountAndCheckpointLayoutFollowTheConfig) {
  const ModelConfig c = mamba2_model();
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
  // The reference's state_dict shapes: nn.Linear [out, in], Conv1d [channels, 1, K], per-head vectors.
  auto shape_of = [&](const std::string& n) {
    for (const auto& t : sd)
      if (t.name == "model.layers.1.seq_modeling_block." + n) return t.shape;
    return std::vector<std::int64_t>{};
  };
  using Shape = std::vector<std::int64_t>;
  EXPECT_EQ(shape_of("in_proj.weight"), (Shape{2 * 32 + 2 * 8 + 4, 16}));
  EXPECT_EQ(shape_of("conv1d.weight"), (Shape{32 + 2 * 8, 1, 4}));
  EXPECT_EQ(shape_of("conv1d.bias"), (Shape{48}));
  EXPECT_EQ(shape_of("A_log"), (Shape{4}));
  EXPECT_EQ(shape_of("dt_bias"), (Shape{4}));
  EXPECT_EQ(shape_of("D"), (Shape{4}));
  EXPECT_EQ(shape_of("norm.weight"), (Shape{32}));
  EXPECT_EQ(shape_of("out_proj.weight"), (Shape{16, 32}));
  EXPECT_GT(estimate_memory(c, MemoryUse{}), 0u);
}

std::vector<int> m2_random_tokens(int n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<int> t(n);
  for (int& v : t) v = static_cast<int>(rng.below(256));
  return t;
}

// Through the whole model: sampled parameters of both blocks against central differences (the
// layer's own test checks every entry), the training loss equal to the streaming evaluation's.
TEST(Mamba2, ModelGradientMatchesFiniteDifferences) {
  const std::uint64_t seed = announce(31);
  ModelConfig c = mamba2_model();
  c.initializer_range = 0.3;
  Model<double> model(c, seed);
  auto grads = model.zeros_like();
  const std::vector<int> tokens = m2_random_tokens(20, seed + 1);  // T = 19: a short last chunk
  const CrossEntropyStats st = model.train_sequence(tokens, {}, 19, *grads);
  EXPECT_NEAR(st.loss_sum, model.eval_sequence(tokens, {}).loss_sum, 1e-10);
  auto loss = [&] { return model.eval_sequence(tokens, {}).loss_sum / 19.0; };
  std::vector<std::pair<std::string, Eigen::Map<Mat<double>>>> gs, ps;
  grads->for_each_param([&](Eigen::Map<Mat<double>> m, const std::string& n) { gs.emplace_back(n, m); });
  model.for_each_param([&](Eigen::Map<Mat<double>> m, const std::string& n) { ps.emplace_back(n, m); });
  ASSERT_EQ(gs.size(), ps.size());
  Rng pick(seed + 2);
  int checked = 0;
  for (size_t k = 0; k < ps.size(); ++k) {
    if (ps[k].first.find("seq_modeling_block") == std::string::npos) continue;
    for (int r = 0; r < 3; ++r) {
      const Eigen::Index i = static_cast<Eigen::Index>(pick.below(ps[k].second.size()));
      const double fd = test::central_difference(ps[k].second.data()[i], loss);
      EXPECT_NEAR(gs[k].second.data()[i], fd, 1e-6 * std::max(1.0, std::abs(fd))) << ps[k].first << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * 8 * 3);
}

TEST(Mamba2, DecodingTokenByTokenGivesTheWholeForwardsLogits) {
  const std::uint64_t seed = announce(11);
  const Model<float> model(mamba2_model(), seed);
  const std::vector<int> tokens = m2_random_tokens(21, seed);
  auto whole_stream = model.start();
  const Mat<float> whole = model.forward(*whole_stream, tokens);
  const auto dec = make_cpu_decoder(model);
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    std::vector<float> got;
    dec->feed(std::span<const int>(tokens).subspan(t, 1), got);
    ASSERT_EQ(got.size(), 256u);
    for (Eigen::Index v = 0; v < 256; ++v)
      ASSERT_NEAR(got[static_cast<std::size_t>(v)], whole(static_cast<Eigen::Index>(t), v), 2e-5)
          << "token " << t << ", logit " << v;
  }
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tttlab_test_mamba2_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(Mamba2, CheckpointSaveAndLoadGiveIdenticalOutputs) {
  const fs::path dir = temp_dir("ckpt");
  const ModelConfig c = mamba2_model();
  Model<float> m(c, 5);
  save_model_safetensors(m, dir / "model.safetensors");
  Model<float> other(c, 6);
  load_model_safetensors(other, dir / "model.safetensors");
  const std::vector<int> tokens = m2_random_tokens(17, 8);
  auto s1 = m.start(), s2 = other.start();
  EXPECT_EQ(m.forward(*s1, tokens), other.forward(*s2, tokens));
  fs::remove_all(dir);
}

// A tiny two-block model on the word corpus: the loss falls well below chance in 30 steps, and a run
// saved after 10 steps and resumed continues the same loss curve exactly.
TEST(Mamba2, TrainingLossFallsAndAResumedRunContinuesExactly) {
  const fs::path dir = temp_dir("train");
  TrainConfig cfg = testing::tiny_train_config(testing::write_word_corpus(dir, 6000),
                                               {.steps = 30, .batch = 4, .seq_len = 32, .seed = 7, .threads = 2,
                                                .eval_windows = 8},
                                               {.hidden = 32, .layers = 2, .intermediate = 64,
                                                .seq_layer = SeqLayerKind::Mamba2, .mamba = false});
  cfg.model.mamba2_d_state = 16;
  cfg.model.mamba2_headdim = 16;
  cfg.model.mamba2_chunk_size = 8;
  std::vector<double> straight;
  double before = 0;
  {
    Trainer t(cfg, TextData::load(cfg));
    before = t.evaluate(8).loss;
    while (!t.finished()) {
      straight.push_back(t.step().loss);
      ASSERT_TRUE(std::isfinite(straight.back()));
      if (straight.size() == 10) t.save(dir / "run");
    }
    EXPECT_NEAR(before, std::log(256.0), 0.3);
    EXPECT_LT(t.evaluate(8).loss, before - 1.5);
  }
  auto resumed = Trainer::resume(dir / "run");
  EXPECT_EQ(resumed->config().model.seq_layer, SeqLayerKind::Mamba2);
  std::vector<double> rest;
  while (!resumed->finished()) rest.push_back(resumed->step().loss);
  EXPECT_EQ(rest, std::vector<double>(straight.begin() + 10, straight.end()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tttlab
