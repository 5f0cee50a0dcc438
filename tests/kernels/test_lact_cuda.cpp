// LaCT's inner loop on the GPU (tttlab/kernels/lact.hpp) against the CPU (lact_forward and
// lact_backward, tttlab/fastweight/lact.hpp; docs/MATH.md §11.10), run in fp64 head by head on the
// same fp32-valued inputs.
//
// Inputs as the layer feeds them (core/src/seq/lact_layer.cpp): q, k L2-normalised per head;
// v ~ N(0, 1); the rates lr0, lr1, lr2 ~ U(0.01, 0.1) (positive, the layer's softplus outputs) and
// momentum ~ U(0.5, 0.95) in the cases that have it (the layer's sigmoid); initial weights per
// sequence and head w0, w2 ~ N(0, 1/d), w1 ~ N(0, 1/d_h) (the layer's initialisation); dO ~ N(0, 1);
// ∂L/∂(final weights) ~ N(0, 1) in the cases that give them (the others pass null). q, k, v and dO
// sit in rows wider than H·d, and every output is poisoned with NaN first, so an unwritten element
// fails.
// Shapes: d = 16, 20, 32, 64, 128 with d_h = d, 2d (d_h = 2d at d = 128 is the kernels' largest tile
// of shared memory), C = 1, 7, 16, 32, LaCT's 2048 and C > T; T a multiple of C once (an exact last
// chunk), else not (a partial last chunk, and T ≤ C: no update at all); with and without momentum,
// with and without dW_final; B and H ≥ 2 where the CPU's time allows.
// ERROR = max|gpu − cpu| / max|cpu| per tensor. Bounds: forward (o, the final weights) 5e-5,
// backward (every gradient) 2e-4. The GPU computes in fp32 (unit roundoff 6e-8) through dots of d or
// d_h terms and chunk sums of C ≤ 2048 terms, over at most 44 updates, each renormalising every row
// to its initial norm (so the weights stay of the same size and rounding does not grow with the
// updates); the backward's dots and sums are of the same lengths. The host emulation of these
// kernels (their arithmetic compiled for the CPU, one thread per GPU thread) measured on this file's
// shapes, with other draws of the same distributions, worst 6.8e-7 forward and 3.7e-6 backward (the
// latter at C = 2048: dW's sums over 2048 tokens); the same CPU functions instantiated in fp32 are
// printed beside the GPU for scale. The bounds leave 50× and more above that for the GPU's expf and
// fused multiply-adds. A wrong, missing or misplaced term (a chunk read after its update, a lost
// momentum carry, a stale renormalisation target, a token of the wrong chunk) is O(1): a dropped
// momentum carry measured 0.75 there.
// Seeds are fixed and printed (test_seed(); TTTLAB_TEST_SEED overrides).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "test_ttt_util.hpp"
#include "tttlab/fastweight/lact.hpp"
#include "tttlab/kernels/gemm.hpp"
#include "tttlab/kernels/lact.hpp"

