// The matrix fast-weight rules on the GPU (tttlab/kernels/matrix_rules.hpp) against the CPU
// (matrix_rule_primal and matrix_rule_backward, tttlab/fastweight/matrix_rules.hpp; docs/MATH.md
// §11.2–§11.4), run in fp64 head by head on the same fp32-valued inputs.
//
// Inputs: v ~ N(0, 1); keys L2-normalised for the delta rules (the layer's, §11.2) and ~ N(0, 1/d_k)
// for the Hebbian ones; queries ~ N(0, 1/d_k); β ~ U(0, 1), α ~ U(0.5, 1); S0 ~ N(0, ½) and
// dS_final ~ N(0, 1) in the cases that give them (the others pass null: a zero initial state, no
// gradient at S_T); dO ~ N(0, 1). q, k and v sit in wider rows than H·d (the layer's projections
// are column ranges of wider buffers), and every output is poisoned with NaN first, so an unwritten
// element fails. Shapes: T = 1, T not a multiple of the chunk, T = 300, d = 16, 64, 128, d_k ≠ d_v,
// d_v not a whole number of warps (48, 80, 100, 7).
// ERROR = max|gpu − cpu| / max|cpu| per output. Bounds: forward (o, S_T) 1e-4, backward (every
// gradient) 5e-4. The GPU computes in fp32 (unit roundoff 6e-8): a read-out is a sum of d_k products
// of the state, whose entries are themselves fp32 sums over up to T = 300 steps, and the backward
// carries dS over the same steps with sums over d_k and d_v for each gradient: errors of order 1e-7
// to 1e-6 relative (the unit roundoff times the length of the sums), and the bounds leave two orders
// of magnitude above them; a wrong, missing or misplaced term (a transposed state, a step read
// before its write, a lost token) is O(1).
// Seeds are fixed and printed (test_seed(); TTTLAB_TEST_SEED overrides).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_ttt_util.hpp"
#include "tttlab/fastweight/matrix_rules.hpp"
#include "tttlab/kernels/matrix_rules.hpp"

