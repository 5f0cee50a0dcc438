// TTT-MLP forward kernel against the CPU engine's dual form in fp64 (inner_forward_dual with
// InnerModel::MLP), on the shape grid of the issue with the options toggled, fresh random inputs
// each run and the output poisoned with NaN before each launch. Tolerance 1e-4 relative to max|ref|
// (fp32 arithmetic; see test_ttt_linear.cpp for the reasoning).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "test_ttt_util.hpp"

namespace tttlab::kernels::test {
namespace {

constexpr double kTolFp32 = 1e-4;

struct MlpInputs {
  LinearInputs base;  // Q, K, V, λ, τ, γ, β (W0, b0 unused)
  std::vector<float> W1, b1, W2, b2;
};

MlpInputs random_mlp_inputs(const TttDims& D, const TttOptions& opt, std::mt19937_64& rng) {
  MlpInputs in;
  in.base = random_linear_inputs(D, opt, rng);
  for (auto& l : in.base.lam) l *= 0.1f;  // η_base = 0.1 for TTT-MLP (ttt-spec.md §2.3)
  const int d = D.head_dim, hd = 4 * d;
  in.W1 = randn_vec(std::size_t(D.heads) * d * hd, rng, 1.0 / std::sqrt(double(d)));
  in.b1 = randn_vec(std::size_t(D.heads) * hd, rng, 0.1);
  in.W2 = randn_vec(std::size_t(D.heads) * hd * d, rng, 1.0 / std::sqrt(double(hd)));
  in.b2 = randn_vec(std::size_t(D.heads) * d, rng, 0.1);
  return in;
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
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const bool quick = quick_mode();
  const std::vector<int> ds = quick ? std::vector<int>{16, 64} : std::vector<int>{16, 32, 64, 128};
  const std::vector<int> bs = quick ? std::vector<int>{7, 16} : std::vector<int>{1, 7, 16, 64};
  const std::vector<int> Ts = quick ? std::vector<int>{17} : std::vector<int>{1, 17, 64, 200};
  const int bh[4][2] = {{1, 1}, {2, 3}, {3, 2}, {2, 1}};
  double worst[2] = {0, 0};
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
        for (TttMlpForwardVersion mv : {TttMlpForwardVersion::V1Simt, TttMlpForwardVersion::V2Tf32x3}) {
        SCOPED_TRACE(mv == TttMlpForwardVersion::V1Simt ? "mlp v1" : "mlp v2");
        const int vi = mv == TttMlpForwardVersion::V1Simt ? 0 : 1;
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
        EXPECT_TRUE(within("O", e, kTolFp32, o, ref));
        worst[vi] = std::max(worst[vi], e.rel);
        ++runs;
        }
      }
  std::printf("[   INFO   ] mlp forward: %d runs, worst |O - ref| / max|ref| = %.3g (v1), %.3g (v2)\n",
              runs, worst[0], worst[1]);
}

TEST(TttMlpArguments, BadInputIsRejectedWithAMessage) {
  TttMlpForwardArgs a;
  a.dims = {1, 1, 8, 64, 16};
  float dummy = 0;
  a.Q = a.K = a.V = a.lambda = a.tau = a.ln_weight = a.ln_bias = a.b1 = a.b2 = a.O = &dummy;
  a.W2 = &dummy;
  try {
    ttt_mlp_forward(a);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("W1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tttlab::kernels::test
