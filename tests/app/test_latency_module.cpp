// The Latency lab's engine module (app/lab/latency/latency_module.hpp): every point of every curve is
// measured, in order of T; its settings in a state file; and the lesson measures read off its view
// (the crossover and growth ratios on a view with known times).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "course/experiments.hpp"
#include "lab/engine/engine.hpp"
#include "lab/latency/latency_module.hpp"
#include "lab/latency/latency_settings.hpp"

namespace tttlab::lab {
namespace {

using namespace std::chrono_literals;

LatencySettings small_settings() {
  LatencySettings s;
  s.layers = {"ttt-linear", "softmax-attention", "mamba2"};
  s.max_context = 192;  // 64, 128 and 192 itself
  s.repeats = 2;
  s.decode_tokens = 3;
  s.seed = 5;
  return s;
}

std::shared_ptr<const LatencyView> compute(const LatencySettings& s) {
  std::vector<std::unique_ptr<EngineModule>> m;
  m.push_back(std::make_unique<LatencyModule>());
  Engine e(std::move(m));
  e.start();
  e.post(LatencyRun{s});
  EXPECT_TRUE(e.wait_quiescent(120s));
  auto v = e.snapshot()->latency;
  e.stop();
  return v;
}

TEST(LatencyModule, ContextsDoubleFrom64AndEndAtTheLargest) {
  EXPECT_EQ(latency_contexts(64), (std::vector<int>{64}));
  EXPECT_EQ(latency_contexts(2048), (std::vector<int>{64, 128, 256, 512, 1024, 2048}));
  EXPECT_EQ(latency_contexts(320), (std::vector<int>{64, 128, 256, 320}));
}

TEST(LatencyModule, PerTokenTimesDivideEveryRunByItsTokens) {
  const PerTokenTime p = per_token({4.0, 2.0, 8.0, 6.0, 10.0}, 1000.0, 1);
  EXPECT_DOUBLE_EQ(p.median_us, 6.0);  // 6 ms over 1000 tokens: 6 µs a token
  EXPECT_DOUBLE_EQ(p.min_us, 2.0);
  EXPECT_DOUBLE_EQ(p.max_us, 10.0);
  EXPECT_DOUBLE_EQ(p.q1_us, 4.0);
  EXPECT_DOUBLE_EQ(p.q3_us, 8.0);
  EXPECT_EQ(p.samples, 5);
  const PerTokenTime two = per_token({1.0, 3.0}, 1.0, 0);
  EXPECT_DOUBLE_EQ(two.q1_us, 1500.0);  // a quarter of the way from 1 to 3 ms
  EXPECT_DOUBLE_EQ(two.q3_us, 2500.0);
  EXPECT_EQ(p.warmup, 1);
  EXPECT_FALSE(per_token({}, 10.0, 0).measured());
}

TEST(LatencyModule, MeasuresEveryLayerAtEveryContextOnTheCpu) {
  const LatencySettings s = small_settings();
  const auto v = compute(s);
  ASSERT_TRUE(v);
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  EXPECT_EQ(v->contexts, (std::vector<int>{64, 128, 192}));
  EXPECT_TRUE(v->gpu_device.empty()) << "a module built alone computes on the CPU";
  ASSERT_EQ(v->curves.size(), 3u);
  for (std::size_t i = 0; i < v->curves.size(); ++i) {
    const LatencyCurve& c = v->curves[i];
    SCOPED_TRACE(c.layer);
    EXPECT_EQ(c.layer, s.layers[i]);
    EXPECT_GT(c.params, 100000);
    ASSERT_EQ(c.points.size(), 3u);
    for (std::size_t j = 0; j < c.points.size(); ++j) {
      const LatencyPoint& p = c.points[j];
      EXPECT_EQ(p.T, v->contexts[j]);
      EXPECT_EQ(p.prefill.samples, s.repeats);
      EXPECT_EQ(p.decode.samples, s.decode_tokens);
      for (const PerTokenTime* t : {&p.prefill, &p.decode}) {
        EXPECT_GT(t->median_us, 0.0);
        EXPECT_LE(t->min_us, t->q1_us);
        EXPECT_LE(t->q1_us, t->median_us);
        EXPECT_LE(t->median_us, t->q3_us);
        EXPECT_LE(t->q3_us, t->max_us);
      }
      // The references at T = 64, timed alternately with the largest T's runs, as many as they.
      if (p.T == 192) {
        EXPECT_EQ(p.prefill_ref.samples, s.repeats);
        EXPECT_EQ(p.decode_ref.samples, s.decode_tokens);
        EXPECT_GT(p.prefill_ref.median_us, 0.0);
        EXPECT_GT(p.decode_ref.median_us, 0.0);
      } else {
        EXPECT_FALSE(p.prefill_ref.measured());
        EXPECT_FALSE(p.decode_ref.measured());
      }
      EXPECT_FALSE(p.gpu_prefill.measured());
      EXPECT_FALSE(p.gpu_decode.measured());
    }
  }
  EXPECT_NE(v->model.find("tiny preset"), std::string::npos) << v->model;

  Snapshot snap;
  snap.latency = v;
  const auto m = course::read_measures("latency", snap);
  ASSERT_TRUE(m);
  const LatencyCurve& ttt = v->curves[0];
  const LatencyCurve& att = v->curves[1];
  EXPECT_DOUBLE_EQ(m->at("prefill_us_ttt_linear_T128").value, ttt.points[1].prefill.median_us);
  EXPECT_DOUBLE_EQ(*m->at("prefill_us_ttt_linear_T128").lo, ttt.points[1].prefill.min_us);
  EXPECT_TRUE(m->at("decode_us_mamba2_T192").depends_on_device);
  EXPECT_DOUBLE_EQ(m->at("decode_growth_softmax_attention").value,
                   att.points[2].decode.median_us / att.points[2].decode_ref.median_us);
  EXPECT_DOUBLE_EQ(m->at("prefill_growth_ttt_linear").value,
                   ttt.points[2].prefill.median_us / ttt.points[2].prefill_ref.median_us);
  EXPECT_DOUBLE_EQ(
      m->at("prefill_growth_attention_over_ttt").value,
      m->at("prefill_growth_softmax_attention").value / m->at("prefill_growth_ttt_linear").value);
  EXPECT_DOUBLE_EQ(
      m->at("decode_growth_attention_over_ttt").value,
      m->at("decode_growth_softmax_attention").value / m->at("decode_growth_ttt_linear").value);
  EXPECT_DOUBLE_EQ(m->at("max_context").value, 192.0);
  EXPECT_DOUBLE_EQ(
      m->at("decode_over_prefill_mamba2").value,
      v->curves[2].points[2].decode.median_us / v->curves[2].points[2].prefill.median_us);
  EXPECT_TRUE(m->at("decode_over_prefill_mamba2").depends_on_device);
  EXPECT_FALSE(m->count("prefill_us_ttt_mlp_T64")) << "only the run's layers";
  // While it runs there are no measures yet.
  auto running = std::make_shared<LatencyView>(*v);
  running->outcome = JobOutcome::Running;
  snap.latency = running;
  EXPECT_FALSE(course::read_measures("latency", snap));
}

// A view with chosen medians: the crossover is the T from which TTT-Linear stays below attention.
std::shared_ptr<LatencyView> view_with(const std::vector<double>& ttt,
                                       const std::vector<double>& att) {
  auto v = std::make_shared<LatencyView>();
  v->outcome = JobOutcome::Done;
  v->contexts = latency_contexts(64 << (ttt.size() - 1));
  for (const auto& [layer, us] :
       {std::pair{"ttt-linear", ttt}, std::pair{"softmax-attention", att}}) {
    LatencyCurve c;
    c.layer = layer;
    for (std::size_t i = 0; i < us.size(); ++i) {
      LatencyPoint p;
      p.T = v->contexts[i];
      p.prefill = per_token({us[i]}, 1e-3, 0);
      p.decode = per_token({2 * us[i]}, 1e-3, 0);
      p.prefill_ref = per_token({us[0]}, 1e-3, 0);  // as if the load never changed
      p.decode_ref = per_token({2 * us[0]}, 1e-3, 0);
      c.points.push_back(p);
    }
    v->curves.push_back(c);
  }
  return v;
}

TEST(LatencyModule, CrossoverIsWhereTttStaysBelowAttention) {
  Snapshot snap;
  // Below at 64 by noise, above at 128, below from 256 on: the crossover is 256, not 64.
  snap.latency = view_with({1.0, 1.0, 1.0, 1.0}, {1.1, 0.9, 1.5, 3.0});
  auto m = course::read_measures("latency", snap);
  ASSERT_TRUE(m);
  EXPECT_DOUBLE_EQ(m->at("prefill_crossover").value, 256.0);
  EXPECT_DOUBLE_EQ(m->at("decode_crossover").value, 256.0);
  EXPECT_TRUE(m->at("prefill_crossover").depends_on_device);
  EXPECT_DOUBLE_EQ(m->at("prefill_ttt_over_attention_max").value, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(m->at("prefill_growth_softmax_attention").value, 3.0 / 1.1);
  EXPECT_FALSE(m->at("prefill_growth_softmax_attention").depends_on_device);
  // Never below at the largest T: -1.
  snap.latency = view_with({1.0, 1.0, 1.0}, {2.0, 2.0, 0.5});
  m = course::read_measures("latency", snap);
  EXPECT_DOUBLE_EQ(m->at("prefill_crossover").value, -1.0);
}

TEST(LatencyModule, SettingsRoundTripAndBadOnesFailTheViewAndTheStateFile) {
  const nlohmann::json good = to_json(small_settings());
  EXPECT_EQ(good["layers"], nlohmann::json({"ttt-linear", "softmax-attention", "mamba2"}));
  EXPECT_EQ(latency_settings_from(FieldReader(good, "panels.latency"), LatencySettings{}),
            small_settings());
  for (const auto& [key, bad] :
       std::vector<std::pair<std::string, nlohmann::json>>{{"layers", {"lstm"}},
                                                           {"layers", {"mamba2", "mamba2"}},
                                                           {"layers", nlohmann::json::array()},
                                                           {"max_context", 100},
                                                           {"max_context", 32},
                                                           {"max_context", 32768},
                                                           {"decode_tokens", 64},
                                                           {"repeats", 0},
                                                           {"preset", "125m"}}) {
    nlohmann::json j = good;
    j[key] = bad;
    try {
      (void)latency_settings_from(FieldReader(j, "panels.latency"), LatencySettings{});
      ADD_FAILURE() << key << " = " << bad.dump() << " was accepted";
    } catch (const StateError& e) {
      EXPECT_NE(std::string(e.what()).find("panels.latency"), std::string::npos) << e.what();
    }
  }
  LatencySettings s = small_settings();
  s.max_context = 100;
  const auto v = compute(s);
  EXPECT_EQ(v->outcome, JobOutcome::Failed);
  EXPECT_NE(v->error.find("multiple of 64"), std::string::npos) << v->error;
}

}  // namespace
}  // namespace tttlab::lab
