// LaCT's inner loop in chunk-parallel form: strided-batched matrix products over the B·H heads and
// small row and elementwise kernels, the host walking the chunks (see tttlab/kernels/lact.hpp,
// "the chunk-parallel form"; docs/MATH.md §11.10 for the maths; docs/KERNELS.md, "The chunked
// form", for the design). It computes what lact_forward / lact_backward (lact.cu) compute, into
// the same kept states.
//
// Per head (batch entry i = n·H + h) and chunk c of L tokens (L = C for a chunk that updates; only
// the last chunk can be shorter, and it never updates), with W0, W2 [d_h, d], W1 [d, d_h] the
// chunk's weights, rows as in lact.cu (the read uses the weights from before the chunk):
//   forward  Y = [Q; K] W0ᵀ, [Q; K] W2ᵀ, Vh = V W1; Hq = silu(Yq0) ⊙ Yq2, O = Hq W1ᵀ;
//            A0 = lr0 ⊙ (Vh ⊙ Z2 ⊙ silu'(Z0)), A1 = lr1 ⊙ silu(Z0) ⊙ Z2, A2 = lr2 ⊙ Vh ⊙ silu(Z0);
//            G0 = A0ᵀ K, G1 = Vᵀ A1, G2 = A2ᵀ K (the step, into the states' m_c slot), then the row
//            kernel: m_c = G + m̄_c m_{c−1}, W_{c+1} = renorm(W_c + m_c).
//   backward the same products from W_c, plus a1 = V ∂L/∂G1, E0 = K ∂L/∂G0ᵀ, E2 = K ∂L/∂G2ᵀ;
//            one kernel of a warp per token forms every per-token d_h-vector of lact.cu's backward
//            and the rates' gradients (row sums over d_h: ∂L/∂lr0 = Σ_j dz0 ⊙ E0, …); then
//            [dq; dk] = [gy0; gz0] W0 + [gy2; gz2] W2, dk += (lr0 dz0) ∂L/∂G0 + (lr2 dz2) ∂L/∂G2,
//            dv = (lr1 h) ∂L/∂G1ᵀ + gdh W1ᵀ, ∂L/∂W0 += [gy0; gz0]ᵀ [Q; K], ∂L/∂W2 likewise,
//            ∂L/∂W1 += [dO; V]ᵀ [Hq; gdh] (the read's and the step's terms in one product each).
// Stacking q over k (and dO over v) in the packed blocks makes a product of two terms one product
// of twice the rows or twice the inner dimension. Every kernel here sums in a fixed order (warp
// shuffles of fixed pattern, a block tree): with cuBLAS's run-to-run determinism, a run repeats
// its bits.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "tttlab/kernels/gemm.hpp"
#include "tttlab/kernels/lact.hpp"

namespace tttlab::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr float kRenormEps = 1e-5f;  // the reference's renormalisation eps

__device__ __forceinline__ float sigmoid(float z) { return 1.f / (1.f + expf(-z)); }

