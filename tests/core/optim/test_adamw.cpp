// AdamW and the warmup-cosine schedule: schedule endpoints and midpoint, two updates checked against
// the formulas evaluated independently here, clipping, optax's zero first learning rate, skipped
// non-finite steps, and bit-identical continuation from a saved state (float and double).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "tttlab/io/safetensors.hpp"
#include "tttlab/optim/adamw.hpp"

namespace tttlab {
namespace {

TEST(WarmupCosineSchedule, EndpointsWarmupAndMidpoint) {
  WarmupCosineSchedule s{.init_value = 0.0, .peak_value = 1e-3, .warmup_steps = 10, .decay_steps = 110, .end_value = 1e-5};
  EXPECT_EQ(s(0), 0.0);
  EXPECT_NEAR(s(5), 5e-4, 1e-18);
  EXPECT_NEAR(s(9), 9e-4, 1e-18);
  EXPECT_NEAR(s(10), 1e-3, 1e-18);               // peak at the end of warmup
  EXPECT_NEAR(s(60), (1e-3 + 1e-5) / 2, 1e-15);  // cosine midpoint
  // A quarter into the decay: end + (peak − end)·½(1 + cos(π/4)).
  EXPECT_NEAR(s(35), 1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + std::cos(std::numbers::pi / 4)), 1e-15);
  EXPECT_NEAR(s(110), 1e-5, 1e-18);
  EXPECT_NEAR(s(100000), 1e-5, 1e-18);  // stays at the end value
  EXPECT_EQ(s(-3), 0.0);
  for (std::int64_t c = 10; c < 110; ++c) EXPECT_GE(s(c), s(c + 1)) << "decay must not increase at " << c;
}

TEST(WarmupCosineSchedule, NoWarmupStartsAtPeakAndOfficialShape) {
  WarmupCosineSchedule s{.init_value = 0.0, .peak_value = 0.5, .warmup_steps = 0, .decay_steps = 4, .end_value = 0.1};
  EXPECT_NEAR(s(0), 0.5, 1e-15);
  EXPECT_NEAR(s(2), 0.3, 1e-15);
  EXPECT_NEAR(s(4), 0.1, 1e-15);
  const auto o = WarmupCosineSchedule::official(3e-3, 1000);
  EXPECT_EQ(o.warmup_steps, 100);
  EXPECT_EQ(o.decay_steps, 1000);
  EXPECT_EQ(o.end_value, 1e-5);
  EXPECT_NEAR(o(100), 3e-3, 1e-18);
}

TEST(WarmupCosineSchedule, Validation) {
  EXPECT_THROW((WarmupCosineSchedule{.init_value = 0, .peak_value = 1, .warmup_steps = 10, .decay_steps = 10, .end_value = 0}.validate()),
               std::invalid_argument);
  EXPECT_THROW((WarmupCosineSchedule{.init_value = 0, .peak_value = 1, .warmup_steps = -1, .decay_steps = 10, .end_value = 0}.validate()),
               std::invalid_argument);
  EXPECT_THROW((WarmupCosineSchedule{.init_value = 0, .peak_value = -1, .warmup_steps = 0, .decay_steps = 10, .end_value = 0}.validate()),
               std::invalid_argument);
}

// A schedule whose first learning rates are easy to state: no warmup, peak 0.1.
WarmupCosineSchedule flat_start() {
  return {.init_value = 0.0, .peak_value = 0.1, .warmup_steps = 0, .decay_steps = 1000, .end_value = 1e-5};
}

template <class S>
class AdamWTyped : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AdamWTyped, Scalars);

