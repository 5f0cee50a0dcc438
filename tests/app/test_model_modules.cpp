// The engine modules that run language models (the shipped tiny-brown checkpoint, random models, and
// models trained here), checked against the core's own computations: the stepper against the model's
// observed forward pass, the primal/dual comparison per layer, the hidden-state evolution, the inner-
// loss curves, evaluation, the mini-batch sweep, generation and training (start, pause, resume, stop,
// checkpoints, reopening a run).
#include <gtest/gtest.h>

#include <Eigen/SVD>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "lab/inner_curves/curves_module.hpp"
#include "lab/inner_curves/curves_settings.hpp"
#include "lab/features.hpp"
#include "lab/engine/data_source.hpp"
#include "app/engine_wait.hpp"
#include "lab/engine/engine.hpp"
#include "lab/evaluation/evaluation_module.hpp"
#include "lab/evolution/evolution_module.hpp"
#include "lab/generation/generation_module.hpp"
#include "lab/engine/head_inputs.hpp"
#include "lab/models/library_module.hpp"
#include "lab/minibatch/minibatch_module.hpp"
#include "lab/models/model_library.hpp"
#include "lab/primal_dual/primal_dual_module.hpp"
#include "lab/engine/resources.hpp"
#include "lab/engine/series.hpp"
#include "lab/inner_stepper/stepper_module.hpp"
#include "lab/training/training_module.hpp"
#include "lab/training/training_settings.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/data/batches.hpp"
#include "tttlab/train/metrics.hpp"
#include "tttlab/ttt/layer.hpp"

namespace tttlab::lab {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// One engine with the given modules sharing one library.
template <class... M>
std::unique_ptr<Engine> engine_with(std::shared_ptr<ModelLibrary> lib) {
  std::vector<std::unique_ptr<EngineModule>> mods;
  (mods.push_back(std::make_unique<M>(lib)), ...);
  auto e = std::make_unique<Engine>(std::move(mods));
  e->start();
  return e;
}

std::shared_ptr<ModelLibrary> library() {
  static auto lib = std::make_shared<ModelLibrary>();
  return lib;
}

using testing::wait_for;

// ---- library and resources -------------------------------------------------------------------------

TEST(ModelLibrary, FindsAndLoadsTheShippedModel) {
  std::string looked;
  ASSERT_TRUE(find_resource(kShippedModelPath, &looked)) << looked;
  const auto m = library()->get(kShippedModelId);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.seq_layer, SeqLayerKind::TTTLinear);
  EXPECT_TRUE(c.mamba_backbone);
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.head_dim(), 32);
  EXPECT_EQ(c.mini_batch_size, 16);
  const auto v = library()->view();
  const ModelInfo* info = v->find(kShippedModelId);
  ASSERT_NE(info, nullptr);
  EXPECT_TRUE(info->loaded && info->trained);
  EXPECT_NE(info->summary().find("4 blocks × 4 heads, d = 32, b = 16"), std::string::npos) << info->summary();
  EXPECT_EQ(library()->get(kShippedModelId).get(), m.get()) << "loaded once, then shared";
}

TEST(ModelLibrary, RefusesUnknownIdsAndBadFoldersWithAMessage) {
  ModelLibrary lib;
  try {
    lib.get("nonsense");
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model 'nonsense'"), std::string::npos) << e.what();
  }
  try {
    lib.open_checkpoint("/no/such/folder");
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/folder"), std::string::npos) << e.what();
  }
  EXPECT_EQ(lib.view()->find("file:/no/such/folder"), nullptr) << "a failed open leaves no entry";
  EXPECT_THROW(lib.get("random:ttt-gru:m:0"), std::runtime_error);
  const auto mlp = lib.get(random_model_id("ttt-mlp", true, 3));
  EXPECT_EQ(mlp->config().seq_layer, SeqLayerKind::TTTMLP);
  EXPECT_DOUBLE_EQ(mlp->config().ttt_base_lr, 0.1);
}

TEST(ModelLibrary, DerivedModelsKeepTheWeightsAndResizeTheTokenOffsets) {
  const auto m = library()->get(kShippedModelId);
  const std::vector<int> tokens = {84, 104, 101, 32, 99, 97, 116, 32, 115, 97, 116, 32, 111, 110, 32, 116, 104, 101, 32, 109};
  // Same b: exactly the same function.
  ModelOverrides same;
  same.mini_batch = 16;
  const auto m16 = library()->get(kShippedModelId, same);
  EXPECT_NE(m16.get(), m.get());
  EXPECT_EQ(m16->eval_sequence(tokens, {}).loss_sum, m->eval_sequence(tokens, {}).loss_sum);
  // Another b: same weights, δ cut to the new b.
  ModelOverrides eight;
  eight.mini_batch = 8;
  const auto m8 = derive_model(*m, eight);
  EXPECT_EQ(m8->config().mini_batch_size, 8);
  const auto& l16 = dynamic_cast<const TTTLayer<float>&>(m->mixer(2));
  const auto& l8 = dynamic_cast<const TTTLayer<float>&>(m8->mixer(2));
  EXPECT_EQ(l8.params().wq, l16.params().wq);
  EXPECT_EQ(l8.params().token_idx_offset, l16.params().token_idx_offset.head(8));
  EXPECT_NE(m8->eval_sequence(tokens, {}).loss_sum, m->eval_sequence(tokens, {}).loss_sum);
}