struct Silu {
  float s, d1, d2;
};
// silu(z) = z σ(z); silu'(z) = σ (1 + z (1 − σ)); silu''(z) = σ (1 − σ) (2 + z (1 − 2σ)).
__device__ __forceinline__ Silu silu_of(float z) {
  const float sg = sigmoid(z);
  Silu r;
  r.s = z * sg;
  r.d1 = sg * (1.f + z * (1.f - sg));
  r.d2 = sg * (1.f - sg) * (2.f + z * (1.f - 2.f * sg));
  return r;
}

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Row r of the three weights (W0's d_h rows of d, W1's d rows of d_h, W2's d_h rows of d, one
// block of 3F floats): its start and length.
struct Row {
  long long start;
  int len;
};
__device__ __forceinline__ Row row_of(int r, int d, int dh) {
  const long long F = (long long)dh * d;
  if (r < dh) return {(long long)r * d, d};
  if (r < dh + d) return {F + (long long)(r - dh) * dh, dh};
  return {2 * F + (long long)(r - dh - d) * d, d};
}

// The shapes every kernel needs.
struct Shape {
  int B, H, T, d, dh, C, Cp, nc, upd, nrows;
  long long F;
  int heads() const { return B * H; }
};

Shape shape_of(const LactDims& m) {
  Shape s;
  s.B = m.batch;
  s.H = m.heads;
  s.T = m.seq_len;
  s.d = m.dim;
  s.dh = m.hidden;
  s.C = m.chunk;
  s.Cp = std::min(m.chunk, m.seq_len);
  s.nc = m.chunks();
  s.upd = m.updates();
  s.nrows = 2 * m.hidden + m.dim;
  s.F = (long long)m.hidden * m.dim;
  return s;
}

// The workspace, in floats, each region's per-head block (stride) and its start; regions start on
// 64-float boundaries.
struct Layout {
  long long qk, dv, lr, y0, y2, dh, a1, e0, e2, out, dw, nrm, dn, mbar;  // per-head strides
  long long o_qk, o_dv, o_lr, o_y0, o_y2, o_dh, o_a1, o_e0, o_e2, o_out, o_dw, o_nrm, o_dn, o_mbar;
  long long total;
};

Layout layout_of(const Shape& s) {
  Layout l;
  const long long BH = s.heads(), Cp = s.Cp;
  l.qk = l.dv = 2 * Cp * s.d;
  l.lr = 3 * Cp;
  l.y0 = l.y2 = l.dh = 2 * Cp * s.dh;
  l.a1 = l.e0 = l.e2 = Cp * s.dh;
  l.out = 3 * Cp * s.d;
  l.dw = 6 * s.F;
  l.nrm = l.dn = s.nrows;
  l.mbar = s.nc;
  long long at = 0;
  auto place = [&](long long stride) {
    const long long o = at;
    at += (BH * stride + 63) / 64 * 64;
    return o;
  };
  l.o_qk = place(l.qk);
  l.o_dv = place(l.dv);
  l.o_lr = place(l.lr);
  l.o_y0 = place(l.y0);
  l.o_y2 = place(l.y2);
  l.o_dh = place(l.dh);
  l.o_a1 = place(l.a1);
  l.o_e0 = place(l.e0);
  l.o_e2 = place(l.e2);
  l.o_out = place(l.out);
  l.o_dw = place(l.dw);
  l.o_nrm = place(l.nrm);
  l.o_dn = place(l.dn);
  l.o_mbar = place(l.mbar);
  l.total = at;
  return l;
}

// ---- kernels -------------------------------------------------------------------------------------

// dst[i, 0..3F) = (w0 | w1 | w2)[i] for every head i (states' slot 0, or an output's copy back:
// `back` copies slot `slot` of the states into w0, w1, w2).
__global__ void copy_weights(float* st, long long head_stride, long long slot_off, const float* w0,
                             const float* w1, const float* w2, float* o0, float* o1, float* o2,
                             long long F, int heads, bool back) {
  const long long n = 3 * F * heads;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    const long long i = e / (3 * F), r = e % (3 * F), which = r / F, x = r % F;
    float* s = st + i * head_stride + slot_off + r;
    if (back) {
      float* dst = which == 0 ? o0 : which == 1 ? o1 : o2;
      dst[i * F + x] = *s;
    } else {
      const float* src = which == 0 ? w0 : which == 1 ? w1 : w2;
      *s = src[i * F + x];
    }
  }
}

// nrm[i, r] = ‖row r of head i's initial weights‖ (a warp per row).
__global__ void row_norms(const float* st, long long head_stride, float* nrm, int d, int dh) {
  const int nrows = 2 * dh + d, i = blockIdx.y, lane = threadIdx.x % 32;
  const int r = blockIdx.x * kWarps + threadIdx.x / 32;
  if (r >= nrows) return;
  const Row w = row_of(r, d, dh);
  const float* W = st + i * head_stride + w.start;
  float s = 0.f;
  for (int x = lane; x < w.len; x += 32) s += W[x] * W[x];
  s = warp_sum(s);
  if (lane == 0) nrm[(long long)i * nrows + r] = sqrtf(s);
}

// mbar[i, c] = the mean momentum of chunk c < upd of head i (a thread each, in token order).
__global__ void chunk_means(const float* m, float* mbar, int H, int T, int C, int nc, int upd,
                            int heads) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < (long long)heads * nc;
       e += (long long)gridDim.x * blockDim.x) {
    const int i = int(e / nc), c = int(e % nc), n = i / H, h = i % H;
    float v = 0.f;
    if (c < upd) {
      float s = 0.f;
      const long long row = (long long)n * T + (long long)c * C;
      for (int t = 0; t < C; ++t) s += m[(row + t) * H + h];
      v = s / float(C);
    }
    mbar[e] = v;
  }
}

// Packs chunk c's tokens of every head: qk rows 0..L−1 ← q (rows Cp.. ← k when update), dv rows
// 0..L−1 ← dO (when given), rows Cp.. ← v (update), lr [3, Cp] ← the rates (update).
struct GatherArgs {
  const float *q, *k, *v, *dO, *lr0, *lr1, *lr2;
  int ld_q, ld_k, ld_v, ld_do;
  float *qk, *dv, *lr;
  long long s_qk, s_dv, s_lr;
  int H, T, d, Cp, s, L;
  bool update;
};
__global__ void gather_chunk(const GatherArgs a) {
  const int i = blockIdx.y, n = i / a.H, h = i % a.H;
  const long long row = (long long)n * a.T + a.s, col = (long long)h * a.d;
  float* qk = a.qk + i * a.s_qk;
  float* dv = a.dv + i * a.s_dv;
  const long long off = (long long)a.Cp * a.d;
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < a.L * a.d; e += gridDim.x * blockDim.x) {
    const int t = e / a.d, x = e % a.d;
    qk[e] = a.q[(row + t) * a.ld_q + col + x];
    if (a.dO) dv[e] = a.dO[(row + t) * a.ld_do + col + x];
    if (a.update) {
      qk[off + e] = a.k[(row + t) * a.ld_k + col + x];
      dv[off + e] = a.v[(row + t) * a.ld_v + col + x];
    }
  }
  if (a.update && blockIdx.x == 0)
    for (int t = threadIdx.x; t < a.L; t += blockDim.x) {
      float* lr = a.lr + i * a.s_lr;
      lr[t] = a.lr0[(row + t) * a.H + h];
      lr[a.Cp + t] = a.lr1[(row + t) * a.H + h];
      lr[2 * a.Cp + t] = a.lr2[(row + t) * a.H + h];
    }
}