namespace tttlab::kernels::test {
namespace {

constexpr double kTolForward = 5e-5;
constexpr double kTolBackward = 2e-4;

struct LactCase {
  int B, H, T, d, dh, C;
  bool momentum;
  bool given;  // ∂L/∂(final weights) given (else null)
};

std::string describe(const LactCase& c) {
  return "B=" + std::to_string(c.B) + " H=" + std::to_string(c.H) + " T=" + std::to_string(c.T) +
         " d=" + std::to_string(c.d) + " dh=" + std::to_string(c.dh) + " C=" + std::to_string(c.C) +
         (c.momentum ? " momentum" : " no momentum") + (c.given ? " dW_final" : "");
}

std::vector<LactCase> lact_cases() {
  if (quick_mode())
    return {{2, 2, 37, 16, 32, 8, true, true}, {1, 2, 45, 64, 128, 16, false, false}};
  return {{2, 2, 37, 16, 32, 8, true, true},     {2, 3, 50, 32, 32, 16, false, false},
          {2, 2, 45, 16, 16, 1, true, false},    {2, 2, 5, 16, 16, 64, true, true},
          {2, 2, 70, 64, 128, 32, true, true},   {2, 2, 40, 20, 40, 7, false, true},
          {1, 2, 75, 64, 64, 16, true, false},   {1, 1, 30, 128, 256, 16, true, true},
          {1, 2, 40, 128, 128, 7, false, true},  {2, 2, 64, 32, 64, 16, true, true},
          {1, 1, 2100, 64, 64, 2048, true, true}};
}

struct LactInputs {
  LactCase c;
  int R, ldq, ldk, ldv, lddo;
  std::vector<float> q, k, v, lr0, lr1, lr2, momentum, w0, w1, w2, dw0f, dw1f, dw2f, dO;
};

// Rows of `x` ([R, ld]) normalised per head (d columns at h·d), then rounded to fp32.
void l2_normalise_heads(std::vector<float>& x, int R, int ld, int H, int d) {
  for (int row = 0; row < R; ++row)
    for (int h = 0; h < H; ++h) {
      float* p = &x[std::size_t(row) * ld + std::size_t(h) * d];
      double n2 = 0;
      for (int i = 0; i < d; ++i) n2 += double(p[i]) * p[i];
      for (int i = 0; i < d; ++i) p[i] = float(p[i] / std::sqrt(n2));
    }
}

LactInputs make_inputs(const LactCase& c, std::mt19937_64& rng) {
  LactInputs in;
  in.c = c;
  in.R = c.B * c.T;
  const int HD = c.H * c.d;
  in.ldq = HD + 3;
  in.ldk = HD + 1;
  in.ldv = HD + 2;
  in.lddo = HD + 5;
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  in.q = randn_vec(std::size_t(in.R) * in.ldq, rng, 1.0);
  in.k = randn_vec(std::size_t(in.R) * in.ldk, rng, 1.0);
  l2_normalise_heads(in.q, in.R, in.ldq, c.H, c.d);
  l2_normalise_heads(in.k, in.R, in.ldk, c.H, c.d);
  in.v = randn_vec(std::size_t(in.R) * in.ldv, rng, 1.0);
  const std::size_t rates = std::size_t(in.R) * c.H;
  for (std::vector<float>* l : {&in.lr0, &in.lr1, &in.lr2}) {
    l->resize(rates);
    for (float& x : *l) x = float(0.01 + 0.09 * u01(rng));
  }
  if (c.momentum) {
    in.momentum.resize(rates);
    for (float& x : in.momentum) x = float(0.5 + 0.45 * u01(rng));
  }
  const std::size_t w = std::size_t(c.B) * c.H * c.dh * c.d;
  in.w0 = randn_vec(w, rng, 1.0 / std::sqrt(double(c.d)));
  in.w1 = randn_vec(w, rng, 1.0 / std::sqrt(double(c.dh)));
  in.w2 = randn_vec(w, rng, 1.0 / std::sqrt(double(c.d)));
  if (c.given) {
    in.dw0f = randn_vec(w, rng, 1.0);
    in.dw1f = randn_vec(w, rng, 1.0);
    in.dw2f = randn_vec(w, rng, 1.0);
  }
  in.dO = randn_vec(std::size_t(in.R) * in.lddo, rng, 1.0);
  return in;
}

// Outputs in contiguous layouts: o, dq, dk, dv [R, H·d]; dlr*, dmomentum [R, H]; the final weights
// and the initial weights' gradients [B, H, d_h·d] (w1's [d, d_h]).
template <class S>
struct LactOut {
  std::vector<S> o, w0f, w1f, w2f, dq, dk, dv, dlr0, dlr1, dlr2, dmomentum, dw0, dw1, dw2;
};

// A [rows, cols] block of a flat array (row-major) as a matrix in S, and back.
template <class S>
Mat<S> block_of(const std::vector<float>& x, std::size_t at, int rows, int cols) {
  Mat<S> m(rows, cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) m(i, j) = S(x[at + std::size_t(i) * cols + j]);
  return m;
}
template <class S>
void put_block(std::vector<double>& x, std::size_t at, const Mat<S>& m) {
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      x[at + std::size_t(i) * m.cols() + j] = double(m(i, j));
}

// lact_forward and lact_backward head by head in precision S on the inputs' values.
template <class S>
LactOut<double> cpu_lact(const LactInputs& in) {
  const LactCase& c = in.c;
  const int d = c.d, dh = c.dh, HD = c.H * d;
  const std::size_t F = std::size_t(dh) * d;
  LactOut<double> r;
  r.o.assign(std::size_t(in.R) * HD, 0.0);
  r.dq = r.dk = r.dv = r.o;
  r.dlr0.assign(std::size_t(in.R) * c.H, 0.0);
  r.dlr1 = r.dlr2 = r.dmomentum = r.dlr0;
  r.w0f.assign(std::size_t(c.B) * c.H * F, 0.0);
  r.w1f = r.w2f = r.dw0 = r.dw1 = r.dw2 = r.w0f;
  for (int n = 0; n < c.B; ++n)
    for (int h = 0; h < c.H; ++h) {
      Mat<S> q(c.T, d), k(c.T, d), v(c.T, d), dO(c.T, d);
      Vec<S> lr0(c.T), lr1(c.T), lr2(c.T), m;
      if (c.momentum) m.resize(c.T);
      for (int t = 0; t < c.T; ++t) {
        const std::size_t row = std::size_t(n) * c.T + t, col = std::size_t(h) * d;
        for (int i = 0; i < d; ++i) {
          q(t, i) = S(in.q[row * in.ldq + col + i]);
          k(t, i) = S(in.k[row * in.ldk + col + i]);
          v(t, i) = S(in.v[row * in.ldv + col + i]);
          dO(t, i) = S(in.dO[row * in.lddo + col + i]);
        }
        lr0(t) = S(in.lr0[row * c.H + h]);
        lr1(t) = S(in.lr1[row * c.H + h]);
        lr2(t) = S(in.lr2[row * c.H + h]);
        if (c.momentum) m(t) = S(in.momentum[row * c.H + h]);
      }
      const std::size_t at = (std::size_t(n) * c.H + h) * F;
      const LactWeights<S> W{block_of<S>(in.w0, at, dh, d), block_of<S>(in.w1, at, d, dh),
                             block_of<S>(in.w2, at, dh, d)};
      LactWeights<S> dWf;
      if (c.given)
        dWf = {block_of<S>(in.dw0f, at, dh, d), block_of<S>(in.dw1f, at, d, dh),
               block_of<S>(in.dw2f, at, dh, d)};
      const LactOutput<S> out = lact_forward<S>(q, k, v, lr0, lr1, lr2, m, W, c.C, false);
      const LactGrads<S> g = lact_backward<S>(q, k, v, lr0, lr1, lr2, m, W, c.C, false, dO, dWf);
      for (int t = 0; t < c.T; ++t) {
        const std::size_t row = std::size_t(n) * c.T + t;
        for (int i = 0; i < d; ++i) {
          const std::size_t e = row * HD + std::size_t(h) * d + i;
          r.o[e] = double(out.o(t, i));
          r.dq[e] = double(g.dq(t, i));
          r.dk[e] = double(g.dk(t, i));
          r.dv[e] = double(g.dv(t, i));
        }
        r.dlr0[row * c.H + h] = double(g.dlr0(t));
        r.dlr1[row * c.H + h] = double(g.dlr1(t));
        r.dlr2[row * c.H + h] = double(g.dlr2(t));
        if (c.momentum) r.dmomentum[row * c.H + h] = double(g.dmomentum(t));
      }
      put_block(r.w0f, at, out.weights.w0);
      put_block(r.w1f, at, out.weights.w1);
      put_block(r.w2f, at, out.weights.w2);
      put_block(r.dw0, at, g.dW.w0);
      put_block(r.dw1, at, g.dW.w1);
      put_block(r.dw2, at, g.dW.w2);
    }
  return r;
}

// Which functions run: the correct-first kernels (lact_forward, lact_backward), the chunked form
// through `gemm` (lact_forward_chunked, lact_backward_chunked), or the kernels' forward with the
// chunked backward reading its states (the two share the states' layout).
enum class Path { Kernels, Chunked, KernelForwardChunkedBackward };

LactOut<float> gpu_lact(const LactInputs& in, Path path = Path::Kernels, const Gemm* gemm = nullptr) {
  const LactCase& c = in.c;
  const LactDims dims{c.B, c.T, c.H, c.d, c.dh, c.C};
  const int HD = c.H * c.d;
  DeviceBuffer q(in.q), k(in.k), v(in.v), lr0(in.lr0), lr1(in.lr1), lr2(in.lr2), m(in.momentum);
  DeviceBuffer w0(in.w0), w1(in.w1), w2(in.w2), dw0f(in.dw0f), dw1f(in.dw1f), dw2f(in.dw2f);
  DeviceBuffer dO(in.dO);
  DeviceBuffer o(std::size_t(in.R) * HD), w0f(w0.size()), w1f(w0.size()), w2f(w0.size());
  DeviceBuffer states(lact_state_floats(dims));
  DeviceBuffer dq(o.size()), dk(o.size()), dv(o.size());
  DeviceBuffer dlr0(lr0.size()), dlr1(lr0.size()), dlr2(lr0.size()), dm(m.size());
  DeviceBuffer dw0(w0.size()), dw1(w0.size()), dw2(w0.size());
  const std::size_t ws_bytes = lact_backward_workspace_bytes(dims);
  DeviceBuffer ws((ws_bytes + sizeof(float) - 1) / sizeof(float));
  const std::size_t cws_bytes = path == Path::Kernels ? 0 : lact_chunked_workspace_bytes(dims);
  DeviceBuffer cws((cws_bytes + sizeof(float) - 1) / sizeof(float));
  for (DeviceBuffer* b : {&o, &w0f, &w1f, &w2f, &states, &dq, &dk, &dv, &dlr0, &dlr1, &dlr2, &dm,
                          &dw0, &dw1, &dw2, &ws, &cws})
    b->poison();

  LactForwardArgs f;
  f.dims = dims;
  f.q = q.get();
  f.ld_q = in.ldq;
  f.k = k.get();
  f.ld_k = in.ldk;
  f.v = v.get();
  f.ld_v = in.ldv;
  f.lr0 = lr0.get();
  f.lr1 = lr1.get();
  f.lr2 = lr2.get();
  f.momentum = c.momentum ? m.get() : nullptr;
  f.w0 = w0.get();
  f.w1 = w1.get();
  f.w2 = w2.get();
  f.o = o.get();
  f.ld_o = HD;
  f.w0_final = w0f.get();
  f.w1_final = w1f.get();
  f.w2_final = w2f.get();
  f.states = states.get();
  f.workspace = cws.get();
  f.workspace_bytes = cws_bytes;
  if (path == Path::Chunked)
    lact_forward_chunked(*gemm, f);
  else
    lact_forward(f);

  LactBackwardArgs b = lact_backward_args(f);
  b.dO = dO.get();
  b.ld_do = in.lddo;
  if (c.given) {
    b.dw0_final = dw0f.get();
    b.dw1_final = dw1f.get();
    b.dw2_final = dw2f.get();
  }
  b.dq = dq.get();
  b.ld_dq = HD;
  b.dk = dk.get();
  b.ld_dk = HD;
  b.dv = dv.get();
  b.ld_dv = HD;
  b.dlr0 = dlr0.get();
  b.dlr1 = dlr1.get();
  b.dlr2 = dlr2.get();
  b.dmomentum = c.momentum ? dm.get() : nullptr;
  b.dw0 = dw0.get();
  b.dw1 = dw1.get();
  b.dw2 = dw2.get();
  b.workspace = ws.get();
  b.workspace_bytes = ws_bytes;
  if (path == Path::Kernels) {
    lact_backward(b);
  } else {
    b.workspace = cws.get();
    b.workspace_bytes = cws_bytes;
    lact_backward_chunked(*gemm, b);
  }

  LactOut<float> r;
  r.o = o.download();
  r.w0f = w0f.download();
  r.w1f = w1f.download();
  r.w2f = w2f.download();
  r.dq = dq.download();
  r.dk = dk.download();
  r.dv = dv.download();
  r.dlr0 = dlr0.download();
  r.dlr1 = dlr1.download();
  r.dlr2 = dlr2.download();
  if (c.momentum) r.dmomentum = dm.download();
  r.dw0 = dw0.download();
  r.dw1 = dw1.download();
  r.dw2 = dw2.download();
  return r;
}

// The relative error of a result held in double (the CPU's fp32 run) against the fp64 reference.
double rel_error(const std::vector<double>& got, const std::vector<double>& ref) {
  double e = 0, m = 1e-6;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    m = std::max(m, std::abs(ref[i]));
    e = std::max(e, std::abs(got[i] - ref[i]));
  }
  return e / m;
}

// Every output of a GPU run against the fp64 reference at the kernels' bounds: the forward's into
// wf, the gradients' into wb (each the worst relative error seen).
void expect_every_output_within(const LactCase& c, const LactOut<float>& got, const LactOut<double>& ref,
                                double& wf, double& wb) {
  expect_within("o", got.o, ref.o, kTolForward, wf);
  expect_within("w0_final", got.w0f, ref.w0f, kTolForward, wf);
  expect_within("w1_final", got.w1f, ref.w1f, kTolForward, wf);
  expect_within("w2_final", got.w2f, ref.w2f, kTolForward, wf);
  expect_within("dq", got.dq, ref.dq, kTolBackward, wb);
  expect_within("dk", got.dk, ref.dk, kTolBackward, wb);
  expect_within("dv", got.dv, ref.dv, kTolBackward, wb);
  expect_within("dlr0", got.dlr0, ref.dlr0, kTolBackward, wb);
  expect_within("dlr1", got.dlr1, ref.dlr1, kTolBackward, wb);
  expect_within("dlr2", got.dlr2, ref.dlr2, kTolBackward, wb);
  if (c.momentum) expect_within("dmomentum", got.dmomentum, ref.dmomentum, kTolBackward, wb);
  expect_within("dw0", got.dw0, ref.dw0, kTolBackward, wb);
  expect_within("dw1", got.dw1, ref.dw1, kTolBackward, wb);
  expect_within("dw2", got.dw2, ref.dw2, kTolBackward, wb);
}

TEST(LactCuda, ForwardAndBackwardMatchTheCpuInFp64) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf(
      "[ INFO     ] seed %llu; error = max|x - cpu fp64| / max|cpu fp64| for x = gpu and, for "
      "scale, the CPU in fp32; bounds (gpu) %.0e forward, %.0e backward\n",
      (unsigned long long)seed, kTolForward, kTolBackward);
  double worst_f = 0, worst_b = 0;
  for (const LactCase& c : lact_cases()) {
    SCOPED_TRACE(describe(c));
    const LactInputs in = make_inputs(c, rng);
    const LactOut<double> ref = cpu_lact<double>(in);
    const LactOut<double> f32 = cpu_lact<float>(in);
    const LactOut<float> got = gpu_lact(in);
    double wf = 0, wb = 0;
    expect_every_output_within(c, got, ref, wf, wb);
    double cf = 0, cb = 0;
    for (const auto& [x, y] : {std::pair{&f32.o, &ref.o}, std::pair{&f32.w0f, &ref.w0f},
                               std::pair{&f32.w1f, &ref.w1f}, std::pair{&f32.w2f, &ref.w2f}})
      cf = std::max(cf, rel_error(*x, *y));
    for (const auto& [x, y] :
         {std::pair{&f32.dq, &ref.dq}, std::pair{&f32.dk, &ref.dk}, std::pair{&f32.dv, &ref.dv},
          std::pair{&f32.dlr0, &ref.dlr0}, std::pair{&f32.dlr1, &ref.dlr1},
          std::pair{&f32.dlr2, &ref.dlr2}, std::pair{&f32.dmomentum, &ref.dmomentum},
          std::pair{&f32.dw0, &ref.dw0}, std::pair{&f32.dw1, &ref.dw1},
          std::pair{&f32.dw2, &ref.dw2}})
      cb = std::max(cb, rel_error(*x, *y));
    std::printf(
        "[ INFO     ] %-52s gpu: forward %.2e, backward %.2e | cpu fp32: forward %.2e, backward "
        "%.2e\n",
        describe(c).c_str(), wf, wb, cf, cb);
    worst_f = std::max(worst_f, wf);
    worst_b = std::max(worst_b, wb);
  }
  std::printf("[ INFO     ] worst over the shapes (gpu): forward %.2e, backward %.2e\n", worst_f,
              worst_b);
}

