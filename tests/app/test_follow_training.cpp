// Views that follow a training run (lesson 15, "two loops at once"): when the model library gets newer
// weights under the id a view was computed with (ModelLibrary::put raises ModelInfo::version, as a
// training run does at each checkpoint), the inner-loss curves, the stepper and the evolution compute
// the same settings again with them, and count the reloads.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "lab/inner_curves/curves_module.hpp"
#include "app/engine_wait.hpp"
#include "lab/engine/engine.hpp"
#include "lab/evolution/evolution_module.hpp"
#include "lab/models/model_library.hpp"
#include "lab/inner_stepper/stepper_module.hpp"

namespace tttlab::lab {
namespace {

using namespace std::chrono_literals;

// Puts a model into the library ON THE ENGINE THREAD (the library belongs to it), when it receives
// GenerateStop (no generation module runs in these engines), like the training module does when a
// run saves a checkpoint.
class Putter final : public EngineModule {
 public:
  explicit Putter(std::shared_ptr<ModelLibrary> lib) : m_lib(std::move(lib)) {}
  const char* name() const override { return "test putter"; }
  void prepare(std::string id, std::string label, std::shared_ptr<const Model<float>> m, long step) {
    std::lock_guard lk(m_mu);
    m_id = std::move(id);
    m_label = std::move(label);
    m_model = std::move(m);
    m_step = step;
  }
  bool handle(const Command& c, ModuleContext&) override {
    if (!std::holds_alternative<GenerateStop>(c)) return false;
    std::lock_guard lk(m_mu);
    m_lib->put(m_id, m_label, "", m_model, true, m_step);
    return true;
  }
  bool has_work(Clock::time_point) const override { return false; }
  void work(ModuleContext&) override {}
  void publish(Snapshot&) const override {}

 private:
  std::shared_ptr<ModelLibrary> m_lib;
  std::mutex m_mu;
  std::string m_id, m_label;
  std::shared_ptr<const Model<float>> m_model;
  long m_step = -1;
};

std::shared_ptr<const Model<float>> tiny_model(std::uint64_t seed) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.seq_layer = SeqLayerKind::TTTLinear;
  c.mamba_backbone = true;
  c.ttt_base_lr = 1.0;
  return std::make_shared<const Model<float>>(c, seed);
}

using testing::wait_for;

double max_abs_diff(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  double m = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    for (std::size_t t = 0; t < std::min(a[i].size(), b[i].size()); ++t) m = std::max(m, std::abs(a[i][t] - b[i][t]));
  return m;
}

TEST(FollowTraining, ViewsComputeAgainWhenTheirModelGetsNewerWeights) {
  const std::uint64_t seed = 20261124;
  std::printf("[ seed     ] %llu (models: seed and seed + 1)\n", static_cast<unsigned long long>(seed));
  auto lib = std::make_shared<ModelLibrary>();
  const std::string id = "file:/nonexistent/tttlab-follow-test-run";
  lib->put(id, "run follow-test (step 10)", "", tiny_model(seed), true, 10);  // before the engine thread runs
  {
    const auto v = lib->view();
    ASSERT_NE(v->find(id), nullptr);
    EXPECT_EQ(v->find(id)->version, 0u);
    EXPECT_EQ(v->find(id)->step, 10);
  }

  auto putter_owned = std::make_unique<Putter>(lib);
  Putter* putter = putter_owned.get();
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::move(putter_owned));
  mods.push_back(std::make_unique<CurvesModule>(lib));
  mods.push_back(std::make_unique<StepperModule>(lib));
  mods.push_back(std::make_unique<EvolutionModule>(lib));
  Engine e(std::move(mods));
  e.start();

  CurvesSettings cs;
  cs.model_id = id;
  cs.data = "sample";
  cs.seq_len = 64;
  cs.sequences = 2;
  e.post(CurvesRun{cs});
  HeadConfig h;
  h.model_id = id;
  h.block = 1;
  h.head = 2;
  h.text = "The outer loop trains the inner loop, one checkpoint at a time.";
  e.post(StepperConfigure{h, 20});
  e.post(EvolutionConfigure{h});
  ASSERT_TRUE(e.wait_quiescent(120s));
  const auto s1 = e.snapshot();
  const auto c1 = s1->curves;
  ASSERT_EQ(c1->outcome, JobOutcome::Done) << c1->error;
  EXPECT_EQ(c1->model_step, 10);
  EXPECT_EQ(c1->model_version, 0u);
  EXPECT_EQ(c1->reloads, 0);
  EXPECT_EQ(c1->first_followed, nullptr);
  ASSERT_TRUE(s1->stepper->error.empty()) << s1->stepper->error;
  ASSERT_EQ(s1->stepper->cursor, 20);
  EXPECT_EQ(s1->stepper->model_step, 10);
  EXPECT_EQ(s1->stepper->reloads, 0);
  ASSERT_TRUE(s1->evolution->error.empty()) << s1->evolution->error;
  ASSERT_TRUE(s1->evolution->done);
  EXPECT_EQ(s1->evolution->reloads, 0);

