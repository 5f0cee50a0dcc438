// LaCT's large-chunk inner loop, forward and backward (see tttlab/kernels/lact.hpp; the maths is
// docs/MATH.md §11.10, the CPU functions it mirrors are lact_forward and lact_backward in
// core/src/fastweight/lact.cpp, whose order of operations it keeps where it can).
//
// One block per (sequence, head), blockIdx = (h, n), 256 threads. The weights of a chunk
// W = (W0, W1, W2) are 3·F floats (F = d_h·d) in the states, contiguous, so that "entry e of the
// weights" is one index over the three; a row of any of them is contiguous too (rows 0 … d_h − 1
// are W0's, d_h … d_h + d − 1 W1's, then W2's: 2 d_h + d rows). Work is handed out in three shapes,
// each a loop of stride blockDim.x:
//   token entries (r, j), r < tile rows, j < d_h: the token's hidden vectors (dots of length d);
//   token entries (r, i), i < d: the token's outputs and input gradients (dots of length d_h);
//   weight entries e < 3F: the tile's sum over its tokens added to a global accumulator that only
//   this thread touches (entry e belongs to thread e mod blockDim.x in every phase that uses it);
//   rows of the weights: norms and the renormalisation and its backward, a thread per row.
// Every sum runs in a fixed order by one thread; the few block sums (m̄, ⟨∂L/∂m, m_{c−1}⟩) are
// partials per thread summed in thread order by thread 0.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "tttlab/kernels/lact.hpp"

namespace tttlab::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxTile = 16;
constexpr int kMaxDim = 128;
constexpr int kMaxHidden = 512;
constexpr std::size_t kMaxSmem = 227 * 1024;  // the H200's opt-in limit per block
constexpr float kRenormEps = 1e-5f;           // the reference's renormalisation eps

__device__ __forceinline__ float sigmoid(float z) { return 1.f / (1.f + expf(-z)); }

// silu(z) = z σ(z); silu'(z) = σ (1 + z (1 − σ)); silu''(z) = σ (1 − σ) (2 + z (1 − 2σ)).
struct Silu {
  float s, d1, d2;
};
__device__ __forceinline__ Silu silu_of(float z, bool second) {
  const float sg = sigmoid(z);
  Silu r;
  r.s = z * sg;
  r.d1 = sg * (1.f + z * (1.f - sg));
  r.d2 = second ? sg * (1.f - sg) * (2.f + z * (1.f - 2.f * sg)) : 0.f;
  return r;
}

