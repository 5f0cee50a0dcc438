// Non-finite training (tttlab/train/session.hpp, DIVERGENCE): skipped steps are recorded as events;
// after max_bad_steps in a row the run rolls back to its last checkpoint with a lower learning rate,
// or stops naming the step; a diverged state is never saved, and `latest` always names a checkpoint
// that loads. Also: a run killed before its first checkpoint resumes from step 0, and optimiser
// state with a negative second moment is refused on resume.
//
// Divergence is injected, not provoked: a backend wraps the CPU engine and reports chosen steps as
// non-finite (skipped, NaN loss) without touching the model, so the tests are exact and fast.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <set>

#include "core/io/temp_dir.hpp"
#include "core/tiny_run.hpp"
#include "core/word_corpus.hpp"
#include "tttlab/io/safetensors.hpp"
#include "tttlab/train/metrics.hpp"
#include "tttlab/train/session.hpp"

namespace tttlab {
namespace fs = std::filesystem;
namespace {

using testing::TempDir;

TrainConfig divergence_config(const fs::path& corpus, long steps) {
  TrainConfig c = testing::tiny_train_config(corpus, {.steps = steps, .seed = 5, .threads = 2, .eval_windows = 2});
  c.checkpoint_every = 4;
  return c;
}

// Calls to step() (counted across every backend the factory makes, rollbacks included) that report a
// non-finite step.
struct Faults {
  std::set<long> bad_calls;
  bool all_bad_from = false;
  long from = 0;
  long calls = 0;
  bool bad(long call) const { return bad_calls.count(call) || (all_bad_from && call >= from); }
};

class FaultyBackend final : public TrainBackend {
 public:
  FaultyBackend(std::unique_ptr<TrainBackend> real, std::shared_ptr<Faults> faults)
      : m_real(std::move(real)), m_faults(std::move(faults)) {}
  DeviceKind kind() const override { return m_real->kind(); }
  std::string describe() const override { return "CPU with injected faults"; }
  BackendStep step(const TokenBatch& batch) override {
    if (m_faults->bad(m_faults->calls++)) {
      BackendStep s;
      s.loss_sum = std::nan("");
      s.optim.step = m_real->step_count();
      s.optim.skipped = true;
      s.optim.grad_norm = std::nan("");
      return s;
    }
    return m_real->step(batch);
  }
  std::int64_t step_count() const override { return m_real->step_count(); }
  EvalReport evaluate(std::span<const std::uint8_t> val, int seq_len, const EvalOptions& o) override {
    return m_real->evaluate(val, seq_len, o);
  }
  void pull_to_host() override { m_real->pull_to_host(); }
  void push_from_host() override { m_real->push_from_host(); }

