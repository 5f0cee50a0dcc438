// Mamba-2 on the GPU (tttlab/kernels/mamba2.hpp) against the CPU layer (docs/MATH.md §8.8).
//
// 1. The chunked scan, forward and backward, against mamba2_scan_chunked / _backward
//    (tttlab/seq/mamba2_layer.hpp) in fp64 on the same fp32-valued inputs: random X, B, C ~ N(0, 1),
//    dt_raw ~ U(−4, 1) (dt = softplus(dt_raw + dt_bias) from 0.02 to 1.4, so a chunk decays by up to
//    e^−90 and the masks' small entries are exercised), A_log = log U[1, 16], D ~ N(0, 1), with X, B, C
//    inside one wider [R, H·P + 2N] buffer and dt_raw in a wider one, as the layer lays them out. Shapes:
//    T a multiple of the chunk and not, T = 1, T shorter than one chunk, 1 to 4 heads, P and N of 16
//    and 64, chunks of 8 to 64. Every output, every kept state and every gradient (dX, the heads' summed
//    dB and dC, dt_raw's, and the added dt_bias, A_log and D gradients) within ERROR = max|gpu − cpu| /
//    max|cpu| ≤ 2e-5 forward and 1e-4 backward (fp32 storage and accumulation against fp64; the
//    backward's sums run over a chunk and all of its terms; any wrong term is O(1)). The results are
//    also the same bit for bit in a second run (no atomics).
//    1b. The tensor-core path (the args' tensor_cores, the bf16 training step's) the same way on
//    bf16-rounded inputs, with bf16 bounds (see its test).
//    1c. The layer's fused passes around the scan (the gate with the RMSNorm, the conv with its
//    silu, forward and backward, fp32 and bf16 outputs) against their formulas in fp64 (see 1c).
// 2. The whole layer (mamba2_layer_forward / _backward with fp32 cuBLAS products) on the reference
//    fixtures tests/reference/mamba2-{a,b,c} (made from state-spaces/mamba's Mamba2 in float64; the CPU's
//    tests/core/test_mamba2_reference.cpp): y and the gradients of sum(y ⊙ G) with respect to x and every
//    parameter, summed over the batch. ERROR as above ≤ 1e-4, the project's fp32 bound for the GPU
//    against a float64 reference (the CPU's fp32 layer holds 1e-5 with its own summation order).
// Seeds are fixed and printed (test_seed(); TTTLAB_TEST_SEED overrides).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "../reference/reference_fixture.hpp"
#include "test_ttt_util.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/kernels/gemm.hpp"
#include "tttlab/kernels/mamba2.hpp"
#include "tttlab/seq/mamba2_layer.hpp"

