// The chunked tensor-core delta rules (chunked_delta_rule_forward, tttlab/kernels/delta_rule_chunked.hpp)
// against the CPU's primal form (matrix_rule_primal, docs/MATH.md §11.2) in fp64, head by head, on the
// bf16-rounded inputs the kernel reads.
//
// Inputs as the layers give them: q and k L2-normalised per head, then rounded to bf16 (so ‖k‖ is 1
// within 2⁻⁸), v ~ N(0, 1) rounded to bf16, β ~ U(0, 1), log α = log U(0.5, 1) (Gated DeltaNet), S_0 = 0.
// What the kernel rounds to bf16 (relative 2⁻⁹ each): W, Ũ and U where they enter products, the copy
// of the state that enters Q S_p and W S_p, the masked Q Kᵀ tile, and O on output; its sums and the
// running state are fp32. With unit keys and β ≤ 1 every step is a contraction, so rounding made in
// one chunk decays in the next rather than accumulating: the bound is 2e-2 of max|ref| (a few bf16
// roundings of terms of the output's size) at every T, the worst case is printed, and T = 2000 (32
// chunks) checks that the error does not grow along the sequence. A wrong, misplaced or missing term
// (a transposed product, the decay at the wrong side of the write, a lost chunk) is O(1).
// Shapes: d ∈ {64, 128}; T around the chunk (64) and its multiples, and not a multiple of it.
// O is poisoned with NaN first, so an unwritten element fails. Seeds fixed and printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "require_gpu.hpp"
#include "test_ttt_util.hpp"
#include "tttlab/fastweight/matrix_rules.hpp"
#include "tttlab/kernels/delta_rule_chunked.hpp"