TEST(DataSource, SampleTextLoadsAndBadFilesAreNamed) {
  const auto d = load_data("sample", 64);
  EXPECT_GT(d->train.size(), 1000u);
  EXPECT_GT(d->val.size(), 65u);
  try {
    load_data("/no/such/text.txt", 64);
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/text.txt"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_data("sample", 1 << 20), std::runtime_error);  // too short for such windows
}

TEST(SeriesTest, PublishedCopiesNeverChangeAndShareFullChunks) {
  SeriesBuilder<int> b;
  for (int i = 0; i < 1000; ++i) b.push_back(i);
  const auto a = b.publish();
  for (int i = 1000; i < 1300; ++i) b.push_back(i);
  const auto c = b.publish();
  ASSERT_EQ(a->size(), 1000u);
  ASSERT_EQ(c->size(), 1300u);
  for (std::size_t i = 0; i < a->size(); ++i) ASSERT_EQ((*a)[i], static_cast<int>(i));
  for (std::size_t i = 0; i < c->size(); ++i) ASSERT_EQ((*c)[i], static_cast<int>(i));
  EXPECT_EQ(&(*a)[0], &(*c)[0]) << "the full first chunk is shared, not copied";
  EXPECT_NE(&(*a)[600], &(*c)[600]) << "the partial chunk was copied when published";
}

// ---- the stepper and the primal/dual comparison on the trained model ---------------------------------

HeadConfig model_head(int block, int head, const std::string& text) {
  HeadConfig c;
  c.source = HeadSource::Model;
  c.model_id = kShippedModelId;
  c.block = block;
  c.head = head;
  c.text = text;
  return c;
}

TEST(StepperOnTheModel, MatchesTheModelsOwnObservedForwardPass) {
  const std::string text = "Every evening the keeper climbed the stairs of the old lighthouse.";
  const int block = 2, head = 1;
  auto e = engine_with<StepperModule>(library());
  e->post(StepperConfigure{model_head(block, head, text), static_cast<long>(text.size()) - 1});
  ASSERT_TRUE(e->wait_quiescent(60s));
  const auto v = e->snapshot()->stepper;
  ASSERT_TRUE(v->error.empty()) << v->error;
  ASSERT_EQ(v->computed(), static_cast<long>(text.size()));
  EXPECT_EQ(v->d, 32);
  EXPECT_EQ(v->mini_batch(), 16);
  EXPECT_NE(v->description.find("block 2 · head 1"), std::string::npos) << v->description;

  // The reference: the model itself, streaming the text in the primal form with its block observer.
  const auto m = library()->get(kShippedModelId);
  auto stream = m->start();
  std::vector<int> tokens(text.begin(), text.end());
  std::vector<double> before, after, initial;
  m->forward(*stream, tokens, [&](int b, int h, const InnerStepRecord<float>& r) {
    if (b != block || h != head) return;
    before.push_back(r.loss_before);
    after.push_back(r.loss_after);
    initial.push_back(r.loss_initial);
  });
  ASSERT_EQ(before.size(), text.size());
  for (std::size_t t = 0; t < text.size(); ++t) {
    const TokenRecord& r = *v->records[t];
    // The stepper runs in double on the model's float inputs: agreement to float rounding.
    EXPECT_NEAR(r.loss_before, before[t], 1e-3 * std::max(1.0, before[t])) << "token " << t;
    EXPECT_NEAR(r.loss_after, after[t], 1e-3 * std::max(1.0, after[t])) << "token " << t;
    EXPECT_NEAR(r.loss_initial, initial[t], 1e-3 * std::max(1.0, initial[t])) << "token " << t;
  }
}

TEST(StepperOnTheModel, ReportsBlocksAndHeadsThatDoNotExist) {
  auto e = engine_with<StepperModule>(library());
  e->post(StepperConfigure{model_head(7, 0, "abc"), 0});
  ASSERT_TRUE(e->wait_quiescent(30s));
  EXPECT_NE(e->snapshot()->stepper->error.find("block 7 does not exist"), std::string::npos)
      << e->snapshot()->stepper->error;
  e->post(StepperConfigure{model_head(0, 9, "abc"), 0});
  ASSERT_TRUE(e->wait_quiescent(30s));
  EXPECT_NE(e->snapshot()->stepper->error.find("head 9 does not exist"), std::string::npos);
}

TEST(PrimalDualOnTheModel, EveryLayerAgreesAndReducesToLinearAttention) {
  auto e = engine_with<PrimalDualModule>(library());
  PrimalDualConfig c;
  c.head = model_head(3, 2, "The quick brown fox jumps over the lazy dog, and the dog sleeps on.");
  c.timing_reps = 2;
  e->post(PrimalDualRun{c});
  ASSERT_TRUE(e->wait_quiescent(60s));
  auto v = e->snapshot()->primal_dual;
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  ASSERT_EQ(v->layers.size(), 4u);
  for (const auto& L : v->layers) {
    EXPECT_EQ(L.heads, 4);
    EXPECT_GT(L.max_abs_output, 0.1);
    EXPECT_LT(L.max_abs_diff, 1e-12 * L.max_abs_output) << "block " << L.block;
    EXPECT_GT(L.primal_ms, 0.0);
    EXPECT_GT(L.dual_ms, 0.0);
  }
  EXPECT_EQ(v->shown_block, 3);
  EXPECT_EQ(v->shown_head, 2);
  EXPECT_EQ(v->mini_batch, 16);
  EXPECT_EQ(v->attention.at(20, 15), 0.0f) << "token 20 is in the second mini-batch: no direct term from 15";

  c.linear_attention = true;
  e->post(PrimalDualRun{c});
  ASSERT_TRUE(e->wait_quiescent(60s));
  v = e->snapshot()->primal_dual;
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  EXPECT_EQ(v->mini_batch, static_cast<int>(c.head.tokens()));
  for (const auto& L : v->layers) {
    EXPECT_GT(L.linear_attention_scale, 0.1);
    EXPECT_LT(L.linear_attention_diff, 1e-12 * L.linear_attention_scale) << "block " << L.block;
  }
  EXPECT_NE(v->attention.at(40, 3), 0.0f) << "one mini-batch: every earlier token contributes";
}

// ---- hidden-state evolution ------------------------------------------------------------------------

TEST(Evolution, TracksWtWithItsDriftAndSpectrum) {
  const std::string text = "one two three four five six seven eight nine ten one two three";
  HeadConfig c = model_head(1, 3, text);
  auto e = engine_with<EvolutionModule>(library());
  e->post(EvolutionConfigure{c});
  ASSERT_TRUE(e->wait_quiescent(60s));
  const auto v = e->snapshot()->evolution;
  ASSERT_TRUE(v->error.empty()) << v->error;
  ASSERT_EQ(static_cast<std::size_t>(v->tokens()), text.size());
  ASSERT_EQ(v->steps.size(), text.size());
  EXPECT_TRUE(v->done);
  const HeadInputs<double> h = build_head_inputs<double>(c, *library());
  for (std::size_t t = 0; t < v->steps.size(); ++t) {
    const EvolutionStep& s = *v->steps[t];
    const Mat<double> w = s.w1.cast<double>();
    EXPECT_NEAR(s.drift1, (w - h.w0.W1).norm(), 1e-5 * std::max(1.0, s.drift1));
    // σ of W_t against an independent SVD; σ of W_t − W_0: the sum of t + 1 rank-1 terms.
    Eigen::JacobiSVD<Eigen::MatrixXd> svd(w);
    EXPECT_NEAR(s.sv1[0], svd.singularValues()(0), 1e-5);
    long rank = 0;
    for (float x : s.dsv1) rank += x > 1e-6f * s.dsv1[0];
    EXPECT_LE(rank, static_cast<long>(t) + 1) << "token " << t;
  }
  EXPECT_GT(v->steps.back()->drift1, v->steps.front()->drift1);
}

TEST(Evolution, RunsTTTMLPModelsToo) {
  HeadConfig c = model_head(0, 0, "abcabcabcabcabcabc");
  c.model_id = random_model_id("ttt-mlp", true, 0);
  auto e = engine_with<EvolutionModule>(library());
  e->post(EvolutionConfigure{c});
  ASSERT_TRUE(e->wait_quiescent(60s));
  const auto v = e->snapshot()->evolution;
  ASSERT_TRUE(v->error.empty()) << v->error;
  EXPECT_TRUE(v->mlp);
  ASSERT_EQ(v->steps.size(), 18u);
  EXPECT_EQ(v->steps[5]->w1.cols(), 4 * v->d);
  EXPECT_EQ(v->steps[5]->w2.rows(), 4 * v->d);
  EXPECT_EQ(v->steps[5]->sv2.size(), static_cast<std::size_t>(v->d));
  EXPECT_GT(v->steps[17]->drift2, 0.0);
}

// ---- inner-loss curves, evaluation, mini-batch sweep ---------------------------------------------------

TEST(InnerCurves, TheTrainedStateLearnsAtTestTime) {
  auto e = engine_with<CurvesModule>(library());
  CurvesSettings s;
  s.data = "sample";
  s.seq_len = 64;
  s.sequences = 3;
  e->post(CurvesRun{s});
  ASSERT_TRUE(e->wait_quiescent(120s));
  const auto v = e->snapshot()->curves;
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  EXPECT_EQ(v->sequences_done, 3);
  ASSERT_EQ(v->l0.size(), 4u);
  for (int b = 0; b < 4; ++b) {
    const auto mean = [](const std::vector<double>& x, std::size_t from) {
      double sum = 0;
      for (std::size_t i = from; i < x.size(); ++i) sum += x[i];
      return sum / static_cast<double>(x.size() - from);
    };
    const auto& l0 = v->l0[static_cast<std::size_t>(b)];
    const auto& lb = v->lb[static_cast<std::size_t>(b)];
    const auto& la = v->la[static_cast<std::size_t>(b)];
    ASSERT_EQ(l0.size(), 64u);
    EXPECT_LT(mean(la, 0), mean(lb, 0)) << "a gradient step lowers the loss it was taken on, block " << b;
    EXPECT_LT(mean(lb, 32), mean(l0, 32)) << "the state has learned from the context, block " << b;
  }
}

TEST(EvaluationModuleTest, TheTrainedModelBeatsAnUntrainedOne) {
  auto e = engine_with<EvaluationModule>(library());
  EvalSettings s;
  s.models = {kShippedModelId, random_model_id("ttt-linear", true, 0), "nonsense"};
  s.data = "sample";
  s.seq_len = 64;
  s.windows = 3;
  e->post(EvaluationRun{s});
  ASSERT_TRUE(e->wait_quiescent(120s));
  const auto v = e->snapshot()->evaluation;
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  ASSERT_EQ(v->curves.size(), 3u);
  const EvalCurve& trained = v->curves[0];
  const EvalCurve& random = v->curves[1];
  EXPECT_EQ(trained.windows_done, 3);
  EXPECT_EQ(trained.loss_by_position.size(), 64u);
  EXPECT_LT(trained.bpb, 4.0);
  EXPECT_NEAR(random.bpb, 8.0, 0.3) << "an untrained model guesses nearly uniformly over 256 bytes";
  EXPECT_NE(v->curves[2].error.find("unknown model"), std::string::npos) << "a bad model fails alone";

  // The same numbers as Model::eval_sequence on the same windows.
  const auto data = load_data("sample", 64);
  SequentialWindows w(std::span<const std::uint8_t>(data->val), 1, 64, 3);
  double sum = 0;
  long n = 0;
  for (long i = 0; i < 3; ++i) {
    const TokenBatch batch = w.batch_at(i);
    const auto row = batch.row(0);
    const auto st = library()->get(kShippedModelId)->eval_sequence(std::vector<int>(row.begin(), row.end()), {});
    sum += st.loss_sum;
    n += st.counted;
  }
  EXPECT_NEAR(trained.loss, sum / static_cast<double>(n), 1e-12);
}

TEST(MiniBatchSweep, EvaluatesEveryPowerOfTwoUpToT) {
  EXPECT_EQ(sweep_mini_batches(12), (std::vector<int>{1, 2, 4, 8, 12}));
  EXPECT_EQ(sweep_mini_batches(16), (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(sweep_mini_batches(1), (std::vector<int>{1}));
  auto e = engine_with<MiniBatchModule>(library());
  SweepSettings s;
  s.data = "sample";
  s.seq_len = 32;
  s.windows = 2;
  e->post(SweepRun{s, false});
  ASSERT_TRUE(e->wait_quiescent(120s));
  auto v = e->snapshot()->minibatch;
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  ASSERT_TRUE(v->current && v->current->complete);
  ASSERT_EQ(v->current->points.size(), 6u);
  EXPECT_FALSE(v->previous) << "no ghost before the second sweep";
  // b = 16 is the model's own b: exactly the unmodified model's loss.
  const SweepPoint& p16 = v->current->points[4];
  ASSERT_EQ(p16.b, 16);
  const auto data = load_data("sample", 32);
  SequentialWindows w(std::span<const std::uint8_t>(data->val), 1, 32, 2);
  double sum = 0;
  long n = 0;
  for (long i = 0; i < 2; ++i) {
    const TokenBatch batch = w.batch_at(i);
    const auto row = batch.row(0);
    const auto st = library()->get(kShippedModelId)->eval_sequence(std::vector<int>(row.begin(), row.end()), {});
    sum += st.loss_sum;
    n += st.counted;
  }
  EXPECT_NEAR(p16.loss, sum / static_cast<double>(n), 1e-12);
  for (const auto& p : v->current->points) {
    EXPECT_GT(p.ms_per_forward, 0.0);
    EXPECT_EQ(p.windows_done, 2);
  }
  // A second sweep keeps the first as the ghost.
  s.seq_len = 16;
  e->post(SweepRun{s, false});
  ASSERT_TRUE(e->wait_quiescent(120s));
  v = e->snapshot()->minibatch;
  ASSERT_TRUE(v->previous);
  EXPECT_EQ(v->previous->settings.seq_len, 32);
  EXPECT_EQ(v->current->points.size(), 5u);

  // Queued after the current sweep (how a state file restores its ghost): both complete, in order.
  SweepSettings a = s, b = s;
  a.seq_len = 8;
  b.seq_len = 4;
  e->post(SweepRun{a, false});
  e->post(SweepRun{b, true});
  ASSERT_TRUE(e->wait_quiescent(120s));
  v = e->snapshot()->minibatch;
  ASSERT_TRUE(v->current && v->previous);
  EXPECT_EQ(v->current->settings.seq_len, 4);
  EXPECT_TRUE(v->current->complete);
  EXPECT_EQ(v->previous->settings.seq_len, 8);
  EXPECT_TRUE(v->previous->complete) << "the first sweep was not cancelled by the queued one";
}

TEST(MiniBatchSweep, TrainModeTrainsOneSmallModelPerB) {
  auto e = engine_with<MiniBatchModule>(library());
  SweepSettings s;
  s.mode = SweepMode::Train;
  s.data = "sample";
  s.seq_len = 8;
  s.windows = 1;
  s.train_steps = 3;
  e->post(SweepRun{s, false});
  ASSERT_TRUE(e->wait_quiescent(120s));
  const auto v = e->snapshot()->minibatch;
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  ASSERT_EQ(v->current->points.size(), 4u);  // b = 1, 2, 4, 8
  for (const auto& p : v->current->points) {
    EXPECT_EQ(p.train_loss.size(), 3u) << "b = " << p.b;
    EXPECT_EQ(p.windows_done, 1);
    EXPECT_TRUE(std::isfinite(p.loss));
  }
  // Same seed and batches: every model starts from the same weights, so the first losses are close (b
  // changes only how the inner loop groups its updates within the forward pass).
  EXPECT_NEAR(v->current->points[0].train_loss[0], v->current->points[3].train_loss[0], 0.5);
}

// ---- generation --------------------------------------------------------------------------------------

TEST(Sampling, GreedyTopKAndTheDistribution) {
  RowVec<float> logits = RowVec<float>::Zero(256);
  logits(65) = 5.0f;
  logits(66) = 4.0f;
  logits(67) = 1.0f;
  Rng rng(1);
  std::vector<std::pair<unsigned char, float>> probs;
  float chosen = 0;
  EXPECT_EQ(sample_byte(logits, 0.0, 0, rng, &probs, &chosen), 65);
  EXPECT_FLOAT_EQ(chosen, 1.0f);
  EXPECT_EQ(sample_byte(logits, 5.0, 1, rng), 65) << "top-1 is greedy at any temperature";
  sample_byte(logits, 1.0, 0, rng, &probs);
  ASSERT_EQ(probs.size(), 10u);
  EXPECT_EQ(probs[0].first, 65);
  EXPECT_EQ(probs[1].first, 66);
  EXPECT_NEAR(probs[0].second / probs[1].second, std::exp(1.0), 1e-4);
  // Top-2: only 65 and 66 are ever drawn, in the ratio e : 1.
  int a = 0, b = 0;
  for (int i = 0; i < 4000; ++i) {
    const int x = sample_byte(logits, 1.0, 2, rng);
    ASSERT_TRUE(x == 65 || x == 66);
    (x == 65 ? a : b)++;
  }
  EXPECT_NEAR(static_cast<double>(a) / (a + b), std::exp(1.0) / (1.0 + std::exp(1.0)), 0.03);
}

TEST(GenerationModuleTest, DecodesByteByByteWithEachBytesUpdate) {
  auto e = engine_with<GenerationModule>(library());
  GenSettings s;
  s.prompt = "The man";
  s.max_tokens = 12;
  s.tokens_per_second = 1e6;
  s.seed = 5;
  e->post(GenerateStart{s});
  const auto snap = wait_for(*e, [](const Snapshot& x) {
    return x.generation && !x.generation->running && !x.generation->tokens.empty();
  });
  const auto& v = *snap->generation;
  ASSERT_TRUE(v.error.empty()) << v.error;
  ASSERT_EQ(v.tokens.size(), 7u + 12u);
  EXPECT_TRUE(v.tokens[6]->prompt);
  EXPECT_FALSE(v.tokens[7]->prompt);
  EXPECT_EQ(v.blocks * v.heads, 16);

  // The reference: the same stream and sampler outside the engine.
  const auto m = library()->get(kShippedModelId);
  auto stream = m->start();
  Rng rng(5);
  std::vector<float> dw_norm;  // block 1, head 2 of every byte
  const auto obs = [&](int b, int h, const InnerStepRecord<float>& r) {
    if (b == 1 && h == 2) dw_norm.push_back((r.w_after->W1 - r.w_before->W1).norm());
  };
  std::vector<int> prompt(s.prompt.begin(), s.prompt.end());
  Mat<float> logits = m->forward(*stream, prompt, obs);
  std::string text = s.prompt;
  for (int i = 0; i < 12; ++i) {
    const int next = sample_byte(logits.row(logits.rows() - 1), s.temperature, s.top_k, rng);
    text += static_cast<char>(next);
    logits = m->forward(*stream, std::vector<int>{next}, obs);
  }
  std::string got;
  for (const auto& t : v.tokens) got += static_cast<char>(t->byte);
  EXPECT_EQ(got, text);
  ASSERT_EQ(dw_norm.size(), v.tokens.size());
  for (std::size_t i = 0; i < v.tokens.size(); ++i) {
    EXPECT_NEAR(v.tokens[i]->dw_norm[1 * 4 + 2], dw_norm[i], 1e-6f) << "byte " << i;
    EXPECT_NEAR(v.tokens[i]->dw[6].norm(), dw_norm[i], 1e-5f);
  }
  EXPECT_GT(v.tokens[10]->prob, 0.0f);
  EXPECT_FALSE(v.tokens[10]->top.empty());
}

// ---- training ------------------------------------------------------------------------------------------

const RunView* run_named(const Snapshot& s, const std::string& name) {
  if (!s.training) return nullptr;
  for (const auto& r : s.training->runs)
    if (r->name == name) return r.get();
  return nullptr;
}

TrainSettings small_run(const fs::path& dir, long steps) {
  TrainSettings t;
  t.data = "sample";
  t.steps = steps;
  t.batch_size = 2;
  t.seq_len = 32;
  t.eval_every = 2;
  t.eval_windows = 2;
  t.threads = 1;
  t.runs_dir = dir.string();
  return t;
}

TEST(Training, ARunFinishesWithMetricsAndACheckpointOtherPanelsCanUse) {
  const fs::path dir = fs::temp_directory_path() / "tttlab_gui_train_test_a";
  fs::remove_all(dir);
  auto lib = std::make_shared<ModelLibrary>();
  auto e = engine_with<TrainingModule, LibraryModule>(lib);
  e->post(TrainStart{small_run(dir, 4), "first"});
  const auto s = wait_for(*e, [](const Snapshot& x) {
    const RunView* r = run_named(x, "first");
    return r && (r->state == RunState::Finished || r->state == RunState::Failed);
  });
  const RunView* r = run_named(*s, "first");
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->state, RunState::Finished) << r->message;
  EXPECT_EQ(r->steps_done, 4);
  ASSERT_TRUE(r->steps);
  ASSERT_EQ(r->steps->size(), 4u);
  EXPECT_EQ((*r->steps)[3].step, 4);
  EXPECT_GT((*r->steps)[0].loss, 4.0) << "an untrained byte model starts near ln 256 ≈ 5.5 nats";
  ASSERT_GE(r->evals.size(), 2u);
  EXPECT_EQ(r->evals.back().step, 4);
  EXPECT_FALSE(r->checkpoint.empty());
  EXPECT_TRUE(fs::exists(fs::path(r->checkpoint) / "model.safetensors"));
  ASSERT_FALSE(r->model_id.empty());
  const auto s2 = wait_for(*e, [&](const Snapshot& x) { return x.library && x.library->models->find(r->model_id); });
  EXPECT_TRUE(s2->library->models->find(r->model_id)->loaded);
  long lines = 0;
  std::ifstream in(dir / "first" / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) lines += line.find("\"loss\"") != std::string::npos;
  EXPECT_EQ(lines, 4);
  fs::remove_all(dir);
}

// Mamba-2 chosen in the Training panel trains, with the panel's default backbone "m" left as it is:
// the layer is a whole Mamba block, so the run puts it in the Transformer block rather than fail; its
// checkpoint reaches the library as a Mamba-2 model other panels can load.
TEST(Training, AMamba2RunTrainsInTheTransformerBlock) {
  const fs::path dir = fs::temp_directory_path() / "tttlab_gui_train_test_mamba2";
  fs::remove_all(dir);
  auto lib = std::make_shared<ModelLibrary>();
  auto e = engine_with<TrainingModule, LibraryModule>(lib);
  TrainSettings t = small_run(dir, 3);
  t.layer = "mamba2";
  t.mamba = true;
  e->post(TrainStart{t, "m2"});
  const auto s = wait_for(*e, [](const Snapshot& x) {
    const RunView* r = run_named(x, "m2");
    return r && (r->state == RunState::Finished || r->state == RunState::Failed);
  });
  const RunView* r = run_named(*s, "m2");
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->state, RunState::Finished) << r->message;
  EXPECT_EQ(r->steps_done, 3);
  ASSERT_FALSE(r->model_id.empty());
  const auto s2 = wait_for(*e, [&](const Snapshot& x) { return x.library && x.library->models->find(r->model_id); });
  const auto* m = s2->library->models->find(r->model_id);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->config.seq_layer, SeqLayerKind::Mamba2);
  EXPECT_FALSE(m->config.mamba_backbone);
  EXPECT_EQ(m->layer_name(), "Mamba-2");
  fs::remove_all(dir);
}

