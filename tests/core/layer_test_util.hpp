// The checks every sequence layer of the fast-weight family passes (DeltaNet, Gated DeltaNet, Titans,
// LaCT: tests/core/test_*_layer.cpp), written once: the layer's manual backward against central
// differences for every parameter and the input, its training form against token-by-token decoding and
// a streamed prefill, a float copy tracking the double layer, and the layer inside a model — the
// checkpoint layout, the model's gradient, greedy decoding, save and load, training and an exact
// resume. Each layer's file supplies its configurations, its random parameters and what is its own.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/nn/grad_check.hpp"
#include "core/tiny_run.hpp"
#include "core/word_corpus.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/decoder.hpp"
#include "tttlab/model/memory.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/seq/sequence_layer.hpp"
#include "tttlab/train/trainer.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab::layer_test {
namespace fs = std::filesystem;

// Prints the seed so that a failure can be replayed.
inline std::uint64_t announce(std::uint64_t seed) {
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

inline Mat<double> random_mat(Eigen::Index r, Eigen::Index c, Rng& rng) {
  Mat<double> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = rng.normal();
  return m;
}

inline std::vector<int> random_tokens(int n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<int> t(n);
  for (int& v : t) v = static_cast<int>(rng.below(256));
  return t;
}

inline fs::path temp_dir(const std::string& layer, const std::string& name) {
  fs::path d = fs::temp_directory_path() /
               ("tttlab_test_" + layer + "_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The message of the std::invalid_argument that f throws ("" if none).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

// Every entry of every parameter and of the input against central differences of ⟨W, y⟩, y from
// forward_train over T tokens; the parameters are visited under the names `want`, and each carries a
// gradient (some entry above min_gradient in magnitude).
inline void expect_backward_matches_finite_differences(SequenceLayer<double>& layer, int T,
                                                       std::uint64_t seed,
                                                       const std::vector<std::string>& want,
                                                       double min_gradient = 1e-4) {
  const int D = layer.width();
  Rng rng(seed + 1);
  Mat<double> x = random_mat(T, D, rng);
  const Mat<double> W = random_mat(T, D, rng);
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
  EXPECT_EQ(names, want);
  ASSERT_EQ(gs.size(), ps.size());
  for (size_t k = 0; k < gs.size(); ++k) {
    const double s = std::max(1.0, gs[k].cwiseAbs().maxCoeff());
    EXPECT_GT(gs[k].cwiseAbs().maxCoeff(), min_gradient) << names[k] << " carries no gradient to check";
    for (Eigen::Index i = 0; i < ps[k].size(); ++i)
      EXPECT_NEAR(gs[k].data()[i], fd(ps[k].data()[i]), 1e-7 * s) << names[k] << "[" << i << "]";
  }
}

// The training form (forward_train) against the streaming form one token at a time (decoding) and
// in pieces of 5, 13 and T − 18 tokens (prefill continuing the carried state), both within 1e-12 of
// the output's scale. T ≥ 19. Returns forward_train's output.
inline Mat<double> expect_streaming_equals_training(const SequenceLayer<double>& layer,
                                                    const Mat<double>& x, const std::string& name) {
  const Eigen::Index T = x.rows(), D = x.cols();
  Mat<double> y_train;
  layer.forward_train(x, y_train);
  const double scale = y_train.cwiseAbs().maxCoeff();
  EXPECT_GT(scale, 1e-3);
  auto st = layer.start();
  Mat<double> y_dec(T, D);
  for (Eigen::Index t = 0; t < T; ++t) y_dec.row(t) = layer.forward(*st, x.middleRows(t, 1));
  EXPECT_EQ(st->tokens, T);
  const double err = (y_dec - y_train).cwiseAbs().maxCoeff() / scale;
  std::printf("[   INFO   ] %s: max |decode − train| / max |y| = %.3g\n", name.c_str(), err);
  EXPECT_LE(err, 1e-12);
  auto pre = layer.start();
  Mat<double> y_pre(T, D);
  for (auto [a, n] : {std::pair<Eigen::Index, Eigen::Index>{0, 5}, {5, 13}, {18, T - 18}})
    y_pre.middleRows(a, n) = layer.forward(*pre, x.middleRows(a, n));
  const double err_pre = (y_pre - y_train).cwiseAbs().maxCoeff() / scale;
  std::printf("[   INFO   ] %s: max |prefill in pieces − train| / max |y| = %.3g\n", name.c_str(),
              err_pre);
  EXPECT_LE(err_pre, 1e-12);
  return y_train;
}

// A float layer with the double layer's parameters (visited in the same order), and its training
// output's largest deviation from y64, relative to y64's scale.
template <class LayerF>
double float_copy_deviation(SequenceLayer<double>& layer, LayerF& lf, const Mat<double>& x,
                            const Mat<double>& y64) {
  std::vector<Eigen::Map<Mat<double>>> pd;
  layer.for_each_param([&](Eigen::Map<Mat<double>> m, const std::string&) { pd.push_back(m); });
  std::size_t k = 0;
  lf.for_each_param(
      [&](Eigen::Map<Mat<float>> m, const std::string&) { m = pd.at(k++).template cast<float>(); });
  EXPECT_EQ(k, pd.size());
  Mat<float> yf;
  lf.forward_train(x.cast<float>(), yf);
  return (yf.cast<double>() - y64).cwiseAbs().maxCoeff() / y64.cwiseAbs().maxCoeff();
}

// ---- inside a model ------------------------------------------------------------------------------

// config.json round trip, the parameter count, and the checkpoint's tensors in the layout
// checkpoint_tensor_shapes gives. Returns the state dict (lm_head left out) for the layer's own
// shape checks.
inline std::vector<NamedTensor> expect_checkpoint_layout_follows_config(const ModelConfig& c) {
  const ModelConfig back = ModelConfig::from_json(c.to_json());
  EXPECT_EQ(back.seq_layer, c.seq_layer);
  EXPECT_EQ(back.mamba_backbone, c.mamba_backbone);
  EXPECT_EQ(back.to_json(), c.to_json());
  Model<float> m(c, 1);
  EXPECT_EQ(static_cast<long>(count_params(c)), m.num_params());
  std::vector<NamedTensor> sd = state_dict(m);
  std::erase_if(sd, [](const NamedTensor& t) { return t.name == "lm_head.weight"; });
  const std::vector<TensorShape> want = checkpoint_tensor_shapes(c);
  EXPECT_EQ(want.size(), sd.size());
  for (std::size_t i = 0; i < std::min(sd.size(), want.size()); ++i) {
    EXPECT_EQ(want[i].name, sd[i].name);
    EXPECT_EQ(want[i].shape, sd[i].shape) << sd[i].name;
  }
  EXPECT_GT(estimate_memory(c, MemoryUse{}), 0u);
  return sd;
}

// The shape of model.layers.<layer>.seq_modeling_block.<n> in `sd` (empty if absent).
inline std::vector<std::int64_t> block_tensor_shape(const std::vector<NamedTensor>& sd,
                                                    const std::string& n, int layer = 1) {
  for (const auto& t : sd)
    if (t.name == "model.layers." + std::to_string(layer) + ".seq_modeling_block." + n)
      return t.shape;
  return {};
}

// Through the whole model (T = tokens − 1): three sampled entries of every mixer parameter against
// central differences, and the training loss equal to the streaming evaluation's. `mixer_tensors` is
// the number of the mixers' tensors per block.
inline void expect_model_gradient_matches_finite_differences(ModelConfig c, std::uint64_t seed,
                                                             int tokens_n, int mixer_tensors) {
  c.initializer_range = 0.3;
  Model<double> model(c, seed);
  auto grads = model.zeros_like();
  const std::vector<int> tokens = random_tokens(tokens_n, seed + 1);
  const int T = tokens_n - 1;
  const CrossEntropyStats st = model.train_sequence(tokens, {}, T, *grads);
  EXPECT_NEAR(st.loss_sum, model.eval_sequence(tokens, {}).loss_sum, 1e-10);
  auto loss = [&] { return model.eval_sequence(tokens, {}).loss_sum / double(T); };
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
  EXPECT_EQ(checked, c.num_hidden_layers * mixer_tensors * 3);
}

// Greedy decoding from the CPU engine, one token at a time, is reproducible and picks the argmax of
// the whole forward's logits at every position (the whole forward fed the greedy bytes).
inline void expect_greedy_decoding_is_the_whole_forwards_argmax(ModelConfig c, std::uint64_t seed) {
  c.initializer_range = 0.2;
  const Model<float> model(c, seed);
  const std::vector<int> prompt = random_tokens(6, seed);
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

// Save and load give bitwise the same evaluation; a model of `other` refuses the file with a message
// containing `why_other`.
inline void expect_checkpoint_round_trip(const ModelConfig& c, const ModelConfig& other,
                                         const std::string& why_other, const std::string& layer) {
  const fs::path dir = temp_dir(layer, "ckpt");
  Model<float> m(c, 5);
  save_model_safetensors(m, dir / "model.safetensors");
  Model<float> fresh(c, 6);
  const std::vector<int> tokens = random_tokens(30, 8);
  EXPECT_NE(m.eval_sequence(tokens, {}).loss_sum, fresh.eval_sequence(tokens, {}).loss_sum);
  load_model_safetensors(fresh, dir / "model.safetensors");
  EXPECT_EQ(m.eval_sequence(tokens, {}).loss_sum, fresh.eval_sequence(tokens, {}).loss_sum);
  auto s1 = m.start(), s2 = fresh.start();
  EXPECT_EQ(m.forward(*s1, tokens), fresh.forward(*s2, tokens));
  Model<float> wrong(other, 7);
  std::string why;
  try {
    load_model_safetensors(wrong, dir / "model.safetensors");
  } catch (const std::exception& e) {
    why = e.what();
  }
  EXPECT_NE(why.find(why_other), std::string::npos) << why;
  fs::remove_all(dir);
}

// A tiny model (`model`, with `edit` applied) on the word corpus: the loss falls well below chance
// in 30 steps, and a run saved after 10 steps and resumed continues the same loss curve exactly.
inline void expect_training_falls_and_resumes_exactly(const testing::TinyModel& model,
                                                      const std::function<void(ModelConfig&)>& edit,
                                                      const std::string& layer) {
  const fs::path dir = temp_dir(layer, "train");
  TrainConfig cfg = testing::tiny_train_config(
      testing::write_word_corpus(dir, 6000),
      {.steps = 30, .batch = 4, .seq_len = 32, .seed = 7, .threads = 2, .eval_windows = 8}, model);
  edit(cfg.model);
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
  std::printf("[   INFO   ] %s: eval loss %.3f -> %.3f nats after 30 steps\n", layer.c_str(),
              before, after);
  EXPECT_NEAR(before, std::log(256.0), 0.3);
  EXPECT_LT(after, before - 1.5);
  auto resumed = Trainer::resume(dir / "run");
  EXPECT_EQ(resumed->config().model.seq_layer, model.seq_layer);
  std::vector<double> rest;
  while (!resumed->finished()) rest.push_back(resumed->step().loss);
  EXPECT_EQ(rest, std::vector<double>(straight.begin() + 10, straight.end()));
  fs::remove_all(dir);
}

}  // namespace tttlab::layer_test