// The reverse: x[row, col..] ← out block rows base.. (or 0 when `zero`), for the L tokens.
__global__ void scatter_chunk(float* x, int ld, const float* out, long long s_out, long long base,
                              int H, int T, int d, int s, int L, bool zero) {
  const int i = blockIdx.y, n = i / H, h = i % H;
  const long long row = (long long)n * T + s, col = (long long)h * d;
  const float* o = out + i * s_out + base;
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < L * d; e += gridDim.x * blockDim.x) {
    const int t = e / d, xx = e % d;
    x[(row + t) * ld + col + xx] = zero ? 0.f : o[e];
  }
}

// The forward's per-token d_h-vectors, in place (element (t, j) of every head):
//   y0[t] ← silu(y0) ⊙ y2 (the read's h); with update, y0[Cp + t] ← A0, y2[Cp + t] ← A2,
//   vh[Cp + t] ← A1 (see the top of the file).
__global__ void forward_gates(float* y0, float* y2, float* vh, const float* lr, long long s_y,
                              long long s_lr, int Cp, int dh, int L, bool update) {
  const int i = blockIdx.y;
  float* Y0 = y0 + i * s_y;
  float* Y2 = y2 + i * s_y;
  float* VH = vh + i * s_y;
  const float* LR = lr + i * s_lr;
  const long long off = (long long)Cp * dh;
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < L * dh; e += gridDim.x * blockDim.x) {
    const int t = e / dh;
    Y0[e] = silu_of(Y0[e]).s * Y2[e];
    if (update) {
      const float z0 = Y0[off + e], z2 = Y2[off + e], dhv = VH[off + e];
      const Silu sz = silu_of(z0);
      Y0[off + e] = LR[t] * ((dhv * z2) * sz.d1);
      VH[off + e] = LR[Cp + t] * (sz.s * z2);
      Y2[off + e] = LR[2 * Cp + t] * (dhv * sz.s);
    }
  }
}

// m_c = G + m̄_c m_{c−1} (in G's slot), W_{c+1} = renorm(W_c + m_c): a warp per row of a head.
__global__ void forward_update(float* st, long long head_stride, int c, const float* nrm,
                               const float* mbar, int nc, int d, int dh, bool momentum) {
  const int nrows = 2 * dh + d, i = blockIdx.y, lane = threadIdx.x % 32;
  const int r = blockIdx.x * kWarps + threadIdx.x / 32;
  if (r >= nrows) return;
  const long long F3 = 3LL * dh * d;
  const Row w = row_of(r, d, dh);
  float* base = st + i * head_stride;
  const float* W = base + (long long)c * 2 * F3 + w.start;
  float* G = base + (long long)c * 2 * F3 + F3 + w.start;
  float* Wn = base + (long long)(c + 1) * 2 * F3 + w.start;
  const float* Mp = momentum && c > 0 ? base + (long long)(c - 1) * 2 * F3 + F3 + w.start : nullptr;
  const float mb = momentum ? mbar[(long long)i * nc + c] : 0.f;
  float s2 = 0.f;
  for (int x = lane; x < w.len; x += 32) {
    float m = G[x];
    if (Mp) m = m + Mp[x] * mb;
    G[x] = m;
    const float p = W[x] + m;
    Wn[x] = p;
    s2 += p * p;
  }
  s2 = warp_sum(s2);
  const float den = sqrtf(s2) + kRenormEps, target = nrm[(long long)i * nrows + r];
  for (int x = lane; x < w.len; x += 32) Wn[x] = Wn[x] / den * target;
}

// dW ← ∂L/∂W_init-or-final (dwf, or 0), dG ← 0, dn ← 0.
__global__ void backward_init(float* dw, long long s_dw, const float* f0, const float* f1,
                              const float* f2, float* dn, int nrows, long long F, int heads) {
  const long long n = 6 * F * heads;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    const long long i = e / (6 * F), r = e % (6 * F);
    float v = 0.f;
    if (r < 3 * F) {
      const float* f = r < F ? f0 : r < 2 * F ? f1 : f2;
      if (f) v = f[i * F + r % F];
    }
    dw[i * s_dw + r] = v;
    if (e < (long long)heads * nrows) dn[e] = 0.f;
  }
}

