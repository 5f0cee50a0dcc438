// TTT-Linear dual-form forward on tensor cores, versions 4 (tf32) and 5 (3xTF32): version 2/3
// (ttt_linear_v2.cu, whose header explains the layout) with fewer instructions per mini-batch. The
// profile of version 2 showed an issue-bound kernel (1.5 warps per scheduler, one instruction every
// ~3 cycles per warp, ~1700 instructions per warp per mini-batch, 6 tf32 conversions per mma):
//   - every operand is converted once per use site and shared by the products that read it; the
//     tf32 "hi" part is cvt.rna, the "lo" part x − hi is handed to the tensor core as raw fp32 bits
//     (it reads the top 19 bits: truncation of a term already 2^-11 smaller); version 4 hands raw
//     fp32 bits for everything (truncation to tf32, no conversion instruction at all);
//   - C = Q Kᵀ is split over the warps by k-steps (each warp does 2 of them) and the partial 16×16
//     tiles are summed through shared memory at the barrier that already precedes Z̄ −= M G;
//   - the bias update Σ_j λ_j G[j, :] is spread over the 8 lanes that share columns and reduced with
//     shuffles instead of a 16-step loop per lane;
//   - the loss gradient's LayerNorm backward takes one cross-warp reduction round and barrier instead
//     of two (tile_lnl2_stats, whose comment has the derivation): 4 block barriers per mini-batch.
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

constexpr int kMb = 16;     // the mini-batch this kernel handles: one m16 tile (as version 2)
constexpr int kStages = 3;  // cp.async pipeline depth

// tf32 operand parts: hi (cvt.rna with SPLIT, raw bits without) and lo = x − hi (raw bits).
template <bool SPLIT>
__device__ __forceinline__ void parts(float x, uint32_t& hi, uint32_t& lo) {
  if constexpr (SPLIT) {
    hi = to_tf32(x);
    lo = __float_as_uint(x - __uint_as_float(hi));
  } else {
    hi = __float_as_uint(x);
    lo = 0;
  }
}

struct Op4 {
  uint32_t h[4], l[4];
};
struct Op2 {
  uint32_t h[2], l[2];
};

template <bool SPLIT>
__device__ __forceinline__ Op4 op4(float a0, float a1, float a2, float a3) {
  Op4 o;
  parts<SPLIT>(a0, o.h[0], o.l[0]);
  parts<SPLIT>(a1, o.h[1], o.l[1]);
  parts<SPLIT>(a2, o.h[2], o.l[2]);
  parts<SPLIT>(a3, o.h[3], o.l[3]);
  return o;
}

template <bool SPLIT>
__device__ __forceinline__ Op2 op2(float b0, float b1) {
  Op2 o;
  parts<SPLIT>(b0, o.h[0], o.l[0]);
  parts<SPLIT>(b1, o.h[1], o.l[1]);
  return o;
}

template <bool SPLIT>
__device__ __forceinline__ void mma_parts(float (&c)[4], const Op4& a, const Op2& b) {
  if constexpr (SPLIT) {
    mma_tf32(c, a.l[0], a.l[1], a.l[2], a.l[3], b.h[0], b.h[1]);
    mma_tf32(c, a.h[0], a.h[1], a.h[2], a.h[3], b.l[0], b.l[1]);
  }
  mma_tf32(c, a.h[0], a.h[1], a.h[2], a.h[3], b.h[0], b.h[1]);
}

