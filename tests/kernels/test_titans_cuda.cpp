// Titans' memory on the GPU (tttlab/kernels/titans.hpp) against the CPU (titans_primal and
// titans_backward, tttlab/fastweight/titans.hpp; docs/MATH.md §11.9), run in fp64 head by head on the
// same fp32-valued inputs.
//
// Inputs as the layer feeds them (core/src/seq/titans_layer.cpp): q, k L2-normalised per head;
// v ~ N(0, 1); θ ~ U(0.02, 0.2)/d (the layer's σ(·)/d around its initial 0.1/d); α ~ U(0, 0.05);
// η ~ U(0.5, 0.95); w ~ 1 + N(0, 0.1), bias ~ N(0, 0.1) per head; dO ~ N(0, 1); M0 ~ N(0, 1/d) and
// dM_final ~ N(0, 1) in the cases that give them (the others pass null: the layer's zero memory, whose
// first mini-batch has z = 0 and σ = sqrt(ε), the LayerNorm's steepest point). q, k, v and dO sit in
// rows wider than H·d, and every output is poisoned with NaN first, so an unwritten element fails.
// Shapes: d = 7, 16, 20, 32, 48, 64 (d past a whole warp, and not), b = 1, 4, 5, 16, T a multiple of
// neither b nor C, C = b, C > T, T = 1, B and H ≥ 2.
// ERROR = max|gpu − cpu| / max|cpu| per tensor (dw, dbias: summed over the batch). Bounds: forward (o,
// M_T) 2e-4, backward (every gradient) 1e-3. The GPU computes in fp32 (unit roundoff 6e-8) through
// sums of d terms over T ≤ 150 steps of a contracting recurrence (|η|, |1 − α| < 1); the LayerNorm of
// the write divides by σ, which is sqrt(ε) = 1e-3 where z = 0 (a zero M0's first mini-batch) and small
// after it, so rounding is amplified by up to 1/σ there. The same functions instantiated in fp32 on the
// CPU are printed beside the GPU for scale: the two differ from fp64 by errors of the same kind
// (summation orders and fused multiply-adds differ, the precision does not), of order 1e-6, and up to a
// few 1e-5 on the gradients of the zero-M0 cases; the bounds leave more than an order of magnitude
// above that. A wrong, missing or misplaced term (a state read before its write, a stale M_start, a
// lost token, a mini-batch boundary off by one) is O(1).
// Measured on an H200 with the default seed: forward 1.8e-6, backward 1.3e-5.
// Seeds are fixed and printed (test_seed(); TTTLAB_TEST_SEED overrides).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_ttt_util.hpp"
#include "tttlab/fastweight/titans.hpp"
#include "tttlab/kernels/titans.hpp"

