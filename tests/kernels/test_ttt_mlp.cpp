// TTT-MLP kernels against the CPU engine run in fp64 (inner_forward_dual and inner_backward with
// InnerModel::MLP): the dual-form forward (every version), its checkpoints against the CPU engine's
// states, and the second-order backward with checkpointing through time, on shape grids with the
// options toggled, random inputs from a fixed seed per test (test_seed: printed with any failure;
// TTTLAB_TEST_SEED=<n> or =random overrides it) and every output poisoned with NaN before each
// launch. Tolerances, fixed, relative to max|ref| of each output, as in test_ttt_linear.cpp (which
// gives the reasoning): 1e-4 for the forward's outputs and states; for the backward 5e-4 per
// token (dQ, dK, dV) and 1e-3 for dλ and the sums over the batch (dτ, dγ, dβ, dW1, db1, dW2, db2);
// 1e-2 for the Tf32 versions' outputs (forward and backward).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "test_ttt_util.hpp"

namespace tttlab::kernels::test {
namespace {

constexpr double kTolFp32 = 1e-4;
// The Tf32 versions (one tf32 product per term, operands truncated to a 10-bit mantissa): 1e-2, as
// test_ttt_linear.cpp's Tf32 forward.
constexpr double kTolTf32 = 1e-2;
// The second-order backward: fixed bounds, the same as test_ttt_linear.cpp's (whose comment gives
// the observations behind them).
constexpr double kTolBwdToken = 5e-4;
constexpr double kTolBwdSum = 1e-3;

struct MlpInputs {
  LinearInputs base;  // Q, K, V, λ, τ, γ, β (W0, b0 unused)
  std::vector<float> W1, b1, W2, b2;
};

MlpInputs random_mlp_inputs(const TttDims& D, const TttOptions& opt, std::mt19937_64& rng) {
  MlpInputs in;
  in.base = random_linear_inputs(D, opt, rng);
  for (auto& l : in.base.lam) l *= 0.1f;  // η_base = 0.1 for TTT-MLP (docs/MATH.md §2.3)
  const int d = D.head_dim, hd = 4 * d;
  in.W1 = randn_vec(std::size_t(D.heads) * d * hd, rng, 1.0 / std::sqrt(double(d)));
  in.b1 = randn_vec(std::size_t(D.heads) * hd, rng, 0.1);
  in.W2 = randn_vec(std::size_t(D.heads) * hd * d, rng, 1.0 / std::sqrt(double(hd)));
  in.b2 = randn_vec(std::size_t(D.heads) * d, rng, 0.1);
  return in;
}

InnerWeights<double> initial_weights(const MlpInputs& in, const InnerOptions& io, int h) {
  const int d = in.base.dims.head_dim, hd = 4 * d;
  InnerWeights<double> w;
  w.W1 = mat_at(in.W1, std::size_t(h) * d * hd, d, hd);
  w.W2 = mat_at(in.W2, std::size_t(h) * hd * d, hd, d);
  w.b1 = io.bias ? row_at(in.b1, std::size_t(h) * hd, hd) : RowVec<double>::Zero(hd);
  w.b2 = io.bias ? row_at(in.b2, std::size_t(h) * d, d) : RowVec<double>::Zero(d);
  return w;
}

std::vector<double> cpu_mlp_forward(const MlpInputs& in) {
  const TttDims& D = in.base.dims;
  const int d = D.head_dim, hd = 4 * d;
  const InnerOptions io = inner_options(in.base.opt, D, InnerModel::MLP);
  std::vector<double> O(in.base.Q.size());
  for (int n = 0; n < D.batch; ++n)
    for (int h = 0; h < D.heads; ++h) {
      InnerWeights<double> w;
      w.W1 = mat_at(in.W1, std::size_t(h) * d * hd, d, hd);
      w.W2 = mat_at(in.W2, std::size_t(h) * hd * d, hd, d);
      w.b1 = io.bias ? row_at(in.b1, std::size_t(h) * hd, hd) : RowVec<double>::Zero(hd);
      w.b2 = io.bias ? row_at(in.b2, std::size_t(h) * d, d) : RowVec<double>::Zero(d);
      InnerState<double> st = InnerState<double>::start(w);
      Mat<double> out;
      inner_forward_dual<double>(io, head_params(in.base, h), head_slice(in.base.Q, D, n, h),
                                 head_slice(in.base.K, D, n, h), head_slice(in.base.V, D, n, h),
                                 lambda_slice(in.base.lam, D, n, h), st, out);
      for (int t = 0; t < D.seq_len; ++t)
        for (int c = 0; c < d; ++c)
          O[(std::size_t(n) * D.seq_len + t) * D.heads * d + std::size_t(h) * d + c] = out(t, c);
    }
  return O;
}

TEST(TttMlpForward, MatchesCpuDualFormOnTheShapeGrid) {
  TTTLAB_SEEDED_GPU_TEST();
  const bool quick = quick_mode();
  const std::vector<int> ds = quick ? std::vector<int>{16, 64} : std::vector<int>{16, 32, 64, 128};
  const std::vector<int> bs = quick ? std::vector<int>{7, 16} : std::vector<int>{1, 7, 16, 64};
  const std::vector<int> Ts = quick ? std::vector<int>{17} : std::vector<int>{1, 17, 64, 200};
  const int bh[4][2] = {{1, 1}, {2, 3}, {3, 2}, {2, 1}};
  double worst[3] = {0, 0, 0};  // Fallback, Default, Tf32
  int idx = 0, runs = 0;
  for (int d : ds)
    for (int b : bs)
      for (int T : Ts) {
        const TttDims D{bh[idx % 4][0], bh[idx % 4][1], T, d, b};
        TttOptions opt;
        opt.layer_norm = !(idx & 1);
        opt.residual = !(idx & 2);
        opt.bias = !(idx & 4);
        ++idx;
        SCOPED_TRACE("B=" + std::to_string(D.batch) + " H=" + std::to_string(D.heads) +
                     " T=" + std::to_string(T) + " d=" + std::to_string(d) + " b=" +
                     std::to_string(b) + " flags " + std::to_string((idx - 1) % 8));
        const MlpInputs in = random_mlp_inputs(D, opt, rng);
        const std::vector<double> ref = cpu_mlp_forward(in);
        const DeviceBuffer Q(in.base.Q), K(in.base.K), V(in.base.V), lam(in.base.lam),
            tau(in.base.tau), gam(in.base.gamma), bet(in.base.beta), W1(in.W1), b1(in.b1),
            W2(in.W2), b2(in.b2);
        DeviceBuffer O(in.base.Q.size());
        const std::size_t ws_bytes = ttt_mlp_forward_workspace_bytes(D);
        DeviceBuffer ws((ws_bytes + 3) / 4);
        for (TttMlpForwardVersion mv : {TttMlpForwardVersion::Fallback, TttMlpForwardVersion::Default,
                                        TttMlpForwardVersion::Tf32}) {
        if (!ttt_mlp_forward_supports(mv, D)) continue;
        const int vi = mv == TttMlpForwardVersion::Fallback ? 0 : mv == TttMlpForwardVersion::Default ? 1 : 2;
        SCOPED_TRACE(vi == 0 ? "mlp fallback" : vi == 1 ? "mlp default" : "mlp tf32");
        O.poison();
        ws.poison();
        TttMlpForwardArgs a;
        a.version = mv;
        a.dims = D;
        a.opt = opt;
        a.Q = Q.get();
        a.K = K.get();
        a.V = V.get();
        a.lambda = lam.get();
        a.tau = tau.get();
        a.ln_weight = gam.get();
        a.ln_bias = bet.get();
        a.W1 = W1.get();
        a.b1 = b1.get();
        a.W2 = W2.get();
        a.b2 = b2.get();
        a.O = O.get();
        a.workspace = ws.get();
        a.workspace_bytes = ws_bytes;
        ttt_mlp_forward(a);
        const std::vector<float> o = O.download();
        const ErrorStat e = compare(o, ref);
        EXPECT_TRUE(within("O", e, vi == 2 ? kTolTf32 : kTolFp32, o, ref));
        worst[vi] = std::max(worst[vi], e.rel);
        ++runs;
        }
      }
  std::printf("[   INFO   ] mlp forward: %d runs, worst |O - ref| / max|ref| = %.3g (fallback), "
              "%.3g (default), %.3g (tf32)\n",
              runs, worst[0], worst[1], worst[2]);
}

// ---- Forward checkpoints ------------------------------------------------------------------------

struct MlpDevice {
  DeviceBuffer Q, K, V, lam, tau, gam, bet, W1, b1, W2, b2;
  explicit MlpDevice(const MlpInputs& in)
      : Q(in.base.Q), K(in.base.K), V(in.base.V), lam(in.base.lam), tau(in.base.tau),
        gam(in.base.gamma), bet(in.base.beta), W1(in.W1), b1(in.b1), W2(in.W2), b2(in.b2) {}
  // The inputs every forward and backward reads, with in's dims and options.
  TttSequenceInputs sequence_inputs(const MlpInputs& in) const {
    return {in.base.dims, in.base.opt, Q.get(),   K.get(), V.get(),
            lam.get(),    tau.get(),   gam.get(), bet.get()};
  }
};

struct MlpCheckpoints {
  DeviceBuffer W1, b1, W2, b2;
};

// The forward's arguments for these inputs: dims, options, Q, K, V and the parameters from `dev`;
// the caller sets O (or the bf16 fields), checkpoints, workspace and version.
TttMlpForwardArgs forward_args(const MlpInputs& in, const MlpDevice& dev) {
  TttMlpForwardArgs a;
  static_cast<TttSequenceInputs&>(a) = dev.sequence_inputs(in);
  a.W1 = dev.W1.get();
  a.b1 = dev.b1.get();
  a.W2 = dev.W2.get();
  a.b2 = dev.b2.get();
  return a;
}

// The forward of one version writing O and the checkpoints of group g.
MlpCheckpoints run_forward(const MlpInputs& in, const MlpDevice& dev, int group,
                           TttMlpForwardVersion v, DeviceBuffer& O) {
  const TttDims& D = in.base.dims;
  const std::size_t BH = std::size_t(D.batch) * D.heads, d = D.head_dim, hd = 4 * d;
  const std::size_t n_ck = ttt_num_checkpoints(D, group);
  MlpCheckpoints ck{DeviceBuffer(BH * n_ck * d * hd), DeviceBuffer(BH * n_ck * hd),
                    DeviceBuffer(BH * n_ck * d * hd), DeviceBuffer(BH * n_ck * d)};
  for (DeviceBuffer* b : {&ck.W1, &ck.b1, &ck.W2, &ck.b2, &O}) b->poison();
  const std::size_t ws_bytes = ttt_mlp_forward_workspace_bytes(D);
  DeviceBuffer ws((ws_bytes + 3) / 4);
  TttMlpForwardArgs a = forward_args(in, dev);
  a.version = v;
  a.O = O.get();
  a.checkpoint_W1 = ck.W1.get();
  a.checkpoint_b1 = ck.b1.get();
  a.checkpoint_W2 = ck.W2.get();
  a.checkpoint_b2 = ck.b2.get();
  a.checkpoint_group = group;
  a.workspace = ws.get();
  a.workspace_bytes = ws_bytes;
  ttt_mlp_forward(a);
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
  return ck;
}

// Every checkpoint of group `group` (downloaded: W1, b1, W2, b2 as the forward writes them) against
// the CPU engine's committed state at the start of mini-batch k·group, replayed on the prefix; each
// within `tol` of its largest value. Returns the worst relative error.
double expect_checkpoints_match(const MlpInputs& in, int group, const std::vector<float>& cW1,
                                const std::vector<float>& cb1, const std::vector<float>& cW2,
                                const std::vector<float>& cb2, double tol) {
  const TttDims& D = in.base.dims;
  const InnerOptions io = inner_options(in.base.opt, D, InnerModel::MLP);
  const int d = D.head_dim, hd = 4 * d, n_ck = ttt_num_checkpoints(D, group);
  const std::size_t BH = std::size_t(D.batch) * D.heads;
  double worst = 0;
  for (int k = 0; k < n_ck; ++k) {
    const int len = k * group * D.mini_batch;
    std::vector<double> r[4];
    std::vector<float> g[4];
    for (std::size_t blk = 0; blk < BH; ++blk) {
      const int n = int(blk / D.heads), h = int(blk % D.heads);
      InnerState<double> st = InnerState<double>::start(initial_weights(in, io, h));
      if (len > 0) {
        Mat<double> out;
        inner_forward_dual<double>(
            io, head_params(in.base, h), head_slice(in.base.Q, D, n, h, 0, len),
            head_slice(in.base.K, D, n, h, 0, len), head_slice(in.base.V, D, n, h, 0, len),
            lambda_slice(in.base.lam, D, n, h, 0, len), st, out);
      }
      const std::size_t c0 = blk * n_ck + k;
      for (int i = 0; i < d * hd; ++i) {
        r[0].push_back(st.base.W1(i / hd, i % hd));
        g[0].push_back(cW1[c0 * d * hd + i]);
        r[2].push_back(st.base.W2(i / d, i % d));
        g[2].push_back(cW2[c0 * d * hd + i]);
      }
      for (int c = 0; c < hd; ++c) {
        r[1].push_back(st.base.b1(c));
        g[1].push_back(cb1[c0 * hd + c]);
      }
      for (int c = 0; c < d; ++c) {
        r[3].push_back(st.base.b2(c));
        g[3].push_back(cb2[c0 * d + c]);
      }
    }
    SCOPED_TRACE("checkpoint " + std::to_string(k));
    const char* names[4] = {"checkpoint W1", "checkpoint b1", "checkpoint W2", "checkpoint b2"};
    for (int q = 0; q < 4; ++q) {
      const ErrorStat e = compare(g[q], r[q], 1.0);
      EXPECT_TRUE(within(names[q], e, tol, g[q], r[q]));
      worst = std::max(worst, e.rel);
    }
  }
  return worst;
}

// Checkpoint k is the committed state at the start of mini-batch k·group: the CPU engine replayed
// on the prefix.
TEST(TttMlpForward, CheckpointsAreTheCpuEnginesStates) {
  TTTLAB_SEEDED_GPU_TEST();
  const std::vector<std::pair<TttDims, int>> cases = {
      {{2, 2, 70, 64, 16}, 2}, {{2, 1, 45, 32, 7}, 3}, {{1, 2, 40, 16, 5}, 1},
      {{1, 2, 50, 32, 16}, 4}, {{2, 1, 33, 16, 16}, 1}};
  int fi = 0;
  for (const auto& [D, group] : cases) {
    const TttOptions opt = flags(fi++ * 5 % 8);
    SCOPED_TRACE(describe(D, opt) + " group " + std::to_string(group));
    const MlpInputs in = random_mlp_inputs(D, opt, rng);
    const MlpDevice dev(in);
    for (TttMlpForwardVersion v : {TttMlpForwardVersion::Fallback, TttMlpForwardVersion::Default,
                                   TttMlpForwardVersion::Tf32}) {
      if (!ttt_mlp_forward_supports(v, D)) continue;
      const bool tf32 = v == TttMlpForwardVersion::Tf32;
      SCOPED_TRACE(v == TttMlpForwardVersion::Fallback ? "mlp fallback"
                   : tf32                              ? "mlp tf32"
                                                       : "mlp default");
      DeviceBuffer O(in.base.Q.size());
      const MlpCheckpoints ck = run_forward(in, dev, group, v, O);
      expect_checkpoints_match(in, group, ck.W1.download(), ck.b1.download(), ck.W2.download(),
                               ck.b2.download(), tf32 ? kTolTf32 : kTolFp32);
    }
  }
}

// The fused kernel (Default at b = 16, d ∈ {16, 32, 64}) has its own code path per head dimension:
// every option combination at each of its shapes, with a short last mini-batch, against the CPU
// engine in double precision.
TEST(TttMlpForward, FusedMatchesCpuForEveryOption) {
  TTTLAB_SEEDED_GPU_TEST();
  const int T = quick_mode() ? 40 : 150;
  double worst = 0, worst_tf32 = 0;
  for (int d : {16, 32, 64})
    for (int f = 0; f < 8; ++f) {
      const TttDims D{2, 1, T, d, 16};
      const TttOptions opt = flags(f);
      SCOPED_TRACE(describe(D, opt));
      const MlpInputs in = random_mlp_inputs(D, opt, rng);
      const std::vector<double> ref = cpu_mlp_forward(in);
      const MlpDevice dev(in);
      DeviceBuffer O(in.base.Q.size());
      run_forward(in, dev, 3, TttMlpForwardVersion::Default, O);
      const std::vector<float> o = O.download();
      const ErrorStat e = compare(o, ref);
      EXPECT_TRUE(within("O", e, kTolFp32, o, ref));
      worst = std::max(worst, e.rel);
      // Version Tf32 (the pair-layout kernel) on the same inputs.
      SCOPED_TRACE("mlp tf32");
      run_forward(in, dev, 3, TttMlpForwardVersion::Tf32, O);
      const std::vector<float> ot = O.download();
      const ErrorStat et = compare(ot, ref);
      EXPECT_TRUE(within("O", et, kTolTf32, ot, ref));
      worst_tf32 = std::max(worst_tf32, et.rel);
    }
  std::printf(
      "[   INFO   ] mlp forward fused, every option: worst |O - ref| / max|ref| = %.3g (default), "
      "%.3g (tf32)\n",
      worst, worst_tf32);
}

// Default reads Q, K, V and writes O in 8-byte pieces where it runs the fused kernel; inputs that are
// not 16-byte aligned (here 4 bytes off) go to the Fallback, with the same result.
TEST(TttMlpForward, DefaultRunsUnalignedInputsThroughTheFallback) {
  TTTLAB_SEEDED_GPU_TEST();
  const TttDims D{2, 1, 40, 64, 16};
  const MlpInputs in = random_mlp_inputs(D, flags(0), rng);
  const std::vector<double> ref = cpu_mlp_forward(in);
  const MlpDevice dev(in);
  auto shifted = [](const std::vector<float>& x) {  // one float in front: the data 4 bytes off
    std::vector<float> y(x.size() + 1, 0.0f);
    std::copy(x.begin(), x.end(), y.begin() + 1);
    return y;
  };
  const DeviceBuffer Q(shifted(in.base.Q)), K(shifted(in.base.K)), V(shifted(in.base.V));
  DeviceBuffer O(in.base.Q.size() + 1);
  O.poison();
  TttMlpForwardArgs a = forward_args(in, dev);
  a.Q = Q.get() + 1;
  a.K = K.get() + 1;
  a.V = V.get() + 1;
  a.O = O.get() + 1;
  ttt_mlp_forward(a);
  const std::vector<float> all = O.download(), o(all.begin() + 1, all.end());
  EXPECT_TRUE(within("O", compare(o, ref), kTolFp32, o, ref));
}

// Version Bf16: bf16 inputs and output, bf16 products with fp32 accumulation, fp32 state. Against
// the CPU engine in fp64 on the same inputs rounded to bf16, every option combination at each head
// dimension it runs (b = 16, a short last mini-batch), with every checkpoint (group 2) against the
// engine's state on the prefix. The bound is test_ttt_linear.cpp's kTolBf16 (whose comment gives
// the reasoning: 8 significant bits, every product's operands rounded, the recurrence carrying it,
// O rounded once more); here the state W1, W2 is rounded as it enters each of its products and
// X2, X̄2, G1, G2 and M1 are rounded too, so the errors are larger than TTT-Linear's, but a wrong
// term is still an O(1) error.
constexpr double kTolBf16 = 3e-2;

TEST(TttMlpForward, Bf16MatchesCpuOnRoundedInputs) {
  TTTLAB_SEEDED_GPU_TEST();
  const int T = quick_mode() ? 40 : 150;
  const int group = 2;
  double worst_o = 0, worst_ck = 0;
  int runs = 0;
  for (int d : {16, 32, 64})
    for (int f = 0; f < 8; ++f) {
      const TttDims D{2, 2, T, d, 16};
      if (!ttt_mlp_forward_supports(TttMlpForwardVersion::Bf16, D)) continue;
      const TttOptions opt = flags(f);
      SCOPED_TRACE(describe(D, opt));
      MlpInputs in = random_mlp_inputs(D, opt, rng);
      std::vector<std::uint16_t> q16, k16, v16;
      in.base.Q = rounded_to_bf16(in.base.Q, q16);
      in.base.K = rounded_to_bf16(in.base.K, k16);
      in.base.V = rounded_to_bf16(in.base.V, v16);
      const std::vector<double> ref = cpu_mlp_forward(in);
      const MlpDevice dev(in);
      const int hd = 4 * d, n_ck = ttt_num_checkpoints(D, group);
      const std::size_t BH = std::size_t(D.batch) * D.heads;
      DeviceBuffer16 Q16(q16), K16(k16), V16(v16), O16(q16.size());
      DeviceBuffer ckW1(BH * n_ck * d * hd), ckb1(BH * n_ck * hd), ckW2(BH * n_ck * d * hd),
          ckb2(BH * n_ck * d);
      for (DeviceBuffer* b : {&ckW1, &ckb1, &ckW2, &ckb2}) b->poison();
      O16.poison();
      TttMlpForwardArgs a = forward_args(in, dev);
      a.version = TttMlpForwardVersion::Bf16;
      a.Q = a.K = a.V = nullptr;
      a.Q_bf16 = Q16.get();
      a.K_bf16 = K16.get();
      a.V_bf16 = V16.get();
      a.O_bf16 = O16.get();
      a.checkpoint_W1 = ckW1.get();
      a.checkpoint_b1 = ckb1.get();
      a.checkpoint_W2 = ckW2.get();
      a.checkpoint_b2 = ckb2.get();
      a.checkpoint_group = group;
      ttt_mlp_forward(a);
      const std::vector<std::uint16_t> o16 = O16.download();
      std::vector<float> o(o16.size());
      for (std::size_t i = 0; i < o.size(); ++i) o[i] = bf16_to_float(o16[i]);
      const ErrorStat e = compare(o, ref);
      EXPECT_TRUE(within("O", e, kTolBf16, o, ref));
      worst_o = std::max(worst_o, e.rel);
      ++runs;
      // Every checkpoint: the committed state at the start of mini-batch k·group.
      worst_ck =
          std::max(worst_ck, expect_checkpoints_match(in, group, ckW1.download(), ckb1.download(),
                                                      ckW2.download(), ckb2.download(), kTolBf16));
    }
  EXPECT_EQ(runs, 24);
  std::printf(
      "[   INFO   ] mlp forward bf16: %d runs, worst |O - ref| / max|ref| = %.3g, "
      "checkpoints %.3g (bound %.g)\n",
      runs, worst_o, worst_ck, kTolBf16);
}

// ---- Backward ---------------------------------------------------------------------------------------

struct MlpGradRef {
  std::vector<double> dQ, dK, dV, dlam, dtau, dgam, dbet, dW1, db1, dW2, db2;
};

// The CPU engine's backward in precision S (the tests use double: the reference).
template <class S>
MlpGradRef cpu_mlp_backward(const MlpInputs& in, const std::vector<float>& dO, int group) {
  const TttDims& D = in.base.dims;
  const int d = D.head_dim, hd = 4 * d;
  const InnerOptions io = inner_options(in.base.opt, D, InnerModel::MLP);
  MlpGradRef g;
  const std::size_t act = in.base.Q.size();
  g.dQ.assign(act, 0);
  g.dK.assign(act, 0);
  g.dV.assign(act, 0);
  g.dlam.assign(in.base.lam.size(), 0);
  g.dtau.assign(D.mini_batch, 0);
  g.dgam.assign(std::size_t(D.heads) * d, 0);
  g.dbet.assign(std::size_t(D.heads) * d, 0);
  g.dW1.assign(std::size_t(D.heads) * d * hd, 0);
  g.db1.assign(std::size_t(D.heads) * hd, 0);
  g.dW2.assign(std::size_t(D.heads) * d * hd, 0);
  g.db2.assign(std::size_t(D.heads) * d, 0);
  for (int n = 0; n < D.batch; ++n)
    for (int h = 0; h < D.heads; ++h) {
      const InnerHeadParams<double> hp = head_params(in.base, h);
      InnerHeadParams<S> p;
      p.ln_weight = hp.ln_weight.cast<S>();
      p.ln_bias = hp.ln_bias.cast<S>();
      p.tau = hp.tau.cast<S>();
      const InnerWeights<double> w0 = initial_weights(in, io, h);
      InnerWeights<S> w;
      w.W1 = w0.W1.cast<S>();
      w.b1 = w0.b1.cast<S>();
      w.W2 = w0.W2.cast<S>();
      w.b2 = w0.b2.cast<S>();
      const Mat<S> Q = head_slice(in.base.Q, D, n, h).cast<S>(),
                   K = head_slice(in.base.K, D, n, h).cast<S>(),
                   V = head_slice(in.base.V, D, n, h).cast<S>(),
                   dOh = head_slice(dO, D, n, h).cast<S>();
      const Vec<S> lam = lambda_slice(in.base.lam, D, n, h).cast<S>();
      InnerGrads<S> gr;
      inner_backward<S>(io, p, Q, K, V, lam, w, dOh, gr, group);
      add_head_grads(gr, D, n, h, g.dQ, g.dK, g.dV, g.dlam, g.dtau, g.dgam, g.dbet);
      for (int c = 0; c < d; ++c) g.db2[std::size_t(h) * d + c] += gr.dW0.b2(c);
      for (int c = 0; c < hd; ++c) g.db1[std::size_t(h) * hd + c] += gr.dW0.b1(c);
      for (int i = 0; i < d * hd; ++i) {
        g.dW1[std::size_t(h) * d * hd + i] += gr.dW0.W1(i / hd, i % hd);
        g.dW2[std::size_t(h) * d * hd + i] += gr.dW0.W2(i / d, i % d);
      }
    }
  return g;
}

struct MlpBwdOut {
  std::vector<float> dQ, dK, dV, dlam, dtau, dgam, dbet, dW1, db1, dW2, db2;
};

MlpBwdOut run_backward(const MlpInputs& in, const MlpDevice& dev, const MlpCheckpoints& ck,
                       const std::vector<float>& dO, int group,
                       TttMlpBackwardVersion version = TttMlpBackwardVersion::Default) {
  const TttDims& D = in.base.dims;
  const std::size_t d = D.head_dim, hd = 4 * d, H = D.heads, act = in.base.Q.size();
  const std::size_t ws_bytes = ttt_mlp_backward_workspace_bytes(D, group);
  DeviceBuffer dOd(dO), dQ(act), dK(act), dV(act), dlam(in.base.lam.size()), dtau(D.mini_batch),
      dgam(H * d), dbet(H * d), dW1(H * d * hd), db1(H * hd), dW2(H * d * hd), db2(H * d),
      ws((ws_bytes + 3) / 4);
  for (DeviceBuffer* b : {&dQ, &dK, &dV, &dlam, &dtau, &dgam, &dbet, &dW1, &db1, &dW2, &db2, &ws})
    b->poison();
  TttMlpBackwardArgs a;
  static_cast<TttSequenceInputs&>(a) = dev.sequence_inputs(in);
  a.checkpoint_W1 = ck.W1.get();
  a.checkpoint_b1 = ck.b1.get();
  a.checkpoint_W2 = ck.W2.get();
  a.checkpoint_b2 = ck.b2.get();
  a.checkpoint_group = group;
  a.dO = dOd.get();
  a.dQ = dQ.get();
  a.dK = dK.get();
  a.dV = dV.get();
  a.dlambda = dlam.get();
  a.dtau = dtau.get();
  a.dln_weight = dgam.get();
  a.dln_bias = dbet.get();
  a.dW1 = dW1.get();
  a.db1 = db1.get();
  a.dW2 = dW2.get();
  a.db2 = db2.get();
  a.workspace = ws.get();
  a.workspace_bytes = ws_bytes;
  a.version = version;
  ttt_mlp_backward(a);
  return {dQ.download(),  dK.download(),  dV.download(),  dlam.download(),
          dtau.download(), dgam.download(), dbet.download(), dW1.download(),
          db1.download(), dW2.download(),  db2.download()};
}

// Every output against the reference, with the backward's fixed tolerances (the fp32-accurate
// Default's unless others are given).
void check_mlp_backward(const MlpBwdOut& got, const MlpGradRef& ref, double& tok, double& sum,
                        double tol_token = kTolBwdToken, double tol_sum = kTolBwdSum) {
  expect_within("dQ", got.dQ, ref.dQ, tol_token, tok);
  expect_within("dK", got.dK, ref.dK, tol_token, tok);
  expect_within("dV", got.dV, ref.dV, tol_token, tok);
  expect_within("dlambda", got.dlam, ref.dlam, tol_sum, tok);
  expect_within("dtau", got.dtau, ref.dtau, tol_sum, sum);
  expect_within("dln_weight", got.dgam, ref.dgam, tol_sum, sum);
  expect_within("dln_bias", got.dbet, ref.dbet, tol_sum, sum);
  expect_within("dW1", got.dW1, ref.dW1, tol_sum, sum);
  expect_within("db1", got.db1, ref.db1, tol_sum, sum);
  expect_within("dW2", got.dW2, ref.dW2, tol_sum, sum);
  expect_within("db2", got.db2, ref.db2, tol_sum, sum);
}

struct MlpCase {
  TttDims dims;
  TttOptions opt;
  int group;
};

// d × b × T with B·H, the 8 option combinations and the checkpoint group in turn; T not a multiple
// of b (a short last mini-batch, T < b included) and groups of 1, several and more than there are
// mini-batches.
std::vector<MlpCase> mlp_backward_cases() {
  const bool quick = quick_mode();
  const std::vector<int> ds = quick ? std::vector<int>{16, 64} : std::vector<int>{16, 32, 64, 128};
  const std::vector<int> bs = quick ? std::vector<int>{7, 16} : std::vector<int>{1, 7, 16, 64};
  const std::vector<int> Ts = quick ? std::vector<int>{23} : std::vector<int>{1, 17, 64, 150};
  const int bh[4][2] = {{1, 1}, {2, 3}, {3, 2}, {2, 1}};
  const int groups[5] = {1, 2, 3, 5, 40};
  std::vector<MlpCase> cases;
  int idx = 0;
  for (int d : ds)
    for (int b : bs)
      for (int T : Ts) {
        if (!quick && d == 128 && b == 64 && T > 64) continue;  // CPU reference time
        const TttDims D{bh[idx % 4][0], bh[idx % 4][1], T, d, b};
        cases.push_back({D, flags(idx % 8), groups[(idx / 2) % 5]});
        ++idx;
      }
  if (!quick) {
    cases.push_back({{2, 2, 23, 18, 5}, flags(0), 2});
    cases.push_back({{1, 2, 100, 50, 16}, flags(3), 3});
    cases.push_back({{2, 3, 512, 64, 16}, flags(0), 8});  // the benchmark's head shape
  }
  return cases;
}

// One case: random inputs, the CPU reference in fp64, the forward of version fv writing the
// checkpoints, the backward of version bv checked at the given tolerances.
void check_backward_case(const MlpCase& c, std::mt19937_64& rng, TttMlpForwardVersion fv,
                         TttMlpBackwardVersion bv, double tol_token, double tol_sum, double& tok,
                         double& sum) {
  const TttDims& D = c.dims;
  SCOPED_TRACE(describe(D, c.opt) + " group " + std::to_string(c.group));
  const MlpInputs in = random_mlp_inputs(D, c.opt, rng);
  const std::vector<float> dO = randn_vec(in.base.Q.size(), rng, 1.0);
  const MlpGradRef ref = cpu_mlp_backward<double>(in, dO, c.group);
  const MlpDevice dev(in);
  DeviceBuffer O(in.base.Q.size());
  const MlpCheckpoints ck = run_forward(in, dev, c.group, fv, O);
  check_mlp_backward(run_backward(in, dev, ck, dO, c.group, bv), ref, tok, sum, tol_token, tol_sum);
}

TEST(TttMlpBackward, MatchesCpuSecondOrderBackwardWithCheckpointing) {
  TTTLAB_SEEDED_GPU_TEST();
  double tok = 0, sum = 0;
  int runs = 0, idx = 0;
  for (const MlpCase& c : mlp_backward_cases()) {
    // Alternate the forward that writes the checkpoints.
    check_backward_case(c, rng, idx++ % 2 ? TttMlpForwardVersion::Fallback : TttMlpForwardVersion::Default,
                        TttMlpBackwardVersion::Default, kTolBwdToken, kTolBwdSum, tok, sum);
    ++runs;
  }
  std::printf("[   INFO   ] mlp backward: %d shapes, worst rel. error per-token %.3g, summed "
              "parameters %.3g\n",
              runs, tok, sum);
}

// The Tf32 version (one tf32 product per term) on a smaller grid, every option combination and the
// benchmark's head shape over T = 512. Its bound is the tf32 one of test_ttt_linear.cpp's Tf32
// forward, 1e-2 of max|ref| for every output: a tf32 operand keeps a 10-bit mantissa (unit roundoff
// 2^-11 with rounding, 2^-10 truncated), so each product is off by ~1e-3 relative and the errors of
// the recomputed forward, the chain through the mini-batches and the sums stay within a few of those.
TEST(TttMlpBackward, Tf32VersionMatchesCpuWithinTf32Rounding) {
  TTTLAB_SEEDED_GPU_TEST();
  std::vector<MlpCase> cases;
  int idx = 0;
  for (int d : {16, 64})
    for (int b : {7, 16})
      for (int T : {23, 150}) {
        cases.push_back({TttDims{2, 3, T, d, b}, flags(idx % 8), 1 + idx % 3});
        ++idx;
      }
  if (!quick_mode()) cases.push_back({{2, 3, 512, 64, 16}, flags(0), 8});
  double tok = 0, sum = 0;
  for (const MlpCase& c : cases)
    check_backward_case(c, rng, TttMlpForwardVersion::Default, TttMlpBackwardVersion::Tf32, kTolTf32,
                        kTolTf32, tok, sum);
  std::printf("[   INFO   ] mlp backward tf32: %zu shapes, worst rel. error per-token %.3g, summed "
              "parameters %.3g (bound %.0e)\n",
              cases.size(), tok, sum, kTolTf32);
}

// Two runs on the same inputs give the same bits (no atomics, fixed reduction order).
TEST(TttMlpBackward, IsDeterministic) {
  TTTLAB_SEEDED_GPU_TEST();
  const TttDims D{3, 2, 40, 32, 16};
  const MlpInputs in = random_mlp_inputs(D, TttOptions{}, rng);
  const std::vector<float> dO = randn_vec(in.base.Q.size(), rng, 1.0);
  const MlpDevice dev(in);
  DeviceBuffer O(in.base.Q.size());
  const MlpCheckpoints ck = run_forward(in, dev, 2, TttMlpForwardVersion::Default, O);
  const MlpBwdOut a = run_backward(in, dev, ck, dO, 2), b = run_backward(in, dev, ck, dO, 2);
  EXPECT_EQ(a.dW1, b.dW1);
  EXPECT_EQ(a.dW2, b.dW2);
  EXPECT_EQ(a.dtau, b.dtau);
  EXPECT_EQ(a.dK, b.dK);
}

// ---- Arguments --------------------------------------------------------------------------------------

TEST(TttMlpArguments, BadInputIsRejectedWithAMessage) {
  auto expect_msg = [](auto&& call, const char* needle) {
    try {
      call();
      ADD_FAILURE() << "no exception (expected one naming " << needle << ")";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  float dummy = 0;
  TttMlpForwardArgs a;
  a.dims = {1, 1, 8, 64, 16};
  a.Q = a.K = a.V = a.lambda = a.tau = a.ln_weight = a.ln_bias = a.b1 = a.b2 = a.O = &dummy;
  a.W2 = &dummy;
  expect_msg([&] { ttt_mlp_forward(a); }, "W1");
  a.W1 = &dummy;
  a.checkpoint_W1 = &dummy;
  expect_msg([&] { ttt_mlp_forward(a); }, "checkpoint_group");
  a.checkpoint_group = 2;
  expect_msg([&] { ttt_mlp_forward(a); }, "checkpoint_W2");
  a.checkpoint_W2 = &dummy;
  a.version = static_cast<TttMlpForwardVersion>(7);
  EXPECT_FALSE(ttt_mlp_forward_supports(a.version, a.dims));
  expect_msg([&] { ttt_mlp_forward(a); }, "unknown version");
  a.version = TttMlpForwardVersion::Default;
  EXPECT_TRUE(ttt_mlp_forward_supports(TttMlpForwardVersion::Default, a.dims));
  {  // Tf32 is the fused kernel's shapes only: b = 16, d ∈ {16, 32, 64}
    TttMlpForwardArgs t = a;
    t.version = TttMlpForwardVersion::Tf32;
    alignas(16) float row[8] = {};
    t.Q = t.K = t.V = t.O = row;
    t.dims.mini_batch = 7;
    EXPECT_FALSE(ttt_mlp_forward_supports(t.version, t.dims));
    expect_msg([&] { ttt_mlp_forward(t); }, "version Tf32 needs mini_batch 16");
    t.dims.mini_batch = 16;
    t.K = row + 1;
    expect_msg([&] { ttt_mlp_forward(t); }, "version Tf32 needs Q, K, V and O 16-byte aligned");
  }
  {  // Bf16 reads and writes the bf16 fields only, on the fused kernel's shapes, 16-byte aligned
    alignas(16) std::uint16_t half[16] = {};
    TttMlpForwardArgs t = a;
    t.version = TttMlpForwardVersion::Bf16;
    expect_msg([&] { ttt_mlp_forward(t); }, "Q, K, V and O must be null");
    t.Q = t.K = t.V = t.O = nullptr;
    expect_msg([&] { ttt_mlp_forward(t); }, "Q_bf16");
    t.Q_bf16 = t.K_bf16 = t.V_bf16 = t.O_bf16 = half;
    t.dims.mini_batch = 7;
    EXPECT_FALSE(ttt_mlp_forward_supports(t.version, t.dims));
    expect_msg([&] { ttt_mlp_forward(t); }, "version Bf16 needs mini_batch 16");
    t.dims.mini_batch = 16;
    t.K_bf16 = half + 1;
    expect_msg([&] { ttt_mlp_forward(t); }, "16-byte aligned");
    TttMlpForwardArgs u = a;  // the bf16 fields with another version
    u.V_bf16 = half;
    expect_msg([&] { ttt_mlp_forward(u); }, "for version Bf16 only");
  }
  a.checkpoint_W2 = nullptr;
  a.dims.head_dim = 15;
  expect_msg([&] { ttt_mlp_forward(a); }, "head_dim");

  TttMlpBackwardArgs g;
  g.dims = {1, 1, 8, 64, 16};
  g.Q = g.K = g.V = g.lambda = g.tau = g.ln_weight = g.ln_bias = g.dO = &dummy;
  g.checkpoint_W1 = g.checkpoint_W2 = g.checkpoint_b1 = g.checkpoint_b2 = &dummy;
  g.dQ = g.dK = g.dV = g.dlambda = g.dtau = g.dln_weight = g.dln_bias = &dummy;
  g.dW1 = g.db1 = g.dW2 = &dummy;
  g.workspace = &dummy;
  expect_msg([&] { ttt_mlp_backward(g); }, "db2");
  g.db2 = &dummy;
  g.checkpoint_group = 0;
  expect_msg([&] { ttt_mlp_backward(g); }, "checkpoint_group");
  g.checkpoint_group = 1;
  g.opt.bias = true;
  g.checkpoint_b2 = nullptr;
  expect_msg([&] { ttt_mlp_backward(g); }, "checkpoint_b2");
  g.checkpoint_b2 = &dummy;
  g.dims.mini_batch = 65;
  expect_msg([&] { ttt_mlp_backward(g); }, "mini_batch");
  g.dims.mini_batch = 16;
  expect_msg([&] { ttt_mlp_backward_workspace_bytes(g.dims, 0); }, "checkpoint_group");
}

// The workspace size is checked before the launch (needs the device's shared-memory limit).
TEST(TttMlpArguments, BackwardRejectsASmallWorkspace) {
  TTTLAB_REQUIRE_GPU();
  float dummy = 0;
  TttMlpBackwardArgs g;
  g.dims = {2, 2, 64, 64, 16};
  g.Q = g.K = g.V = g.lambda = g.tau = g.ln_weight = g.ln_bias = g.dO = &dummy;
  g.checkpoint_W1 = g.checkpoint_W2 = g.checkpoint_b1 = g.checkpoint_b2 = &dummy;
  g.dQ = g.dK = g.dV = g.dlambda = g.dtau = g.dln_weight = g.dln_bias = &dummy;
  g.dW1 = g.db1 = g.dW2 = g.db2 = &dummy;
  g.workspace = &dummy;
  g.workspace_bytes = ttt_mlp_backward_workspace_bytes(g.dims, 1) - 4;
  try {
    ttt_mlp_backward(g);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("workspace"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tttlab::kernels::test