// "Checkpoint every" is a setting of the Training panel's state file: it reads back as written, an
// absent key keeps the app's default, and that default saves several checkpoints during the default run
// (views that follow a run need them to show anything before it ends).
TEST(Training, CheckpointEveryRoundTripsThroughTheStateFile) {
  const TrainingPanelSettings d = TrainingPanelSettings::defaults();
  EXPECT_GT(d.train.checkpoint_every, 0);
  EXPECT_GE(d.train.steps / d.train.checkpoint_every, 3) << "a few checkpoints before the default run ends";
  TrainingPanelSettings s = d;
  s.train.checkpoint_every = 7;
  const nlohmann::json j = s.to_json();
  EXPECT_EQ(j.at("settings").at("checkpoint_every"), 7);
  EXPECT_EQ(TrainingPanelSettings::from(FieldReader(j, "panels.training")).train.checkpoint_every, 7);
  nlohmann::json absent = j;
  absent["settings"].erase("checkpoint_every");
  EXPECT_EQ(TrainingPanelSettings::from(FieldReader(absent, "panels.training")).train.checkpoint_every,
            d.train.checkpoint_every);
  nlohmann::json bad = j;
  bad["settings"]["checkpoint_every"] = -1;
  EXPECT_THROW(TrainingPanelSettings::from(FieldReader(bad, "panels.training")), StateError);
}