namespace tttlab::kernels::test {
namespace {

constexpr double kTolO = 2e-2;
// The backward rounds more intermediates (above, and in delta_rule_chunked.hpp): 3e-2 of max|ref|.
constexpr double kTolGrad = 3e-2;

struct DeltaCase {
  int B, H, T, d;
};

std::string describe(const DeltaCase& c, bool gated) {
  return std::string(gated ? "gated" : "delta") + " B=" + std::to_string(c.B) +
         " H=" + std::to_string(c.H) + " T=" + std::to_string(c.T) + " d=" + std::to_string(c.d);
}

std::vector<DeltaCase> delta_cases() {
  if (quick_mode()) return {{2, 2, 70, 64}, {1, 1, 130, 128}};
  std::vector<DeltaCase> c;
  for (int d : {64, 128})
    for (int T : {1, 2, 63, 64, 65, 128, 129, 300}) c.push_back({2, 3, T, d});
  c.push_back({1, 2, 2000, 64});
  c.push_back({1, 1, 2000, 128});
  return c;
}

struct DeltaInputs {
  DeltaCase c;
  std::vector<float> q, k, v, beta, log_alpha;
  std::vector<std::uint16_t> q16, k16, v16;
};

DeltaInputs make_inputs(const DeltaCase& c, std::mt19937_64& rng) {
  DeltaInputs in;
  in.c = c;
  const std::size_t n = std::size_t(c.B) * c.T * c.H * c.d, gates = std::size_t(c.B) * c.T * c.H;
  auto unit_rows = [&](std::vector<float> x) {
    for (std::size_t r = 0; r < gates; ++r) {
      double n2 = 0;
      for (int i = 0; i < c.d; ++i) n2 += double(x[r * c.d + i]) * x[r * c.d + i];
      for (int i = 0; i < c.d; ++i) x[r * c.d + i] = float(x[r * c.d + i] / std::sqrt(n2));
    }
    return x;
  };
  in.q = rounded_to_bf16(unit_rows(randn_vec(n, rng, 1.0)), in.q16);
  in.k = rounded_to_bf16(unit_rows(randn_vec(n, rng, 1.0)), in.k16);
  in.v = rounded_to_bf16(randn_vec(n, rng, 1.0), in.v16);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  in.beta.resize(gates);
  in.log_alpha.resize(gates);
  for (float& x : in.beta) x = float(u01(rng));
  for (float& x : in.log_alpha) x = float(std::log(0.5 + 0.5 * u01(rng)));
  return in;
}

// O [B, T, H·d] of the CPU's primal form in fp64, from S_0 = 0.
std::vector<double> cpu_output(const DeltaInputs& in, bool gated) {
  const DeltaCase& c = in.c;
  const int HD = c.H * c.d;
  std::vector<double> o(std::size_t(c.B) * c.T * HD, 0.0);
  const MatrixRule rule = gated ? MatrixRule::GatedDeltaNet : MatrixRule::DeltaNet;
  for (int n = 0; n < c.B; ++n)
    for (int h = 0; h < c.H; ++h) {
      Mat<double> q(c.T, c.d), k(c.T, c.d), v(c.T, c.d);
      Vec<double> beta(c.T), alpha(c.T);
      for (int t = 0; t < c.T; ++t) {
        const std::size_t row = std::size_t(n) * c.T + t;
        for (int i = 0; i < c.d; ++i) {
          q(t, i) = in.q[row * HD + std::size_t(h) * c.d + i];
          k(t, i) = in.k[row * HD + std::size_t(h) * c.d + i];
          v(t, i) = in.v[row * HD + std::size_t(h) * c.d + i];
        }
        beta(t) = in.beta[row * c.H + h];
        alpha(t) = std::exp(double(in.log_alpha[row * c.H + h]));
      }
      const Mat<double> S0 = Mat<double>::Zero(c.d, c.d);
      const MatrixRuleOutput<double> out =
          matrix_rule_primal<double>(rule, q, k, v, beta, gated ? alpha : Vec<double>(), S0);
      for (int t = 0; t < c.T; ++t)
        for (int j = 0; j < c.d; ++j)
          o[(std::size_t(n) * c.T + t) * HD + std::size_t(h) * c.d + j] = out.o(t, j);
    }
  return o;
}

// The forward's arguments on device copies of a case's inputs (no workspace yet).
ChunkedDeltaRuleForwardArgs forward_args(const DeltaCase& c, const DeviceBuffer16& q,
                                         const DeviceBuffer16& k, const DeviceBuffer16& v,
                                         const DeviceBuffer& beta, const DeviceBuffer& log_alpha,
                                         bool gated, DeviceBuffer16& o) {
  ChunkedDeltaRuleForwardArgs a;
  a.dims = {c.B, c.H, c.T, c.d};
  a.Q = q.get();
  a.K = k.get();
  a.V = v.get();
  a.beta = beta.get();
  a.log_alpha = gated ? log_alpha.get() : nullptr;
  a.O = o.get();
  return a;
}

std::vector<float> widened(const DeviceBuffer16& o) {
  std::vector<float> out;
  for (std::uint16_t x : o.download()) out.push_back(bf16_to_float(x));
  return out;
}

std::vector<float> gpu_output(const DeltaInputs& in, bool gated) {
  DeviceBuffer16 q(in.q16), k(in.k16), v(in.v16), o(in.q16.size());
  DeviceBuffer beta(in.beta), log_alpha(in.log_alpha);
  ChunkedDeltaRuleForwardArgs a = forward_args(in.c, q, k, v, beta, log_alpha, gated, o);
  const std::size_t wsb = chunked_delta_rule_forward_workspace_bytes(a.dims);
  DeviceBuffer ws((wsb + sizeof(float) - 1) / sizeof(float));
  o.poison();
  ws.poison();
  a.workspace = ws.get();
  a.workspace_bytes = wsb;
  chunked_delta_rule_forward(a);
  return widened(o);
}

TEST(ChunkedDeltaRule, ForwardMatchesTheCpuPrimalFormOnBf16Inputs) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf("[ INFO     ] seed %llu; error = max|gpu - cpu| / max|cpu|, bound %.0e\n",
              (unsigned long long)seed, kTolO);
  for (const bool gated : {false, true}) {
    double worst = 0;
    for (const DeltaCase& c : delta_cases()) {
      SCOPED_TRACE(describe(c, gated));
      const DeltaInputs in = make_inputs(c, rng);
      const std::vector<double> ref = cpu_output(in, gated);
      const std::vector<float> got = gpu_output(in, gated);
      const ErrorStat e = compare(got, ref, 1e-6);
      EXPECT_TRUE(within("O", e, kTolO, got, ref));
      worst = std::max(worst, e.rel);
      if (c.T >= 1000 || c.T == 1 || quick_mode())
        std::printf("[ INFO     ] %-34s O %.2e (x max|ref| %.2f)\n", describe(c, gated).c_str(),
                    e.rel, e.max_ref);
    }
    std::printf("[ INFO     ] %s: worst relative error of O %.2e\n",
                gated ? "Gated DeltaNet" : "DeltaNet", worst);
  }
}

TEST(ChunkedDeltaRule, IsDeterministic) {
  TTTLAB_SEEDED_GPU_TEST();
  const DeltaInputs in = make_inputs({2, 3, 300, 64}, rng);
  for (const bool gated : {false, true}) EXPECT_EQ(gpu_output(in, gated), gpu_output(in, gated));
}

// The backward (d = 64) against matrix_rule_backward in fp64 with S_0 = 0 and no gradient at S_T,
// dO ~ N(0, 1) rounded to bf16. The kernel's d log α is compared with α·dα of the CPU. Every gradient is
// poisoned with NaN first.
struct DeltaGrads {
  std::vector<float> dq, dk, dv, dbeta, dlog_alpha;
};
struct DeltaGradsRef {
  std::vector<double> dq, dk, dv, dbeta, dlog_alpha;
};

DeltaGradsRef cpu_grads(const DeltaInputs& in, const std::vector<float>& dO, bool gated) {
  const DeltaCase& c = in.c;
  const int HD = c.H * c.d;
  DeltaGradsRef r;
  r.dq.assign(std::size_t(c.B) * c.T * HD, 0.0);
  r.dk = r.dv = r.dq;
  r.dbeta.assign(std::size_t(c.B) * c.T * c.H, 0.0);
  r.dlog_alpha = r.dbeta;
  for (int n = 0; n < c.B; ++n)
    for (int h = 0; h < c.H; ++h) {
      Mat<double> q(c.T, c.d), k(c.T, c.d), v(c.T, c.d), go(c.T, c.d);
      Vec<double> beta(c.T), alpha(c.T);
      for (int t = 0; t < c.T; ++t) {
        const std::size_t row = std::size_t(n) * c.T + t;
        for (int i = 0; i < c.d; ++i) {
          const std::size_t at = row * HD + std::size_t(h) * c.d + i;
          q(t, i) = in.q[at];
          k(t, i) = in.k[at];
          v(t, i) = in.v[at];
          go(t, i) = dO[at];
        }
        beta(t) = in.beta[row * c.H + h];
        alpha(t) = std::exp(double(in.log_alpha[row * c.H + h]));
      }
      const Mat<double> zero = Mat<double>::Zero(c.d, c.d);
      const MatrixRuleGrads<double> g = matrix_rule_backward<double>(
          gated ? MatrixRule::GatedDeltaNet : MatrixRule::DeltaNet, q, k, v, beta,
          gated ? alpha : Vec<double>(), zero, go, zero);
      for (int t = 0; t < c.T; ++t) {
        const std::size_t row = std::size_t(n) * c.T + t;
        for (int i = 0; i < c.d; ++i) {
          const std::size_t at = row * HD + std::size_t(h) * c.d + i;
          r.dq[at] = g.dq(t, i);
          r.dk[at] = g.dk(t, i);
          r.dv[at] = g.dv(t, i);
        }
        r.dbeta[row * c.H + h] = g.dbeta(t);
        if (gated) r.dlog_alpha[row * c.H + h] = alpha(t) * g.dalpha(t);
      }
    }
  return r;
}

// The backward's gradients. With kept_o, after a forward that keeps what the backward reads (KEEPING
// in delta_rule_chunked.hpp), its O going to *kept_o; the kept memory and the backward's smaller
// workspace are poisoned first, so a part the forward did not write, or one the backward still
// expects in its workspace, fails.
DeltaGrads gpu_grads(const DeltaInputs& in, const std::vector<std::uint16_t>& dO16, bool gated,
                     std::vector<float>* kept_o = nullptr) {
  const DeltaCase& c = in.c;
  const AttentionDims dims{c.B, c.H, c.T, c.d};
  const std::size_t n = in.q16.size();
  const bool keep = kept_o != nullptr;
  DeviceBuffer16 q(in.q16), k(in.k16), v(in.v16), go(dO16), o(keep ? n : 1);
  DeviceBuffer beta(in.beta), la(in.log_alpha), dq(n), dk(n), dv(n), dbeta(in.beta.size()),
      dla(in.beta.size());
  const std::size_t wsb = chunked_delta_rule_backward_workspace_bytes(dims, keep),
                    kb = keep ? chunked_delta_rule_keep_bytes(dims) : 0;
  DeviceBuffer ws((wsb + sizeof(float) - 1) / sizeof(float)),
      kept(keep ? (kb + sizeof(float) - 1) / sizeof(float) : 1);
  for (DeviceBuffer* b : {&dq, &dk, &dv, &dbeta, &dla, &ws, &kept}) b->poison();
  o.poison();
  if (keep) {
    ChunkedDeltaRuleForwardArgs f = forward_args(c, q, k, v, beta, la, gated, o);
    f.keep = kept.get();
    f.keep_bytes = kb;
    chunked_delta_rule_forward(f);
    *kept_o = widened(o);
  }
  ChunkedDeltaRuleBackwardArgs a;
  a.dims = dims;
  a.Q = q.get();
  a.K = k.get();
  a.V = v.get();
  a.beta = beta.get();
  a.dO = go.get();
  a.dQ = dq.get();
  a.dK = dk.get();
  a.dV = dv.get();
  a.dbeta = dbeta.get();
  a.log_alpha = gated ? la.get() : nullptr;
  a.dlog_alpha = gated ? dla.get() : nullptr;
  a.workspace = ws.get();
  a.workspace_bytes = wsb;
  if (keep) {
    a.kept = kept.get();
    a.kept_bytes = kb;
  }
  chunked_delta_rule_backward(a);
  return {dq.download(), dk.download(), dv.download(), dbeta.download(),
          gated ? dla.download() : std::vector<float>()};
}

TEST(ChunkedDeltaRule, BackwardMatchesTheCpuBackwardOnBf16Inputs) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf("[ INFO     ] seed %llu; error = max|gpu - cpu| / max|cpu|, bound %.0e\n",
              (unsigned long long)seed, kTolGrad);
  for (const bool gated : {false, true}) {
    double worst = 0;
    for (const DeltaCase& c : delta_cases()) {
      if (c.d != 64) continue;
      SCOPED_TRACE(describe(c, gated));
      const DeltaInputs in = make_inputs(c, rng);
      std::vector<std::uint16_t> dO16;
      const std::vector<float> dO = rounded_to_bf16(randn_vec(in.q.size(), rng, 1.0), dO16);
      const DeltaGradsRef ref = cpu_grads(in, dO, gated);
      const DeltaGrads got = gpu_grads(in, dO16, gated);
      const ErrorStat eq = compare(got.dq, ref.dq, 1e-6), ek = compare(got.dk, ref.dk, 1e-6),
                      ev = compare(got.dv, ref.dv, 1e-6), eb = compare(got.dbeta, ref.dbeta, 1e-6);
      EXPECT_TRUE(within("dQ", eq, kTolGrad, got.dq, ref.dq));
      EXPECT_TRUE(within("dK", ek, kTolGrad, got.dk, ref.dk));
      EXPECT_TRUE(within("dV", ev, kTolGrad, got.dv, ref.dv));
      EXPECT_TRUE(within("dbeta", eb, kTolGrad, got.dbeta, ref.dbeta));
      worst = std::max({worst, eq.rel, ek.rel, ev.rel, eb.rel});
      double ea = 0;
      if (gated) {
        const ErrorStat e = compare(got.dlog_alpha, ref.dlog_alpha, 1e-6);
        EXPECT_TRUE(within("dlog_alpha", e, kTolGrad, got.dlog_alpha, ref.dlog_alpha));
        worst = std::max(worst, e.rel);
        ea = e.rel;
      }
      std::printf("[ INFO     ] %-34s dQ %.2e dK %.2e dV %.2e dbeta %.2e dlog_alpha %.2e\n",
                  describe(c, gated).c_str(), eq.rel, ek.rel, ev.rel, eb.rel, ea);
    }
    std::printf("[ INFO     ] %s backward: worst relative error %.2e\n",
                gated ? "Gated DeltaNet" : "DeltaNet", worst);
  }
}

