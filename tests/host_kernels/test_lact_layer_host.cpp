// The LaCT layer of the GPU step (kernels/src/model/lact_layer.cpp) compiled for the HOST, its
// ops replaced by host stand-ins that do what their headers say (lact.hpp, attention.hpp,
// nn_ops.hpp; the inner loop and the attention by the CPU's own lact_forward / lact_backward and
// windowed_attention_forward / _backward, the rest written here in float), against
// LactLayer<double> (core/src/seq/lact_layer.cpp) on the same inputs: output, dx and every
// parameter's gradient. It checks the layer's orchestration without a GPU: which op runs on which
// buffer, the layouts (the rates' per-head columns, qk_scale's [D, 2] columns, the stacked initial
// weights, the kept states handed from the forward to the backward), the order of the sums, and a
// cache and workspace carved for a larger batch than the one in flight. The kernels themselves are
// held to the same headers by the GPU tests (tests/kernels/test_lact_layer_ops.cpp,
// test_lact_cuda.cpp, test_attention.cpp, test_nn_ops.cpp).
//
// Bound: 1e-5 of the largest reference value. The host side runs in float (products summed in
// double, as a GEMM's fp32 accumulation is no worse than float sums here), so it differs from the
// fp64 layer by fp32 rounding: measured 1.2e-6 at worst (lr_proj.bias) when written. A wrong
// buffer, index or term is O(1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "tttlab/fastweight/lact.hpp"
#include "tttlab/kernels/attention.hpp"
#include "tttlab/kernels/lact.hpp"
#include "tttlab/kernels/nn_ops.hpp"
#include "tttlab/nn/attention.hpp"
#include "tttlab/nn/norms.hpp"
#include "tttlab/seq/lact_layer.hpp"
#include "tttlab/seq/mamba2_layer.hpp"