__device__ __forceinline__ float dot(const float* a, const float* b, int n) {
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
// Σ_i a[i] · b[i·stride]
__device__ __forceinline__ float dot_strided(const float* a, const float* b, int stride, int n) {
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += a[i] * b[std::size_t(i) * stride];
  return s;
}

// Row r of the three weights (layout above): its start and length.
struct Row {
  std::size_t start;
  int len;
};
__device__ __forceinline__ Row row_of(int r, int d, int dh) {
  const std::size_t F = std::size_t(dh) * d;
  if (r < dh) return {std::size_t(r) * d, d};
  if (r < dh + d) return {F + std::size_t(r - dh) * dh, dh};
  return {2 * F + std::size_t(r - dh - d) * d, d};
}

__device__ __forceinline__ float* shared_floats() {
  extern __shared__ float lact_shared[];
  return lact_shared;
}

// Row norms of the weights at W into nrm [2 d_h + d] (the renormalisation's targets).
__device__ void row_norms(const float* W, int d, int dh, float* nrm) {
  for (int r = threadIdx.x; r < 2 * dh + d; r += blockDim.x) {
    const Row w = row_of(r, d, dh);
    float s = 0.f;
    for (int x = 0; x < w.len; ++x) s += W[w.start + x] * W[w.start + x];
    nrm[r] = sqrtf(s);
  }
}

// The mean of a chunk's momentum (thread 0; the reference's mean: the sum in order over n).
__device__ float chunk_mean(const float* m, long long row, int n, int heads, int h) {
  float s = 0.f;
  for (int t = 0; t < n; ++t) s += m[(row + t) * heads + h];
  return s / float(n);
}

// Loads rows [row, row + nt) of head h of x [R, ld] into dst [nt, d].
__device__ __forceinline__ void load_tile(float* dst, const float* x, int ld, long long row,
                                          long long col, int nt, int d) {
  for (int i = threadIdx.x; i < nt * d; i += blockDim.x) {
    const int r = i / d, c = i % d;
    dst[i] = x[(row + r) * ld + col + c];
  }
}

__global__ void __launch_bounds__(kThreads) forward_kernel(const LactForwardArgs a, int tile) {
  const LactDims& dm = a.dims;
  const int d = dm.dim, dh = dm.hidden, C = dm.chunk, T = dm.seq_len, H = dm.heads;
  const int h = blockIdx.x, n = blockIdx.y, tid = threadIdx.x, nth = blockDim.x;
  const std::size_t F = std::size_t(dh) * d, F3 = 3 * F, head = std::size_t(n) * H + h;
  const int nc = (T + C - 1) / C, upd = (T - 1) / C;
  const long long row0 = (long long)n * T, col = (long long)h * d;
  float* st = a.states + head * nc * 6 * F;

  float* sm = shared_floats();
  float* nrm = sm;                 // [2 d_h + d]
  float* scal = nrm + 2 * dh + d;  // [4]: m̄
  float* sq = scal + 4;            // [tile, d] q, k, v
  float* sk = sq + tile * d;
  float* sv = sk + tile * d;
  float* slr = sv + tile * d;    // [3, tile] lr0, lr1, lr2
  float* hq = slr + 3 * tile;    // [tile, d_h] silu(q W0ᵀ) ⊙ (q W2ᵀ)
  float* hl1 = hq + tile * dh;   // lr1 ⊙ h (h of the keys)
  float* dz0 = hl1 + tile * dh;  // ∂(−ℓ)/∂z0
  float* dz2 = dz0 + tile * dh;  // ∂(−ℓ)/∂z2

  for (std::size_t e = tid; e < F; e += nth) {
    st[e] = a.w0[head * F + e];
    st[F + e] = a.w1[head * F + e];
    st[2 * F + e] = a.w2[head * F + e];
  }
  __syncthreads();
  row_norms(st, d, dh, nrm);

  for (int c = 0; c < nc; ++c) {
    const int s = c * C, L = c < upd ? C : T - s;
    const bool update = c < upd;
    const float* W = st + std::size_t(c) * 6 * F;
    const float *W0 = W, *W1 = W + F, *W2 = W + 2 * F;
    float* G = st + std::size_t(c) * 6 * F + F3;  // the chunk's step, summed here
    if (update)
      for (std::size_t e = tid; e < F3; e += nth) G[e] = 0.f;
    for (int t0 = 0; t0 < L; t0 += tile) {
      const int nt = min(tile, L - t0);
      const long long row = row0 + s + t0;
      // The previous tile's last reads of the tiles, or the chunk's renormalisation.
      __syncthreads();
      load_tile(sq, a.q, a.ld_q, row, col, nt, d);
      if (update) {
        load_tile(sk, a.k, a.ld_k, row, col, nt, d);
        load_tile(sv, a.v, a.ld_v, row, col, nt, d);
        for (int r = tid; r < nt; r += nth) {
          slr[r] = a.lr0[(row + r) * H + h];
          slr[tile + r] = a.lr1[(row + r) * H + h];
          slr[2 * tile + r] = a.lr2[(row + r) * H + h];
        }
      }
      __syncthreads();
      for (int i = tid; i < nt * dh; i += nth) {
        const int r = i / dh, j = i % dh;
        const float y0 = dot(sq + r * d, W0 + std::size_t(j) * d, d);
        const float y2 = dot(sq + r * d, W2 + std::size_t(j) * d, d);
        hq[i] = silu_of(y0, false).s * y2;
        if (update) {
          const float z0 = dot(sk + r * d, W0 + std::size_t(j) * d, d);
          const float z2 = dot(sk + r * d, W2 + std::size_t(j) * d, d);
          const float dhv = dot_strided(sv + r * d, W1 + j, dh, d);  // (v W1)_j
          const Silu sz = silu_of(z0, false);
          hl1[i] = slr[tile + r] * (sz.s * z2);
          dz2[i] = dhv * sz.s;
          dz0[i] = (dhv * z2) * sz.d1;
        }
      }
      __syncthreads();
      for (int i = tid; i < nt * d; i += nth) {
        const int r = i / d, x = i % d;
        a.o[(row + r) * a.ld_o + col + x] = dot(hq + r * dh, W1 + std::size_t(x) * dh, dh);
      }
      // G0 = dz0ᵀ (lr0 ⊙ K), G1 = Vᵀ (lr1 ⊙ H), G2 = dz2ᵀ (lr2 ⊙ K), over the tile's tokens.
      if (update)
        for (std::size_t e = tid; e < F3; e += nth) {
          float acc = G[e];
          if (e < F) {
            const int j = int(e / d), x = int(e % d);
            for (int r = 0; r < nt; ++r) acc += dz0[r * dh + j] * (slr[r] * sk[r * d + x]);
          } else if (e < 2 * F) {
            const int x = int((e - F) / dh), j = int((e - F) % dh);
            for (int r = 0; r < nt; ++r) acc += sv[r * d + x] * hl1[r * dh + j];
          } else {
            const int j = int((e - 2 * F) / d), x = int((e - 2 * F) % d);
            for (int r = 0; r < nt; ++r)
              acc += dz2[r * dh + j] * (slr[2 * tile + r] * sk[r * d + x]);
          }
          G[e] = acc;
        }
    }
    if (!update) break;
    // m_c = G + m̄ m_{c−1}; P = W + m_c into the next chunk's slot, then renormalised row by row.
    if (tid == 0) scal[0] = a.momentum ? chunk_mean(a.momentum, row0 + s, L, H, h) : 0.f;
    __syncthreads();
    const float mbar = scal[0];
    float* Wn = st + std::size_t(c + 1) * 6 * F;
    const float* Mp = c > 0 ? st + std::size_t(c - 1) * 6 * F + F3 : nullptr;
    for (std::size_t e = tid; e < F3; e += nth) {
      float m = G[e];
      if (a.momentum && Mp) m = m + Mp[e] * mbar;
      G[e] = m;
      Wn[e] = W[e] + m;
    }
    __syncthreads();
    for (int r = tid; r < 2 * dh + d; r += nth) {
      const Row w = row_of(r, d, dh);
      float s2 = 0.f;
      for (int x = 0; x < w.len; ++x) s2 += Wn[w.start + x] * Wn[w.start + x];
      const float den = sqrtf(s2) + kRenormEps, target = nrm[r];
      for (int x = 0; x < w.len; ++x) Wn[w.start + x] = Wn[w.start + x] / den * target;
    }
  }
  __syncthreads();
  if (a.w0_final) {
    const float* W = st + std::size_t(upd) * 6 * F;
    for (std::size_t e = tid; e < F; e += nth) {
      a.w0_final[head * F + e] = W[e];
      a.w1_final[head * F + e] = W[F + e];
      a.w2_final[head * F + e] = W[2 * F + e];
    }
  }
}

__global__ void __launch_bounds__(kThreads) backward_kernel(const LactBackwardArgs a, int tile) {
  const LactDims& dm = a.dims;
  const int d = dm.dim, dh = dm.hidden, C = dm.chunk, T = dm.seq_len, H = dm.heads;
  const int h = blockIdx.x, n = blockIdx.y, tid = threadIdx.x, nth = blockDim.x;
  const std::size_t F = std::size_t(dh) * d, F3 = 3 * F, head = std::size_t(n) * H + h;
  const int nc = (T + C - 1) / C, upd = (T - 1) / C, nrows = 2 * dh + d;
  const long long row0 = (long long)n * T, col = (long long)h * d;
  const float* st = a.states + head * nc * 6 * F;
  float* dW =
      static_cast<float*>(a.workspace) + head * 6 * F;  // ∂L/∂W_c (after the update: W_{c+1})
  float* dG = dW + F3;  // ∂L/∂m_c (then m̄_c times it is carried to m_{c−1})

  float* sm = shared_floats();
  float* nrm = sm;                // [2 d_h + d] the initial row norms
  float* dn = nrm + nrows;        // [2 d_h + d] ∂L/∂nrm
  float* part = dn + nrows;       // [blockDim.x] partial sums
  float* scal = part + kThreads;  // [4]: ⟨∂L/∂m_c, m_{c−1}⟩, m̄_c
  float* sq = scal + 4;           // [tile, d] q, k, v, dO
  float* sk = sq + tile * d;
  float* sv = sk + tile * d;
  float* sdo = sv + tile * d;
  float* a0k = sdo + tile * d;   // [tile, d] (dz0 ∂L/∂G0) ⊙ k, for ∂L/∂lr0
  float* a2k = a0k + tile * d;   // and for ∂L/∂lr2
  float* slr = a2k + tile * d;   // [3, tile]
  float* hl1 = slr + 3 * tile;   // [tile, d_h]: lr1 ⊙ h
  float* a1h = hl1 + tile * dh;  // (v ∂L/∂G1) ⊙ h, for ∂L/∂lr1
  float* dz0 = a1h + tile * dh;  // as the forward's
  float* dz2 = dz0 + tile * dh;
  float* gz0 = dz2 + tile * dh;  // ∂L/∂z0, ∂L/∂z2, ∂L/∂(v W1) through the step
  float* gz2 = gz0 + tile * dh;
  float* gdh = gz2 + tile * dh;
  float* hq = gdh + tile * dh;  // the read's h, ∂L/∂y0, ∂L/∂y2
  float* gy0 = hq + tile * dh;
  float* gy2 = gy0 + tile * dh;

  row_norms(st, d, dh, nrm);
  for (int r = tid; r < nrows; r += nth) dn[r] = 0.f;
  {
    const float* fin[3] = {a.dw0_final, a.dw1_final, a.dw2_final};
    for (std::size_t e = tid; e < F3; e += nth) {
      const float* f = fin[e / F];
      dW[e] = f ? f[head * F + e % F] : 0.f;
      dG[e] = 0.f;
    }
  }
  float carry = 0.f;  // m̄_{c+1}: ∂L/∂m_c gains m̄_{c+1} ∂L/∂m_{c+1}
  __syncthreads();

  for (int c = nc - 1; c >= 0; --c) {
    const int s = c * C, L = c < upd ? C : T - s;
    const bool update = c < upd;
    const float* W = st + std::size_t(c) * 6 * F;
    const float *W0 = W, *W1 = W + F, *W2 = W + 2 * F;
    const float* M = W + F3;  // m_c
    if (update) {
      // W_{c+1} = renorm(P), P = W_c + m_c: dW (∂L/∂W_{c+1}) becomes ∂L/∂P in place, and
      // ∂L/∂m_c = ∂L/∂P + m̄_{c+1} ∂L/∂m_{c+1}.
      for (int r = tid; r < nrows; r += nth) {
        const Row w = row_of(r, d, dh);
        float p2 = 0.f, dot_yp = 0.f;
        for (int x = 0; x < w.len; ++x) {
          const std::size_t e = w.start + x;
          const float p = W[e] + M[e];
          p2 += p * p;
          dot_yp += dW[e] * p;
        }
        const float an = sqrtf(p2), den = an + kRenormEps, target = nrm[r];
        dn[r] += dot_yp / den;
        const float coef = an > 0.f ? target * dot_yp / (den * den * an) : 0.f;
        for (int x = 0; x < w.len; ++x) {
          const std::size_t e = w.start + x;
          const float p = W[e] + M[e];
          float dp = target / den * dW[e];
          if (an > 0.f) dp -= coef * p;
          dW[e] = dp;
          dG[e] = dp + carry * dG[e];
        }
      }
      if (a.momentum) {
        // m_c = G_c + m̄_c m_{c−1}: ∂L/∂m̄_c = ⟨∂L/∂m_c, m_{c−1}⟩, spread evenly over the chunk.
        __syncthreads();
        float pd = 0.f;
        if (c > 0) {
          const float* Mp = st + std::size_t(c - 1) * 6 * F + F3;
          for (std::size_t e = tid; e < F3; e += nth) pd += dG[e] * Mp[e];
        }
        part[tid] = pd;
        __syncthreads();
        if (tid == 0) {
          float sum = 0.f;
          for (int i = 0; i < nth; ++i) sum += part[i];
          scal[0] = sum;
          scal[1] = chunk_mean(a.momentum, row0 + s, L, H, h);
        }
        __syncthreads();
        const float dmean = scal[0] / float(L);
        for (int r = tid; r < L; r += nth) a.dmomentum[(row0 + s + r) * H + h] = dmean;
        carry = scal[1];
      }
    }
    for (int t0 = 0; t0 < L; t0 += tile) {
      const int nt = min(tile, L - t0);
      const long long row = row0 + s + t0;
      // The previous tile's last reads, or the update's writes of dW, dG, scal.
      __syncthreads();
      load_tile(sq, a.q, a.ld_q, row, col, nt, d);
      load_tile(sdo, a.dO, a.ld_do, row, col, nt, d);
      if (update) {
        load_tile(sk, a.k, a.ld_k, row, col, nt, d);
        load_tile(sv, a.v, a.ld_v, row, col, nt, d);
        for (int r = tid; r < nt; r += nth) {
          slr[r] = a.lr0[(row + r) * H + h];
          slr[tile + r] = a.lr1[(row + r) * H + h];
          slr[2 * tile + r] = a.lr2[(row + r) * H + h];
        }
      }
      __syncthreads();
      const float *dG0 = dG, *dG1 = dG + F, *dG2 = dG + 2 * F;
      for (int i = tid; i < nt * dh; i += nth) {
        const int r = i / dh, j = i % dh;
        // The read: o = h W1ᵀ, h = silu(y0) ⊙ y2, y = q Wᵀ.
        {
          const float y0 = dot(sq + r * d, W0 + std::size_t(j) * d, d);
          const float y2 = dot(sq + r * d, W2 + std::size_t(j) * d, d);
          const float dhq = dot_strided(sdo + r * d, W1 + j, dh, d);  // (dO W1)_j
          const Silu sy = silu_of(y0, false);
          hq[i] = sy.s * y2;
          gy0[i] = (dhq * y2) * sy.d1;
          gy2[i] = dhq * sy.s;
        }
        if (update) {
          // The step's backward (lact_backward's order): G1 = Vᵀ (lr1 ⊙ h), G0 = dz0ᵀ (lr0 ⊙ K),
          // G2 = dz2ᵀ (lr2 ⊙ K); dz0 = (dh ⊙ z2) ⊙ silu'(z0), dz2 = dh ⊙ silu(z0), dh = v W1.
          const float l0 = slr[r], l1 = slr[tile + r], l2 = slr[2 * tile + r];
          const float z0 = dot(sk + r * d, W0 + std::size_t(j) * d, d);
          const float z2 = dot(sk + r * d, W2 + std::size_t(j) * d, d);
          const float dhv = dot_strided(sv + r * d, W1 + j, dh, d);
          const float a1 = dot_strided(sv + r * d, dG1 + j, dh, d);  // (v ∂L/∂G1)_j
          float ddz0 = 0.f, ddz2 = 0.f;                              // ((lr ⊙ k) ∂L/∂Gᵀ)_j
          for (int x = 0; x < d; ++x) {
            const float kx = sk[r * d + x];
            ddz0 += (l0 * kx) * dG0[std::size_t(j) * d + x];
            ddz2 += (l2 * kx) * dG2[std::size_t(j) * d + x];
          }
          const Silu sz = silu_of(z0, true);
          const float hv = sz.s * z2, dg = dhv * z2;
          hl1[i] = l1 * hv;
          a1h[i] = a1 * hv;
          dz0[i] = dg * sz.d1;
          dz2[i] = dhv * sz.s;
          const float dH = l1 * a1;
          const float dDG = ddz0 * sz.d1;
          const float ds = ddz2 * dhv + dH * z2;
          gz0[i] = ddz0 * dg * sz.d2 + ds * sz.d1;
          gdh[i] = dDG * z2 + ddz2 * sz.s;
          gz2[i] = dDG * dhv + dH * sz.s;
        }
      }
      __syncthreads();
      for (int i = tid; i < nt * d; i += nth) {
        const int r = i / d, x = i % d;
        const long long rr = row + r;
        float dqx = 0.f;
        for (int j = 0; j < dh; ++j)
          dqx += gy0[r * dh + j] * W0[std::size_t(j) * d + x] +
                 gy2[r * dh + j] * W2[std::size_t(j) * d + x];
        a.dq[rr * a.ld_dq + col + x] = dqx;
        float dkx = 0.f, dvx = 0.f;
        if (update) {
          float a0 = 0.f, a2 = 0.f, dv1 = 0.f, dv2 = 0.f, dk2 = 0.f;
          for (int j = 0; j < dh; ++j) {
            a0 += dz0[r * dh + j] * dG0[std::size_t(j) * d + x];
            a2 += dz2[r * dh + j] * dG2[std::size_t(j) * d + x];
            dv1 += hl1[r * dh + j] * dG1[std::size_t(x) * dh + j];
            dv2 += gdh[r * dh + j] * W1[std::size_t(x) * dh + j];
            dk2 += gz0[r * dh + j] * W0[std::size_t(j) * d + x] +
                   gz2[r * dh + j] * W2[std::size_t(j) * d + x];
          }
          const float kx = sk[r * d + x];
          a0k[i] = a0 * kx;
          a2k[i] = a2 * kx;
          dvx = dv1 + dv2;
          dkx = (slr[r] * a0 + slr[2 * tile + r] * a2) + dk2;
        }
        a.dk[rr * a.ld_dk + col + x] = dkx;
        a.dv[rr * a.ld_dv + col + x] = dvx;
      }
      __syncthreads();
      for (int r = tid; r < nt; r += nth) {
        const long long rr = row + r;
        float g0 = 0.f, g1 = 0.f, g2 = 0.f;
        if (update) {
          for (int x = 0; x < d; ++x) {
            g0 += a0k[r * d + x];
            g2 += a2k[r * d + x];
          }
          for (int j = 0; j < dh; ++j) g1 += a1h[r * dh + j];
        } else if (a.dmomentum) {
          a.dmomentum[rr * H + h] = 0.f;  // the last chunk takes no step
        }
        a.dlr0[rr * H + h] = g0;
        a.dlr1[rr * H + h] = g1;
        a.dlr2[rr * H + h] = g2;
      }
      // ∂L/∂W_c: through G (update) and through the read.
      for (std::size_t e = tid; e < F3; e += nth) {
        float acc = dW[e];
        if (e < F) {
          const int j = int(e / d), x = int(e % d);
          if (update)
            for (int r = 0; r < nt; ++r) acc += gz0[r * dh + j] * sk[r * d + x];
          for (int r = 0; r < nt; ++r) acc += gy0[r * dh + j] * sq[r * d + x];
        } else if (e < 2 * F) {
          const int x = int((e - F) / dh), j = int((e - F) % dh);
          if (update)
            for (int r = 0; r < nt; ++r) acc += sv[r * d + x] * gdh[r * dh + j];
          for (int r = 0; r < nt; ++r) acc += sdo[r * d + x] * hq[r * dh + j];
        } else {
          const int j = int((e - 2 * F) / d), x = int((e - 2 * F) % d);
          if (update)
            for (int r = 0; r < nt; ++r) acc += gz2[r * dh + j] * sk[r * d + x];
          for (int r = 0; r < nt; ++r) acc += gy2[r * dh + j] * sq[r * d + x];
        }
        dW[e] = acc;
      }
    }
    // The next (earlier) chunk's update reads dW by rows.
    __syncthreads();
  }
  // The renormalisation's targets are the initial weights' row norms: ∂nrm/∂W_0[r] = W_0[r] / nrm.
  for (int r = tid; r < nrows; r += nth) {
    const Row w = row_of(r, d, dh);
    const float target = nrm[r];
    if (!(target > 0.f)) continue;
    const float f = dn[r] / target;
    for (int x = 0; x < w.len; ++x) dW[w.start + x] += f * st[w.start + x];
  }
  __syncthreads();
  for (std::size_t e = tid; e < F; e += nth) {
    a.dw0[head * F + e] = dW[e];
    a.dw1[head * F + e] = dW[F + e];
    a.dw2[head * F + e] = dW[2 * F + e];
  }
}

inline void require(bool ok, const char* fn, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(fn) + ": " + what);
}