// A run started with checkpoint every N saves at steps N, 2N, … and at its last step, and every one of
// those checkpoints reaches the model library as it is saved (on disk a run keeps its two newest).
TEST(Training, CheckpointEveryNSavesEveryNStepsAndAtTheEnd) {
  const fs::path dir = fs::temp_directory_path() / "tttlab_gui_train_test_ckpt";
  fs::remove_all(dir);
  auto lib = std::make_shared<ModelLibrary>();
  auto e = engine_with<TrainingModule, LibraryModule>(lib);
  TrainSettings t = small_run(dir, 7);
  t.eval_every = 0;
  t.checkpoint_every = 3;
  e->post(TrainStart{t, "ckpt"});
  const auto s = wait_for(*e, [](const Snapshot& x) {
    const RunView* r = run_named(x, "ckpt");
    return r && (r->state == RunState::Finished || r->state == RunState::Failed);
  });
  const RunView* r = run_named(*s, "ckpt");
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->state, RunState::Finished) << r->message;
  std::set<long> saved;
  for (const auto& d : fs::directory_iterator(dir / "ckpt"))
    if (const auto step = checkpoint_step_of(d.path().filename().string()))
      if (fs::exists(d.path() / "model.safetensors")) saved.insert(*step);
  EXPECT_EQ(saved, (std::set<long>{6, 7}));
  EXPECT_EQ(fs::path(r->checkpoint).filename().string(), checkpoint_name(7));
  // Each checkpoint is put under the run's id, raising its version: 0, 1, 2.
  const auto s2 = wait_for(*e, [&](const Snapshot& x) {
    const ModelInfo* m = x.library ? x.library->models->find(r->model_id) : nullptr;
    return m && m->step == 7;
  });
  const ModelInfo* m = s2->library->models->find(r->model_id);
  EXPECT_EQ(m->version, 2u) << "one put per checkpoint";
  fs::remove_all(dir);
}