namespace tttlab::kernels::test {
namespace {

struct ScanCase {
  int B, T, H, P, N, Q;
};

std::string describe(const ScanCase& c) {
  return "B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " H=" + std::to_string(c.H) +
         " P=" + std::to_string(c.P) + " N=" + std::to_string(c.N) + " Q=" + std::to_string(c.Q);
}

std::vector<ScanCase> scan_cases() {
  return {{2, 37, 3, 16, 16, 8},   {1, 1, 2, 16, 16, 16},  {2, 64, 2, 64, 64, 64},
          {1, 100, 2, 64, 16, 32}, {2, 70, 4, 16, 64, 64}, {3, 5, 1, 16, 16, 8},
          {1, 130, 2, 64, 64, 64}};
}

// The inputs of one case, fp32 values, in the layer's layout: xbc [R, H·P + 2N] (X | B | C), dt_raw in
// [R, H + 3] (a wider buffer, as in_proj's output is), dY [R, H·P].
struct ScanInputs {
  ScanCase c;
  int R, ldx, lddt;
  std::vector<float> xbc, dt_raw, dt_bias, A_log, D, dY;
};

ScanInputs make_inputs(const ScanCase& c, std::mt19937_64& rng) {
  ScanInputs in;
  in.c = c;
  in.R = c.B * c.T;
  in.ldx = c.H * c.P + 2 * c.N;
  in.lddt = c.H + 3;
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  in.xbc.resize(std::size_t(in.R) * in.ldx);
  for (float& v : in.xbc) v = float(nd(rng));
  in.dt_raw.resize(std::size_t(in.R) * in.lddt);
  for (float& v : in.dt_raw) v = float(-4.0 + 5.0 * u01(rng));
  for (int h = 0; h < c.H; ++h) {
    in.dt_bias.push_back(float(0.3 * nd(rng)));
    in.A_log.push_back(float(std::log(1.0 + 15.0 * u01(rng))));
    in.D.push_back(float(nd(rng)));
  }
  in.dY.resize(std::size_t(in.R) * c.H * c.P);
  for (float& v : in.dY) v = float(nd(rng));
  return in;
}

// The CPU's fp64 results of one case, in the GPU's layouts.
struct ScanRef {
  std::vector<double> Y, dt, states, dX, dB, dC, ddt_raw, ddt_bias, dA_log, dD;
};

ScanRef cpu_scan(const ScanInputs& in) {
  const ScanCase& c = in.c;
  const int nc = (c.T + c.Q - 1) / c.Q, HP = c.H * c.P;
  ScanRef r;
  r.Y.assign(std::size_t(in.R) * HP, 0.0);
  r.dt.assign(std::size_t(in.R) * c.H, 0.0);
  r.states.assign(std::size_t(c.B) * c.H * nc * c.P * c.N, 0.0);
  r.dX.assign(r.Y.size(), 0.0);
  r.dB.assign(std::size_t(in.R) * c.N, 0.0);
  r.dC = r.dB;
  r.ddt_raw.assign(std::size_t(in.R) * c.H, 0.0);
  r.ddt_bias.assign(c.H, 0.0);
  r.dA_log.assign(c.H, 0.0);
  r.dD.assign(c.H, 0.0);
  for (int n = 0; n < c.B; ++n) {
    Mat<double> X(c.T, HP), B(c.T, c.N), C(c.T, c.N), dY(c.T, HP);
    for (int t = 0; t < c.T; ++t) {
      const std::size_t row = std::size_t(n) * c.T + t;
      for (int j = 0; j < HP; ++j) {
        X(t, j) = in.xbc[row * in.ldx + j];
        dY(t, j) = in.dY[row * HP + j];
      }
      for (int q = 0; q < c.N; ++q) {
        B(t, q) = in.xbc[row * in.ldx + HP + q];
        C(t, q) = in.xbc[row * in.ldx + HP + c.N + q];
      }
    }
    Mat<double> dB = Mat<double>::Zero(c.T, c.N), dC = Mat<double>::Zero(c.T, c.N);
    for (int h = 0; h < c.H; ++h) {
      Vec<double> dt(c.T);
      for (int t = 0; t < c.T; ++t) {
        const std::size_t row = std::size_t(n) * c.T + t;
        dt(t) = mamba2_softplus(double(in.dt_raw[row * in.lddt + h]) + in.dt_bias[h]);
        r.dt[row * c.H + h] = dt(t);
      }
      const double A = -std::exp(double(in.A_log[h]));
      Mat<double> St = Mat<double>::Zero(c.P, c.N), Y(c.T, c.P);
      std::vector<Mat<double>> starts;
      const Mat<double> Xh = X.middleCols(h * c.P, c.P), dYh = dY.middleCols(h * c.P, c.P);
      mamba2_scan_chunked<double>(Xh, B, C, dt, A, c.Q, St, Y, &starts);
      Y += in.D[h] * Xh;
      Mat<double> dX = Mat<double>::Zero(c.T, c.P);
      Vec<double> ddt = Vec<double>::Zero(c.T);
      double dA = 0;
      mamba2_scan_chunked_backward<double>(Xh, B, C, dt, A, c.Q, starts, dYh, dX, dB, dC, ddt, dA);
      dX += in.D[h] * dYh;
      r.dA_log[h] += dA * A;
      r.dD[h] += dYh.cwiseProduct(Xh).sum();
      for (int t = 0; t < c.T; ++t) {
        const std::size_t row = std::size_t(n) * c.T + t;
        for (int p = 0; p < c.P; ++p) {
          r.Y[row * HP + h * c.P + p] = Y(t, p);
          r.dX[row * HP + h * c.P + p] = dX(t, p);
        }
        const double g =
            ddt(t) * mamba2_softplus_grad(double(in.dt_raw[row * in.lddt + h]) + in.dt_bias[h]);
        r.ddt_raw[row * c.H + h] = g;
        r.ddt_bias[h] += g;
      }
      for (int k = 0; k < nc; ++k)
        for (int i = 0; i < c.P * c.N; ++i)
          r.states[((std::size_t(n) * c.H + h) * nc + k) * c.P * c.N + i] = starts[k].data()[i];
    }
    for (int t = 0; t < c.T; ++t)
      for (int q = 0; q < c.N; ++q) {
        r.dB[(std::size_t(n) * c.T + t) * c.N + q] = dB(t, q);
        r.dC[(std::size_t(n) * c.T + t) * c.N + q] = dC(t, q);
      }
  }
  return r;
}

struct ScanGpu {
  std::vector<float> Y, dt, states, dX, dB, dC, ddt_raw, ddt_bias, dA_log, dD;
};

// The GPU's results; the per-head gradient accumulators start at `start` (they are added to).
// tensor_cores: the bf16 tensor-core path; heads_per_block: its output and backward kernels' (0:
// the shape's choice).
ScanGpu gpu_scan(const ScanInputs& in, float start, bool tensor_cores = false,
                 int heads_per_block = 0) {
  const ScanCase& c = in.c;
  const Mamba2ScanDims d{c.B, c.T, c.H, c.P, c.N, c.Q};
  const int HP = c.H * c.P;
  DeviceBuffer xbc(in.xbc), dt_raw(in.dt_raw), bias(in.dt_bias), alog(in.A_log), D(in.D), dY(in.dY);
  DeviceBuffer dt(std::size_t(in.R) * c.H), Y(std::size_t(in.R) * HP),
      states(mamba2_state_floats(d)), decay(mamba2_decay_floats(d));
  for (DeviceBuffer* b : {&dt, &Y, &states, &decay}) b->poison();
  Mamba2ScanForwardArgs f;
  f.dims = d;
  f.X = xbc.get();
  f.ld_x = in.ldx;
  f.B = xbc.get() + HP;
  f.C = xbc.get() + HP + c.N;
  f.ld_bc = in.ldx;
  f.dt_raw = dt_raw.get();
  f.ld_dt = in.lddt;
  f.dt_bias = bias.get();
  f.A_log = alog.get();
  f.D = D.get();
  f.dt = dt.get();
  f.Y = Y.get();
  f.ld_y = HP;
  f.states = states.get();
  f.decay = decay.get();
  f.tensor_cores = tensor_cores;
  f.heads_per_block = heads_per_block;
  mamba2_scan_forward(f);
  // dX, dB, dC into one [R, H·P + 2N] buffer, ddt_raw into a wider one, as the layer has them.
  DeviceBuffer dxbc(in.xbc.size()), dd(in.dt_raw.size()),
      ws((mamba2_scan_backward_workspace_bytes(d) + 3) / 4);
  dxbc.poison();
  dd.poison();
  ws.poison();
  DeviceBuffer dbias(std::vector<float>(c.H, start)), dalog(std::vector<float>(c.H, start)),
      dD(std::vector<float>(c.H, start));
  Mamba2ScanBackwardArgs b;
  b.dims = d;
  b.X = f.X;
  b.ld_x = f.ld_x;
  b.B = f.B;
  b.C = f.C;
  b.ld_bc = f.ld_bc;
  b.dt_raw = f.dt_raw;
  b.ld_dt = f.ld_dt;
  b.dt_bias = f.dt_bias;
  b.A_log = f.A_log;
  b.D = f.D;
  b.dt = dt.get();
  b.states = states.get();
  b.decay = decay.get();
  b.dY = dY.get();
  b.ld_y = HP;
  b.dX = dxbc.get();
  b.ld_dx = in.ldx;
  b.dB = dxbc.get() + HP;
  b.dC = dxbc.get() + HP + c.N;
  b.ld_dbc = in.ldx;
  b.ddt_raw = dd.get();
  b.ld_ddt = in.lddt;
  b.ddt_bias = dbias.get();
  b.dA_log = dalog.get();
  b.dD = dD.get();
  b.workspace = ws.get();
  b.workspace_bytes = ws.size() * sizeof(float);
  b.tensor_cores = tensor_cores;
  b.heads_per_block = heads_per_block;
  mamba2_scan_backward(b);
  ScanGpu g;
  g.Y = Y.download();
  g.dt = dt.download();
  g.states = states.download();
  const std::vector<float> dx = dxbc.download(), ddt = dd.download();
  for (int r = 0; r < in.R; ++r) {
    for (int j = 0; j < HP; ++j) g.dX.push_back(dx[std::size_t(r) * in.ldx + j]);
    for (int q = 0; q < c.N; ++q) {
      g.dB.push_back(dx[std::size_t(r) * in.ldx + HP + q]);
      g.dC.push_back(dx[std::size_t(r) * in.ldx + HP + c.N + q]);
    }
    for (int h = 0; h < c.H; ++h) g.ddt_raw.push_back(ddt[std::size_t(r) * in.lddt + h]);
  }
  g.ddt_bias = dbias.download();
  g.dA_log = dalog.download();
  g.dD = dD.download();
  for (auto* v : {&g.ddt_bias, &g.dA_log, &g.dD})
    for (float& x : *v) x -= start;
  return g;
}

TEST(Mamba2Cuda, ScanForwardAndBackwardMatchTheCpuInFp64) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf("[ INFO     ] seed %llu; error = max|gpu - cpu| / max|cpu|\n",
              (unsigned long long)seed);
  for (const ScanCase& c : scan_cases()) {
    SCOPED_TRACE(describe(c));
    const ScanInputs in = make_inputs(c, rng);
    const ScanRef ref = cpu_scan(in);
    const ScanGpu got = gpu_scan(in, 0.5f);
    double wf = 0, wb = 0;
    expect_within("Y", got.Y, ref.Y, 2e-5, wf);
    expect_within("dt", got.dt, ref.dt, 2e-5, wf);
    expect_within("states", got.states, ref.states, 2e-5, wf);
    expect_within("dX", got.dX, ref.dX, 1e-4, wb);
    expect_within("dB", got.dB, ref.dB, 1e-4, wb);
    expect_within("dC", got.dC, ref.dC, 1e-4, wb);
    expect_within("ddt_raw", got.ddt_raw, ref.ddt_raw, 1e-4, wb);
    // The three per-head gradients against their joint scale (1e-3 of it at least, as the whole
    // step's test floors small tensors): dA_log is exactly 0 at T = 1 (no state before or after the
    // only token), where the GPU's sums leave rounding of the size of the products they add.
    double scale = 0;
    for (const auto* v : {&ref.ddt_bias, &ref.dA_log, &ref.dD})
      for (double x : *v) scale = std::max(scale, std::abs(x));
    for (const auto& [what, g, r] :
         {std::tuple{"ddt_bias", &got.ddt_bias, &ref.ddt_bias},
          std::tuple{"dA_log", &got.dA_log, &ref.dA_log}, std::tuple{"dD", &got.dD, &ref.dD}}) {
      const ErrorStat e = compare(*g, *r, 1e-3 * scale);
      EXPECT_TRUE(within(what, e, 1e-4, *g, *r));
      wb = std::max(wb, e.rel);
    }
    const ScanGpu again = gpu_scan(in, 0.5f);
    EXPECT_EQ(again.Y, got.Y) << "two runs differ";
    EXPECT_EQ(again.dB, got.dB) << "two runs differ";
    EXPECT_EQ(again.dA_log, got.dA_log) << "two runs differ";
    std::printf("[ INFO     ] %-34s forward %.2e, backward %.2e\n", describe(c).c_str(), wf, wb);
  }
}

// ---- 1b. the tensor-core scan (the bf16 training step's) ---------------------------------------
// The same comparison on the inputs the kernels round to bf16 (X, B, C, dY, in the same buffers)
// rounded on the host first, so only the kernels' own roundings are measured: the scaled rows dt·w·X
// and e·dY, the states S_p and dS, and the masked score matrices G and dGM where they enter their
// second products, each relative 2⁻⁹, in sums of fp32 over ≤ 128 terms. Bounds relative to max|ref|:
// forward (Y, the states) 1e-2, every gradient 2e-2 (the bf16 bounds of the attention kernels'
// tests, which round as many operands; a wrong or missing term, a bad mask or a misplaced tile is
// O(1)); dt sees no product: the fp32 bound. Shapes: chunks of 64 (the path's only chunk), head dims
// and state sizes 32, 64 and 128, T a multiple of 64 and not, T = 1, T shorter than a chunk.
std::vector<ScanCase> tensor_core_cases() {
  return {{2, 130, 2, 64, 64, 64},  {1, 100, 3, 32, 128, 64}, {2, 64, 2, 128, 32, 64},
          {1, 37, 2, 128, 128, 64}, {3, 1, 1, 32, 32, 64},    {1, 200, 1, 64, 32, 64},
          {2, 256, 2, 64, 128, 64}};
}

std::vector<float> bf16_values(const std::vector<float>& x) {
  std::vector<std::uint16_t> bits;
  return rounded_to_bf16(x, bits);
}

TEST(Mamba2Cuda, TensorCoreScanMatchesTheCpuInFp64) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf("[ INFO     ] seed %llu; error = max|gpu - cpu| / max|cpu|\n",
              (unsigned long long)seed);
  for (const ScanCase& c : tensor_core_cases()) {
    SCOPED_TRACE(describe(c));
    ASSERT_EQ(mamba2_scan_tensor_cores_unsupported({c.B, c.T, c.H, c.P, c.N, c.Q}), "");
    ScanInputs in = make_inputs(c, rng);
    in.xbc = bf16_values(in.xbc);
    in.dY = bf16_values(in.dY);
    const ScanRef ref = cpu_scan(in);
    const ScanGpu got = gpu_scan(in, 0.5f, true);
    double wf = 0, wb = 0;
    expect_within("Y", got.Y, ref.Y, 1e-2, wf);
    expect_within("dt", got.dt, ref.dt, 2e-5, wf);
    expect_within("states", got.states, ref.states, 1e-2, wf);
    expect_within("dX", got.dX, ref.dX, 2e-2, wb);
    expect_within("dB", got.dB, ref.dB, 2e-2, wb);
    expect_within("dC", got.dC, ref.dC, 2e-2, wb);
    expect_within("ddt_raw", got.ddt_raw, ref.ddt_raw, 2e-2, wb);
    double scale = 0;  // the per-head gradients against their joint scale, as above
    for (const auto* v : {&ref.ddt_bias, &ref.dA_log, &ref.dD})
      for (double x : *v) scale = std::max(scale, std::abs(x));
    for (const auto& [what, g, r] :
         {std::tuple{"ddt_bias", &got.ddt_bias, &ref.ddt_bias},
          std::tuple{"dA_log", &got.dA_log, &ref.dA_log}, std::tuple{"dD", &got.dD, &ref.dD}}) {
      const ErrorStat e = compare(*g, *r, 1e-3 * scale);
      EXPECT_TRUE(within(what, e, 2e-2, *g, *r));
      wb = std::max(wb, e.rel);
    }
    const ScanGpu again = gpu_scan(in, 0.5f, true);
    EXPECT_EQ(again.Y, got.Y) << "two runs differ";
    EXPECT_EQ(again.states, got.states) << "two runs differ";
    EXPECT_EQ(again.dX, got.dX) << "two runs differ";
    EXPECT_EQ(again.dB, got.dB) << "two runs differ";
    EXPECT_EQ(again.dC, got.dC) << "two runs differ";
    EXPECT_EQ(again.ddt_raw, got.ddt_raw) << "two runs differ";
    EXPECT_EQ(again.dA_log, got.dA_log) << "two runs differ";
    // Not the fp32 path by mistake: its results differ from the tensor cores' in the low bits.
    if (c.T > 1 && mamba2_scan_unsupported({c.B, c.T, c.H, c.P, c.N, c.Q}).empty()) {
      EXPECT_NE(gpu_scan(in, 0.5f, false).Y, got.Y) << "the fp32 kernels ran";
    }
    std::printf("[ INFO     ] %-34s forward %.2e, backward %.2e\n", describe(c).c_str(), wf, wb);
  }
}