void require_ld(int ld, const LactDims& d, const char* fn, const char* name) {
  require(ld >= d.heads * d.dim, fn, std::string(name) + " is smaller than H·d");
}

// Floats of shared memory besides the tiles, and per tile row.
std::size_t forward_fixed_floats(const LactDims& d) { return 2 * d.hidden + d.dim + 4; }
std::size_t forward_row_floats(const LactDims& d) { return 3 * d.dim + 4 * d.hidden + 3; }
std::size_t backward_fixed_floats(const LactDims& d) {
  return 2 * (2 * d.hidden + d.dim) + kThreads + 4;
}
std::size_t backward_row_floats(const LactDims& d) { return 6 * d.dim + 10 * d.hidden + 3; }

int tile_rows(std::size_t fixed, std::size_t per_row, int chunk) {
  const std::size_t fit = (kMaxSmem / sizeof(float) - fixed) / per_row;
  const std::size_t rows = std::min<std::size_t>({fit, std::size_t(kMaxTile), std::size_t(chunk)});
  return int(rows);
}

// The dynamic shared-memory opt-in alone, not common/launch.hpp's allow_shared_memory: that also
// asks for the largest shared carveout, and these kernels read the weights through L1.
template <class Kernel>
void set_smem(Kernel kernel, std::size_t smem) {
  TTTLAB_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
}

}  // namespace

