// The causal attention kernels (tttlab/kernels/attention.hpp) against the CPU engine in fp64.
//
// Every case runs the forward and the backward of both variants (softmax, linear) on random fp32
// inputs and compares O, the softmax's saved log-sum-exp, dQ, dK and dV with
// causal_attention_forward/_backward and linear_attention_forward/_backward run in double on the
// same (float-valued) inputs, sequence by sequence. Outputs are poisoned with NaN first, so an
// unwritten element fails. Tolerance: max |gpu − ref| ≤ 1e-4 · max(max|ref|, 1) per tensor (the
// project's fp32 bound; fp32 accumulation over ≤ 1000 keys of terms of ~|ref| gives ~1e-6, measured
// ≤ 2e-6, and ≤ 2e-5 with the large logits). The floor of 1 (the inputs are N(0, 1), so every term is
// O(1)) is for T = 1, where softmax's dQ and dK are exactly 0 in exact arithmetic (P = 1, so
// dS = dP − δ = 0) but fp32 leaves ~1e-6 (dP = dO·V and δ = dO·O are summed in different orders;
// measured 3.3e-6 at d = 128). The lse: 1e-5 + 2e-6·A_t, where A_t = max_s Σ_c |q_tc·k_sc|/√d
// bounds the size of the row's fp32 score sums: a score's rounding error is ~1e-7·A_t in fp32 and
// ~5e-7·A_t with 3xTF32 (its low parts are truncated to tf32), and the lse moves by at most the largest
// score error (measured 2.1e-4 at A_t ≈ 300 with logits x40 with a retired 3xTF32 version; the
// CUDA-core kernel's fp32 scores are tighter, and the bound keeps that margin).
//
// Random inputs from a fixed seed per test (test_seed; TTTLAB_TEST_SEED overrides it).
// Shapes: T = 1, 2, 63, 64, 65 (the tile is 64), 200, 1000; d = 16, 32, 64, 128 plus 8, 40 and 100
// (padding of the kernels' d-tiles); several sequences and heads, so head and sequence offsets are
// exercised. A case with logits of standard deviation ~40 checks the softmax's max subtraction
// (without it exp overflows to inf). TTTLAB_GPU_TEST_QUICK=1 (under compute-sanitizer) keeps a few.
//
// The sliding window (AttentionForwardArgs::window) against windowed_attention_forward/_backward in
// fp64, with the same tolerances (its sums run over ≤ W keys, fewer terms than the causal ones):
// W = 1, 5, 64, 100 and W ≥ T, T = 1, 63, 65, 200, 300, d = 32, 64 (and one case each at d = 40,
// 128 and with large logits); no limit (window ≤ 0, or ≥ T) gives the causal kernels' bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_ttt_util.hpp"
#include "tttlab/kernels/attention.hpp"
#include "tttlab/nn/attention.hpp"
#include "tttlab/nn/linear_attention.hpp"