namespace tttlab::kernels {
using MF = Mat<float>;
static float sg(float z) { return 1.f / (1.f + std::exp(-z)); }
static float silu(float z) { return z * sg(z); }
static float silu_g(float z) {
  float s = sg(z);
  return s * (1.f + z * (1.f - s));
}

std::string lact_unsupported(const LactDims& d) { return d.muon ? "muon" : ""; }
std::string lact_chunked_unsupported(const LactDims& d) { return d.muon ? "muon" : ""; }
std::size_t lact_state_floats(const LactDims& d) {
  return std::size_t(d.batch) * d.heads * d.chunks() * 6 * d.hidden * d.dim;
}
std::size_t lact_backward_workspace_bytes(const LactDims& d) {
  return 4 * std::size_t(d.batch) * d.heads * 6 * d.hidden * d.dim;
}
static MF block(const float* p, int ld, int r0, int rows, int c0, int cols) {
  MF m(rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) m(r, c) = p[std::size_t(r0 + r) * ld + c0 + c];
  return m;
}
static Vec<float> colv(const float* p, int H, int n, int T, int h) {
  Vec<float> v(T);
  for (int t = 0; t < T; ++t) v[t] = p[std::size_t(n * T + t) * H + h];
  return v;
}
// The chunk-parallel form's scratch: a size of the right order (a float per token and head), so that
// the cache's carving includes it; the host test passes no Gemm, so the chunked calls never run.
std::size_t lact_chunked_workspace_bytes(const LactDims& d) {
  return 4 * std::size_t(d.batch) * d.heads * d.seq_len;
}
void lact_forward_chunked(const Gemm&, const LactForwardArgs&) {
  throw std::logic_error("host test: the layer was given a Gemm");
}
void lact_backward_chunked(const Gemm&, const LactBackwardArgs&) {
  throw std::logic_error("host test: the layer was given a Gemm");
}
void lact_forward(const LactForwardArgs& a) {
  const LactDims& d = a.dims;
  const int T = d.seq_len, H = d.heads, dd = d.dim, dh = d.hidden, F = dh * dd, nc = d.chunks();
  for (int n = 0; n < d.batch; ++n)
    for (int h = 0; h < H; ++h) {
      LactWeights<float> w;
      const std::size_t wo = (std::size_t(n) * H + h) * F;
      w.w0 = Eigen::Map<const MF>(a.w0 + wo, dh, dd);
      w.w1 = Eigen::Map<const MF>(a.w1 + wo, dd, dh);
      w.w2 = Eigen::Map<const MF>(a.w2 + wo, dh, dd);
      float* st = a.states + (std::size_t(n) * H + h) * nc * 6 * F;
      std::memcpy(st, w.w0.data(), 4 * F);
      std::memcpy(st + F, w.w1.data(), 4 * F);
      std::memcpy(st + 2 * F, w.w2.data(), 4 * F);
      Vec<float> m;
      if (a.momentum) m = colv(a.momentum, H, n, T, h);
      const auto out = tttlab::lact_forward<float>(
          block(a.q, a.ld_q, n * T, T, h * dd, dd), block(a.k, a.ld_k, n * T, T, h * dd, dd),
          block(a.v, a.ld_v, n * T, T, h * dd, dd), colv(a.lr0, H, n, T, h),
          colv(a.lr1, H, n, T, h), colv(a.lr2, H, n, T, h), m, w, d.chunk, false);
      for (int t = 0; t < T; ++t)
        for (int c = 0; c < dd; ++c)
          a.o[std::size_t(n * T + t) * a.ld_o + h * dd + c] = out.o(t, c);
    }
}
void lact_backward(const LactBackwardArgs& a) {
  const LactDims& d = a.dims;
  const int T = d.seq_len, H = d.heads, dd = d.dim, dh = d.hidden, F = dh * dd, nc = d.chunks();
  for (int n = 0; n < d.batch; ++n)
    for (int h = 0; h < H; ++h) {
      const float* st = a.states + (std::size_t(n) * H + h) * nc * 6 * F;
      LactWeights<float> w;
      w.w0 = Eigen::Map<const MF>(st, dh, dd);
      w.w1 = Eigen::Map<const MF>(st + F, dd, dh);
      w.w2 = Eigen::Map<const MF>(st + 2 * F, dh, dd);
      Vec<float> m;
      if (a.momentum) m = colv(a.momentum, H, n, T, h);
      const auto g = tttlab::lact_backward<float>(
          block(a.q, a.ld_q, n * T, T, h * dd, dd), block(a.k, a.ld_k, n * T, T, h * dd, dd),
          block(a.v, a.ld_v, n * T, T, h * dd, dd), colv(a.lr0, H, n, T, h),
          colv(a.lr1, H, n, T, h), colv(a.lr2, H, n, T, h), m, w, d.chunk, false,
          block(a.dO, a.ld_do, n * T, T, h * dd, dd), LactWeights<float>{});
      for (int t = 0; t < T; ++t) {
        const std::size_t r = std::size_t(n * T + t);
        for (int c = 0; c < dd; ++c) {
          a.dq[r * a.ld_dq + h * dd + c] = g.dq(t, c);
          a.dk[r * a.ld_dk + h * dd + c] = g.dk(t, c);
          a.dv[r * a.ld_dv + h * dd + c] = g.dv(t, c);
        }
        a.dlr0[r * H + h] = g.dlr0[t];
        a.dlr1[r * H + h] = g.dlr1[t];
        a.dlr2[r * H + h] = g.dlr2[t];
        if (a.dmomentum) a.dmomentum[r * H + h] = g.dmomentum[t];
      }
      const std::size_t wo = (std::size_t(n) * H + h) * F;
      std::memcpy(a.dw0 + wo, g.dW.w0.data(), 4 * F);
      std::memcpy(a.dw1 + wo, g.dW.w1.data(), 4 * F);
      std::memcpy(a.dw2 + wo, g.dW.w2.data(), 4 * F);
    }
}
std::size_t attention_backward_workspace_bytes(const AttentionDims& d, AttentionKind) {
  return 4 * std::size_t(d.batch) * d.heads * d.seq_len;
}
void attention_forward(const AttentionForwardArgs& a) {
  const auto& d = a.dims;
  const int T = d.seq_len, D = d.heads * d.head_dim;
  for (int n = 0; n < d.batch; ++n) {
    MF O;
    windowed_attention_forward<float>(block(a.Q, D, n * T, T, 0, D), block(a.K, D, n * T, T, 0, D),
                                      block(a.V, D, n * T, T, 0, D), d.heads, a.window, O);
    std::memcpy(a.O + std::size_t(n) * T * D, O.data(), 4 * std::size_t(T) * D);
  }
}
void attention_backward(const AttentionBackwardArgs& a) {
  const auto& d = a.dims;
  const int T = d.seq_len, D = d.heads * d.head_dim;
  for (int n = 0; n < d.batch; ++n) {
    MF dQ, dK, dV;
    windowed_attention_backward<float>(block(a.Q, D, n * T, T, 0, D), block(a.K, D, n * T, T, 0, D),
                                       block(a.V, D, n * T, T, 0, D), d.heads, a.window,
                                       block(a.dO, D, n * T, T, 0, D), dQ, dK, dV);
    std::memcpy(a.dQ + std::size_t(n) * T * D, dQ.data(), 4 * std::size_t(T) * D);
    std::memcpy(a.dK + std::size_t(n) * T * D, dK.data(), 4 * std::size_t(T) * D);
    std::memcpy(a.dV + std::size_t(n) * T * D, dV.data(), 4 * std::size_t(T) * D);
  }
}
void rope_rotate(float* X, int B, int T, int H, int d, int period, const float* c, const float* s,
                 float sign, CUstream_st*) {
  for (int n = 0; n < B; ++n)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h)
        for (int m = 0; m < d / 2; ++m) {
          const int p = t % period;
          float* x = X + std::size_t(n * T + t) * H * d + h * d + 2 * m;
          const float cc = c[p * d / 2 + m], ss = sign * s[p * d / 2 + m], a0 = x[0], b0 = x[1];
          x[0] = a0 * cc - b0 * ss;
          x[1] = a0 * ss + b0 * cc;
        }
}
void lact_qk_forward(const float* u, const float* sc, const float* of, int ld, int R, int D, int d,
                     float eps, float* us, float* f, CUstream_st*) {
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < D / d; ++h) {
      double ss = 0;
      for (int j = 0; j < d; ++j) {
        int c = h * d + j;
        std::size_t i = std::size_t(r) * D + c;
        us[i] = silu(u[i] * sc[c * ld] + of[c * ld]);
        ss += double(us[i]) * us[i];
      }
      for (int j = 0; j < d; ++j) {
        std::size_t i = std::size_t(r) * D + h * d + j;
        f[i] = us[i] / (float(std::sqrt(ss)) + eps);
      }
    }
}
void lact_qk_backward(const float* u, const float* us, const float* sc, const float* of, int ld,
                      const float* dF, int R, int D, int d, float eps, float* du, float* dt,
                      float* dtu, CUstream_st*) {
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < D / d; ++h) {
      double ss = 0, ug = 0;
      for (int j = 0; j < d; ++j) {
        std::size_t i = std::size_t(r) * D + h * d + j;
        ss += double(us[i]) * us[i];
        ug += double(us[i]) * dF[i];
      }
      const double n = std::sqrt(ss), ne = n + eps;
      for (int j = 0; j < d; ++j) {
        int c = h * d + j;
        std::size_t i = std::size_t(r) * D + c;
        const double dus = dF[i] / ne - (n > 0 ? us[i] * ug / (n * ne * ne) : 0.0);
        const float g = float(dus) * silu_g(u[i] * sc[c * ld] + of[c * ld]);
        dt[i] = g;
        dtu[i] = g * u[i];
        du[i] += g * sc[c * ld];
      }
    }
}
void lact_silu_forward(const float* x, std::size_t n, float* y, CUstream_st*) {
  for (std::size_t i = 0; i < n; ++i) y[i] = silu(x[i]);
}
void lact_silu_backward_add(const float* x, const float* dy, std::size_t n, float* dx,
                            CUstream_st*) {
  for (std::size_t i = 0; i < n; ++i) dx[i] += dy[i] * silu_g(x[i]);
}
void lact_rates_forward(const float* z, const float* b, float base, int R, int H, float* zl,
                        float* l0, float* l1, float* l2, CUstream_st*) {
  float* out[3] = {l0, l1, l2};
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < H; ++h)
      for (int k = 0; k < 3; ++k) {
        std::size_t e = std::size_t(r) * 3 * H + 3 * h + k;
        zl[e] = (z[e] + b[3 * h + k]) + base;
        out[k][r * H + h] = float(mamba2_softplus(zl[e]));
      }
}
void lact_rates_backward(const float* zl, const float* d0, const float* d1, const float* d2, int R,
                         int H, float* dz, CUstream_st*) {
  const float* g[3] = {d0, d1, d2};
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < H; ++h)
      for (int k = 0; k < 3; ++k) {
        std::size_t e = std::size_t(r) * 3 * H + 3 * h + k;
        dz[e] = g[k][r * H + h] * float(mamba2_softplus_grad(zl[e]));
      }
}
void lact_scale_forward(const float* nn, const float* z, const float* b, const float* a, int R,
                        int H, int d, float* o, CUstream_st*) {
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < H; ++h)
      for (int j = 0; j < d; ++j) {
        std::size_t i = std::size_t(r) * H * d + h * d + j;
        o[i] = a[i] + nn[i] * silu(z[r * H + h] + b[h]);
      }
}
void lact_scale_backward(const float* nn, const float* z, const float* b, const float* dO, int R,
                         int H, int d, float* dn, float* dz, CUstream_st*) {
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < H; ++h) {
      const float zz = z[r * H + h] + b[h];
      double s = 0;
      for (int j = 0; j < d; ++j) {
        std::size_t i = std::size_t(r) * H * d + h * d + j;
        s += double(dO[i]) * nn[i];
        dn[i] = dO[i] * silu(zz);
      }
      dz[r * H + h] = float(s) * silu_g(zz);
    }
}
void lact_add_strided(const float* src, int n, float* dst, int stride, CUstream_st*) {
  for (int i = 0; i < n; ++i) dst[std::size_t(i) * stride] += src[i];
}
void eta_forward(const float* U, const float* b, int B, int T, int H, float scale, float* l,
                 CUstream_st*) {
  for (int n = 0; n < B; ++n)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t)
        l[(std::size_t(n) * H + h) * T + t] =
            scale * sg(U[(std::size_t(n) * T + t) * H + h] + b[h]);
}
void eta_backward(const float* l, const float* dl, int B, int T, int H, float scale, float* dU,
                  CUstream_st*) {
  for (int n = 0; n < B; ++n)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        std::size_t i = (std::size_t(n) * H + h) * T + t;
        dU[(std::size_t(n) * T + t) * H + h] = dl[i] * l[i] * (1.f - l[i] / scale);
      }
}
void rms_norm_forward(const float* X, const float* w, int R, int D, float eps, float* Y,
                      CUstream_st*) {
  for (int r = 0; r < R; ++r) {
    double ss = 0;
    for (int c = 0; c < D; ++c) ss += double(X[r * D + c]) * X[r * D + c];
    const float rr = float(1.0 / std::sqrt(ss / D + eps));
    for (int c = 0; c < D; ++c) Y[r * D + c] = X[r * D + c] * rr * w[c];
  }
}
std::size_t rms_norm_backward_workspace(int R, int D) { return std::size_t(R) * D; }
void rms_norm_backward(const float* X, const float* w, const float* dY, int R, int D, float eps,
                       float* dX, bool acc, float* dw, float*, CUstream_st*, std::uint16_t*) {
  for (int r = 0; r < R; ++r) {
    Mat<float> x = Eigen::Map<const Mat<float>>(X + std::size_t(r) * D, 1, D),
               dy = Eigen::Map<const Mat<float>>(dY + std::size_t(r) * D, 1, D), dx;
    RowVec<float> wv = Eigen::Map<const RowVec<float>>(w, D), dwv = RowVec<float>::Zero(D);
    tttlab::rms_norm_backward<float>(x, wv, dy, dx, dwv, eps);
    for (int c = 0; c < D; ++c) {
      dX[std::size_t(r) * D + c] = (acc ? dX[std::size_t(r) * D + c] : 0.f) + dx(0, c);
      dw[c] += dwv[c];
    }
  }
}
std::size_t column_sum_workspace(int R, int C) { return std::size_t(R) * C; }
void column_sum_add(const float* X, int R, int C, float* out, float*, CUstream_st*) {
  for (int c = 0; c < C; ++c) {
    double s = 0;
    for (int r = 0; r < R; ++r) s += X[std::size_t(r) * C + c];
    out[c] += float(s);
  }
}
}  // namespace tttlab::kernels