// No atomics and a fixed order of every sum: a second run gives the same bits.
TEST(LactCuda, TwoRunsGiveTheSameBits) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf("[ INFO     ] seed %llu\n", (unsigned long long)seed);
  for (const LactCase& c : {LactCase{3, 3, 100, 64, 128, 16, true, true},
                            LactCase{2, 2, 61, 24, 24, 8, false, false}}) {
    SCOPED_TRACE(describe(c));
    const LactInputs in = make_inputs(c, rng);
    const LactOut<float> a = gpu_lact(in), b = gpu_lact(in);
    EXPECT_EQ(a.o, b.o);
    EXPECT_EQ(a.w0f, b.w0f);
    EXPECT_EQ(a.w1f, b.w1f);
    EXPECT_EQ(a.w2f, b.w2f);
    EXPECT_EQ(a.dq, b.dq);
    EXPECT_EQ(a.dk, b.dk);
    EXPECT_EQ(a.dv, b.dv);
    EXPECT_EQ(a.dlr0, b.dlr0);
    EXPECT_EQ(a.dlr1, b.dlr1);
    EXPECT_EQ(a.dlr2, b.dlr2);
    EXPECT_EQ(a.dmomentum, b.dmomentum);
    EXPECT_EQ(a.dw0, b.dw0);
    EXPECT_EQ(a.dw1, b.dw1);
    EXPECT_EQ(a.dw2, b.dw2);
  }
}