// A lesson's scene that follows a training run trains it once: posted again (the lesson's next
// prediction, after the app's own request of the view), the curves of the run's last checkpoint come
// back with the measures of its first, and no second run starts. A scene with other run settings trains.
TEST(FollowTraining, ALessonSceneTrainsItsRunOnceAndAnswersAgainFromItsCheckpoints) {
  // The curves answer a lesson's TrainStart only if they see it before the training module does: the
  // app's engine lists them first (lab/features.cpp), as this test's engine does.
  std::size_t curves_at = features().size(), training_at = 0;
  for (std::size_t i = 0; i < features().size(); ++i) {
    if (std::string_view(features()[i].id) == kInnerCurvesId) curves_at = i;
    if (std::string_view(features()[i].id) == kTrainingId) training_at = i;
  }
  EXPECT_LT(curves_at, training_at);
  const fs::path dir = fs::temp_directory_path() / "tttlab_gui_train_test_lesson_once";
  fs::remove_all(dir);
  auto lib = std::make_shared<ModelLibrary>();
  auto e = engine_with<CurvesModule, TrainingModule, LibraryModule>(lib);
  TrainSettings t = small_run(dir, 6);
  t.eval_every = 0;
  t.checkpoint_every = 2;
  const nlohmann::json panels = {
      {"inner_curves", {{"model_id", "training"}, {"data", "sample"}, {"seq_len", 32}, {"sequences", 1}}},
      {"training", {{"settings", to_json(t)}}}};
  const auto post_scene = [&](const nlohmann::json& p) {
    const FieldReader r(p, "panels");
    for (Command& c : CurvesPanelSettings::scene(r.object("inner_curves"), r)) e->post(std::move(c));
  };
  const MeasureSet& measures = *find_feature(kInnerCurvesId)->measures;
  const auto measured = [&](std::uint64_t after) {
    return wait_for(*e, [&](const Snapshot& x) {
      return x.curves && x.curves->generation > after && measures.read(x).has_value();
    });
  };
  post_scene(panels);
  const auto s1 = measured(0);
  ASSERT_TRUE(s1 && s1->training && measures.read(*s1));
  ASSERT_EQ(s1->training->runs.size(), 1u);
  ASSERT_EQ(s1->training->runs[0]->state, RunState::Finished) << s1->training->runs[0]->message;
  const Measures m1 = *measures.read(*s1);
  EXPECT_EQ(m1.at("followed_step").value, 6);
  EXPECT_EQ(m1.at("first_checkpoint_step").value, 2);

  CurvesSettings plain;
  plain.model_id = "training";
  plain.data = "sample";
  plain.seq_len = 32;
  plain.sequences = 1;
  e->post(CurvesRun{plain});  // the app opens the scene: its view waits for the next run
  post_scene(panels);
  const auto s2 = measured(s1->curves->generation);
  ASSERT_TRUE(s2 && s2->training && measures.read(*s2));
  EXPECT_EQ(s2->training->runs.size(), 1u) << "the lesson's run is not trained again";
  const Measures m2 = *measures.read(*s2);
  for (const char* k : {"followed_step", "first_checkpoint_step", "reloads", "relative_gain",
                        "relative_gain_first_checkpoint", "relative_gain_change"})
    EXPECT_EQ(m2.at(k).value, m1.at(k).value) << k;

  nlohmann::json other = panels;
  other["training"]["settings"]["seed"] = t.seed + 1;
  post_scene(other);
  const auto s3 = wait_for(*e, [](const Snapshot& x) { return x.training && x.training->runs.size() == 2; });
  EXPECT_EQ(s3->training->runs.size(), 2u) << "other run settings: another run";
  wait_for(*e, [](const Snapshot& x) { return !x.training->runs[1]->live(); });
  fs::remove_all(dir);
}