 private:
  std::unique_ptr<TrainBackend> m_real;
  std::shared_ptr<Faults> m_faults;
};

TrainBackendFactory faulty(std::shared_ptr<Faults> f) {
  return [f](const TrainBackendContext& ctx) -> std::unique_ptr<TrainBackend> {
    return std::make_unique<FaultyBackend>(make_cpu_train_backend(ctx), f);
  };
}

std::vector<Json> events(const fs::path& run, const std::string& kind) {
  std::vector<Json> out;
  for (const Json& r : read_metrics(run / "metrics.jsonl"))
    if (r.contains("event") && r["event"] == kind) out.push_back(r);
  return out;
}

TEST(Divergence, SkippedStepsAreEventsAndARunOfThemRollsBackWithALowerRate) {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  const TrainConfig cfg = divergence_config(testing::write_word_corpus(dir.path(), 3000), 12);
  auto faults = std::make_shared<Faults>();
  // Calls 2 and 3: two bad steps, then good ones (no rollback). Calls 7..11: five in a row after
  // step 5 (the checkpoint of step 4 is the last good one) -> one rollback to step 4.
  faults->bad_calls = {2, 3, 7, 8, 9, 10, 11};
  auto s = TrainingSession::create(run, cfg, TextData::load(cfg), faulty(faults));
  std::vector<std::string> kinds;
  SessionHooks hooks;
  hooks.on_event = [&](long, const std::string& kind, const std::string&) { kinds.push_back(kind); };
  EXPECT_EQ(s->run(hooks), TrainingSession::Outcome::Finished);
  EXPECT_EQ(s->trainer().steps_done(), 12);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "skipped_step"), 7);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "rollback"), 1);
  const auto rb = events(run, "rollback");
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(rb[0]["step"].get<long>(), 4) << "rolled back to the checkpoint of step 4";
  EXPECT_NE(rb[0]["message"].get<std::string>().find("step 4"), std::string::npos) << rb[0].dump();
  // The lowered rate is the run's from now on, and saved with it.
  EXPECT_DOUBLE_EQ(s->trainer().config().lr_scale, 0.5);
  const TrainConfig saved = TrainConfig::from_json(read_file_text(run / "train_config.json"));
  EXPECT_DOUBLE_EQ(saved.lr_scale, 0.5);
  auto resumed = Trainer::resume(run);
  EXPECT_DOUBLE_EQ(resumed->config().lr_scale, 0.5);
  // The metrics hold each step once: the records of steps 5..6 before the rollback were dropped.
  std::vector<long> steps;
  for (const Json& r : read_metrics(run / "metrics.jsonl"))
    if (r.contains("loss") && !r["skipped"].get<bool>()) steps.push_back(r["step"].get<long>());
  ASSERT_EQ(steps.size(), 12u);
  for (long i = 0; i < 12; ++i) EXPECT_EQ(steps[static_cast<std::size_t>(i)], i + 1);
}

TEST(Divergence, BeforeTheFirstCheckpointARollbackStartsAgainFromStepZero) {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  TrainConfig cfg = divergence_config(testing::write_word_corpus(dir.path(), 3000), 6);
  cfg.checkpoint_every = 0;
  auto faults = std::make_shared<Faults>();
  faults->bad_calls = {2, 3, 4, 5, 6};
  auto s = TrainingSession::create(run, cfg, TextData::load(cfg), faulty(faults));
  EXPECT_EQ(s->run(), TrainingSession::Outcome::Finished);
  const auto rb = events(run, "rollback");
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(rb[0]["step"].get<long>(), 0);
  EXPECT_EQ(s->trainer().steps_done(), 6);
}

TEST(Divergence, AfterTheLastRollbackOrWithPolicyStopTheRunStopsNamingTheStep) {
  for (const std::string policy : {"rollback", "stop"}) {
    TempDir dir;
    const fs::path run = dir.path() / "run";
    TrainConfig cfg = divergence_config(testing::write_word_corpus(dir.path(), 3000), 20);
    cfg.on_diverge = policy;
    cfg.max_rollbacks = 2;
    auto faults = std::make_shared<Faults>();
    faults->all_bad_from = true;
    faults->from = 6;  // steps 1..6 train; the checkpoint of step 4 is the last good one
    auto s = TrainingSession::create(run, cfg, TextData::load(cfg), faulty(faults));
    try {
      s->run();
      FAIL() << policy << ": a run that never recovers finished";
    } catch (const TrainingDiverged& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("after step"), std::string::npos) << msg;
      EXPECT_NE(msg.find("last good checkpoint is step 4"), std::string::npos) << msg;
    }
    EXPECT_EQ(events(run, "rollback").size(), policy == "stop" ? 0u : 2u) << policy;
    EXPECT_EQ(events(run, "diverged").size(), 1u) << policy;
    // `latest` names a checkpoint that loads.
    EXPECT_EQ(read_file_text(run / "latest"), "step-0000004\n");
    EXPECT_NO_THROW(load_model(run));
    EXPECT_NO_THROW(Trainer::resume(run));
  }
}