// The output and backward kernels' blocks over several heads (heads_per_block of both args): one
// head, some, and every head (the backward's dB and dC then written straight to the caller's
// columns, the training shape's case), each against the CPU in fp64 with the bounds above; only dB
// and dC are summed in another order (by head group), so every other output is bitwise the one-head
// blocks'. H = 3 and 5 make a last group short of the others (2 + 1, 2 + 2 + 1); H + 3 is capped.
TEST(Mamba2Cuda, TensorCoreScanOverHeadGroupsMatchesTheCpuInFp64) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf("[ INFO     ] seed %llu; error = max|gpu - cpu| / max|cpu|\n",
              (unsigned long long)seed);
  for (const ScanCase& c : {ScanCase{2, 130, 3, 64, 64, 64}, ScanCase{1, 100, 5, 32, 128, 64},
                            ScanCase{3, 64, 4, 128, 32, 64}, ScanCase{1, 1, 2, 32, 32, 64}}) {
    ScanInputs in = make_inputs(c, rng);
    in.xbc = bf16_values(in.xbc);
    in.dY = bf16_values(in.dY);
    const ScanRef ref = cpu_scan(in);
    const ScanGpu one = gpu_scan(in, 0.5f, true, 1);
    for (const int g : {1, 2, c.H, c.H + 3}) {
      SCOPED_TRACE(describe(c) + " heads per block " + std::to_string(g));
      const ScanGpu got = gpu_scan(in, 0.5f, true, g);
      double wf = 0, wb = 0;
      expect_within("Y", got.Y, ref.Y, 1e-2, wf);
      EXPECT_EQ(got.Y, one.Y) << "Y depends on the head groups";
      EXPECT_EQ(got.states, one.states) << "the states depend on the head groups";
      expect_within("dB", got.dB, ref.dB, 2e-2, wb);
      expect_within("dC", got.dC, ref.dC, 2e-2, wb);
      expect_within("dX", got.dX, ref.dX, 2e-2, wb);
      EXPECT_EQ(got.dX, one.dX) << "dX depends on the head groups";
      EXPECT_EQ(got.ddt_raw, one.ddt_raw) << "ddt_raw depends on the head groups";
      EXPECT_EQ(got.dA_log, one.dA_log) << "dA_log depends on the head groups";
      EXPECT_EQ(got.dD, one.dD) << "dD depends on the head groups";
      EXPECT_EQ(got.ddt_bias, one.ddt_bias) << "ddt_bias depends on the head groups";
      const ScanGpu again = gpu_scan(in, 0.5f, true, g);
      EXPECT_EQ(again.dB, got.dB) << "two runs differ";
      EXPECT_EQ(again.dC, got.dC) << "two runs differ";
      std::printf("[ INFO     ] %-34s heads per block %d: Y %.2e; dB, dC, dX %.2e\n",
                  describe(c).c_str(), g, wf, wb);
    }
  }
  ScanInputs in = make_inputs({1, 64, 2, 32, 32, 64}, rng);
  ScanGpu unused;
  try {
    unused = gpu_scan(in, 0.5f, true, -1);
    ADD_FAILURE() << "a negative heads_per_block was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("heads_per_block"), std::string::npos) << e.what();
  }
}