namespace {
using namespace tttlab;
using namespace tttlab::kernels;

TEST(LactLayerHost, TheGpuLayersOrchestrationMatchesTheCpuLayer) {
  LactLayerConfig cfg;
  cfg.width = 32;
  cfg.attn_heads = 4;
  cfg.lact_heads = 2;
  cfg.chunk_size = cfg.window = 8;
  // 2 sequences of 21 tokens (two updates and a partial chunk, T > W), 4 attention heads of 8, 2 fast
  // heads of 16, C = W = 8.
  const int B = 2, T = 21, D = cfg.width, Hf = cfg.lact_heads, da = cfg.attn_head_dim();
  std::printf("[ INFO     ] seeds 5 (parameters) and 7 (inputs)\n");
  Rng rng(5);
  LactParams<double> P = LactParams<double>::init(cfg, 0.3, rng);
  std::mt19937_64 g(7);
  std::normal_distribution<double> nd(0, 1);
  auto jig = [&](auto& m, double s) {
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] += s * nd(g);
  };
  jig(P.qk_scale, 0.2);
  jig(P.qk_offset, 0.2);
  jig(P.lr_bias, 1.0);
  jig(P.momentum_bias, 1.0);
  jig(P.scale_bias, 1.0);
  jig(P.ttt_norm, 0.2);
  jig(P.lr_proj, 0.3);
  LactLayer<double> layer(cfg, P);
  auto grads = layer.zeros_like();
  Mat<double> X(B * T, D), dOut(B * T, D), Y(B * T, D), dX(B * T, D);
  jig(X, 1.0);
  jig(dOut, 1.0);
  for (int n = 0; n < B; ++n) {
    Mat<double> y, dx;
    auto c = layer.forward_train(X.middleRows(n * T, T), y);
    Y.middleRows(n * T, T) = y;
    layer.backward(*c, dOut.middleRows(n * T, T), *grads, dx);
    dX.middleRows(n * T, T) = dx;
  }
  // the GPU side, in float
  auto fl = [](const auto& m) {
    std::vector<float> v(m.size());
    for (Eigen::Index i = 0; i < m.size(); ++i) v[i] = float(m.data()[i]);
    return v;
  };
  std::vector<std::vector<float>> store;
  auto keep = [&](const auto& m) {
    store.push_back(fl(m));
    return store.back().data();
  };
  LactLayerParams p;
  p.qkv = keep(P.qkv);
  p.qk_scale = keep(P.qk_scale);
  p.qk_offset = keep(P.qk_offset);
  p.w0 = keep(P.w0);
  p.w1 = keep(P.w1);
  p.w2 = keep(P.w2);
  p.lr_proj = keep(P.lr_proj);
  p.lr_bias = keep(P.lr_bias);
  p.momentum_proj = keep(P.momentum_proj);
  p.momentum_bias = keep(P.momentum_bias);
  p.scale_proj = keep(P.scale_proj);
  p.scale_bias = keep(P.scale_bias);
  p.ttt_norm = keep(P.ttt_norm);
  p.o_proj = keep(P.o_proj);
  std::vector<float> cs(T * da / 2), sn(cs.size());
  for (int m = 0; m < da / 2; ++m) {
    double fr = std::pow(1e4, -2.0 * m / da);
    for (int t = 0; t < T; ++t) {
      cs[t * da / 2 + m] = float(std::cos(t * fr));
      sn[t * da / 2 + m] = float(std::sin(t * fr));
    }
  }
  p.rope_cos = cs.data();
  p.rope_sin = sn.data();
  LactLayerDims d;
  d.batch = B;
  d.seq_len = T;
  d.width = D;
  d.attn_heads = cfg.attn_heads;
  d.lact_heads = Hf;
  d.chunk = d.window = cfg.chunk_size;
  LactLayerDims dbig = d;
  dbig.batch = 3;  // carved for a larger batch than the one in flight
  std::vector<float> cache(lact_layer_cache_floats(dbig), NAN),
      ws(lact_layer_workspace_floats(dbig), NAN);
  const LactLayerCache c = lact_layer_cache(dbig, cache.data());
  LactProduct prod = [](bool ta, bool tb, int M, int N, int K, const float* A, const std::uint16_t*,
                        int lda, const float* Bm, const std::uint16_t*, int ldb, float* C, int ldc,
                        bool acc) {
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double s = 0;
        for (int k = 0; k < K; ++k)
          s += double(ta ? A[std::size_t(k) * lda + i] : A[std::size_t(i) * lda + k]) *
               (tb ? Bm[std::size_t(j) * ldb + k] : Bm[std::size_t(k) * ldb + j]);
        C[std::size_t(i) * ldc + j] = (acc ? C[std::size_t(i) * ldc + j] : 0.f) + float(s);
      }
  };
  std::vector<float> x = fl(X), out(B * T * D), dO = fl(dOut), dx(B * T * D);
  lact_layer_forward(prod, nullptr, d, p, x.data(), c, out.data(), nullptr);
  // gradients, zero
  auto zero_like = [&](const auto& m) {
    store.push_back(std::vector<float>(m.size(), 0.f));
    return store.back().data();
  };
  LactLayerGrads gg;
  gg.qkv = zero_like(P.qkv);
  gg.qk_scale = zero_like(P.qk_scale);
  gg.qk_offset = zero_like(P.qk_offset);
  gg.w0 = zero_like(P.w0);
  gg.w1 = zero_like(P.w1);
  gg.w2 = zero_like(P.w2);
  gg.lr_proj = zero_like(P.lr_proj);
  gg.lr_bias = zero_like(P.lr_bias);
  gg.momentum_proj = zero_like(P.momentum_proj);
  gg.momentum_bias = zero_like(P.momentum_bias);
  gg.scale_proj = zero_like(P.scale_proj);
  gg.scale_bias = zero_like(P.scale_bias);
  gg.ttt_norm = zero_like(P.ttt_norm);
  gg.o_proj = zero_like(P.o_proj);
  lact_layer_backward(prod, nullptr, d, p, x.data(), c, dO.data(), gg, dx.data(), false, ws.data(), nullptr);
  auto cmp = [&](const char* name, const float* got, const auto& ref) {
    double mr = 0, me = 0;
    for (Eigen::Index i = 0; i < ref.size(); ++i) {
      mr = std::max(mr, std::abs(double(ref.data()[i])));
      me = std::max(me, std::abs(double(got[i]) - ref.data()[i]));
    }
    const double rel = me / std::max(mr, 1e-30);
    std::printf("[ INFO     ] %-10s max|ref| %.3e, relative error %.2e\n", name, mr, rel);
    EXPECT_LE(rel, 1e-5) << name;
  };
  const auto& G = dynamic_cast<LactLayer<double>&>(*grads).params();
  cmp("out", out.data(), Y);
  cmp("dx", dx.data(), dX);
  cmp("qkv", gg.qkv, G.qkv);
  cmp("qk_scale", gg.qk_scale, G.qk_scale);
  cmp("qk_offset", gg.qk_offset, G.qk_offset);
  cmp("w0", gg.w0, G.w0);
  cmp("w1", gg.w1, G.w1);
  cmp("w2", gg.w2, G.w2);
  cmp("lr_proj", gg.lr_proj, G.lr_proj);
  cmp("lr_bias", gg.lr_bias, G.lr_bias);
  cmp("mom_proj", gg.momentum_proj, G.momentum_proj);
  cmp("mom_bias", gg.momentum_bias, G.momentum_bias);
  cmp("scale_proj", gg.scale_proj, G.scale_proj);
  cmp("scale_bias", gg.scale_bias, G.scale_bias);
  cmp("ttt_norm", gg.ttt_norm, G.ttt_norm);
  cmp("o_proj", gg.o_proj, G.o_proj);
}

}  // namespace