namespace tttlab::kernels::test {
namespace {

struct AttnCase {
  int B, H, T, d;
  double q_scale = 1.0;  // multiplies Q: large logits
  int window = 0;        // softmax's sliding window W (≤ 0: plain causal)
};

std::vector<AttnCase> attention_cases() {
  if (quick_mode()) return {{2, 2, 1, 16}, {1, 2, 65, 32}, {2, 1, 130, 64}, {1, 1, 70, 128}, {1, 2, 64, 40, 40.0}};
  std::vector<AttnCase> c;
  for (int d : {16, 32, 64, 128})
    for (int T : {1, 2, 63, 64, 65, 200, 1000}) {
      const bool big = T >= 1000;
      c.push_back({big ? 1 : 2, big ? 2 : 3, T, d});
    }
  for (int d : {8, 40, 100}) c.push_back({2, 2, 130, d});
  c.push_back({2, 2, 200, 64, 40.0});
  c.push_back({1, 2, 129, 128, 40.0});
  return c;
}

// Sequence n of a [B, T, H·d] buffer as a [T, H·d] matrix in double.
Mat<double> seq_mat(const std::vector<float>& x, int n, int T, int D) {
  Mat<double> m(T, D);
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < D; ++c) m(t, c) = x[(std::size_t(n) * T + t) * D + c];
  return m;
}
void put_seq(std::vector<double>& out, const Mat<double>& m, int n) {
  const std::size_t base = std::size_t(n) * m.rows() * m.cols();
  for (Eigen::Index t = 0; t < m.rows(); ++t)
    for (Eigen::Index c = 0; c < m.cols(); ++c) out[base + std::size_t(t) * m.cols() + c] = m(t, c);
}

struct Reference {
  std::vector<double> O, lse, lse_scale, dQ, dK, dV;  // lse_scale: A_t above
};

Reference reference(AttentionKind kind, const AttnCase& k, const std::vector<float>& Q, const std::vector<float>& K,
                    const std::vector<float>& V, const std::vector<float>& dO) {
  const int D = k.H * k.d;
  const std::size_t n = std::size_t(k.B) * k.T * D;
  Reference r;
  r.O.resize(n);
  r.dQ.resize(n);
  r.dK.resize(n);
  r.dV.resize(n);
  r.lse.resize(std::size_t(k.B) * k.H * k.T);
  r.lse_scale.resize(r.lse.size());
  for (int s = 0; s < k.B; ++s) {
    const Mat<double> q = seq_mat(Q, s, k.T, D), kk = seq_mat(K, s, k.T, D), v = seq_mat(V, s, k.T, D),
                      g = seq_mat(dO, s, k.T, D);
    Mat<double> o, dq, dk, dv;
    if (kind == AttentionKind::Softmax) {
      // window ≤ 0: the windowed functions are the causal ones (they call them).
      windowed_attention_forward<double>(q, kk, v, k.H, k.window, o);
      windowed_attention_backward<double>(q, kk, v, k.H, k.window, g, dq, dk, dv);
      // log Σ_{lo ≤ s ≤ t} exp(q_t·k_s/√d), with the row maximum taken out (lo = t − W + 1 ≥ 0).
      for (int h = 0; h < k.H; ++h)
        for (int t = 0; t < k.T; ++t) {
          const int lo = k.window > 0 ? std::max(0, t - k.window + 1) : 0;
          std::vector<double> sc(t + 1, -INFINITY);
          double mx = -INFINITY, scale = 0;
          const double inv = 1 / std::sqrt(double(k.d));
          for (int u = lo; u <= t; ++u) {
            const auto qt = q.row(t).segment(h * k.d, k.d), ku = kk.row(u).segment(h * k.d, k.d);
            sc[u] = qt.dot(ku) * inv;
            mx = std::max(mx, sc[u]);
            scale = std::max(scale, qt.cwiseAbs().dot(ku.cwiseAbs()) * inv);
          }
          double sum = 0;
          for (double x : sc) sum += std::exp(x - mx);
          r.lse[(std::size_t(s) * k.H + h) * k.T + t] = mx + std::log(sum);
          r.lse_scale[(std::size_t(s) * k.H + h) * k.T + t] = scale;
        }
    } else {
      linear_attention_forward<double>(q, kk, v, k.H, o);
      linear_attention_backward<double>(q, kk, v, k.H, g, dq, dk, dv);
    }
    put_seq(r.O, o, s);
    put_seq(r.dQ, dq, s);
    put_seq(r.dK, dk, s);
    put_seq(r.dV, dv, s);
  }
  return r;
}

// Every row's lse within 1e-5 + 2e-6·A_t of the reference (fp32's rounding of a sum of A_t's size).
void expect_lse_within(const std::vector<float>& got, const Reference& ref) {
  std::size_t bad = 0;
  double lse_err = 0;
  for (std::size_t i = 0; i < ref.lse.size(); ++i) {
    const double e = std::abs(double(got[i]) - ref.lse[i]);
    if (!(e <= 1e-5 + 2e-6 * ref.lse_scale[i])) ++bad;
    if (std::isfinite(e)) lse_err = std::max(lse_err, e);
  }
  EXPECT_EQ(bad, 0u) << "lse: " << bad << " rows off by more than 1e-5 + 2e-6 A_t (max error "
                     << lse_err << ")";
}


constexpr double kFloor = 1.0;  // see the tolerance above

const char* name_of(AttentionKind k) { return k == AttentionKind::Softmax ? "softmax" : "linear"; }

// The fields the forward's and the backward's arguments name alike: dims, Q, K, V, O and lse.
template <class Args>
void set_tensors(Args& a, const AttentionDims& dims, float* Q, float* K, float* V, float* O,
                 float* lse) {
  a.dims = dims;
  a.Q = Q;
  a.K = K;
  a.V = V;
  a.O = O;
  a.lse = lse;
}

std::string case_name(AttentionKind kind, const AttnCase& k) {
  return std::string(name_of(kind)) + " B=" + std::to_string(k.B) + " H=" + std::to_string(k.H) +
         " T=" + std::to_string(k.T) + " d=" + std::to_string(k.d) +
         (k.q_scale != 1.0 ? " Q x" + std::to_string(int(k.q_scale)) : std::string()) +
         (k.window != 0 ? " W=" + std::to_string(k.window) : std::string());
}

struct Outputs {
  std::vector<float> O, lse, dQ, dK, dV;
};

Outputs run_gpu(AttentionKind kind, const AttnCase& k, const std::vector<float>& Q,
                const std::vector<float>& K, const std::vector<float>& V,
                const std::vector<float>& dO,
                AttentionPrecision precision = AttentionPrecision::fp32) {
  const AttentionDims dims{k.B, k.H, k.T, k.d};
  const std::size_t n = Q.size(), rows = std::size_t(k.B) * k.H * k.T;
  DeviceBuffer q(Q), kk(K), v(V), g(dO), o(n), lse(rows), dq(n), dk(n), dv(n);
  const std::size_t ws_bytes = attention_backward_workspace_bytes(dims, kind);
  DeviceBuffer ws((ws_bytes + sizeof(float) - 1) / sizeof(float));
  for (DeviceBuffer* b : {&o, &lse, &dq, &dk, &dv, &ws}) b->poison();
  const bool soft = kind == AttentionKind::Softmax;
  AttentionForwardArgs f;
  set_tensors(f, dims, q.get(), kk.get(), v.get(), o.get(), soft ? lse.get() : nullptr);
  f.kind = kind;
  f.precision = precision;
  f.window = k.window;
  attention_forward(f);
  AttentionBackwardArgs b;
  set_tensors(b, dims, q.get(), kk.get(), v.get(), soft ? o.get() : nullptr,
              soft ? lse.get() : nullptr);
  b.kind = kind;
  b.precision = precision;
  b.window = k.window;
  b.dO = g.get();
  b.dQ = dq.get();
  b.dK = dk.get();
  b.dV = dv.get();
  b.workspace = ws_bytes ? ws.get() : nullptr;
  b.workspace_bytes = ws_bytes;
  attention_backward(b);
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
  return Outputs{o.download(), soft ? lse.download() : std::vector<float>{}, dq.download(), dk.download(),
                 dv.download()};
}

TEST(Attention, ForwardAndBackwardMatchTheCpuEngine) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  double worst[2] = {};  // [kind]
  for (AttentionKind kind : {AttentionKind::Softmax, AttentionKind::Linear})
    for (const AttnCase& k : attention_cases()) {
      if (kind == AttentionKind::Linear && k.q_scale != 1.0) continue;  // no softmax to overflow
      const std::size_t n = std::size_t(k.B) * k.T * k.H * k.d;
      std::vector<float> Q = randn_vec(n, rng, k.q_scale), K = randn_vec(n, rng, 1.0), V = randn_vec(n, rng, 1.0),
                         dO = randn_vec(n, rng, 1.0);
      const Reference ref = reference(kind, k, Q, K, V, dO);
      {
        const std::string name = case_name(kind, k);
        SCOPED_TRACE(name + ", seed " + std::to_string(seed));
        const Outputs got = run_gpu(kind, k, Q, K, V, dO);
        const ErrorStat eo = compare(got.O, ref.O, kFloor), eq = compare(got.dQ, ref.dQ, kFloor),
                        ek = compare(got.dK, ref.dK, kFloor), ev = compare(got.dV, ref.dV, kFloor);
        EXPECT_TRUE(within("O", eo, 1e-4, got.O, ref.O));
        EXPECT_TRUE(within("dQ", eq, 1e-4, got.dQ, ref.dQ));
        EXPECT_TRUE(within("dK", ek, 1e-4, got.dK, ref.dK));
        EXPECT_TRUE(within("dV", ev, 1e-4, got.dV, ref.dV));
        if (kind == AttentionKind::Softmax) expect_lse_within(got.lse, ref);
        double& wk = worst[kind == AttentionKind::Linear];
        wk = std::max({wk, eo.rel, eq.rel, ek.rel, ev.rel});
        if (k.T >= 1000 || k.q_scale != 1.0 || quick_mode())
          std::printf("[ INFO     ] %-39s O %.1e dQ %.1e dK %.1e dV %.1e (x max|ref|)\n", name.c_str(), eo.rel, eq.rel,
                      ek.rel, ev.rel);
      }
    }
  std::printf("[ INFO     ] worst relative error over all cases: softmax %.2e, linear %.2e\n", worst[0],
              worst[1]);
}

