// The engine thread (engine.hpp) with a scripted module, and the inner-loop stepper module driven
// through it exactly as the panel drives it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "lab/engine/engine.hpp"
#include "lab/inner_stepper/stepper_module.hpp"
#include "lab/engine/head_inputs.hpp"

namespace tttlab::lab {
namespace {

using namespace std::chrono_literals;

// A module that records what it is asked to do. Commands: StepperSetSpeed{n} queues n work items.
// Work items append to a log the snapshot exposes through StepperView::speed (count of items).
class ScriptedModule final : public EngineModule {
 public:
  std::atomic<int>* items_in_flight = nullptr;
  const char* name() const override { return "scripted"; }
  bool handle(const Command& c, ModuleContext& ctx) override {
    if (auto* s = std::get_if<StepperSetSpeed>(&c)) {
      log.push_back(static_cast<int>(s->tokens_per_second));
      pending += static_cast<int>(s->tokens_per_second);
      if (s->loop) job = ctx.begin_job("scripted job");
      ctx.mark_dirty();
      return true;
    }
    return false;
  }
  bool has_work(Clock::time_point) const override { return pending > 0; }
  void work(ModuleContext& ctx) override {
    if (job && ctx.cancel_requested(job)) {
      ctx.finish_job(job, JobOutcome::Cancelled, "cancelled");
      job = 0;
      pending = 0;
      ctx.mark_dirty();
      return;
    }
    std::this_thread::sleep_for(1ms);
    --pending;
    ++done;
    if (job && pending == 0) {
      ctx.finish_job(job, JobOutcome::Done);
      job = 0;
    }
    ctx.mark_dirty();
  }
  void publish(Snapshot& s) const override {
    auto v = std::make_shared<StepperView>();
    v->speed = done;
    v->cursor = log.empty() ? -1 : log.back();
    snapshot_log = log;
    s.stepper = v;
  }
  std::vector<int> log;
  mutable std::vector<int> snapshot_log;
  int pending = 0;
  int done = 0;
  JobId job = 0;
};

TEST(Engine, HandlesCommandsInOrderAndPublishesTheResult) {
  auto mod = std::make_unique<ScriptedModule>();
  ScriptedModule* m = mod.get();
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::move(mod));
  Engine e(std::move(mods));
  const auto first = e.snapshot();
  e.start();
  for (int i = 1; i <= 5; ++i) e.post(StepperSetSpeed{double(i), false});
  ASSERT_TRUE(e.wait_quiescent(5s));
  const auto s = e.snapshot();
  EXPECT_GT(s->version, first->version);
  EXPECT_EQ(s->stepper->speed, 15);  // 1+2+3+4+5 work items ran
  EXPECT_EQ(s->stepper->cursor, 5);  // the last command was handled last
  EXPECT_EQ(s->stats.commands, 5u);
  e.stop();
  EXPECT_EQ(m->log, (std::vector<int>{1, 2, 3, 4, 5}));
  // The first snapshot is untouched by everything that happened since.
  EXPECT_EQ(first->version, 0u);
  EXPECT_EQ(first->stepper->speed, 0);
}

TEST(Engine, PostNeverWaitsForWorkInProgress) {
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<ScriptedModule>());
  Engine e(std::move(mods));
  e.start();
  e.post(StepperSetSpeed{400, false});  // ~0.4 s of work items
  std::this_thread::sleep_for(20ms);
  const auto t0 = Clock::now();
  for (int i = 0; i < 100; ++i) {
    e.post(StepperSetSpeed{0, false});
    (void)e.snapshot();
  }
  EXPECT_LT(Clock::now() - t0, 50ms);
  EXPECT_FALSE(e.quiescent());
  ASSERT_TRUE(e.wait_quiescent(10s));
}

