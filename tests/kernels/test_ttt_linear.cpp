// TTT-Linear kernels against the CPU engine run in fp64 (core/include/tttlab/ttt/inner.hpp,
// inner_backward.hpp): the dual-form forward (every version), the second-order backward with
// checkpointing through time, prefill + decode against the primal form, and a non-default ε.
//
// Random inputs come from a fixed seed per test (test_seed: printed with any failure;
// TTTLAB_TEST_SEED=<n> or =random overrides it); every output is poisoned with NaN before the
// launch, so an element the kernel does not write fails the comparison. Tolerances, fixed, relative
// to max|ref| of each output:
//   fp32-accurate forwards (Default = 3xTF32, Fallback) and decode: 1e-4 for outputs and states.
//     fp32 has a 2^-24 unit roundoff; the inner loop's dot products over d ≤ 128 and its recurrence
//     over ≤ 2048 tokens stay at ~1e-5 or below in practice, so 1e-4 leaves a margin and still
//     catches any wrong term (those are O(1)).
//   The second-order backward: 5e-4 per token (dQ, dK, dV), 1e-3 for dλ and the sums over the
//     batch (dτ, dγ, dβ, dW0, db0): terms of both signs, so max|ref| understates the magnitude of
//     the terms and the cancellation costs a few bits (kTolBwdToken, kTolBwdSum give the
//     observations).
//   Tf32 (plain tf32 operands truncated to a 10-bit mantissa: unit roundoff 2^-10 ≈ 1e-3): 1e-2.
//     Products over d terms and the recurrence through the state give errors of a few 1e-4 to
//     1e-3 relative to max|ref| (printed below). The backward's Tf32 version: 1e-2 per token,
//     3e-2 for dλ and the sums over the batch (kTolTf32Bwd gives the observation).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "test_ttt_util.hpp"
#include "tttlab/kernels/ttt_bench.hpp"

