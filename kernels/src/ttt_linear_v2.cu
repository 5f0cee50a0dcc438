// TTT-Linear dual-form forward on tensor cores (versions 2 and 3 of ttt_linear_forward).
//
// One block per (sequence, head) of d/16 warps; warp w owns output columns 16w..16w+15 of every
// product and the matching 16 columns of the state W, which stay in REGISTERS for the whole
// sequence (d/8 × 4 floats per lane). Each mini-batch (b = 16 tokens = one m16 tile):
//   Z = K W + 1c,  Z̄₀ = Q W + 1c,  C = Q Kᵀ            one k-loop, 6 independent mma chains
//   G = lnl2(Z, V − K)                                 row statistics: warp shuffles + one smem round
//   Z̄ = Z̄₀ − M G,  M = τ_i λ_j (C + 1) masked j ≤ i  M is turned from accumulator into operand
//                                                     layout in registers (see below)
//   O = [Q +] LN(Z̄);   W ← W − τ_b Kᵀ diag(λ) G       the update lands in W's register layout
// Products use mma.sync.m16n8k8 with tf32 operands and fp32 accumulation. With SPLIT (version 3)
// every operand x is split into hi = tf32(x) and lo = tf32(x − hi) and a·b is taken as
// a_hi·b_hi + a_hi·b_lo + a_lo·b_hi, which recovers fp32-level accuracy (the dropped a_lo·b_lo term
// is ~2^-22 relative).
//
// Layout trick: the contraction index k of a product may be permuted freely as long as A and B use
// the same permutation. The accumulator fragment of m16n8k8 holds columns (2t, 2t+1) of an 8-wide
// tile, the A/B operand fragments hold k = (t, t+4). Reading k position t as 2t and t+4 as 2t+1
// lets an accumulator (the W update, the masked M) serve directly as an operand with no shuffles,
// and turns the shared-memory operand loads of K and Q into 8-byte loads.
//
// Inputs stream through a 3-stage cp.async pipeline (K, V, Q, λ of mini-batch mb+2 load while mb
// is computed). Rows past the end of a short last mini-batch are zero-filled and get λ = 0, so they
// contribute nothing; they are not stored.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "ttt_common.cuh"
#include "ttt_host.hpp"
#include "ttt_linear_internal.hpp"
#include "ttt_mma.cuh"

namespace tttlab::kernels::detail {
namespace {

constexpr int kMb = 16;     // the mini-batch this kernel handles: one m16 tile
constexpr int kStages = 3;  // cp.async pipeline depth

struct V2Params {
  const float *Q, *K, *V, *lam, *tau, *gamma, *beta, *W0, *b0;
  float* O;
  float *ckW, *ckb;
  float *fW, *fb, *faW, *fab;
  int H, T, group, n_ck;
  bool ln, res, bias, per_seq;
  float eps;
};

__device__ __forceinline__ void cp_async16(float* dst, const float* src, int bytes) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void cp_async4(float* dst, const float* src, int bytes) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Sum over the 4 lanes of a quad (the lanes that share a row in an accumulator fragment).
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

template <int D>
struct V2Layout {
  static constexpr int NW = D / 16, NT = 32 * NW, KT = D / 8;
  static constexpr int LDX = D + 8;  // K, V, Q tiles: conflict-free 8-byte fragment loads
  static constexpr int LDG = D + 4;  // G
  static constexpr int TILE = kMb * LDX;
  static constexpr int STAGE = 3 * TILE + kMb;  // K, V, Q, λ
  static constexpr int RED = NW * 16 * 2;       // one cross-warp reduction round
  static constexpr int FLOATS = kStages * STAGE + kMb * LDG + 3 * RED;
};

// Row statistics of a 16 × D tile held as accumulator fragments x[nt][i] (row gid + 8·(i>>1)),
// D/16 warps × 16 columns: mean and 1/σ of rows gid (half 0) and gid + 8 (half 1). Parallel
// variance: each warp contributes (sum, M2 about its own mean) and the halves are combined exactly.
template <int D>
__device__ __forceinline__ void tile_row_stats(const float (&x)[2][4], float* red, int warp,
                                               int gid, int tig, float eps, float (&mu)[2],
                                               float (&rstd)[2]) {
  using L = V2Layout<D>;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float s = quad_sum(x[0][2 * hf] + x[0][2 * hf + 1] + x[1][2 * hf] + x[1][2 * hf + 1]);
    const float mw = s * (1.0f / 16.0f);
    float q = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float dv = x[nt][2 * hf + e] - mw;
        q += dv * dv;
      }
    q = quad_sum(q);
    if (tig == 0) {
      red[(warp * 16 + gid + 8 * hf) * 2 + 0] = s;
      red[(warp * 16 + gid + 8 * hf) * 2 + 1] = q;
    }
  }
  __syncthreads();
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int row = gid + 8 * hf;
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < L::NW; ++w) s += red[(w * 16 + row) * 2];
    const float m = s / float(D);
    float m2 = 0.0f;