TEST(Engine, CancelledJobStopsAndReportsIt) {
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<ScriptedModule>());
  Engine e(std::move(mods));
  e.start();
  e.post(StepperSetSpeed{5000, true});  // a job of ~5 s
  JobId id = 0;
  for (int i = 0; i < 500 && id == 0; ++i) {
    const auto s = e.snapshot();  // held: a range-for over e.snapshot()->jobs would dangle
    for (const auto& j : s->jobs) id = j.id;
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_NE(id, 0u);
  const auto t0 = Clock::now();
  e.post(CancelJob{id});
  ASSERT_TRUE(e.wait_quiescent(5s));
  EXPECT_LT(Clock::now() - t0, 1s);
  const auto s = e.snapshot();
  ASSERT_EQ(s->jobs.size(), 1u);
  EXPECT_EQ(s->jobs[0].outcome, JobOutcome::Cancelled);
  EXPECT_LT(s->stepper->speed, 5000);
}

// ---- the stepper module ---------------------------------------------------------------------------

std::unique_ptr<Engine> stepper_engine() {
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<StepperModule>());
  auto e = std::make_unique<Engine>(std::move(mods));
  e->start();
  return e;
}

std::shared_ptr<const StepperView> settle(Engine& e) {
  EXPECT_TRUE(e.wait_quiescent(10s));
  return e.snapshot()->stepper;
}

HeadConfig small_head(InnerModel model = InnerModel::Linear) {
  HeadConfig c;
  c.source = HeadSource::Toy;
  c.text = "abcabcabcabc xyz";
  c.d = 6;
  c.mini_batch = 4;
  c.model = model;
  c.w0 = W0Init::Random;
  return c;
}

class StepperRecords : public ::testing::TestWithParam<InnerModel> {};