// Two backward runs give the same bits (no atomics, fixed summation order).
TEST(Attention, BackwardIsDeterministic) {
  TTTLAB_SEEDED_GPU_TEST();
  const AttnCase k{2, 3, 300, 64};
  const std::size_t n = std::size_t(k.B) * k.T * k.H * k.d;
  const auto Q = randn_vec(n, rng, 1.0), K = randn_vec(n, rng, 1.0), V = randn_vec(n, rng, 1.0), dO = randn_vec(n, rng, 1.0);
  for (AttentionKind kind : {AttentionKind::Softmax, AttentionKind::Linear})
    {
      const Outputs a = run_gpu(kind, k, Q, K, V, dO), b = run_gpu(kind, k, Q, K, V, dO);
      EXPECT_EQ(a.O, b.O) << name_of(kind);
      EXPECT_EQ(a.dQ, b.dQ) << name_of(kind);
      EXPECT_EQ(a.dK, b.dK) << name_of(kind);
      EXPECT_EQ(a.dV, b.dV) << name_of(kind);
    }
}

// ---- sliding window (softmax, fp32) -------------------------------------------------------------
std::vector<AttnCase> window_cases() {
  if (quick_mode())
    return {{2, 2, 65, 32, 1.0, 5}, {1, 2, 200, 64, 1.0, 64}, {2, 1, 300, 64, 1.0, 100}};
  std::vector<AttnCase> c;
  for (int d : {32, 64})
    for (int T : {1, 63, 65, 200, 300})
      for (int W : {1, 5, 64, 100, T, T + 37}) c.push_back({2, 3, T, d, 1.0, W});
  c.push_back({2, 2, 130, 40, 1.0, 5});     // d-tile padding
  c.push_back({1, 2, 200, 128, 1.0, 64});   // d = 128
  c.push_back({2, 2, 300, 64, 40.0, 5});    // large logits: max subtraction over a band
  c.push_back({1, 2, 129, 128, 40.0, 70});  // a band across three key tiles
  return c;
}

TEST(Attention, SlidingWindowMatchesTheCpuEngine) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  std::printf("[ INFO     ] seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  double worst = 0;
  for (const AttnCase& k : window_cases()) {
    const std::size_t n = std::size_t(k.B) * k.T * k.H * k.d;
    const std::vector<float> Q = randn_vec(n, rng, k.q_scale), K = randn_vec(n, rng, 1.0),
                             V = randn_vec(n, rng, 1.0), dO = randn_vec(n, rng, 1.0);
    const Reference ref = reference(AttentionKind::Softmax, k, Q, K, V, dO);
    const std::string name = case_name(AttentionKind::Softmax, k);
    SCOPED_TRACE(name + ", seed " + std::to_string(seed));
    const Outputs got = run_gpu(AttentionKind::Softmax, k, Q, K, V, dO);
    const ErrorStat eo = compare(got.O, ref.O, kFloor), eq = compare(got.dQ, ref.dQ, kFloor),
                    ek = compare(got.dK, ref.dK, kFloor), ev = compare(got.dV, ref.dV, kFloor);
    EXPECT_TRUE(within("O", eo, 1e-4, got.O, ref.O));
    EXPECT_TRUE(within("dQ", eq, 1e-4, got.dQ, ref.dQ));
    EXPECT_TRUE(within("dK", ek, 1e-4, got.dK, ref.dK));
    EXPECT_TRUE(within("dV", ev, 1e-4, got.dV, ref.dV));
    expect_lse_within(got.lse, ref);
    worst = std::max({worst, eo.rel, eq.rel, ek.rel, ev.rel});
    if (k.q_scale != 1.0 || quick_mode())
      std::printf("[ INFO     ] %-46s O %.1e dQ %.1e dK %.1e dV %.1e (x max|ref|)\n", name.c_str(),
                  eo.rel, eq.rel, ek.rel, ev.rel);
  }
  std::printf("[ INFO     ] windowed worst relative error over all cases: %.2e\n", worst);
}

// No limit is the causal kernels bit for bit: window ≤ 0 (the default) and every window ≥ T give
// window = 0's outputs; and a window is deterministic like the rest.
TEST(Attention, NoWindowIsTheCausalKernelBitForBit) {
  TTTLAB_SEEDED_GPU_TEST();
  for (AttnCase k : {AttnCase{2, 3, 200, 64}, AttnCase{1, 2, 65, 32}, AttnCase{2, 2, 300, 128}}) {
    const std::size_t n = std::size_t(k.B) * k.T * k.H * k.d;
    const auto Q = randn_vec(n, rng, 1.0), K = randn_vec(n, rng, 1.0), V = randn_vec(n, rng, 1.0),
               dO = randn_vec(n, rng, 1.0);
    const Outputs causal = run_gpu(AttentionKind::Softmax, k, Q, K, V, dO);
    for (int W : {-1, -64, k.T, k.T + 1, 1 << 30}) {
      k.window = W;
      SCOPED_TRACE(case_name(AttentionKind::Softmax, k));
      const Outputs got = run_gpu(AttentionKind::Softmax, k, Q, K, V, dO);
      EXPECT_EQ(got.O, causal.O);
      EXPECT_EQ(got.lse, causal.lse);
      EXPECT_EQ(got.dQ, causal.dQ);
      EXPECT_EQ(got.dK, causal.dK);
      EXPECT_EQ(got.dV, causal.dV);
    }
    k.window = 64;
    SCOPED_TRACE(case_name(AttentionKind::Softmax, k));
    const Outputs a = run_gpu(AttentionKind::Softmax, k, Q, K, V, dO),
                  b = run_gpu(AttentionKind::Softmax, k, Q, K, V, dO);
    EXPECT_EQ(a.O, b.O);
    EXPECT_EQ(a.lse, b.lse);
    EXPECT_EQ(a.dQ, b.dQ);
    EXPECT_EQ(a.dK, b.dK);
    EXPECT_EQ(a.dV, b.dV);
    EXPECT_NE(a.O, causal.O);  // the window does cut rows t ≥ 64
  }
}

// `call` throws std::invalid_argument, one line, mentioning `words`.
template <class Call>
void expect_refused(Call call, const std::string& words) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one mentioning '" << words << "'";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(words), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << "one line: " << m;
  }
}