// The tensor-core backward reads X and dY and writes dX in 8-byte pairs where every row stride is
// even (the layer's shapes) and one float at a time elsewhere: the same values, so an odd stride of
// xbc and dxbc (one padding column) must give the same bits as the even one.
TEST(Mamba2Cuda, TensorCoreScanGivesTheSameBitsAtAnOddRowStride) {
  TTTLAB_SEEDED_GPU_TEST();
  for (const ScanCase& c : {ScanCase{2, 130, 3, 64, 64, 64}, ScanCase{1, 100, 2, 32, 128, 64}}) {
    SCOPED_TRACE(describe(c));
    ScanInputs even = make_inputs(c, rng);
    even.xbc = bf16_values(even.xbc);
    even.dY = bf16_values(even.dY);
    ScanInputs odd = even;
    odd.ldx = even.ldx + 1;
    odd.xbc.assign(std::size_t(even.R) * odd.ldx, 7.f);
    for (int r = 0; r < even.R; ++r)
      for (int j = 0; j < even.ldx; ++j)
        odd.xbc[std::size_t(r) * odd.ldx + j] = even.xbc[std::size_t(r) * even.ldx + j];
    ASSERT_EQ(odd.ldx % 2, 1);
    const ScanGpu a = gpu_scan(even, 0.5f, true), b = gpu_scan(odd, 0.5f, true);
    EXPECT_EQ(b.Y, a.Y);
    EXPECT_EQ(b.states, a.states);
    EXPECT_EQ(b.dX, a.dX);
    EXPECT_EQ(b.dB, a.dB);
    EXPECT_EQ(b.dC, a.dC);
    EXPECT_EQ(b.ddt_raw, a.ddt_raw);
    EXPECT_EQ(b.ddt_bias, a.ddt_bias);
    EXPECT_EQ(b.dA_log, a.dA_log);
    EXPECT_EQ(b.dD, a.dD);
  }
}