namespace tttlab::kernels::test {
namespace {

constexpr double kTolForward = 2e-4;
constexpr double kTolBackward = 1e-3;
constexpr float kEps = 1e-6f;

struct TitansCase {
  int B, H, T, d, b, C;
  bool given;  // M0 and dM_final given (else null)
};

std::string describe(const TitansCase& c) {
  return "B=" + std::to_string(c.B) + " H=" + std::to_string(c.H) + " T=" + std::to_string(c.T) +
         " d=" + std::to_string(c.d) + " b=" + std::to_string(c.b) + " C=" + std::to_string(c.C) +
         (c.given ? " M0,dM" : " zero M0,dM");
}

std::vector<TitansCase> titans_cases() {
  if (quick_mode()) return {{2, 2, 37, 16, 4, 8, true}, {2, 2, 45, 64, 16, 32, false}};
  return {
      {2, 2, 37, 16, 4, 8, true},    {2, 3, 50, 32, 1, 16, false}, {2, 2, 77, 64, 16, 32, true},
      {3, 2, 45, 48, 16, 16, false}, {2, 2, 130, 64, 4, 64, true}, {2, 2, 29, 7, 1, 3, true},
      {2, 2, 101, 32, 4, 12, true},  {1, 1, 1, 64, 4, 64, true},   {2, 2, 150, 64, 1, 64, false},
      {2, 2, 73, 20, 5, 10, true},   {2, 2, 40, 64, 16, 256, true}};
}

struct TitansInputs {
  TitansCase c;
  int R, ldq, ldk, ldv, lddo;
  std::vector<float> q, k, v, theta, alpha, eta, w, bias, M0, dM, dO;
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

TitansInputs make_inputs(const TitansCase& c, std::mt19937_64& rng) {
  TitansInputs in;
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
  in.theta.resize(rates);
  in.alpha.resize(rates);
  in.eta.resize(rates);
  for (float& x : in.theta) x = float((0.02 + 0.18 * u01(rng)) / c.d);
  for (float& x : in.alpha) x = float(0.05 * u01(rng));
  for (float& x : in.eta) x = float(0.5 + 0.45 * u01(rng));
  in.w = randn_vec(std::size_t(c.H) * c.d, rng, 0.1, 1.0);
  in.bias = randn_vec(std::size_t(c.H) * c.d, rng, 0.1);
  if (c.given) {
    const std::size_t states = std::size_t(c.B) * c.H * c.d * c.d;
    in.M0 = randn_vec(states, rng, 1.0 / std::sqrt(double(c.d)));
    in.dM = randn_vec(states, rng, 1.0);
  }
  in.dO = randn_vec(std::size_t(in.R) * in.lddo, rng, 1.0);
  return in;
}

// Outputs in contiguous layouts: o, dq, dk, dv [R, H·d]; dθ, dα, dη [R, H]; dw, dbias [H, d];
// M_T, dM0 [B, H, d, d].
template <class S>
struct TitansOut {
  std::vector<S> o, M_final, dq, dk, dv, dtheta, dalpha, deta, dw, dbias, dM0;
};

// titans_primal and titans_backward head by head in precision S on the inputs' values.
template <class S>
TitansOut<double> cpu_titans(const TitansInputs& in) {
  const TitansCase& c = in.c;
  const int d = c.d, HD = c.H * d;
  TitansOut<double> r;
  r.o.assign(std::size_t(in.R) * HD, 0.0);
  r.dq = r.dk = r.dv = r.o;
  r.dtheta.assign(std::size_t(in.R) * c.H, 0.0);
  r.dalpha = r.deta = r.dtheta;
  r.dw.assign(std::size_t(HD), 0.0);
  r.dbias = r.dw;
  r.M_final.assign(std::size_t(c.B) * c.H * d * d, 0.0);
  r.dM0 = r.M_final;
  const TitansInner inner{c.b, double(kEps)};
  for (int n = 0; n < c.B; ++n)
    for (int h = 0; h < c.H; ++h) {
      Mat<S> q(c.T, d), k(c.T, d), v(c.T, d), dO(c.T, d);
      Vec<S> theta(c.T), alpha(c.T), eta(c.T);
      for (int t = 0; t < c.T; ++t) {
        const std::size_t row = std::size_t(n) * c.T + t, col = std::size_t(h) * d;
        for (int i = 0; i < d; ++i) {
          q(t, i) = S(in.q[row * in.ldq + col + i]);
          k(t, i) = S(in.k[row * in.ldk + col + i]);
          v(t, i) = S(in.v[row * in.ldv + col + i]);
          dO(t, i) = S(in.dO[row * in.lddo + col + i]);
        }
        theta(t) = S(in.theta[row * c.H + h]);
        alpha(t) = S(in.alpha[row * c.H + h]);
        eta(t) = S(in.eta[row * c.H + h]);
      }
      RowVec<S> w(d), b(d);
      for (int i = 0; i < d; ++i) {
        w(i) = S(in.w[std::size_t(h) * d + i]);
        b(i) = S(in.bias[std::size_t(h) * d + i]);
      }
      const std::size_t so = (std::size_t(n) * c.H + h) * d * d;
      Mat<S> M0 = Mat<S>::Zero(d, d), dM = M0;
      if (c.given)
        for (int i = 0; i < d; ++i)
          for (int j = 0; j < d; ++j) {
            M0(i, j) = S(in.M0[so + std::size_t(i) * d + j]);
            dM(i, j) = S(in.dM[so + std::size_t(i) * d + j]);
          }
      const TitansOutput<S> out = titans_primal<S>(q, k, v, w, b, theta, alpha, eta, M0, inner);
      const TitansGrads<S> g =
          titans_backward<S>(q, k, v, w, b, theta, alpha, eta, M0, inner, dO, dM);
      for (int t = 0; t < c.T; ++t) {
        const std::size_t row = std::size_t(n) * c.T + t;
        for (int i = 0; i < d; ++i) {
          const std::size_t e = row * HD + std::size_t(h) * d + i;
          r.o[e] = double(out.o(t, i));
          r.dq[e] = double(g.dq(t, i));
          r.dk[e] = double(g.dk(t, i));
          r.dv[e] = double(g.dv(t, i));
        }
        r.dtheta[row * c.H + h] = double(g.dtheta(t));
        r.dalpha[row * c.H + h] = double(g.dalpha(t));
        r.deta[row * c.H + h] = double(g.deta(t));
      }
      for (int i = 0; i < d; ++i) {
        r.dw[std::size_t(h) * d + i] += double(g.dw(i));
        r.dbias[std::size_t(h) * d + i] += double(g.db(i));
      }
      for (int i = 0; i < d; ++i)
        for (int j = 0; j < d; ++j) {
          r.M_final[so + std::size_t(i) * d + j] = double(out.state.memory(i, j));
          r.dM0[so + std::size_t(i) * d + j] = double(g.dM0(i, j));
        }
    }
  return r;
}

TitansOut<float> gpu_titans(const TitansInputs& in,
                            TitansBackwardForm form = TitansBackwardForm::automatic) {
  const TitansCase& c = in.c;
  const TitansDims dims{c.B, c.T, c.H, c.d, c.b, c.C};
  const int HD = c.H * c.d;
  const std::size_t states = std::size_t(c.B) * c.H * c.d * c.d;
  DeviceBuffer q(in.q), k(in.k), v(in.v), theta(in.theta), alpha(in.alpha), eta(in.eta);
  DeviceBuffer w(in.w), bias(in.bias), M0(in.M0), dM(in.dM), dO(in.dO);
  DeviceBuffer o(std::size_t(in.R) * HD), M_final(states), kept(titans_state_floats(dims));
  DeviceBuffer dq(o.size()), dk(o.size()), dv(o.size());
  DeviceBuffer dtheta(theta.size()), dalpha(theta.size()), deta(theta.size());
  DeviceBuffer dw(w.size()), dbias(w.size()), dM0(states);
  const std::size_t ws_bytes = titans_backward_workspace_bytes(dims);
  DeviceBuffer ws((ws_bytes + sizeof(float) - 1) / sizeof(float));
  for (DeviceBuffer* b :
       {&o, &M_final, &kept, &dq, &dk, &dv, &dtheta, &dalpha, &deta, &dw, &dbias, &dM0, &ws})
    b->poison();

  TitansForwardArgs f;
  f.dims = dims;
  f.q = q.get();
  f.ld_q = in.ldq;
  f.k = k.get();
  f.ld_k = in.ldk;
  f.v = v.get();
  f.ld_v = in.ldv;
  f.theta = theta.get();
  f.alpha = alpha.get();
  f.eta = eta.get();
  f.w = w.get();
  f.bias = bias.get();
  f.M0 = c.given ? M0.get() : nullptr;
  f.eps = kEps;
  f.o = o.get();
  f.ld_o = HD;
  f.M_final = M_final.get();
  f.states = kept.get();
  titans_forward(f);

  TitansBackwardArgs b = titans_backward_args(f);
  b.form = form;
  b.dO = dO.get();
  b.ld_do = in.lddo;
  b.dM_final = c.given ? dM.get() : nullptr;
  b.dq = dq.get();
  b.ld_dq = HD;
  b.dk = dk.get();
  b.ld_dk = HD;
  b.dv = dv.get();
  b.ld_dv = HD;
  b.dtheta = dtheta.get();
  b.dalpha = dalpha.get();
  b.deta = deta.get();
  b.dw = dw.get();
  b.dbias = dbias.get();
  b.dM0 = dM0.get();
  b.workspace = ws.get();
  b.workspace_bytes = ws_bytes;
  titans_backward(b);

  TitansOut<float> r;
  r.o = o.download();
  r.M_final = M_final.download();
  r.dq = dq.download();
  r.dk = dk.download();
  r.dv = dv.download();
  r.dtheta = dtheta.download();
  r.dalpha = dalpha.download();
  r.deta = deta.download();
  r.dw = dw.download();
  r.dbias = dbias.download();
  r.dM0 = dM0.download();
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

TEST(TitansCuda, ForwardAndBackwardMatchTheCpuInFp64) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf(
      "[ INFO     ] seed %llu; error = max|x - cpu fp64| / max|cpu fp64| for x = gpu and, for "
      "scale, "
      "the CPU in fp32; bounds (gpu) %.0e forward, %.0e backward\n",
      (unsigned long long)seed, kTolForward, kTolBackward);
  double worst_f = 0, worst_b = 0;
  for (const TitansCase& c : titans_cases()) {
    SCOPED_TRACE(describe(c));
    const TitansInputs in = make_inputs(c, rng);
    const TitansOut<double> ref = cpu_titans<double>(in);
    const TitansOut<double> f32 = cpu_titans<float>(in);
    for (const TitansBackwardForm form :
         {TitansBackwardForm::tokens, TitansBackwardForm::chunked}) {
      if (form == TitansBackwardForm::chunked && c.b > 16) continue;
      const char* form_name = form == TitansBackwardForm::chunked ? "chunked" : "tokens";
      SCOPED_TRACE(form_name);
      const TitansOut<float> got = gpu_titans(in, form);
      double wf = 0, wb = 0;
      expect_within("o", got.o, ref.o, kTolForward, wf);
      expect_within("M_final", got.M_final, ref.M_final, kTolForward, wf);
      expect_within("dq", got.dq, ref.dq, kTolBackward, wb);
      expect_within("dk", got.dk, ref.dk, kTolBackward, wb);
      expect_within("dv", got.dv, ref.dv, kTolBackward, wb);
      expect_within("dtheta", got.dtheta, ref.dtheta, kTolBackward, wb);
      expect_within("dalpha", got.dalpha, ref.dalpha, kTolBackward, wb);
      expect_within("deta", got.deta, ref.deta, kTolBackward, wb);
      expect_within("dw", got.dw, ref.dw, kTolBackward, wb);
      expect_within("dbias", got.dbias, ref.dbias, kTolBackward, wb);
      expect_within("dM0", got.dM0, ref.dM0, kTolBackward, wb);
      const double cf = std::max(rel_error(f32.o, ref.o), rel_error(f32.M_final, ref.M_final));
      double cb = 0;
      for (const auto& [x, y] : {std::pair{&f32.dq, &ref.dq},
                                 {&f32.dk, &ref.dk},
                                 {&f32.dv, &ref.dv},
                                 {&f32.dtheta, &ref.dtheta},
                                 {&f32.dalpha, &ref.dalpha},
                                 {&f32.deta, &ref.deta},
                                 {&f32.dw, &ref.dw},
                                 {&f32.dbias, &ref.dbias},
                                 {&f32.dM0, &ref.dM0}})
        cb = std::max(cb, rel_error(*x, *y));
      std::printf(
          "[ INFO     ] %-44s %-7s gpu: forward %.2e, backward %.2e | cpu fp32: forward %.2e, "
          "backward %.2e\n",
          describe(c).c_str(), form_name, wf, wb, cf, cb);
      worst_f = std::max(worst_f, wf);
      worst_b = std::max(worst_b, wb);
    }
  }
  std::printf("[ INFO     ] worst over the shapes (gpu): forward %.2e, backward %.2e\n", worst_f,
              worst_b);
}

// No atomics and fixed orders of every sum (dw, dbias over the batch included): a second run gives
// the same bits.
TEST(TitansCuda, TwoRunsGiveTheSameBits) {
  TTTLAB_SEEDED_GPU_TEST();
  std::printf("[ INFO     ] seed %llu\n", (unsigned long long)seed);
  for (const TitansCase& c :
       {TitansCase{3, 3, 100, 64, 4, 16, true}, TitansCase{2, 2, 61, 24, 1, 8, false}}) {
    SCOPED_TRACE(describe(c));
    const TitansInputs in = make_inputs(c, rng);
    for (const TitansBackwardForm form :
         {TitansBackwardForm::tokens, TitansBackwardForm::chunked}) {
      SCOPED_TRACE(form == TitansBackwardForm::chunked ? "chunked" : "tokens");
      const TitansOut<float> a = gpu_titans(in, form), b = gpu_titans(in, form);
      EXPECT_EQ(a.o, b.o);
      EXPECT_EQ(a.M_final, b.M_final);
      EXPECT_EQ(a.dq, b.dq);
      EXPECT_EQ(a.dk, b.dk);
      EXPECT_EQ(a.dv, b.dv);
      EXPECT_EQ(a.dtheta, b.dtheta);
      EXPECT_EQ(a.dalpha, b.dalpha);
      EXPECT_EQ(a.deta, b.deta);
      EXPECT_EQ(a.dw, b.dw);
      EXPECT_EQ(a.dbias, b.dbias);
      EXPECT_EQ(a.dM0, b.dM0);
    }
  }
}

// Bad shapes and arguments are refused with a message naming the field, before anything is launched
// (so this runs without a GPU: every check is on the host).
TEST(TitansCuda, ArgumentsAreCheckedBeforeAnyLaunch) {
  auto why = [](TitansDims d) { return titans_unsupported(d); };
  EXPECT_EQ(why({2, 300, 3, 64, 16, 64}), "");
  EXPECT_EQ(why({1, 1, 1, 1, 1, 1}), "");
  EXPECT_EQ(why({1, 7, 1, 7, 3, 9}), "");
  const struct {
    TitansDims d;
    const char* field;
  } bad[] = {{{0, 8, 1, 64, 4, 64}, "batch"},      {{70000, 8, 1, 64, 4, 64}, "batch"},
             {{1, 0, 1, 64, 4, 64}, "seq_len"},    {{1, 8, 0, 64, 4, 64}, "heads"},
             {{1, 8, 1, 65, 4, 64}, "dim"},        {{1, 8, 1, 0, 4, 64}, "dim"},
             {{1, 8, 1, 64, 0, 64}, "mini_batch"}, {{1, 8, 1, 64, 4, 0}, "chunk"},
             {{1, 8, 1, 64, 16, 24}, "chunk"}};
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
  TitansForwardArgs f;
  f.dims = {1, 8, 2, 16, 4, 8};
  f.q = f.k = f.v = f.theta = f.alpha = f.eta = f.w = f.bias = &dummy;
  f.o = &dummy;
  f.ld_q = f.ld_k = f.ld_v = f.ld_o = 32;
  auto forward_error = [&](const TitansForwardArgs& g) {
    return error_of([&] { titans_forward(g); });
  };
  const struct {
    void (*edit)(TitansForwardArgs&);
    const char* field;
  } fbad[] = {
      {[](TitansForwardArgs& g) { g.dims.dim = 100; }, "dim"},
      {[](TitansForwardArgs& g) { g.dims.chunk = 6; }, "chunk"},
      {[](TitansForwardArgs& g) { g.ld_q = 31; }, "ld_q"},
      {[](TitansForwardArgs& g) { g.ld_k = 31; }, "ld_k"},
      {[](TitansForwardArgs& g) { g.ld_v = 31; }, "ld_v"},
      {[](TitansForwardArgs& g) { g.ld_o = 31; }, "ld_o"},
      {[](TitansForwardArgs& g) { g.w = nullptr; }, "null"},
      {[](TitansForwardArgs& g) { g.eta = nullptr; }, "null"},
      {[](TitansForwardArgs& g) { g.o = nullptr; }, "null"},
      {[](TitansForwardArgs& g) { g.eps = 0.f; }, "eps"},
      {[](TitansForwardArgs& g) { g.eps = std::numeric_limits<float>::quiet_NaN(); }, "eps"}};
  for (const auto& b : fbad) {
    TitansForwardArgs g = f;
    b.edit(g);
    const std::string e = forward_error(g);
    EXPECT_NE(e.find(b.field), std::string::npos) << "'" << e << "' does not name " << b.field;
  }

  TitansBackwardArgs b0;  // null pointers
  EXPECT_NE(error_of([&] { titans_backward(b0); }).find("null"), std::string::npos);
  TitansBackwardArgs b = titans_backward_args(f);
  b.states = b.dO = &dummy;
  b.dq = b.dk = b.dv = b.dtheta = b.dalpha = b.deta = b.dw = b.dbias = &dummy;
  b.workspace = &dummy;
  b.ld_do = b.ld_dq = b.ld_dk = b.ld_dv = 32;
  b.workspace_bytes = titans_backward_workspace_bytes(b.dims) - 4;
  auto backward_error = [&](const TitansBackwardArgs& g) {
    return error_of([&] { titans_backward(g); });
  };
  EXPECT_NE(backward_error(b).find("workspace_bytes"), std::string::npos) << backward_error(b);
  b.workspace_bytes += 4;
  TitansBackwardArgs g = b;
  g.ld_dk = 31;
  EXPECT_NE(backward_error(g).find("ld_dk"), std::string::npos) << backward_error(g);
  g = b;
  g.ld_do = 31;
  EXPECT_NE(backward_error(g).find("ld_do"), std::string::npos) << backward_error(g);
  g = b;
  g.states = nullptr;
  EXPECT_NE(backward_error(g).find("null"), std::string::npos) << backward_error(g);
  g = b;
  g.dbias = nullptr;
  EXPECT_NE(backward_error(g).find("null"), std::string::npos) << backward_error(g);
  g = b;
  g.eps = -1.f;
  EXPECT_NE(backward_error(g).find("eps"), std::string::npos) << backward_error(g);
}

}  // namespace
}  // namespace tttlab::kernels::test