#pragma unroll
    for (int w = 0; w < L::NW; ++w) {
      const float dm = red[(w * 16 + row) * 2] * (1.0f / 16.0f) - m;
      m2 += red[(w * 16 + row) * 2 + 1] + 16.0f * dm * dm;
    }
    mu[hf] = m;
    rstd[hf] = 1.0f / sqrtf(m2 / float(D) + eps);
  }
}

// Two row sums over the whole 16 × D tile (both halves), one smem round.
template <int D>
__device__ __forceinline__ void tile_row_sums2(const float (&a)[2][4], const float (&b)[2][4],
                                               float* red, int warp, int gid, int tig,
                                               float (&sa)[2], float (&sb)[2]) {
  using L = V2Layout<D>;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float x = quad_sum(a[0][2 * hf] + a[0][2 * hf + 1] + a[1][2 * hf] + a[1][2 * hf + 1]);
    const float y = quad_sum(b[0][2 * hf] + b[0][2 * hf + 1] + b[1][2 * hf] + b[1][2 * hf + 1]);
    if (tig == 0) {
      red[(warp * 16 + gid + 8 * hf) * 2 + 0] = x;
      red[(warp * 16 + gid + 8 * hf) * 2 + 1] = y;
    }
  }
  __syncthreads();
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int row = gid + 8 * hf;
    float x = 0.0f, y = 0.0f;
#pragma unroll
    for (int w = 0; w < L::NW; ++w) {
      x += red[(w * 16 + row) * 2];
      y += red[(w * 16 + row) * 2 + 1];
    }
    sa[hf] = x;
    sb[hf] = y;
  }
}