// The renormalisation's backward for chunk c (a warp per row): dW (∂L/∂W_{c+1}) becomes ∂L/∂P in
// place (P = W_c + m_c), dG (∂L/∂m_c) = ∂L/∂P + m̄_{c+1} ∂L/∂m_{c+1}, dn += ∂L/∂(target).
__global__ void backward_renorm(const float* st, long long head_stride, int c, float* dw,
                                long long s_dw, const float* nrm, float* dn, const float* mbar,
                                int nc, int d, int dh, bool carry) {
  const int nrows = 2 * dh + d, i = blockIdx.y, lane = threadIdx.x % 32;
  const int r = blockIdx.x * kWarps + threadIdx.x / 32;
  if (r >= nrows) return;
  const long long F3 = 3LL * dh * d;
  const Row w = row_of(r, d, dh);
  const float* W = st + i * head_stride + (long long)c * 2 * F3 + w.start;
  const float* M = W + F3;
  float* dW = dw + i * s_dw + w.start;
  float* dG = dW + F3;
  const float cr = carry ? mbar[(long long)i * nc + c + 1] : 0.f;
  float p2 = 0.f, yp = 0.f;
  for (int x = lane; x < w.len; x += 32) {
    const float p = W[x] + M[x];
    p2 += p * p;
    yp += dW[x] * p;
  }
  p2 = warp_sum(p2);
  yp = warp_sum(yp);
  const float an = sqrtf(p2), den = an + kRenormEps, target = nrm[(long long)i * nrows + r];
  if (lane == 0) dn[(long long)i * nrows + r] += yp / den;
  const float coef = an > 0.f ? target * yp / (den * den * an) : 0.f;
  for (int x = lane; x < w.len; x += 32) {
    const float p = W[x] + M[x];
    float dp = target / den * dW[x];
    if (an > 0.f) dp -= coef * p;
    dW[x] = dp;
    dG[x] = dp + cr * dG[x];
  }
}