// KEEPING: a forward given `keep` runs the backward's first two kernels, so its O (W and Ũ from N, not
// by substitution) is checked against the CPU at the forward's bound, and the backward given that
// memory as `kept` must give the very bits of the backward that recomputes it.
TEST(ChunkedDeltaRule, KeptForwardMatchesTheCpuAndItsBackwardTheRecomputingOne) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf("[ INFO     ] seed %llu; O: max|gpu - cpu| / max|cpu|, bound %.0e; gradients: the "
              "recomputing backward's bits\n",
              (unsigned long long)seed, kTolO);
  for (const bool gated : {false, true}) {
    double worst = 0;
    for (const DeltaCase& c : delta_cases()) {
      if (c.d != 64) continue;
      SCOPED_TRACE(describe(c, gated));
      const DeltaInputs in = make_inputs(c, rng);
      std::vector<std::uint16_t> dO16;
      rounded_to_bf16(randn_vec(in.q.size(), rng, 1.0), dO16);
      std::vector<float> o;
      const DeltaGrads got = gpu_grads(in, dO16, gated, &o);
      const std::vector<double> ref = cpu_output(in, gated);
      const ErrorStat e = compare(o, ref, 1e-6);
      EXPECT_TRUE(within("O", e, kTolO, o, ref));
      worst = std::max(worst, e.rel);
      const DeltaGrads want = gpu_grads(in, dO16, gated);
      EXPECT_EQ(got.dq, want.dq);
      EXPECT_EQ(got.dk, want.dk);
      EXPECT_EQ(got.dv, want.dv);
      EXPECT_EQ(got.dbeta, want.dbeta);
      EXPECT_EQ(got.dlog_alpha, want.dlog_alpha);
    }
    std::printf("[ INFO     ] %s, forward that keeps: worst relative error of O %.2e\n",
                gated ? "Gated DeltaNet" : "DeltaNet", worst);
  }
}