TEST(Mamba2Cuda, UnsupportedShapesAreRefusedBeforeAnyLaunch) {
  EXPECT_EQ(mamba2_scan_unsupported({2, 64, 2, 64, 64, 64}), "");
  EXPECT_NE(mamba2_scan_unsupported({2, 64, 2, 64, 64, 65}).find("chunk"), std::string::npos);
  EXPECT_NE(mamba2_scan_unsupported({2, 64, 2, 129, 64, 64}).find("head dim"), std::string::npos);
  EXPECT_NE(mamba2_scan_unsupported({2, 64, 2, 128, 128, 64}).find("shared memory"),
            std::string::npos);
  EXPECT_EQ(mamba2_scan_tensor_cores_unsupported({2, 64, 2, 128, 128, 64}), "");
  EXPECT_NE(mamba2_scan_tensor_cores_unsupported({2, 64, 2, 64, 64, 32}).find("chunks of 64"),
            std::string::npos);
  EXPECT_NE(mamba2_scan_tensor_cores_unsupported({2, 64, 2, 48, 64, 64}).find("head dim"),
            std::string::npos);
  {
    Mamba2ScanForwardArgs tf;  // a shape the tensor cores do not take: refused, not run in fp32
    tf.dims = {1, 64, 1, 64, 64, 16};
    tf.tensor_cores = true;
    try {
      mamba2_scan_forward(tf);
      ADD_FAILURE() << "a shape the tensor cores do not take was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("chunks of 64"), std::string::npos) << e.what();
    }
  }
  Mamba2LayerDims ld;
  ld.d_conv = 17;
  EXPECT_NE(mamba2_layer_unsupported(ld).find("d_conv"), std::string::npos);
  Mamba2ScanForwardArgs f;  // null pointers: refused before anything is launched
  EXPECT_THROW(mamba2_scan_forward(f), std::invalid_argument);
  Mamba2ScanBackwardArgs b;
  EXPECT_THROW(mamba2_scan_backward(b), std::invalid_argument);
}

// ---- 1c. the layer's fused passes ---------------------------------------------------------------
// mamba2_gate_norm_forward / _backward and mamba2_conv_silu_forward / _backward (the passes the
// layer runs around the scan where mamba2_layer_fused holds) against the formulas in fp64 on the same
// fp32 inputs, laid out as the layer does: z and u (= xBC) are column ranges of a wider zx [R, W], and
// the backward writes dz and du into those columns of a [R, W] gradient whose other columns it must
// leave alone. Errors relative to max|ref|: ≤ 1e-5 for the row-local values, ≤ 1e-4 for the weight
// gradients (sums over every row), against 1e-2 for a wrong or missing term. The bf16 outputs (the
// bf16 step's operands) must be bitwise the round-to-nearest-even of the fp32 outputs of the same
// call without them: the same operations, only the store rounded. Shapes: C of 96 (not whole warps of
// float4 columns), 32, 1536 (the 125m preset's d_inner) and 2048 (the widest the gate + RMSNorm
// kernels take: their other instance, of 512 threads), T shorter than the conv's 4 taps, and not.
struct FusedCase {
  int B, T, di, cd, W;
};

double silu64(double x) { return x / (1.0 + std::exp(-x)); }
double silu_grad64(double x) {
  const double s = 1.0 / (1.0 + std::exp(-x));
  return s * (1.0 + x * (1.0 - s));
}