// ---- the chunked form (lact_forward_chunked / lact_backward_chunked) ------------------------------
// The same shapes and inputs, the products in fp32 (a cuBLAS Gemm of Fp32 precision: full fp32
// products), against the CPU in fp64 with the kernels' bounds: the chunked form does the same fp32
// arithmetic in another order (products of the same lengths: dots of d or d_h terms, sums over the
// C ≤ 2048 tokens of a chunk, in cuBLAS's order instead of a thread's), so its rounding is of the
// same size. Against the kernels (both run here) twice those bounds, each being within its own of
// the reference. Also the kernels' forward with the chunked backward reading its states (the same
// layout), within the backward's bound.

double rel_to(const std::vector<float>& got, const std::vector<float>& ref) {
  double e = 0, m = 1e-6;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    m = std::max(m, double(std::abs(ref[i])));
    e = std::max(e, double(std::abs(double(got[i]) - double(ref[i]))));
  }
  return e / m;
}

TEST(LactChunkedCuda, ForwardAndBackwardMatchTheCpuInFp64AndTheKernels) {
  TTTLAB_SEEDED_GPU_TEST();
  const Gemm gemm(nullptr, GemmPrecision::Fp32);
  std::printf("[ INFO     ] seed %llu; %s; bounds %.0e forward, %.0e backward (against the kernels: "
              "twice those)\n",
              (unsigned long long)seed, gemm.describe().c_str(), kTolForward, kTolBackward);
  double worst_f = 0, worst_b = 0, worst_kf = 0, worst_kb = 0;
  for (const LactCase& c : lact_cases()) {
    SCOPED_TRACE(describe(c));
    const LactInputs in = make_inputs(c, rng);
    const LactOut<double> ref = cpu_lact<double>(in);
    const LactOut<float> got = gpu_lact(in, Path::Chunked, &gemm);
    const LactOut<float> ker = gpu_lact(in, Path::Kernels);
    const LactOut<float> mix = gpu_lact(in, Path::KernelForwardChunkedBackward, &gemm);
    double wf = 0, wb = 0;
    expect_every_output_within(c, got, ref, wf, wb);
    // The chunked backward on the kernels' states.
    double mb = 0;
    expect_within("dq (kernels' states)", mix.dq, ref.dq, kTolBackward, mb);
    expect_within("dk (kernels' states)", mix.dk, ref.dk, kTolBackward, mb);
    expect_within("dv (kernels' states)", mix.dv, ref.dv, kTolBackward, mb);
    expect_within("dlr1 (kernels' states)", mix.dlr1, ref.dlr1, kTolBackward, mb);
    if (c.momentum) expect_within("dmomentum (kernels' states)", mix.dmomentum, ref.dmomentum, kTolBackward, mb);
    expect_within("dw0 (kernels' states)", mix.dw0, ref.dw0, kTolBackward, mb);
    expect_within("dw1 (kernels' states)", mix.dw1, ref.dw1, kTolBackward, mb);
    // Against the kernels.
    double kf = 0, kb = 0;
    for (const auto& [name, x, y] :
         {std::tuple{"o", &got.o, &ker.o}, std::tuple{"w0_final", &got.w0f, &ker.w0f},
          std::tuple{"w1_final", &got.w1f, &ker.w1f}, std::tuple{"w2_final", &got.w2f, &ker.w2f}}) {
      const double e = rel_to(*x, *y);
      EXPECT_LE(e, 2 * kTolForward) << name << " against the kernels";
      kf = std::max(kf, e);
    }
    for (const auto& [name, x, y] :
         {std::tuple{"dq", &got.dq, &ker.dq}, std::tuple{"dk", &got.dk, &ker.dk}, std::tuple{"dv", &got.dv, &ker.dv},
          std::tuple{"dlr0", &got.dlr0, &ker.dlr0}, std::tuple{"dlr1", &got.dlr1, &ker.dlr1},
          std::tuple{"dlr2", &got.dlr2, &ker.dlr2}, std::tuple{"dmomentum", &got.dmomentum, &ker.dmomentum},
          std::tuple{"dw0", &got.dw0, &ker.dw0}, std::tuple{"dw1", &got.dw1, &ker.dw1},
          std::tuple{"dw2", &got.dw2, &ker.dw2}}) {
      const double e = rel_to(*x, *y);
      EXPECT_LE(e, 2 * kTolBackward) << name << " against the kernels";
      kb = std::max(kb, e);
    }
    std::printf("[ INFO     ] %-52s chunked: forward %.2e, backward %.2e (on the kernels' states %.2e) | "
                "against the kernels: forward %.2e, backward %.2e\n",
                describe(c).c_str(), wf, wb, mb, kf, kb);
    worst_f = std::max(worst_f, wf);
    worst_b = std::max({worst_b, wb, mb});
    worst_kf = std::max(worst_kf, kf);
    worst_kb = std::max(worst_kb, kb);
  }
  std::printf("[ INFO     ] worst over the shapes (chunked): forward %.2e, backward %.2e; against the "
              "kernels %.2e, %.2e\n",
              worst_f, worst_b, worst_kf, worst_kb);
}

