// The LaCT layer's element-wise ops on the GPU (tttlab/kernels/lact.hpp, "the layer's element-wise
// ops") against fp64 references written from the CPU layer's statements (core/src/seq/lact_layer.cpp:
// lact_front, lact_l2_heads and its backward, lact_back and backward's projections), on the same
// float inputs; and the argument checks and the layer's refusals, which need no GPU.
//
// Tolerance: 1e-5 of the largest reference value. Every op is a few fp32 operations per element
// (the L2 norm and the scale's sum a sum over at most 48 channels), so fp32 rounding is ~1e-7
// relative; the L2 backward's two terms cancel where u is parallel to g, which the inputs (random
// u and g) keep from approaching the bound. A wrong term or index is O(1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "require_gpu.hpp"
#include "test_ttt_util.hpp"
#include "tttlab/kernels/lact.hpp"
#include "tttlab/seq/mamba2_layer.hpp"

namespace tttlab::kernels::test {
namespace {

constexpr double kTol = 1e-5;
constexpr float kEps = 1e-5f;

double sig(double z) { return 1.0 / (1.0 + std::exp(-z)); }
double silu(double z) { return z * sig(z); }
double silu_grad(double z) { return sig(z) * (1.0 + z * (1.0 - sig(z))); }

std::vector<double> widen(const std::vector<float>& x) { return {x.begin(), x.end()}; }

struct Shape {
  int R, H, d;
};

TEST(LactLayerOps, MatchTheCpuStatementsInFp64) {
  TTTLAB_REQUIRE_GPU();
  const std::uint64_t seed = test_seed();
  std::printf("[ INFO     ] seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  double worst = 0;
  for (const Shape sh : {Shape{37, 2, 32}, Shape{5, 3, 48}, Shape{64, 1, 7}}) {
    SCOPED_TRACE("R=" + std::to_string(sh.R) + " H=" + std::to_string(sh.H) +
                 " d=" + std::to_string(sh.d));
    const int R = sh.R, H = sh.H, d = sh.d, D = H * d;
    const std::size_t RD = std::size_t(R) * D, RH = std::size_t(R) * H;
    const std::vector<float> u = randn_vec(RD, rng, 1.0), g = randn_vec(RD, rng, 1.0),
                             sb = randn_vec(2 * std::size_t(D), rng, 0.5, 1.0),
                             ob = randn_vec(2 * std::size_t(D), rng, 0.3),
                             a = randn_vec(RD, rng, 1.0), z = randn_vec(RH, rng, 1.0),
                             zb = randn_vec(H, rng, 0.5), z3 = randn_vec(3 * RH, rng, 2.0),
                             b3 = randn_vec(3 * std::size_t(H), rng, 1.0);
    std::vector<float> du0 = randn_vec(RD, rng, 1.0), g3 = randn_vec(3 * RH, rng, 1.0);
    // z3 reaches past softplus's threshold of 20 in a few entries.
    std::vector<float> z3b = z3;
    z3b[0] = 25.f;
    DeviceBuffer du_(u), dg(g), dsb(sb), dob(ob), da(a), dz(z), dzb(zb), dz3(z3b), db3(b3),
        dgrad(du0), dg3(g3);
    for (int col = 0; col < 2; ++col) {
      // ---- lact_qk_forward / _backward on column `col` of scale and offset [D, 2]
      DeviceBuffer us(RD), f(RD), dt(RD), dtu(RD);
      dgrad.upload(du0);
      lact_qk_forward(du_.get(), dsb.get() + col, dob.get() + col, 2, R, D, d, kEps, us.get(),
                      f.get(), nullptr);
      lact_qk_backward(du_.get(), us.get(), dsb.get() + col, dob.get() + col, 2, dg.get(), R, D, d,
                       kEps, dgrad.get(), dt.get(), dtu.get(), nullptr);
      std::vector<double> rus(RD), rf(RD), rdt(RD), rdtu(RD), rdu = widen(du0);
      for (int r = 0; r < R; ++r)
        for (int h = 0; h < H; ++h) {
          const std::size_t b = std::size_t(r) * D + std::size_t(h) * d;
          double ss = 0, ug = 0;
          for (int j = 0; j < d; ++j) {
            const int c = h * d + j;
            rus[b + j] = silu(double(u[b + j]) * sb[2 * c + col] + ob[2 * c + col]);
            ss += rus[b + j] * rus[b + j];
            ug += rus[b + j] * g[b + j];
          }
          const double n = std::sqrt(ss), ne = n + kEps;
          for (int j = 0; j < d; ++j) {
            const int c = h * d + j;
            rf[b + j] = rus[b + j] / ne;
            const double dus = g[b + j] / ne - (n > 0 ? rus[b + j] * ug / (n * ne * ne) : 0.0);
            rdt[b + j] = dus * silu_grad(double(u[b + j]) * sb[2 * c + col] + ob[2 * c + col]);
            rdtu[b + j] = rdt[b + j] * u[b + j];
            rdu[b + j] += rdt[b + j] * sb[2 * c + col];
          }
        }
      expect_within("qk us", us.download(), rus, kTol, worst);
      expect_within("qk f", f.download(), rf, kTol, worst);
      expect_within("qk dt", dt.download(), rdt, kTol, worst);
      expect_within("qk dtu", dtu.download(), rdtu, kTol, worst);
      expect_within("qk du +=", dgrad.download(), rdu, kTol, worst);
    }
    {  // ---- silu
      DeviceBuffer y(RD);
      dgrad.upload(du0);
      lact_silu_forward(du_.get(), RD, y.get(), nullptr);
      lact_silu_backward_add(du_.get(), dg.get(), RD, dgrad.get(), nullptr);
      std::vector<double> ry(RD), rdx = widen(du0);
      for (std::size_t i = 0; i < RD; ++i) {
        ry[i] = silu(u[i]);
        rdx[i] += double(g[i]) * silu_grad(u[i]);
      }
      expect_within("silu", y.download(), ry, kTol, worst);
      expect_within("silu dx +=", dgrad.download(), rdx, kTol, worst);
    }
    {  // ---- rates (in place: zl aliases z)
      const float base = float(std::log(std::expm1(1e-3)));
      DeviceBuffer zl(z3b), l0(RH), l1(RH), l2(RH), dzl(3 * RH);
      lact_rates_forward(zl.get(), db3.get(), base, R, H, zl.get(), l0.get(), l1.get(), l2.get(),
                         nullptr);
      lact_rates_backward(zl.get(), dg3.get(), dg3.get() + RH, dg3.get() + 2 * RH, R, H, dzl.get(),
                          nullptr);
      std::vector<double> rzl(3 * RH), rl[3] = {std::vector<double>(RH), std::vector<double>(RH),
                                                std::vector<double>(RH)},
                                       rdz(3 * RH);
      for (int r = 0; r < R; ++r)
        for (int h = 0; h < H; ++h)
          for (int k = 0; k < 3; ++k) {
            const std::size_t e = std::size_t(r) * 3 * H + 3 * h + k, i = std::size_t(r) * H + h;
            rzl[e] = double(float(z3b[e] + b3[3 * h + k]) + base);
            rl[k][i] = mamba2_softplus(rzl[e]);
            rdz[e] = double(g3[k * RH + i]) * mamba2_softplus_grad(rzl[e]);
          }
      expect_within("rates zl", zl.download(), rzl, kTol, worst);
      expect_within("rates lr0", l0.download(), rl[0], kTol, worst);
      expect_within("rates lr1", l1.download(), rl[1], kTol, worst);
      expect_within("rates lr2", l2.download(), rl[2], kTol, worst);
      expect_within("rates dz", dzl.download(), rdz, kTol, worst);
    }
    {  // ---- the output scale and the branches' sum
      DeviceBuffer o(RD), dn(RD), dsz(RH);
      lact_scale_forward(du_.get(), dz.get(), dzb.get(), da.get(), R, H, d, o.get(), nullptr);
      lact_scale_backward(du_.get(), dz.get(), dzb.get(), dg.get(), R, H, d, dn.get(), dsz.get(),
                          nullptr);
      std::vector<double> ro(RD), rdn(RD), rdsz(RH);
      for (int r = 0; r < R; ++r)
        for (int h = 0; h < H; ++h) {
          const double zz = double(z[std::size_t(r) * H + h]) + zb[h];
          double s = 0;
          for (int j = 0; j < d; ++j) {
            const std::size_t i = std::size_t(r) * D + std::size_t(h) * d + j;
            ro[i] = double(a[i]) + double(u[i]) * silu(zz);
            rdn[i] = double(g[i]) * silu(zz);
            s += double(g[i]) * u[i];
          }
          rdsz[std::size_t(r) * H + h] = s * silu_grad(zz);
        }
      expect_within("scale o", o.download(), ro, kTol, worst);
      expect_within("scale dn", dn.download(), rdn, kTol, worst);
      expect_within("scale dz", dsz.download(), rdsz, kTol, worst);
    }
    {  // ---- strided add into a column of a [D, 2] gradient
      DeviceBuffer dst(ob);
      lact_add_strided(dsb.get(), D, dst.get() + 1, 2, nullptr);
      std::vector<double> rdst = widen(ob);
      for (int c = 0; c < D; ++c) rdst[2 * c + 1] += sb[c];
      expect_within("add_strided", dst.download(), rdst, kTol, worst);
    }
  }
  std::printf("[ INFO     ] lact layer ops: worst relative error %.2e (bound %.0e)\n", worst, kTol);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// The checks run on the host before any launch, so they hold without a GPU (null pointers: nothing
// is touched).
TEST(LactLayerOps, BadArgumentsAreRefusedNamingTheField) {
  float* p = reinterpret_cast<float*>(16);  // never dereferenced: the checks refuse first
  EXPECT_NE(error_of([&] { lact_qk_forward(p, p, p, 2, 4, 64, 48, 1e-5f, p, p, nullptr); })
                .find("head dim d (48) must divide the width D (64)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lact_qk_forward(p, p, p, 0, 4, 64, 32, 1e-5f, p, p, nullptr); })
                .find("ld_sb"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              lact_qk_backward(p, p, p, p, 2, nullptr, 4, 64, 32, 1e-5f, p, p, p, nullptr);
            }).find("lact_qk_backward: a pointer is null"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lact_rates_forward(p, p, 0.f, 4, 0, p, p, p, p, nullptr); })
                .find("H >= 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lact_scale_backward(p, p, p, p, 4, 2, 0, p, p, nullptr); })
                .find("d >= 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lact_add_strided(p, 4, p, 0, nullptr); }).find("stride >= 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lact_silu_forward(nullptr, 4, p, nullptr); }).find("null"),
            std::string::npos);
}

// lact_layer_unsupported names the field at fault, and the layer's calls refuse before anything
// is launched.
TEST(LactLayerOps, TheLayerNamesWhatItCannotRun) {
  LactLayerDims d;
  d.width = 256, d.attn_heads = 4, d.lact_heads = 2, d.chunk = 64, d.window = 64;
  EXPECT_EQ(lact_layer_unsupported(d), "");  // the tiny preset's shape at D = 256: d_f = d_h = 128
  LactLayerDims b = d;
  b.window = 0;
  EXPECT_NE(lact_layer_unsupported(b).find("window >= 1, got 0"), std::string::npos);
  b = d;
  b.attn_heads = 3;
  EXPECT_NE(lact_layer_unsupported(b).find("attn_heads (3) must divide the width (256)"),
            std::string::npos);
  b = d;
  b.attn_heads = 1;  // d_a = 256
  EXPECT_NE(lact_layer_unsupported(b).find("attention head dim"), std::string::npos);
  b = d;
  b.lact_heads = 1;  // d_f = d_h = 256: past the kernels' 128, which the chunked form the layer runs takes
  EXPECT_EQ(lact_layer_unsupported(b), "");
  b.width = 1024, b.attn_heads = 8;  // d_f = 1024
  EXPECT_NE(lact_layer_unsupported(b).find("dim in 1..512, got 1024"), std::string::npos);
  b = d;
  b.inter_multi = 5;  // d_h = 640
  EXPECT_EQ(lact_layer_unsupported(b), "");
  b.inter_multi = 17;  // d_h = 2176
  EXPECT_NE(lact_layer_unsupported(b).find("hidden (d_h) in 1..2048, got 2176"), std::string::npos);
  b = d;
  b.muon = true;
  EXPECT_NE(lact_layer_unsupported(b).find("muon"), std::string::npos);
  b = d;
  b.lact_heads = 0;
  EXPECT_NE(lact_layer_unsupported(b).find("lact_heads >= 1, got 0"), std::string::npos);
  // The layer's calls check the shape first, then the pointers.
  LactLayerCache c;
  LactLayerParams p;
  const LactProduct none;
  b = d;
  b.muon = true;
  EXPECT_NE(error_of([&] { lact_layer_forward(none, nullptr, b, p, nullptr, c, nullptr, nullptr); })
                .find("lact layer (GPU): the LaCT layer's muon"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lact_layer_forward(none, nullptr, d, p, nullptr, c, nullptr, nullptr); })
                .find("forward: a pointer is null"),
            std::string::npos);
  LactLayerGrads g;
  EXPECT_NE(error_of([&] {
              lact_layer_backward(none, nullptr, d, p, nullptr, c, nullptr, g, nullptr, false, nullptr,
                                  nullptr);
            }).find("backward: a pointer is null"),
            std::string::npos);
}

}  // namespace
}  // namespace tttlab::kernels::test