TEST(Mamba2Cuda, FusedPassesMatchTheCpuInFp64) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf("[ INFO     ] seed %llu; error = max|gpu - cpu| / max|cpu|\n",
              (unsigned long long)seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  const float eps = 1e-5f;
  constexpr int K = 4;
  for (const FusedCase& c :
       {FusedCase{2, 37, 96, 128, 244}, FusedCase{3, 3, 32, 48, 84},
        FusedCase{1, 70, 1536, 1664, 3224}, FusedCase{2, 45, 2048, 2176, 4256}}) {
    const int R = c.B * c.T, di = c.di, cd = c.cd, W = c.W;
    SCOPED_TRACE("B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " C=" +
                 std::to_string(di) + " conv C=" + std::to_string(cd) + " W=" + std::to_string(W));
    auto randn = [&](std::size_t n, double scale) {
      std::vector<float> v(n);
      for (float& x : v) x = float(scale * nd(rng));
      return v;
    };
    const std::vector<float> zx = randn(std::size_t(R) * W, 1.5),
                             y = randn(std::size_t(R) * di, 1.0), w = randn(di, 1.0),
                             dn = randn(std::size_t(R) * di, 1.0),
                             cw = randn(std::size_t(cd) * K, 0.5), cb = randn(cd, 0.5),
                             dxbc = randn(std::size_t(R) * cd, 1.0),
                             start = randn(cd * (K + 1), 1.0);
    auto zv = [&](int r, int col) { return double(zx[std::size_t(r) * W + col]); };
    // fp64 references
    std::vector<double> normed(std::size_t(R) * di), dy(normed.size()), dz(normed.size()),
        dw(di, 0.0);
    for (int r = 0; r < R; ++r) {
      std::vector<double> g(di);
      double ss = 0, gx = 0;
      for (int j = 0; j < di; ++j) {
        g[j] = double(y[std::size_t(r) * di + j]) * silu64(zv(r, j));
        ss += g[j] * g[j];
      }
      const double rr = 1.0 / std::sqrt(ss / di + double(eps));
      for (int j = 0; j < di; ++j) gx += double(dn[std::size_t(r) * di + j]) * w[j] * g[j] * rr;
      for (int j = 0; j < di; ++j) {
        const std::size_t i = std::size_t(r) * di + j;
        const double xn = g[j] * rr, d = dn[i];
        normed[i] = xn * w[j];
        const double dg = rr * (d * w[j] - xn * gx / di);
        dy[i] = dg * silu64(zv(r, j));
        dz[i] = dg * y[i] * silu_grad64(zv(r, j));
        dw[j] += d * xn;
      }
    }
    std::vector<double> xbc(std::size_t(R) * cd), dpre(xbc.size()), du(xbc.size(), 0.0),
        dcw(std::size_t(cd) * K), dcb(cd);
    for (int ch = 0; ch < cd; ++ch) {
      for (int j = 0; j < K; ++j) dcw[std::size_t(ch) * K + j] = start[std::size_t(ch) * K + j];
      dcb[ch] = start[std::size_t(cd) * K + ch];
    }
    auto uv = [&](int r, int ch) { return zv(r, di + ch); };
    for (int r = 0; r < R; ++r) {
      const int t = r % c.T;
      for (int ch = 0; ch < cd; ++ch) {
        double pre = cb[ch];
        for (int j = 0; j < K; ++j)
          if (t - (K - 1) + j >= 0)
            pre += double(cw[std::size_t(ch) * K + j]) * uv(r - (K - 1) + j, ch);
        const std::size_t i = std::size_t(r) * cd + ch;
        xbc[i] = silu64(pre);
        dpre[i] = dxbc[i] * silu_grad64(pre);
      }
    }
    for (int r = 0; r < R; ++r) {
      const int t = r % c.T;
      for (int ch = 0; ch < cd; ++ch) {
        const double g = dpre[std::size_t(r) * cd + ch];
        dcb[ch] += g;
        for (int j = 0; j < K; ++j)
          if (t - (K - 1) + j >= 0) {
            dcw[std::size_t(ch) * K + j] += g * uv(r - (K - 1) + j, ch);
            du[std::size_t(r - (K - 1) + j) * cd + ch] += double(cw[std::size_t(ch) * K + j]) * g;
          }
      }
    }
    // the GPU, fp32 outputs, then bf16 ones
    DeviceBuffer d_zx(zx), d_y(y), d_w(w), d_dn(dn), d_cw(cw), d_cb(cb), d_out(std::size_t(R) * di),
        d_dy(std::size_t(R) * di), d_dzx(std::size_t(R) * W), d_dw(std::vector<float>(di, 0.f)),
        d_nws(mamba2_gate_norm_backward_workspace(R, di)), d_xbc(std::size_t(R) * cd), d_dxbc(dxbc),
        d_dcw(std::vector<float>(start.begin(), start.begin() + std::size_t(cd) * K)),
        d_dcb(std::vector<float>(start.begin() + std::size_t(cd) * K, start.end())),
        d_cws(mamba2_conv_silu_backward_workspace(c.B, c.T, cd, K));
    DeviceBuffer16 d_out16(std::size_t(R) * di), d_dzx16(std::size_t(R) * W);
    d_out.poison();
    d_dy.poison();
    d_dzx.poison();
    d_xbc.poison();
    d_dzx16.poison();
    mamba2_gate_norm_forward(d_y.get(), d_zx.get(), W, d_w.get(), R, di, eps, d_out.get(), nullptr,
                             nullptr);
    mamba2_gate_norm_forward(d_y.get(), d_zx.get(), W, d_w.get(), R, di, eps, nullptr,
                             d_out16.get(), nullptr);
    mamba2_gate_norm_backward(d_y.get(), d_zx.get(), W, d_w.get(), d_dn.get(), R, di, eps,
                              d_dy.get(), d_dzx.get(), nullptr, W, d_dw.get(), d_nws.get(),
                              nullptr);
    mamba2_conv_silu_forward(d_zx.get() + di, W, d_cw.get(), d_cb.get(), c.B, c.T, cd, K,
                             d_xbc.get(), nullptr);
    mamba2_conv_silu_backward(d_zx.get() + di, W, d_cw.get(), d_cb.get(), c.B, c.T, cd, K,
                              d_dxbc.get(), d_dzx.get() + di, nullptr, W, d_dcw.get(), d_dcb.get(),
                              d_cws.get(), nullptr);
    const std::vector<float> dzx = d_dzx.download();
    // The bf16 forms into the same [R, W] layout (the gradient's buffers are scratch here).
    DeviceBuffer d_dxbc2(dxbc), d_dy2(std::size_t(R) * di), d_dw2(std::vector<float>(di, 0.f)),
        d_dcw2(std::size_t(cd) * K), d_dcb2(cd);
    mamba2_gate_norm_backward(d_y.get(), d_zx.get(), W, d_w.get(), d_dn.get(), R, di, eps,
                              d_dy2.get(), nullptr, d_dzx16.get(), W, d_dw2.get(), d_nws.get(),
                              nullptr);
    mamba2_conv_silu_backward(d_zx.get() + di, W, d_cw.get(), d_cb.get(), c.B, c.T, cd, K,
                              d_dxbc2.get(), nullptr, d_dzx16.get() + di, W, d_dcw2.get(),
                              d_dcb2.get(), d_cws.get(), nullptr);
    auto cols = [&](const std::vector<float>& m, int first, int n) {
      std::vector<float> o(std::size_t(R) * n);
      for (int r = 0; r < R; ++r)
        for (int j = 0; j < n; ++j) o[std::size_t(r) * n + j] = m[std::size_t(r) * W + first + j];
      return o;
    };
    double wf = 0, wb = 0;
    const std::vector<float> out = d_out.download();
    expect_within("normed", out, normed, 1e-5, wf);
    expect_within("xbc", d_xbc.download(), xbc, 1e-5, wf);
    expect_within("dy", d_dy.download(), dy, 1e-5, wb);
    expect_within("dz", cols(dzx, 0, di), dz, 1e-5, wb);
    expect_within("du", cols(dzx, di, cd), du, 1e-5, wb);
    expect_within("dnorm_w", d_dw.download(), dw, 1e-4, wb);
    expect_within("dconv_w (added)", d_dcw.download(), dcw, 1e-4, wb);
    expect_within("dconv_b (added)", d_dcb.download(), dcb, 1e-4, wb);
    EXPECT_EQ(d_dxbc.download(), dxbc) << "the conv + silu backward wrote its input dxbc";
    // The columns the passes do not own keep their poison (0xFFFFFFFF, a NaN).
    const std::vector<float> rest = cols(dzx, di + cd, W - di - cd);
    EXPECT_TRUE(std::all_of(rest.begin(), rest.end(), [](float v) { return std::isnan(v); }))
        << "a pass wrote past its columns";
    // bf16 outputs: bitwise the rounding of the fp32 ones.
    std::vector<std::uint16_t> want;
    rounded_to_bf16(out, want);
    EXPECT_EQ(d_out16.download(), want) << "normed16 is not bf16(normed)";
    const std::vector<std::uint16_t> dzx16 = d_dzx16.download();
    std::size_t mismatches = 0;
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < di + cd; ++j) {
        const std::size_t i = std::size_t(r) * W + j;
        if (dzx16[i] != bf16_bits_reference(dzx[i])) ++mismatches;
      }
    EXPECT_EQ(mismatches, 0u) << "dz16, du16 are not bf16(dz), bf16(du)";
    EXPECT_EQ(d_dy2.download(), d_dy.download()) << "dy differs with the bf16 dz";
    std::printf("[ INFO     ] B=%d T=%d C=%d conv C=%d: forward %.2e, backward %.2e\n", c.B, c.T,
                di, cd, wf, wb);
  }
}