  // A model under ANOTHER id changes nothing.
  putter->prepare("file:/nonexistent/another-run", "run another (step 5)", tiny_model(seed + 7), 5);
  e.post(GenerateStop{});
  ASSERT_TRUE(e.wait_quiescent(120s));
  EXPECT_EQ(e.snapshot()->curves->generation, c1->generation);
  EXPECT_EQ(e.snapshot()->curves->reloads, 0);
  EXPECT_EQ(e.snapshot()->stepper->reloads, 0);

  // Newer weights under the same id, as a run's next checkpoint: every view computes again.
  putter->prepare(id, "run follow-test (step 20)", tiny_model(seed + 1), 20);
  e.post(GenerateStop{});
  const auto s2 = wait_for(e, [&](const Snapshot& s) {
    return s.curves->reloads == 1 && s.curves->outcome == JobOutcome::Done && s.stepper->reloads == 1 &&
           s.stepper->cursor == 20 && s.evolution->reloads == 1 && s.evolution->done;
  });
  const auto c2 = s2->curves;
  EXPECT_EQ(c2->model_step, 20);
  EXPECT_EQ(c2->model_version, 1u);
  EXPECT_GT(c2->generation, c1->generation);
  EXPECT_EQ(c2->settings, cs);
  EXPECT_EQ(c2->sequences_done, 2);
  EXPECT_GT(max_abs_diff(c2->l0, c1->l0), 1e-6) << "the curves must be computed with the new weights";
  EXPECT_GT(max_abs_diff(c2->lb, c1->lb), 1e-6);
  ASSERT_NE(c2->first_followed, nullptr);
  EXPECT_EQ(c2->first_followed->model_step, 10);
  EXPECT_EQ(max_abs_diff(c2->first_followed->l0, c1->l0), 0.0) << "the first checkpoint's curves are kept";

  const auto& r1 = s1->stepper->records;
  const auto& r2 = s2->stepper->records;
  ASSERT_GE(r1.size(), 21u);
  ASSERT_GE(r2.size(), 21u);
  EXPECT_EQ(s2->stepper->model_step, 20);
  EXPECT_EQ(s2->stepper->config, h) << "same block, head and text";
  EXPECT_NE(r1[20]->loss_before, r2[20]->loss_before);
  EXPECT_EQ(s2->evolution->model_step, 20);
  EXPECT_NE(s1->evolution->steps.back()->drift1, s2->evolution->steps.back()->drift1);

  // A new request resets the count.
  cs.sequences = 1;
  e.post(CurvesRun{cs});
  ASSERT_TRUE(e.wait_quiescent(120s));
  EXPECT_EQ(e.snapshot()->curves->reloads, 0);
  EXPECT_EQ(e.snapshot()->curves->model_step, 20);
}

TEST(FollowTraining, TheTrainingMarkerWaitsForTheNextCheckpoint) {
  const std::uint64_t seed = 4242;
  std::printf("[ seed     ] %llu\n", static_cast<unsigned long long>(seed));
  auto lib = std::make_shared<ModelLibrary>();
  lib->put("file:/nonexistent/old-run", "run old (step 300)", "", tiny_model(seed), true, 300);
  auto putter_owned = std::make_unique<Putter>(lib);
  Putter* putter = putter_owned.get();
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::move(putter_owned));
  mods.push_back(std::make_unique<CurvesModule>(lib));
  Engine e(std::move(mods));
  e.start();
  CurvesSettings cs;
  cs.model_id = kFollowTrainingId;
  cs.data = "sample";
  cs.seq_len = 32;
  cs.sequences = 1;
  e.post(CurvesRun{cs});
  ASSERT_TRUE(e.wait_quiescent(120s));
  EXPECT_TRUE(e.snapshot()->curves->waiting) << "a run that saved before the request is not followed";
  EXPECT_EQ(e.snapshot()->curves->outcome, JobOutcome::None);

  const std::string id = "file:/nonexistent/new-run";
  for (long step : {20L, 40L}) {
    putter->prepare(id, "run new (step " + std::to_string(step) + ")", tiny_model(seed + static_cast<std::uint64_t>(step)),
                    step);
    e.post(GenerateStop{});
    ASSERT_TRUE(e.wait_quiescent(120s));
    const auto v = e.snapshot()->curves;
    EXPECT_FALSE(v->waiting);
    ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
    EXPECT_EQ(v->model_id, id);
    EXPECT_EQ(v->model_step, step);
    EXPECT_EQ(v->reloads, step == 20 ? 0 : 1) << "the first checkpoint of the followed run is no reload";
  }
}

}  // namespace
}  // namespace tttlab::lab