// The app writes the metrics schema `tttlab train` writes: every record's keys, in order, are one of
// the lines of tests/metrics_keys.txt, and each line occurs (the CLI is held to the same file by
// tests/cli/test_metrics_keys.sh).
TEST(Training, MetricsHaveTheKeysTheCommandLineWrites) {
  const fs::path dir = fs::temp_directory_path() / "tttlab_gui_train_test_keys";
  fs::remove_all(dir);
  auto e = engine_with<TrainingModule>(std::make_shared<ModelLibrary>());
  e->post(TrainStart{small_run(dir, 4), "keys"});
  const auto s = wait_for(*e, [](const Snapshot& x) {
    const RunView* r = run_named(x, "keys");
    return r && (r->state == RunState::Finished || r->state == RunState::Failed);
  });
  ASSERT_EQ(run_named(*s, "keys")->state, RunState::Finished) << run_named(*s, "keys")->message;
  std::set<std::string> want, got;
  std::ifstream keys(TTTLAB_METRICS_KEYS);
  for (std::string line; std::getline(keys, line);)
    if (!line.empty()) want.insert(line);
  ASSERT_EQ(want.size(), 3u) << TTTLAB_METRICS_KEYS;
  for (const Json& record : read_metrics(dir / "keys" / "metrics.jsonl")) {
    std::string list;
    for (const auto& item : record.items()) list += (list.empty() ? "" : " ") + item.key();
    EXPECT_EQ(want.count(list), 1u) << "unexpected keys: " << list;
    got.insert(list);
  }
  EXPECT_EQ(got, want);
  e.reset();
  fs::remove_all(dir);
}