struct V4Params {
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
struct V4Layout {
  static constexpr int NW = D / 16, NT = 32 * NW, KT = D / 8;
  static constexpr int LDX = D + 8;  // K, V, Q tiles: conflict-free 8-byte fragment loads
  static constexpr int LDG = D + 4;  // G
  static constexpr int TILE = kMb * LDX;
  static constexpr int STAGE = 3 * TILE + kMb;  // K, V, Q, λ
  static constexpr int RED = NW * 16 * 2;       // the output LN's cross-warp reduction round
  static constexpr int RED8 = NW * 16 * 8;      // the loss gradient's round (tile_lnl2_stats)
  static constexpr int LDM = 20;                 // partial C tiles [NW][16][LDM]
  static constexpr int FLOATS = kStages * STAGE + kMb * LDG + RED8 + RED + NW * 16 * LDM;
};

// Row statistics of a 16 × D tile held as accumulator fragments x[nt][i] (row gid + 8·(i>>1)),
// D/16 warps × 16 columns: mean and 1/σ of rows gid (half 0) and gid + 8 (half 1). Parallel
// variance: each warp contributes (sum, M2 about its own mean) and the halves are combined exactly.
template <int D>
__device__ __forceinline__ void tile_row_stats(const float (&x)[2][4], float* red, int warp,
                                               int gid, int tig, float eps, float (&mu)[2],
                                               float (&rstd)[2]) {
  using L = V4Layout<D>;
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

// The loss gradient G = ∂ℓ/∂Z of ℓ = ½‖γ ⊙ x̂ + β − r‖² per row, x̂ = (z − μ)·ρ, ρ = 1/√(σ² + ε),
// from ONE cross-warp reduction round (the LN backward otherwise needs a second round for its
// projection sums after the first has produced μ and ρ). Derivation, per row, sums over the D columns:
//   ĝ = γ ⊙ (γ ⊙ x̂ + β − r) = γ² ⊙ x̂ + u,   u = γ ⊙ (β − r),
//   G = ρ · (ĝ − S1/D − x̂ · S2/D),   S1 = Σ ĝ,   S2 = Σ ĝ ⊙ x̂,
//   S1 = ρ · Σ γ²(z − μ) + Σ u,
//   S2 = ρ² · Σ γ²(z − μ)² + ρ · Σ u (z − μ).
// So μ, σ², S1 and S2 all follow from row sums that do not need μ first, provided the sums are taken
// about a shift that each warp knows without communication. Raw sums (Σ z², Σ γ² z², ...) would
// cancel catastrophically when |μ| ≫ σ, so each warp w shifts by its own 16-column mean
// m_w = s_w / 16 (s_w = Σ_w z, one quad shuffle round) and reduces, with y = z − m_w,
//   q_w = Σ y²,  c_w = Σ γ² y,  e_w = Σ γ² y²,  f_w = Σ u y,  U_w = Σ u,  Γ_w = Σ γ².
// With μ = Σ_w s_w / D and δ_w = m_w − μ, z − μ = y + δ_w on warp w's columns; with Σ y = 0 per warp
// (up to rounding, dropped as in the two-round parallel variance)
//   Σ (z − μ)²     = Σ_w q_w + 16 δ_w²                 (the parallel-variance combination),
//   Σ γ²(z − μ)    = Σ_w c_w + δ_w Γ_w,
//   Σ γ²(z − μ)²   = Σ_w e_w + 2 δ_w c_w + δ_w² Γ_w,
//   Σ u (z − μ)    = Σ_w f_w + δ_w U_w,
//   Σ u            = Σ_w U_w.
// Every term is centred (y and δ_w are of the order of the row's spread, not of |μ|), so the fp32
// error is that of the two-round form. Outputs: x̂ and ĝ are recomputed by the caller from μ, ρ;
// this returns μ, ρ and the two projection coefficients S1/D and S2/D for rows gid, gid + 8.
template <int D>
__device__ __forceinline__ void tile_lnl2_stats(const float (&z)[2][4], const float (&u)[2][4],
                                                const float (&g2)[2][2], float gam2_w, float* red,
                                                int warp, int gid, int tig, float eps,
                                                float (&mu)[2], float (&rstd)[2], float (&p1)[2],
                                                float (&p2)[2]) {
  using L = V4Layout<D>;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float s = quad_sum(z[0][2 * hf] + z[0][2 * hf + 1] + z[1][2 * hf] + z[1][2 * hf + 1]);
    const float mw = s * (1.0f / 16.0f);
    float q = 0.0f, c = 0.0f, e = 0.0f, f = 0.0f, uu = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const float y = z[nt][2 * hf + k] - mw, gy = g2[nt][k] * y, uv = u[nt][2 * hf + k];
        q += y * y;
        c += gy;
        e += gy * y;
        f += uv * y;
        uu += uv;
      }
    q = quad_sum(q);
    c = quad_sum(c);
    e = quad_sum(e);
    f = quad_sum(f);
    uu = quad_sum(uu);
    if (tig == 0) {
      float4* dst = reinterpret_cast<float4*>(red + (warp * 16 + gid + 8 * hf) * 8);
      dst[0] = make_float4(s, q, c, e);
      dst[1] = make_float4(f, uu, gam2_w, 0.0f);
    }
  }
  __syncthreads();
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int row = gid + 8 * hf;
    float4 a[L::NW], b[L::NW];
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < L::NW; ++w) {
      a[w] = reinterpret_cast<const float4*>(red + (w * 16 + row) * 8)[0];
      b[w] = reinterpret_cast<const float4*>(red + (w * 16 + row) * 8)[1];
      s += a[w].x;
    }
    const float m = s * (1.0f / float(D));
    float m2 = 0.0f, pc = 0.0f, pe = 0.0f, pf = 0.0f, us = 0.0f;