// Bad arguments are refused with a one-line std::invalid_argument before anything is launched.
TEST(Attention, ArgumentsAreChecked) {
  TTTLAB_REQUIRE_GPU();
  const AttentionDims dims{2, 2, 10, 16};
  const std::size_t n = 2 * 2 * 10 * 16, rows = 2 * 2 * 10;
  DeviceBuffer q(n), k(n), v(n), o(n), lse(rows), g(n), dq(n), dk(n), dv(n), ws(rows);
  auto fwd = [&] {
    AttentionForwardArgs a;
    set_tensors(a, dims, q.get(), k.get(), v.get(), o.get(), lse.get());
    return a;
  };
  auto bwd = [&] {
    AttentionBackwardArgs a;
    set_tensors(a, dims, q.get(), k.get(), v.get(), o.get(), lse.get());
    a.dO = g.get();
    a.dQ = dq.get();
    a.dK = dk.get();
    a.dV = dv.get();
    a.workspace = ws.get();
    a.workspace_bytes = rows * sizeof(float);
    return a;
  };
  EXPECT_NO_THROW(attention_forward(fwd()));
  EXPECT_NO_THROW(attention_backward(bwd()));
  for (int d : {0, 129}) {
    auto a = fwd();
    a.dims.head_dim = d;
    expect_refused([&] { attention_forward(a); }, "head_dim");
  }
  {
    auto a = fwd();
    a.dims.seq_len = 0;
    expect_refused([&] { attention_forward(a); }, "seq_len");
  }
  {
    auto a = fwd();
    a.K = nullptr;
    expect_refused([&] { attention_forward(a); }, "K is null");
  }
  {
    auto a = fwd();
    a.O = const_cast<float*>(a.Q) + 5;
    expect_refused([&] { attention_forward(a); }, "O overlaps Q");
  }
  {
    auto a = fwd();
    a.lse = o.get();
    expect_refused([&] { attention_forward(a); }, "lse overlaps O");
  }
  {
    auto a = bwd();
    a.workspace_bytes = rows * sizeof(float) - 4;
    expect_refused([&] { attention_backward(a); }, "workspace has");
  }
  {
    auto a = bwd();
    a.lse = nullptr;
    expect_refused([&] { attention_backward(a); }, "lse (softmax) is null");
  }
  {
    auto a = bwd();
    a.dK = a.dQ;
    expect_refused([&] { attention_backward(a); }, "dQ overlaps dK");
  }
  {
    auto a = bwd();
    a.dV = const_cast<float*>(a.dO);
    expect_refused([&] { attention_backward(a); }, "dV overlaps dO");
  }
  {
    auto a = fwd();
    a.kind = AttentionKind::Linear;
    a.window = 4;
    expect_refused([&] { attention_forward(a); }, "window is for softmax attention only");
  }
  {
    auto a = bwd();
    a.precision = AttentionPrecision::tf32;
    a.window = 4;
    expect_refused([&] { attention_backward(a); }, "window needs AttentionPrecision::fp32");
  }
  {
    auto a = fwd();
    a.precision = AttentionPrecision::tf32;
    a.window = 4;
    expect_refused([&] { attention_forward(a); }, "window needs AttentionPrecision::fp32");
  }
  {
    // Linear attention reads neither O nor lse and needs no workspace.
    auto a = bwd();
    a.kind = AttentionKind::Linear;
    a.O = nullptr;
    a.lse = nullptr;
    a.workspace = nullptr;
    a.workspace_bytes = 0;
    EXPECT_EQ(attention_backward_workspace_bytes(dims, AttentionKind::Linear), 0u);
    EXPECT_NO_THROW(attention_backward(a));
  }
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- the tensor-core bf16 kernels (flash_attention_forward / _backward) ----------------------------
// Against the same fp64 reference, run on the bf16-rounded inputs the kernel reads (Q, K, V, and dO
// rounded to bf16 on the host), so only the kernel's own rounding is measured. What it rounds: P to
// bf16 where it enters P·V (and Pᵀ, dSᵀ, dS where they enter their products), relative 2⁻⁹ per
// term; O to bf16 on output (2⁻⁹ of |O|); δ = dO·O from the rounded O. The accumulations are fp32
// over ≤ 1000 keys. Bounds, relative to max(max|ref|, 1): O 1e-2, dQ, dK, dV 2e-2 (the measured
// worst case is printed; a masking or indexing error is O(1)). The lse sees no bf16 product (its
// scores are exact products of bf16 values summed in fp32): the fp32 bound of the test above.
// Shapes: d ∈ {32, 64, 128}, T around both tile sizes (64 and 128) and not a multiple of either.
std::vector<AttnCase> flash_cases() {
  if (quick_mode()) return {{2, 2, 1, 32}, {1, 2, 130, 64}, {1, 1, 70, 128}, {1, 2, 200, 64, 40.0}};
  std::vector<AttnCase> c;
  for (int d : {32, 64, 128})
    for (int T : {1, 2, 63, 64, 65, 127, 128, 129, 300, 1000}) {
      const bool big = T >= 1000;
      c.push_back({big ? 1 : 2, big ? 2 : 3, T, d});
    }
  c.push_back({2, 2, 200, 64, 40.0});
  c.push_back({1, 2, 129, 128, 40.0});
  return c;
}

struct FlashOutputs {
  std::vector<float> O, lse, dQ, dK, dV;
};

FlashOutputs run_flash(const AttnCase& k, const std::vector<std::uint16_t>& Q, const std::vector<std::uint16_t>& K,
                       const std::vector<std::uint16_t>& V, const std::vector<std::uint16_t>& dO,
                       FlashPath path = FlashPath::automatic) {
  const AttentionDims dims{k.B, k.H, k.T, k.d};
  const std::size_t n = Q.size(), rows = std::size_t(k.B) * k.H * k.T;
  DeviceBuffer16 q(Q), kk(K), v(V), g(dO), o(n);
  DeviceBuffer lse(rows), dq(n), dk(n), dv(n);
  const std::size_t ws_bytes = flash_attention_backward_workspace_bytes(dims);
  DeviceBuffer ws(ws_bytes / sizeof(float));
  o.poison();
  for (DeviceBuffer* b : {&lse, &dq, &dk, &dv, &ws}) b->poison();
  FlashAttentionForwardArgs f;
  f.dims = dims;
  f.Q = q.get();
  f.K = kk.get();
  f.V = v.get();
  f.O = o.get();
  f.lse = lse.get();
  f.path = path;
  flash_attention_forward(f);
  FlashAttentionBackwardArgs b;
  b.dims = dims;
  b.Q = q.get();
  b.K = kk.get();
  b.V = v.get();
  b.O = o.get();
  b.dO = g.get();
  b.lse = lse.get();
  b.dQ = dq.get();
  b.dK = dk.get();
  b.dV = dv.get();
  b.workspace = ws.get();
  b.workspace_bytes = ws_bytes;
  b.path = path;
  flash_attention_backward(b);
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
  FlashOutputs out;
  for (std::uint16_t x : o.download()) out.O.push_back(bf16_to_float(x));
  out.lse = lse.download();
  out.dQ = dq.download();
  out.dK = dk.download();
  out.dV = dv.download();
  return out;
}

// Both sets of kernels where the device has both: mma.sync everywhere, wgmma on compute capability
// 9.0 at d = 64 and 128.
std::vector<FlashPath> flash_paths(const AttnCase& k) {
  std::vector<FlashPath> p{FlashPath::mma_sync};
  if (flash_attention_wgmma_available(AttentionDims{k.B, k.H, k.T, k.d})) p.push_back(FlashPath::wgmma);
  return p;
}

TEST(FlashAttention, ForwardAndBackwardMatchTheCpuEngineOnBf16Inputs) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  double worst_o = 0, worst_g = 0;
  int wgmma_cases = 0;
  for (const AttnCase& k : flash_cases()) {
    for (FlashPath path : flash_paths(k)) {
      const std::size_t n = std::size_t(k.B) * k.T * k.H * k.d;
      std::vector<std::uint16_t> q16, k16, v16, g16;
      const std::vector<float> Q = rounded_to_bf16(randn_vec(n, rng, k.q_scale), q16),
                               K = rounded_to_bf16(randn_vec(n, rng, 1.0), k16),
                               V = rounded_to_bf16(randn_vec(n, rng, 1.0), v16),
                               dO = rounded_to_bf16(randn_vec(n, rng, 1.0), g16);
      const Reference ref = reference(AttentionKind::Softmax, k, Q, K, V, dO);
      const bool wg = path == FlashPath::wgmma;
      wgmma_cases += wg;
      const std::string name = std::string(wg ? "flash (wgmma) " : "flash ") + case_name(AttentionKind::Softmax, k);
      SCOPED_TRACE(name + ", seed " + std::to_string(seed));
      const FlashOutputs got = run_flash(k, q16, k16, v16, g16, path);
      const ErrorStat eo = compare(got.O, ref.O, kFloor), eq = compare(got.dQ, ref.dQ, kFloor),
                      ek = compare(got.dK, ref.dK, kFloor), ev = compare(got.dV, ref.dV, kFloor);
      EXPECT_TRUE(within("O", eo, 1e-2, got.O, ref.O));
      EXPECT_TRUE(within("dQ", eq, 2e-2, got.dQ, ref.dQ));
      EXPECT_TRUE(within("dK", ek, 2e-2, got.dK, ref.dK));
      EXPECT_TRUE(within("dV", ev, 2e-2, got.dV, ref.dV));
      expect_lse_within(got.lse, ref);
      worst_o = std::max(worst_o, eo.rel);
      worst_g = std::max({worst_g, eq.rel, ek.rel, ev.rel});
      if (k.T >= 1000 || k.q_scale != 1.0 || quick_mode())
        std::printf("[ INFO     ] %-45s O %.1e dQ %.1e dK %.1e dV %.1e (x max|ref|)\n", name.c_str(), eo.rel, eq.rel,
                    ek.rel, ev.rel);
    }
  }
  std::printf("[ INFO     ] flash worst relative error: O %.2e, gradients %.2e; %d cases on the wgmma forward%s\n",
              worst_o, worst_g, wgmma_cases, wgmma_cases ? "" : " (not available on this device)");
}