TEST(ChunkedDeltaRule, BackwardIsDeterministic) {
  TTTLAB_SEEDED_GPU_TEST();
  const DeltaInputs in = make_inputs({2, 3, 300, 64}, rng);
  std::vector<std::uint16_t> dO16;
  rounded_to_bf16(randn_vec(in.q.size(), rng, 1.0), dO16);
  for (const bool gated : {false, true}) {
    const DeltaGrads a = gpu_grads(in, dO16, gated), b = gpu_grads(in, dO16, gated);
    EXPECT_EQ(a.dq, b.dq);
    EXPECT_EQ(a.dk, b.dk);
    EXPECT_EQ(a.dv, b.dv);
    EXPECT_EQ(a.dbeta, b.dbeta);
    EXPECT_EQ(a.dlog_alpha, b.dlog_alpha);
  }
}

TEST(ChunkedDeltaRule, ArgumentsAreChecked) {
  TTTLAB_REQUIRE_GPU();
  const AttentionDims dims{2, 2, 70, 64};
  const std::size_t n = 2 * 2 * 70 * 64, gates = 2 * 2 * 70;
  const std::size_t wsb = chunked_delta_rule_forward_workspace_bytes(dims);
  // W and Ũ in bf16, and g for ⌈70/64⌉ = 2 chunks of 64 per head.
  EXPECT_EQ(wsb, 2 * n * 2 + 2u * 2 * 2 * 64 * 4);
  DeviceBuffer16 q(n), k(n), v(n), o(n);
  DeviceBuffer beta(gates), la(gates), ws(wsb / 4);
  auto args = [&] {
    ChunkedDeltaRuleForwardArgs a;
    a.dims = dims;
    a.Q = q.get();
    a.K = k.get();
    a.V = v.get();
    a.beta = beta.get();
    a.log_alpha = la.get();
    a.O = o.get();
    a.workspace = ws.get();
    a.workspace_bytes = wsb;
    return a;
  };
  EXPECT_NO_THROW(chunked_delta_rule_forward(args()));
  auto expect_error = [&](ChunkedDeltaRuleForwardArgs a, const std::string& needle) {
    try {
      chunked_delta_rule_forward(a);
      ADD_FAILURE() << "no error; expected one naming " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  ChunkedDeltaRuleForwardArgs a = args();
  a.dims.head_dim = 32;
  expect_error(a, "head_dim must be 64 or 128");
  a = args();
  a.K = nullptr;
  expect_error(a, "K is null");
  a = args();
  a.beta = nullptr;
  expect_error(a, "beta is null");
  a = args();
  a.workspace_bytes = wsb - 1;
  expect_error(a, "workspace has");
  a = args();
  a.O = const_cast<std::uint16_t*>(a.Q);
  expect_error(a, "O overlaps Q");
  a = args();
  a.dims.seq_len = 0;
  expect_error(a, "seq_len must be >= 1");

  const std::size_t bws = chunked_delta_rule_backward_workspace_bytes(dims);
  DeviceBuffer dq(n), dk(n), dv(n), db(gates), bw(bws / 4);
  auto bargs = [&] {
    ChunkedDeltaRuleBackwardArgs b;
    b.dims = dims;
    b.Q = q.get();
    b.K = k.get();
    b.V = v.get();
    b.beta = beta.get();
    b.dO = o.get();
    b.dQ = dq.get();
    b.dK = dk.get();
    b.dV = dv.get();
    b.dbeta = db.get();
    b.workspace = bw.get();
    b.workspace_bytes = bws;
    return b;
  };
  EXPECT_NO_THROW(chunked_delta_rule_backward(bargs()));
  auto expect_bwd_error = [&](ChunkedDeltaRuleBackwardArgs b, const std::string& needle) {
    try {
      chunked_delta_rule_backward(b);
      ADD_FAILURE() << "no error; expected one naming " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  ChunkedDeltaRuleBackwardArgs b = bargs();
  b.log_alpha = la.get();
  expect_bwd_error(b, "dlog_alpha must be given exactly with log_alpha");
  b = bargs();
  b.dims.head_dim = 128;
  expect_bwd_error(b, "head_dim must be 64");
  b = bargs();
  b.dO = nullptr;
  expect_bwd_error(b, "dO is null");
  b = bargs();
  b.dK = b.dQ;
  expect_bwd_error(b, "dQ overlaps dK");
  b = bargs();
  b.workspace_bytes = bws - 16;
  expect_bwd_error(b, "workspace has");

  // Keeping: W, Ũ, U in bf16, the states and N (2 chunks each) in bf16, g.
  const std::size_t kb = chunked_delta_rule_keep_bytes(dims),
                    kws = chunked_delta_rule_backward_workspace_bytes(dims, true);
  EXPECT_EQ(kb, 3 * n * 2 + 2u * 2 * 2 * (64 * 64 + 64 * 64) * 2 + 2u * 2 * 2 * 64 * 4);
  EXPECT_EQ(kws + kb, bws);
  DeviceBuffer kept(kb / 4);
  a = args();
  a.keep = kept.get();
  a.keep_bytes = kb;
  a.workspace = nullptr;
  a.workspace_bytes = 0;
  EXPECT_NO_THROW(chunked_delta_rule_forward(a));
  a.keep_bytes = kb - 4;
  expect_error(a, "keep has");
  a.keep_bytes = kb;
  a.dims.head_dim = 128;
  expect_error(a, "keep needs head_dim 64");
  a = args();
  a.keep = kept.get();
  a.keep_bytes = kb;
  a.O = reinterpret_cast<std::uint16_t*>(kept.get()) + 8;
  expect_error(a, "overlaps");
  b = bargs();
  b.kept = kept.get();
  b.kept_bytes = kb;
  b.workspace_bytes = kws;
  EXPECT_NO_THROW(chunked_delta_rule_backward(b));
  b.workspace_bytes = kws - 16;
  expect_bwd_error(b, "with kept");
  b.workspace_bytes = kws;
  b.kept_bytes = kb - 4;
  expect_bwd_error(b, "kept has");
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace tttlab::kernels::test
