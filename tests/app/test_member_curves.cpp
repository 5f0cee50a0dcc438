// The inner-loss curves view with every member of the fast-weight family: a member other than TTT runs
// its own inner loop (tttlab/fastweight/member_trace.hpp) on toy heads reading the validation windows,
// and TTT's curves are still the model's observed primal form, bit for bit.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lab/engine/data_source.hpp"
#include "lab/engine/engine.hpp"
#include "lab/engine/head_inputs.hpp"
#include "lab/inner_curves/curves_module.hpp"
#include "lab/inner_curves/curves_settings.hpp"
#include "lab/models/model_library.hpp"
#include "lab/state/json_fields.hpp"
#include "tttlab/data/batches.hpp"
#include "tttlab/fastweight/member_trace.hpp"
#include "tttlab/model/model.hpp"

namespace tttlab::lab {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<const CurvesView> mc_curves(const CurvesSettings& s,
                                            std::shared_ptr<ModelLibrary> lib) {
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<CurvesModule>(std::move(lib)));
  Engine e(std::move(mods));
  e.start();
  e.post(CurvesRun{s});
  EXPECT_TRUE(e.wait_quiescent(120s));
  return e.snapshot()->curves;
}

CurvesSettings mc_member_settings(const std::string& member) {
  CurvesSettings s;
  s.member = member;
  s.data = "sample";
  s.seq_len = 40;
  s.sequences = 2;
  s.toy_d = 6;
  s.toy_heads = 2;
  s.toy_seed = 11;
  s.toy_mini_batch = 8;
  return s;
}

class MemberCurves : public ::testing::TestWithParam<const char*> {};