namespace tttlab::kernels::test {
namespace {

constexpr double kTolFp32 = 1e-4;
// Observed with the 3xTF32 backward kernels over T ≥ 1024 tokens: dτ at T = 2048 (B·H = 6,
// 768 mini-batch terms of both signs, through checkpoints of the 3xTF32 forward) off by 6.5e-4 of
// max|dτ| in the fused kernel and the fallback alike (the two agreed to 2.5e-5), where the CPU engine
// in fp32 is off by 1.6e-5. 3xTF32 keeps the low part of each operand truncated to tf32 (~2^-21
// relative per product, 8× fp32's unit roundoff), compounded over the forward that wrote the
// checkpoints and the backward's products.
constexpr double kTolTf32 = 1e-2;
// The backward's Tf32 version for dλ and the sums over the batch (dτ, dγ, dβ, dW0, db0): 3e-2, the
// bound of the whole-model tf32 gradient cases (test_train_cuda.cpp). These are sums of terms of
// both signs over the mini-batches, so the tf32 operands' ~1e-3 per product costs more relative to
// the result than per token: measured (H100, this test's default seed) dτ off by 1.08e-2 of
// max|dτ| at B=2 H=1 T=257 d=64 without LN, residual or bias (dτ: a sum over 34 mini-batches).
constexpr double kTolTf32Bwd = 3e-2;
// The second-order backward (fused kernel and fallback), fixed bounds with a 2× margin over the
// worst errors seen on the GPUs it was run on:
//   per-token outputs dQ, dK, dV: 5e-4. dV at T = 1, d = 128, b = 7 was seen off by 2.4e-4 where
//     the CPU engine in fp32 was itself off by 6.3e-5 on the same inputs (an ill-conditioned LN
//     backward: the row's σ is small), so 1e-4 is not attainable by a correct fp32 implementation
//     on every input;
//   dλ and the batch sums (dτ, dγ, dβ, dW0, db0): 1e-3. Terms of both signs; a run saw dτ and dλ
//     where the CPU engine in fp32 was off by 4.9e-4, and dτ at T = 2048 off by 6.5e-4 (above).
// A wrong term is an O(1) relative error, far above either bound.
constexpr double kTolBwdToken = 5e-4;
constexpr double kTolBwdSum = 1e-3;

struct Case {
  TttDims dims;
  TttOptions opt;
  int group = 1;
};
// How a parameterised test prints its case.
void PrintTo(const Case& c, std::ostream* os) { *os << describe(c.dims, c.opt) << " g=" << c.group; }

// The shape grid: d ∈ {16, 32, 64, 128}, b ∈ {1, 7, 16, 64}, T ∈ {1, 17, 64, 200},
// several B·H; each shape runs with all options on and with one of the 8 option combinations (in
// turn), plus odd head dims and one long sequence.
std::vector<Case> forward_cases() {
  const bool quick = quick_mode();
  const std::vector<int> ds = quick ? std::vector<int>{16, 64} : std::vector<int>{16, 32, 64, 128};
  const std::vector<int> bs = quick ? std::vector<int>{7, 16} : std::vector<int>{1, 7, 16, 64};
  const std::vector<int> Ts = quick ? std::vector<int>{17, 64} : std::vector<int>{1, 17, 64, 200};
  const int bh[4][2] = {{1, 1}, {2, 3}, {3, 2}, {2, 1}};
  std::vector<Case> cases;
  int idx = 0;
  for (int d : ds)
    for (int b : bs)
      for (int T : Ts) {
        const TttDims D{bh[idx % 4][0], bh[idx % 4][1], T, d, b};
        cases.push_back({D, flags(0)});
        if (idx % 8) cases.push_back({D, flags(idx % 8)});
        ++idx;
      }
  if (!quick) {
    cases.push_back({{2, 2, 23, 18, 5}, flags(0)});
    cases.push_back({{1, 3, 40, 50, 16}, flags(0)});
    cases.push_back({{2, 1, 130, 96, 64}, flags(0)});
    cases.push_back({{1, 2, 2048, 64, 16}, flags(0)});
    cases.push_back({{1, 1, 2000, 128, 16}, flags(0)});
  }
  return cases;
}

// The grid cases the Bf16 version runs (its tensor-core kernel's shapes).
std::vector<Case> bf16_forward_cases() {
  std::vector<Case> cases;
  for (const Case& c : forward_cases())
    if (ttt_linear_forward_supports(TttLinearForwardVersion::Bf16, c.dims)) cases.push_back(c);
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return param_name(info.param.dims, info.param.opt);
}

struct LinearRef {
  std::vector<double> O, W, b, aW, ab;
};

InnerWeights<double> initial_weights(const LinearInputs& in, std::size_t state) {
  const int d = in.dims.head_dim;
  InnerWeights<double> w;
  w.W1 = mat_at(in.W0, state * d * d, d, d);
  w.b1 = in.opt.bias ? row_at(in.b0, state * d, d) : RowVec<double>::Zero(d);
  return w;
}

// The CPU engine's dual form on every head; also its final streaming state.
LinearRef cpu_forward(const LinearInputs& in, bool per_seq, bool primal = false) {
  const TttDims& D = in.dims;
  const int d = D.head_dim;
  const InnerOptions io = inner_options(in.opt, D, InnerModel::Linear);
  LinearRef ref;
  ref.O.assign(std::size_t(D.batch) * D.seq_len * D.heads * d, 0.0);
  const std::size_t BH = std::size_t(D.batch) * D.heads;
  ref.W.resize(BH * d * d);
  ref.aW.resize(BH * d * d);
  ref.b.resize(BH * d);
  ref.ab.resize(BH * d);
  for (int n = 0; n < D.batch; ++n)
    for (int h = 0; h < D.heads; ++h) {
      const std::size_t blk = std::size_t(n) * D.heads + h;
      InnerState<double> st = InnerState<double>::start(initial_weights(in, per_seq ? blk : h));
      Mat<double> out;
      const auto hp = head_params(in, h);
      const Mat<double> Q = head_slice(in.Q, D, n, h), K = head_slice(in.K, D, n, h),
                        V = head_slice(in.V, D, n, h);
      const Vec<double> lam = lambda_slice(in.lam, D, n, h);
      if (primal)
        inner_forward_primal<double>(io, hp, Q, K, V, lam, st, out);
      else
        inner_forward_dual<double>(io, hp, Q, K, V, lam, st, out);
      for (int t = 0; t < D.seq_len; ++t)
        for (int c = 0; c < d; ++c)
          ref.O[(std::size_t(n) * D.seq_len + t) * D.heads * d + std::size_t(h) * d + c] = out(t, c);
      for (int i = 0; i < d * d; ++i) {
        ref.W[blk * d * d + i] = st.base.W1(i / d, i % d);
        ref.aW[blk * d * d + i] = st.acc.W1(i / d, i % d);
      }
      for (int c = 0; c < d; ++c) {
        ref.b[blk * d + c] = st.base.b1(c);
        ref.ab[blk * d + c] = st.acc.b1(c);
      }
    }
  return ref;
}

struct DeviceLinearInputs {
  DeviceBuffer Q, K, V, lam, tau, gamma, beta, W0, b0;
  explicit DeviceLinearInputs(const LinearInputs& in)
      : Q(in.Q), K(in.K), V(in.V), lam(in.lam), tau(in.tau), gamma(in.gamma), beta(in.beta),
        W0(in.W0), b0(in.b0) {}
  // The inputs every forward and backward reads, with in's dims and options.
  TttSequenceInputs sequence_inputs(const LinearInputs& in) const {
    return {in.dims, in.opt, Q.get(), K.get(), V.get(), lam.get(), tau.get(), gamma.get(), beta.get()};
  }
};

TttLinearForwardArgs forward_args(const LinearInputs& in, const DeviceLinearInputs& dev) {
  TttLinearForwardArgs a;
  static_cast<TttSequenceInputs&>(a) = dev.sequence_inputs(in);
  a.W0 = dev.W0.get();
  a.b0 = dev.b0.get();
  return a;
}

// The streaming state a forward leaves for decode (final_W, final_b, final_acc_W, final_acc_b),
// [B, H, d, d] and [B, H, d].
struct DeviceFinalState {
  DeviceBuffer W, b, acc_W, acc_b;
  explicit DeviceFinalState(const TttDims& D)
      : W(std::size_t(D.batch) * D.heads * D.head_dim * D.head_dim),
        b(std::size_t(D.batch) * D.heads * D.head_dim),
        acc_W(W.size()),
        acc_b(b.size()) {}
  void poison() {
    for (DeviceBuffer* x : {&W, &b, &acc_W, &acc_b}) x->poison();
  }
  // Has the forward a write its final state here.
  void set_outputs(TttLinearForwardArgs& a) const {
    a.final_W = W.get();
    a.final_b = b.get();
    a.final_acc_W = acc_W.get();
    a.final_acc_b = acc_b.get();
  }
  // Each tensor against the CPU engine's (`what` names the four: "final W", ...); returns the
  // error of W.
  double expect_near(const LinearRef& ref, double tol, const std::string& what) const {
    const std::vector<float> w = W.download(), aw = acc_W.download(), bb = b.download(),
                             ab = acc_b.download();
    const ErrorStat ew = compare(w, ref.W);
    EXPECT_TRUE(within((what + " W").c_str(), ew, tol, w, ref.W));
    EXPECT_TRUE(within((what + " acc W").c_str(), compare(aw, ref.aW, 1.0), tol, aw, ref.aW));
    EXPECT_TRUE(within((what + " b").c_str(), compare(bb, ref.b, 1.0), tol, bb, ref.b));
    EXPECT_TRUE(within((what + " acc b").c_str(), compare(ab, ref.ab, 1.0), tol, ab, ref.ab));
    return ew.rel;
  }
};

struct VersionInfo {
  TttLinearForwardVersion v;
  const char* name;
  double tol;
};
// Default is fp32-accurate (3xTF32 or the fallback), so it is held to the fp32 tolerance.
const VersionInfo kVersions[] = {{TttLinearForwardVersion::Fallback, "fallback", kTolFp32},
                                 {TttLinearForwardVersion::Tf32, "tf32", kTolTf32},
                                 {TttLinearForwardVersion::Default, "default", kTolFp32}};
constexpr int kNumVersions = sizeof(kVersions) / sizeof(kVersions[0]);

// Every version on each case of the shape grid (forward_cases) against the CPU engine's dual form:
// the output and the final streaming state.
class TttLinearForwardGrid : public ::testing::TestWithParam<Case> {};

TEST_P(TttLinearForwardGrid, MatchesCpuDualForm) {
  TTTLAB_SEEDED_GPU_TEST();
  double worst[kNumVersions] = {};
  int runs[kNumVersions] = {};
  {
    const Case& c = GetParam();
    const TttDims& D = c.dims;
    const LinearInputs in = random_linear_inputs(D, c.opt, rng);
    const LinearRef ref = cpu_forward(in, false);
    const DeviceLinearInputs dev(in);
    DeviceBuffer O(in.Q.size());
    DeviceFinalState fs(D);
    for (int vi = 0; vi < kNumVersions; ++vi) {
      const VersionInfo& V = kVersions[vi];
      if (!ttt_linear_forward_supports(V.v, D)) continue;
      SCOPED_TRACE(V.name);
      O.poison();
      fs.poison();
      TttLinearForwardArgs a = forward_args(in, dev);
      a.O = O.get();
      fs.set_outputs(a);
      a.version = V.v;
      ttt_linear_forward(a);
      const std::vector<float> o = O.download();
      const ErrorStat e = compare(o, ref.O);
      EXPECT_TRUE(within("O", e, V.tol, o, ref.O));
      worst[vi] = std::max(worst[vi], e.rel);
      ++runs[vi];
      fs.expect_near(ref, V.tol, "final");
    }
  }
  for (int vi = 0; vi < kNumVersions; ++vi)
    if (runs[vi])
      std::printf("[   INFO   ] forward %-7s |O - ref| / max|ref| = %.3g\n", kVersions[vi].name,
                  worst[vi]);
  EXPECT_GT(runs[0], 0);
}

INSTANTIATE_TEST_SUITE_P(TttLinear, TttLinearForwardGrid, ::testing::ValuesIn(forward_cases()),
                         case_name);

// Version Bf16: bf16 inputs and output, bf16 products with fp32 accumulation, fp32 state. Against
// the CPU engine in fp64 on the same inputs rounded to bf16, on every shape of the grid the kernel
// supports (b = 16), with its final states and last checkpoint (group 2). The bound, kTolBf16,
// relative to max|ref| of each output: bf16 keeps 8 significant bits (unit roundoff
// 2^-8 ≈ 3.9e-3, 8× tf32's when tf32 rounds, 4× when it truncates), every product rounds both
// operands (W, G and M as well as the inputs), the recurrence carries that through the state, and
// O is rounded to bf16 once more at the end (up to 2^-8 of each value by itself). Measured on an
// H100: 4.4e-3 on O, 6.5e-4 on the states; a wrong term is an O(1) error.
constexpr double kTolBf16 = 3e-2;

class TttLinearForwardBf16Grid : public ::testing::TestWithParam<Case> {};

TEST_P(TttLinearForwardBf16Grid, MatchesCpuOnRoundedInputs) {
  TTTLAB_SEEDED_GPU_TEST();
  double worst_o = 0, worst_state = 0;
  int runs = 0;
  {
    const Case& c = GetParam();
    const TttDims& D = c.dims;
    LinearInputs in = random_linear_inputs(D, c.opt, rng);
    std::vector<std::uint16_t> q16, k16, v16;
    in.Q = rounded_to_bf16(in.Q, q16);
    in.K = rounded_to_bf16(in.K, k16);
    in.V = rounded_to_bf16(in.V, v16);
    const LinearRef ref = cpu_forward(in, false);
    const DeviceLinearInputs dev(in);
    const std::size_t BH = std::size_t(D.batch) * D.heads, d = D.head_dim;
    const int group = 2, n_ck = ttt_num_checkpoints(D, group);
    DeviceBuffer16 Q16(q16), K16(k16), V16(v16), O16(q16.size());
    DeviceFinalState fs(D);
    DeviceBuffer ckW(BH * n_ck * d * d), ckb(BH * n_ck * d);
    for (DeviceBuffer* b : {&ckW, &ckb}) b->poison();
    fs.poison();
    O16.poison();
    TttLinearForwardArgs a = forward_args(in, dev);
    a.Q = a.K = a.V = nullptr;
    a.Q_bf16 = Q16.get();
    a.K_bf16 = K16.get();
    a.V_bf16 = V16.get();
    a.O_bf16 = O16.get();
    fs.set_outputs(a);
    a.checkpoint_W = ckW.get();
    a.checkpoint_b = ckb.get();
    a.checkpoint_group = group;
    a.version = TttLinearForwardVersion::Bf16;
    ttt_linear_forward(a);
    std::vector<float> o(q16.size());
    const std::vector<std::uint16_t> o16 = O16.download();
    for (std::size_t i = 0; i < o.size(); ++i) o[i] = bf16_to_float(o16[i]);
    const ErrorStat e = compare(o, ref.O);
    EXPECT_TRUE(within("O", e, kTolBf16, o, ref.O));
    worst_o = std::max(worst_o, e.rel);
    ++runs;
    worst_state = std::max(worst_state, fs.expect_near(ref, kTolBf16, "final"));
    // The last checkpoint is the committed state at the start of mini-batch (n_ck − 1)·group.
    const std::vector<float> cw = ckW.download();
    const int len = std::min(D.seq_len, (n_ck - 1) * group * D.mini_batch);
    std::vector<double> rw(BH * d * d);
    std::vector<float> gw(BH * d * d);
    for (std::size_t blk = 0; blk < BH; ++blk) {
      const int n = int(blk / D.heads), h = int(blk % D.heads);
      InnerState<double> st = InnerState<double>::start(initial_weights(in, h));
      if (len > 0) {
        Mat<double> out;
        inner_forward_dual<double>(
            inner_options(in.opt, D, InnerModel::Linear), head_params(in, h),
            head_slice(in.Q, D, n, h, 0, len), head_slice(in.K, D, n, h, 0, len),
            head_slice(in.V, D, n, h, 0, len), lambda_slice(in.lam, D, n, h, 0, len), st, out);
      }
      for (std::size_t i = 0; i < d * d; ++i) {
        rw[blk * d * d + i] = st.base.W1(i / d, i % d);
        gw[blk * d * d + i] = cw[(blk * n_ck + n_ck - 1) * d * d + i];
      }
    }
    const ErrorStat ec = compare(gw, rw);
    worst_state = std::max(worst_state, ec.rel);
    EXPECT_TRUE(within("last checkpoint W", ec, kTolBf16, gw, rw));
  }
  std::printf("[   INFO   ] forward bf16    |O - ref| / max|ref| = %.3g, states %.3g\n", worst_o,
              worst_state);
  EXPECT_GT(runs, 0);
}

INSTANTIATE_TEST_SUITE_P(TttLinear, TttLinearForwardBf16Grid,
                         ::testing::ValuesIn(bf16_forward_cases()), case_name);

// The tensor-core kernel in two roles (B·H blocks within one wave, head_dim ≤ 64, as in training)
// against the same kernel in one role, which the grid tests above check against the CPU engine:
// O, every checkpoint, the final states and the open accumulators bit for bit, Default and Tf32, on
// head dims 16, 32, 64, short and long sequences, partial last mini-batches, per-sequence initial
// states and every option combination in turn, with checkpoint groups 1 and 3.
TEST(TttLinearForward, TwoRolesMatchOneRoleBitForBit) {
  TTTLAB_SEEDED_GPU_TEST();
  const std::vector<int> Ts =
      quick_mode() ? std::vector<int>{17, 64} : std::vector<int>{1, 15, 16, 17, 33, 100, 257, 2048};
  const int bh[3][2] = {{1, 1}, {2, 3}, {4, 12}};
  std::vector<TttDims> shapes;
  int idx = 0;
  for (int d : {16, 32, 64})
    for (int T : Ts) {
      const int* b_h = T > 1000 ? bh[1] : bh[idx++ % 3];
      shapes.push_back({b_h[0], b_h[1], T, d, 16});
    }
  // d = 64 with more blocks than SMs (up to two per SM): Tf32 runs the form in which two blocks
  // share an SM (Default the one-role kernel both times).
  const CudaQuery cq = query_cuda_devices();
  ASSERT_FALSE(cq.devices.empty());
  const int over_one_per_sm = cq.devices[0].multiprocessors / 12 + 1;
  for (int T : {17, 64}) shapes.push_back({over_one_per_sm, 12, T, 64, 16});
  int n = 0;
  idx = 0;
  for (const TttDims& D : shapes) {
    const int d = D.head_dim;
    const TttOptions opt = flags(idx % 8);
    const bool per_seq = idx % 2 == 1;
    const int group = idx % 3 == 2 ? 3 : 1;
    ++idx;
    SCOPED_TRACE(describe(D, opt) + " group " + std::to_string(group) +
                 (per_seq ? ", per-sequence W0" : ""));
    const LinearInputs in = random_linear_inputs(D, opt, rng, per_seq);
    const DeviceLinearInputs dev(in);
    const std::size_t BH = std::size_t(D.batch) * D.heads;
    const int n_ck = ttt_num_checkpoints(D, group);
    for (TttLinearForwardVersion v :
         {TttLinearForwardVersion::Default, TttLinearForwardVersion::Tf32}) {
      SCOPED_TRACE(v == TttLinearForwardVersion::Default ? "default" : "tf32");
      std::vector<std::vector<float>> out[2];
      for (int roles = 0; roles < 2; ++roles) {
        DeviceBuffer O(in.Q.size()), ckW(BH * n_ck * d * d), ckb(BH * n_ck * d);
        DeviceFinalState fs(D);
        for (DeviceBuffer* b : {&O, &ckW, &ckb}) b->poison();
        fs.poison();
        TttLinearForwardArgs a = forward_args(in, dev);
        a.per_sequence_init = per_seq;
        a.O = O.get();
        a.checkpoint_W = ckW.get();
        a.checkpoint_b = ckb.get();
        a.checkpoint_group = group;
        fs.set_outputs(a);
        a.version = v;
        a.two_roles = roles == 1;
        ttt_linear_forward(a);
        for (const DeviceBuffer* b : {&O, &ckW, &ckb, &fs.W, &fs.b, &fs.acc_W, &fs.acc_b})
          out[roles].push_back(b->download());
      }
      const char* names[] = {"O",       "checkpoint W", "checkpoint b", "final W",
                             "final b", "final acc W",  "final acc b"};
      for (int i = 0; i < 7; ++i) {
        SCOPED_TRACE(names[i]);
        // Bit patterns: the poison is a NaN, which == would never call equal.
        const std::vector<float>&x = out[0][i], &y = out[1][i];
        ASSERT_EQ(x.size(), y.size());
        std::size_t off = 0;
        for (std::size_t j = 0; j < x.size(); ++j)
          off += std::memcmp(&x[j], &y[j], sizeof(float)) != 0;
        EXPECT_EQ(off, 0u) << "of " << x.size() << " values differ";
      }
    }
    ++n;
  }
  std::printf(
      "[   INFO   ] forward in two roles: %d shapes (2 of them with %d blocks on %d SMs: Tf32 two "
      "per SM), bit "
      "for bit the one-role kernel\n",
      n, over_one_per_sm * 12, cq.devices[0].multiprocessors);
}

TEST(TttLinearForward, PerSequenceInitialStatesAndCheckpoints) {
  TTTLAB_SEEDED_GPU_TEST();
  for (const TttDims& D : {TttDims{3, 2, 70, 64, 16}, TttDims{2, 2, 45, 32, 7}}) {
    SCOPED_TRACE(describe(D, TttOptions{}));
    const LinearInputs in = random_linear_inputs(D, TttOptions{}, rng, true);
    const LinearRef ref = cpu_forward(in, true);
    const DeviceLinearInputs dev(in);
    const int group = 2, n_ck = ttt_num_checkpoints(D, group), d = D.head_dim;
    const std::size_t BH = std::size_t(D.batch) * D.heads;
    for (const VersionInfo& V : kVersions) {
      if (!ttt_linear_forward_supports(V.v, D)) continue;
      SCOPED_TRACE(V.name);
      DeviceBuffer O(in.Q.size()), ckW(BH * n_ck * d * d), ckb(BH * n_ck * d);
      O.poison();
      ckW.poison();
      ckb.poison();
      TttLinearForwardArgs a = forward_args(in, dev);
      a.per_sequence_init = true;
      a.O = O.get();
      a.checkpoint_W = ckW.get();
      a.checkpoint_b = ckb.get();
      a.checkpoint_group = group;
      a.version = V.v;
      ttt_linear_forward(a);
      const std::vector<float> o = O.download();
      EXPECT_TRUE(within("O", compare(o, ref.O), V.tol, o, ref.O));
      // Checkpoint k is the committed state at the start of mini-batch k·group: replay the CPU engine
      // on the prefix and compare.
      const std::vector<float> cw = ckW.download(), cb = ckb.download();
      for (int k = 0; k < n_ck; ++k) {
        const int len = k * group * D.mini_batch;
        std::vector<double> rw(BH * d * d), rb(BH * d);
        std::vector<float> gw(BH * d * d), gb(BH * d);
        for (std::size_t blk = 0; blk < BH; ++blk) {
          const int n = int(blk / D.heads), h = int(blk % D.heads);
          InnerState<double> st = InnerState<double>::start(initial_weights(in, blk));
          if (len > 0) {
            Mat<double> out;
            inner_forward_dual<double>(inner_options(in.opt, D, InnerModel::Linear),
                                       head_params(in, h), head_slice(in.Q, D, n, h, 0, len),
                                       head_slice(in.K, D, n, h, 0, len),
                                       head_slice(in.V, D, n, h, 0, len),
                                       lambda_slice(in.lam, D, n, h, 0, len), st, out);
          }
          for (int i = 0; i < d * d; ++i) {
            rw[blk * d * d + i] = st.base.W1(i / d, i % d);
            gw[blk * d * d + i] = cw[(blk * n_ck + k) * d * d + i];
          }
          for (int c = 0; c < d; ++c) {
            rb[blk * d + c] = st.base.b1(c);
            gb[blk * d + c] = cb[(blk * n_ck + k) * d + c];
          }
        }
        SCOPED_TRACE("checkpoint " + std::to_string(k));
        EXPECT_TRUE(within("checkpoint W", compare(gw, rw), V.tol, gw, rw));
        EXPECT_TRUE(within("checkpoint b", compare(gb, rb, 1.0), V.tol, gb, rb));
      }
    }
  }
}

// ---- Backward ---------------------------------------------------------------------------------------

struct GradRef {
  std::vector<double> dQ, dK, dV, dlam, dtau, dgam, dbet, dW0, db0;
};

// The CPU engine's backward in precision S (the tests use double: the reference).
template <class S>
GradRef cpu_backward(const LinearInputs& in, const std::vector<float>& dO, int group) {
  const TttDims& D = in.dims;
  const int d = D.head_dim;
  const InnerOptions io = inner_options(in.opt, D, InnerModel::Linear);
  GradRef g;
  const std::size_t act = in.Q.size();
  g.dQ.assign(act, 0);
  g.dK.assign(act, 0);
  g.dV.assign(act, 0);
  g.dlam.assign(in.lam.size(), 0);
  g.dtau.assign(D.mini_batch, 0);
  g.dgam.assign(std::size_t(D.heads) * d, 0);
  g.dbet.assign(std::size_t(D.heads) * d, 0);
  g.dW0.assign(std::size_t(D.heads) * d * d, 0);
  g.db0.assign(std::size_t(D.heads) * d, 0);
  for (int n = 0; n < D.batch; ++n)
    for (int h = 0; h < D.heads; ++h) {
      const InnerHeadParams<double> hp = head_params(in, h);
      InnerHeadParams<S> p;
      p.ln_weight = hp.ln_weight.cast<S>();
      p.ln_bias = hp.ln_bias.cast<S>();
      p.tau = hp.tau.cast<S>();
      const InnerWeights<double> w0 = initial_weights(in, h);
      InnerWeights<S> w;
      w.W1 = w0.W1.cast<S>();
      w.b1 = w0.b1.cast<S>();
      const Mat<S> Q = head_slice(in.Q, D, n, h).cast<S>(), K = head_slice(in.K, D, n, h).cast<S>(),
                   V = head_slice(in.V, D, n, h).cast<S>(), dOh = head_slice(dO, D, n, h).cast<S>();
      const Vec<S> lam = lambda_slice(in.lam, D, n, h).cast<S>();
      InnerGrads<S> gr;
      inner_backward<S>(io, p, Q, K, V, lam, w, dOh, gr, group);
      add_head_grads(gr, D, n, h, g.dQ, g.dK, g.dV, g.dlam, g.dtau, g.dgam, g.dbet);
      for (int c = 0; c < d; ++c) g.db0[std::size_t(h) * d + c] += gr.dW0.b1(c);
      for (int i = 0; i < d * d; ++i) g.dW0[std::size_t(h) * d * d + i] += gr.dW0.W1(i / d, i % d);
    }
  return g;
}

std::vector<Case> backward_cases() {
  const bool quick = quick_mode();
  const std::vector<int> ds = quick ? std::vector<int>{16, 64} : std::vector<int>{16, 64, 128};
  const std::vector<int> bs = quick ? std::vector<int>{7, 16} : std::vector<int>{1, 7, 16, 64};
  const std::vector<int> Ts = quick ? std::vector<int>{17, 64} : std::vector<int>{1, 17, 64, 200};
  const int bh[4][2] = {{1, 1}, {2, 3}, {3, 2}, {2, 1}};
  const int groups[4] = {1, 2, 3, 5};
  std::vector<Case> cases;
  int idx = 0;
  for (int d : ds)
    for (int b : bs)
      for (int T : Ts) {
        const TttDims D{bh[idx % 4][0], bh[idx % 4][1], T, d, b};
        cases.push_back({D, flags(idx % 8), groups[(idx / 2) % 4]});
        ++idx;
      }
  if (!quick) {
    cases.push_back({{2, 2, 23, 18, 5}, flags(0), 2});
    cases.push_back({{1, 2, 100, 50, 16}, flags(0), 3});
    cases.push_back({{2, 2, 64, 64, 16}, flags(0), 1});
  }
  return cases;
}

// The shapes of the fused backward (b = 16, d ∈ {16, 32, 64}) explicitly: T a multiple of 16 and not
// (a short last mini-batch, T < 16 included), every checkpoint group against the number of
// mini-batches (1, several, more than there are), all 8 option combinations in turn, several B·H.
std::vector<Case> fused_backward_cases() {
  const bool quick = quick_mode();
  const std::vector<int> ds = quick ? std::vector<int>{16, 64} : std::vector<int>{16, 32, 64};
  const std::vector<int> Ts =
      quick ? std::vector<int>{17, 64} : std::vector<int>{1, 15, 16, 17, 48, 100, 160, 257};
  const int bh[4][2] = {{1, 1}, {2, 3}, {3, 2}, {2, 1}};
  const int groups[5] = {1, 2, 3, 4, 11};
  std::vector<Case> cases;
  int idx = 0;
  for (int d : ds)
    for (int T : Ts) {
      const TttDims D{bh[idx % 4][0], bh[idx % 4][1], T, d, 16};
      cases.push_back({D, flags(idx % 8), groups[idx % 5]});
      ++idx;
    }
  if (!quick) cases.push_back({{2, 3, 2048, 64, 16}, flags(0), 4});  // the benchmark's setting
  return cases;
}

struct BwdOut {
  std::vector<float> dQ, dK, dV, dlam, dtau, dgam, dbet, dW0, db0;
  std::vector<std::uint16_t> dV16;  // with dV_bf16 (dV is then left empty)
};

// Forward (writing checkpoints) then the backward of one version on the device.
class BackwardRun {
 public:
  BackwardRun(const LinearInputs& in, const std::vector<float>& dO, int group,
              TttLinearForwardVersion fwd)
      : in_(in), dev_(in), group_(group) {
    const TttDims& D = in.dims;
    const int d = D.head_dim, n_ck = ttt_num_checkpoints(D, group);
    const std::size_t BH = std::size_t(D.batch) * D.heads;
    O_ = DeviceBuffer(in.Q.size());
    ckW_ = DeviceBuffer(BH * n_ck * d * d);
    ckb_ = DeviceBuffer(BH * n_ck * d);
    dO_ = DeviceBuffer(dO);
    ws_bytes_ = ttt_linear_backward_workspace_bytes(D, group);
    TttLinearForwardArgs fa = forward_args(in, dev_);
    fa.O = O_.get();
    fa.checkpoint_W = ckW_.get();
    fa.checkpoint_b = ckb_.get();
    fa.checkpoint_group = group;
    fa.version = fwd;
    ttt_linear_forward(fa);
  }