TEST_P(StepperRecords, TokenByTokenEqualsOnePrimalRunOverTheSequence) {
  const HeadConfig c = small_head(GetParam());
  auto e = stepper_engine();
  e->post(StepperConfigure{c, 15});
  const auto v = settle(*e);
  ASSERT_TRUE(v->error.empty()) << v->error;
  ASSERT_EQ(v->computed(), 16);
  EXPECT_EQ(v->cursor, 15);

  // The reference: one call over the whole sequence, observed.
  const auto h = make_toy_head<double>(c);
  auto st = InnerState<double>::start(h.w0);
  Mat<double> out;
  std::vector<InnerWeights<double>> w_after;
  std::vector<double> loss_before, loss_after, loss_initial;
  inner_forward_primal<double>(
      h.options, h.params, h.Q, h.K, h.V, h.lambda, st, out,
      [&](const InnerStepRecord<double>& r) {
        w_after.push_back(*r.w_after);
        loss_before.push_back(r.loss_before);
        loss_after.push_back(r.loss_after);
        loss_initial.push_back(r.loss_initial);
      },
      &h.w0);
  for (long t = 0; t < 16; ++t) {
    const TokenRecord& r = *v->records[static_cast<std::size_t>(t)];
    EXPECT_EQ(r.t, t);
    EXPECT_EQ(r.pos, t % 4);
    EXPECT_EQ(r.commits, t % 4 == 3);
    EXPECT_EQ(r.byte, static_cast<unsigned char>(c.text[static_cast<std::size_t>(t)]));
    EXPECT_NEAR(r.loss_before, loss_before[t], 1e-12);
    EXPECT_NEAR(r.loss_after, loss_after[t], 1e-12);
    EXPECT_NEAR(r.loss_initial, loss_initial[t], 1e-12);
    EXPECT_LT((r.w_after.W1 - w_after[t].W1).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_LT((r.output - out.row(t)).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_NEAR(r.dw_norm, (r.w_after.W1 - v->weights_before(t).W1).norm(), 1e-12);
  }
  EXPECT_EQ(&v->weights_before(0), v->w0.get());
}

INSTANTIATE_TEST_SUITE_P(BothModels, StepperRecords,
                         ::testing::Values(InnerModel::Linear, InnerModel::MLP));

TEST(Stepper, MiniBatchStepsLandOnCommitPoints) {
  auto e = stepper_engine();
  e->post(StepperConfigure{small_head(), -1});  // 16 tokens, b = 4
  EXPECT_EQ(settle(*e)->cursor, -1);
  const auto go = [&](StepperOp op, long token = 0) {
    e->post(StepperTransport{op, token});
    return settle(*e)->cursor;
  };
  EXPECT_EQ(go(StepperOp::NextMiniBatch), 3);
  EXPECT_EQ(go(StepperOp::NextMiniBatch), 7);
  EXPECT_EQ(go(StepperOp::StepForward), 8);
  EXPECT_EQ(go(StepperOp::NextMiniBatch), 11);
  EXPECT_EQ(go(StepperOp::PrevMiniBatch), 7);
  EXPECT_EQ(go(StepperOp::StepBack), 6);
  EXPECT_EQ(go(StepperOp::PrevMiniBatch), 3);
  EXPECT_EQ(go(StepperOp::PrevMiniBatch), -1);
  EXPECT_EQ(go(StepperOp::PrevMiniBatch), -1);
  EXPECT_EQ(go(StepperOp::ToEnd), 15);
  EXPECT_EQ(go(StepperOp::NextMiniBatch), 15);
  EXPECT_EQ(go(StepperOp::Seek, 5), 5);
  EXPECT_EQ(go(StepperOp::Seek, 999), 15);
  EXPECT_EQ(go(StepperOp::ToStart), -1);
  // Moving back never discards computed tokens.
  EXPECT_EQ(settle(*e)->computed(), 16);
}

TEST(Stepper, PlaybackAdvancesAndStopsAtTheEnd) {
  auto e = stepper_engine();
  e->post(StepperConfigure{small_head(), -1});
  e->post(StepperSetSpeed{1000.0, false});
  e->post(StepperTransport{StepperOp::Play, 0});
  // Playing is not quiescent; poll until it stops by itself.
  std::shared_ptr<const StepperView> v;
  for (int i = 0; i < 400; ++i) {
    v = e->snapshot()->stepper;
    if (!v->playing && v->cursor == 15) break;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_FALSE(v->playing);
  EXPECT_EQ(v->cursor, 15);
}

TEST(Stepper, ChangingSettingsRebuildsAndKeepsTheCursor) {
  auto e = stepper_engine();
  HeadConfig c = small_head();
  e->post(StepperConfigure{c, 9});
  const auto a = settle(*e);
  c.eta_base = 0.25;
  e->post(StepperConfigure{c, a->cursor});
  const auto b = settle(*e);
  EXPECT_NE(a->generation, b->generation);
  EXPECT_EQ(b->cursor, 9);
  EXPECT_NE(a->records[9]->loss_after, b->records[9]->loss_after);
  // The same settings again do not rebuild.
  e->post(StepperConfigure{c, 9});
  EXPECT_EQ(settle(*e)->generation, b->generation);
}

TEST(Stepper, BadSettingsAreReportedNotFatal) {
  auto e = stepper_engine();
  HeadConfig c = small_head();
  c.text.clear();
  e->post(StepperConfigure{c, 3});
  auto v = settle(*e);
  EXPECT_FALSE(v->error.empty());
  EXPECT_EQ(v->computed(), 0);
  e->post(StepperTransport{StepperOp::Play, 0});  // ignored, no crash
  e->post(StepperConfigure{small_head(), 3});
  v = settle(*e);
  EXPECT_TRUE(v->error.empty());
  EXPECT_EQ(v->cursor, 3);
}

TEST(ToyHead, IsDeterministicInTheSeedAndEmbedsBytesConsistently) {
  HeadConfig c = small_head();
  const auto a = make_toy_head<double>(c), b = make_toy_head<double>(c);
  EXPECT_EQ(a.K, b.K);
  EXPECT_EQ(a.w0.W1, b.w0.W1);
  c.seed += 1;
  EXPECT_NE(make_toy_head<double>(c).K, a.K);
  // Same byte, same key: "abc" repeats at positions 0, 3, 6.
  EXPECT_EQ(a.K.row(0), a.K.row(3));
  EXPECT_NE(a.K.row(0), a.K.row(1));
  // τ_i = 1/i with the token-index scale, λ in (0, η_base/d).
  EXPECT_DOUBLE_EQ(a.params.tau(2), 1.0 / 3.0);
  EXPECT_GT(a.lambda.minCoeff(), 0.0);
  EXPECT_LT(a.lambda.maxCoeff(), c.eta_base / c.d);
}

}  // namespace
}  // namespace tttlab::lab
