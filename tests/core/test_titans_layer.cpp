// Titans as a layer (tttlab/seq/titans_layer.hpp, docs/MATH.md §11.9): the manual backward against
// central differences for every parameter and the input, the chunked (training) form against
// token-by-token decoding, and the layer inside a model: config.json, the parameter count and
// checkpoint layout, save and load, training and an exact resume, greedy decoding, and the refusals of
// bad configurations.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/nn/grad_check.hpp"
#include "core/tiny_run.hpp"
#include "core/word_corpus.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/decoder.hpp"
#include "tttlab/model/memory.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/seq/titans_layer.hpp"
#include "tttlab/train/trainer.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {
namespace fs = std::filesystem;
namespace {

// Prints the seed so that a failure can be replayed.
std::uint64_t titans_announce(std::uint64_t seed) {
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

Mat<double> titans_random_mat(Eigen::Index r, Eigen::Index c, Rng& rng) {
  Mat<double> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = rng.normal();
  return m;
}

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

// Every entry of every parameter and of the input against central differences of ⟨W, y⟩, y from the
// chunked form (forward_train). T = 11 with mini-batches of 4: two full ones and a short one.
TEST(TitansLayer, BackwardMatchesFiniteDifferencesForEveryParameterAndTheInput) {
  const std::uint64_t seed = titans_announce(6161);
  TitansLayer<double> layer = titans_random_layer(titans_config(8, 2, 3, 4), seed);
  Rng rng(seed + 1);
  const int T = 11;
  Mat<double> x = titans_random_mat(T, 8, rng);
  const Mat<double> W = titans_random_mat(T, 8, rng);
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
  const std::vector<std::string> want{"q_proj.weight",     "k_proj.weight",   "v_proj.weight",
                                      "q_conv1d.weight",   "k_conv1d.weight", "v_conv1d.weight",
                                      "theta_proj.weight", "theta_proj.bias", "alpha_proj.weight",
                                      "alpha_proj.bias",   "eta_proj.weight", "eta_proj.bias",
                                      "ttt_norm.weight",   "ttt_norm.bias",   "o_norm.weight",
                                      "g_proj.weight",     "o_proj.weight"};
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
// streamed prefill in pieces: T = 37 with mini-batches of 8 (not a multiple), relative to the output's
// scale.
TEST(TitansLayer, ChunkedTrainingFormEqualsTokenByTokenDecodingInFp64) {
  const std::uint64_t seed = titans_announce(779);
  const TitansLayer<double> layer = titans_random_layer(titans_config(12, 3, 4, 8), seed);
  Rng rng(seed + 1);
  const int T = 37;
  const Mat<double> x = titans_random_mat(T, 12, rng);
  Mat<double> y_train;
  layer.forward_train(x, y_train);
  const double scale = y_train.cwiseAbs().maxCoeff();
  ASSERT_GT(scale, 1e-3);
  auto st = layer.start();
  Mat<double> y_dec(T, 12);
  for (int t = 0; t < T; ++t) y_dec.row(t) = layer.forward(*st, x.middleRows(t, 1));
  EXPECT_EQ(st->tokens, T);
  const double err = (y_dec - y_train).cwiseAbs().maxCoeff() / scale;
  std::printf("[   INFO   ] titans: max |decode − train| / max |y| = %.3g\n", err);
  EXPECT_LE(err, 1e-12);
  // Prefill in pieces of 5, 13 and 19 tokens (the chunked form continuing the carried state, which
  // ends inside a mini-batch).
  auto pre = layer.start();
  Mat<double> y_pre(T, 12);
  for (auto [a, n] : {std::pair{0, 5}, {5, 13}, {18, 19}})
    y_pre.middleRows(a, n) = layer.forward(*pre, x.middleRows(a, n));
  EXPECT_LE((y_pre - y_train).cwiseAbs().maxCoeff() / scale, 1e-12);
  // The float layer tracks the double one.
  TitansParams<float> pf;
  const TitansParams<double>& pd = layer.params();
  pf.q_proj = pd.q_proj.cast<float>(), pf.k_proj = pd.k_proj.cast<float>();
  pf.v_proj = pd.v_proj.cast<float>(), pf.q_conv = pd.q_conv.cast<float>();
  pf.k_conv = pd.k_conv.cast<float>(), pf.v_conv = pd.v_conv.cast<float>();
  pf.theta_proj = pd.theta_proj.cast<float>(), pf.alpha_proj = pd.alpha_proj.cast<float>();
  pf.eta_proj = pd.eta_proj.cast<float>(), pf.theta_bias = pd.theta_bias.cast<float>();
  pf.alpha_bias = pd.alpha_bias.cast<float>(), pf.eta_bias = pd.eta_bias.cast<float>();
  pf.ln_weight = pd.ln_weight.cast<float>(), pf.ln_bias = pd.ln_bias.cast<float>();
  pf.o_norm = pd.o_norm.cast<float>(), pf.g_proj = pd.g_proj.cast<float>();
  pf.o_proj = pd.o_proj.cast<float>();
  const TitansLayer<float> lf(layer.config(), pf);
  Mat<float> yf;
  lf.forward_train(x.cast<float>(), yf);
  const double e32 = (yf.cast<double>() - y_train).cwiseAbs().maxCoeff() / scale;
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

std::string titans_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

TEST(TitansLayer, BadConfigurationsAreClearErrors) {
  TitansLayerConfig bad = titans_config(12, 5, 4, 8);
  EXPECT_NE(titans_error_of([&] { bad.validate(); }).find("heads (5) must divide width (12)"),
            std::string::npos);
  bad = titans_config(12, 3, 0, 8);
  EXPECT_NE(titans_error_of([&] { bad.validate(); }).find("conv_kernel must be positive"),
            std::string::npos);
  bad = titans_config(12, 3, 4, 0);
  EXPECT_NE(titans_error_of([&] { bad.validate(); }).find("mini_batch must be positive"),
            std::string::npos);
  bad = titans_config(12, 3, 4, 8);
  bad.ln_eps = 0;
  EXPECT_NE(titans_error_of([&] { bad.validate(); }).find("ln_eps must be positive and finite"),
            std::string::npos);
  // Parameters of another shape are refused with their name and shape.
  Rng rng(1);
  const TitansParams<double> p = TitansParams<double>::init(titans_config(12, 3, 4, 8), 0.02, rng);
  EXPECT_NE(titans_error_of([&] {
              TitansLayer<double>(titans_config(12, 4, 4, 8), p);
            }).find("theta_proj.weight must be [12, 4]"),
            std::string::npos);
  ModelConfig c = testing::tiny_model({.seq_layer = SeqLayerKind::Titans, .mamba = true});
  EXPECT_NE(titans_error_of([&] { c.validate(); }).find("uses the Transformer backbone (t)"),
            std::string::npos);
  c.mamba_backbone = false;
  EXPECT_NO_THROW(c.validate());
  c.num_attention_heads = 3;
  EXPECT_NE(titans_error_of([&] {
              c.validate();
            }).find("num_attention_heads (3) must divide hidden_size (16)"),
            std::string::npos);
  EXPECT_NE(
      titans_error_of([] { seq_layer_from_string("titan"); }).find("gated-deltanet or titans"),
      std::string::npos);
  EXPECT_EQ(seq_layer_from_string("titans"), SeqLayerKind::Titans);
  EXPECT_NE(gpu_kernels_missing(SeqLayerKind::Titans).find("titans has no GPU kernels"),
            std::string::npos);
}

// ---- inside a model ------------------------------------------------------------------------------

ModelConfig titans_model(int layers = 2) {
  ModelConfig c = testing::tiny_model({.hidden = 16,
                                       .heads = 2,
                                       .layers = layers,
                                       .intermediate = 32,
                                       .seq_layer = SeqLayerKind::Titans,
                                       .mamba = false});
  c.mini_batch_size = 8;
  return c;
}

std::vector<int> titans_random_tokens(int n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<int> t(n);
  for (int& v : t) v = static_cast<int>(rng.below(256));
  return t;
}

fs::path titans_temp_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("tttlab_test_titans_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(TitansModel, ConfigJsonParameterCountAndCheckpointLayoutFollowTheConfig) {
  ModelConfig c = titans_model();
  c.mini_batch_size = 5;
  c.conv_kernel = 3;
  const ModelConfig back = ModelConfig::from_json(c.to_json());
  EXPECT_EQ(back.seq_layer, SeqLayerKind::Titans);
  EXPECT_FALSE(back.mamba_backbone);
  EXPECT_EQ(back.mini_batch_size, 5);
  EXPECT_EQ(back.to_json(), c.to_json());
  EXPECT_EQ(c.titans_config().mini_batch, 5);
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
  auto shape_of = [&](const std::string& n) {
    for (const auto& t : sd)
      if (t.name == "model.layers.1.seq_modeling_block." + n) return t.shape;
    return std::vector<std::int64_t>{};
  };
  using Shape = std::vector<std::int64_t>;
  EXPECT_EQ(shape_of("q_proj.weight"), (Shape{16, 16}));
  EXPECT_EQ(shape_of("theta_proj.weight"), (Shape{2, 16}));
  EXPECT_EQ(shape_of("eta_proj.bias"), (Shape{2}));
  EXPECT_EQ(shape_of("k_conv1d.weight"), (Shape{16, 1, 3}));
  EXPECT_EQ(shape_of("ttt_norm.weight"), (Shape{2, 8}));
  EXPECT_EQ(shape_of("o_norm.weight"), (Shape{8}));
  EXPECT_GT(estimate_memory(c, MemoryUse{}), 0u);
  // One head: the memory's LayerNorm [1, d] is stored as [d], in the config's layout and the model's.
  c.num_attention_heads = 1;
  Model<float> one(c, 1);
  std::vector<NamedTensor> sd1 = state_dict(one);
  std::erase_if(sd1, [](const NamedTensor& t) { return t.name == "lm_head.weight"; });
  const std::vector<TensorShape> want1 = checkpoint_tensor_shapes(c);
  ASSERT_EQ(want1.size(), sd1.size());
  for (std::size_t i = 0; i < sd1.size(); ++i)
    EXPECT_EQ(want1[i].shape, sd1[i].shape) << sd1[i].name;
}

// Through the whole model: sampled parameters of the mixers against central differences, the
// training loss equal to the streaming evaluation's.
TEST(TitansModel, ModelGradientMatchesFiniteDifferences) {
  const std::uint64_t seed = titans_announce(33);
  ModelConfig c = titans_model();
  c.initializer_range = 0.3;
  Model<double> model(c, seed);
  auto grads = model.zeros_like();
  const std::vector<int> tokens = titans_random_tokens(20, seed + 1);  // T = 19: a short last one
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
  EXPECT_EQ(checked, 2 * 17 * 3);
}

// Greedy decoding from the CPU engine, one token at a time, is reproducible and picks the argmax of
// the whole forward's logits at every position (the whole forward fed the greedy bytes).
TEST(TitansModel, GreedyDecodingIsReproducibleAndTheWholeForwardsArgmax) {
  const std::uint64_t seed = titans_announce(13);
  ModelConfig c = titans_model();
  c.initializer_range = 0.2;
  const Model<float> model(c, seed);
  const std::vector<int> prompt = titans_random_tokens(6, seed);
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

TEST(TitansModel, CheckpointSaveAndLoadGiveBitwiseTheSameEvalLoss) {
  const fs::path dir = titans_temp_dir("ckpt");
  const ModelConfig c = titans_model();
  Model<float> m(c, 5);
  save_model_safetensors(m, dir / "model.safetensors");
  Model<float> other(c, 6);
  const std::vector<int> tokens = titans_random_tokens(30, 8);
  EXPECT_NE(m.eval_sequence(tokens, {}).loss_sum, other.eval_sequence(tokens, {}).loss_sum);
  load_model_safetensors(other, dir / "model.safetensors");
  EXPECT_EQ(m.eval_sequence(tokens, {}).loss_sum, other.eval_sequence(tokens, {}).loss_sum);
  auto s1 = m.start(), s2 = other.start();
  EXPECT_EQ(m.forward(*s1, tokens), other.forward(*s2, tokens));
  // A DeltaNet model refuses the file, naming a tensor it does not expect.
  ModelConfig dc = c;
  dc.seq_layer = SeqLayerKind::DeltaNet;
  Model<float> wrong(dc, 7);
  std::string why;
  try {
    load_model_safetensors(wrong, dir / "model.safetensors");
  } catch (const std::exception& e) {
    why = e.what();
  }
  EXPECT_NE(why.find("model.layers.0.seq_modeling_block."), std::string::npos) << why;
  fs::remove_all(dir);
}

// A tiny two-block model on the word corpus: the loss falls well below chance in 30 steps, and a run
// saved after 10 steps and resumed continues the same loss curve exactly.
TEST(TitansModel, TrainingLossFallsAndAResumedRunContinuesExactly) {
  const fs::path dir = titans_temp_dir("train");
  TrainConfig cfg = testing::tiny_train_config(
      testing::write_word_corpus(dir, 6000),
      {.steps = 30, .batch = 4, .seq_len = 32, .seed = 7, .threads = 2, .eval_windows = 8},
      {.hidden = 32,
       .layers = 2,
       .intermediate = 64,
       .seq_layer = SeqLayerKind::Titans,
       .mamba = false});
  cfg.model.mini_batch_size = 8;
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
  std::printf("[   INFO   ] titans: eval loss %.3f -> %.3f nats after 30 steps\n", before, after);
  EXPECT_NEAR(before, std::log(256.0), 0.3);
  EXPECT_LT(after, before - 1.5);
  auto resumed = Trainer::resume(dir / "run");
  EXPECT_EQ(resumed->config().model.seq_layer, SeqLayerKind::Titans);
  std::vector<double> rest;
  while (!resumed->finished()) rest.push_back(resumed->step().loss);
  EXPECT_EQ(rest, std::vector<double>(straight.begin() + 10, straight.end()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tttlab