std::string lact_unsupported(const LactDims& d) {
  if (d.batch < 1) return "LaCT's kernels need batch >= 1, got " + std::to_string(d.batch);
  if (d.batch > 65535) return "LaCT's kernels take batch <= 65535 (one grid row per sequence)";
  if (d.seq_len < 1) return "LaCT's kernels need seq_len >= 1, got " + std::to_string(d.seq_len);
  if (d.heads < 1) return "LaCT's kernels need heads >= 1, got " + std::to_string(d.heads);
  if (d.dim < 1 || d.dim > kMaxDim)
    return "LaCT's kernels need dim in 1..128, got " + std::to_string(d.dim);
  if (d.hidden < 1 || d.hidden > kMaxHidden)
    return "LaCT's kernels need hidden (d_h) in 1..512, got " + std::to_string(d.hidden);
  if (d.chunk < 1) return "LaCT's kernels need chunk >= 1, got " + std::to_string(d.chunk);
  if (d.muon)
    return "LaCT's kernels do not implement muon (Newton–Schulz orthogonalisation of the step): "
           "use the CPU's lact_forward / lact_backward";
  return {};
}

std::size_t lact_state_floats(const LactDims& d) {
  return std::size_t(d.batch) * d.heads * d.chunks() * 6 * std::size_t(d.hidden) * d.dim;
}