TYPED_TEST(AdamWTyped, TwoStepsMatchTheFormulas) {
  using S = TypeParam;
  std::vector<S> w = {S(0.5), S(-1.0), S(2.0)}, b = {S(0.25)};
  const std::vector<std::vector<S>> gw = {{S(0.1), S(-0.2), S(0.05)}, {S(-0.3), S(0.1), S(0.2)}};
  const std::vector<std::vector<S>> gb = {{S(0.4)}, {S(0.1)}};
  const AdamWConfig cfg{.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .clip_norm = 0};
  const WarmupCosineSchedule sched = flat_start();
  AdamW<S> opt(cfg, sched);

  // Reference in double, written out from the AdamW definition.
  std::vector<double> p = {0.5, -1.0, 2.0, 0.25}, m(4, 0.0), v(4, 0.0);
  for (int step = 0; step < 2; ++step) {
    const std::vector<double> g = {double(gw[step][0]), double(gw[step][1]), double(gw[step][2]), double(gb[step][0])};
    const double lr = 0.1 * ((1 - 1e-4) * 0.5 * (1 + std::cos(std::numbers::pi * step / 1000.0)) + 1e-4);
    for (int j = 0; j < 4; ++j) {
      m[j] = 0.9 * m[j] + 0.1 * g[j];
      v[j] = 0.95 * v[j] + 0.05 * g[j] * g[j];
      const double mhat = m[j] / (1 - std::pow(0.9, step + 1)), vhat = v[j] / (1 - std::pow(0.95, step + 1));
      p[j] -= lr * (mhat / (std::sqrt(vhat) + 1e-8) + 0.1 * p[j]);
    }
    const std::vector<NamedParam<S>> params = {{"w", w, gw[step]}, {"b", b, gb[step]}};
    const AdamWReport r = opt.step(params);
    EXPECT_EQ(r.step, step + 1);
    EXPECT_NEAR(r.lr, lr, 1e-15);
    EXPECT_FALSE(r.skipped);
    EXPECT_EQ(r.clip_scale, 1.0);
    const double tol = std::is_same_v<S, float> ? 2e-7 : 1e-15;
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(double(w[j]), p[j], tol) << "step " << step << " w" << j;
    EXPECT_NEAR(double(b[0]), p[3], tol) << "step " << step << " b";
    // The first step by hand: m̂ = g, v̂ = g², so p1 = p0 − lr·(g/(|g| + ε) + wd·p0) with lr = 0.1:
    // w0 = 0.5 − 0.1·(0.1/(0.1 + 1e-8) + 0.05) = 0.39500001 (to 1e-8).
    const double hand_tol = std::is_same_v<S, float> ? 1e-7 : 1e-9;
    if (step == 0) {
      EXPECT_NEAR(double(w[0]), 0.39500001, hand_tol);
    }
  }
}

TYPED_TEST(AdamWTyped, ClipsByGlobalNormAndReportsThePreClipNorm) {
  using S = TypeParam;
  // Gradient norm √(3² + 4²) = 5 over two tensors; clip at 1 scales by 0.2.
  std::vector<S> a = {S(1)}, b = {S(1)}, a2 = a, b2 = b;
  const std::vector<S> ga = {S(3)}, gb = {S(4)}, ga_small = {S(0.6)}, gb_small = {S(0.8)};
  AdamW<S> clipped({.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .clip_norm = 1.0}, flat_start());
  AdamW<S> plain({.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .clip_norm = 0}, flat_start());
  for (int k = 0; k < 3; ++k) {
    const std::vector<NamedParam<S>> p1 = {{"a", a, ga}, {"b", b, gb}};
    const auto r = clipped.step(p1);
    EXPECT_NEAR(r.grad_norm, 5.0, 1e-12);
    EXPECT_NEAR(r.clip_scale, 0.2, 1e-12);
    const std::vector<NamedParam<S>> p2 = {{"a", a2, ga_small}, {"b", b2, gb_small}};
    plain.step(p2);
  }
  const double tol = std::is_same_v<S, float> ? 1e-6 : 1e-14;
  EXPECT_NEAR(double(a[0]), double(a2[0]), tol);
  EXPECT_NEAR(double(b[0]), double(b2[0]), tol);
  EXPECT_NEAR(double(clipped.state().m[0][0]), double(plain.state().m[0][0]), tol);  // moments see clipped grads
  // Below the threshold nothing is scaled.
  std::vector<S> c = {S(0)};
  const std::vector<S> gc = {S(0.5)};
  AdamW<S> opt({}, flat_start());
  const std::vector<NamedParam<S>> pc = {{"c", c, gc}};
  EXPECT_EQ(opt.step(pc).clip_scale, 1.0);
}

TYPED_TEST(AdamWTyped, OptaxFirstUpdateHasZeroLearningRateDuringWarmup) {
  using S = TypeParam;
  std::vector<S> w = {S(1), S(2)};
  const std::vector<S> g = {S(0.1), S(0.1)};
  AdamW<S> opt({}, WarmupCosineSchedule::official(1e-3, 100));
  const std::vector<NamedParam<S>> p = {{"w", w, g}};
  EXPECT_EQ(opt.next_lr(), 0.0);
  const auto r = opt.step(p);
  EXPECT_EQ(r.lr, 0.0);
  EXPECT_EQ(w[0], S(1));  // unchanged: lr(0) = 0
  EXPECT_NE(opt.state().m[0][0], S(0));  // but the moments moved
  EXPECT_NEAR(opt.next_lr(), 1e-4, 1e-18);  // lr(1) = peak / 10
}