TEST(Divergence, ANonFiniteStateIsNeverSaved) {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  const TrainConfig cfg = divergence_config(testing::write_word_corpus(dir.path(), 3000), 8);
  auto s = TrainingSession::create(run, cfg, TextData::load(cfg));
  SessionHooks stop_at_5;
  stop_at_5.between_steps = [&] { return s->trainer().steps_done() >= 5 ? SessionControl::Stop : SessionControl::Continue; };
  EXPECT_EQ(s->run(stop_at_5), TrainingSession::Outcome::Stopped);
  ASSERT_EQ(read_file_text(run / "latest"), "step-0000005\n");
  ASSERT_FALSE(s->trainer().non_finite_state().has_value());
  // Damage one weight, as a diverged update would.
  s->trainer().model().for_each_param([](Eigen::Map<Mat<float>> p, const std::string& name) {
    if (name == "model.norm.weight") p(0, 0) = std::numeric_limits<float>::infinity();
  });
  const auto bad = s->trainer().non_finite_state();
  ASSERT_TRUE(bad.has_value());
  EXPECT_NE(bad->find("model.norm.weight"), std::string::npos) << *bad;
  s->trainer().step();  // step 6, from the damaged weights
  EXPECT_THROW(s->trainer().save(run), std::runtime_error);
  EXPECT_FALSE(fs::exists(run / "step-0000006"));
  EXPECT_EQ(read_file_text(run / "latest"), "step-0000005\n");
}

TEST(Divergence, ARunKilledBeforeItsFirstCheckpointResumesFromStepZero) {
  TempDir dir;
  const TrainConfig cfg = divergence_config(testing::write_word_corpus(dir.path(), 3000), 6);
  // The straight run.
  auto straight = TrainingSession::create(dir.path() / "straight", cfg, TextData::load(cfg));
  straight->run();
  // A run whose process died before any checkpoint: only train_config.json (and a torn metrics
  // line, and a temporary of the first save) are on disk.
  const fs::path cut = dir.path() / "cut";
  TrainingSession::create(cut, cfg, TextData::load(cfg)).reset();
  write_file_atomic(cut / "metrics.jsonl", "{\"step\":1,\"loss\":5.4,\"lr\"");
  write_file_atomic(cut / ".train_config.json.tmp-1-1", "partial");
  auto resumed = TrainingSession::resume(cut);
  EXPECT_EQ(resumed->trainer().steps_done(), 0);
  resumed->run();
  EXPECT_FALSE(fs::exists(cut / ".train_config.json.tmp-1-1"));
  EXPECT_EQ(read_file_text(cut / "step-0000006" / "model.safetensors"),
            read_file_text(dir.path() / "straight" / "step-0000006" / "model.safetensors"))
      << "the resumed run is the same run, bit for bit";
}

TEST(Divergence, OptimiserStateWithANegativeSecondMomentIsRefusedOnResume) {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  const TrainConfig cfg = divergence_config(testing::write_word_corpus(dir.path(), 3000), 3);
  TrainingSession::create(run, cfg, TextData::load(cfg))->run();
  const fs::path st = run / "step-0000003" / "train_state.safetensors";
  const SafetensorsFile f = SafetensorsFile::read(st);
  SafetensorsWriter w;
  // A new checksum over the poisoned numbers: this file is damaged in its numbers, not in its bytes
  // (a moment gone negative before the checksum was taken).
  w.set_checksum();
  for (const auto& [k, v] : f.metadata())
    if (k != k_safetensors_checksum_key) w.set_metadata(k, v);
  bool poisoned = false;
  for (const TensorEntry& t : f.tensors()) {
    std::vector<float> x = f.to_f32(t.name);
    if (!poisoned && t.name.rfind("optim.v.", 0) == 0) {
      x[0] = -1.0f;
      poisoned = true;
    }
    w.add(t.name, t.shape, std::span<const float>(x));
  }
  ASSERT_TRUE(poisoned);
  w.write(st);
  try {
    Trainer::resume(run);
    FAIL() << "a negative second moment was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("second moment"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("negative"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tttlab
