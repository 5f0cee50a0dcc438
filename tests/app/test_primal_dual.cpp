// The primal-vs-dual engine module: equivalence of the two forms and the linear-attention reduction.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "lab/engine/engine.hpp"
#include "lab/primal_dual/primal_dual_module.hpp"

namespace tttlab::lab {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<const PrimalDualView> run(const PrimalDualConfig& cfg) {
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<PrimalDualModule>());
  Engine e(std::move(mods));
  e.start();
  e.post(PrimalDualRun{cfg});
  EXPECT_TRUE(e.wait_quiescent(60s));
  return e.snapshot()->primal_dual;
}

PrimalDualConfig base(InnerModel model, Precision p) {
  PrimalDualConfig c;
  c.head.source = HeadSource::Toy;
  c.head.text = "primal and dual forms compute the same function.";
  c.head.model = model;
  c.head.d = 8;
  c.head.mini_batch = 8;  // 48 bytes: 6 mini-batches
  c.head.w0 = W0Init::Random;
  c.precision = p;
  c.timing_reps = 2;
  return c;
}

TEST(PrimalDual, FormsAgreeToRoundingInDoubleForBothModels) {
  for (InnerModel m : {InnerModel::Linear, InnerModel::MLP}) {
    const auto v = run(base(m, Precision::Double));
    ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
    EXPECT_EQ(v->results_generation, v->generation);
    EXPECT_EQ(v->T, 48);
    EXPECT_LT(v->max_abs_diff, 1e-12 * std::max(1.0, v->max_abs_output));
    EXPECT_GT(v->max_abs_output, 0.1);
    EXPECT_EQ(v->primal_ms.size(), 2u);
    EXPECT_EQ(v->dual_ms.size(), 2u);
    EXPECT_EQ(v->token_diff.size(), 48u);
    EXPECT_EQ(v->attention.rows, 48);
    // M is block lower-triangular: nothing above the diagonal, nothing across mini-batches.
    EXPECT_EQ(v->attention.at(3, 4), 0.0f);
    EXPECT_EQ(v->attention.at(9, 7), 0.0f);
    EXPECT_NE(v->attention.at(9, 8), 0.0f);
  }
}

// A speed-up is worked out turn by turn (primal time over the same turn's dual time): the median of
// those ratios and their range, not the ratio of two medians taken from different turns.
TEST(PrimalDual, SpeedupIsTheMedianOfTheTurnsRatiosWithTheirRange) {
  const Speedup odd = speedup_of({4.0, 9.0, 2.0}, {1.0, 3.0, 4.0});  // ratios 4, 3, 0.5
  EXPECT_EQ(odd.repeats, 3);
  EXPECT_DOUBLE_EQ(odd.median, 3.0);
  EXPECT_DOUBLE_EQ(odd.min, 0.5);
  EXPECT_DOUBLE_EQ(odd.max, 4.0);
  const Speedup even = speedup_of({2.0, 6.0, 1.0, 8.0}, {1.0, 2.0, 1.0, 1.0});  // 2, 3, 1, 8
  EXPECT_DOUBLE_EQ(even.median, 2.5);
  EXPECT_DOUBLE_EQ(even.min, 1.0);
  EXPECT_DOUBLE_EQ(even.max, 8.0);
  EXPECT_EQ(speedup_of({1.0}, {0.0}).repeats, 0) << "a turn without a dual time gives no ratio";

  // The view's whole-model speed-up and each block's are computed so, from the turns it timed.
  const auto v = run(base(InnerModel::Linear, Precision::Double));
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  const Speedup whole = speedup_of(v->primal_ms, v->dual_ms);
  EXPECT_EQ(v->speedup.repeats, 2);
  EXPECT_DOUBLE_EQ(v->speedup.median, whole.median);
  EXPECT_LE(v->speedup.min, v->speedup.median);
  EXPECT_GE(v->speedup.max, v->speedup.median);
  ASSERT_EQ(v->layers.size(), 1u);
  EXPECT_EQ(v->layers[0].speedup.repeats, 2);
  EXPECT_NE(v->cpu_device.find("1 thread)"), std::string::npos) << v->cpu_device;
}

TEST(PrimalDual, FloatAgreesToFloatRounding) {
  const auto v = run(base(InnerModel::Linear, Precision::Float));
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  EXPECT_LT(v->max_abs_diff, 1e-4 * std::max(1.0, v->max_abs_output));
  EXPECT_GT(v->max_abs_diff, 0.0);  // float rounding is visible (the panel explains it)
}

TEST(PrimalDual, LinearAttentionReductionMatchesTrilQKV) {
  PrimalDualConfig c = base(InnerModel::MLP, Precision::Double);  // the reduction forces Linear
  c.linear_attention = true;
  const auto v = run(c);
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  EXPECT_EQ(v->effective.model, InnerModel::Linear);
  EXPECT_EQ(v->effective.mini_batch, 48);
  EXPECT_TRUE(v->linear_attention);
  EXPECT_GT(v->linear_attention_scale, 1.0);
  EXPECT_LT(v->linear_attention_diff, 1e-12 * v->linear_attention_scale);
  // With E ≡ 1 and no bias, M is exactly tril(QKᵀ): every entry on/below the diagonal is used.
  EXPECT_NE(v->attention.at(47, 0), 0.0f);
}

TEST(PrimalDual, WithoutTheReductionTTTIsNotLinearAttention) {
  // The same toggles minus one (LayerNorm back on) must NOT match tril(QKᵀ)V: a control that shows
  // the comparison can fail.
  PrimalDualConfig c = base(InnerModel::Linear, Precision::Double);
  c.linear_attention = true;
  const HeadConfig reduced = c.effective();
  c.linear_attention = false;
  c.head = reduced;
  c.head.layer_norm = true;
  const auto v = run(c);
  ASSERT_EQ(v->outcome, JobOutcome::Done);
  EXPECT_FALSE(v->linear_attention);
  EXPECT_LT(v->max_abs_diff, 1e-10);
}

TEST(PrimalDual, BadRequestFailsWithAMessage) {
  PrimalDualConfig c = base(InnerModel::Linear, Precision::Double);
  c.head.d = 1000;
  const auto v = run(c);
  EXPECT_EQ(v->outcome, JobOutcome::Failed);
  EXPECT_NE(v->error.find("head dimension"), std::string::npos);
}

TEST(PrimalDual, ANewRequestCancelsTheRunningOne) {
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<PrimalDualModule>());
  Engine e(std::move(mods));
  e.start();
  PrimalDualConfig big = base(InnerModel::Linear, Precision::Double);
  big.head.text = std::string(2000, 'x');
  big.head.d = 64;
  big.timing_reps = 50;
  e.post(PrimalDualRun{big});
  std::this_thread::sleep_for(30ms);
  const auto t0 = std::chrono::steady_clock::now();
  e.post(PrimalDualRun{base(InnerModel::Linear, Precision::Double)});
  ASSERT_TRUE(e.wait_quiescent(30s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  const auto s = e.snapshot();
  EXPECT_EQ(s->primal_dual->outcome, JobOutcome::Done);
  EXPECT_EQ(s->primal_dual->T, 48);
  ASSERT_EQ(s->jobs.size(), 2u);
  EXPECT_EQ(s->jobs[0].outcome, JobOutcome::Cancelled);
  EXPECT_EQ(s->jobs[1].outcome, JobOutcome::Done);
}

}  // namespace
}  // namespace tttlab::lab