namespace tttlab::kernels::test {
namespace {

constexpr double kTolForward = 1e-4;
constexpr double kTolBackward = 5e-4;

struct RuleCase {
  int B, H, T, dk, dv, C;
  bool given;  // S0 and dS_final given (else null)
};

std::string describe(const RuleCase& c) {
  return "B=" + std::to_string(c.B) + " H=" + std::to_string(c.H) + " T=" + std::to_string(c.T) +
         " dk=" + std::to_string(c.dk) + " dv=" + std::to_string(c.dv) +
         " C=" + std::to_string(c.C) + (c.given ? " S0,dS" : " zero S0,dS");
}

std::vector<RuleCase> rule_cases() {
  if (quick_mode()) return {{2, 2, 37, 16, 16, 8, true}, {1, 2, 70, 64, 48, 32, false}};
  return {
      {1, 1, 1, 16, 16, 64, true},    {2, 3, 37, 16, 16, 8, false},  {2, 2, 130, 64, 64, 64, true},
      {1, 2, 300, 64, 64, 64, false}, {1, 1, 300, 64, 64, 64, true}, {1, 1, 70, 128, 128, 32, true},
      {2, 2, 45, 64, 128, 16, false}, {1, 2, 50, 128, 80, 64, true}, {2, 1, 65, 16, 100, 64, false},
      {1, 1, 40, 32, 7, 4, true},     {1, 2, 20, 128, 16, 64, true}};
}

const MatrixRule kRules[] = {MatrixRule::LinearAttention, MatrixRule::DecayedHebbian,
                             MatrixRule::DeltaNet, MatrixRule::GatedDeltaNet};

struct RuleInputs {
  RuleCase c;
  int R, ldqk, ldv, lddo;
  std::vector<float> q, k, v, beta, alpha, S0, dS, dO;
};

RuleInputs make_inputs(MatrixRule rule, const RuleCase& c, std::mt19937_64& rng) {
  RuleInputs in;
  in.c = c;
  in.R = c.B * c.T;
  in.ldqk = c.H * c.dk + 3;
  in.ldv = c.H * c.dv + 1;
  in.lddo = c.H * c.dv + 2;
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  const double sk = 1.0 / std::sqrt(double(c.dk));
  in.q.resize(std::size_t(in.R) * in.ldqk);
  in.k.resize(in.q.size());
  for (float& x : in.q) x = float(sk * nd(rng));
  for (float& x : in.k) x = float(sk * nd(rng));
  if (is_delta_rule(rule))
    for (int row = 0; row < in.R; ++row)
      for (int h = 0; h < c.H; ++h) {
        float* kr = &in.k[std::size_t(row) * in.ldqk + std::size_t(h) * c.dk];
        double n2 = 0;
        for (int i = 0; i < c.dk; ++i) n2 += double(kr[i]) * kr[i];
        for (int i = 0; i < c.dk; ++i) kr[i] = float(kr[i] / std::sqrt(n2));
      }
  in.v.resize(std::size_t(in.R) * in.ldv);
  for (float& x : in.v) x = float(nd(rng));
  in.beta.resize(std::size_t(in.R) * c.H);
  in.alpha.resize(in.beta.size());
  for (float& x : in.beta) x = float(u01(rng));
  for (float& x : in.alpha) x = float(0.5 + 0.5 * u01(rng));
  const std::size_t states = std::size_t(c.B) * c.H * c.dk * c.dv;
  if (c.given) {
    in.S0.resize(states);
    in.dS.resize(states);
    for (float& x : in.S0) x = float(std::sqrt(0.5) * nd(rng));
    for (float& x : in.dS) x = float(nd(rng));
  }
  in.dO.resize(std::size_t(in.R) * in.lddo);
  for (float& x : in.dO) x = float(nd(rng));
  return in;
}

// Outputs in contiguous layouts: o, dv [R, H·d_v]; dq, dk [R, H·d_k]; dβ, dα [R, H]; S_T, dS0
// [B, H, d_k, d_v].
template <class S>
struct RuleOut {
  std::vector<S> o, S_final, dq, dk, dv, dbeta, dalpha, dS0;
};

RuleOut<double> cpu_rule(MatrixRule rule, const RuleInputs& in) {
  const RuleCase& c = in.c;
  RuleOut<double> r;
  const int HK = c.H * c.dk, HV = c.H * c.dv;
  r.o.assign(std::size_t(in.R) * HV, 0.0);
  r.dv = r.o;
  r.dq.assign(std::size_t(in.R) * HK, 0.0);
  r.dk = r.dq;
  r.dbeta.assign(std::size_t(in.R) * c.H, 0.0);
  r.dalpha = r.dbeta;
  r.S_final.assign(std::size_t(c.B) * c.H * c.dk * c.dv, 0.0);
  r.dS0 = r.S_final;
  for (int n = 0; n < c.B; ++n)
    for (int h = 0; h < c.H; ++h) {
      Mat<double> q(c.T, c.dk), k(c.T, c.dk), v(c.T, c.dv), dO(c.T, c.dv);
      Vec<double> beta(c.T), alpha(c.T);
      for (int t = 0; t < c.T; ++t) {
        const std::size_t row = std::size_t(n) * c.T + t;
        for (int i = 0; i < c.dk; ++i) {
          q(t, i) = in.q[row * in.ldqk + std::size_t(h) * c.dk + i];
          k(t, i) = in.k[row * in.ldqk + std::size_t(h) * c.dk + i];
        }
        for (int j = 0; j < c.dv; ++j) {
          v(t, j) = in.v[row * in.ldv + std::size_t(h) * c.dv + j];
          dO(t, j) = in.dO[row * in.lddo + std::size_t(h) * c.dv + j];
        }
        beta(t) = in.beta[row * c.H + h];
        alpha(t) = in.alpha[row * c.H + h];
      }
      const std::size_t so = (std::size_t(n) * c.H + h) * c.dk * c.dv;
      Mat<double> S0 = Mat<double>::Zero(c.dk, c.dv), dS = S0;
      if (c.given)
        for (int i = 0; i < c.dk; ++i)
          for (int j = 0; j < c.dv; ++j) {
            S0(i, j) = in.S0[so + std::size_t(i) * c.dv + j];
            dS(i, j) = in.dS[so + std::size_t(i) * c.dv + j];
          }
      const Vec<double> nb = uses_beta(rule) ? beta : Vec<double>();
      const Vec<double> na = uses_alpha(rule) ? alpha : Vec<double>();
      const MatrixRuleOutput<double> out = matrix_rule_primal<double>(rule, q, k, v, nb, na, S0);
      const MatrixRuleGrads<double> g =
          matrix_rule_backward<double>(rule, q, k, v, nb, na, S0, dO, dS);
      for (int t = 0; t < c.T; ++t) {
        const std::size_t row = std::size_t(n) * c.T + t;
        for (int i = 0; i < c.dk; ++i) {
          r.dq[row * HK + std::size_t(h) * c.dk + i] = g.dq(t, i);
          r.dk[row * HK + std::size_t(h) * c.dk + i] = g.dk(t, i);
        }
        for (int j = 0; j < c.dv; ++j) {
          r.o[row * HV + std::size_t(h) * c.dv + j] = out.o(t, j);
          r.dv[row * HV + std::size_t(h) * c.dv + j] = g.dv(t, j);
        }
        if (uses_beta(rule)) r.dbeta[row * c.H + h] = g.dbeta(t);
        if (uses_alpha(rule)) r.dalpha[row * c.H + h] = g.dalpha(t);
      }
      for (int i = 0; i < c.dk; ++i)
        for (int j = 0; j < c.dv; ++j) {
          r.S_final[so + std::size_t(i) * c.dv + j] = out.state(i, j);
          r.dS0[so + std::size_t(i) * c.dv + j] = g.dS0(i, j);
        }
    }
  return r;
}

RuleOut<float> gpu_rule(MatrixRule rule, const RuleInputs& in) {
  const RuleCase& c = in.c;
  const MatrixRuleDims dims{c.B, c.T, c.H, c.dk, c.dv, c.C};
  const int HK = c.H * c.dk, HV = c.H * c.dv;
  const std::size_t states = std::size_t(c.B) * c.H * c.dk * c.dv;
  DeviceBuffer q(in.q), k(in.k), v(in.v), beta(in.beta), alpha(in.alpha), dO(in.dO);
  DeviceBuffer S0(in.S0), dS(in.dS);
  DeviceBuffer o(std::size_t(in.R) * HV), S_final(states), kept(matrix_rule_state_floats(dims));
  DeviceBuffer dq(std::size_t(in.R) * HK), dk(dq.size()), dv(o.size());
  DeviceBuffer dbeta(beta.size()), dalpha(alpha.size()), dS0(states);
  const std::size_t ws_bytes = matrix_rule_backward_workspace_bytes(dims);
  DeviceBuffer ws((ws_bytes + sizeof(float) - 1) / sizeof(float));
  for (DeviceBuffer* b : {&o, &S_final, &kept, &dq, &dk, &dv, &dbeta, &dalpha, &dS0, &ws})
    b->poison();

  MatrixRuleForwardArgs f;
  f.rule = rule;
  f.dims = dims;
  f.q = q.get();
  f.k = k.get();
  f.ld_qk = in.ldqk;
  f.v = v.get();
  f.ld_v = in.ldv;
  f.beta = uses_beta(rule) ? beta.get() : nullptr;
  f.alpha = uses_alpha(rule) ? alpha.get() : nullptr;
  f.S0 = c.given ? S0.get() : nullptr;
  f.o = o.get();
  f.ld_o = HV;
  f.S_final = S_final.get();
  f.states = kept.get();
  matrix_rule_forward(f);

  MatrixRuleBackwardArgs b = matrix_rule_backward_args(f);
  b.dO = dO.get();
  b.ld_do = in.lddo;
  b.dS_final = c.given ? dS.get() : nullptr;
  b.dq = dq.get();
  b.dk = dk.get();
  b.ld_dqk = HK;
  b.dv = dv.get();
  b.ld_dv = HV;
  b.dbeta = uses_beta(rule) ? dbeta.get() : nullptr;
  b.dalpha = uses_alpha(rule) ? dalpha.get() : nullptr;
  b.dS0 = dS0.get();
  b.workspace = ws.get();
  b.workspace_bytes = ws_bytes;
  matrix_rule_backward(b);

  RuleOut<float> r;
  r.o = o.download();
  r.S_final = S_final.download();
  r.dq = dq.download();
  r.dk = dk.download();
  r.dv = dv.download();
  if (uses_beta(rule)) r.dbeta = dbeta.download();
  if (uses_alpha(rule)) r.dalpha = dalpha.download();
  r.dS0 = dS0.download();
  return r;
}

TEST(MatrixRuleCuda, ForwardAndBackwardMatchTheCpuInFp64) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf(
      "[ INFO     ] seed %llu; error = max|gpu - cpu| / max|cpu|; bounds %.0e forward, "
      "%.0e backward\n",
      (unsigned long long)seed, kTolForward, kTolBackward);
  for (const MatrixRule rule : kRules) {
    double worst_f = 0, worst_b = 0;
    for (const RuleCase& c : rule_cases()) {
      SCOPED_TRACE(std::string(to_string(rule)) + " " + describe(c));
      const RuleInputs in = make_inputs(rule, c, rng);
      const RuleOut<double> ref = cpu_rule(rule, in);
      const RuleOut<float> got = gpu_rule(rule, in);
      double wf = 0, wb = 0;
      expect_within("o", got.o, ref.o, kTolForward, wf);
      expect_within("S_final", got.S_final, ref.S_final, kTolForward, wf);
      expect_within("dq", got.dq, ref.dq, kTolBackward, wb);
      expect_within("dk", got.dk, ref.dk, kTolBackward, wb);
      expect_within("dv", got.dv, ref.dv, kTolBackward, wb);
      if (uses_beta(rule)) expect_within("dbeta", got.dbeta, ref.dbeta, kTolBackward, wb);
      if (uses_alpha(rule)) expect_within("dalpha", got.dalpha, ref.dalpha, kTolBackward, wb);
      expect_within("dS0", got.dS0, ref.dS0, kTolBackward, wb);
      std::printf("[ INFO     ] %-16s %-40s forward %.2e, backward %.2e\n", to_string(rule),
                  describe(c).c_str(), wf, wb);
      worst_f = std::max(worst_f, wf);
      worst_b = std::max(worst_b, wb);
    }
    std::printf("[ INFO     ] %-16s worst over the shapes: forward %.2e, backward %.2e\n",
                to_string(rule), worst_f, worst_b);
  }
}

// No atomics and fixed orders of every sum: a second run gives the same bits, for every rule.
TEST(MatrixRuleCuda, TwoRunsGiveTheSameBits) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf("[ INFO     ] seed %llu\n", (unsigned long long)seed);
  for (const MatrixRule rule : kRules) {
    SCOPED_TRACE(to_string(rule));
    const RuleInputs in = make_inputs(rule, {2, 3, 100, 64, 48, 16, true}, rng);
    const RuleOut<float> a = gpu_rule(rule, in), b = gpu_rule(rule, in);
    EXPECT_EQ(a.o, b.o);
    EXPECT_EQ(a.S_final, b.S_final);
    EXPECT_EQ(a.dq, b.dq);
    EXPECT_EQ(a.dk, b.dk);
    EXPECT_EQ(a.dv, b.dv);
    EXPECT_EQ(a.dbeta, b.dbeta);
    EXPECT_EQ(a.dalpha, b.dalpha);
    EXPECT_EQ(a.dS0, b.dS0);
  }
}