// ∂L/∂m̄_c = ⟨∂L/∂m_c, m_{c−1}⟩ (0 for c = 0), spread evenly over the chunk's tokens: a block per
// head, a fixed tree.
__global__ void backward_momentum(const float* st, long long head_stride, int c, const float* dw,
                                  long long s_dw, float* dmomentum, long long F3, int H, int T,
                                  int C) {
  __shared__ float part[kThreads];
  const int i = blockIdx.x, n = i / H, h = i % H;
  float s = 0.f;
  if (c > 0) {
    const float* Mp = st + i * head_stride + (long long)(c - 1) * 2 * F3 + F3;
    const float* dG = dw + i * s_dw + F3;
    for (long long e = threadIdx.x; e < F3; e += blockDim.x) s += dG[e] * Mp[e];
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  const float dmean = part[0] / float(C);
  const long long row = (long long)n * T + (long long)c * C;
  for (int t = threadIdx.x; t < C; t += blockDim.x) dmomentum[(row + t) * H + h] = dmean;
}

// The backward's per-token d_h-vectors, in place, a warp per token t < L of a head (lact.cu's
// backward_kernel's formulas):
//   y0[t] ← gy0, y2[t] ← gy2, vh[t] ← the read's h (vh[t] holds dO W1 on entry);
//   update: y0[Cp+t] ← gz0, y2[Cp+t] ← gz2, vh[Cp+t] ← gdh, e0[t] ← lr0 dz0, e2[t] ← lr2 dz2,
//   a1[t] ← lr1 h; and the rates' gradients (0 without update; dmomentum 0 too, when given).
struct GatesBackArgs {
  float *y0, *y2, *vh, *a1, *e0, *e2;
  const float* lr;
  long long s_y, s_e, s_lr;
  float *dlr0, *dlr1, *dlr2, *dmomentum;
  int H, T, Cp, dh, s, L;
  bool update;
};
__global__ void backward_gates(const GatesBackArgs a) {
  const int i = blockIdx.y, lane = threadIdx.x % 32, n = i / a.H, h = i % a.H;
  const int t = blockIdx.x * kWarps + threadIdx.x / 32;
  if (t >= a.L) return;
  float* Y0 = a.y0 + i * a.s_y + (long long)t * a.dh;
  float* Y2 = a.y2 + i * a.s_y + (long long)t * a.dh;
  float* VH = a.vh + i * a.s_y + (long long)t * a.dh;
  float* A1 = a.a1 + i * a.s_e + (long long)t * a.dh;
  float* E0 = a.e0 + i * a.s_e + (long long)t * a.dh;
  float* E2 = a.e2 + i * a.s_e + (long long)t * a.dh;
  const long long off = (long long)a.Cp * a.dh;
  const float* LR = a.lr + i * a.s_lr;
  float g0 = 0.f, g1 = 0.f, g2 = 0.f;
  const float l0 = a.update ? LR[t] : 0.f, l1 = a.update ? LR[a.Cp + t] : 0.f,
              l2 = a.update ? LR[2 * a.Cp + t] : 0.f;
  for (int j = lane; j < a.dh; j += 32) {
    {
      const float y0 = Y0[j], y2 = Y2[j], dhq = VH[j];
      const Silu sy = silu_of(y0);
      VH[j] = sy.s * y2;
      Y0[j] = (dhq * y2) * sy.d1;
      Y2[j] = dhq * sy.s;
    }
    if (a.update) {
      const float z0 = Y0[off + j], z2 = Y2[off + j], dhv = VH[off + j];
      const float av = A1[j], ev0 = E0[j], ev2 = E2[j];
      const float ddz0 = l0 * ev0, ddz2 = l2 * ev2;
      const Silu sz = silu_of(z0);
      const float hv = sz.s * z2, dg = dhv * z2;
      const float dz0 = dg * sz.d1, dz2 = dhv * sz.s;
      const float dH = l1 * av, dDG = ddz0 * sz.d1;
      const float ds = ddz2 * dhv + dH * z2;
      Y0[off + j] = ddz0 * dg * sz.d2 + ds * sz.d1;  // gz0
      VH[off + j] = dDG * z2 + ddz2 * sz.s;          // gdh
      Y2[off + j] = dDG * dhv + dH * sz.s;           // gz2
      A1[j] = l1 * hv;
      E0[j] = l0 * dz0;
      E2[j] = l2 * dz2;
      g0 += dz0 * ev0;
      g1 += av * hv;
      g2 += dz2 * ev2;
    }
  }
  g0 = warp_sum(g0);
  g1 = warp_sum(g1);
  g2 = warp_sum(g2);
  if (lane == 0) {
    const long long rr = ((long long)n * a.T + a.s + t) * a.H + h;
    a.dlr0[rr] = g0;
    a.dlr1[rr] = g1;
    a.dlr2[rr] = g2;
    if (!a.update && a.dmomentum) a.dmomentum[rr] = 0.f;  // the last chunk takes no step
  }
}

// ∂L/∂W_init: dW += dn / nrm · W_init per row (the targets are the initial row norms), then the
// three gradients written out. A warp per row.
__global__ void backward_finish(const float* st, long long head_stride, float* dw, long long s_dw,
                                const float* nrm, const float* dn, float* o0, float* o1, float* o2,
                                int d, int dh) {
  const int nrows = 2 * dh + d, i = blockIdx.y, lane = threadIdx.x % 32;
  const int r = blockIdx.x * kWarps + threadIdx.x / 32;
  if (r >= nrows) return;
  const long long F = (long long)dh * d;
  const Row w = row_of(r, d, dh);
  const float* W = st + i * head_stride + w.start;
  const float* dW = dw + i * s_dw + w.start;
  const float target = nrm[(long long)i * nrows + r];
  const float f = target > 0.f ? dn[(long long)i * nrows + r] / target : 0.f;
  const bool add = target > 0.f;
  float* dst = (r < dh ? o0 : r < dh + d ? o1 : o2) + i * F + (w.start % F);
  for (int x = lane; x < w.len; x += 32) dst[x] = add ? dW[x] + f * W[x] : dW[x];
}

// ---- host ----------------------------------------------------------------------------------------

inline void require(bool ok, const char* fn, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(fn) + ": " + what);
}
void require_ld(int ld, const LactDims& d, const char* fn, const char* name) {
  require(ld >= d.heads * d.dim, fn, std::string(name) + " is smaller than H·d");
}
inline void check_launch() { TTTLAB_CUDA_CHECK(cudaGetLastError()); }

int blocks(long long n, int cap = 4096) {
  return int(std::max<long long>(1, std::min<long long>((n + kThreads - 1) / kThreads, cap)));
}

// The batched product over the B·H heads: entry i reads A + i·sa, B + i·sb, writes C + i·sc.
struct Batched {
  const Gemm& g;
  int heads;
  void operator()(bool ta, bool tb, int M, int N, int K, const float* A, int lda, long long sa,
                  const float* B, int ldb, long long sb, float beta, float* C, int ldc,
                  long long sc) const {
    g.batched(ta, tb, M, N, K, 1.f, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, heads);
  }
};

void common_checks(const char* fn, const LactDims& d, const Gemm& gemm, const void* ws,
                   std::size_t ws_bytes, CUstream_st* stream) {
  const std::string why = lact_chunked_unsupported(d);
  require(why.empty(), fn, why);
  require(gemm.stream() == stream, fn,
          "stream differs from the Gemm's stream (the products run on the Gemm's)");
  require(ws != nullptr, fn, "workspace must not be null (lact_chunked_workspace_bytes)");
  require(ws_bytes >= lact_chunked_workspace_bytes(d), fn,
          "workspace_bytes is smaller than lact_chunked_workspace_bytes(dims)");
  require(std::size_t(d.batch) * d.heads <= 65535, fn,
          "batch·heads above 65535 (a grid row per head, and the built-in GEMM's grid z)");
}

}  // namespace