#pragma unroll
    for (int w = 0; w < L::NW; ++w) {
      const float dw = a[w].x * (1.0f / 16.0f) - m;
      m2 += a[w].y + 16.0f * dw * dw;
      pc += a[w].z + dw * b[w].z;
      pe += a[w].w + dw * (2.0f * a[w].z + dw * b[w].z);
      pf += b[w].x + dw * b[w].y;
      us += b[w].y;
    }
    const float rs = 1.0f / sqrtf(m2 / float(D) + eps);
    mu[hf] = m;
    rstd[hf] = rs;
    p1[hf] = (rs * pc + us) * (1.0f / float(D));
    p2[hf] = rs * (rs * pe + pf) * (1.0f / float(D));
  }
}

template <int D, bool SPLIT>
__global__ void __launch_bounds__(2 * D) linear_forward_v4_kernel(V4Params p) {
  using L = V4Layout<D>;
  constexpr int KT = L::KT, LDX = L::LDX, LDG = L::LDG;
  extern __shared__ __align__(16) float smem[];
  float* stages = smem;
  float* sG = smem + kStages * L::STAGE;
  float* red = sG + kMb * LDG;
  float* Mp = red + L::RED8 + L::RED;  // [NW][16][LDM] partial C = Q Kᵀ of each warp

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
  float gam2[2][2];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) gam2[nt][e] = gam[nt][e] * gam[nt][e];
  // Σ γ² over the warp's 16 columns (the lanes of a quad hold 4 distinct columns each).
  const float gam2_w = quad_sum(gam2[0][0] + gam2[0][1] + gam2[1][0] + gam2[1][1]);
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

    // Z = K W and Z̄₀ = Q W: four accumulator chains over d/8 k-steps, each operand converted once.
    float z[2][4] = {}, zb[2][4] = {};
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
      const float2 k0 = *reinterpret_cast<const float2*>(sK + gid * LDX + kt * 8 + 2 * tig);
      const float2 k1 = *reinterpret_cast<const float2*>(sK + (gid + 8) * LDX + kt * 8 + 2 * tig);
      const float2 q0 = *reinterpret_cast<const float2*>(sQ + gid * LDX + kt * 8 + 2 * tig);
      const float2 q1 = *reinterpret_cast<const float2*>(sQ + (gid + 8) * LDX + kt * 8 + 2 * tig);
      const Op4 ak = op4<SPLIT>(k0.x, k1.x, k0.y, k1.y), aq = op4<SPLIT>(q0.x, q1.x, q0.y, q1.y);
      const Op2 w0 = op2<SPLIT>(Wr[kt][0], Wr[kt][1]), w1 = op2<SPLIT>(Wr[kt][2], Wr[kt][3]);
      mma_parts<SPLIT>(z[0], ak, w0);
      mma_parts<SPLIT>(z[1], ak, w1);
      mma_parts<SPLIT>(zb[0], aq, w0);
      mma_parts<SPLIT>(zb[1], aq, w1);
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        z[nt][i] += cb[nt][i & 1];
        zb[nt][i] += cb[nt][i & 1];
      }
    // This warp's share of C = Q Kᵀ: k-steps warp and warp + NW (d/8 = 2·NW k-steps in all).
    {
      float mp[2][4] = {};
#pragma unroll
      for (int s2 = 0; s2 < 2; ++s2) {
        const int kt = warp + s2 * L::NW;
        const float2 k0 = *reinterpret_cast<const float2*>(sK + gid * LDX + kt * 8 + 2 * tig);
        const float2 k1 = *reinterpret_cast<const float2*>(sK + (gid + 8) * LDX + kt * 8 + 2 * tig);
        const float2 q0 = *reinterpret_cast<const float2*>(sQ + gid * LDX + kt * 8 + 2 * tig);
        const float2 q1 = *reinterpret_cast<const float2*>(sQ + (gid + 8) * LDX + kt * 8 + 2 * tig);
        const Op4 aq = op4<SPLIT>(q0.x, q1.x, q0.y, q1.y);
        mma_parts<SPLIT>(mp[0], aq, op2<SPLIT>(k0.x, k0.y));
        mma_parts<SPLIT>(mp[1], aq, op2<SPLIT>(k1.x, k1.y));
      }
      float* mw = Mp + warp * 16 * L::LDM;
#pragma unroll
      for (int jt = 0; jt < 2; ++jt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
          *reinterpret_cast<float2*>(mw + (gid + 8 * hf) * L::LDM + jt * 8 + 2 * tig) =
              make_float2(mp[jt][2 * hf], mp[jt][2 * hf + 1]);
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
        float u[2][4];
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) u[nt][i] = gam[nt][i & 1] * (bet[nt][i & 1] - r[nt][i]);
        float mu[2], rstd[2], p1[2], p2[2];
        tile_lnl2_stats<D>(z, u, gam2, gam2_w, red, warp, gid, tig, p.eps, mu, rstd, p1, p2);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int hf = i >> 1;
            const float xh = (z[nt][i] - mu[hf]) * rstd[hf];
            const float gh = gam2[nt][i & 1] * xh + u[nt][i];
            g[nt][i] = (gh - p1[hf] - xh * p2[hf]) * rstd[hf];
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

    // C = Σ_w C_w at this lane's accumulator positions; M = τ_i λ_j (C + 1) on the lower triangle,
    // negated; then Z̄ = Z̄₀ − M G (M from registers, G rows read with the permuted j).
    float mc[2][4];
#pragma unroll
    for (int jt = 0; jt < 2; ++jt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float2 acc = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int w = 0; w < L::NW; ++w) {
          const float2 v = *reinterpret_cast<const float2*>(Mp + w * 16 * L::LDM +
                                                            (gid + 8 * hf) * L::LDM + jt * 8 + 2 * tig);
          acc.x += v.x;
          acc.y += v.y;
        }
        const int row = gid + 8 * hf, j = jt * 8 + 2 * tig;
        mc[jt][2 * hf] = j <= row ? -tau_row[hf] * sL[j] * (acc.x + one) : 0.0f;
        mc[jt][2 * hf + 1] = j + 1 <= row ? -tau_row[hf] * sL[j + 1] * (acc.y + one) : 0.0f;
      }
