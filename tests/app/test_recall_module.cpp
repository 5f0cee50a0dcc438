// The Recall lab's engine module (app/lab/recall/recall_module.hpp) against the core computation it
// wraps (tttlab/analysis/recall.hpp): the same accuracies and the same forgetting map, built from
// many small work items; its settings in a state file; and the lesson measures read off its view.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "course/experiments.hpp"
#include "lab/engine/engine.hpp"
#include "lab/recall/recall_module.hpp"
#include "lab/recall/recall_settings.hpp"
#include "tttlab/analysis/recall.hpp"

namespace tttlab::lab {
namespace {

using namespace std::chrono_literals;

RecallSettings small_settings() {
  RecallSettings s;
  s.width = 16;
  s.pairs = {4, 16, 64};
  s.sequences = 5;
  s.seed = 9;
  s.map_memory = "linear_attention";
  s.map_pairs = 24;
  s.eta_linear = 0.8;
  s.mamba_decay = 0.9;
  return s;
}

std::shared_ptr<const RecallView> compute(const RecallSettings& s) {
  std::vector<std::unique_ptr<EngineModule>> m;
  m.push_back(std::make_unique<RecallModule>());
  Engine e(std::move(m));
  e.start();
  e.post(RecallRun{s});
  EXPECT_TRUE(e.wait_quiescent(60s));
  auto v = e.snapshot()->recall;
  e.stop();
  return v;
}

TEST(RecallModule, EqualsTheCoreComputation) {
  const RecallSettings s = small_settings();
  const auto v = compute(s);
  ASSERT_TRUE(v);
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  const recall::Embedding emb(s.width, s.seed);
  recall::MemoryParams p;
  p.width = s.width;
  p.seed = s.seed;
  p.eta_linear = s.eta_linear;
  p.mamba_decay = s.mamba_decay;
  for (int m = 0; m < recall::kMemories; ++m)
    for (std::size_t j = 0; j < s.pairs.size(); ++j) {
      long right = 0;
      for (int e = 0; e < s.sequences; ++e)
        right += recall::recall_correct(static_cast<recall::Memory>(m),
                                        recall::make_episode(s.pairs[j], s.seed, static_cast<std::uint64_t>(e)), emb, p);
      EXPECT_DOUBLE_EQ(v->accuracy[static_cast<std::size_t>(m)][j],
                       static_cast<double>(right) / (s.sequences * s.pairs[j]))
          << recall::memory_name(static_cast<recall::Memory>(m)) << " P = " << s.pairs[j];
    }
  EXPECT_EQ(v->episodes_done, std::vector<int>(s.pairs.size(), s.sequences));
  // The map: mean over the episodes of the core's 0/1 rows, for the chosen memory.
  const std::size_t P = static_cast<std::size_t>(s.map_pairs);
  std::vector<double> want(P * P, 0.0);
  for (int e = 0; e < s.sequences; ++e) {
    const auto rows = recall::forgetting_rows(recall::Memory::LinearAttention,
                                              recall::make_episode(s.map_pairs, s.seed, static_cast<std::uint64_t>(e)), emb, p);
    for (std::size_t c = 0; c < want.size(); ++c) want[c] += rows[c] / static_cast<double>(s.sequences);
  }
  ASSERT_EQ(v->map.size(), want.size());
  for (std::size_t c = 0; c < want.size(); ++c) EXPECT_NEAR(v->map[c], want[c], 1e-12) << c;
  EXPECT_EQ(v->map_episodes_done, s.sequences);
  EXPECT_DOUBLE_EQ(v->state_size[3][2], 2.0 * 16 * 64);  // softmax attention keeps 2Pd numbers
  EXPECT_DOUBLE_EQ(v->state_size[1][0], 8.0 * 16 * 16);  // TTT-MLP: 8d²
}

TEST(RecallModule, MeasuresForLessons) {
  RecallSettings s = small_settings();
  s.pairs = {4, 16, 64};  // includes P = d = 16
  const auto v = compute(s);
  Snapshot snap;
  snap.recall = v;
  const auto m = course::read_measures("recall", snap);
  ASSERT_TRUE(m);
  EXPECT_DOUBLE_EQ(m->at("acc_linear_attention_p4").value, v->accuracy[2][0]);
  EXPECT_DOUBLE_EQ(m->at("linear_acc_large").value, v->accuracy[2][2]);
  EXPECT_DOUBLE_EQ(m->at("ttt_linear_minus_linear_at_d").value, v->accuracy[0][1] - v->accuracy[2][1]);
  EXPECT_DOUBLE_EQ(m->at("softmax_acc_min").value, std::min({v->accuracy[3][0], v->accuracy[3][1], v->accuracy[3][2]}));
  EXPECT_DOUBLE_EQ(m->at("acc_mamba2_p16").value, v->accuracy[4][1]);
  EXPECT_DOUBLE_EQ(m->at("mamba2_acc_large").value, v->accuracy[4][2]);
  // The map's last row is the accuracy of its memory at P = map_pairs (the same episodes).
  const std::size_t P = static_cast<std::size_t>(s.map_pairs);
  double last = 0;
  for (std::size_t i = 0; i < P; ++i) last += v->map[(P - 1) * P + i];
  EXPECT_NEAR(m->at("map_last_row_mean").value, last / P, 1e-12);
  // While it runs there are no measures yet.
  auto running = std::make_shared<RecallView>(*v);
  running->outcome = JobOutcome::Running;
  snap.recall = running;
  EXPECT_FALSE(course::read_measures("recall", snap));
}

TEST(RecallModule, BadSettingsFailTheViewAndTheStateFile) {
  RecallSettings s = small_settings();
  s.pairs = {16, 4};
  const auto v = compute(s);
  EXPECT_EQ(v->outcome, JobOutcome::Failed);
  EXPECT_NE(v->error.find("increase"), std::string::npos) << v->error;
  const nlohmann::json good = to_json(small_settings());
  EXPECT_EQ(recall_settings_from(FieldReader(good, "panels.recall"), RecallSettings{}), small_settings());
  for (const auto& [key, bad] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"pairs", {8, 8}}, {"pairs", {0}}, {"pairs", "4"}, {"width", 2}, {"map_memory", "lstm"}, {"eta_linear", 2.0},
           {"mamba_decay", 0.0}, {"mamba_decay", 1.5}}) {
    nlohmann::json j = good;
    j[key] = bad;
    try {
      (void)recall_settings_from(FieldReader(j, "panels.recall"), RecallSettings{});
      ADD_FAILURE() << key << " = " << bad.dump() << " was accepted";
    } catch (const StateError& e) {
      EXPECT_NE(std::string(e.what()).find("panels.recall"), std::string::npos) << e.what();
    }
  }
}