// The device choice reaches the chooser `tttlab gui` installs, the chooser's backend computes the run,
// and a request the chooser refuses fails the run with its message (never a crash).
TEST(Training, TheRunsDeviceGoesThroughTheInstalledChooser) {
  const fs::path dir = fs::temp_directory_path() / "tttlab_gui_train_test_device";
  fs::remove_all(dir);
  auto asked = std::make_shared<std::vector<std::string>>();
  auto backends_made = std::make_shared<std::atomic<int>>(0);
  TrainDevices devices;
  devices.choose = [asked, backends_made](const TrainDeviceRequest& request,
                                          std::string& note) -> TrainBackendFactory {
    EXPECT_EQ(request.gpus, 0) << "a run on one device asks for no data parallelism";
    asked->push_back(to_string(request.device));
    if (request.device == DeviceRequest::CUDA) throw std::runtime_error("no GPU in this test");
    note = "chosen by the test";
    return [backends_made](const TrainBackendContext& ctx) {
      ++*backends_made;
      return make_cpu_train_backend(ctx);
    };
  };
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<TrainingModule>(std::make_shared<ModelLibrary>(), devices));
  Engine e(std::move(mods));
  e.start();
  const auto done = [](const char* name) {
    return [name](const Snapshot& x) {
      const RunView* r = run_named(x, name);
      return r && (r->state == RunState::Finished || r->state == RunState::Failed);
    };
  };
  TrainSettings t = small_run(dir, 2);
  e.post(TrainStart{t, "auto"});
  auto s = wait_for(e, done("auto"));
  const RunView* r = run_named(*s, "auto");
  ASSERT_EQ(r->state, RunState::Finished) << r->message;
  EXPECT_EQ(backends_made->load(), 1);
  EXPECT_NE(r->device.find("CPU"), std::string::npos) << r->device;
  EXPECT_NE(r->device.find("chosen by the test"), std::string::npos) << r->device;

  t.device = DeviceRequest::CUDA;
  e.post(TrainStart{t, "cuda"});
  s = wait_for(e, done("cuda"));
  r = run_named(*s, "cuda");
  ASSERT_EQ(r->state, RunState::Failed);
  EXPECT_NE(r->message.find("no GPU in this test"), std::string::npos) << r->message;
  EXPECT_EQ(*asked, (std::vector<std::string>{"auto", "cuda"}));
  fs::remove_all(dir);
}