#pragma unroll
    for (int js = 0; js < 2; ++js) {
      const Op4 am = op4<SPLIT>(mc[js][0], mc[js][2], mc[js][1], mc[js][3]);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float* gp = sG + (js * 8 + 2 * tig) * LDG + col0 + nt * 8 + gid;
        mma_parts<SPLIT>(zb[nt], am, op2<SPLIT>(gp[0], gp[LDG]));
      }
    }

    // O = [Q +] LN(Z̄).
    {
      float mu[2] = {0.0f, 0.0f}, rstd[2] = {1.0f, 1.0f};
      if (p.ln) tile_row_stats<D>(zb, red + L::RED8, warp, gid, tig, p.eps, mu, rstd);
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
        const Op4 ag = op4<SPLIT>(e0 * sG[j0 * LDG + col0 + gid], e0 * sG[j0 * LDG + col0 + gid + 8],
                                  e1 * sG[j1 * LDG + col0 + gid], e1 * sG[j1 * LDG + col0 + gid + 8]);
#pragma unroll
        for (int kt = 0; kt < KT; ++kt)
          mma_parts<SPLIT>(acc[kt], ag, op2<SPLIT>(sK[j0 * LDX + kt * 8 + gid], sK[j1 * LDX + kt * 8 + gid]));
      }
      // Σ_j λ_j G[j, col] for the lane's 4 columns: rows gid and gid + 8 here, then the 8 lanes that
      // share tig (lane bits 2..4) are summed.
      float cacc[2][2];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float2 g0 = *reinterpret_cast<const float2*>(sG + gid * LDG + col0 + nt * 8 + 2 * tig);
        const float2 g1 = *reinterpret_cast<const float2*>(sG + (gid + 8) * LDG + col0 + nt * 8 + 2 * tig);
        cacc[nt][0] = sL[gid] * g0.x + sL[gid + 8] * g1.x;
        cacc[nt][1] = sL[gid] * g0.y + sL[gid + 8] * g1.y;