// Every member is computed, the designed ones too, and the forgetting map takes any of them; their
// measures follow acc_<memory>_p<P> and <member>_acc_small / _large; a bad map memory is refused with
// the list of ids.
TEST(RecallModule, DesignedMembersAndTheirMap) {
  RecallSettings s = small_settings();
  s.map_memory = "gated_deltanet";
  const auto v = compute(s);
  ASSERT_TRUE(v);
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  ASSERT_EQ(v->accuracy.size(), static_cast<std::size_t>(recall::kMemories));
  const recall::Embedding emb(s.width, s.seed);
  recall::MemoryParams p;
  p.width = s.width;
  p.seed = s.seed;
  const std::size_t P = static_cast<std::size_t>(s.map_pairs);
  std::vector<double> want(P * P, 0.0);
  for (int e = 0; e < s.sequences; ++e) {
    const auto rows = recall::forgetting_rows(recall::Memory::GatedDeltaNet,
                                              recall::make_episode(s.map_pairs, s.seed, static_cast<std::uint64_t>(e)), emb, p);
    for (std::size_t c = 0; c < want.size(); ++c) want[c] += rows[c] / static_cast<double>(s.sequences);
  }
  ASSERT_EQ(v->map.size(), want.size());
  for (std::size_t c = 0; c < want.size(); ++c) EXPECT_NEAR(v->map[c], want[c], 1e-12) << c;
  Snapshot snap;
  snap.recall = v;
  const auto m = course::read_measures("recall", snap);
  ASSERT_TRUE(m);
  const auto lact = static_cast<std::size_t>(recall::Memory::Lact);
  const auto titans = static_cast<std::size_t>(recall::Memory::Titans);
  EXPECT_DOUBLE_EQ(m->at("acc_lact_p16").value, v->accuracy[lact][1]);
  EXPECT_DOUBLE_EQ(m->at("acc_deltanet_p64").value, v->accuracy[5][2]);
  EXPECT_DOUBLE_EQ(m->at("gated_deltanet_acc_small").value, v->accuracy[6][0]);
  EXPECT_DOUBLE_EQ(m->at("titans_acc_large").value, v->accuracy[titans][2]);
  EXPECT_DOUBLE_EQ(m->at("state_titans").value, 24.0 * 16 * 16);  // weights, momentum, batch start
  EXPECT_DOUBLE_EQ(m->at("state_deltanet").value, 16.0 * 16);
  EXPECT_DOUBLE_EQ(m->at("state_softmax_attention").value, 2.0 * 16 * 64);
  EXPECT_DOUBLE_EQ(m->at("linear_acc_large").value, v->accuracy[2][2]);  // the old names still there
  double last = 0;
  for (std::size_t i = 0; i < P; ++i) last += v->map[(P - 1) * P + i];
  EXPECT_NEAR(m->at("map_last_row_mean").value, last / P, 1e-12);

  s.map_memory = "gdn";
  const auto bad = compute(s);
  EXPECT_EQ(bad->outcome, JobOutcome::Failed);
  EXPECT_NE(bad->error.find(recall::memory_ids()), std::string::npos) << bad->error;
}

}  // namespace
}  // namespace tttlab::lab
