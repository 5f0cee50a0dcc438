// member_trace: each member of the fast-weight family other than TTT, token by token, against the
// inner loop it stands for (matrix_rule_primal's observer over the whole sequence, or DesignedMemory
// driven directly), in fp64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>

#include "tttlab/fastweight/matrix_rules.hpp"
#include "tttlab/fastweight/member_trace.hpp"

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

class MemberTraceDesigned : public ::testing::TestWithParam<const char*> {};

TEST_P(MemberTraceDesigned, RecordsAreTheDesignedMemorys) {
  const FastWeightPreset& p = fast_weight_preset(GetParam());
  ASSERT_TRUE(member_traceable(p));
  ASSERT_FALSE(member_is_matrix_rule(p));
  MemberInputs in = mt_inputs(43, true);
  in.design.eta = 0.1;  // momentum 0.9 at η = 0.5 diverges within these 23 pairs
  const auto trace = member_trace(p, in);
  DesignedMemory mem(p.rule, in.design);
  const DesignedMemory start(p.rule, in.design);
  for (long t = 0; t < kMtT; ++t) {
    const MemberStepRecord& r = trace[static_cast<std::size_t>(t)];
    const RowVec<double> k = in.k.row(t), v = in.v.row(t);
    const std::vector<Eigen::MatrixXd> w0 = mem.weights();
    const std::vector<Eigen::MatrixXd> g = mem.gradient(k, v);
    mem.write(k, v);
    const std::vector<Eigen::MatrixXd>& w = mem.weights();
    ASSERT_EQ(r.state_after.size(), 2u) << "an MLP state: W1 and W2";
    for (std::size_t i = 0; i < w.size(); ++i) {
      EXPECT_LE(mt_maxdiff(r.state_after[i], w[i]), 1e-12) << p.id << " t = " << t;
      EXPECT_LE(mt_maxdiff(r.delta[i], w[i] - w0[i]), 1e-12);
      EXPECT_LE(mt_maxdiff(r.gradient[i], g[i]), 1e-12);
    }
    EXPECT_LE(std::abs(r.loss_before - mem.loss_before()), 1e-12);
    EXPECT_LE(std::abs(r.loss_after - mem.loss_after()), 1e-12);
    EXPECT_LE(std::abs(r.loss_initial - start.loss(k, v)), 1e-12);
    EXPECT_LE((r.output - mem.read(in.q.row(t))).cwiseAbs().maxCoeff(), 1e-12);
    // W₁'s gradient is rank one with left factor k: the factors reproduce it.
    ASSERT_EQ(r.key.size(), 1u);
    EXPECT_LE(mt_maxdiff(r.key[0].transpose() * r.grad[0], r.gradient[0]),
              1e-12 * std::max(1.0, r.gradient[0].cwiseAbs().maxCoeff()));
    EXPECT_LT(r.state_after[0].cwiseAbs().maxCoeff(), 1e3) << "the memory stays finite and modest";
  }
  // The state moved: this is not a test of a memory that never writes.
  EXPECT_GT(trace.back().state_after[1].cwiseAbs().maxCoeff(), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(TitansAndLact, MemberTraceDesigned, ::testing::Values("titans", "lact"));

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
  MemberInputs wide = in;
  wide.design.width = kMtD + 2;
  EXPECT_THROW(MemberTracer(fast_weight_preset("titans"), wide), std::invalid_argument);
  MemberTracer done(fast_weight_preset("linear_attention"), in);
  while (done.computed() < done.tokens()) done.step();
  EXPECT_THROW(done.step(), std::logic_error);
}

}  // namespace
}  // namespace tttlab