TEST(Training, PauseResumeStopBetweenStepsAndReopenTheRun) {
  const fs::path dir = fs::temp_directory_path() / "tttlab_gui_train_test_b";
  fs::remove_all(dir);
  auto lib = std::make_shared<ModelLibrary>();
  auto e = engine_with<TrainingModule>(lib);
  e->post(TrainStart{small_run(dir, 100000), "long"});
  auto s = wait_for(*e, [](const Snapshot& x) {
    const RunView* r = run_named(x, "long");
    return r && r->steps_done >= 2;
  });
  const int id = run_named(*s, "long")->id;
  // One run at a time.
  e->post(TrainStart{small_run(dir, 10), "second"});
  s = wait_for(*e, [](const Snapshot& x) { return x.training && !x.training->error.empty(); });
  EXPECT_NE(s->training->error.find("pause or stop it first"), std::string::npos) << s->training->error;
  EXPECT_EQ(run_named(*s, "second"), nullptr);

  e->post(TrainControl{id, TrainOp::Pause});
  s = wait_for(*e, [](const Snapshot& x) { return run_named(x, "long")->state == RunState::Paused; });
  const long paused_at = run_named(*s, "long")->steps_done;
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(run_named(*e->snapshot(), "long")->steps_done, paused_at) << "no step while paused";
  e->post(TrainControl{id, TrainOp::Resume});
  s = wait_for(*e, [&](const Snapshot& x) { return run_named(x, "long")->steps_done >= paused_at + 2; });
  e->post(TrainControl{id, TrainOp::Stop});
  s = wait_for(*e, [](const Snapshot& x) { return run_named(x, "long")->state == RunState::Stopped; });
  const RunView* r = run_named(*s, "long");
  EXPECT_FALSE(r->checkpoint.empty()) << "stopping saves a checkpoint";
  const long steps = r->steps_done;
  EXPECT_EQ(static_cast<long>(r->steps->size()), steps);

  // Reopened from disk: the same curve.
  e->post(TrainControl{id, TrainOp::Remove});
  e->post(TrainOpen{(dir / "long").string(), false});
  s = wait_for(*e, [](const Snapshot& x) {
    return x.training && x.training->runs.size() == 1 && x.training->runs[0]->state == RunState::Loaded;
  });
  const RunView& o = *s->training->runs[0];
  EXPECT_EQ(o.steps_done, steps);
  ASSERT_EQ(o.steps->size(), static_cast<std::size_t>(steps));
  EXPECT_EQ(o.settings.seq_len, 32);
  EXPECT_FALSE(o.model_id.empty());

  // A folder that is not a run is refused with its name.
  e->post(TrainOpen{"/no/such/run", false});
  s = wait_for(*e, [](const Snapshot& x) { return x.training->error.find("/no/such/run") != std::string::npos; });
  EXPECT_EQ(s->training->runs.size(), 1u);
  e.reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tttlab::lab