template <int D, bool SPLIT>
__global__ void __launch_bounds__(2 * D) linear_forward_v2_kernel(V2Params p) {
  using L = V2Layout<D>;
  constexpr int KT = L::KT, LDX = L::LDX, LDG = L::LDG;
  extern __shared__ __align__(16) float smem[];
  float* stages = smem;
  float* sG = smem + kStages * L::STAGE;
  float* red = sG + kMb * LDG;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gid = lane >> 2, tig = lane & 3;
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int T = p.T, n_mb = (T + kMb - 1) / kMb;
  const std::size_t rs = std::size_t(p.H) * D;
  const std::size_t seq0 = std::size_t(n) * T * rs + std::size_t(h) * D;
  const int col0 = warp * 16;
  const float one = p.bias ? 1.0f : 0.0f;

  // The state: Wr[kt][i] = W[kt·8 + 2·tig + (i&1)][col0 + gid + 8·(i>>1)]; c for the lane's columns
  // col0 + nt·8 + 2·tig + e.
  float Wr[KT][4];
  {
    const float* W0 = p.W0 + (p.per_seq ? std::size_t(blk) : std::size_t(h)) * D * D;
#pragma unroll
    for (int kt = 0; kt < KT; ++kt)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        Wr[kt][i] = W0[(kt * 8 + 2 * tig + (i & 1)) * D + col0 + gid + 8 * (i >> 1)];
  }
  float cb[2][2], gam[2][2], bet[2][2];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int col = col0 + nt * 8 + 2 * tig + e;
      cb[nt][e] = p.bias ? p.b0[(p.per_seq ? std::size_t(blk) : std::size_t(h)) * D + col] : 0.0f;
      gam[nt][e] = p.ln ? p.gamma[std::size_t(h) * D + col] : 1.0f;
      bet[nt][e] = p.ln ? p.beta[std::size_t(h) * D + col] : 0.0f;
    }
  const float tau_row[2] = {p.tau[gid], p.tau[gid + 8]};
  const float tb = p.tau[kMb - 1];

  auto prefetch = [&](int mb) {
    if (mb < n_mb) {
      float* st = stages + (mb % kStages) * L::STAGE;
      const int t0 = mb * kMb, m = min(kMb, T - t0);
      constexpr int CPR = D / 4;  // 16-byte chunks per row
      for (int i = tid; i < 3 * kMb * CPR; i += L::NT) {
        const int tile = i / (kMb * CPR), rem = i % (kMb * CPR), r = rem / CPR, ch = rem % CPR;
        const float* base = tile == 0 ? p.K : (tile == 1 ? p.V : p.Q);
        const float* src = base + seq0 + std::size_t(t0 + min(r, m - 1)) * rs + ch * 4;
        cp_async16(st + tile * L::TILE + r * LDX + ch * 4, src, r < m ? 16 : 0);
      }
      if (tid < kMb)
        cp_async4(st + 3 * L::TILE + tid, p.lam + std::size_t(blk) * T + t0 + min(tid, m - 1),
                  tid < m ? 4 : 0);
    }
    cp_async_commit();
  };

  auto store_state = [&](float* Wd, float* cd, std::size_t slot) {
#pragma unroll
    for (int kt = 0; kt < KT; ++kt)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        Wd[slot * D * D + (kt * 8 + 2 * tig + (i & 1)) * D + col0 + gid + 8 * (i >> 1)] = Wr[kt][i];
    if (cd && gid == 0)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) cd[slot * D + col0 + nt * 8 + 2 * tig + e] = cb[nt][e];
  };

  prefetch(0);
  prefetch(1);
  for (int mb = 0; mb < n_mb; ++mb) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // this stage landed for every thread; the stage of mb − 1 is free
    prefetch(mb + kStages - 1);
    const float* sK = stages + (mb % kStages) * L::STAGE;
    const float* sV = sK + L::TILE;
    const float* sQ = sV + L::TILE;
    const float* sL = sQ + L::TILE;
    const int t0 = mb * kMb, m = min(kMb, T - t0);
    if (p.ckW && mb % p.group == 0) store_state(p.ckW, p.ckb, std::size_t(blk) * p.n_ck + mb / p.group);

    // Z = K W, Z̄₀ = Q W, C = Q Kᵀ: six independent accumulator chains over d/8 k-steps; for
    // d ≤ 64 the odd k-steps go to a second set of accumulators (twelve chains of half the length).
    constexpr int NA = D <= 64 ? 2 : 1;
    float za[NA][2][4] = {}, zba[NA][2][4] = {}, mca[NA][2][4] = {};
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
      const int a = kt % NA;
      const float2 k0 = *reinterpret_cast<const float2*>(sK + gid * LDX + kt * 8 + 2 * tig);
      const float2 k1 = *reinterpret_cast<const float2*>(sK + (gid + 8) * LDX + kt * 8 + 2 * tig);
      const float2 q0 = *reinterpret_cast<const float2*>(sQ + gid * LDX + kt * 8 + 2 * tig);
      const float2 q1 = *reinterpret_cast<const float2*>(sQ + (gid + 8) * LDX + kt * 8 + 2 * tig);
      mma<SPLIT>(za[a][0], k0.x, k1.x, k0.y, k1.y, Wr[kt][0], Wr[kt][1]);
      mma<SPLIT>(za[a][1], k0.x, k1.x, k0.y, k1.y, Wr[kt][2], Wr[kt][3]);
      mma<SPLIT>(zba[a][0], q0.x, q1.x, q0.y, q1.y, Wr[kt][0], Wr[kt][1]);
      mma<SPLIT>(zba[a][1], q0.x, q1.x, q0.y, q1.y, Wr[kt][2], Wr[kt][3]);
      mma<SPLIT>(mca[a][0], q0.x, q1.x, q0.y, q1.y, k0.x, k0.y);
      mma<SPLIT>(mca[a][1], q0.x, q1.x, q0.y, q1.y, k1.x, k1.y);
    }
    float z[2][4], zb[2][4], mc[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        z[nt][i] = za[0][nt][i];
        zb[nt][i] = zba[0][nt][i];
        mc[nt][i] = mca[0][nt][i];
#pragma unroll
        for (int a = 1; a < NA; ++a) {
          z[nt][i] += za[a][nt][i];
          zb[nt][i] += zba[a][nt][i];
          mc[nt][i] += mca[a][nt][i];
        }
      }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        z[nt][i] += cb[nt][i & 1];
        zb[nt][i] += cb[nt][i & 1];
      }
    // M[i, j] = τ_i λ_j (C + 1) on the lower triangle; negated for the subtraction below.