// Widths past the kernels' limits (d_f > 128, d_h > 512), which only the chunked form takes: the
// LaCT layer's default two heads at D = 768 are d_f = d_h = 384. Against the CPU in fp64 with the
// same bounds as the kernels' shapes (fp32 products: the same arithmetic, sums of length d, d_h and
// C, whose rounding grows as the square root of the length, well inside the bounds at 512).
TEST(LactChunkedCuda, WiderThanTheKernelsMatchTheCpuInFp64) {
  TTTLAB_SEEDED_GPU_TEST();
  const Gemm gemm(nullptr, GemmPrecision::Fp32);
  std::printf("[ INFO     ] seed %llu; %s; bounds %.0e forward, %.0e backward\n",
              (unsigned long long)seed, gemm.describe().c_str(), kTolForward, kTolBackward);
  for (const LactCase& c : {LactCase{1, 2, 40, 192, 384, 16, true, true},
                            LactCase{1, 1, 33, 384, 384, 8, false, true},
                            LactCase{1, 1, 20, 96, 768, 8, true, false}}) {
    SCOPED_TRACE(describe(c));
    ASSERT_NE(lact_unsupported({c.B, c.T, c.H, c.d, c.dh, c.C}), "") << "not past the kernels' limits";
    const LactInputs in = make_inputs(c, rng);
    const LactOut<double> ref = cpu_lact<double>(in);
    const LactOut<float> got = gpu_lact(in, Path::Chunked, &gemm);
    double wf = 0, wb = 0;
    expect_every_output_within(c, got, ref, wf, wb);
    std::printf("[ INFO     ] %-52s chunked: forward %.2e, backward %.2e\n", describe(c).c_str(), wf, wb);
  }
}