  // dv_bf16: dV written as bf16 bit patterns (TttLinearBackwardArgs::dV_bf16) instead of floats.
  // two_roles: TttLinearBackwardArgs::two_roles.
  BwdOut run(TttBackwardVersion bv, bool dv_bf16 = false, bool two_roles = true) const {
    const TttDims& D = in_.dims;
    const int d = D.head_dim;
    DeviceBuffer dQ(in_.Q.size()), dK(in_.Q.size()), dV(in_.Q.size()), dlam(in_.lam.size()),
        dtau(D.mini_batch), dgam(std::size_t(D.heads) * d), dbet(std::size_t(D.heads) * d),
        dW0(std::size_t(D.heads) * d * d), db0(std::size_t(D.heads) * d), ws((ws_bytes_ + 3) / 4);
    for (DeviceBuffer* b : {&dQ, &dK, &dV, &dlam, &dtau, &dgam, &dbet, &dW0, &db0, &ws}) b->poison();
    TttLinearBackwardArgs ba;
    static_cast<TttSequenceInputs&>(ba) = dev_.sequence_inputs(in_);
    ba.checkpoint_W = ckW_.get();
    ba.checkpoint_b = ckb_.get();
    ba.checkpoint_group = group_;
    ba.dO = dO_.get();
    ba.dQ = dQ.get();
    ba.dK = dK.get();
    ba.dV = dV.get();
    ba.dlambda = dlam.get();
    ba.dtau = dtau.get();
    ba.dln_weight = dgam.get();
    ba.dln_bias = dbet.get();
    ba.dW0 = dW0.get();
    ba.db0 = db0.get();
    ba.workspace = ws.get();
    ba.workspace_bytes = ws_bytes_;
    ba.version = bv;
    ba.two_roles = two_roles;
    DeviceBuffer16 dV16(dv_bf16 ? dV.size() : 0);
    if (dv_bf16) {
      dV16.poison();
      ba.dV = nullptr;
      ba.dV_bf16 = dV16.get();
    }
    ttt_linear_backward(ba);
    BwdOut out{dQ.download(),
               dK.download(),
               dv_bf16 ? std::vector<float>{} : dV.download(),
               dlam.download(),
               dtau.download(),
               dgam.download(),
               dbet.download(),
               dW0.download(),
               db0.download(),
               {}};
    if (dv_bf16) out.dV16 = dV16.download();
    return out;
  }

