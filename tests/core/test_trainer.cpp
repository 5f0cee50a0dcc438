// The training engine: the loss falls on learnable text, runs are deterministic, a resumed run
// continues the same loss curve bit for bit, checkpoints round-trip and bad checkpoints are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/tiny_run.hpp"
#include "core/word_corpus.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab {
namespace fs = std::filesystem;
namespace {

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tttlab_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

fs::path trainer_corpus(const fs::path& dir) { return testing::write_word_corpus(dir, 6000); }

TrainConfig small_config(const fs::path& corpus, SeqLayerKind kind = SeqLayerKind::TTTLinear) {
  testing::TinyModel model = testing::kSmallModel;
  model.seq_layer = kind;
  return testing::tiny_train_config(
      corpus, {.steps = 30, .batch = 4, .seq_len = 32, .seed = 7, .threads = 2, .eval_windows = 8}, model);
}

TEST(Trainer, LossFallsOnLearnableText) {
  const fs::path dir = temp_dir("falls");
  const TrainConfig cfg = small_config(trainer_corpus(dir));
  Trainer t(cfg, TextData::load(cfg));
  const double before = t.evaluate(8).loss;
  while (!t.finished()) {
    const StepReport r = t.step();
    ASSERT_TRUE(std::isfinite(r.loss));
  }
  const EvalReport after = t.evaluate(8);
  // ln 256 = 5.55 nats at random; a few dozen steps on this 9-word text get far below that.
  EXPECT_NEAR(before, std::log(256.0), 0.3);
  EXPECT_LT(after.loss, before - 1.5);
  EXPECT_NEAR(after.bpb, after.loss / std::log(2.0), 1e-12);
  EXPECT_EQ(after.loss_by_position.size(), 32u);
  fs::remove_all(dir);
}

// δ frozen (eta_token_index_learnable = false): after AdamW steps with weight decay, every layer's δ
// is still exactly 0 while the rest of the model has trained (the loss falls, the η gate moved); the
// learnable model's δ moves from the same start.
TEST(Trainer, FrozenTokenIndexStaysZeroWhileTheRestTrains) {
  const fs::path dir = temp_dir("frozen_delta");
  const fs::path corpus = trainer_corpus(dir);
  auto params = [](Model<float>& m, const std::string& part) {
    std::vector<float> v;
    m.for_each_param([&](Eigen::Map<Mat<float>> p, const std::string& n) {
      if (n.find(part) != std::string::npos) v.insert(v.end(), p.data(), p.data() + p.size());
    });
    return v;
  };
  for (const bool learnable : {false, true}) {
    TrainConfig cfg = small_config(corpus);  // seed 7
    cfg.model.eta_token_index_learnable = learnable;
    cfg.steps = 20;
    cfg.weight_decay = 0.1;  // the decay must not move δ either
    Trainer t(cfg, TextData::load(cfg));
    const std::vector<float> gate0 = params(t.model(), "learnable_ttt_lr_weight");
    ASSERT_FALSE(gate0.empty());
    const double before = t.evaluate(8).loss;
    while (!t.finished()) t.step();
    t.sync_to_host();
    const std::vector<float> delta = params(t.model(), "learnable_token_idx");
    ASSERT_EQ(delta.size(), size_t(cfg.model.num_hidden_layers * cfg.model.mini_batch_size));
    float max_delta = 0;
    for (float x : delta) max_delta = std::max(max_delta, std::abs(x));
    if (learnable)
      EXPECT_GT(max_delta, 0.f) << "the learnable δ should train";
    else
      EXPECT_EQ(max_delta, 0.f) << "the frozen δ moved";
    EXPECT_NE(params(t.model(), "learnable_ttt_lr_weight"), gate0) << "learnable " << learnable;
    EXPECT_LT(t.evaluate(8).loss, before - 0.5) << "learnable " << learnable;
  }
  fs::remove_all(dir);
}

TEST(Trainer, FixedViewsKeepTheirInitialValuesExactlyWhileTheRestTrains) {
  // The fixed-task variant: θ_K, θ_V, θ_Q and the Q/K convolutions stay at their initialisation bit
  // for bit (they are left out of the optimiser, so weight decay does not shrink them either), and the
  // model still learns through everything else. With learned views (the control) they move.
  const fs::path dir = temp_dir("fixed_views");
  const fs::path corpus = trainer_corpus(dir);
  auto views = [](Model<float>& m) {
    std::vector<float> v;
    m.for_each_param([&](Eigen::Map<Mat<float>> p, const std::string& n) {
      if (!m.config().trains(n)) v.insert(v.end(), p.data(), p.data() + p.size());
    });
    return v;
  };
  for (const bool learnable : {false, true}) {
    TrainConfig cfg = small_config(corpus);  // seed 7, Mamba backbone: q_proj, v_proj, conv_q, conv_k
    cfg.model.learnable_views = false;       // names the view parameters for views() below
    Trainer probe(cfg, TextData::load(cfg));
    const std::vector<float> before_views = views(probe.model());
    // 2 blocks × (q_proj D² + v_proj D² + conv_q/conv_k (D·K + D) each) with D = 32, K = 4.
    ASSERT_EQ(before_views.size(), size_t(2 * (2 * 32 * 32 + 2 * (32 * 4 + 32))));
    cfg.model.learnable_views = learnable;
    cfg.steps = 20;
    cfg.weight_decay = 0.1;
    Trainer t(cfg, TextData::load(cfg));
    const double before = t.evaluate(8).loss;
    while (!t.finished()) t.step();
    t.sync_to_host();
    ModelConfig names = t.model().config();
    names.learnable_views = false;
    std::vector<float> after_views;
    t.model().for_each_param([&](Eigen::Map<Mat<float>> p, const std::string& n) {
      if (!names.trains(n)) after_views.insert(after_views.end(), p.data(), p.data() + p.size());
    });
    if (learnable)
      EXPECT_NE(after_views, before_views) << "learned views should train";
    else
      EXPECT_EQ(after_views, before_views) << "a fixed view moved";
    EXPECT_LT(t.evaluate(8).loss, before - 0.5) << "learnable views " << learnable;
  }
  // The flag round-trips through config.json, and only TTT layers have it.
  ModelConfig c;
  c.learnable_views = false;
  EXPECT_FALSE(ModelConfig::from_json(c.to_json()).learnable_views);
  c.seq_layer = SeqLayerKind::SoftmaxAttention;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  fs::remove_all(dir);
}

TEST(Trainer, ResumeContinuesTheSameCurveExactly) {
  const fs::path dir = temp_dir("resume");
  TrainConfig cfg = small_config(trainer_corpus(dir));
  cfg.steps = 8;
  // Uninterrupted.
  std::vector<double> straight;
  {
    Trainer t(cfg, TextData::load(cfg));
    while (!t.finished()) straight.push_back(t.step().loss);
  }
  // Stopped after 3 steps, saved, resumed from disk.
  const fs::path run = dir / "run";
  std::vector<double> resumed;
  {
    Trainer t(cfg, TextData::load(cfg));
    for (int i = 0; i < 3; ++i) resumed.push_back(t.step().loss);
    t.save(run);
  }
  auto t2 = Trainer::resume(run);
  EXPECT_EQ(t2->steps_done(), 3);
  while (!t2->finished()) resumed.push_back(t2->step().loss);
  ASSERT_EQ(resumed.size(), straight.size());
  for (size_t i = 0; i < straight.size(); ++i) EXPECT_EQ(resumed[i], straight[i]) << "step " << i + 1;
  fs::remove_all(dir);
}

TEST(Trainer, SameSeedSameThreadsIsDeterministic) {
  const fs::path dir = temp_dir("det");
  TrainConfig cfg = small_config(trainer_corpus(dir), SeqLayerKind::TTTMLP);
  cfg.steps = 3;
  cfg.model.ttt_base_lr = 0.1;
  std::vector<double> a, b;
  {
    Trainer t(cfg, TextData::load(cfg));
    while (!t.finished()) a.push_back(t.step().loss);
  }
  {
    Trainer t(cfg, TextData::load(cfg));
    while (!t.finished()) b.push_back(t.step().loss);
  }
  EXPECT_EQ(a, b);
  fs::remove_all(dir);
}

TEST(Trainer, SyntheticTasksTrainAndResumeExactly) {
  for (const char* task : {"mqar", "copy"}) {
    const fs::path dir = temp_dir(std::string("synth_") + task);
    TrainConfig cfg = small_config(dir / "unused.txt");
    cfg.data = task;
    cfg.steps = 6;
    cfg.seq_len = 32;
    std::vector<double> straight;
    {
      Trainer t(cfg, TextData::load(cfg));
      EXPECT_NE(t.data().description.find(task == std::string("mqar") ? "MQAR" : "copying"), std::string::npos);
      while (!t.finished()) straight.push_back(t.step().loss);
      const EvalReport ev = t.evaluate(16);
      EXPECT_GT(ev.targets, 0);
      EXPECT_GE(ev.accuracy, 0.0);
      EXPECT_LE(ev.accuracy, 1.0);
    }
    std::vector<double> resumed;
    {
      Trainer t(cfg, TextData::load(cfg));
      for (int i = 0; i < 2; ++i) resumed.push_back(t.step().loss);
      t.save(dir / "run");
    }
    auto t2 = Trainer::resume(dir / "run");
    while (!t2->finished()) resumed.push_back(t2->step().loss);
    EXPECT_EQ(resumed, straight) << task;
    fs::remove_all(dir);
  }
}

TEST(Checkpoint, RoundTripAndOfficialLayout) {
  ModelConfig mc;
  mc.hidden_size = 16;
  mc.num_attention_heads = 2;
  mc.num_hidden_layers = 2;
  mc.intermediate_size = 24;
  mc.seq_layer = SeqLayerKind::TTTMLP;
  Model<float> m(mc, 3);
  const auto sd = state_dict(m);
  auto find = [&](const std::string& n) -> const NamedTensor& {
    for (const auto& t : sd)
      if (t.name == n) return t;
    throw std::runtime_error("missing " + n);
  };
  const std::string L = "model.layers.1.seq_modeling_block.";
  EXPECT_EQ(find(L + "W1").shape, (std::vector<std::int64_t>{2, 8, 32}));
  EXPECT_EQ(find(L + "b1").shape, (std::vector<std::int64_t>{2, 1, 32}));
  EXPECT_EQ(find(L + "W2").shape, (std::vector<std::int64_t>{2, 32, 8}));
  EXPECT_EQ(find(L + "learnable_ttt_lr_weight").shape, (std::vector<std::int64_t>{2, 1, 16}));
  EXPECT_EQ(find(L + "learnable_ttt_lr_bias").shape, (std::vector<std::int64_t>{2, 1}));
  EXPECT_EQ(find(L + "conv_q.weight").shape, (std::vector<std::int64_t>{16, 1, 4}));
  EXPECT_EQ(find(L + "ttt_norm_weight").shape, (std::vector<std::int64_t>{2, 8}));
  EXPECT_EQ(find("model.layers.0.mlp.down_proj.weight").shape, (std::vector<std::int64_t>{16, 24}));
  EXPECT_EQ(find("lm_head.weight").data, find("model.embed_tokens.weight").data);
  // nn.Linear weights are stored [out, in]: element [o, i] of q_proj is our wq(i, o).
  const auto& q = find(L + "q_proj.weight");
  float wq_01 = 0;
  m.for_each_param([&](Eigen::Map<Mat<float>> p, const std::string& n) {
    if (n == L + "q_proj.weight") wq_01 = p(0, 1);
  });
  EXPECT_EQ(q.data[1 * 16 + 0], wq_01);

  const fs::path dir = temp_dir("ckpt");
  save_model_safetensors(m, dir / "model.safetensors");
  Model<float> m2(mc, 99);
  load_model_safetensors(m2, dir / "model.safetensors");
  const auto sd2 = state_dict(m2);
  ASSERT_EQ(sd2.size(), sd.size());
  for (size_t i = 0; i < sd.size(); ++i) EXPECT_EQ(sd2[i].data, sd[i].data) << sd[i].name;

  // Truncated: refused with a message, never a crash.
  const auto bytes = read_file_bytes(dir / "model.safetensors");
  write_file_atomic(dir / "cut.safetensors", std::span<const std::uint8_t>(bytes.data(), bytes.size() / 2));
  EXPECT_ANY_THROW(load_model_safetensors(m2, dir / "cut.safetensors"));
  // Another model's weights: refused naming the tensor.
  ModelConfig other = mc;
  other.hidden_size = 32;
  Model<float> m3(other, 1);
  try {
    load_model_safetensors(m3, dir / "model.safetensors");
    FAIL() << "a checkpoint of another shape must be refused";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("shape"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(Checkpoint, MissingOrCorruptRunDirectoryIsAClearError) {
  const fs::path dir = temp_dir("badrun");
  EXPECT_THROW(resolve_checkpoint(dir / "nope"), std::runtime_error);
  EXPECT_THROW(resolve_checkpoint(dir), std::runtime_error);
  write_file_atomic(dir / "latest", "step-0000100\n");
  EXPECT_THROW(resolve_checkpoint(dir), std::runtime_error);
  fs::remove_all(dir);
}

// Config files are user data: a bad one is refused with one line naming the file and the field.
TEST(TrainConfig, JsonErrorsNameTheFileAndTheField) {
  const auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    ADD_FAILURE() << "accepted";
    return {};
  };
  EXPECT_EQ(message([] { ModelConfig::from_json(R"({"hidden_size": "big"})"); }),
            "model config: config.json: field 'hidden_size' must be an integer");
  EXPECT_EQ(message([] { ModelConfig::from_json(R"({"hidden_size": 64,})", "runs/a/config.json"); })
                .rfind("model config: runs/a/config.json: JSON parse error at byte ", 0),
            0u);
  const std::string good = small_config("x.txt").to_json();
  EXPECT_EQ(TrainConfig::from_json(good).to_json(), good);  // round trip
  std::string bad = good;
  bad.replace(bad.find("\"seed\": 7"), 9, "\"seed\": -7");
  EXPECT_EQ(message([&] { TrainConfig::from_json(bad); }),
            "training config: train_config.json: field 'seed' must be a non-negative integer");
  std::string deep = "{\"model\": " + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_NE(message([&] { TrainConfig::from_json(deep); }).find("nested deeper than 64 levels"), std::string::npos);
}

}  // namespace
}  // namespace tttlab