// The two sets of kernels compute the same functions with the same rounding points; they differ only
// in the order of the fp32 accumulations (tile sizes, the tensor cores' internal order), so O agrees
// to a few bf16 ulps, the lse to fp32 rounding, and the gradients to the bf16 rounding of P and dS
// that such a difference can flip (bound 1e-2 of max|g|; an indexing or masking error is O(1)).
TEST(FlashAttention, WgmmaKernelsAgreeWithTheMmaSyncKernels) {
  TTTLAB_SEEDED_GPU_TEST();
  bool ran = false;
  for (const AttnCase& k : {AttnCase{2, 3, 1000, 64}, AttnCase{1, 2, 777, 128}, AttnCase{3, 2, 130, 64}}) {
    if (!flash_attention_wgmma_available(AttentionDims{k.B, k.H, k.T, k.d})) continue;
    ran = true;
    const std::size_t n = std::size_t(k.B) * k.T * k.H * k.d;
    std::vector<std::uint16_t> q16, k16, v16, g16;
    rounded_to_bf16(randn_vec(n, rng, 1.0), q16);
    rounded_to_bf16(randn_vec(n, rng, 1.0), k16);
    rounded_to_bf16(randn_vec(n, rng, 1.0), v16);
    rounded_to_bf16(randn_vec(n, rng, 1.0), g16);
    const FlashOutputs a = run_flash(k, q16, k16, v16, g16, FlashPath::mma_sync),
                       b = run_flash(k, q16, k16, v16, g16, FlashPath::wgmma);
    const auto diff = [](const std::vector<float>& x, const std::vector<float>& y) {
      double e = 0, m = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        e = std::max(e, double(std::abs(x[i] - y[i])));
        m = std::max(m, double(std::abs(x[i])));
      }
      return std::make_pair(e, std::max(m, 1.0));
    };
    const auto o = diff(a.O, b.O), l = diff(a.lse, b.lse), q = diff(a.dQ, b.dQ), kk = diff(a.dK, b.dK),
               v = diff(a.dV, b.dV);
    std::printf("[ INFO     ] %s: max |wgmma - mma.sync|: O %.2e, lse %.2e, dQ %.2e, dK %.2e, dV %.2e (of max|.| "
                "%.1f, -, %.1f, %.1f, %.1f)\n",
                case_name(AttentionKind::Softmax, k).c_str(), o.first, l.first, q.first, kk.first, v.first, o.second,
                q.second, kk.second, v.second);
    EXPECT_LE(o.first, 2e-2 * o.second);
    EXPECT_LE(l.first, 1e-4);
    EXPECT_LE(q.first, 1e-2 * q.second);
    EXPECT_LE(kk.first, 1e-2 * kk.second);
    EXPECT_LE(v.first, 1e-2 * v.second);
  }
  if (!ran) GTEST_SKIP() << "the wgmma kernels are not available on this device";
}

TEST(FlashAttention, IsDeterministic) {
  TTTLAB_SEEDED_GPU_TEST();
  const AttnCase k{2, 3, 300, 64};
  const std::size_t n = std::size_t(k.B) * k.T * k.H * k.d;
  std::vector<std::uint16_t> q16, k16, v16, g16;
  rounded_to_bf16(randn_vec(n, rng, 1.0), q16);
  rounded_to_bf16(randn_vec(n, rng, 1.0), k16);
  rounded_to_bf16(randn_vec(n, rng, 1.0), v16);
  rounded_to_bf16(randn_vec(n, rng, 1.0), g16);
  const FlashOutputs a = run_flash(k, q16, k16, v16, g16), b = run_flash(k, q16, k16, v16, g16);
  EXPECT_EQ(a.O, b.O);
  EXPECT_EQ(a.lse, b.lse);
  EXPECT_EQ(a.dQ, b.dQ);
  EXPECT_EQ(a.dK, b.dK);
  EXPECT_EQ(a.dV, b.dV);
}