TEST_P(MemberCurves, CurvesAreTheMembersOwnLossesOnToyHeads) {
  const std::string id = GetParam();
  const CurvesSettings s = mc_member_settings(id);
  const auto v = mc_curves(s, std::make_shared<ModelLibrary>());
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  EXPECT_EQ(v->member, id);
  EXPECT_EQ(v->member_name, fast_weight_preset(id).name);
  EXPECT_FALSE(v->member_loss.empty());
  EXPECT_EQ(v->state_names, member_state_names(fast_weight_preset(id)));
  EXPECT_EQ(v->sequences_done, 2);
  ASSERT_EQ(v->blocks, 1);
  ASSERT_EQ(v->l0.size(), 1u);
  ASSERT_EQ(v->l0[0].size(), 40u);
  ASSERT_EQ(v->lb[0].size(), 40u);
  ASSERT_EQ(v->la[0].size(), 40u);

  // The reference: the same windows, toy heads and inputs, through member_trace directly.
  const auto data = load_data(s.data, s.seq_len);
  const SequentialWindows windows(std::span<const std::uint8_t>(data->val), 1, s.seq_len,
                                  s.sequences);
  std::vector<double> l0(40, 0.0), lb(40, 0.0), la(40, 0.0), cb, ca;
  for (long w = 0; w < windows.windows(); ++w) {
    const TokenBatch b = windows.batch_at(w);
    const auto row = b.row(0);
    HeadConfig c;
    c.source = HeadSource::Toy;
    c.set_member(id);
    c.d = s.toy_d;
    c.mini_batch = s.toy_mini_batch;
    c.eta_base = s.toy_eta_base;
    c.text.assign(row.begin(), row.begin() + s.seq_len);
    for (int h = 0; h < s.toy_heads; ++h) {
      c.seed = static_cast<std::uint64_t>(s.toy_seed + h);
      const auto trace =
          member_trace(fast_weight_preset(id), make_member_inputs(c, make_toy_head<double>(c)));
      std::size_t u = 0;
      for (const MemberStepRecord& r : trace) {
        const std::size_t t = static_cast<std::size_t>(r.token);
        l0[t] += r.loss_initial;
        lb[t] += r.loss_before;
        la[t] += r.loss_after;
        if (r.chunk_tokens > 0) {
          if (cb.size() <= u) cb.resize(u + 1, 0.0), ca.resize(u + 1, 0.0);
          cb[u] += r.chunk_loss_before;
          ca[u] += r.chunk_loss_after;
          ++u;
        }
      }
    }
  }
  const double n = static_cast<double>(windows.windows() * s.toy_heads);
  for (std::size_t t = 0; t < 40; ++t) {
    EXPECT_TRUE(std::isfinite(v->l0[0][t]) && std::isfinite(v->lb[0][t]) &&
                std::isfinite(v->la[0][t]))
        << id << " t = " << t;
    EXPECT_LE(std::abs(v->l0[0][t] - l0[t] / n), 1e-12 * (1.0 + std::abs(l0[t] / n)))
        << id << " t = " << t;
    EXPECT_LE(std::abs(v->lb[0][t] - lb[t] / n), 1e-12 * (1.0 + std::abs(lb[t] / n)))
        << id << " t = " << t;
    EXPECT_LE(std::abs(v->la[0][t] - la[t] / n), 1e-12 * (1.0 + std::abs(la[t] / n)))
        << id << " t = " << t;
  }
  double mb = 0, ma = 0;
  for (std::size_t t = 0; t < 40; ++t) {
    mb += v->lb[0][t];
    ma += v->la[0][t];
  }
  std::printf("%s: mean ℓ before %.6g, after %.6g\n", id.c_str(), mb / 40, ma / 40);
  if (id == "linear_attention" || id == "deltanet") {
    // A descent step on the token's own loss (Hebbian: by β‖k‖²‖v‖²; the delta rule with β‖k‖² ≤ 1):
    // after never above before, and strictly below on average.
    for (std::size_t t = 0; t < 40; ++t)
      EXPECT_LE(v->la[0][t], v->lb[0][t] + 1e-12 * (1.0 + std::abs(v->lb[0][t])))
          << id << " t = " << t;
    EXPECT_LT(ma, mb);
  }
  if (id == "titans") {
    // FLA's write is not exactly a gradient step of its loss (§11.9), so no token is promised a lower
    // loss; on these toy heads the mean falls (measured 6.76 → 6.03).
    EXPECT_LT(ma, mb);
  }
  if (id == "lact") {
    // Updates when tokens 8, 16, 24 and 32 arrive (C = 8, T = 40: the last chunk is only read), each
    // lowering the loss of the chunk it learnt from; the weights do not change in between.
    ASSERT_EQ(v->chunk_at, (std::vector<long>{8, 16, 24, 32}));
    for (std::size_t u = 0; u < cb.size(); ++u) {
      EXPECT_LE(std::abs(v->chunk_before[u] - cb[u] / n), 1e-12);
      EXPECT_LE(std::abs(v->chunk_after[u] - ca[u] / n), 1e-12);
      EXPECT_LT(v->chunk_after[u], v->chunk_before[u]) << "update " << u;
    }
    for (std::size_t t = 0; t < 40; ++t)
      if (t % 8 != 0 || t == 0) {
        EXPECT_EQ(v->la[0][t], v->lb[0][t]) << "t = " << t << " is inside a chunk";
      }
  } else {
    EXPECT_TRUE(v->chunk_at.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(EveryMemberButTtt, MemberCurves,
                         ::testing::Values("linear_attention", "mamba2", "deltanet",
                                           "gated_deltanet", "titans", "lact"));

// TTT's curves are the model's primal form observed block by block, exactly as before members: the
// same windows streamed in pieces of 64 tokens, the same sums, the same division, compared bit for bit.
TEST(MemberCurvesTtt, TttCurvesAreTheModelsObservedPrimalFormBitForBit) {
  auto lib = std::make_shared<ModelLibrary>();
  CurvesSettings s;
  s.data = "sample";
  s.seq_len = 96;
  s.sequences = 2;
  ASSERT_TRUE(s.ttt()) << "TTT is the default";
  const auto v = mc_curves(s, lib);
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  EXPECT_TRUE(v->member.empty());
  const auto model = lib->get(kShippedModelId);
  const auto data = load_data(s.data, s.seq_len);
  const SequentialWindows windows(std::span<const std::uint8_t>(data->val), 1, s.seq_len,
                                  s.sequences);
  const std::size_t B = static_cast<std::size_t>(model->config().num_hidden_layers);
  std::vector<std::vector<double>> s0(B, std::vector<double>(96, 0.0)), sb = s0, sa = s0;
  for (long w = 0; w < windows.windows(); ++w) {
    const TokenBatch b = windows.batch_at(w);
    const auto row = b.row(0);
    const std::vector<int> tokens(row.begin(), row.begin() + s.seq_len);
    auto stream = model->start();
    for (long pos = 0; pos < s.seq_len; pos += 64) {
      const long n = std::min(64L, static_cast<long>(s.seq_len) - pos);
      model->forward(*stream,
                     std::span<const int>(tokens.data() + pos, static_cast<std::size_t>(n)),
                     [&](int block, int, const InnerStepRecord<float>& r) {
                       const std::size_t t = static_cast<std::size_t>(pos + r.token);
                       s0[static_cast<std::size_t>(block)][t] += r.loss_initial;
                       sb[static_cast<std::size_t>(block)][t] += r.loss_before;
                       sa[static_cast<std::size_t>(block)][t] += r.loss_after;
                     });
    }
  }
  const double n = static_cast<double>(windows.windows()) * model->config().num_attention_heads;
  ASSERT_EQ(v->l0.size(), B);
  for (std::size_t bl = 0; bl < B; ++bl)
    for (std::size_t t = 0; t < 96; ++t) {
      EXPECT_EQ(v->l0[bl][t], s0[bl][t] / n) << "block " << bl << " t = " << t;
      EXPECT_EQ(v->lb[bl][t], sb[bl][t] / n) << "block " << bl << " t = " << t;
      EXPECT_EQ(v->la[bl][t], sa[bl][t] / n) << "block " << bl << " t = " << t;
    }
}

TEST(MemberCurvesSettings, AMemberRoundTripsAndAnUnknownOneFailsWithTheList) {
  CurvesPanelSettings p = CurvesPanelSettings::defaults();
  p.run = mc_member_settings("titans");
  const nlohmann::json j = p.to_json();
  const CurvesPanelSettings back = CurvesPanelSettings::from(FieldReader(j, "inner_curves"));
  EXPECT_EQ(back.run, p.run);
  const CurvesPanelSettings old =
      CurvesPanelSettings::from(FieldReader(nlohmann::json::object(), "inner_curves"));
  EXPECT_TRUE(old.run.ttt()) << "a state file without \"member\" opens as TTT";
  const auto v = mc_curves(mc_member_settings("nonsense"), std::make_shared<ModelLibrary>());
  EXPECT_EQ(v->outcome, JobOutcome::Failed);
  EXPECT_NE(v->error.find("deltanet"), std::string::npos) << v->error;
}

}  // namespace
}  // namespace tttlab::lab