TEST(Mamba2Cuda, FusedPassesRefuseBadShapesBeforeAnyLaunch) {
  TTTLAB_REQUIRE_GPU();
  float* p = reinterpret_cast<float*>(std::uintptr_t(256));  // never dereferenced: refused first
  EXPECT_THROW(mamba2_gate_norm_forward(p, p, 8, p, 4, 6, 1e-5f, p, nullptr, nullptr),
               std::invalid_argument);  // C not a multiple of 4
  EXPECT_THROW(mamba2_gate_norm_forward(p, p, 10, p, 4, 8, 1e-5f, p, nullptr, nullptr),
               std::invalid_argument);  // ld_z not a multiple of 4
  EXPECT_THROW(mamba2_gate_norm_forward(p, p, 8, p, 4, 8, 1e-5f, p,
                                        reinterpret_cast<std::uint16_t*>(p), nullptr),
               std::invalid_argument);  // both outputs
  EXPECT_THROW(mamba2_gate_norm_forward(p, p, 4096, p, 4, 4096, 1e-5f, p, nullptr, nullptr),
               std::invalid_argument);  // wider than 2048
  EXPECT_THROW(mamba2_conv_silu_forward(p, 8, p, p, 1, 4, 8, 3, p, nullptr),
               std::invalid_argument);  // d_conv 3
  EXPECT_THROW(mamba2_conv_silu_forward(p, 6, p, p, 1, 4, 4, 4, p, nullptr),
               std::invalid_argument);  // ld_u not a multiple of 4
  Mamba2LayerDims d;
  d.width = 64;
  d.headdim = 32;  // d_inner 128, conv_dim 256, in_width 388
  EXPECT_TRUE(mamba2_layer_fused(d));
  d.d_conv = 3;
  EXPECT_FALSE(mamba2_layer_fused(d));
}

// ---- 2. the reference fixtures -----------------------------------------------------------------

constexpr double kTolFixture = 1e-4;

// The reference stores the projections as nn.Linear weights [out, in]; the layer's layout is [in, out].
bool is_linear(const std::string& n) { return n == "in_proj.weight" || n == "out_proj.weight"; }

class Mamba2CudaReference : public ::testing::TestWithParam<std::string> {};