TYPED_TEST(AdamWTyped, NonFiniteGradientSkipsTheUpdate) {
  using S = TypeParam;
  std::vector<S> w = {S(1), S(2)};
  const std::vector<S> good = {S(0.1), S(0.2)};
  const std::vector<S> bad = {S(0.1), std::numeric_limits<S>::quiet_NaN()};
  AdamW<S> opt({}, flat_start());
  const std::vector<NamedParam<S>> pg = {{"w", w, good}}, pb = {{"w", w, bad}};
  opt.step(pg);
  const auto before_w = w;
  const auto before = opt.state();
  const auto r = opt.step(pb);
  EXPECT_TRUE(r.skipped);
  EXPECT_EQ(r.step, 1);
  EXPECT_EQ(w, before_w);
  EXPECT_EQ(opt.state().m, before.m);
  EXPECT_EQ(opt.step_count(), 1);
}

TYPED_TEST(AdamWTyped, RejectsChangedParameterLists) {
  using S = TypeParam;
  std::vector<S> w = {S(1), S(2)}, w3 = {S(1), S(2), S(3)};
  const std::vector<S> g = {S(0.1), S(0.1)}, g3 = {S(0.1), S(0.1), S(0.1)};
  AdamW<S> opt({}, flat_start());
  const std::vector<NamedParam<S>> p = {{"w", w, g}};
  opt.step(p);
  const std::vector<NamedParam<S>> renamed = {{"u", w, g}}, resized = {{"w", w3, g3}}, more = {{"w", w, g}, {"x", w, g}};
  EXPECT_THROW(opt.step(renamed), std::invalid_argument);
  EXPECT_THROW(opt.step(resized), std::invalid_argument);
  EXPECT_THROW(opt.step(more), std::invalid_argument);
  const std::vector<NamedParam<S>> mismatched = {{"w", w, g3}};
  EXPECT_THROW(opt.step(mismatched), std::invalid_argument);
}

TYPED_TEST(AdamWTyped, SavedStateContinuesBitIdentically) {
  using S = TypeParam;
  auto grads = [](int step, std::size_t n) {
    std::vector<S> g(n);
    for (std::size_t j = 0; j < n; ++j) g[j] = S(std::sin(0.7 * double(step) + 1.3 * double(j)));
    return g;
  };
  const AdamWConfig cfg{};
  const WarmupCosineSchedule sched{.init_value = 0, .peak_value = 1e-2, .warmup_steps = 3, .decay_steps = 20, .end_value = 1e-5};
  std::vector<S> w(7, S(0.3)), b(2, S(-0.1));
  AdamW<S> a(cfg, sched);
  for (int s = 0; s < 5; ++s) {
    const auto gw = grads(s, w.size()), gb = grads(s + 100, b.size());
    const std::vector<NamedParam<S>> p = {{"layer.w", w, gw}, {"layer.b", b, gb}};
    a.step(p);
  }
  // Save to a safetensors image and restore into a fresh optimizer with copies of the parameters.
  SafetensorsWriter writer;
  a.state().save(writer);
  const SafetensorsFile file = SafetensorsFile::parse(writer.serialize(), "optimizer.safetensors");
  AdamW<S> resumed(cfg, sched);
  resumed.load_state(AdamWState<S>::load(file));
  EXPECT_EQ(resumed.step_count(), 5);
  std::vector<S> w2 = w, b2 = b;
  for (int s = 5; s < 12; ++s) {
    const auto gw = grads(s, w.size()), gb = grads(s + 100, b.size());
    const std::vector<NamedParam<S>> p = {{"layer.w", w, gw}, {"layer.b", b, gb}};
    const std::vector<NamedParam<S>> p2 = {{"layer.w", w2, gw}, {"layer.b", b2, gb}};
    const auto r1 = a.step(p), r2 = resumed.step(p2);
    EXPECT_EQ(r1.lr, r2.lr);
  }
  EXPECT_EQ(w, w2);  // exact equality: bit-identical continuation
  EXPECT_EQ(b, b2);
  EXPECT_EQ(a.state().m, resumed.state().m);
  EXPECT_EQ(a.state().v, resumed.state().v);
}

TEST(AdamWState, LoadRefusesInconsistentFiles) {
  SafetensorsWriter w;
  const std::vector<float> m = {1, 2};
  w.add("optim.m.x", {2}, m);
  w.set_metadata("optim.type", "adamw");
  w.set_metadata("optim.step", "3");
  const auto f = SafetensorsFile::parse(w.serialize(), "opt.safetensors");
  try {
    AdamWState<float>::load(f);
    FAIL();
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find("second moment of 'x' is missing"), std::string::npos) << e.what();
  }
  EXPECT_THROW(AdamWState<double>::load(f), SafetensorsError);  // F32 moments for a double optimizer
  SafetensorsWriter w2;
  w2.set_metadata("optim.type", "adamw");
  w2.set_metadata("optim.step", "-1");
  EXPECT_THROW(AdamWState<float>::load(SafetensorsFile::parse(w2.serialize())), SafetensorsError);
}

}  // namespace
}  // namespace tttlab
