// The stepper and primal-vs-parallel views with every member of the fast-weight family: the member's
// records in the stepper (Titans and LaCT through their own inner loops), the chunked form's agreement
// in primal vs parallel (the matrix members and Titans), the member setting in state files, and TTT's
// stepper path unchanged bit for bit.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>

#include "lab/engine/engine.hpp"
#include "lab/engine/head_inputs.hpp"
#include "lab/inner_stepper/stepper_module.hpp"
#include "lab/primal_dual/primal_dual_module.hpp"
#include "lab/state/json_fields.hpp"
#include "tttlab/fastweight/member_trace.hpp"

namespace tttlab::lab {
namespace {

using namespace std::chrono_literals;

HeadConfig mv_head(const std::string& member, InnerModel model = InnerModel::Linear) {
  HeadConfig c;
  c.source = HeadSource::Toy;
  c.text = "abcabcabcabc xyz";  // T = 16
  c.d = 6;
  c.mini_batch = 4;
  c.model = model;
  c.w0 = W0Init::Random;
  c.set_member(member);
  return c;
}

std::shared_ptr<const StepperView> mv_step_all(const HeadConfig& c) {
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<StepperModule>());
  Engine e(std::move(mods));
  e.start();
  e.post(StepperConfigure{c, c.tokens() - 1});
  EXPECT_TRUE(e.wait_quiescent(60s));
  return e.snapshot()->stepper;
}

// TTT's stepper records, summed, as the code before members computed them (the same sums over the
// same toy heads, from a portable build: TTTLAB_NATIVE=OFF). A build for another instruction set
// (-march=native: FMA contractions, AVX-512) rounds differently in the last bits, so the sums are
// compared to 1e-12 of their scale: far below any change to what the TTT path computes.
TEST(MemberViews, TttStepperRecordsUnchanged) {
  struct Golden {
    InnerModel model;
    double l0, lb, la, w, o, dw, g;
  };
  const Golden golden[] = {
      {InnerModel::Linear, 0x1.dff630aae48a6p+6, 0x1.d0b2db5b1e3e4p+5, 0x1.7b1a42dba88dep+5,
       0x1.8fcfb17864d9ep+0, -0x1.bb36e3fe9c1d8p+2, -0x1.bp-50, 0x1.62e4p-45},
      {InnerModel::MLP, 0x1.8966a8eee2414p+6, 0x1.0907b6541d352p+7, 0x1.eee122b6b8f05p+6,
       -0x1.3ca5745b5957p+4, -0x1.bb36e3fe9c1d6p+2, 0x1.479afd04eee2ap-2, 0x1.42d60053a6fcdp+3}};
  for (const Golden& gd : golden) {
    HeadConfig c = mv_head("ttt_linear", gd.model);
    c.model = gd.model;  // as a caller that sets only the model does: the member follows it
    const auto v = mv_step_all(c);
    ASSERT_TRUE(v->error.empty()) << v->error;
    ASSERT_EQ(v->computed(), 16);
    double l0 = 0, lb = 0, la = 0, w = 0, o = 0, dw = 0, g = 0;
    for (const auto& r : v->records) {
      lb += r->loss_before;
      la += r->loss_after;
      l0 += r->loss_initial;
      w += r->w_after.W1.sum() + r->w_after.b1.sum() +
           (r->w_after.W2.size() ? r->w_after.W2.sum() : 0.0);
      o += r->output.sum();
      dw += r->delta.W1.sum();
      g += r->outer1.sum();
    }
    const auto near = [](double got, double want, const char* what) {
      EXPECT_LE(std::abs(got - want), 1e-12 * (1.0 + std::abs(want)))
          << what << ": " << got << " against " << want;
    };
    near(l0, gd.l0, "initial losses");
    near(lb, gd.lb, "losses before");
    near(la, gd.la, "losses after");
    near(w, gd.w, "weights");
    near(o, gd.o, "outputs");
    near(dw, gd.dw, "changes");
    near(g, gd.g, "gradient terms");
  }
}

class MemberStepper : public ::testing::TestWithParam<const char*> {};

TEST_P(MemberStepper, RecordsAreTheMembersTrace) {
  const HeadConfig c = mv_head(GetParam());
  const auto v = mv_step_all(c);
  ASSERT_TRUE(v->error.empty()) << v->error;
  ASSERT_EQ(v->computed(), 16);
  const FastWeightPreset& p = fast_weight_preset(GetParam());
  const auto trace = member_trace(p, make_member_inputs(c, make_toy_head<double>(c)));
  const bool mlp = p.rule.state == FastWeightState::Mlp;
  EXPECT_EQ(v->mlp(), mlp);
  EXPECT_EQ(v->mini_batch(), mlp ? 4 : 1);
  for (std::size_t t = 0; t < trace.size(); ++t) {
    const TokenRecord& r = *v->records[t];
    const MemberStepRecord& m = trace[t];
    EXPECT_LE((r.w_after.W1 - m.state_after[0]).cwiseAbs().maxCoeff(), 1e-12)
        << p.id << " t = " << t;
    EXPECT_LE((r.delta.W1 - m.delta[0]).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_LE((r.outer1 - m.gradient[0]).cwiseAbs().maxCoeff(), 1e-12);
    if (mlp) {
      // Titans {M, S}, LaCT {W₀, W₁, W₂}: the first two are drawn.
      ASSERT_GE(m.state_after.size(), 2u);
      EXPECT_LE((r.w_after.W2 - m.state_after[1]).cwiseAbs().maxCoeff(), 1e-12);
      EXPECT_LE((r.delta.W2 - m.delta[1]).cwiseAbs().maxCoeff(), 1e-12);
      // Titans' one gradient term (the memory's write); LaCT's of each weight.
      if (m.gradient.size() > 1) {
        EXPECT_LE((r.outer2 - m.gradient[1]).cwiseAbs().maxCoeff(), 1e-12);
      } else {
        EXPECT_EQ(r.outer2.size(), 0);
      }
    }
    EXPECT_LE(std::abs(r.loss_before - m.loss_before), 1e-12);
    EXPECT_LE(std::abs(r.loss_after - m.loss_after), 1e-12);
    EXPECT_LE(std::abs(r.loss_initial - m.loss_initial), 1e-12);
    EXPECT_LE((r.output - m.output).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_EQ(r.alpha, m.alpha);
  }
  EXPECT_GT(v->records.back()->w_norm, 0.0) << "the state learned something";
}

INSTANTIATE_TEST_SUITE_P(EveryMemberButTtt, MemberStepper,
                         ::testing::Values("linear_attention", "mamba2", "deltanet",
                                           "gated_deltanet", "titans", "lact"));

std::shared_ptr<const PrimalDualView> mv_primal_parallel(const PrimalDualConfig& cfg) {
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<PrimalDualModule>());
  Engine e(std::move(mods));
  e.start();
  e.post(PrimalDualRun{cfg});
  EXPECT_TRUE(e.wait_quiescent(60s));
  return e.snapshot()->primal_dual;
}

TEST(MemberViews, PrimalAndChunkedFormsAgreeForTheMatrixMembersAndTitans) {
  for (const char* id : {"linear_attention", "mamba2", "deltanet", "gated_deltanet", "titans"}) {
    PrimalDualConfig cfg;
    cfg.head = mv_head(id);
    cfg.head.text = "primal and chunked forms compute the same function.";  // T = 51
    cfg.chunk = 8;  // 8 ∤ 51: the last chunk is shorter
    cfg.timing_reps = 1;
    const auto v = mv_primal_parallel(cfg);
    ASSERT_EQ(v->outcome, JobOutcome::Done) << id << ": " << v->error;
    EXPECT_TRUE(v->member_chunked);
    EXPECT_EQ(v->T, 51);
    EXPECT_EQ(v->mini_batch, 8);
    EXPECT_GT(v->max_abs_output, 0.01) << id;
    EXPECT_LE(v->max_abs_diff, 1e-12 * std::max(1.0, v->max_abs_output)) << id;
    // The chunked form is a different computation: not bit-identical everywhere.
    const bool hebbian = std::string(id) == "linear_attention" || std::string(id) == "mamba2";
    EXPECT_EQ(v->attention.empty(), !hebbian) << id;
  }
}

TEST(MemberViews, MembersWithoutAParallelFormOrOffTheToyHeadAreRefusedWithWords) {
  PrimalDualConfig cfg;
  cfg.head = mv_head("lact");
  cfg.timing_reps = 1;
  const auto v = mv_primal_parallel(cfg);
  EXPECT_EQ(v->outcome, JobOutcome::Failed);
  EXPECT_NE(v->error.find("no parallel form"), std::string::npos) << v->error;

  HeadConfig model = mv_head("deltanet");
  model.source = HeadSource::Model;
  try {
    validate(model, StepperModule::limits());
    ADD_FAILURE() << "a DeltaNet member on the trained model's head was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("toy"), std::string::npos) << e.what();
  }
}

TEST(MemberViews, MemberRoundTripsAndABadIdIsRejectedWithTheList) {
  for (const FastWeightPreset& p : fast_weight_presets()) {
    HeadConfig c = mv_head(p.id);
    const nlohmann::json j = to_json(c);
    EXPECT_EQ(j.at("member"), p.id);
    const HeadConfig back = head_config_from(FieldReader(j, "head"));
    EXPECT_EQ(back.member_id(), p.id);
    EXPECT_EQ(back, c) << p.id;
  }
  HeadConfig bad = mv_head("deltanet");
  bad.member = "deltanett";
  try {
    validate(bad, StepperModule::limits());
    ADD_FAILURE() << "an unknown member was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    for (const FastWeightPreset& p : fast_weight_presets())
      EXPECT_NE(what.find(p.id), std::string::npos) << what;
  }
}

TEST(MemberViews, OldStateWithoutAMemberOpensAsTttFollowingTheModel) {
  const nlohmann::json mlp = {{"source", "toy"}, {"model", "mlp"}, {"d", 8}};
  const HeadConfig a = head_config_from(FieldReader(mlp, "head"));
  EXPECT_EQ(a.member, "ttt_mlp");
  EXPECT_TRUE(a.ttt());
  EXPECT_EQ(a.model, InnerModel::MLP);
  const HeadConfig b = head_config_from(FieldReader(nlohmann::json::object(), "head"));
  EXPECT_EQ(b.member, "ttt_linear");
  EXPECT_EQ(b, HeadConfig{});
  // A TTT member alone names its model; beside a "model", the model says which TTT runs.
  const nlohmann::json alone = {{"member", "ttt_mlp"}};
  EXPECT_EQ(head_config_from(FieldReader(alone, "head")).model, InnerModel::MLP);
  const nlohmann::json both = {{"model", "linear"}, {"member", "ttt_mlp"}};
  EXPECT_EQ(head_config_from(FieldReader(both, "head")).member_id(), "ttt_linear");
}

}  // namespace
}  // namespace tttlab::lab