TEST(FlashAttention, ArgumentsAreChecked) {
  TTTLAB_REQUIRE_GPU();
  const AttentionDims dims{2, 2, 10, 32};
  const std::size_t n = 2 * 2 * 10 * 32, rows = 2 * 2 * 10;
  DeviceBuffer16 q(n), k(n), v(n), o(n), g(n);
  DeviceBuffer lse(rows), dq(n), dk(n), dv(n), ws(rows);
  auto fwd = [&] {
    FlashAttentionForwardArgs a;
    a.dims = dims;
    a.Q = q.get();
    a.K = k.get();
    a.V = v.get();
    a.O = o.get();
    a.lse = lse.get();
    return a;
  };
  auto bwd = [&] {
    FlashAttentionBackwardArgs a;
    a.dims = dims;
    a.Q = q.get();
    a.K = k.get();
    a.V = v.get();
    a.O = o.get();
    a.dO = g.get();
    a.lse = lse.get();
    a.dQ = dq.get();
    a.dK = dk.get();
    a.dV = dv.get();
    a.workspace = ws.get();
    a.workspace_bytes = rows * sizeof(float);
    return a;
  };
  EXPECT_NO_THROW(flash_attention_forward(fwd()));
  EXPECT_NO_THROW(flash_attention_backward(bwd()));
  for (int d : {16, 48, 256}) {
    auto a = fwd();
    a.dims.head_dim = d;
    EXPECT_FALSE(flash_attention_supported(a.dims));
    expect_refused([&] { flash_attention_forward(a); }, "head_dim must be 32, 64 or 128");
  }
  {
    auto a = fwd();
    a.V = nullptr;
    expect_refused([&] { flash_attention_forward(a); }, "V is null");
  }
  {
    auto a = fwd();
    a.O = const_cast<std::uint16_t*>(a.K) + 8;
    expect_refused([&] { flash_attention_forward(a); }, "O overlaps K");
  }
  {
    auto a = fwd();
    a.Q = a.Q + 1;  // 2 bytes off
    expect_refused([&] { flash_attention_forward(a); }, "16-byte aligned");
  }
  {
    auto a = bwd();
    a.workspace_bytes -= 4;
    expect_refused([&] { flash_attention_backward(a); }, "workspace has");
  }
  {
    auto a = bwd();
    a.dK = a.dQ;
    expect_refused([&] { flash_attention_backward(a); }, "dQ overlaps dK");
  }
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- the tf32 tensor-core softmax attention (AttentionPrecision::tf32) -----------------------------
// Against the same fp64 reference, run on the tf32-rounded inputs the kernels read (Q, K, V and dO
// rounded on the host as cvt.rna rounds them: to nearest, ties away from zero, 10 stored mantissa
// bits), so only the kernels' own rounding is measured. The scores are then exact products of tf32
// values summed in fp32, so the lse keeps the fp32 bound of the first test. What the kernels round: P
// to tf32 where it enters P·V (and Pᵀ, dS, dSᵀ where they enter theirs), relative 2⁻¹¹ ≈ 4.9e-4 per
// term; the softmax, δ = dO·O and every accumulation are fp32. An error of 2⁻¹¹ on each term of
// Σ_s p_s v_s is at most 2⁻¹¹·max|v| ≈ 2e-3 for these N(0, 1) inputs, and rounding errors of random
// sign add up far less; the bf16 kernels' bounds (1e-2 for O, 2e-2 for the gradients, test above)
// scaled by their unit roundoff ratio 2⁻¹¹/2⁻⁹ = 1/4 give 2.5e-3 and 5e-3 relative to
// max(max|ref|, 1). A masking or indexing error is O(1). The measured worst case is printed (on an
// H200: O 1.6e-4, gradients 3.5e-4).
// Shapes: d ∈ {32, 64, 128}; T = 1, 63, 65, 200, 1000 and 129 (around the 32- and 64-row tiles, the
// 128-query forward tile, and not a multiple of any), several sequences and heads; large logits.
float tf32_round(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;  // ties away from zero
  std::memcpy(&x, &u, 4);
  return x;
}
std::vector<float> tf32_rounded(std::vector<float> x) {
  for (float& v : x) v = tf32_round(v);
  return x;
}

std::vector<AttnCase> tf32_cases() {
  if (quick_mode()) return {{2, 2, 1, 32}, {1, 2, 130, 64}, {1, 1, 70, 128}};
  std::vector<AttnCase> c;
  for (int d : {32, 64, 128})
    for (int T : {1, 63, 65, 129, 200, 1000}) {
      const bool big = T >= 1000;
      c.push_back({big ? 1 : 2, big ? 2 : 3, T, d});
    }
  c.push_back({2, 2, 200, 64, 40.0});
  c.push_back({1, 2, 129, 128, 40.0});
  return c;
}

TEST(AttentionTf32, ForwardAndBackwardMatchTheCpuEngineOnTf32Inputs) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  std::printf("[ INFO     ] seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  double worst_o = 0, worst_g = 0;
  for (const AttnCase& k : tf32_cases()) {
    const std::size_t n = std::size_t(k.B) * k.T * k.H * k.d;
    const std::vector<float> Q = tf32_rounded(randn_vec(n, rng, k.q_scale)),
                             K = tf32_rounded(randn_vec(n, rng, 1.0)),
                             V = tf32_rounded(randn_vec(n, rng, 1.0)),
                             dO = tf32_rounded(randn_vec(n, rng, 1.0));
    const Reference ref = reference(AttentionKind::Softmax, k, Q, K, V, dO);
    const std::string name = "tf32 " + case_name(AttentionKind::Softmax, k);
    SCOPED_TRACE(name + ", seed " + std::to_string(seed));
    const Outputs got = run_gpu(AttentionKind::Softmax, k, Q, K, V, dO, AttentionPrecision::tf32);
    const ErrorStat eo = compare(got.O, ref.O, kFloor), eq = compare(got.dQ, ref.dQ, kFloor),
                    ek = compare(got.dK, ref.dK, kFloor), ev = compare(got.dV, ref.dV, kFloor);
    EXPECT_TRUE(within("O", eo, 2.5e-3, got.O, ref.O));
    EXPECT_TRUE(within("dQ", eq, 5e-3, got.dQ, ref.dQ));
    EXPECT_TRUE(within("dK", ek, 5e-3, got.dK, ref.dK));
    EXPECT_TRUE(within("dV", ev, 5e-3, got.dV, ref.dV));
    expect_lse_within(got.lse, ref);
    worst_o = std::max(worst_o, eo.rel);
    worst_g = std::max({worst_g, eq.rel, ek.rel, ev.rel});
    if (k.T >= 1000 || k.q_scale != 1.0 || quick_mode())
      std::printf("[ INFO     ] %-39s O %.1e dQ %.1e dK %.1e dV %.1e (x max|ref|)\n", name.c_str(),
                  eo.rel, eq.rel, ek.rel, ev.rel);
  }
  std::printf("[ INFO     ] tf32 worst relative error: O %.2e, gradients %.2e\n", worst_o, worst_g);
}

// No atomics and a fixed summation order: two runs give the same bits.
TEST(AttentionTf32, IsDeterministic) {
  TTTLAB_SEEDED_GPU_TEST();
  for (const AttnCase& k : {AttnCase{2, 3, 300, 64}, AttnCase{1, 2, 257, 128}}) {
    const std::size_t n = std::size_t(k.B) * k.T * k.H * k.d;
    const auto Q = randn_vec(n, rng, 1.0), K = randn_vec(n, rng, 1.0), V = randn_vec(n, rng, 1.0),
               dO = randn_vec(n, rng, 1.0);
    const Outputs a = run_gpu(AttentionKind::Softmax, k, Q, K, V, dO, AttentionPrecision::tf32),
                  b = run_gpu(AttentionKind::Softmax, k, Q, K, V, dO, AttentionPrecision::tf32);
    EXPECT_EQ(a.O, b.O) << k.d;
    EXPECT_EQ(a.lse, b.lse) << k.d;
    EXPECT_EQ(a.dQ, b.dQ) << k.d;
    EXPECT_EQ(a.dK, b.dK) << k.d;
    EXPECT_EQ(a.dV, b.dV) << k.d;
  }
}

// The tf32 path's own conditions (softmax, head_dim 32/64/128, 16-byte alignment), besides the checks
// every call gets, are refused with a one-line std::invalid_argument before anything is launched.
TEST(AttentionTf32, ArgumentsAreChecked) {
  TTTLAB_REQUIRE_GPU();
  const AttentionDims dims{2, 2, 10, 32};
  // Room for head_dim up to 128, so that the refused head dims below reach the tf32 check rather
  // than the overlap checks (which a larger head dim on smaller buffers would trip first).
  const std::size_t n = 2 * 2 * 10 * 128, rows = 2 * 2 * 10;
  DeviceBuffer q(n), k(n), v(n), o(n), lse(rows), g(n), dq(n), dk(n), dv(n), ws(rows);
  auto fwd = [&] {
    AttentionForwardArgs a;
    set_tensors(a, dims, q.get(), k.get(), v.get(), o.get(), lse.get());
    a.precision = AttentionPrecision::tf32;
    return a;
  };
  auto bwd = [&] {
    AttentionBackwardArgs a;
    set_tensors(a, dims, q.get(), k.get(), v.get(), o.get(), lse.get());
    a.dO = g.get();
    a.dQ = dq.get();
    a.dK = dk.get();
    a.dV = dv.get();
    a.workspace = ws.get();
    a.workspace_bytes = rows * sizeof(float);
    a.precision = AttentionPrecision::tf32;
    return a;
  };
  EXPECT_NO_THROW(attention_forward(fwd()));
  EXPECT_NO_THROW(attention_backward(bwd()));
  for (int d : {16, 40, 100}) {
    auto a = fwd();
    a.dims.head_dim = d;
    EXPECT_FALSE(attention_tf32_supported(a.dims));
    expect_refused([&] { attention_forward(a); }, "needs head_dim 32, 64 or 128");
    auto b = bwd();
    b.dims.head_dim = d;
    expect_refused([&] { attention_backward(b); }, "needs head_dim 32, 64 or 128");
  }
  {
    auto a = fwd();
    a.kind = AttentionKind::Linear;
    expect_refused([&] { attention_forward(a); }, "softmax attention only");
  }
  {
    auto a = fwd();
    a.K = a.K + 1;  // 4 bytes off
    a.dims.seq_len = 9;
    expect_refused([&] { attention_forward(a); }, "K must be 16-byte aligned");
  }
  {
    auto a = bwd();
    a.dims.seq_len = 9;
    a.dV = a.dV + 2;  // 8 bytes off
    expect_refused([&] { attention_backward(a); }, "dV must be 16-byte aligned");
  }
  {
    auto a = bwd();
    a.dK = a.dQ;
    expect_refused([&] { attention_backward(a); }, "dQ overlaps dK");
  }
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- the tensor-core chunked linear attention (chunked_linear_attention_forward / _backward) -------
// Against the fp64 CPU linear attention on the bf16-rounded inputs the kernel reads. What it rounds:
// the chunks' prefix states S_c and G_c to bf16 (their running sums stay fp32), the masked Q Kᵀ and
// dO Vᵀ tiles to bf16 where they enter their products (relative 2⁻⁹ per term), O to bf16 on output;
// the accumulations are fp32. Linear attention has no normaliser, so O grows like √t: Q and K are
// drawn with standard deviation d^(−1/4) (q·k of order 1) and the bounds are relative to max|ref|
// (at least 1): O 1e-2, dQ, dK, dV 2e-2, with the measured worst case printed (a masking, chunk or
// state-indexing error is O(1)). Shapes: d ∈ {32, 64, 128}, T around the chunk (64) and its multiples
// and not a multiple of it, and T = 3000 at d = 64, 128 (47 chunks: the states' rounding must not
// accumulate). d = 32 runs the forward's two-pass path, d = 64 and 128 its fused one.
std::vector<AttnCase> chunked_linear_cases() {
  if (quick_mode()) return {{2, 2, 1, 32}, {1, 2, 130, 64}, {1, 1, 70, 128}};
  std::vector<AttnCase> c;
  for (int d : {32, 64, 128})
    for (int T : {1, 2, 63, 64, 65, 127, 128, 129, 300, 1000}) {
      const bool big = T >= 1000;
      c.push_back({big ? 1 : 2, big ? 2 : 3, T, d});
    }
  c.push_back({1, 2, 3000, 64});
  c.push_back({1, 2, 3000, 128});
  return c;
}

FlashOutputs run_chunked_linear(const AttnCase& k, const std::vector<std::uint16_t>& Q,
                                const std::vector<std::uint16_t>& K,
                                const std::vector<std::uint16_t>& V,
                                const std::vector<std::uint16_t>& dO) {
  const AttentionDims dims{k.B, k.H, k.T, k.d};
  const std::size_t n = Q.size();
  DeviceBuffer16 q(Q), kk(K), v(V), g(dO), o(n);
  DeviceBuffer dq(n), dk(n), dv(n);
  const std::size_t fws = chunked_linear_attention_forward_workspace_bytes(dims),
                    bws = chunked_linear_attention_backward_workspace_bytes(dims);
  DeviceBuffer16 ws((bws + 1) / 2);
  o.poison();
  ws.poison();
  for (DeviceBuffer* b : {&dq, &dk, &dv}) b->poison();
  ChunkedLinearAttentionForwardArgs f;
  f.dims = dims;
  f.Q = q.get();
  f.K = kk.get();
  f.V = v.get();
  f.O = o.get();
  f.workspace = ws.get();
  f.workspace_bytes = fws;
  chunked_linear_attention_forward(f);
  ChunkedLinearAttentionBackwardArgs b;
  b.dims = dims;
  b.Q = q.get();
  b.K = kk.get();
  b.V = v.get();
  b.dO = g.get();
  b.dQ = dq.get();
  b.dK = dk.get();
  b.dV = dv.get();
  b.workspace = ws.get();
  b.workspace_bytes = bws;
  chunked_linear_attention_backward(b);
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
  FlashOutputs out;
  for (std::uint16_t x : o.download()) out.O.push_back(bf16_to_float(x));
  out.dQ = dq.download();
  out.dK = dk.download();
  out.dV = dv.download();
  return out;
}

struct Bf16Inputs {
  std::vector<float> Q, K, V, dO;
  std::vector<std::uint16_t> q16, k16, v16, g16;
};

Bf16Inputs linear_inputs(const AttnCase& k, std::mt19937_64& rng) {
  const std::size_t n = std::size_t(k.B) * k.T * k.H * k.d;
  const double qk = std::pow(double(k.d), -0.25);
  Bf16Inputs in;
  in.Q = rounded_to_bf16(randn_vec(n, rng, qk), in.q16);
  in.K = rounded_to_bf16(randn_vec(n, rng, qk), in.k16);
  in.V = rounded_to_bf16(randn_vec(n, rng, 1.0), in.v16);
  in.dO = rounded_to_bf16(randn_vec(n, rng, 1.0), in.g16);
  return in;
}

TEST(ChunkedLinearAttention, ForwardAndBackwardMatchTheCpuEngineOnBf16Inputs) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  double worst_o = 0, worst_g = 0;
  for (const AttnCase& k : chunked_linear_cases()) {
    const Bf16Inputs in = linear_inputs(k, rng);
    const Reference ref = reference(AttentionKind::Linear, k, in.Q, in.K, in.V, in.dO);
    const std::string name = "chunked " + case_name(AttentionKind::Linear, k);
    SCOPED_TRACE(name + ", seed " + std::to_string(seed));
    const FlashOutputs got = run_chunked_linear(k, in.q16, in.k16, in.v16, in.g16);
    const ErrorStat eo = compare(got.O, ref.O, kFloor), eq = compare(got.dQ, ref.dQ, kFloor),
                    ek = compare(got.dK, ref.dK, kFloor), ev = compare(got.dV, ref.dV, kFloor);
    EXPECT_TRUE(within("O", eo, 1e-2, got.O, ref.O));
    EXPECT_TRUE(within("dQ", eq, 2e-2, got.dQ, ref.dQ));
    EXPECT_TRUE(within("dK", ek, 2e-2, got.dK, ref.dK));
    EXPECT_TRUE(within("dV", ev, 2e-2, got.dV, ref.dV));
    worst_o = std::max(worst_o, eo.rel);
    worst_g = std::max({worst_g, eq.rel, ek.rel, ev.rel});
    if (k.T >= 1000 || k.T == 1 || quick_mode())
      std::printf("[ INFO     ] %-45s O %.1e dQ %.1e dK %.1e dV %.1e (x max|ref|)\n", name.c_str(),
                  eo.rel, eq.rel, ek.rel, ev.rel);
  }
  std::printf("[ INFO     ] chunked linear worst relative error: O %.2e, gradients %.2e\n", worst_o,
              worst_g);
}

TEST(ChunkedLinearAttention, IsDeterministic) {
  TTTLAB_SEEDED_GPU_TEST();
  const AttnCase k{2, 3, 300, 64};
  const Bf16Inputs in = linear_inputs(k, rng);
  const FlashOutputs a = run_chunked_linear(k, in.q16, in.k16, in.v16, in.g16),
                     b = run_chunked_linear(k, in.q16, in.k16, in.v16, in.g16);
  EXPECT_EQ(a.O, b.O);
  EXPECT_EQ(a.dQ, b.dQ);
  EXPECT_EQ(a.dK, b.dK);
  EXPECT_EQ(a.dV, b.dV);
}

TEST(ChunkedLinearAttention, ArgumentsAreChecked) {
  TTTLAB_REQUIRE_GPU();
  const AttentionDims dims{2, 2, 70, 32};
  const std::size_t n = 2 * 2 * 70 * 32;
  const std::size_t fws = chunked_linear_attention_forward_workspace_bytes(dims),
                    bws = chunked_linear_attention_backward_workspace_bytes(dims);
  EXPECT_EQ(fws, 2u * 2 * 2 * 32 * 32 * 2);  // B·H·⌈70/64⌉ states of d² bf16
  EXPECT_EQ(bws, 2 * fws);
  DeviceBuffer16 q(n), k(n), v(n), o(n), g(n), ws(bws / 2);
  DeviceBuffer dq(n), dk(n), dv(n);
  auto fwd = [&] {
    ChunkedLinearAttentionForwardArgs a;
    a.dims = dims;
    a.Q = q.get();
    a.K = k.get();
    a.V = v.get();
    a.O = o.get();
    a.workspace = ws.get();
    a.workspace_bytes = fws;
    return a;
  };
  auto bwd = [&] {
    ChunkedLinearAttentionBackwardArgs a;
    a.dims = dims;
    a.Q = q.get();
    a.K = k.get();
    a.V = v.get();
    a.dO = g.get();
    a.dQ = dq.get();
    a.dK = dk.get();
    a.dV = dv.get();
    a.workspace = ws.get();
    a.workspace_bytes = bws;
    return a;
  };
  EXPECT_NO_THROW(chunked_linear_attention_forward(fwd()));
  EXPECT_NO_THROW(chunked_linear_attention_backward(bwd()));
  for (int d : {16, 48, 256}) {
    auto a = fwd();
    a.dims.head_dim = d;
    EXPECT_FALSE(chunked_linear_attention_supported(a.dims));
    expect_refused([&] { chunked_linear_attention_forward(a); }, "head_dim must be 32, 64 or 128");
  }
  {
    auto a = fwd();
    a.dims.seq_len = 0;
    expect_refused([&] { chunked_linear_attention_forward(a); }, "seq_len");
  }
  {
    auto a = fwd();
    a.K = nullptr;
    expect_refused([&] { chunked_linear_attention_forward(a); }, "K is null");
  }
  {
    auto a = fwd();
    a.O = const_cast<std::uint16_t*>(a.V) + 8;
    expect_refused([&] { chunked_linear_attention_forward(a); }, "O overlaps V");
  }
  {
    auto a = fwd();
    a.Q = a.Q + 1;  // 2 bytes off
    expect_refused([&] { chunked_linear_attention_forward(a); }, "16-byte aligned");
  }
  {
    auto a = fwd();
    a.workspace_bytes -= 2;
    expect_refused([&] { chunked_linear_attention_forward(a); }, "workspace has");
  }
  {
    auto a = bwd();
    a.workspace_bytes = fws;
    expect_refused([&] { chunked_linear_attention_backward(a); }, "workspace has");
  }
  {
    auto a = bwd();
    a.dK = a.dQ;
    expect_refused([&] { chunked_linear_attention_backward(a); }, "dQ overlaps dK");
  }
  {
    auto a = bwd();
    a.workspace = o.get();
    a.dO = o.get();
    expect_refused([&] { chunked_linear_attention_backward(a); }, "workspace overlaps dO");
  }
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace tttlab::kernels::test