std::string lact_chunked_unsupported(const LactDims& d) {
  constexpr int kMaxDim = 512, kMaxHidden = 2048;
  if (d.dim < 1 || d.dim > kMaxDim)
    return "LaCT's chunked form needs dim in 1.." + std::to_string(kMaxDim) + ", got " +
           std::to_string(d.dim);
  if (d.hidden < 1 || d.hidden > kMaxHidden)
    return "LaCT's chunked form needs hidden (d_h) in 1.." + std::to_string(kMaxHidden) + ", got " +
           std::to_string(d.hidden);
  LactDims rest = d;  // every other field as the kernels check it
  rest.dim = rest.hidden = 1;
  return lact_unsupported(rest);
}

std::size_t lact_chunked_workspace_bytes(const LactDims& d) {
  if (!lact_chunked_unsupported(d).empty()) return 0;
  return sizeof(float) * std::size_t(layout_of(shape_of(d)).total);
}

void lact_forward_chunked(const Gemm& gemm, const LactForwardArgs& a) {
  const char* fn = "lact_forward_chunked";
  const LactDims& d = a.dims;
  common_checks(fn, d, gemm, a.workspace, a.workspace_bytes, a.stream);
  require(a.q && a.k && a.v && a.lr0 && a.lr1 && a.lr2 && a.w0 && a.w1 && a.w2 && a.o && a.states,
          fn, "q, k, v, lr0, lr1, lr2, w0, w1, w2, o and states must not be null");
  require(!a.w0_final == !a.w1_final && !a.w0_final == !a.w2_final, fn,
          "w0_final, w1_final and w2_final must be all given or all null");
  require_ld(a.ld_q, d, fn, "ld_q");
  require_ld(a.ld_k, d, fn, "ld_k");
  require_ld(a.ld_v, d, fn, "ld_v");
  require_ld(a.ld_o, d, fn, "ld_o");

  const Shape s = shape_of(d);
  const Layout l = layout_of(s);
  const int BH = s.heads(), dm = s.d, dh = s.dh, Cp = s.Cp;
  const long long F = s.F, hs = (long long)s.nc * 6 * F;  // a head's states
  cudaStream_t st = a.stream;
  float* ws = static_cast<float*>(a.workspace);
  float *qk = ws + l.o_qk, *dv = ws + l.o_dv, *lr = ws + l.o_lr, *y0 = ws + l.o_y0,
        *y2 = ws + l.o_y2, *vh = ws + l.o_dh, *out = ws + l.o_out, *nrm = ws + l.o_nrm,
        *mbar = ws + l.o_mbar;
  const Batched mm{gemm, BH};
  const dim3 rows_grid((s.nrows + kWarps - 1) / kWarps, BH);

  copy_weights<<<blocks(3 * F * BH), kThreads, 0, st>>>(a.states, hs, 0, a.w0, a.w1, a.w2, nullptr,
                                                        nullptr, nullptr, F, BH, false);
  check_launch();
  row_norms<<<rows_grid, kThreads, 0, st>>>(a.states, hs, nrm, dm, dh);
  check_launch();
  if (a.momentum) {
    chunk_means<<<blocks((long long)BH * s.nc), kThreads, 0, st>>>(a.momentum, mbar, s.H, s.T, s.C,
                                                                   s.nc, s.upd, BH);
    check_launch();
  }
  for (int c = 0; c < s.nc; ++c) {
    const int t0 = c * s.C, L = c < s.upd ? s.C : s.T - t0;
    const bool update = c < s.upd;
    const float* W = a.states + (long long)c * 6 * F;  // head 0's W0; W1 at +F, W2 at +2F
    GatherArgs g{a.q, a.k, a.v,  nullptr, a.lr0, a.lr1, a.lr2, a.ld_q, a.ld_k, a.ld_v, 0, qk,
                 dv,  lr,  l.qk, l.dv,    l.lr,  s.H,   s.T,   dm,     Cp,     t0,     L, update};
    gather_chunk<<<dim3(blocks((long long)L * dm, 64), BH), kThreads, 0, st>>>(g);
    check_launch();
    const int M = update ? 2 * Cp : L;  // q rows, then k rows
    mm(false, true, M, dh, dm, qk, dm, l.qk, W, dm, hs, 0.f, y0, dh, l.y0);
    mm(false, true, M, dh, dm, qk, dm, l.qk, W + 2 * F, dm, hs, 0.f, y2, dh, l.y2);
    if (update)
      mm(false, false, Cp, dh, dm, dv + (long long)Cp * dm, dm, l.dv, W + F, dh, hs, 0.f,
         vh + (long long)Cp * dh, dh, l.dh);
    forward_gates<<<dim3(blocks((long long)L * dh, 64), BH), kThreads, 0, st>>>(
        y0, y2, vh, lr, l.y0, l.lr, Cp, dh, L, update);
    check_launch();
    mm(false, true, L, dm, dh, y0, dh, l.y0, W + F, dh, hs, 0.f, out, dm, l.out);
    scatter_chunk<<<dim3(blocks((long long)L * dm, 64), BH), kThreads, 0, st>>>(
        a.o, a.ld_o, out, l.out, 0, s.H, s.T, dm, t0, L, false);
    check_launch();
    if (!update) break;
    float* G = a.states + (long long)c * 6 * F + 3 * F;
    const float* Kp = qk + (long long)Cp * dm;
    mm(true, false, dh, dm, Cp, y0 + (long long)Cp * dh, dh, l.y0, Kp, dm, l.qk, 0.f, G, dm, hs);
    mm(true, false, dm, dh, Cp, dv + (long long)Cp * dm, dm, l.dv, vh + (long long)Cp * dh, dh,
       l.dh, 0.f, G + F, dh, hs);
    mm(true, false, dh, dm, Cp, y2 + (long long)Cp * dh, dh, l.y2, Kp, dm, l.qk, 0.f, G + 2 * F, dm,
       hs);
    forward_update<<<rows_grid, kThreads, 0, st>>>(a.states, hs, c, nrm, mbar, s.nc, dm, dh,
                                                   a.momentum != nullptr);
    check_launch();
  }
  if (a.w0_final) {
    copy_weights<<<blocks(3 * F * BH), kThreads, 0, st>>>(a.states, hs, (long long)s.upd * 6 * F,
                                                          nullptr, nullptr, nullptr, a.w0_final,
                                                          a.w1_final, a.w2_final, F, BH, true);
    check_launch();
  }
}