#pragma unroll
    for (int jt = 0; jt < 2; ++jt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = gid + 8 * (i >> 1), j = jt * 8 + 2 * tig + (i & 1);
        mc[jt][i] = j <= row ? -tau_row[i >> 1] * sL[j] * (mc[jt][i] + one) : 0.0f;
      }

    // G = lnl2(Z, R) at the lane's positions, then into shared memory.
    float g[2][4];
    {
      float r[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int off = (gid + 8 * hf) * LDX + col0 + nt * 8 + 2 * tig;
          const float2 v = *reinterpret_cast<const float2*>(sV + off);
          const float2 k = *reinterpret_cast<const float2*>(sK + off);
          r[nt][2 * hf] = p.res ? v.x - k.x : v.x;
          r[nt][2 * hf + 1] = p.res ? v.y - k.y : v.y;
        }
      if (p.ln) {
        float mu[2], rstd[2];
        tile_row_stats<D>(z, red, warp, gid, tig, p.eps, mu, rstd);
        float xh[2][4], gh[2][4], ghx[2][4];
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float gm = gam[nt][i & 1];
            xh[nt][i] = (z[nt][i] - mu[i >> 1]) * rstd[i >> 1];
            gh[nt][i] = gm * (gm * xh[nt][i] + bet[nt][i & 1] - r[nt][i]);
            ghx[nt][i] = gh[nt][i] * xh[nt][i];
          }
        float s1[2], s2[2];
        tile_row_sums2<D>(gh, ghx, red + L::RED, warp, gid, tig, s1, s2);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int hf = i >> 1;
            g[nt][i] = (gh[nt][i] - s1[hf] / float(D) - xh[nt][i] * (s2[hf] / float(D))) * rstd[hf];
          }
      } else {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) g[nt][i] = z[nt][i] - r[nt][i];
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
          *reinterpret_cast<float2*>(sG + (gid + 8 * hf) * LDG + col0 + nt * 8 + 2 * tig) =
              make_float2(g[nt][2 * hf], g[nt][2 * hf + 1]);
    }
    __syncthreads();  // G complete

    // Z̄ = Z̄₀ − M G   (M, negated, from registers; G rows read with the permuted j).
#pragma unroll
    for (int js = 0; js < 2; ++js)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float* gp = sG + (js * 8 + 2 * tig) * LDG + col0 + nt * 8 + gid;
        mma<SPLIT>(zb[nt], mc[js][0], mc[js][2], mc[js][1], mc[js][3], gp[0], gp[LDG]);
      }

    // O = [Q +] LN(Z̄).
    {
      float mu[2] = {0.0f, 0.0f}, rstd[2] = {1.0f, 1.0f};
      if (p.ln) tile_row_stats<D>(zb, red + 2 * L::RED, warp, gid, tig, p.eps, mu, rstd);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int row = gid + 8 * hf;
        if (row >= m) continue;
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const int col = col0 + nt * 8 + 2 * tig;
          float o0 = zb[nt][2 * hf], o1 = zb[nt][2 * hf + 1];
          if (p.ln) {
            o0 = gam[nt][0] * (o0 - mu[hf]) * rstd[hf] + bet[nt][0];
            o1 = gam[nt][1] * (o1 - mu[hf]) * rstd[hf] + bet[nt][1];
          }
          if (p.res) {
            const float2 q = *reinterpret_cast<const float2*>(sQ + row * LDX + col);
            o0 += q.x;
            o1 += q.y;
          }
          *reinterpret_cast<float2*>(p.O + seq0 + std::size_t(t0 + row) * rs + col) =
              make_float2(o0, o1);
        }
      }
    }

    // W ← W − τ_b Kᵀ diag(λ) G (full mini-batch), or the open accumulator Kᵀ diag(λ) G.
    const bool full = m == kMb;
    if (full || p.faW) {
      const float scale = full ? -tb : 1.0f;
      float acc[KT][4];
#pragma unroll
      for (int kt = 0; kt < KT; ++kt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[kt][i] = full ? Wr[kt][i] : 0.0f;
#pragma unroll
      for (int js = 0; js < 2; ++js) {
        const int j0 = js * 8 + tig, j1 = j0 + 4;
        const float e0 = scale * sL[j0], e1 = scale * sL[j1];
        const float a0 = e0 * sG[j0 * LDG + col0 + gid], a1 = e0 * sG[j0 * LDG + col0 + gid + 8];
        const float a2 = e1 * sG[j1 * LDG + col0 + gid], a3 = e1 * sG[j1 * LDG + col0 + gid + 8];
#pragma unroll
        for (int kt = 0; kt < KT; ++kt)
          mma<SPLIT>(acc[kt], a0, a1, a2, a3, sK[j0 * LDX + kt * 8 + gid], sK[j1 * LDX + kt * 8 + gid]);
      }
      float cacc[2][2];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float s = 0.0f;
          for (int j = 0; j < kMb; ++j) s += sL[j] * sG[j * LDG + col0 + nt * 8 + 2 * tig + e];
          cacc[nt][e] = s;
        }
      if (full) {
#pragma unroll
        for (int kt = 0; kt < KT; ++kt)
#pragma unroll
          for (int i = 0; i < 4; ++i) Wr[kt][i] = acc[kt][i];
        if (p.bias)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) cb[nt][e] -= tb * cacc[nt][e];
      } else {
#pragma unroll
        for (int kt = 0; kt < KT; ++kt)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            p.faW[std::size_t(blk) * D * D + (kt * 8 + 2 * tig + (i & 1)) * D + col0 + gid +
                  8 * (i >> 1)] = acc[kt][i];
        if (p.fab && gid == 0)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              p.fab[std::size_t(blk) * D + col0 + nt * 8 + 2 * tig + e] = p.bias ? cacc[nt][e] : 0.0f;
      }
    }
  }
  cp_async_wait<0>();

  if (p.fW) store_state(p.fW, p.fb, blk);
  if (T % kMb == 0) {
    if (p.faW)
      for (int i = tid; i < D * D; i += L::NT) p.faW[std::size_t(blk) * D * D + i] = 0.0f;
    if (p.fab)
      for (int i = tid; i < D; i += L::NT) p.fab[std::size_t(blk) * D + i] = 0.0f;
  }
}