// Tf32 products (operands rounded to 10 bits): against the fp64 reference within 1e-2. The host
// emulation of lact_chunked.cu with its products' operands rounded to tf32 (to nearest) measured, on
// every shape of lact_cases(), worst 8.3e-4 forward and 2.8e-3 backward (tf32's ~1e-3 per product);
// a wrong product or term is O(1).
TEST(LactChunkedCuda, Tf32ProductsStayClose) {
  TTTLAB_SEEDED_GPU_TEST();
  const Gemm gemm(nullptr, GemmPrecision::Tf32);
  std::printf("[ INFO     ] seed %llu; %s\n", (unsigned long long)seed, gemm.describe().c_str());
  for (const LactCase& c : {LactCase{2, 2, 70, 64, 128, 32, true, true}, LactCase{2, 3, 50, 32, 32, 16, false, false}}) {
    SCOPED_TRACE(describe(c));
    const LactInputs in = make_inputs(c, rng);
    const LactOut<double> ref = cpu_lact<double>(in);
    const LactOut<float> got = gpu_lact(in, Path::Chunked, &gemm);
    constexpr double kTolTf32 = 1e-2;
    double wf = 0, wb = 0;
    expect_within("o", got.o, ref.o, kTolTf32, wf);
    expect_within("w0_final", got.w0f, ref.w0f, kTolTf32, wf);
    expect_within("dq", got.dq, ref.dq, kTolTf32, wb);
    expect_within("dk", got.dk, ref.dk, kTolTf32, wb);
    expect_within("dv", got.dv, ref.dv, kTolTf32, wb);
    expect_within("dw0", got.dw0, ref.dw0, kTolTf32, wb);
    expect_within("dw1", got.dw1, ref.dw1, kTolTf32, wb);
    expect_within("dlr1", got.dlr1, ref.dlr1, kTolTf32, wb);
    std::printf("[ INFO     ] %-52s tf32: forward %.2e, backward %.2e\n", describe(c).c_str(), wf, wb);
  }
}

// Fixed-order sums in every kernel and cuBLAS's run-to-run determinism: a second run gives the
// same bits.
TEST(LactChunkedCuda, TwoRunsGiveTheSameBits) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf("[ INFO     ] seed %llu\n", (unsigned long long)seed);
  const Gemm gemm(nullptr, GemmPrecision::Fp32);
  for (const LactCase& c : {LactCase{3, 3, 100, 64, 128, 16, true, true},
                            LactCase{2, 2, 61, 24, 24, 8, false, false}}) {
    SCOPED_TRACE(describe(c));
    const LactInputs in = make_inputs(c, rng);
    const LactOut<float> a = gpu_lact(in, Path::Chunked, &gemm), b = gpu_lact(in, Path::Chunked, &gemm);
    EXPECT_EQ(a.o, b.o);
    EXPECT_EQ(a.w0f, b.w0f);
    EXPECT_EQ(a.w1f, b.w1f);
    EXPECT_EQ(a.w2f, b.w2f);
    EXPECT_EQ(a.dq, b.dq);
    EXPECT_EQ(a.dk, b.dk);
    EXPECT_EQ(a.dv, b.dv);
    EXPECT_EQ(a.dlr0, b.dlr0);
    EXPECT_EQ(a.dlr1, b.dlr1);
    EXPECT_EQ(a.dlr2, b.dlr2);
    EXPECT_EQ(a.dmomentum, b.dmomentum);
    EXPECT_EQ(a.dw0, b.dw0);
    EXPECT_EQ(a.dw1, b.dw1);
    EXPECT_EQ(a.dw2, b.dw2);
  }
}

