// The layer designer's engine module (app/lab/designer/designer_module.hpp) against the core
// computation it wraps (tttlab/fastweight/designed_memory.hpp): the same accuracies and inner losses,
// built from many small work items; where the design sits among the members; its settings in a
// state file; and the lesson measures read off its view.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "course/experiments.hpp"
#include "lab/designer/designer_module.hpp"
#include "lab/designer/designer_settings.hpp"
#include "lab/engine/engine.hpp"
#include "tttlab/analysis/recall.hpp"

namespace tttlab::lab {
namespace {

using namespace std::chrono_literals;

DesignerSettings designer_small() {
  DesignerSettings s;
  s.design = fast_weight_preset("gated_deltanet").rule;
  s.design.retention = FastWeightRetention::ChannelDecay;  // one step from Gated DeltaNet
  s.params.width = 16;
  s.params.seed = 4;
  s.params.eta = 0.9;
  s.params.decay = 0.9;
  s.compare = "linear_attention";
  s.pairs = {4, 16, 40};
  s.sequences = 4;
  s.curve_pairs = 20;
  return s;
}

std::shared_ptr<const DesignerView> designer_compute(const DesignerSettings& s) {
  std::vector<std::unique_ptr<EngineModule>> m;
  m.push_back(std::make_unique<DesignerModule>());
  Engine e(std::move(m));
  e.start();
  e.post(DesignerRun{s});
  EXPECT_TRUE(e.wait_quiescent(60s));
  auto v = e.snapshot()->designer;
  e.stop();
  return v;
}

TEST(DesignerModule, EqualsTheCoreComputation) {
  const DesignerSettings s = designer_small();
  const auto v = designer_compute(s);
  ASSERT_TRUE(v);
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  // Five components in common with Gated DeltaNet and with DeltaNet: the earlier row of the table.
  EXPECT_EQ(v->nearest_id, "deltanet");
  EXPECT_EQ(v->common, 5);
  EXPECT_EQ(v->differs, std::vector<std::string>{"retention"});
  const FastWeightPreset& member = fast_weight_preset(s.compare);
  const FastWeightRule rules[2] = {s.design, member.rule};
  const DesignParams params[2] = {s.params, member_params(member, s.params)};
  EXPECT_EQ(v->compare_params, params[1]);
  const recall::Embedding emb(s.params.width, s.params.seed);
  for (int m = 0; m < 2; ++m) {
    for (std::size_t j = 0; j < s.pairs.size(); ++j) {
      long right = 0;
      for (int e = 0; e < s.sequences; ++e)
        right += designed_recall_correct(
            rules[m], params[m],
            recall::make_episode(s.pairs[j], s.params.seed, static_cast<std::uint64_t>(e)), emb);
      EXPECT_DOUBLE_EQ(v->accuracy[static_cast<std::size_t>(m)][j],
                       static_cast<double>(right) / (s.sequences * s.pairs[j]))
          << m << " P = " << s.pairs[j];
    }
    // The loss episode, pair by pair, on a fresh memory.
    DesignedMemory mem(rules[m], params[m]);
    const recall::Episode e = recall::make_episode(s.curve_pairs, s.params.seed, 1000000);
    for (int t = 0; t < s.curve_pairs; ++t) {
      mem.write(emb.row(e.keys[static_cast<std::size_t>(t)]), emb.row(e.values[static_cast<std::size_t>(t)]));
      EXPECT_EQ(v->loss_before[static_cast<std::size_t>(m)][static_cast<std::size_t>(t)], mem.loss_before());
      EXPECT_EQ(v->loss_after[static_cast<std::size_t>(m)][static_cast<std::size_t>(t)], mem.loss_after());
    }
    EXPECT_EQ(v->state_size[m], mem.state_size());
    EXPECT_FALSE(v->diverged[m]);
  }
  EXPECT_EQ(v->curve_done, s.curve_pairs);
  // A write of the delta rule fixes its pair: the squared loss after it is below the one before.
  for (int t = 0; t < s.curve_pairs; ++t)
    EXPECT_LT(v->loss_after[0][static_cast<std::size_t>(t)], v->loss_before[0][static_cast<std::size_t>(t)]);
}

TEST(DesignerModule, ADivergingDesignIsFlagged) {
  DesignerSettings s = designer_small();
  s.design = fast_weight_preset("deltanet").rule;
  s.design.state = FastWeightState::Mlp;
  s.params.eta = 50.0;
  s.params.weight_decay = 0.0;  // far past what a two-layer network's step can take
  const auto v = designer_compute(s);
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  EXPECT_TRUE(v->diverged[0]);
  EXPECT_FALSE(v->diverged[1]);
}

TEST(DesignerModule, MeasuresForLessons) {
  const DesignerSettings s = designer_small();
  const auto v = designer_compute(s);
  Snapshot snap;
  snap.designer = v;
  const auto m = course::read_measures("designer", snap);
  ASSERT_TRUE(m);
  EXPECT_DOUBLE_EQ(m->at("acc_design_p16").value, v->accuracy[0][1]);
  EXPECT_DOUBLE_EQ(m->at("member_acc_large").value, v->accuracy[1][2]);
  EXPECT_DOUBLE_EQ(m->at("design_minus_member_large").value, v->accuracy[0][2] - v->accuracy[1][2]);
  EXPECT_DOUBLE_EQ(m->at("nearest_common").value, 5.0);
  EXPECT_DOUBLE_EQ(m->at("design_is_member").value, 0.0);
  double after = 0;
  for (double x : v->loss_after[1]) after += x;
  EXPECT_NEAR(m->at("member_loss_after_mean").value, after / s.curve_pairs, 1e-12);
  auto running = std::make_shared<DesignerView>(*v);
  running->outcome = JobOutcome::Running;
  snap.designer = running;
  EXPECT_FALSE(course::read_measures("designer", snap));
}

TEST(DesignerModule, BadSettingsFailTheViewAndTheStateFile) {
  DesignerSettings s = designer_small();
  s.compare = "lstm";
  const auto v = designer_compute(s);
  EXPECT_EQ(v->outcome, JobOutcome::Failed);
  EXPECT_NE(v->error.find("lstm"), std::string::npos) << v->error;
  const nlohmann::json good = to_json(designer_small());
  EXPECT_EQ(good.at("retention"), "channel_decay");
  EXPECT_EQ(designer_settings_from(FieldReader(good, "panels.designer"), DesignerSettings{}), designer_small());
  for (const auto& [key, bad] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"pairs", {8, 8}}, {"pairs", {0}}, {"width", 2}, {"compare", "lstm"}, {"loss", "cross_entropy"},
           {"state", 3}, {"eta", 0.0}, {"decay", 1.5}, {"momentum", 1.0}, {"chunk", 0}, {"weight_decay", -1.0},
           {"curve_pairs", 1}}) {
    nlohmann::json j = good;
    j[key] = bad;
    try {
      (void)designer_settings_from(FieldReader(j, "panels.designer"), DesignerSettings{});
      ADD_FAILURE() << key << " = " << bad.dump() << " was accepted";
    } catch (const StateError& e) {
      EXPECT_NE(std::string(e.what()).find("panels.designer"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tttlab::lab