TEST_P(Mamba2CudaReference, LayerMatchesTheReferenceFixture) {
  TTTLAB_REQUIRE_GPU();
  namespace ref = ::tttlab::reference;
  const std::filesystem::path dir = ref::fixture_root() / GetParam();
  std::ifstream cfg_in(dir / "config.json");
  ASSERT_TRUE(cfg_in) << "missing fixture " << dir << " (set TTTLAB_REFERENCE_DIR)";
  std::stringstream text;
  text << cfg_in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str());
  Mamba2Config cfg;
  cfg.width = j.at("width").get<int>();
  cfg.d_state = j.at("d_state").get<int>();
  cfg.d_conv = j.at("d_conv").get<int>();
  cfg.expand = j.at("expand").get<int>();
  cfg.headdim = j.at("headdim").get<int>();
  cfg.chunk_size = j.at("chunk_size").get<int>();
  cfg.norm_eps = j.at("norm_eps").get<double>();
  const int B = j.at("batch").get<int>(), T = j.at("seq_len").get<int>(), D = cfg.width;
  const SafetensorsFile params = SafetensorsFile::read(dir / "params.safetensors");
  const SafetensorsFile refs = SafetensorsFile::read(dir / "reference.safetensors");
  // The parameters in the layer's layouts, through the CPU layer's own visitor (names and shapes).
  Mamba2Layer<float> layer(cfg, Mamba2Params<float>::zeros(cfg));
  std::vector<std::string> names;
  std::vector<std::unique_ptr<DeviceBuffer>> p, g;
  std::vector<std::pair<long, long>> shapes;
  layer.for_each_param([&](Eigen::Map<Mat<float>> m, const std::string& name) {
    const std::vector<double> v = params.to_f64(name);
    ASSERT_EQ(v.size(), std::size_t(m.size())) << name;
    std::vector<float> host(v.size());
    for (long r = 0; r < m.rows(); ++r)
      for (long c = 0; c < m.cols(); ++c)
        host[std::size_t(r) * m.cols() + c] = float(
            is_linear(name) ? v[std::size_t(c) * m.rows() + r] : v[std::size_t(r) * m.cols() + c]);
    names.push_back(name);
    shapes.emplace_back(m.rows(), m.cols());
    p.push_back(std::make_unique<DeviceBuffer>(host));
    g.push_back(std::make_unique<DeviceBuffer>(std::vector<float>(host.size(), 0.f)));
  });
  ASSERT_EQ(names.size(), 8u);
  Mamba2LayerDims d;
  d.batch = B;
  d.seq_len = T;
  d.width = D;
  d.d_state = cfg.d_state;
  d.d_conv = cfg.d_conv;
  d.expand = cfg.expand;
  d.headdim = cfg.headdim;
  d.chunk = cfg.chunk_size;
  d.norm_eps = float(cfg.norm_eps);
  ASSERT_EQ(mamba2_layer_unsupported(d), "");
  const Mamba2LayerParams lp{p[0]->get(), p[1]->get(), p[2]->get(), p[3]->get(),
                             p[4]->get(), p[5]->get(), p[6]->get(), p[7]->get()};
  const Mamba2LayerGrads lg{g[0]->get(), g[1]->get(), g[2]->get(), g[3]->get(),
                            g[4]->get(), g[5]->get(), g[6]->get(), g[7]->get()};
  auto f32 = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  DeviceBuffer x(f32(refs.to_f64("x"))), G(f32(refs.to_f64("G"))), y(std::size_t(B) * T * D),
      dx(std::size_t(B) * T * D), cache(mamba2_layer_cache_floats(d)),
      ws(mamba2_layer_workspace_floats(d));
  y.poison();
  dx.poison();
  Gemm gemm(nullptr, GemmPrecision::Fp32);
  // fp32 products: the layer gives no bf16 operands (bf16_products is off).
  const Mamba2Product product =
      [&gemm](bool ta, bool tb, int M, int N, int K, const float* A, const std::uint16_t*, int lda,
              const float* Bm, const std::uint16_t*, int ldb, float* C, int ldc,
              bool acc) { gemm(ta, tb, M, N, K, 1.f, A, lda, Bm, ldb, acc ? 1.f : 0.f, C, ldc); };
  const Mamba2LayerCache kept = mamba2_layer_cache(d, cache.get());
  mamba2_layer_forward(product, d, lp, x.get(), kept, y.get(), nullptr);
  mamba2_layer_backward(product, d, lp, x.get(), kept, G.get(), lg, dx.get(), false, ws.get(),
                        nullptr);
  std::printf("[ INFO     ] %s: B=%d T=%d width=%d d_state=%d d_conv=%d heads=%d x %d, chunk %d\n",
              GetParam().c_str(), B, T, D, cfg.d_state, cfg.d_conv, cfg.heads(), cfg.headdim,
              cfg.chunk_size);
  double worst = 0;
  auto check = [&](const std::string& what, const std::vector<float>& got,
                   const std::vector<double>& want) {
    const ErrorStat e = compare(got, want, 1e-30);
    std::printf("[ INFO     ]   %-24s max|ref| %.3e  error %.2e\n", what.c_str(), e.max_ref, e.rel);
    EXPECT_TRUE(within(what.c_str(), e, kTolFixture, got, want));
    EXPECT_GT(e.max_ref, 0.0) << what << ": an all-zero reference checks nothing";
    worst = std::max(worst, e.rel);
  };
  check("y", y.download(), refs.to_f64("y"));
  check("grad.x", dx.download(), refs.to_f64("grad.x"));
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::vector<float> got = g[i]->download();
    const auto [rows, cols] = shapes[i];
    std::vector<float> file(got.size());  // the file's layout: projections transposed back
    for (long r = 0; r < rows; ++r)
      for (long c = 0; c < cols; ++c)
        (is_linear(names[i]) ? file[std::size_t(c) * rows + r] : file[std::size_t(r) * cols + c]) =
            got[std::size_t(r) * cols + c];
    check("grad." + names[i], file, refs.to_f64("grad." + names[i]));
  }
  std::printf("[ INFO     ]   largest %.2e (tol %.0e)\n", worst, kTolFixture);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, Mamba2CudaReference, ::testing::Values("mamba2-a", "mamba2-b", "mamba2-c"),
    ::tttlab::reference::fixture_test_name<::testing::TestParamInfo<std::string>>);

}  // namespace
}  // namespace tttlab::kernels::test