// The chunked functions' argument checks, before any launch (a built-in Gemm of the null stream
// needs no device to be made): runs without a GPU.
TEST(LactChunkedCuda, ArgumentsAreCheckedBeforeAnyLaunch) {
  const Gemm gemm(nullptr, GemmPrecision::Fp32, GemmEngine::Builtin);
  auto error_of = [](auto call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  float dummy = 0;
  LactForwardArgs f;
  f.dims = {1, 8, 2, 16, 32, 4};
  f.q = f.k = f.v = f.lr0 = f.lr1 = f.lr2 = f.w0 = f.w1 = f.w2 = &dummy;
  f.o = f.states = &dummy;
  f.ld_q = f.ld_k = f.ld_v = f.ld_o = 32;
  f.workspace = &dummy;
  f.workspace_bytes = lact_chunked_workspace_bytes(f.dims);
  EXPECT_GT(f.workspace_bytes, 0u);
  EXPECT_EQ(lact_chunked_workspace_bytes({1, 8, 1, 64, 64, 4, true}), 0u) << "muon has no workspace size";
  // The chunked form takes widths past the kernels' (d <= 128, d_h <= 512), up to 512 and 2048.
  EXPECT_EQ(lact_chunked_unsupported({1, 8, 2, 384, 384, 4}), "");
  EXPECT_EQ(lact_chunked_unsupported({1, 8, 2, 512, 2048, 4}), "");
  EXPECT_NE(lact_unsupported({1, 8, 2, 384, 384, 4}), "");
  EXPECT_NE(lact_chunked_unsupported({1, 8, 2, 513, 64, 4}).find("dim in 1..512, got 513"), std::string::npos);
  EXPECT_NE(lact_chunked_unsupported({1, 8, 2, 64, 2049, 4}).find("hidden (d_h) in 1..2048, got 2049"),
            std::string::npos);
  EXPECT_NE(lact_chunked_unsupported({1, 8, 2, 384, 384, 0}).find("chunk >= 1"), std::string::npos);
  EXPECT_NE(lact_chunked_unsupported({0, 8, 2, 384, 384, 4}).find("batch >= 1"), std::string::npos);
  const struct {
    void (*edit)(LactForwardArgs&);
    const char* field;
  } fbad[] = {{[](LactForwardArgs& g) { g.dims.muon = true; }, "muon"},
              {[](LactForwardArgs& g) { g.dims.dim = 600; }, "dim"},
              {[](LactForwardArgs& g) { g.dims.hidden = 3000; }, "hidden"},
              {[](LactForwardArgs& g) { g.dims.chunk = 0; }, "chunk"},
              {[](LactForwardArgs& g) { g.ld_q = 31; }, "ld_q"},
              {[](LactForwardArgs& g) { g.ld_v = 31; }, "ld_v"},
              {[](LactForwardArgs& g) { g.ld_o = 31; }, "ld_o"},
              {[](LactForwardArgs& g) { g.w1 = nullptr; }, "null"},
              {[](LactForwardArgs& g) { g.states = nullptr; }, "null"},
              {[](LactForwardArgs& g) { g.workspace = nullptr; }, "workspace"},
              {[](LactForwardArgs& g) { g.workspace_bytes -= 4; }, "workspace_bytes"},
              {[](LactForwardArgs& g) { g.stream = reinterpret_cast<CUstream_st*>(&g); }, "stream"},
              {[](LactForwardArgs& g) { g.w1_final = &g.o[0]; }, "w1_final"}};
  for (const auto& b : fbad) {
    LactForwardArgs g = f;
    b.edit(g);
    const std::string e = error_of([&] { lact_forward_chunked(gemm, g); });
    EXPECT_NE(e.find(b.field), std::string::npos) << "'" << e << "' does not name " << b.field;
  }
  LactBackwardArgs b = lact_backward_args(f);
  b.dO = &dummy;
  b.dq = b.dk = b.dv = b.dlr0 = b.dlr1 = b.dlr2 = b.dw0 = b.dw1 = b.dw2 = &dummy;
  b.workspace = &dummy;
  b.workspace_bytes = lact_chunked_workspace_bytes(b.dims);
  b.ld_do = b.ld_dq = b.ld_dk = b.ld_dv = 32;
  auto backward_error = [&](const LactBackwardArgs& g) {
    return error_of([&] { lact_backward_chunked(gemm, g); });
  };
  LactBackwardArgs g = b;
  g.workspace_bytes -= 4;
  EXPECT_NE(backward_error(g).find("workspace_bytes"), std::string::npos) << backward_error(g);
  g = b;
  g.dims.muon = true;
  EXPECT_NE(backward_error(g).find("muon"), std::string::npos) << backward_error(g);
  g = b;
  g.ld_dk = 31;
  EXPECT_NE(backward_error(g).find("ld_dk"), std::string::npos) << backward_error(g);
  g = b;
  g.dO = nullptr;
  EXPECT_NE(backward_error(g).find("null"), std::string::npos) << backward_error(g);
  g = b;
  g.dw2 = nullptr;
  EXPECT_NE(backward_error(g).find("null"), std::string::npos) << backward_error(g);
  g = b;
  g.momentum = &dummy;  // without dmomentum
  EXPECT_NE(backward_error(g).find("dmomentum"), std::string::npos) << backward_error(g);
  g = b;
  g.workspace = nullptr;
  EXPECT_NE(backward_error(g).find("workspace"), std::string::npos) << backward_error(g);
}

// Every supported shape's tile has at least one token and fits the H200's 227 KiB of shared memory
// per block (host arithmetic: runs without a GPU).
TEST(LactCuda, SharedMemoryFitsEveryShape) {
  for (int d : {1, 16, 64, 100, 128})
    for (int dh : {1, d, 2 * d, 4 * d, 512}) {
      if (dh > 512) continue;
      const LactDims dims{1, 100, 1, d, dh, 2048};
      SCOPED_TRACE("d=" + std::to_string(d) + " dh=" + std::to_string(dh));
      EXPECT_GE(lact_forward_tile_rows(dims), 1);
      EXPECT_GE(lact_backward_tile_rows(dims), 1);
      EXPECT_LE(lact_forward_smem_bytes(dims), std::size_t(227 * 1024));
      EXPECT_LE(lact_backward_smem_bytes(dims), std::size_t(227 * 1024));
    }
  // The tile never exceeds the chunk.
  EXPECT_EQ(lact_backward_tile_rows({1, 100, 1, 64, 128, 3}), 3);
}

// Muon, bad shapes and arguments are refused with a message naming the field, before anything is
// launched (so this runs without a GPU: every check is on the host).
TEST(LactCuda, ArgumentsAreCheckedBeforeAnyLaunch) {
  auto why = [](LactDims d) { return lact_unsupported(d); };
  EXPECT_EQ(why({16, 2048, 12, 64, 128, 2048}), "");
  EXPECT_EQ(why({1, 1, 1, 1, 1, 1}), "");
  EXPECT_EQ(why({1, 7, 1, 128, 512, 3}), "");
  const struct {
    LactDims d;
    const char* field;
  } bad[] = {{{0, 8, 1, 64, 64, 4}, "batch"},   {{70000, 8, 1, 64, 64, 4}, "batch"},
             {{1, 0, 1, 64, 64, 4}, "seq_len"}, {{1, 8, 0, 64, 64, 4}, "heads"},
             {{1, 8, 1, 129, 64, 4}, "dim"},    {{1, 8, 1, 0, 64, 4}, "dim"},
             {{1, 8, 1, 64, 0, 4}, "hidden"},   {{1, 8, 1, 64, 513, 4}, "hidden"},
             {{1, 8, 1, 64, 64, 0}, "chunk"},   {{1, 8, 1, 64, 64, 4, true}, "muon"}};
  for (const auto& b : bad) {
    const std::string w = why(b.d);
    EXPECT_NE(w.find(b.field), std::string::npos) << "'" << w << "' does not name " << b.field;
  }
  auto error_of = [](auto call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // Pointers that are never dereferenced: every one of these is refused first.
  float dummy = 0;
  LactForwardArgs f;
  f.dims = {1, 8, 2, 16, 32, 4};
  f.q = f.k = f.v = f.lr0 = f.lr1 = f.lr2 = f.w0 = f.w1 = f.w2 = &dummy;
  f.o = f.states = &dummy;
  f.ld_q = f.ld_k = f.ld_v = f.ld_o = 32;
  const struct {
    void (*edit)(LactForwardArgs&);
    const char* field;
  } fbad[] = {{[](LactForwardArgs& g) { g.dims.muon = true; }, "muon"},
              {[](LactForwardArgs& g) { g.dims.dim = 200; }, "dim"},
              {[](LactForwardArgs& g) { g.dims.chunk = 0; }, "chunk"},
              {[](LactForwardArgs& g) { g.ld_q = 31; }, "ld_q"},
              {[](LactForwardArgs& g) { g.ld_k = 31; }, "ld_k"},
              {[](LactForwardArgs& g) { g.ld_v = 31; }, "ld_v"},
              {[](LactForwardArgs& g) { g.ld_o = 31; }, "ld_o"},
              {[](LactForwardArgs& g) { g.w1 = nullptr; }, "null"},
              {[](LactForwardArgs& g) { g.lr2 = nullptr; }, "null"},
              {[](LactForwardArgs& g) { g.states = nullptr; }, "null"},
              {[](LactForwardArgs& g) { g.w1_final = &g.o[0]; }, "w1_final"}};
  for (const auto& b : fbad) {
    LactForwardArgs g = f;
    b.edit(g);
    const std::string e = error_of([&] { lact_forward(g); });
    EXPECT_NE(e.find(b.field), std::string::npos) << "'" << e << "' does not name " << b.field;
  }

  LactBackwardArgs b0;  // null pointers
  EXPECT_NE(error_of([&] { lact_backward(b0); }).find("null"), std::string::npos);
  LactBackwardArgs b = lact_backward_args(f);
  b.dO = &dummy;
  b.dq = b.dk = b.dv = b.dlr0 = b.dlr1 = b.dlr2 = b.dw0 = b.dw1 = b.dw2 = &dummy;
  b.workspace = &dummy;
  b.ld_do = b.ld_dq = b.ld_dk = b.ld_dv = 32;
  b.workspace_bytes = lact_backward_workspace_bytes(b.dims) - 4;
  auto backward_error = [&](const LactBackwardArgs& g) {
    return error_of([&] { lact_backward(g); });
  };
  EXPECT_NE(backward_error(b).find("workspace_bytes"), std::string::npos) << backward_error(b);
  b.workspace_bytes += 4;
  LactBackwardArgs g = b;
  g.dims.muon = true;
  EXPECT_NE(backward_error(g).find("muon"), std::string::npos) << backward_error(g);
  g = b;
  g.ld_dk = 31;
  EXPECT_NE(backward_error(g).find("ld_dk"), std::string::npos) << backward_error(g);
  g = b;
  g.ld_do = 31;
  EXPECT_NE(backward_error(g).find("ld_do"), std::string::npos) << backward_error(g);
  g = b;
  g.states = nullptr;
  EXPECT_NE(backward_error(g).find("null"), std::string::npos) << backward_error(g);
  g = b;
  g.dw1 = nullptr;
  EXPECT_NE(backward_error(g).find("null"), std::string::npos) << backward_error(g);
  g = b;
  g.momentum = &dummy;  // without dmomentum
  EXPECT_NE(backward_error(g).find("dmomentum"), std::string::npos) << backward_error(g);
}

}  // namespace
}  // namespace tttlab::kernels::test
