// member_trace: each member of the fast-weight family other than TTT, token by token, against the
// inner loop it stands for over the whole sequence (matrix_rule_primal's, titans_primal's and
// lact_forward's observers and outputs), in fp64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tttlab/fastweight/lact.hpp"
#include "tttlab/fastweight/matrix_rules.hpp"
#include "tttlab/fastweight/member_trace.hpp"
#include "tttlab/fastweight/titans.hpp"

namespace tttlab {
namespace {

constexpr int kMtT = 23, kMtD = 6;

Mat<double> mt_randn(long r, long c, std::mt19937_64& rng) {
  std::normal_distribution<double> n(0.0, 1.0);
  Mat<double> m(r, c);
  for (long i = 0; i < r; ++i)
    for (long j = 0; j < c; ++j) m(i, j) = n(rng);
  return m;
}

void mt_unit_rows(Mat<double>& m) {
  for (long t = 0; t < m.rows(); ++t) m.row(t).normalize();
}

MemberInputs mt_inputs(std::uint64_t seed, bool unit) {
  std::printf("member_trace inputs: seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  MemberInputs in;
  in.q = mt_randn(kMtT, kMtD, rng);
  in.k = mt_randn(kMtT, kMtD, rng);
  in.v = mt_randn(kMtT, kMtD, rng);
  if (unit) {
    mt_unit_rows(in.q);
    mt_unit_rows(in.k);
    mt_unit_rows(in.v);
  }
  std::uniform_real_distribution<double> b(0.1, 0.9), a(0.8, 1.0);
  in.beta.resize(kMtT);
  in.alpha.resize(kMtT);
  for (long t = 0; t < kMtT; ++t) {
    in.beta(t) = b(rng);
    in.alpha(t) = a(rng);
  }
  in.design.width = kMtD;
  in.design.seed = seed;
  in.design.eta = 0.5;
  in.design.chunk = 4;
  return in;
}

double mt_maxdiff(const Mat<double>& a, const Mat<double>& b) {
  EXPECT_EQ(a.rows(), b.rows());
  EXPECT_EQ(a.cols(), b.cols());
  if (a.rows() != b.rows() || a.cols() != b.cols()) return 1e300;
  return a.size() ? (a - b).cwiseAbs().maxCoeff() : 0.0;
}

class MemberTraceMatrix : public ::testing::TestWithParam<const char*> {};

TEST_P(MemberTraceMatrix, RecordsAreThePrimalFormsObserverAndTheGradientIsTheStep) {
  const FastWeightPreset& p = fast_weight_preset(GetParam());
  ASSERT_TRUE(member_traceable(p));
  ASSERT_TRUE(member_is_matrix_rule(p));
  const MatrixRule rule = *matrix_rule_for(p.rule);
  const MemberInputs in = mt_inputs(41, is_delta_rule(rule));
  const auto trace = member_trace(p, in);
  ASSERT_EQ(static_cast<long>(trace.size()), kMtT);

  // The reference: one call over the whole sequence, observed.
  const Mat<double> S0 = Mat<double>::Zero(kMtD, kMtD);
  std::vector<Mat<double>> before, after;
  std::vector<double> lb, la;
  std::vector<RowVec<double>> out;
  const Vec<double> beta = uses_beta(rule) ? in.beta : Vec<double>();
  const Vec<double> alpha = uses_alpha(rule) ? in.alpha : Vec<double>();
  matrix_rule_primal<double>(rule, in.q, in.k, in.v, beta, alpha, S0,
                             [&](const MatrixRuleStep<double>& s) {
                               before.push_back(*s.state_before);
                               after.push_back(*s.state_after);
                               lb.push_back(s.loss_before);
                               la.push_back(s.loss_after);
                               out.push_back(*s.output);
                             });
  for (long t = 0; t < kMtT; ++t) {
    const MemberStepRecord& r = trace[static_cast<std::size_t>(t)];
    const std::size_t i = static_cast<std::size_t>(t);
    ASSERT_EQ(r.state_after.size(), 1u);
    EXPECT_LE(mt_maxdiff(r.state_after[0], after[i]), 1e-12) << p.id << " t = " << t;
    EXPECT_LE(mt_maxdiff(r.delta[0], after[i] - before[i]), 1e-12);
    EXPECT_LE(std::abs(r.loss_before - lb[i]), 1e-12);
    EXPECT_LE(std::abs(r.loss_after - la[i]), 1e-12);
    EXPECT_LE((r.output - out[i]).cwiseAbs().maxCoeff(), 1e-12);
    const double a = uses_alpha(rule) ? in.alpha(t) : 1.0, b = uses_beta(rule) ? in.beta(t) : 1.0;
    EXPECT_EQ(r.alpha, a);
    EXPECT_EQ(r.beta, b);
    // S_t = α_t S_{t−1} − β_t ∇ℓ_t, and ∇ℓ_t = keyᵀ grad.
    EXPECT_LE(mt_maxdiff(r.state_after[0], a * before[i] - b * r.gradient[0]), 1e-12);
    EXPECT_LE(mt_maxdiff(r.gradient[0], r.key[0].transpose() * r.grad[0]), 1e-12);
    EXPECT_LE(
        std::abs(r.loss_initial - matrix_rule_loss<double>(rule, S0, in.k.row(t), in.v.row(t))),
        1e-12);
  }
}

INSTANTIATE_TEST_SUITE_P(FourMembers, MemberTraceMatrix,
                         ::testing::Values("linear_attention", "mamba2", "deltanet",
                                           "gated_deltanet"));

// Titans' inputs: unit q, k (as its layer), θ_t, the forgetting α_t and the momentum η_t per token.
MemberInputs mt_titans_inputs(std::uint64_t seed, int b) {
  MemberInputs in = mt_inputs(seed, true);
  std::mt19937_64 rng(seed + 1);
  std::uniform_real_distribution<double> th(0.005, 0.03), al(0.0, 0.1), et(0.5, 0.95);
  in.momentum.resize(kMtT);
  for (long t = 0; t < kMtT; ++t) {
    in.beta(t) = th(rng);
    in.alpha(t) = al(rng);
    in.momentum(t) = et(rng);
  }
  in.design.chunk = b;
  return in;
}

class MemberTraceTitans : public ::testing::TestWithParam<int> {};

TEST_P(MemberTraceTitans, RecordsAreTitansPrimalsAndTheEndStateIsItsFinalState) {
  const int b = GetParam();
  const FastWeightPreset& p = fast_weight_preset("titans");
  ASSERT_TRUE(member_traceable(p));
  ASSERT_FALSE(member_is_matrix_rule(p));
  EXPECT_EQ(member_state_names(p), (std::vector<std::string>{"M", "S"}));
  const MemberInputs in = mt_titans_inputs(53, b);
  const auto trace = member_trace(p, in);
  ASSERT_EQ(static_cast<long>(trace.size()), kMtT);

  // The reference: titans_primal over the whole sequence, observed.
  const RowVec<double> w = RowVec<double>::Ones(kMtD), bias = RowVec<double>::Zero(kMtD);
  const Mat<double> M0 = Mat<double>::Zero(kMtD, kMtD);
  TitansInner inner;
  inner.mini_batch = b;
  std::vector<double> lb, la;
  std::vector<Mat<double>> mem, mom;
  const TitansOutput<double> ref = titans_primal<double>(
      in.q, in.k, in.v, w, bias, in.beta, in.alpha, in.momentum, M0, inner,
      [&](const TitansStep<double>& s) {
        lb.push_back(s.loss_before);
        la.push_back(s.loss_after);
        mem.push_back(*s.memory_after);
        mom.push_back(*s.momentum);
      });
  Mat<double> S_prev = Mat<double>::Zero(kMtD, kMtD), M_prev = M0;
  for (long t = 0; t < kMtT; ++t) {
    const MemberStepRecord& r = trace[static_cast<std::size_t>(t)];
    const std::size_t i = static_cast<std::size_t>(t);
    ASSERT_EQ(r.state_after.size(), 2u) << "the memory M and the momentum S";
    EXPECT_LE(mt_maxdiff(r.state_after[0], mem[i]), 1e-12) << "b = " << b << " t = " << t;
    EXPECT_LE(mt_maxdiff(r.state_after[1], mom[i]), 1e-12);
    EXPECT_LE(mt_maxdiff(r.delta[0], mem[i] - M_prev), 1e-12);
    EXPECT_LE(mt_maxdiff(r.delta[1], mom[i] - S_prev), 1e-12);
    EXPECT_LE(std::abs(r.loss_before - lb[i]), 1e-12 * std::max(1.0, std::abs(lb[i])));
    EXPECT_LE(std::abs(r.loss_after - la[i]), 1e-12 * std::max(1.0, std::abs(la[i])));
    EXPECT_LE((r.output - ref.o.row(t)).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_LE(std::abs(r.loss_initial - titans_loss<double>(M0, in.k.row(t), in.v.row(t), w, bias,
                                                            inner.eps)),
              1e-12);
    // The write's term: S_t = η_t S_{t−1} − 2θ_t k_tᵀu_t, and its row factors (k_t, u_t).
    ASSERT_EQ(r.gradient.size(), 1u);
    EXPECT_LE(mt_maxdiff(in.momentum(t) * S_prev - 2.0 * in.beta(t) * r.gradient[0], mom[i]),
              1e-12);
    ASSERT_EQ(r.key.size(), 1u);
    EXPECT_LE(mt_maxdiff(r.key[0].transpose() * r.grad[0], r.gradient[0]), 1e-12);
    EXPECT_EQ(r.beta, in.beta(t));
    EXPECT_EQ(r.alpha, in.alpha(t));
    EXPECT_EQ(r.momentum, in.momentum(t));
    S_prev = mom[i];
    M_prev = mem[i];
  }
  EXPECT_LE(mt_maxdiff(trace.back().state_after[0], ref.state.memory), 1e-12);
  EXPECT_LE(mt_maxdiff(trace.back().state_after[1], ref.state.momentum), 1e-12);
  EXPECT_GT(ref.state.memory.cwiseAbs().maxCoeff(), 1e-6) << "the memory was written";
}

INSTANTIATE_TEST_SUITE_P(MiniBatches, MemberTraceTitans, ::testing::Values(1, 4, 7));

struct MtLactCase {
  const char* name;
  bool momentum, muon;
  int chunk;
};

// LaCT as the preset runs it (Muon with momentum) and its GD variant (a preset with optimizer gd).
class MemberTraceLact : public ::testing::TestWithParam<MtLactCase> {};

TEST_P(MemberTraceLact, RecordsAreLactsStreamAndTheEndStateIsItsForwards) {
  const MtLactCase c = GetParam();
  FastWeightPreset p = fast_weight_preset("lact");
  p.rule.optimizer = c.muon ? FastWeightOptimizer::Muon
                            : c.momentum ? FastWeightOptimizer::Momentum : FastWeightOptimizer::Gd;
  EXPECT_EQ(member_state_names(p), (std::vector<std::string>{"W₀", "W₁", "W₂"}));
  MemberInputs in = mt_inputs(59, true);
  std::mt19937_64 rng(60);
  std::uniform_real_distribution<double> mo(0.5, 0.95);
  in.momentum.resize(kMtT);
  for (long t = 0; t < kMtT; ++t) in.momentum(t) = mo(rng);
  in.design.chunk = c.chunk;
  in.hidden = 9;
  const MemberTracer tracer(p, in);
  const std::vector<Mat<double>> init = tracer.initial_state();
  ASSERT_EQ(init.size(), 3u);
  EXPECT_EQ(init[0].rows(), 9);
  EXPECT_EQ(init[0].cols(), kMtD);
  EXPECT_EQ(init[1].rows(), kMtD);
  const auto trace = member_trace(p, in);
  ASSERT_EQ(static_cast<long>(trace.size()), kMtT);

  // The reference: lact_forward over the whole sequence from the same initial weights, observed.
  const LactWeights<double> W{init[0], init[1], init[2]};
  std::vector<LactChunkStep<double>> chunks;
  std::vector<LactWeights<double>> after;
  const LactOutput<double> ref = lact_forward<double>(
      in.q, in.k, in.v, in.beta, in.beta, in.beta, c.momentum ? in.momentum : Vec<double>(), W,
      c.chunk, c.muon, [&](const LactChunkStep<double>& s) {
        chunks.push_back(s);
        after.push_back(*s.weights_after);
      });
  long updates = 0;
  std::vector<Mat<double>> prev = init;
  for (long t = 0; t < kMtT; ++t) {
    const MemberStepRecord& r = trace[static_cast<std::size_t>(t)];
    EXPECT_LE((r.output - ref.o.row(t)).cwiseAbs().maxCoeff(), 1e-12) << c.name << " t = " << t;
    ASSERT_EQ(r.state_after.size(), 3u);
    const bool update = t > 0 && t % c.chunk == 0;
    EXPECT_EQ(r.chunk_tokens > 0, update) << "updates when a token arrives after a full chunk";
    if (update) {
      const LactChunkStep<double>& s = chunks.at(static_cast<std::size_t>(updates));
      const LactWeights<double>& w = after.at(static_cast<std::size_t>(updates));
      EXPECT_EQ(r.chunk_first, s.first_token);
      EXPECT_EQ(r.chunk_tokens, s.tokens);
      EXPECT_LE(std::abs(r.chunk_loss_before - s.loss_before), 1e-12);
      EXPECT_LE(std::abs(r.chunk_loss_after - s.loss_after), 1e-12);
      EXPECT_LE(mt_maxdiff(r.state_after[0], w.w0), 1e-12);
      EXPECT_LE(mt_maxdiff(r.state_after[1], w.w1), 1e-12);
      EXPECT_LE(mt_maxdiff(r.state_after[2], w.w2), 1e-12);
      ++updates;
    }
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_LE(mt_maxdiff(r.delta[i], r.state_after[i] - prev[i]), 1e-12);
      if (!update) {
        EXPECT_EQ(r.delta[i].cwiseAbs().maxCoeff(), 0.0) << "no change inside a chunk";
      }
    }
    // The token's own loss on the weights before and after its arrival, and its gradient there.
    const RowVec<double> k = in.k.row(t), v = in.v.row(t);
    const LactWeights<double> Wa{r.state_after[0], r.state_after[1], r.state_after[2]};
    EXPECT_LE(std::abs(r.loss_after - lact_chunk_loss<double>(Wa, k, v)), 1e-12);
    const LactWeights<double> Wb{prev[0], prev[1], prev[2]};
    EXPECT_LE(std::abs(r.loss_before - lact_chunk_loss<double>(Wb, k, v)), 1e-12);
    ASSERT_EQ(r.gradient.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      // Central differences of ℓ_t = −⟨f_W(k_t), v_t⟩ in two entries of each weight.
      for (const auto& [row, col] : {std::pair<long, long>{0, 0}, {1, 2}}) {
        LactWeights<double> wp = Wa, wm = Wa;
        Mat<double>* mp = i == 0 ? &wp.w0 : i == 1 ? &wp.w1 : &wp.w2;
        Mat<double>* mm = i == 0 ? &wm.w0 : i == 1 ? &wm.w1 : &wm.w2;
        const double h = 1e-6;
        (*mp)(row, col) += h;
        (*mm)(row, col) -= h;
        const double fd =
            (lact_chunk_loss<double>(wp, k, v) - lact_chunk_loss<double>(wm, k, v)) / (2 * h);
        EXPECT_NEAR(r.gradient[i](row, col), fd, 1e-7) << "weight " << i;
      }
    }
    prev = r.state_after;
  }
  EXPECT_EQ(updates, ref.updates);
  EXPECT_GT(updates, 0);
  EXPECT_LE(mt_maxdiff(trace.back().state_after[0], ref.weights.w0), 1e-12);
  EXPECT_LE(mt_maxdiff(trace.back().state_after[1], ref.weights.w1), 1e-12);
  EXPECT_LE(mt_maxdiff(trace.back().state_after[2], ref.weights.w2), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, MemberTraceLact,
                         ::testing::Values(MtLactCase{"gd", false, false, 5},
                                           MtLactCase{"momentum", true, false, 4},
                                           MtLactCase{"muon", true, true, 6},
                                           MtLactCase{"gd_one_update", false, false, 22}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(MemberTrace, TttMembersAndBadInputsAreRefused) {
  const MemberInputs in = mt_inputs(47, true);
  for (const char* id : {"ttt_linear", "ttt_mlp"}) {
    EXPECT_FALSE(member_traceable(fast_weight_preset(id)));
    EXPECT_THROW(MemberTracer(fast_weight_preset(id), in), std::invalid_argument);
  }
  MemberInputs short_beta = in;
  short_beta.beta.resize(3);
  EXPECT_THROW(MemberTracer(fast_weight_preset("deltanet"), short_beta), std::invalid_argument);
  MemberInputs bad_alpha = in;
  bad_alpha.alpha(2) = 1.5;
  EXPECT_THROW(MemberTracer(fast_weight_preset("mamba2"), bad_alpha), std::invalid_argument);
  MemberInputs no_eta = in;  // Titans' momentum η_t is required
  EXPECT_THROW(MemberTracer(fast_weight_preset("titans"), no_eta), std::invalid_argument);
  MemberInputs narrow_v = mt_titans_inputs(47, 2);
  narrow_v.v = narrow_v.v.leftCols(kMtD - 1).eval();
  EXPECT_THROW(MemberTracer(fast_weight_preset("titans"), narrow_v), std::invalid_argument);
  MemberInputs zero_chunk = mt_titans_inputs(47, 2);
  zero_chunk.design.chunk = 0;
  EXPECT_THROW(MemberTracer(fast_weight_preset("lact"), zero_chunk), std::invalid_argument);
  MemberTracer done(fast_weight_preset("linear_attention"), in);
  while (done.computed() < done.tokens()) done.step();
  EXPECT_THROW(done.step(), std::logic_error);
}

}  // namespace
}  // namespace tttlab