template <int D, bool SPLIT>
void launch_v2(const V2Params& p, int blocks, cudaStream_t stream) {
  const std::size_t bytes = V2Layout<D>::FLOATS * sizeof(float);
  const void* fn = reinterpret_cast<const void*>(&linear_forward_v2_kernel<D, SPLIT>);
  set_smem_limit(fn, bytes);
  linear_forward_v2_kernel<D, SPLIT><<<blocks, V2Layout<D>::NT, bytes, stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

template <bool SPLIT>
void dispatch_v2(const V2Params& p, int d, int blocks, cudaStream_t stream) {
  switch (d) {
    case 16:
      return launch_v2<16, SPLIT>(p, blocks, stream);
    case 32:
      return launch_v2<32, SPLIT>(p, blocks, stream);
    case 64:
      return launch_v2<64, SPLIT>(p, blocks, stream);
    case 128:
      return launch_v2<128, SPLIT>(p, blocks, stream);
    default:
      throw std::invalid_argument("ttt_linear_forward v2: unsupported head_dim " + std::to_string(d));
  }
}

bool aligned16(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

}  // namespace

bool linear_forward_v2_supports(const TttDims& dims) {
  const int d = dims.head_dim;
  return dims.mini_batch == kMb && (d == 16 || d == 32 || d == 64 || d == 128);
}

void linear_forward_v2(const TttLinearForwardArgs& a, bool split) {
  require(aligned16(a.Q) && aligned16(a.K) && aligned16(a.V) && aligned16(a.O),
          "ttt_linear_forward v2/v3: Q, K, V and O must be 16-byte aligned");
  V2Params p{};
  set_token_inputs(p, a);
  p.W0 = a.W0;
  p.b0 = a.b0;
  p.O = a.O;
  p.ckW = a.checkpoint_W;
  p.ckb = a.checkpoint_b;
  p.fW = a.final_W;
  p.fb = a.final_b;
  p.faW = a.final_acc_W;
  p.fab = a.final_acc_b;
  p.H = a.dims.heads;
  p.T = a.dims.seq_len;
  p.group = a.checkpoint_group > 0 ? a.checkpoint_group : 1;
  p.n_ck = ttt_num_checkpoints(a.dims, p.group);
  p.ln = a.opt.layer_norm;
  p.res = a.opt.residual;
  p.bias = a.opt.bias;
  p.per_seq = a.per_sequence_init;
  p.eps = a.opt.ln_eps;
  const int blocks = a.dims.batch * a.dims.heads;
  if (split)
    dispatch_v2<true>(p, a.dims.head_dim, blocks, a.stream);
  else
    dispatch_v2<false>(p, a.dims.head_dim, blocks, a.stream);
}

}  // namespace tttlab::kernels::detail