// Bad shapes and arguments are refused with a message naming the field, before anything is launched
// (so this runs without a GPU: every check is on the host).
TEST(MatrixRuleCuda, BadArgumentsAreRefusedBeforeAnyLaunch) {
  auto why = [](MatrixRuleDims d) { return matrix_rule_unsupported(d); };
  EXPECT_EQ(why({2, 300, 3, 128, 128, 64}), "");
  EXPECT_EQ(why({1, 1, 1, 1, 1, 1}), "");
  const struct {
    MatrixRuleDims d;
    const char* field;
  } bad[] = {{{0, 8, 1, 64, 64, 64}, "batch"}, {{1, 0, 1, 64, 64, 64}, "seq_len"},
             {{1, 8, 0, 64, 64, 64}, "heads"}, {{1, 8, 1, 129, 64, 64}, "d_k"},
             {{1, 8, 1, 0, 64, 64}, "d_k"},    {{1, 8, 1, 64, 129, 64}, "d_v"},
             {{1, 8, 1, 64, 0, 64}, "d_v"},    {{1, 8, 1, 64, 64, 0}, "chunk"}};
  for (const auto& b : bad) {
    const std::string w = why(b.d);
    EXPECT_NE(w.find(b.field), std::string::npos) << "'" << w << "' does not name " << b.field;
  }
  auto forward_error = [](const MatrixRuleForwardArgs& f) {
    try {
      matrix_rule_forward(f);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // Pointers that are never dereferenced: every one of these is refused first.
  float dummy = 0;
  MatrixRuleForwardArgs f;
  f.rule = MatrixRule::DeltaNet;
  f.dims = {1, 8, 2, 16, 16, 4};
  f.q = f.k = f.v = f.beta = &dummy;
  f.o = &dummy;
  f.ld_qk = 32;
  f.ld_v = 32;
  f.ld_o = 32;
  MatrixRuleForwardArgs g = f;
  g.dims.d_k = 200;
  EXPECT_NE(forward_error(g).find("d_k"), std::string::npos) << forward_error(g);
  g = f;
  g.ld_qk = 31;
  EXPECT_NE(forward_error(g).find("ld_qk"), std::string::npos) << forward_error(g);
  g = f;
  g.beta = nullptr;
  EXPECT_NE(forward_error(g).find("beta"), std::string::npos) << forward_error(g);
  g = f;
  g.alpha = &dummy;  // DeltaNet has no decay
  EXPECT_NE(forward_error(g).find("alpha"), std::string::npos) << forward_error(g);
  g = f;
  g.o = nullptr;
  EXPECT_NE(forward_error(g).find("null"), std::string::npos) << forward_error(g);
  g = f;
  g.rule = MatrixRule::LinearAttention;  // given a β it has not
  EXPECT_NE(forward_error(g).find("beta"), std::string::npos) << forward_error(g);

  MatrixRuleBackwardArgs b;  // null pointers
  b.rule = MatrixRule::GatedDeltaNet;
  try {
    matrix_rule_backward(b);
    ADD_FAILURE() << "null pointers were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("null"), std::string::npos) << e.what();
  }
  b.dims = {1, 8, 2, 16, 16, 4};
  b.q = b.k = b.v = b.states = b.dO = b.beta = b.alpha = &dummy;
  b.dq = b.dk = b.dv = b.dbeta = b.dalpha = &dummy;
  b.workspace = &dummy;
  b.ld_qk = b.ld_dqk = b.ld_v = b.ld_dv = b.ld_do = 32;
  b.workspace_bytes = matrix_rule_backward_workspace_bytes(b.dims) - 4;
  try {
    matrix_rule_backward(b);
    ADD_FAILURE() << "a short workspace was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("workspace_bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tttlab::kernels::test