#pragma unroll
        for (int e = 0; e < 2; ++e)
#pragma unroll
          for (int o = 4; o < 32; o <<= 1) cacc[nt][e] += __shfl_xor_sync(0xffffffffu, cacc[nt][e], o);
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
void launch_v4(const V4Params& p, int blocks, cudaStream_t stream) {
  const std::size_t bytes = V4Layout<D>::FLOATS * sizeof(float);
  const void* fn = reinterpret_cast<const void*>(&linear_forward_v4_kernel<D, SPLIT>);
  set_smem_limit(fn, bytes);
  linear_forward_v4_kernel<D, SPLIT><<<blocks, V4Layout<D>::NT, bytes, stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

template <bool SPLIT>
void dispatch_v4(const V4Params& p, int d, int blocks, cudaStream_t stream) {
  switch (d) {
    case 16:
      return launch_v4<16, SPLIT>(p, blocks, stream);
    case 32:
      return launch_v4<32, SPLIT>(p, blocks, stream);
    case 64:
      return launch_v4<64, SPLIT>(p, blocks, stream);
    case 128:
      return launch_v4<128, SPLIT>(p, blocks, stream);
    default:
      throw std::invalid_argument("ttt_linear_forward v4: unsupported head_dim " + std::to_string(d));
  }
}

bool aligned16(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

}  // namespace

void linear_forward_v4(const TttLinearForwardArgs& a, bool split) {
  require(aligned16(a.Q) && aligned16(a.K) && aligned16(a.V) && aligned16(a.O),
          "ttt_linear_forward v4/v5: Q, K, V and O must be 16-byte aligned");
  V4Params p{};
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
    dispatch_v4<true>(p, a.dims.head_dim, blocks, a.stream);
  else
    dispatch_v4<false>(p, a.dims.head_dim, blocks, a.stream);
}

}  // namespace tttlab::kernels::detail