void lact_backward_chunked(const Gemm& gemm, const LactBackwardArgs& a) {
  const char* fn = "lact_backward_chunked";
  const LactDims& d = a.dims;
  common_checks(fn, d, gemm, a.workspace, a.workspace_bytes, a.stream);
  require(a.q && a.k && a.v && a.lr0 && a.lr1 && a.lr2 && a.states && a.dO, fn,
          "q, k, v, lr0, lr1, lr2, states and dO must not be null");
  require(a.dq && a.dk && a.dv && a.dlr0 && a.dlr1 && a.dlr2 && a.dw0 && a.dw1 && a.dw2, fn,
          "dq, dk, dv, dlr0, dlr1, dlr2, dw0, dw1 and dw2 must not be null");
  require(!a.momentum == !a.dmomentum, fn,
          "dmomentum must be given exactly when momentum is (null: no momentum)");
  require_ld(a.ld_q, d, fn, "ld_q");
  require_ld(a.ld_k, d, fn, "ld_k");
  require_ld(a.ld_v, d, fn, "ld_v");
  require_ld(a.ld_do, d, fn, "ld_do");
  require_ld(a.ld_dq, d, fn, "ld_dq");
  require_ld(a.ld_dk, d, fn, "ld_dk");
  require_ld(a.ld_dv, d, fn, "ld_dv");

  const Shape s = shape_of(d);
  const Layout l = layout_of(s);
  const int BH = s.heads(), dm = s.d, dh = s.dh, Cp = s.Cp;
  const long long F = s.F, hs = (long long)s.nc * 6 * F;
  cudaStream_t st = a.stream;
  float* ws = static_cast<float*>(a.workspace);
  float *qk = ws + l.o_qk, *dvb = ws + l.o_dv, *lr = ws + l.o_lr, *y0 = ws + l.o_y0,
        *y2 = ws + l.o_y2, *vh = ws + l.o_dh, *a1 = ws + l.o_a1, *e0 = ws + l.o_e0,
        *e2 = ws + l.o_e2, *out = ws + l.o_out, *dw = ws + l.o_dw, *nrm = ws + l.o_nrm,
        *dn = ws + l.o_dn, *mbar = ws + l.o_mbar;
  float* dG = dw + 3 * F;  // ∂L/∂m_c, head 0's (per-head stride l.dw)
  const Batched mm{gemm, BH};
  const dim3 rows_grid((s.nrows + kWarps - 1) / kWarps, BH);

  row_norms<<<rows_grid, kThreads, 0, st>>>(a.states, hs, nrm, dm, dh);
  check_launch();
  if (a.momentum) {
    chunk_means<<<blocks((long long)BH * s.nc), kThreads, 0, st>>>(a.momentum, mbar, s.H, s.T, s.C,
                                                                   s.nc, s.upd, BH);
    check_launch();
  }
  backward_init<<<blocks(6 * F * BH), kThreads, 0, st>>>(dw, l.dw, a.dw0_final, a.dw1_final,
                                                         a.dw2_final, dn, s.nrows, F, BH);
  check_launch();
  for (int c = s.nc - 1; c >= 0; --c) {
    const int t0 = c * s.C, L = c < s.upd ? s.C : s.T - t0;
    const bool update = c < s.upd;
    const float* W = a.states + (long long)c * 6 * F;
    if (update) {
      backward_renorm<<<rows_grid, kThreads, 0, st>>>(a.states, hs, c, dw, l.dw, nrm, dn, mbar,
                                                      s.nc, dm, dh,
                                                      a.momentum != nullptr && c + 1 < s.upd);
      check_launch();
      if (a.momentum) {
        backward_momentum<<<BH, kThreads, 0, st>>>(a.states, hs, c, dw, l.dw, a.dmomentum, 3 * F,
                                                   s.H, s.T, s.C);
        check_launch();
      }
    }
    GatherArgs g{a.q,    a.k,    a.v,     a.dO, a.lr0, a.lr1, a.lr2, a.ld_q,
                 a.ld_k, a.ld_v, a.ld_do, qk,   dvb,   lr,    l.qk,  l.dv,
                 l.lr,   s.H,    s.T,     dm,   Cp,    t0,    L,     update};
    gather_chunk<<<dim3(blocks((long long)L * dm, 64), BH), kThreads, 0, st>>>(g);
    check_launch();
    const int M = update ? 2 * Cp : L;  // q (dO) rows, then k (v) rows
    const float* Kp = qk + (long long)Cp * dm;
    const float* Vp = dvb + (long long)Cp * dm;
    mm(false, true, M, dh, dm, qk, dm, l.qk, W, dm, hs, 0.f, y0, dh, l.y0);
    mm(false, true, M, dh, dm, qk, dm, l.qk, W + 2 * F, dm, hs, 0.f, y2, dh, l.y2);
    mm(false, false, M, dh, dm, dvb, dm, l.dv, W + F, dh, hs, 0.f, vh, dh, l.dh);
    if (update) {
      mm(false, false, Cp, dh, dm, Vp, dm, l.dv, dG + F, dh, l.dw, 0.f, a1, dh, l.a1);  // V ∂L/∂G1
      mm(false, true, Cp, dh, dm, Kp, dm, l.qk, dG, dm, l.dw, 0.f, e0, dh, l.e0);  // K ∂L/∂G0ᵀ
      mm(false, true, Cp, dh, dm, Kp, dm, l.qk, dG + 2 * F, dm, l.dw, 0.f, e2, dh, l.e2);
    }
    GatesBackArgs gb{y0,     y2,     vh,          a1,  e0,  e2, lr, l.y0, l.a1, l.lr,  a.dlr0,
                     a.dlr1, a.dlr2, a.dmomentum, s.H, s.T, Cp, dh, t0,   L,    update};
    backward_gates<<<dim3((L + kWarps - 1) / kWarps, BH), kThreads, 0, st>>>(gb);
    check_launch();
    // [dq; dk] = [gy0; gz0] W0 + [gy2; gz2] W2 (+ the step's terms on the k rows); dv.
    mm(false, false, M, dm, dh, y0, dh, l.y0, W, dm, hs, 0.f, out, dm, l.out);
    mm(false, false, M, dm, dh, y2, dh, l.y2, W + 2 * F, dm, hs, 1.f, out, dm, l.out);
    float* dk_out = out + (long long)Cp * dm;
    float* dv_out = out + 2LL * Cp * dm;
    if (update) {
      mm(false, false, Cp, dm, dh, e0, dh, l.e0, dG, dm, l.dw, 1.f, dk_out, dm, l.out);
      mm(false, false, Cp, dm, dh, e2, dh, l.e2, dG + 2 * F, dm, l.dw, 1.f, dk_out, dm, l.out);
      mm(false, true, Cp, dm, dh, a1, dh, l.a1, dG + F, dh, l.dw, 0.f, dv_out, dm, l.out);
      mm(false, true, Cp, dm, dh, vh + (long long)Cp * dh, dh, l.dh, W + F, dh, hs, 1.f, dv_out, dm,
         l.out);
    }
    // ∂L/∂W_c += the read's and the step's terms, stacked over the q (dO) and k (v) rows.
    mm(true, false, dh, dm, M, y0, dh, l.y0, qk, dm, l.qk, 1.f, dw, dm, l.dw);
    mm(true, false, dh, dm, M, y2, dh, l.y2, qk, dm, l.qk, 1.f, dw + 2 * F, dm, l.dw);
    mm(true, false, dm, dh, M, dvb, dm, l.dv, vh, dh, l.dh, 1.f, dw + F, dh, l.dw);
    const dim3 sg(blocks((long long)L * dm, 64), BH);
    scatter_chunk<<<sg, kThreads, 0, st>>>(a.dq, a.ld_dq, out, l.out, 0, s.H, s.T, dm, t0, L,
                                           false);
    check_launch();
    scatter_chunk<<<sg, kThreads, 0, st>>>(a.dk, a.ld_dk, out, l.out, (long long)Cp * dm, s.H, s.T,
                                           dm, t0, L, !update);
    check_launch();
    scatter_chunk<<<sg, kThreads, 0, st>>>(a.dv, a.ld_dv, out, l.out, 2LL * Cp * dm, s.H, s.T, dm,
                                           t0, L, !update);
    check_launch();
  }
  backward_finish<<<rows_grid, kThreads, 0, st>>>(a.states, hs, dw, l.dw, nrm, dn, a.dw0, a.dw1,
                                                  a.dw2, dm, dh);
  check_launch();
}

}  // namespace tttlab::kernels