std::size_t lact_backward_workspace_bytes(const LactDims& d) {
  return sizeof(float) * std::size_t(d.batch) * d.heads * 6 * std::size_t(d.hidden) * d.dim;
}

int lact_forward_tile_rows(const LactDims& d) {
  return tile_rows(forward_fixed_floats(d), forward_row_floats(d), d.chunk);
}
int lact_backward_tile_rows(const LactDims& d) {
  return tile_rows(backward_fixed_floats(d), backward_row_floats(d), d.chunk);
}
std::size_t lact_forward_smem_bytes(const LactDims& d) {
  return sizeof(float) *
         (forward_fixed_floats(d) + std::size_t(lact_forward_tile_rows(d)) * forward_row_floats(d));
}
std::size_t lact_backward_smem_bytes(const LactDims& d) {
  return sizeof(float) * (backward_fixed_floats(d) +
                          std::size_t(lact_backward_tile_rows(d)) * backward_row_floats(d));
}

void lact_forward(const LactForwardArgs& a) {
  const char* fn = "lact_forward";
  const LactDims& d = a.dims;
  const std::string why = lact_unsupported(d);
  require(why.empty(), fn, why);
  require(a.q && a.k && a.v && a.lr0 && a.lr1 && a.lr2 && a.w0 && a.w1 && a.w2 && a.o && a.states,
          fn, "q, k, v, lr0, lr1, lr2, w0, w1, w2, o and states must not be null");
  require(!a.w0_final == !a.w1_final && !a.w0_final == !a.w2_final, fn,
          "w0_final, w1_final and w2_final must be all given or all null");
  require_ld(a.ld_q, d, fn, "ld_q");
  require_ld(a.ld_k, d, fn, "ld_k");
  require_ld(a.ld_v, d, fn, "ld_v");
  require_ld(a.ld_o, d, fn, "ld_o");
  const std::size_t smem = lact_forward_smem_bytes(d);
  set_smem(forward_kernel, smem);
  forward_kernel<<<dim3(d.heads, d.batch), kThreads, smem, a.stream>>>(a,
                                                                       lact_forward_tile_rows(d));
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void lact_backward(const LactBackwardArgs& a) {
  const char* fn = "lact_backward";
  const LactDims& d = a.dims;
  const std::string why = lact_unsupported(d);
  require(why.empty(), fn, why);
  require(a.q && a.k && a.v && a.lr0 && a.lr1 && a.lr2 && a.states && a.dO, fn,
          "q, k, v, lr0, lr1, lr2, states and dO must not be null");
  require(
      a.dq && a.dk && a.dv && a.dlr0 && a.dlr1 && a.dlr2 && a.dw0 && a.dw1 && a.dw2 && a.workspace,
      fn, "dq, dk, dv, dlr0, dlr1, dlr2, dw0, dw1, dw2 and workspace must not be null");
  require(!a.momentum == !a.dmomentum, fn,
          "dmomentum must be given exactly when momentum is (null: no momentum)");
  require_ld(a.ld_q, d, fn, "ld_q");
  require_ld(a.ld_k, d, fn, "ld_k");
  require_ld(a.ld_v, d, fn, "ld_v");
  require_ld(a.ld_do, d, fn, "ld_do");
  require_ld(a.ld_dq, d, fn, "ld_dq");
  require_ld(a.ld_dk, d, fn, "ld_dk");
  require_ld(a.ld_dv, d, fn, "ld_dv");
  require(a.workspace_bytes >= lact_backward_workspace_bytes(d), fn,
          "workspace_bytes is smaller than lact_backward_workspace_bytes(dims)");
  const std::size_t smem = lact_backward_smem_bytes(d);
  set_smem(backward_kernel, smem);
  backward_kernel<<<dim3(d.heads, d.batch), kThreads, smem, a.stream>>>(a,
                                                                        lact_backward_tile_rows(d));
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tttlab::kernels
