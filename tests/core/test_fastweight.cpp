// The fast-weight template (tttlab/fastweight/, docs/MATH.md §11): the rule's spellings, presets and
// nearest member; the matrix-state inner loops' primal and chunked forms against each other in fp64,
// their manual backward against central differences, and the special cases that pin the conventions
// (DeltaNet recalls exactly with β = 1 and orthonormal keys, the gates at 1 reduce one member to
// another bit for bit, DeltaNet is TTT-Linear with b = 1 (docs/MATH.md §9.3), the decayed Hebbian
// rule is the Mamba-2 scan (§8.8)).
#include <gtest/gtest.h>

#include <Eigen/QR>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tttlab/fastweight/matrix_rules.hpp"
#include "tttlab/fastweight/rule.hpp"
#include "tttlab/seq/mamba2_layer.hpp"
#include "tttlab/ttt/inner.hpp"

namespace tttlab {
namespace {

// Prints the seed so that a failure can be replayed.
std::uint64_t fw_announce(std::uint64_t seed) {
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

Mat<double> fw_randn(Eigen::Index r, Eigen::Index c, std::mt19937_64& rng, double scale = 1.0) {
  std::normal_distribution<double> n(0.0, scale);
  Mat<double> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = n(rng);
  return m;
}

Vec<double> uniform(Eigen::Index n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(lo, hi);
  Vec<double> x(n);
  for (Eigen::Index i = 0; i < n; ++i) x(i) = u(rng);
  return x;
}

// max|a − b| / max|b|: the relative error of the whole tensor.
double rel_err(const Mat<double>& a, const Mat<double>& b) {
  const double scale = b.cwiseAbs().maxCoeff();
  const double diff = (a - b).cwiseAbs().maxCoeff();
  return scale > 0 ? diff / scale : diff;
}

constexpr std::array<MatrixRule, 4> kRules{MatrixRule::LinearAttention, MatrixRule::DecayedHebbian,
                                           MatrixRule::DeltaNet, MatrixRule::GatedDeltaNet};

// One head's inputs. Keys are L2-normalised for the delta rules unless `raw_keys`, as DeltaNet and
// Gated DeltaNet normalise them (docs/MATH.md §11.2).
struct Inputs {
  Mat<double> q, k, v, S0;
  Vec<double> beta, alpha;
};

Inputs make_inputs(MatrixRule rule, int T, int dk, int dv, std::mt19937_64& rng,
                   bool raw_keys = false, double beta_lo = 0.05, double beta_hi = 0.95) {
  Inputs in;
  in.q = fw_randn(T, dk, rng);
  in.k = fw_randn(T, dk, rng);
  in.v = fw_randn(T, dv, rng);
  in.S0 = fw_randn(dk, dv, rng, 0.5);
  if (is_delta_rule(rule) && !raw_keys) in.k.rowwise().normalize();
  if (uses_beta(rule)) in.beta = uniform(T, beta_lo, beta_hi, rng);
  if (uses_alpha(rule)) in.alpha = uniform(T, 0.7, 1.0, rng);
  return in;
}

// ---- The template ---------------------------------------------------------------------------------

TEST(FastWeightRule, PresetsFollowTheTableAndAreDistinct) {
  const std::vector<FastWeightPreset>& p = fast_weight_presets();
  const std::vector<std::string> ids{"linear_attention", "mamba2",  "deltanet", "gated_deltanet",
                                     "ttt_linear",       "ttt_mlp", "titans",   "lact"};
  ASSERT_EQ(p.size(), ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(p[i].id, ids[i]);
    EXPECT_EQ(&fast_weight_preset(ids[i]), &p[i]);
    for (std::size_t j = 0; j < i; ++j) EXPECT_FALSE(p[i].rule == p[j].rule) << ids[i] << ids[j];
  }
  EXPECT_THROW(fast_weight_preset("mamba"), std::invalid_argument);
  // Where core computes each member's inner loop.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(p[i].inner_loop, "tttlab/fastweight/matrix_rules.hpp");
  EXPECT_EQ(p[4].inner_loop, "tttlab/ttt/inner.hpp");
  EXPECT_EQ(p[5].inner_loop, "tttlab/ttt/inner.hpp");
  EXPECT_EQ(p[6].inner_loop, "tttlab/fastweight/titans.hpp");
  EXPECT_EQ(p[7].inner_loop, "tttlab/fastweight/lact.hpp");
  // Titans' row is the paper's memory (an MLP with a squared loss); titans.hpp computes
  // flash-linear-attention's linear memory with TTT's LN + residual loss, as its note says.
  EXPECT_EQ(to_string(fast_weight_preset("titans").rule),
            "state=mlp loss=squared retention=weight_decay optimizer=momentum "
            "rate=per_token granularity=mini_batch");
  EXPECT_NE(fast_weight_preset("titans").note.find("linear memory"), std::string::npos);
  EXPECT_EQ(fast_weight_preset("gated_deltanet").rule.retention, FastWeightRetention::ScalarDecay);
  EXPECT_EQ(fast_weight_preset("ttt_linear").rule.granularity, FastWeightGranularity::MiniBatch);
}

TEST(FastWeightRule, ToStringAndParseRoundTrip) {
  for (const FastWeightPreset& p : fast_weight_presets()) {
    const std::string s = to_string(p.rule);
    EXPECT_EQ(parse_fast_weight_rule(s), p.rule) << s;
  }
  EXPECT_EQ(to_string(fast_weight_preset("deltanet").rule),
            "state=matrix loss=squared retention=none optimizer=gd rate=per_token "
            "granularity=exact_chunk");
  // Any order, extra spaces.
  const FastWeightRule r = parse_fast_weight_rule(
      " granularity=large_chunk rate=fixed  optimizer=muon retention=weight_decay "
      "loss=dot_product state=mlp");
  EXPECT_EQ(r.state, FastWeightState::Mlp);
  EXPECT_EQ(r.loss, FastWeightLoss::DotProduct);
  EXPECT_EQ(r.retention, FastWeightRetention::WeightDecay);
  EXPECT_EQ(r.optimizer, FastWeightOptimizer::Muon);
  EXPECT_EQ(r.rate, FastWeightRate::Fixed);
  EXPECT_EQ(r.granularity, FastWeightGranularity::LargeChunk);
  EXPECT_EQ(parse_fast_weight_loss("ttt_ln_residual"), FastWeightLoss::TttLnResidual);
  EXPECT_EQ(parse_fast_weight_retention("channel_decay"), FastWeightRetention::ChannelDecay);
  EXPECT_EQ(parse_fast_weight_rate("per_position"), FastWeightRate::PerPosition);
  EXPECT_THROW(parse_fast_weight_loss("squares"), std::invalid_argument);
  EXPECT_THROW(parse_fast_weight_rule("state=matrix"), std::invalid_argument);  // missing parts
  EXPECT_THROW(parse_fast_weight_rule(to_string(FastWeightRule{}) + " state=mlp"),
               std::invalid_argument);  // given twice
  EXPECT_THROW(parse_fast_weight_rule("colour=red"), std::invalid_argument);
  EXPECT_THROW(parse_fast_weight_rule("state"), std::invalid_argument);
}

TEST(FastWeightRule, NearestMemberOfEveryPresetIsItself) {
  for (const FastWeightPreset& p : fast_weight_presets()) {
    const NearestMember nm = nearest_member(p.rule);
    EXPECT_EQ(nm.preset, &p) << p.id;
    EXPECT_EQ(nm.common, 6);
    EXPECT_TRUE(nm.differs.empty());
  }
}

// Every rule one component away from a preset: the nearest member shares at least 5 components, and
// it is the original unless another preset is at least as near and earlier in the table, or nearer
// (counted here independently). Some one-component changes land on another member (TTT-Linear with
// an MLP state is TTT-MLP; DeltaNet with a scalar decay is Gated DeltaNet): those name that member.
TEST(FastWeightRule, OneComponentChangeNamesTheOriginal) {
  const std::vector<FastWeightPreset>& presets = fast_weight_presets();
  auto common = [](const FastWeightRule& a, const FastWeightRule& b) {
    return int(a.state == b.state) + int(a.loss == b.loss) + int(a.retention == b.retention) +
           int(a.optimizer == b.optimizer) + int(a.rate == b.rate) +
           int(a.granularity == b.granularity);
  };
  int changes = 0, named_original = 0;
  for (const FastWeightPreset& p : presets) {
    std::vector<std::pair<FastWeightRule, std::string>> variants;
    for (int v = 0; v < 2; ++v) {
      FastWeightRule r = p.rule;
      r.state = FastWeightState(v);
      if (!(r == p.rule)) variants.emplace_back(r, "state");
    }
    for (int v = 0; v < 4; ++v) {
      FastWeightRule r = p.rule;
      r.loss = FastWeightLoss(v);
      if (!(r == p.rule)) variants.emplace_back(r, "loss");
      r = p.rule;
      r.retention = FastWeightRetention(v);
      if (!(r == p.rule)) variants.emplace_back(r, "retention");
      r = p.rule;
      r.granularity = FastWeightGranularity(v);
      if (!(r == p.rule)) variants.emplace_back(r, "granularity");
    }
    for (int v = 0; v < 3; ++v) {
      FastWeightRule r = p.rule;
      r.optimizer = FastWeightOptimizer(v);
      if (!(r == p.rule)) variants.emplace_back(r, "optimizer");
      r = p.rule;
      r.rate = FastWeightRate(v);
      if (!(r == p.rule)) variants.emplace_back(r, "rate");
    }
    for (const auto& [r, comp] : variants) {
      ++changes;
      const NearestMember nm = nearest_member(r);
      ASSERT_NE(nm.preset, nullptr);
      EXPECT_GE(nm.common, 5);
      EXPECT_EQ(nm.common, common(r, nm.preset->rule));
      EXPECT_EQ(int(nm.differs.size()), 6 - nm.common);
      const FastWeightPreset* expected = nullptr;
      int best = -1;
      for (const FastWeightPreset& o : presets)
        if (common(r, o.rule) > best) best = common(r, o.rule), expected = &o;
      EXPECT_EQ(nm.preset, expected) << p.id << " with another " << comp;
      if (nm.preset == &p) {
        ++named_original;
        EXPECT_EQ(nm.differs, std::vector<std::string>{comp}) << p.id;
      }
    }
  }
  // Most one-component changes keep their member's name; the rest land on or tie with a neighbour.
  std::printf("[   INFO   ] %d of %d one-component changes name the original\n", named_original,
              changes);
  EXPECT_GT(named_original, changes * 3 / 4);
  FastWeightRule g = fast_weight_preset("gated_deltanet").rule;
  g.optimizer = FastWeightOptimizer::Momentum;
  const NearestMember nm = nearest_member(g);
  EXPECT_EQ(nm.preset->id, "gated_deltanet");
  EXPECT_EQ(nm.differs, std::vector<std::string>{"optimizer"});
  FastWeightRule t = fast_weight_preset("ttt_linear").rule;
  t.state = FastWeightState::Mlp;
  EXPECT_EQ(nearest_member(t).preset->id, "ttt_mlp");
  // DeltaNet with a Hebbian loss is one component from DeltaNet and one from Mamba-2: the tie goes to
  // Mamba-2, the earlier member of the table.
  FastWeightRule h = fast_weight_preset("deltanet").rule;
  h.loss = FastWeightLoss::Hebbian;
  EXPECT_EQ(nearest_member(h).preset->id, "mamba2");
  EXPECT_EQ(nearest_member(h).differs, std::vector<std::string>{"retention"});
}

TEST(FastWeightRule, MatrixRuleForMapsTheComputableRules) {
  EXPECT_EQ(matrix_rule_for(fast_weight_preset("linear_attention").rule),
            MatrixRule::LinearAttention);
  EXPECT_EQ(matrix_rule_for(fast_weight_preset("mamba2").rule), MatrixRule::DecayedHebbian);
  EXPECT_EQ(matrix_rule_for(fast_weight_preset("deltanet").rule), MatrixRule::DeltaNet);
  EXPECT_EQ(matrix_rule_for(fast_weight_preset("gated_deltanet").rule), MatrixRule::GatedDeltaNet);
  for (const char* id : {"ttt_linear", "ttt_mlp", "titans", "lact"})
    EXPECT_FALSE(matrix_rule_for(fast_weight_preset(id).rule).has_value()) << id;
  FastWeightRule r = fast_weight_preset("linear_attention").rule;
  r.rate = FastWeightRate::PerToken;  // a learned rate: the decayed Hebbian rule with α = 1
  EXPECT_EQ(matrix_rule_for(r), MatrixRule::DecayedHebbian);
  r = fast_weight_preset("deltanet").rule;
  r.granularity = FastWeightGranularity::MiniBatch;  // stale gradients: TTT's algorithm, not here
  EXPECT_FALSE(matrix_rule_for(r).has_value());
  r = fast_weight_preset("deltanet").rule;
  r.retention = FastWeightRetention::ChannelDecay;
  EXPECT_FALSE(matrix_rule_for(r).has_value());
  r = fast_weight_preset("gated_deltanet").rule;
  r.optimizer = FastWeightOptimizer::Momentum;
  EXPECT_FALSE(matrix_rule_for(r).has_value());
}

// ---- Primal vs chunked ----------------------------------------------------------------------------

struct FormsError {
  double o = 0, state = 0;
};

FormsError forms_error(MatrixRule rule, const Inputs& in, int C) {
  const MatrixRuleOutput<double> p =
      matrix_rule_primal<double>(rule, in.q, in.k, in.v, in.beta, in.alpha, in.S0);
  const MatrixRuleOutput<double> c =
      matrix_rule_chunked<double>(rule, in.q, in.k, in.v, in.beta, in.alpha, in.S0, C);
  return {rel_err(c.o, p.o), rel_err(c.state, p.state)};
}

// The two forms are the same function (docs/MATH.md §11.3): they agree to rounding for every chunk
// size and length, including T < C, C ∤ T and C = 1. The bound 1e-12 relative leaves a margin of
// about 100 over the sums' rounding (≤ 257 terms of O(1) in fp64, plus the triangular solve).
TEST(MatrixRuleForms, ChunkedEqualsPrimalInFp64) {
  std::mt19937_64 rng(fw_announce(4001));
  const int dk = 12, dv = 7;
  for (MatrixRule rule : kRules) {
    double worst = 0;
    for (int T : {1, 5, 64, 100, 257}) {
      const Inputs in = make_inputs(rule, T, dk, dv, rng);
      for (int C : {1, 4, 16, 64}) {
        const FormsError e = forms_error(rule, in, C);
        EXPECT_LE(e.o, 1e-12) << to_string(rule) << " T=" << T << " C=" << C;
        EXPECT_LE(e.state, 1e-12) << to_string(rule) << " T=" << T << " C=" << C;
        worst = std::max({worst, e.o, e.state});
      }
    }
    std::printf("[   INFO   ] %s: max relative primal-chunked difference %.2e\n", to_string(rule),
                worst);
  }
}

// The forms agree as algebra, not only where the recurrence is a contraction: raw (unnormalised)
// keys with ‖k‖² ≈ d_k and small β.
TEST(MatrixRuleForms, ChunkedEqualsPrimalWithRawKeys) {
  std::mt19937_64 rng(fw_announce(4002));
  const int dk = 12, dv = 7;
  for (MatrixRule rule : {MatrixRule::DeltaNet, MatrixRule::GatedDeltaNet}) {
    double worst = 0;
    for (int T : {5, 100, 257}) {
      const Inputs in = make_inputs(rule, T, dk, dv, rng, /*raw_keys=*/true, 0.005, 0.08);
      for (int C : {1, 4, 16, 64}) {
        const FormsError e = forms_error(rule, in, C);
        EXPECT_LE(e.o, 1e-12) << to_string(rule) << " T=" << T << " C=" << C;
        EXPECT_LE(e.state, 1e-12) << to_string(rule) << " T=" << T << " C=" << C;
        worst = std::max({worst, e.o, e.state});
      }
    }
    std::printf("[   INFO   ] %s, raw keys: max relative primal-chunked difference %.2e\n",
                to_string(rule), worst);
  }
}

// A sequence cut anywhere, each piece run by either form from the state the last one left, equals
// one primal run: the forms continue a stream (what decoding after a chunked prefill relies on).
TEST(MatrixRuleForms, PiecesInEitherFormContinueTheStream) {
  std::mt19937_64 rng(fw_announce(4011));
  const int T = 100, dk = 9, dv = 6;
  const std::vector<int> cuts{0, 13, 14, 50, 77, 100};
  for (MatrixRule rule : kRules) {
    const Inputs in = make_inputs(rule, T, dk, dv, rng);
    const MatrixRuleOutput<double> whole =
        matrix_rule_primal<double>(rule, in.q, in.k, in.v, in.beta, in.alpha, in.S0);
    Mat<double> state = in.S0, o(T, dv);
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      const int t0 = cuts[i], n = cuts[i + 1] - cuts[i];
      const Vec<double> b = uses_beta(rule) ? Vec<double>(in.beta.segment(t0, n)) : Vec<double>();
      const Vec<double> a = uses_alpha(rule) ? Vec<double>(in.alpha.segment(t0, n)) : Vec<double>();
      const Mat<double> q = in.q.middleRows(t0, n), k = in.k.middleRows(t0, n),
                        v = in.v.middleRows(t0, n);
      const MatrixRuleOutput<double> piece =
          i % 2 == 0 ? matrix_rule_chunked<double>(rule, q, k, v, b, a, state, 8)
                     : matrix_rule_primal<double>(rule, q, k, v, b, a, state);
      o.middleRows(t0, n) = piece.o;
      state = piece.state;
    }
    EXPECT_LE(rel_err(o, whole.o), 1e-12) << to_string(rule);
    EXPECT_LE(rel_err(state, whole.state), 1e-12) << to_string(rule);
  }
}

// Beyond the stable regime: raw keys (‖k‖² ≈ d_k = 12) with β ∈ (0.2, 0.5) make |1 − β‖k‖²| > 1, so
// the state grows along the keys by orders of magnitude over the sequence. The forms are still the
// same function and agree relative to the size of what they compute; the bound is the same 1e-12.
TEST(MatrixRuleForms, ChunkedEqualsPrimalWhileTheStateGrows) {
  std::mt19937_64 rng(fw_announce(4012));
  for (MatrixRule rule : {MatrixRule::DeltaNet, MatrixRule::GatedDeltaNet}) {
    double worst = 0, growth = 0;
    for (int T : {16, 64, 257}) {
      const Inputs in = make_inputs(rule, T, 12, 7, rng, /*raw_keys=*/true, 0.2, 0.5);
      const MatrixRuleOutput<double> p =
          matrix_rule_primal<double>(rule, in.q, in.k, in.v, in.beta, in.alpha, in.S0);
      growth = p.state.cwiseAbs().maxCoeff() / in.S0.cwiseAbs().maxCoeff();
      for (int C : {4, 16, 64}) {
        const FormsError e = forms_error(rule, in, C);
        EXPECT_LE(e.o, 1e-12) << to_string(rule) << " T=" << T << " C=" << C;
        EXPECT_LE(e.state, 1e-12) << to_string(rule) << " T=" << T << " C=" << C;
        worst = std::max({worst, e.o, e.state});
      }
    }
    std::printf("[   INFO   ] %s, growing state (x%.1e at T = 257): max relative difference %.2e\n",
                to_string(rule), growth, worst);
    EXPECT_GT(growth, 1e3) << to_string(rule);  // the regime is the one this test is about
  }
}

// fp32 instantiation against fp64 on the same (fp32-rounded) inputs. Basis of 2e-5: ~100 tokens of
// O(1) updates, each rounding at 6e-8 relative.
TEST(MatrixRuleForms, Fp32AgreesWithFp64) {
  std::mt19937_64 rng(fw_announce(4003));
  const int T = 100, dk = 12, dv = 7;
  for (MatrixRule rule : kRules) {
    Inputs in = make_inputs(rule, T, dk, dv, rng);
    const Mat<float> q = in.q.cast<float>(), k = in.k.cast<float>(), v = in.v.cast<float>(),
                     S0 = in.S0.cast<float>();
    const Vec<float> beta = in.beta.cast<float>(), alpha = in.alpha.cast<float>();
    const MatrixRuleOutput<double> ref =
        matrix_rule_primal<double>(rule, q.cast<double>(), k.cast<double>(), v.cast<double>(),
                                   beta.cast<double>(), alpha.cast<double>(), S0.cast<double>());
    const MatrixRuleOutput<float> p = matrix_rule_primal<float>(rule, q, k, v, beta, alpha, S0);
    const MatrixRuleOutput<float> c =
        matrix_rule_chunked<float>(rule, q, k, v, beta, alpha, S0, 16);
    EXPECT_LE(rel_err(p.o.cast<double>(), ref.o), 2e-5) << to_string(rule);
    EXPECT_LE(rel_err(c.o.cast<double>(), ref.o), 2e-5) << to_string(rule);
    EXPECT_LE(rel_err(c.state.cast<double>(), ref.state), 2e-5) << to_string(rule);
  }
}

// ---- Special cases that pin the conventions -------------------------------------------------------

// With β = 1 a unit key's write sets k S = v exactly (k(S − kᵀ(kS − v)) = kS − ‖k‖²(kS − v) = v), and
// later writes along orthogonal keys leave it: every pair is recalled from the final state.
TEST(MatrixRuleSpecial, DeltaNetWithBetaOneRecallsOrthonormalKeys) {
  std::mt19937_64 rng(fw_announce(4004));
  const int d = 8, dv = 5;
  const Mat<double> basis = Eigen::HouseholderQR<Mat<double>>(fw_randn(d, d, rng)).householderQ();
  Inputs in;
  in.k = basis.transpose();  // rows orthonormal
  in.q = in.k;
  in.v = fw_randn(d, dv, rng);
  in.S0 = fw_randn(d, dv, rng);
  in.beta = Vec<double>::Ones(d);
  for (int C : {0, 3}) {
    const MatrixRuleOutput<double> out =
        C == 0 ? matrix_rule_primal<double>(MatrixRule::DeltaNet, in.q, in.k, in.v, in.beta,
                                            in.alpha, in.S0)
               : matrix_rule_chunked<double>(MatrixRule::DeltaNet, in.q, in.k, in.v, in.beta,
                                             in.alpha, in.S0, C);
    EXPECT_LT((out.o - in.v).cwiseAbs().maxCoeff(), 1e-13);  // read after write: o_t = v_t
    EXPECT_LT((in.k * out.state - in.v).cwiseAbs().maxCoeff(), 1e-13);
  }
  // With β = 1/2 the pair is only half written: k S_T = (v + k S0)/2.
  in.beta.setConstant(0.5);
  const MatrixRuleOutput<double> half =
      matrix_rule_primal<double>(MatrixRule::DeltaNet, in.q, in.k, in.v, in.beta, in.alpha, in.S0);
  EXPECT_LT((in.k * half.state - 0.5 * (in.v + in.k * in.S0)).cwiseAbs().maxCoeff(), 1e-13);
}

TEST(MatrixRuleSpecial, GatesAtOneReduceToTheSimplerMemberBitForBit) {
  std::mt19937_64 rng(fw_announce(4005));
  const int T = 37, dk = 6, dv = 9;
  Inputs in = make_inputs(MatrixRule::GatedDeltaNet, T, dk, dv, rng);
  const Vec<double> ones = Vec<double>::Ones(T);
  for (int C : {0, 8}) {
    auto run = [&](MatrixRule rule, const Vec<double>& beta, const Vec<double>& alpha) {
      return C == 0 ? matrix_rule_primal<double>(rule, in.q, in.k, in.v, beta, alpha, in.S0)
                    : matrix_rule_chunked<double>(rule, in.q, in.k, in.v, beta, alpha, in.S0, C);
    };
    // Gated DeltaNet with α = 1 is DeltaNet.
    const MatrixRuleOutput<double> g = run(MatrixRule::GatedDeltaNet, in.beta, ones);
    const MatrixRuleOutput<double> d = run(MatrixRule::DeltaNet, in.beta, {});
    EXPECT_TRUE(g.o == d.o && g.state == d.state) << "C=" << C;
    // The decayed Hebbian rule with α = β = 1 is linear attention.
    const MatrixRuleOutput<double> h = run(MatrixRule::DecayedHebbian, ones, ones);
    const MatrixRuleOutput<double> l = run(MatrixRule::LinearAttention, {}, {});
    EXPECT_TRUE(h.o == l.o && h.state == l.state) << "C=" << C;
    // ...and a gate below 1 does change the result: the comparison can fail.
    Vec<double> a = ones;
    a(T / 2) = 0.9;
    EXPECT_FALSE(run(MatrixRule::GatedDeltaNet, in.beta, a).o == d.o);
  }
  // Linear attention from S0 = 0 is tril(Q Kᵀ) V (docs/MATH.md §9.1).
  const Mat<double> zero = Mat<double>::Zero(dk, dv);
  const MatrixRuleOutput<double> la =
      matrix_rule_primal<double>(MatrixRule::LinearAttention, in.q, in.k, in.v, {}, {}, zero);
  const Mat<double> ref =
      Mat<double>((in.q * in.k.transpose()).triangularView<Eigen::Lower>()) * in.v;
  EXPECT_LT(rel_err(la.o, ref), 1e-14);
}

// DeltaNet is TTT-Linear's inner loop with b = 1 and no LN, residual or bias, λ_t = β_t, τ = 1
// (docs/MATH.md §9.3): checked against the TTT code itself, both of its forms.
TEST(MatrixRuleSpecial, DeltaNetIsTttLinearWithMiniBatchOne) {
  std::mt19937_64 rng(fw_announce(4006));
  const int T = 50, d = 10;
  const Inputs in = make_inputs(MatrixRule::DeltaNet, T, d, d, rng);
  InnerOptions opt;
  opt.mini_batch = 1;
  opt.layer_norm = opt.residual = opt.bias = false;
  InnerWeights<double> w0 = InnerWeights<double>::zeros(opt, d);
  w0.W1 = in.S0;
  InnerHeadParams<double> hp{RowVec<double>::Ones(d), RowVec<double>::Zero(d),
                             Vec<double>::Ones(1)};
  const MatrixRuleOutput<double> dn =
      matrix_rule_primal<double>(MatrixRule::DeltaNet, in.q, in.k, in.v, in.beta, {}, in.S0);
  for (bool dual : {false, true}) {
    InnerState<double> st = InnerState<double>::start(w0);
    Mat<double> out;
    if (dual)
      inner_forward_dual<double>(opt, hp, in.q, in.k, in.v, in.beta, st, out);
    else
      inner_forward_primal<double>(opt, hp, in.q, in.k, in.v, in.beta, st, out);
    EXPECT_LT(rel_err(dn.o, out), 1e-13) << (dual ? "dual" : "primal");
    EXPECT_LT(rel_err(dn.state, st.base.W1), 1e-13) << (dual ? "dual" : "primal");
  }
}

// The decayed Hebbian rule is the project's Mamba-2 scan (docs/MATH.md §8.8, §11.2) with k = B, v = x,
// q = C, α_t = exp(Δ_t A), β_t = Δ_t and the state transposed; its backward, through the chain
// dΔ_t = dβ_t + A α_t dα_t and dA = Σ_t Δ_t α_t dα_t, is the scan's own (independently written, through
// the chunked form).
TEST(MatrixRuleSpecial, DecayedHebbianIsTheMamba2Scan) {
  std::mt19937_64 rng(fw_announce(4014));
  const int T = 45, N = 6, P = 5, Q = 8;
  const double A = -0.7;
  const Mat<double> X = fw_randn(T, P, rng), B = fw_randn(T, N, rng), C = fw_randn(T, N, rng);
  const Vec<double> dt = uniform(T, 0.1, 1.5, rng);
  const Mat<double> state0 = fw_randn(P, N, rng, 0.5);
  Mat<double> state = state0, Y(T, P);
  std::vector<Mat<double>> starts;
  mamba2_scan_chunked<double>(X, B, C, dt, A, Q, state, Y, &starts);
  const Vec<double> alpha = (dt.array() * A).exp().matrix();
  const MatrixRuleOutput<double> out = matrix_rule_primal<double>(
      MatrixRule::DecayedHebbian, C, B, X, dt, alpha, Mat<double>(state0.transpose()));
  EXPECT_LT(rel_err(out.o, Y), 1e-13);
  EXPECT_LT(rel_err(out.state, Mat<double>(state.transpose())), 1e-13);

  const Mat<double> dY = fw_randn(T, P, rng);
  Mat<double> dX = Mat<double>::Zero(T, P), dB = Mat<double>::Zero(T, N),
              dC = Mat<double>::Zero(T, N);
  Vec<double> ddt = Vec<double>::Zero(T);
  double dA = 0;
  mamba2_scan_chunked_backward<double>(X, B, C, dt, A, Q, starts, dY, dX, dB, dC, ddt, dA);
  const MatrixRuleGrads<double> g =
      matrix_rule_backward<double>(MatrixRule::DecayedHebbian, C, B, X, dt, alpha,
                                   Mat<double>(state0.transpose()), dY, Mat<double>::Zero(N, P));
  EXPECT_LT(rel_err(g.dv, dX), 1e-12);
  EXPECT_LT(rel_err(g.dk, dB), 1e-12);
  EXPECT_LT(rel_err(g.dq, dC), 1e-12);
  const Vec<double> ddt_rule = g.dbeta + (A * alpha.array() * g.dalpha.array()).matrix();
  EXPECT_LT(rel_err(ddt_rule, ddt), 1e-12);
  const double dA_rule = (dt.array() * alpha.array() * g.dalpha.array()).sum();
  EXPECT_NEAR(dA_rule, dA, 1e-12 * std::abs(dA));
}

// The observer sees every step. For the delta rule on a unit key the residual shrinks by (1 − β)
// (k(S − βkᵀr) − v = (1 − β‖k‖²) r), so the loss after the step is (1 − β)² times the loss before;
// for the Hebbian rules the loss −⟨kS, v⟩ falls by β‖k‖²‖v‖² after the decay.
TEST(MatrixRuleSpecial, ObserverReportsEveryStepAndItsLosses) {
  std::mt19937_64 rng(fw_announce(4007));
  const int T = 20, dk = 6, dv = 4;
  for (MatrixRule rule : kRules) {
    const Inputs in = make_inputs(rule, T, dk, dv, rng);
    std::vector<MatrixRuleStep<double>> steps;
    Mat<double> last_state;
    Mat<double> o(T, dv);
    const MatrixRuleOutput<double> out = matrix_rule_primal<double>(
        rule, in.q, in.k, in.v, in.beta, in.alpha, in.S0, [&](const MatrixRuleStep<double>& s) {
          steps.push_back(s);
          EXPECT_TRUE(s.state_before != nullptr && s.state_after != nullptr);
          if (s.token == 0) {
            EXPECT_TRUE(*s.state_before == in.S0);
          } else {
            EXPECT_TRUE(*s.state_before == last_state);
          }
          last_state = *s.state_after;
          o.row(s.token) = *s.output;
        });
    ASSERT_EQ(int(steps.size()), T);
    EXPECT_TRUE(last_state == out.state);
    EXPECT_TRUE(o == out.o);
    for (int t = 0; t < T; ++t) {
      const MatrixRuleStep<double>& s = steps[std::size_t(t)];
      const double a = uses_alpha(rule) ? in.alpha(t) : 1.0, b = uses_beta(rule) ? in.beta(t) : 1.0;
      EXPECT_EQ(s.alpha, a);
      EXPECT_EQ(s.beta, b);
      if (rule == MatrixRule::DeltaNet) {
        EXPECT_NEAR(s.loss_after, (1 - b) * (1 - b) * s.loss_before, 1e-12 * (1 + s.loss_before));
      } else if (!is_delta_rule(rule)) {
        const double kk = in.k.row(t).squaredNorm(), vv = in.v.row(t).squaredNorm();
        EXPECT_NEAR(s.loss_after, a * s.loss_before - b * kk * vv, 1e-11 * (1 + kk * vv));
      } else {
        EXPECT_LT(s.loss_after, s.loss_before + 1e-15);  // a decayed state, then a GD step
      }
    }
  }
}

TEST(MatrixRuleSpecial, ArgumentsAreValidated) {
  std::mt19937_64 rng(fw_announce(4008));
  const Inputs in = make_inputs(MatrixRule::GatedDeltaNet, 5, 3, 2, rng);
  using R = MatrixRule;
  EXPECT_THROW(matrix_rule_primal<double>(R::GatedDeltaNet, in.q, in.k, in.v, in.beta, {}, in.S0),
               std::invalid_argument);
  Vec<double> bad = in.alpha;
  bad(2) = 0;
  EXPECT_THROW(matrix_rule_primal<double>(R::GatedDeltaNet, in.q, in.k, in.v, in.beta, bad, in.S0),
               std::invalid_argument);
  EXPECT_THROW(matrix_rule_primal<double>(R::DeltaNet, in.q, in.k, in.v, {}, {}, in.S0),
               std::invalid_argument);
  EXPECT_THROW(matrix_rule_primal<double>(R::DeltaNet, in.q, in.k, in.v, in.beta, {},
                                          Mat<double>(in.S0.transpose())),
               std::invalid_argument);
  EXPECT_THROW(matrix_rule_chunked<double>(R::DeltaNet, in.q, in.k, in.v, in.beta, {}, in.S0, 0),
               std::invalid_argument);
  EXPECT_THROW(
      matrix_rule_primal<double>(R::LinearAttention, in.q, in.k.topRows(4), in.v, {}, {}, in.S0),
      std::invalid_argument);
  EXPECT_THROW(matrix_rule_backward<double>(R::DeltaNet, in.q, in.k, in.v, in.beta, {}, in.S0,
                                            Mat<double>::Zero(5, 3), Mat<double>::Zero(3, 2)),
               std::invalid_argument);
}

// The fp32 backward against the fp64 one on the same fp32-rounded inputs. Basis of 1e-4: 40 tokens of
// O(1) terms in the reverse recurrence, each rounding at 6e-8, and products of up to d_k terms.
TEST(MatrixRuleBackward, Fp32AgreesWithFp64) {
  std::mt19937_64 rng(fw_announce(4013));
  const int T = 40, dk = 8, dv = 5;
  for (MatrixRule rule : kRules) {
    const Inputs in = make_inputs(rule, T, dk, dv, rng);
    const Mat<double> Go = fw_randn(T, dv, rng), Gs = fw_randn(dk, dv, rng);
    const Mat<float> q = in.q.cast<float>(), k = in.k.cast<float>(), v = in.v.cast<float>(),
                     S0 = in.S0.cast<float>(), go = Go.cast<float>(), gs = Gs.cast<float>();
    const Vec<float> beta = in.beta.cast<float>(), alpha = in.alpha.cast<float>();
    const MatrixRuleGrads<float> g32 =
        matrix_rule_backward<float>(rule, q, k, v, beta, alpha, S0, go, gs);
    const MatrixRuleGrads<double> g64 = matrix_rule_backward<double>(
        rule, q.cast<double>(), k.cast<double>(), v.cast<double>(), beta.cast<double>(),
        alpha.cast<double>(), S0.cast<double>(), go.cast<double>(), gs.cast<double>());
    EXPECT_LE(rel_err(g32.dq.cast<double>(), g64.dq), 1e-4) << to_string(rule);
    EXPECT_LE(rel_err(g32.dk.cast<double>(), g64.dk), 1e-4) << to_string(rule);
    EXPECT_LE(rel_err(g32.dv.cast<double>(), g64.dv), 1e-4) << to_string(rule);
    EXPECT_LE(rel_err(g32.dS0.cast<double>(), g64.dS0), 1e-4) << to_string(rule);
    if (uses_beta(rule)) {
      EXPECT_LE(rel_err(g32.dbeta.cast<double>(), g64.dbeta), 1e-4) << to_string(rule);
    }
    if (uses_alpha(rule)) {
      EXPECT_LE(rel_err(g32.dalpha.cast<double>(), g64.dalpha), 1e-4) << to_string(rule);
    }
  }
}

// ---- Backward against central differences ---------------------------------------------------------

// L = ⟨Go, o⟩ + ⟨Gs, S_T⟩ with fixed random Go, Gs, so that ∂L/∂o = Go and ∂L/∂S_T = Gs.
double loss_of(MatrixRule rule, const Inputs& in, const Mat<double>& Go, const Mat<double>& Gs) {
  const MatrixRuleOutput<double> out =
      matrix_rule_primal<double>(rule, in.q, in.k, in.v, in.beta, in.alpha, in.S0);
  return out.o.cwiseProduct(Go).sum() + out.state.cwiseProduct(Gs).sum();
}

// Every element of every input at a small size; the error of each tensor is max|analytic − fd| over
// max|fd|. Central differences with h = 1e-6 in fp64 carry ≈ 1e-10 of rounding per unit of L (L is
// O(10) here) and h² truncation, far below the 1e-7 bound; a missing term would be O(1).
TEST(MatrixRuleBackward, EveryElementMatchesFiniteDifferences) {
  std::mt19937_64 rng(fw_announce(4009));
  const int T = 7, dk = 4, dv = 3;
  const double h = 1e-6;
  for (MatrixRule rule : kRules) {
    Inputs in = make_inputs(rule, T, dk, dv, rng);
    if (uses_alpha(rule)) in.alpha = uniform(T, 0.5, 0.95, rng);  // α ± h stays inside (0, 1]
    const Mat<double> Go = fw_randn(T, dv, rng), Gs = fw_randn(dk, dv, rng);
    const MatrixRuleGrads<double> g =
        matrix_rule_backward<double>(rule, in.q, in.k, in.v, in.beta, in.alpha, in.S0, Go, Gs);
    auto check = [&](const char* name, double* data, Eigen::Index n, const double* grad) {
      double diff = 0, scale = 0;
      for (Eigen::Index i = 0; i < n; ++i) {
        const double keep = data[i];
        data[i] = keep + h;
        const double lp = loss_of(rule, in, Go, Gs);
        data[i] = keep - h;
        const double lm = loss_of(rule, in, Go, Gs);
        data[i] = keep;
        const double fd = (lp - lm) / (2 * h);
        diff = std::max(diff, std::abs(grad[i] - fd));
        scale = std::max(scale, std::abs(fd));
      }
      const double err = diff / std::max(scale, 1e-300);
      std::printf("[   INFO   ] %s d%s: relative error %.2e (max |grad| %.2e)\n", to_string(rule),
                  name, err, scale);
      EXPECT_LE(err, 1e-7) << to_string(rule) << " d" << name;
      EXPECT_GT(scale, 1e-3) << to_string(rule) << " d" << name;  // the input does matter
    };
    check("q", in.q.data(), in.q.size(), g.dq.data());
    check("k", in.k.data(), in.k.size(), g.dk.data());
    check("v", in.v.data(), in.v.size(), g.dv.data());
    check("S0", in.S0.data(), in.S0.size(), g.dS0.data());
    if (uses_beta(rule)) {
      ASSERT_EQ(g.dbeta.size(), T);
      check("beta", in.beta.data(), T, g.dbeta.data());
    } else {
      EXPECT_EQ(g.dbeta.size(), 0);
    }
    if (uses_alpha(rule)) {
      ASSERT_EQ(g.dalpha.size(), T);
      check("alpha", in.alpha.data(), T, g.dalpha.data());
    } else {
      EXPECT_EQ(g.dalpha.size(), 0);
    }
  }
}

// A longer sequence and wider state, every input at once along random directions (the directional
// derivative ⟨∇L, δ⟩ against (L(x + hδ) − L(x − hδ)) / 2h), and raw keys for the delta rules.
TEST(MatrixRuleBackward, RandomDirectionsMatchFiniteDifferences) {
  std::mt19937_64 rng(fw_announce(4010));
  const int T = 45, dk = 8, dv = 5;
  const double h = 1e-6;
  for (MatrixRule rule : kRules) {
    for (bool raw : {false, true}) {
      if (raw && !is_delta_rule(rule)) continue;
      Inputs in = make_inputs(rule, T, dk, dv, rng, raw, raw ? 0.01 : 0.05, raw ? 0.1 : 0.95);
      if (uses_alpha(rule)) in.alpha = uniform(T, 0.6, 0.98, rng);
      const Mat<double> Go = fw_randn(T, dv, rng), Gs = fw_randn(dk, dv, rng);
      const MatrixRuleGrads<double> g =
          matrix_rule_backward<double>(rule, in.q, in.k, in.v, in.beta, in.alpha, in.S0, Go, Gs);
      double worst = 0;
      for (int dir = 0; dir < 3; ++dir) {
        Inputs d;
        d.q = fw_randn(T, dk, rng);
        d.k = fw_randn(T, dk, rng);
        d.v = fw_randn(T, dv, rng);
        d.S0 = fw_randn(dk, dv, rng);
        d.beta = uses_beta(rule) ? uniform(T, -1, 1, rng) : Vec<double>();
        d.alpha = uses_alpha(rule) ? uniform(T, -1, 1, rng) : Vec<double>();
        double analytic = g.dq.cwiseProduct(d.q).sum() + g.dk.cwiseProduct(d.k).sum() +
                          g.dv.cwiseProduct(d.v).sum() + g.dS0.cwiseProduct(d.S0).sum();
        if (uses_beta(rule)) analytic += g.dbeta.dot(d.beta);
        if (uses_alpha(rule)) analytic += g.dalpha.dot(d.alpha);
        auto shifted = [&](double s) {
          Inputs x = in;
          x.q += s * d.q;
          x.k += s * d.k;
          x.v += s * d.v;
          x.S0 += s * d.S0;
          if (uses_beta(rule)) x.beta += s * d.beta;
          if (uses_alpha(rule)) x.alpha += s * d.alpha;
          return loss_of(rule, x, Go, Gs);
        };
        const double fd = (shifted(h) - shifted(-h)) / (2 * h);
        const double err = std::abs(analytic - fd) / std::max(std::abs(fd), 1.0);
        worst = std::max(worst, err);
        EXPECT_LE(err, 1e-7) << to_string(rule) << (raw ? " raw keys" : "") << " dir " << dir;
      }
      std::printf("[   INFO   ] %s%s: directional relative error %.2e\n", to_string(rule),
                  raw ? " (raw keys)" : "", worst);
    }
  }
}

}  // namespace
}  // namespace tttlab