 private:
  const LinearInputs& in_;
  DeviceLinearInputs dev_;
  int group_;
  DeviceBuffer O_, ckW_, ckb_, dO_;
  std::size_t ws_bytes_ = 0;
};

// Checks every output of a backward against a reference; returns the worst per-token and summed
// errors through tok and sum. Fixed tolerances (kTolBwdToken, kTolBwdSum: see their comment).
void check_backward(const BwdOut& got, const GradRef& ref, double& tok, double& sum,
                    double sum_tol = kTolBwdSum) {
  expect_within("dQ", got.dQ, ref.dQ, kTolBwdToken, tok);
  expect_within("dK", got.dK, ref.dK, kTolBwdToken, tok);
  expect_within("dV", got.dV, ref.dV, kTolBwdToken, tok);
  // dλ_t is a contraction of the token's ∇ℓ with d-wide products (docs/MATH.md §7.5): a sum of
  // terms of both signs, like the batch sums, so it gets their tolerance. dλ at T = 1,
  // d = 128, b = 1 was seen off by 1.02e-4 of max|dλ| (one value, so max|ref| is that value and says nothing
  // of the terms' size).
  expect_within("dlambda", got.dlam, ref.dlam, kTolBwdSum, tok);
  expect_within("dtau", got.dtau, ref.dtau, sum_tol, sum);
  expect_within("dln_weight", got.dgam, ref.dgam, sum_tol, sum);
  expect_within("dln_bias", got.dbet, ref.dbet, sum_tol, sum);
  expect_within("dW0", got.dW0, ref.dW0, sum_tol, sum);
  expect_within("db0", got.db0, ref.db0, sum_tol, sum);
}

GradRef as_ref(const BwdOut& o) {
  auto up = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  return {up(o.dQ), up(o.dK), up(o.dV), up(o.dlam), up(o.dtau), up(o.dgam), up(o.dbet), up(o.dW0),
          up(o.db0)};
}

constexpr TttBackwardVersion kBwdVersions[] = {TttBackwardVersion::Fallback,
                                               TttBackwardVersion::Default};
const char* const kBwdNames[] = {"backward fallback", "backward default"};
constexpr int kNumBwd = 2;

TEST(TttLinearBackward, MatchesCpuSecondOrderBackwardWithCheckpointing) {
  TTTLAB_SEEDED_GPU_TEST();
  double worst_tok[kNumBwd] = {}, worst_sum[kNumBwd] = {};
  int runs[kNumBwd] = {};
  int idx = 0;
  for (const Case& c : backward_cases()) {
    const TttDims& D = c.dims;
    SCOPED_TRACE(describe(D, c.opt) + " group " + std::to_string(c.group));
    LinearInputs in = random_linear_inputs(D, c.opt, rng);
    const std::vector<float> dO = randn_vec(in.Q.size(), rng, 1.0);
    const GradRef ref = cpu_backward<double>(in, dO, c.group);
    // Alternate the forward that writes the checkpoints (the default one, and the fallback).
    const BackwardRun run(in, dO, c.group,
                          idx++ % 2 ? TttLinearForwardVersion::Fallback
                                    : TttLinearForwardVersion::Default);
    for (int vi = 0; vi < kNumBwd; ++vi) {
      if (!ttt_linear_backward_supports(kBwdVersions[vi], D)) continue;
      SCOPED_TRACE(kBwdNames[vi]);
      check_backward(run.run(kBwdVersions[vi]), ref, worst_tok[vi], worst_sum[vi]);
      ++runs[vi];
    }
  }
  for (int vi = 0; vi < kNumBwd; ++vi)
    std::printf("[   INFO   ] %s: %d shapes, worst rel. error per-token %.3g, summed parameters "
                "%.3g\n",
                kBwdNames[vi], runs[vi], worst_tok[vi], worst_sum[vi]);
}

// The fused backward (Default on these shapes) against the CPU engine in fp64 and the fallback.
TEST(TttLinearBackward, FusedMatchesCpuAndFallbackOnItsShapes) {
  TTTLAB_SEEDED_GPU_TEST();
  double tok = 0, sum = 0, tok_fb = 0, sum_fb = 0, tok_tf32 = 0, sum_tf32 = 0;
  int n = 0;
  for (const Case& c : fused_backward_cases()) {
    const TttDims& D = c.dims;
    SCOPED_TRACE(describe(D, c.opt) + " group " + std::to_string(c.group));
    LinearInputs in = random_linear_inputs(D, c.opt, rng);
    const std::vector<float> dO = randn_vec(in.Q.size(), rng, 1.0);
    const BackwardRun run(in, dO, c.group, TttLinearForwardVersion::Default);
    const BwdOut fused = run.run(TttBackwardVersion::Default);
    const BwdOut fallback = run.run(TttBackwardVersion::Fallback);
    const BwdOut tf32 = run.run(TttBackwardVersion::Tf32);
    const GradRef ref = cpu_backward<double>(in, dO, c.group);
    {
      // dV written in bf16 by the kernel (what training with bf16 products asks for): the
      // round-to-nearest-even bf16 of the fp32 dV bit for bit, and every other output unchanged.
      SCOPED_TRACE("tf32 with dV in bf16");
      const BwdOut t16 = run.run(TttBackwardVersion::Tf32, true);
      ASSERT_EQ(t16.dV16.size(), tf32.dV.size());
      std::size_t off = 0;
      for (std::size_t i = 0; i < tf32.dV.size(); ++i)
        off += t16.dV16[i] != bf16_bits_reference(tf32.dV[i]);
      EXPECT_EQ(off, 0u) << "of " << tf32.dV.size() << " dV values differ from their bf16 rounding";
      EXPECT_EQ(t16.dQ, tf32.dQ);
      EXPECT_EQ(t16.dK, tf32.dK);
      EXPECT_EQ(t16.dlam, tf32.dlam);
      EXPECT_EQ(t16.dW0, tf32.dW0);
      EXPECT_EQ(t16.dtau, tf32.dtau);
    }
    {
      SCOPED_TRACE("fused against the CPU engine");
      check_backward(fused, ref, tok, sum, kTolBwdSum);
    }
    {
      // The Tf32 version: the same kernel with one tf32 product per term. Per token (dQ, dK, dV) the
      // tf32 bound kTolTf32; dλ and the sums over the batch at kTolTf32Bwd.
      SCOPED_TRACE("fused tf32 against the CPU engine");
      for (auto [name, got, want, tol] :
           {std::tuple{"dQ", &tf32.dQ, &ref.dQ, kTolTf32}, {"dK", &tf32.dK, &ref.dK, kTolTf32},
            {"dV", &tf32.dV, &ref.dV, kTolTf32}, {"dlambda", &tf32.dlam, &ref.dlam, kTolTf32Bwd},
            {"dtau", &tf32.dtau, &ref.dtau, kTolTf32Bwd}, {"dln_weight", &tf32.dgam, &ref.dgam, kTolTf32Bwd},
            {"dln_bias", &tf32.dbet, &ref.dbet, kTolTf32Bwd}, {"dW0", &tf32.dW0, &ref.dW0, kTolTf32Bwd},
            {"db0", &tf32.db0, &ref.db0, kTolTf32Bwd}})
        expect_within(name, *got, *want, tol, tol == kTolTf32 ? tok_tf32 : sum_tf32);
    }
    {
      SCOPED_TRACE("fused against the fallback");
      check_backward(fused, as_ref(fallback), tok_fb, sum_fb);
    }
    ++n;
  }
  std::printf("[   INFO   ] fused backward: %d shapes; worst rel. error against the CPU per-token "
              "%.3g, summed %.3g; against the fallback per-token %.3g, summed %.3g; the tf32 version "
              "against the CPU per-token %.3g (bound %.0e), dλ and summed %.3g (bound %.0e)\n",
              n, tok, sum, tok_fb, sum_fb, tok_tf32, kTolTf32, sum_tf32, kTolTf32Bwd);
}

// The fused kernel in two roles (checkpoint group 1, B·H blocks within one wave, as in training)
// against the same kernel in one role, which the test above checks against the CPU engine: every
// output bit for bit (the same operations in the same order), except dγ and dβ, whose two roles'
// sums are added at the end (within 1e-5 of max|x|); and those two against the CPU engine. Default
// and Tf32, with dV in bf16 too, on head dims 16, 32, 64, short and long sequences, partial last
// mini-batches and every option combination in turn.
TEST(TttLinearBackward, TwoRolesMatchOneRole) {
  TTTLAB_SEEDED_GPU_TEST();
  const std::vector<int> Ts = quick_mode()
                                  ? std::vector<int>{17, 64}
                                  : std::vector<int>{1, 15, 16, 17, 33, 48, 100, 257, 2048};
  const int bh[3][2] = {{1, 1}, {2, 3}, {4, 12}};
  double worst = 0.0, tok = 0.0, sum = 0.0;
  int n = 0, idx = 0;
  for (int d : {16, 32, 64})
    for (int T : Ts) {
      const int* b_h = T > 1000 ? bh[1] : bh[idx % 3];  // a long sequence on a few heads
      const TttDims D{b_h[0], b_h[1], T, d, 16};
      const TttOptions opt = flags(idx++ % 8);
      SCOPED_TRACE(describe(D, opt));
      LinearInputs in = random_linear_inputs(D, opt, rng);
      const std::vector<float> dO = randn_vec(in.Q.size(), rng, 1.0);
      const BackwardRun run(in, dO, 1, TttLinearForwardVersion::Default);
      for (auto [bv, dv16] : {std::pair{TttBackwardVersion::Default, false},
                              {TttBackwardVersion::Tf32, false},
                              {TttBackwardVersion::Tf32, true}}) {
        SCOPED_TRACE(bv == TttBackwardVersion::Default ? "default"
                     : dv16                            ? "tf32, dV bf16"
                                                       : "tf32");
        const BwdOut one = run.run(bv, dv16, false), two = run.run(bv, dv16, true);
        EXPECT_EQ(two.dQ, one.dQ);
        EXPECT_EQ(two.dK, one.dK);
        EXPECT_EQ(two.dV, one.dV);
        EXPECT_EQ(two.dV16, one.dV16);
        EXPECT_EQ(two.dlam, one.dlam);
        EXPECT_EQ(two.dtau, one.dtau);
        EXPECT_EQ(two.dW0, one.dW0);
        EXPECT_EQ(two.db0, one.db0);
        const GradRef ref1 = as_ref(one);
        expect_within("dln_weight", two.dgam, ref1.dgam, 1e-5, worst);
        expect_within("dln_bias", two.dbet, ref1.dbet, 1e-5, worst);
        if (bv == TttBackwardVersion::Default && !dv16) {
          const GradRef ref = cpu_backward<double>(in, dO, 1);
          check_backward(two, ref, tok, sum);
        }
      }
      ++n;
    }
  std::printf(
      "[   INFO   ] two roles: %d shapes, bitwise the one-role kernel but dγ, dβ (worst "
      "%.3g of max); Default against the CPU per-token %.3g, summed %.3g\n",
      n, worst, tok, sum);
}

// ---- A non-default ε -------------------------------------------------------------------------------

// The kernels take the inner LayerNorm's ε from TttOptions::ln_eps (the training step passes
// ModelConfig::ttt_ln_eps): forward (tensor-core and fallback) and backward (fused and fallback)
// with ε = 1e-2 against the CPU engine run with the same ε. The test can fail: the reference at the
// default ε is checked to differ from the one at 1e-2 by far more than the tolerance, so a kernel
// that ignored ε would be off by that much.
TEST(TttLinear, UsesTheGivenLayerNormEps) {
  TTTLAB_SEEDED_GPU_TEST();
  for (const TttDims& D : {TttDims{2, 2, 40, 64, 16}, TttDims{1, 2, 23, 32, 8}}) {
    SCOPED_TRACE(describe(D, TttOptions{}));
    TttOptions opt;
    opt.ln_eps = 1e-2f;
    LinearInputs in = random_linear_inputs(D, opt, rng);
    const LinearRef ref = cpu_forward(in, false);
    {
      LinearInputs at_default = in;
      at_default.opt.ln_eps = TttOptions{}.ln_eps;
      const std::vector<double> O_default = cpu_forward(at_default, false).O;
      const std::vector<float> Of(O_default.begin(), O_default.end());
      // Measured 4.7e-3 at the first shape (H100, the default seed): 47× the tolerance below.
      ASSERT_GT(compare(Of, ref.O).rel, 10 * kTolFp32) << "ε = 1e-2 does not change this test's outputs";
    }
    const DeviceLinearInputs dev(in);
    DeviceBuffer O(in.Q.size());
    for (TttLinearForwardVersion v : {TttLinearForwardVersion::Default, TttLinearForwardVersion::Fallback}) {
      SCOPED_TRACE(v == TttLinearForwardVersion::Default ? "forward default" : "forward fallback");
      O.poison();
      TttLinearForwardArgs a = forward_args(in, dev);
      a.O = O.get();
      a.version = v;
      ttt_linear_forward(a);
      const std::vector<float> o = O.download();
      EXPECT_TRUE(within("O", compare(o, ref.O), kTolFp32, o, ref.O));
    }
    const std::vector<float> dO = randn_vec(in.Q.size(), rng, 1.0);
    const GradRef gref = cpu_backward<double>(in, dO, 2);
    const BackwardRun run(in, dO, 2, TttLinearForwardVersion::Default);
    double tok = 0, sum = 0;
    for (TttBackwardVersion v : {TttBackwardVersion::Default, TttBackwardVersion::Fallback}) {
      SCOPED_TRACE(v == TttBackwardVersion::Default ? "backward default" : "backward fallback");
      check_backward(run.run(v), gref, tok, sum);
    }
  }
}

// ---- Decode -----------------------------------------------------------------------------------------

TEST(TttLinearDecode, PrefillThenDecodeMatchesThePrimalForm) {
  TTTLAB_SEEDED_GPU_TEST();
  struct DecodeCase {
    TttDims dims;
    int prefill;
    int flags;
  };
  const std::vector<DecodeCase> cases = {
      {{2, 3, 40, 16, 7}, 10, 0},  {{2, 2, 50, 64, 16}, 16, 0}, {{1, 2, 50, 64, 16}, 21, 0},
      {{2, 1, 13, 128, 4}, 0, 0},  {{3, 1, 9, 32, 1}, 3, 0},    {{1, 2, 23, 48, 5}, 7, 3},
      {{2, 2, 30, 64, 16}, 17, 5}, {{1, 1, 70, 128, 64}, 33, 6}, {{2, 2, 20, 16, 8}, 8, 7}};
  for (const DecodeCase& c : cases) {
    const TttDims& D = c.dims;
    const TttOptions opt = flags(c.flags);
    SCOPED_TRACE(describe(D, opt) + " prefill " + std::to_string(c.prefill));
    const int d = D.head_dim, P = c.prefill, HD = D.heads * d;
    const std::size_t BH = std::size_t(D.batch) * D.heads;
    const LinearInputs in = random_linear_inputs(D, opt, rng, true);
    const LinearRef ref = cpu_forward(in, true, /*primal=*/true);

    // The state: the prefill forward's final state, or the initial state.
    DeviceFinalState st(D);
    if (P > 0) {
      TttDims PD = D;
      PD.seq_len = P;
      LinearInputs pin = in;
      pin.dims = PD;
      pin.Q.clear();
      pin.K.clear();
      pin.V.clear();
      pin.lam.clear();
      for (int n = 0; n < D.batch; ++n) {
        const std::size_t s0 = std::size_t(n) * D.seq_len * HD;
        pin.Q.insert(pin.Q.end(), in.Q.begin() + s0, in.Q.begin() + s0 + std::size_t(P) * HD);
        pin.K.insert(pin.K.end(), in.K.begin() + s0, in.K.begin() + s0 + std::size_t(P) * HD);
        pin.V.insert(pin.V.end(), in.V.begin() + s0, in.V.begin() + s0 + std::size_t(P) * HD);
        for (int h = 0; h < D.heads; ++h) {
          const std::size_t l0 = (std::size_t(n) * D.heads + h) * D.seq_len;
          pin.lam.insert(pin.lam.end(), in.lam.begin() + l0, in.lam.begin() + l0 + P);
        }
      }
      const DeviceLinearInputs pdev(pin);
      DeviceBuffer O(pin.Q.size());
      O.poison();
      st.poison();
      TttLinearForwardArgs a = forward_args(pin, pdev);
      a.per_sequence_init = true;
      a.O = O.get();
      st.set_outputs(a);
      ttt_linear_forward(a);
      const std::vector<float> o = O.download();
      std::vector<double> r;
      std::vector<float> g;
      for (int n = 0; n < D.batch; ++n)
        for (std::size_t i = 0; i < std::size_t(P) * HD; ++i) {
          r.push_back(ref.O[std::size_t(n) * D.seq_len * HD + i]);
          g.push_back(o[std::size_t(n) * P * HD + i]);
        }
      EXPECT_TRUE(within("prefill O", compare(g, r), kTolFp32, g, r));
    } else {
      st.W.upload(in.W0);
      std::vector<float> b0 = in.b0;
      if (!opt.bias) std::fill(b0.begin(), b0.end(), 0.0f);
      st.b.upload(b0);
      st.acc_W.upload(std::vector<float>(BH * d * d, 0.0f));
      st.acc_b.upload(std::vector<float>(BH * d, 0.0f));
    }

    DecodeTokenBuffers tok(in);
    double worst = 0;
    for (int t = P; t < D.seq_len; ++t) {
      tok.upload(in, t);
      TttLinearDecodeArgs a;
      static_cast<TttDecodeInputs&>(a) = tok.inputs(in);
      a.W = st.W.get();
      a.b = st.b.get();
      a.acc_W = st.acc_W.get();
      a.acc_b = st.acc_b.get();
      a.pos = t % D.mini_batch;
      a.o = tok.o.get();
      ttt_linear_decode_step(a);
      const std::vector<float> got = tok.o.download();
      std::vector<double> r;
      for (int n = 0; n < D.batch; ++n)
        for (int i = 0; i < HD; ++i) r.push_back(ref.O[(std::size_t(n) * D.seq_len + t) * HD + i]);
      const ErrorStat e = compare(got, r);
      worst = std::max(worst, e.rel);
      ASSERT_TRUE(within(("decode token " + std::to_string(t)).c_str(), e, kTolFp32, got, r));
    }
    std::printf("[   INFO   ] decode %s prefill %d: worst rel. error %.3g\n",
                describe(D, opt).c_str(), P, worst);
    st.expect_near(ref, kTolFp32, "state");
  }
}

// ---- Arguments ----------------------------------------------------------------------------------------

TEST(TttLinearArguments, BadInputIsRejectedWithAMessageBeforeAnyLaunch) {
  // No GPU needed: the checks run before any CUDA call.
  TttLinearForwardArgs a;
  a.dims = {1, 1, 8, 64, 16};
  auto msg = [](auto&& fn) {
    try {
      fn();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("<no exception>");
  };
  EXPECT_NE(msg([&] { ttt_linear_forward(a); }).find("Q is null"), std::string::npos);
  float dummy = 0;
  a.Q = a.K = a.V = a.lambda = a.tau = a.ln_weight = a.ln_bias = a.W0 = a.b0 = &dummy;
  a.O = &dummy;
  a.dims.head_dim = 15;
  EXPECT_NE(msg([&] { ttt_linear_forward(a); }).find("head_dim"), std::string::npos);
  a.dims.head_dim = 130;
  EXPECT_NE(msg([&] { ttt_linear_forward(a); }).find("head_dim"), std::string::npos);
  a.dims.head_dim = 64;
  a.dims.mini_batch = 65;
  EXPECT_NE(msg([&] { ttt_linear_forward(a); }).find("mini_batch"), std::string::npos);
  a.dims.mini_batch = 16;
  a.version = TttLinearForwardVersion::Tf32;  // the tensor-core kernel only: b = 16
  a.dims.mini_batch = 8;
  EXPECT_FALSE(ttt_linear_forward_supports(a.version, a.dims));
  EXPECT_NE(msg([&] { ttt_linear_forward(a); }).find("version Tf32 needs mini_batch 16"), std::string::npos);
  a.dims.mini_batch = 16;
  // bf16 inputs and output belong to version Bf16, which takes nothing else.
  std::uint16_t dummy16[8] = {};
  a.version = TttLinearForwardVersion::Default;
  a.Q_bf16 = dummy16;
  EXPECT_NE(msg([&] { ttt_linear_forward(a); }).find("for version Bf16 only"), std::string::npos);
  a.version = TttLinearForwardVersion::Bf16;
  EXPECT_NE(msg([&] { ttt_linear_forward(a); }).find("Q, K, V and O must be null"),
            std::string::npos);
  a.Q = a.K = a.V = a.O = nullptr;
  EXPECT_NE(msg([&] { ttt_linear_forward(a); }).find("K_bf16 is null"), std::string::npos);
  a.K_bf16 = a.V_bf16 = dummy16;
  a.O_bf16 = dummy16;
  a.dims.mini_batch = 8;
  EXPECT_FALSE(ttt_linear_forward_supports(a.version, a.dims));
  EXPECT_NE(msg([&] { ttt_linear_forward(a); }).find("version Bf16 needs mini_batch 16"),
            std::string::npos);
  a.dims.mini_batch = 16;
  a.Q_bf16 = a.K_bf16 = a.V_bf16 = nullptr;
  a.O_bf16 = nullptr;
  a.Q = a.K = a.V = a.O = &dummy;
  a.version = TttLinearForwardVersion::Default;
  a.dims.seq_len = 0;
  EXPECT_NE(msg([&] { ttt_linear_forward(a); }).find("seq_len"), std::string::npos);
  a.dims.seq_len = 8;
  a.checkpoint_W = &dummy;
  EXPECT_NE(msg([&] { ttt_linear_forward(a); }).find("checkpoint_group"), std::string::npos);
  a.checkpoint_W = nullptr;
  a.opt.ln_eps = 0;
  EXPECT_NE(msg([&] { ttt_linear_forward(a); }).find("ln_eps"), std::string::npos);

  TttLinearDecodeArgs dec;
  dec.dims = {1, 1, 1, 32, 4};
  dec.q = dec.k = dec.v = dec.lambda = dec.tau = dec.ln_weight = dec.ln_bias = &dummy;
  dec.W = dec.b = dec.acc_W = dec.acc_b = dec.o = &dummy;
  dec.pos = 4;
  EXPECT_NE(msg([&] { ttt_linear_decode_step(dec); }).find("pos"), std::string::npos);
  dec.pos = 0;
  dec.acc_b = nullptr;
  EXPECT_NE(msg([&] { ttt_linear_decode_step(dec); }).find("acc_b"), std::string::npos);

  TttLinearBackwardArgs ba;
  ba.dims = {1, 1, 8, 64, 16};
  ba.checkpoint_group = 0;
  EXPECT_NE(msg([&] { ttt_linear_backward(ba); }).find("checkpoint_group"), std::string::npos);
  // dV in bf16 is the Tf32 version's alone: the others refuse it.
  ba.checkpoint_group = 1;
  ba.dims.mini_batch = 8;
  ba.Q = ba.K = ba.V = ba.lambda = ba.tau = ba.ln_weight = ba.ln_bias = ba.checkpoint_W = ba.dO =
      &dummy;
  ba.checkpoint_b = &dummy;
  ba.dQ = ba.dK = ba.dlambda = ba.dtau = ba.dln_weight = ba.dln_bias = ba.dW0 = ba.db0 = &dummy;
  ba.dV_bf16 = dummy16;
  ba.workspace = &dummy;
  EXPECT_NE(msg([&] { ttt_linear_backward(ba); }).find("dV_bf16 needs version Tf32"),
            std::string::npos);
  EXPECT_THROW(ttt_num_checkpoints(ba.dims, 0), std::invalid_argument);
  EXPECT_EQ(ttt_num_mini_batches({1, 1, 33, 64, 16}), 3);
  EXPECT_EQ(ttt_num_checkpoints({1, 1, 33, 64, 16}, 2), 2);
}

TEST(TttLinearArguments, BackwardRejectsASmallWorkspace) {
  TTTLAB_REQUIRE_GPU();
  TttLinearBackwardArgs ba;
  ba.dims = {1, 1, 8, 64, 16};
  float dummy = 0;
  ba.Q = ba.K = ba.V = ba.lambda = ba.tau = ba.ln_weight = ba.ln_bias = &dummy;
  ba.checkpoint_W = ba.checkpoint_b = ba.dO = &dummy;
  ba.dQ = ba.dK = ba.dV = ba.dlambda = ba.dtau = ba.dln_weight = ba.dln_bias = ba.dW0 = ba.db0 =
      &dummy;
  ba.workspace = &dummy;
  ba.workspace_bytes = 4;
  try {
    ttt_linear_backward(ba);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("workspace"), std::string::npos) << e.what();
  }
  // The Tf32 version is the fused kernel's shapes only (b = 16): refused with the reason.
  ba.version = TttBackwardVersion::Tf32;
  ba.dims.mini_batch = 8;
  EXPECT_FALSE(ttt_linear_backward_supports(ba.version, ba.dims));
  try {
    ttt_linear_backward(ba);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("version Tf32 needs mini_batch 16"), std::string::npos) << e.what();
  }
}

// ---- Benchmark --------------------------------------------------------------------------------------

// A bench run at a small shape, few repeats: what the bench tests time.
TttBenchConfig small_bench(int repeats) {
  TttBenchConfig cfg;
  cfg.dims = {2, 2, 64, 64, 16};
  cfg.warmup = 1;
  cfg.repeats = repeats;
  return cfg;
}

TEST(TttBench, ReportsEveryKernelWithTimesFloorsAndBandwidth) {
  TTTLAB_REQUIRE_GPU();
  const TttBenchReport r = ttt_bench(small_bench(3));
  EXPECT_FALSE(r.device.empty());
  EXPECT_GT(r.copy_bandwidth_gbs, 10.0);
  ASSERT_GE(r.rows.size(), 6u);  // 3 forwards, fwd+bwd, 2 backwards, mlp, attention
  for (const TttBenchRow& row : r.rows) {
    SCOPED_TRACE(row.name);
    EXPECT_GT(row.median_ms, 0.0);
    EXPECT_GT(row.gflops, 0.0);
    EXPECT_GT(row.floor_ms, 0.0);
    // The attention baselines and the delta rules have no mini-batch; LaCT's rows name their chunk.
    const bool no_mini_batch = row.name.find("attention") != std::string::npos ||
                               row.name.find("delta rule") != std::string::npos;
    const bool lact = row.name.rfind("lact ", 0) == 0;
    EXPECT_EQ(row.shape, lact            ? "B=2 H=2 T=64 d=64 C=64"
                         : no_mini_batch ? "B=2 H=2 T=64 d=64"
                                         : "B=2 H=2 T=64 d=64 b=16");
  }
  const std::string table = format_ttt_bench(r);
  EXPECT_NE(table.find("ttt-linear forward fallback-simt"), std::string::npos) << table;
  EXPECT_NE(table.find("ttt-mlp forward"), std::string::npos) << table;
  EXPECT_NE(table.find("ttt-mlp forward+backward (g=8)"), std::string::npos) << table;
  // g = 1: every state kept, as the training step runs it.
  EXPECT_NE(table.find("ttt-mlp forward+backward (g=1)"), std::string::npos) << table;
  EXPECT_NE(table.find("softmax-attention fwd+bwd"), std::string::npos) << table;
  EXPECT_NE(table.find("gated delta rule (recurrent) fwd+bwd"), std::string::npos) << table;
  EXPECT_NE(table.find("lact chunked fwd+bwd tf32"), std::string::npos) << table;
}

// --only: the groups asked for and no other row; an unknown name is refused before anything runs.
TEST(TttBench, TimesOnlyTheGroupsAsked) {
  TTTLAB_REQUIRE_GPU();
  TttBenchConfig cfg = small_bench(2);
  cfg.all_versions = false;
  cfg.groups = {"titans", "ttt-linear"};
  const TttBenchReport r = ttt_bench(cfg);
  bool titans = false, linear = false;
  for (const TttBenchRow& row : r.rows) {
    SCOPED_TRACE(row.name);
    const bool is_titans = row.name.rfind("titans ", 0) == 0;
    const bool is_linear = row.name.rfind("ttt-linear ", 0) == 0;
    EXPECT_TRUE(is_titans || is_linear);
    titans = titans || is_titans;
    linear = linear || is_linear;
  }
  EXPECT_TRUE(titans);
  EXPECT_TRUE(linear);
  cfg.groups = {"titan"};
  EXPECT_THROW(ttt_bench(cfg), std::invalid_argument);
}

}  // namespace
}  // namespace tttlab::kernels::test
