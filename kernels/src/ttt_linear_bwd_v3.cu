// TTT-Linear backward, version 3: backward v2's maths (ttt-spec.md §7.3, phase by phase in
// ttt_linear_bwd_v2.cu) on the forward's register design (ttt_linear_v2.cu / ttt_linear_v4.cu).
//
// Shapes: b = 16 and d ∈ {16, 32, 64} (one m16 tile per mini-batch, d/16 warps, all of a block's
// buffers in shared memory at 2 blocks per SM for d = 64). Every other shape runs backward v2
// (ttt_linear_backward's dispatch); d = 128 needs a different buffer plan (two W stages and the
// carry's copy do not fit next to each other).
//
// Layout. One block of d/16 warps per (sequence, head); warp w owns the 16 columns 16w..16w+15 of
// every b×d tile (Z, G, Z̄, dZ̄, dG, dZ, dQ, dK, dV) and the same 16 columns of the carry dW', all
// held in mma accumulator fragments in registers. A mini-batch is one m16 tile; the b×b pieces (C,
// M, Mᵀ, dM, dC, dCᵀ) are summed from per-warp split-k partials in shared memory and held by every
// warp in registers, used as mma A operands with the permuted contraction index of the forward
// (k positions (t, t+4) read as (2t, 2t+1)), so no shuffles. dτ and dλ are row and column sums of
// those fragments (quad and cross-quad shuffles). Products whose contraction runs over columns
// that other warps own (dZ̄ Wᵀ, dZ Wᵀ, G dW'ᵀ, dZ̄ Gᵀ) read the other operand from shared memory:
// W of the mini-batch (loaded from the checkpoint or the group's slot) and a copy of dW' written
// after each update. Every product is 3xTF32 (fp32-level accuracy).
//
// Per mini-batch (the state W, c of its start; carry dW', dc'), 9 barriers with LayerNorm (v2: 14
// phases), each named by what it completes:
//   top        inputs of this mini-batch landed (cp.async: K, Q, λ, c, W); the previous mini-batch's
//              stage is issued now and its V, dO rows loaded into registers
//   Z stats    Z = KW + c, Z̄₀ = QW + c, partial C = QKᵀ; LN row statistics of Z
//   G sums     the two row sums of G = lnl2(Z, R)
//   G          G (rows ≥ m zeroed) in shared memory; M, Mᵀ from the C partials; Z̄ = Z̄₀ − MG
//   Z̄ stats    row statistics of Z̄ with Σ γdO and Σ γdO·(Z̄ − μ) in the same round → dZ̄
//   dZ̄         dZ̄ in shared memory; dQ = dO + dZ̄Wᵀ; partial dM = −dZ̄Gᵀ; KdW', GdW'ᵀ;
//              δ = dG = −Mᵀ dZ̄ − e(KdW' + dc'); dK = −e GdW'ᵀ; partial de
//   δ sums     Σδ, Σδx̂, Σδg (and the dM, de partials) → a, dR = dV, dx̂
//   dx̂ sums    Σdx̂, Σdx̂·x̂ → dZ; dC, dCᵀ from the dM partials: dQ += dC K, dK += dCᵀ Q; dτ, dλ
//   dZ         dZ in shared memory; dK += dZ Wᵀ − dR; dQ, dK, dV out; dW' += Qᵀ dZ̄ + Kᵀ dZ, dc'
//              likewise; dW' → shared memory for the next mini-batch's G dW'ᵀ
// Checkpoint groups: the states inside a group are recomputed from its checkpoint by the forward's
// update in registers (W in the forward's fragment layout, 3 barriers per mini-batch) and written
// to the group's slots, then the group is walked in reverse. The last mini-batch of a group issues
// the first loads of the next group (the recompute's, or with groups of one the walk's). The batch
// sums (dW0, db0, dγ, dβ, dτ) leave as per-block partials for the fixed-order reduction in
// ttt_linear.cu, as in v1 and v2: deterministic.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "ttt_linear_internal.hpp"
#include "ttt_mma.cuh"

namespace tttlab::kernels::detail {
namespace {

constexpr int kMb = 16;

struct Op4 {
  uint32_t h[4], l[4];
};
struct Op2 {
  uint32_t h[2], l[2];
};

__device__ __forceinline__ Op4 op4(float a0, float a1, float a2, float a3) {
  Op4 o;
  tf32_parts<true>(a0, o.h[0], o.l[0]);
  tf32_parts<true>(a1, o.h[1], o.l[1]);
  tf32_parts<true>(a2, o.h[2], o.l[2]);
  tf32_parts<true>(a3, o.h[3], o.l[3]);
  return o;
}

__device__ __forceinline__ Op2 op2(float b0, float b1) {
  Op2 o;
  tf32_parts<true>(b0, o.h[0], o.l[0]);
  tf32_parts<true>(b1, o.h[1], o.l[1]);
  return o;
}

__device__ __forceinline__ void mma3(float (&c)[4], const Op4& a, const Op2& b) {
  mma_tf32(c, a.l[0], a.l[1], a.l[2], a.l[3], b.h[0], b.h[1]);
  mma_tf32(c, a.h[0], a.h[1], a.h[2], a.h[3], b.l[0], b.l[1]);
  mma_tf32(c, a.h[0], a.h[1], a.h[2], a.h[3], b.h[0], b.h[1]);
}

__device__ __forceinline__ void cp_async16(float* dst, const float* src, int bytes) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async4(float* dst, const float* src, int bytes) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}
// Sum over the 8 lanes that share tig (the rows of an accumulator fragment's column).
__device__ __forceinline__ float col_sum8(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 4);
  v += __shfl_xor_sync(0xffffffffu, v, 8);
  v += __shfl_xor_sync(0xffffffffu, v, 16);
  return v;
}

// A 16 × D tile in accumulator fragments: x[nt][i] at row gid + 8·(i>>1), column
// col0 + 8·nt + 2·tig + (i&1).
using Frag = float[2][4];

template <int D>
struct Layout {
  static constexpr int NW = D / 16, NT = 32 * NW, KT = D / 8;
  static constexpr int LD = D + 8;  // every [rows][D] buffer: conflict-free float2 fragment loads
  static constexpr int TILE = kMb * LD;
  // One stage: K, Q tiles, λ, c, W [D][LD].
  static constexpr int OFF_Q = TILE, OFF_LAM = 2 * TILE, OFF_C = OFF_LAM + kMb,
                       OFF_W = OFF_C + D, STAGE = OFF_W + D * LD;
  static constexpr int LDM = 20;  // partial b×b tiles [NW][16][LDM]; column 16 holds de partials
  static constexpr int RED = NW * 16 * 4;  // one cross-warp round of up to 4 row sums
  static constexpr int NRED = 6;
  static constexpr int OFF_G = 2 * STAGE, OFF_DZB = OFF_G + TILE, OFF_DZ = OFF_DZB + TILE,
                       OFF_DW = OFF_DZ + TILE, OFF_MP = OFF_DW + D * LD,
                       OFF_DMP = OFF_MP + NW * 16 * LDM, OFF_RED = OFF_DMP + NW * 16 * LDM,
                       OFF_TAU = OFF_RED + NRED * RED, FLOATS = OFF_TAU + kMb;
};

// Cross-warp row sums of N quantities: v[s][hf] holds this lane's partial of row gid + 8·hf
// (already summed over its own positions); on return, the sum over the whole row. One barrier.
template <int D, int N>
__device__ __forceinline__ void row_sums(float (&v)[N][2], float* red, int warp, int gid, int tig) {
  using L = Layout<D>;
#pragma unroll
  for (int s = 0; s < N; ++s)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) v[s][hf] = quad_sum(v[s][hf]);
  if (tig == 0)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
      for (int s = 0; s < N; ++s) red[(warp * 16 + gid + 8 * hf) * 4 + s] = v[s][hf];
  __syncthreads();
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
#pragma unroll
    for (int s = 0; s < N; ++s) {
      float acc = 0.0f;
#pragma unroll
      for (int w = 0; w < L::NW; ++w) acc += red[(w * 16 + gid + 8 * hf) * 4 + s];
      v[s][hf] = acc;
    }
}

// Row mean and 1/σ of a tile (parallel variance: each warp's sum and M2 about its own mean,
// combined exactly). One barrier.
template <int D>
__device__ __forceinline__ void row_stats(const Frag& x, float* red, int warp, int gid, int tig,
                                          float eps, float (&mu)[2], float (&rstd)[2]) {
  using L = Layout<D>;
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
      red[(warp * 16 + gid + 8 * hf) * 4 + 0] = s;
      red[(warp * 16 + gid + 8 * hf) * 4 + 1] = q;
    }
  }
  __syncthreads();
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int row = gid + 8 * hf;
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < L::NW; ++w) s += red[(w * 16 + row) * 4];
    const float m = s / float(D);
    float m2 = 0.0f;
#pragma unroll
    for (int w = 0; w < L::NW; ++w) {
      const float dm = red[(w * 16 + row) * 4] * (1.0f / 16.0f) - m;
      m2 += red[(w * 16 + row) * 4 + 1] + 16.0f * dm * dm;
    }
    mu[hf] = m;
    rstd[hf] = 1.0f / sqrtf(m2 / float(D) + eps);
  }
}

// The output LayerNorm's round: row mean and 1/σ of Z̄ with, in the same round, Σ dx and
// Σ dx·(Z̄ − μ) for dx = γ ⊙ dO. The latter is formed per warp about the warp's own row mean m_w
// and recombined as Σ_w [S_w(dx·(Z̄ − m_w)) + (m_w − μ)·S_w(dx)], without cancellation.
template <int D>
__device__ __forceinline__ void out_ln_round(const Frag& x, const Frag& dx, float* red, int warp,
                                             int gid, int tig, float eps, float (&mu)[2],
                                             float (&rstd)[2], float (&sdx)[2], float (&sdxz)[2]) {
  using L = Layout<D>;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float s = quad_sum(x[0][2 * hf] + x[0][2 * hf + 1] + x[1][2 * hf] + x[1][2 * hf + 1]);
    const float mw = s * (1.0f / 16.0f);
    float q = 0.0f, bsum = 0.0f, asum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float dv = x[nt][2 * hf + e] - mw;
        q += dv * dv;
        bsum += dx[nt][2 * hf + e];
        asum += dx[nt][2 * hf + e] * dv;
      }
    q = quad_sum(q);
    bsum = quad_sum(bsum);
    asum = quad_sum(asum);
    if (tig == 0) {
      float* r = red + (warp * 16 + gid + 8 * hf) * 4;
      r[0] = s;
      r[1] = q;
      r[2] = bsum;
      r[3] = asum;
    }
  }
  __syncthreads();
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int row = gid + 8 * hf;
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < L::NW; ++w) s += red[(w * 16 + row) * 4];
    const float m = s / float(D);
    float m2 = 0.0f, b2 = 0.0f, a2 = 0.0f;
#pragma unroll
    for (int w = 0; w < L::NW; ++w) {
      const float* r = red + (w * 16 + row) * 4;
      const float dm = r[0] * (1.0f / 16.0f) - m;
      m2 += r[1] + 16.0f * dm * dm;
      b2 += r[2];
      a2 += r[3] + dm * r[2];
    }
    mu[hf] = m;
    rstd[hf] = 1.0f / sqrtf(m2 / float(D) + eps);
    sdx[hf] = b2;
    sdxz[hf] = a2;
  }
}

template <int D>
__device__ __forceinline__ void store_tile(float* dst, const Frag& x, int col0, int gid, int tig) {
  using L = Layout<D>;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
      *reinterpret_cast<float2*>(dst + (gid + 8 * hf) * L::LD + col0 + nt * 8 + 2 * tig) =
          make_float2(x[nt][2 * hf], x[nt][2 * hf + 1]);
}

// acc += A·B over k = D: A a [16][LD] tile in shared memory, B[k][n] = S[k][n] (normal) for this
// warp's 16 columns n.
template <int D>
__device__ __forceinline__ void mma_tile_w(Frag& acc, const float* A, const float* S, int col0,
                                           int gid, int tig) {
  using L = Layout<D>;
#pragma unroll
  for (int kt = 0; kt < L::KT; ++kt) {
    const float2 a0 = *reinterpret_cast<const float2*>(A + gid * L::LD + kt * 8 + 2 * tig);
    const float2 a1 = *reinterpret_cast<const float2*>(A + (gid + 8) * L::LD + kt * 8 + 2 * tig);
    const Op4 a = op4(a0.x, a1.x, a0.y, a1.y);
    const float* b = S + (kt * 8 + 2 * tig) * L::LD + col0 + gid;
    mma3(acc[0], a, op2(b[0], b[L::LD]));
    mma3(acc[1], a, op2(b[8], b[L::LD + 8]));
  }
}

// acc += A·Sᵀ over k = D: B[k][n] = S[n][k] for this warp's 16 columns n (rows of S).
template <int D>
__device__ __forceinline__ void mma_tile_wt(Frag& acc, const float* A, const float* S, int col0,
                                            int gid, int tig) {
  using L = Layout<D>;
#pragma unroll
  for (int kt = 0; kt < L::KT; ++kt) {
    const float2 a0 = *reinterpret_cast<const float2*>(A + gid * L::LD + kt * 8 + 2 * tig);
    const float2 a1 = *reinterpret_cast<const float2*>(A + (gid + 8) * L::LD + kt * 8 + 2 * tig);
    const Op4 a = op4(a0.x, a1.x, a0.y, a1.y);
    const float2 b0 = *reinterpret_cast<const float2*>(S + (col0 + gid) * L::LD + kt * 8 + 2 * tig);
    const float2 b1 =
        *reinterpret_cast<const float2*>(S + (col0 + 8 + gid) * L::LD + kt * 8 + 2 * tig);
    mma3(acc[0], a, op2(b0.x, b0.y));
    mma3(acc[1], a, op2(b1.x, b1.y));
  }
}

// acc += X·B with X a 16×16 matrix held as fragments x (every warp holds all of it) and B rows
// from a [16][LD] tile in shared memory, this warp's 16 columns.
template <int D>
__device__ __forceinline__ void mma_small_a(Frag& acc, const Frag& x, const float* B, int col0,
                                            int gid, int tig) {
  using L = Layout<D>;
#pragma unroll
  for (int js = 0; js < 2; ++js) {
    const Op4 a = op4(x[js][0], x[js][2], x[js][1], x[js][3]);
    const float* b = B + (js * 8 + 2 * tig) * L::LD + col0 + gid;
    mma3(acc[0], a, op2(b[0], b[L::LD]));
    mma3(acc[1], a, op2(b[8], b[L::LD + 8]));
  }
}

// This warp's split-k share of the 16×16 product A·Bᵀ (A, B [16][LD] tiles): k-steps warp and
// warp + NW, written to part [16][LDM].
template <int D>
__device__ __forceinline__ void partial_abt(const float* A, const float* B, float* part, int warp,
                                            int gid, int tig) {
  using L = Layout<D>;
  float mp[2][4] = {};
#pragma unroll
  for (int s2 = 0; s2 < 2; ++s2) {
    const int kt = warp + s2 * L::NW;
    const float2 a0 = *reinterpret_cast<const float2*>(A + gid * L::LD + kt * 8 + 2 * tig);
    const float2 a1 = *reinterpret_cast<const float2*>(A + (gid + 8) * L::LD + kt * 8 + 2 * tig);
    const float2 b0 = *reinterpret_cast<const float2*>(B + gid * L::LD + kt * 8 + 2 * tig);
    const float2 b1 = *reinterpret_cast<const float2*>(B + (gid + 8) * L::LD + kt * 8 + 2 * tig);
    const Op4 a = op4(a0.x, a1.x, a0.y, a1.y);
    mma3(mp[0], a, op2(b0.x, b0.y));
    mma3(mp[1], a, op2(b1.x, b1.y));
  }
#pragma unroll
  for (int jt = 0; jt < 2; ++jt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
      *reinterpret_cast<float2*>(part + (gid + 8 * hf) * L::LDM + jt * 8 + 2 * tig) =
          make_float2(mp[jt][2 * hf], mp[jt][2 * hf + 1]);
}

// Σ_w part[w][i][j].
template <int D>
__device__ __forceinline__ float sum_parts(const float* part, int i, int j) {
  using L = Layout<D>;
  float acc = 0.0f;
#pragma unroll
  for (int w = 0; w < L::NW; ++w) acc += part[(w * 16 + i) * L::LDM + j];
  return acc;
}

template <int D>
__global__ void __launch_bounds__(2 * D) linear_backward_v3_kernel(BwdParams p) {
  using L = Layout<D>;
  constexpr int KT = L::KT, LD = L::LD;
  extern __shared__ __align__(16) float smem[];
  float* sG = smem + L::OFF_G;
  float* sDZb = smem + L::OFF_DZB;
  float* sDZ = smem + L::OFF_DZ;
  float* sdW = smem + L::OFF_DW;
  float* Mp = smem + L::OFF_MP;
  float* dMp = smem + L::OFF_DMP;
  float* red = smem + L::OFF_RED;
  float* sTau = smem + L::OFF_TAU;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gid = lane >> 2, tig = lane & 3;
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int T = p.T, n_mb = (T + kMb - 1) / kMb;
  const std::size_t rs = std::size_t(p.H) * D;
  const std::size_t seq0 = std::size_t(n) * T * rs + std::size_t(h) * D;
  const int col0 = warp * 16;
  const float one = p.bias ? 1.0f : 0.0f;
  const std::size_t slot_floats = std::size_t(D) * D + D;
  float* slots = p.slots + std::size_t(blk) * p.group * slot_floats;

  float gam[2][2], bet[2][2];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int col = col0 + nt * 8 + 2 * tig + e;
      gam[nt][e] = p.ln ? p.gamma[std::size_t(h) * D + col] : 1.0f;
      bet[nt][e] = p.ln ? p.beta[std::size_t(h) * D + col] : 0.0f;
    }
  const float tau_row[2] = {p.tau[gid], p.tau[gid + 8]};
  const float tb = p.tau[kMb - 1];
  if (tid < kMb) sTau[tid] = p.tau[tid];
  for (int i = tid; i < D * LD; i += L::NT) sdW[i] = 0.0f;

  // The carry dW' (fragment layout of the forward's W: dWr[kt][i] = dW'[kt·8 + 2·tig + (i&1)]
  // [col0 + gid + 8·(i>>1)]), dc' for the lane's columns, and the per-lane partials of dγ, dβ
  // (rows gid, gid + 8 of every mini-batch) and dτ (rows gid, gid + 8).
  float dWr[KT][4] = {};
  float dcr[2][2] = {}, dgam[2][2] = {}, dbet[2][2] = {};
  float dtau[2] = {0.0f, 0.0f};

  // Stage loads: K, λ (recompute) and also Q, c, W (backward) of mini-batch mb.
  auto issue = [&](int mb, float* st, bool full_stage, const float* Wsrc, const float* csrc) {
    const int t0 = mb * kMb, m = min(kMb, T - t0);
    constexpr int CPR = D / 4;
    const int tiles = full_stage ? 2 : 1;
    for (int i = tid; i < tiles * kMb * CPR; i += L::NT) {
      const int tile = i / (kMb * CPR), rem = i % (kMb * CPR), r = rem / CPR, ch = rem % CPR;
      const float* src = (tile == 0 ? p.K : p.Q) + seq0 + std::size_t(t0 + min(r, m - 1)) * rs + ch * 4;
      cp_async16(st + tile * L::TILE + r * LD + ch * 4, src, r < m ? 16 : 0);
    }
    if (tid < kMb)
      cp_async4(st + L::OFF_LAM + tid, p.lam + std::size_t(blk) * T + t0 + min(tid, m - 1),
                tid < m ? 4 : 0);
    if (full_stage) {
      for (int i = tid; i < D * CPR; i += L::NT) {
        const int r = i / CPR, ch = i % CPR;
        cp_async16(st + L::OFF_W + r * LD + ch * 4, Wsrc + r * D + ch * 4, 16);
      }
      for (int i = tid; i < CPR; i += L::NT)
        cp_async16(st + L::OFF_C + i * 4, csrc ? csrc + i * 4 : Wsrc, csrc ? 16 : 0);
    }
    cp_async_commit();
  };

  // V (or V − K is formed later) and dO of a mini-batch at the lane's positions, rows < m.
  auto load_rows = [&](const float* src, int mb, Frag& x) {
    const int t0 = mb * kMb, m = min(kMb, T - t0);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int row = gid + 8 * hf;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        float2 v = make_float2(0.0f, 0.0f);
        if (row < m)
          v = *reinterpret_cast<const float2*>(src + seq0 + std::size_t(t0 + row) * rs + col0 +
                                               nt * 8 + 2 * tig);
        x[nt][2 * hf] = v.x;
        x[nt][2 * hf + 1] = v.y;
      }
    }
  };

  // G = lnl2(Z, R) at the lane's positions (Z with c already added); keeps x̂, ĝ, 1/σ and
  // mean(x̂ ĝ) for the backward. red0, red1: the two rounds.
  auto lnl2 = [&](const Frag& z, const Frag& r, Frag& g, Frag& xh, Frag& gh, float (&rstd)[2],
                  float (&mxg)[2], float* red0, float* red1) {
    if (p.ln) {
      float mu[2];
      row_stats<D>(z, red0, warp, gid, tig, p.eps, mu, rstd);
      float s[2][2] = {};
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float gm = gam[nt][i & 1];
          xh[nt][i] = (z[nt][i] - mu[i >> 1]) * rstd[i >> 1];
          gh[nt][i] = gm * (gm * xh[nt][i] + bet[nt][i & 1] - r[nt][i]);
          s[0][i >> 1] += gh[nt][i];
          s[1][i >> 1] += gh[nt][i] * xh[nt][i];
        }
      row_sums<D, 2>(s, red1, warp, gid, tig);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) mxg[hf] = s[1][hf] / float(D);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int hf = i >> 1;
          g[nt][i] = (gh[nt][i] - s[0][hf] / float(D) - xh[nt][i] * mxg[hf]) * rstd[hf];
        }
    } else {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) g[nt][i] = z[nt][i] - r[nt][i];
    }
  };

  // R = V − K (residual) or V at the lane's positions; K from the stage tile.
  auto target = [&](const Frag& v, const float* sK, Frag& r) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const float2 k =
            *reinterpret_cast<const float2*>(sK + (gid + 8 * hf) * LD + col0 + nt * 8 + 2 * tig);
        r[nt][2 * hf] = p.res ? v[nt][2 * hf] - k.x : v[nt][2 * hf];
        r[nt][2 * hf + 1] = p.res ? v[nt][2 * hf + 1] - k.y : v[nt][2 * hf + 1];
      }
  };

  // The first stage of the next group is issued by the last mini-batch of the group before it
  // (staged): the recompute's (K, λ into buffer rbuf, V rows into vr), or, with groups of one
  // mini-batch, the walk's own (into its usual buffer, V and dO into vn, don).
  bool staged = false;
  int rbuf = 0;
  Frag vr, vn, don;
  for (int grp = p.n_ck - 1; grp >= 0; --grp) {
    const int k0 = grp * p.group, k1 = min(n_mb, k0 + p.group);
    const std::size_t ck = std::size_t(blk) * p.n_ck + grp;
    const float* ckW = p.ckW + ck * D * D;
    const float* ckb = p.bias ? p.ckb + ck * D : nullptr;

    // ---- Recompute the states of mini-batches k0+1 .. k1−1 into the slots (forward update). ----
    if (k1 - k0 > 1) {
      float Wr[KT][4], cb[2][2];
#pragma unroll
      for (int kt = 0; kt < KT; ++kt)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          Wr[kt][i] = ckW[(kt * 8 + 2 * tig + (i & 1)) * D + col0 + gid + 8 * (i >> 1)];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) cb[nt][e] = ckb ? ckb[col0 + nt * 8 + 2 * tig + e] : 0.0f;
      if (!staged) {
        rbuf = 0;
        issue(k0, smem, false, nullptr, nullptr);
        load_rows(p.V, k0, vr);
      }
      staged = false;
      for (int k = k0; k + 1 < k1; ++k) {
        float* st = smem + ((rbuf + k - k0) & 1) * L::STAGE;
        Frag v;
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) v[nt][i] = vr[nt][i];
        cp_async_wait_all();
        __syncthreads();
        if (k + 2 < k1) {
          issue(k + 1, smem + ((rbuf + k + 1 - k0) & 1) * L::STAGE, false, nullptr, nullptr);
          load_rows(p.V, k + 1, vr);
        }
        const float* sK = st;
        const float* sL = st + L::OFF_LAM;
        Frag z = {};
#pragma unroll
        for (int kt = 0; kt < KT; ++kt) {
          const float2 a0 = *reinterpret_cast<const float2*>(sK + gid * LD + kt * 8 + 2 * tig);
          const float2 a1 = *reinterpret_cast<const float2*>(sK + (gid + 8) * LD + kt * 8 + 2 * tig);
          const Op4 a = op4(a0.x, a1.x, a0.y, a1.y);
          mma3(z[0], a, op2(Wr[kt][0], Wr[kt][1]));
          mma3(z[1], a, op2(Wr[kt][2], Wr[kt][3]));
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) z[nt][i] += cb[nt][i & 1];
        Frag r, g, xh, gh;
        float rstd[2], mxg[2];
        target(v, sK, r);
        lnl2(z, r, g, xh, gh, rstd, mxg, red, red + L::RED);
        store_tile<D>(sG, g, col0, gid, tig);
        __syncthreads();
#pragma unroll
        for (int js = 0; js < 2; ++js) {
          const int j0 = js * 8 + tig, j1 = j0 + 4;
          const float e0 = -tb * sL[j0], e1 = -tb * sL[j1];
          const Op4 ag = op4(e0 * sG[j0 * LD + col0 + gid], e0 * sG[j0 * LD + col0 + gid + 8],
                             e1 * sG[j1 * LD + col0 + gid], e1 * sG[j1 * LD + col0 + gid + 8]);
#pragma unroll
          for (int kt = 0; kt < KT; ++kt)
            mma3(Wr[kt], ag, op2(sK[j0 * LD + kt * 8 + gid], sK[j1 * LD + kt * 8 + gid]));
        }
        if (p.bias)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int col = col0 + nt * 8 + 2 * tig + e;
              cb[nt][e] -= tb * col_sum8(sL[gid] * sG[gid * LD + col] + sL[gid + 8] * sG[(gid + 8) * LD + col]);
            }
        float* slot = slots + std::size_t(k + 1 - k0) * slot_floats;
#pragma unroll
        for (int kt = 0; kt < KT; ++kt)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            slot[(kt * 8 + 2 * tig + (i & 1)) * D + col0 + gid + 8 * (i >> 1)] = Wr[kt][i];
        if (gid == 0)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) slot[D * D + col0 + nt * 8 + 2 * tig + e] = cb[nt][e];
      }
      __syncthreads();  // the slots are written (global memory, read next by other threads)
    }

    // ---- Walk the group's mini-batches in reverse. ----
    auto wsrc = [&](int k) { return k == k0 ? ckW : slots + std::size_t(k - k0) * slot_floats; };
    auto csrc = [&](int k) -> const float* {
      if (!p.bias) return nullptr;
      return k == k0 ? ckb : slots + std::size_t(k - k0) * slot_floats + D * D;
    };
    if (!staged) {
      issue(k1 - 1, smem + ((k1 - 1) & 1) * L::STAGE, true, wsrc(k1 - 1), csrc(k1 - 1));
      load_rows(p.V, k1 - 1, vn);
      load_rows(p.dO, k1 - 1, don);
    }
    staged = false;
    for (int k = k1 - 1; k >= k0; --k) {
      const int t0 = k * kMb, m = min(kMb, T - t0);
      const bool full = m == kMb;
      Frag v, dy;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          v[nt][i] = vn[nt][i];
          dy[nt][i] = don[nt][i];
        }
      cp_async_wait_all();
      __syncthreads();  // stage k landed for all; every thread is done with mini-batch k + 1
      if (k > k0) {
        issue(k - 1, smem + ((k - 1) & 1) * L::STAGE, true, wsrc(k - 1), csrc(k - 1));
        load_rows(p.V, k - 1, vn);
        load_rows(p.dO, k - 1, don);
      } else if (grp > 0) {
        // The next group's first stage, into the buffer mini-batch k + 1 used (free now).
        const int nk0 = (grp - 1) * p.group;
        if (p.group > 1) {
          rbuf = (k + 1) & 1;
          issue(nk0, smem + rbuf * L::STAGE, false, nullptr, nullptr);
          load_rows(p.V, nk0, vr);
        } else {
          const std::size_t nck = std::size_t(blk) * p.n_ck + grp - 1;
          issue(k - 1, smem + ((k - 1) & 1) * L::STAGE, true, p.ckW + nck * D * D,
                p.bias ? p.ckb + nck * D : nullptr);
          load_rows(p.V, k - 1, vn);
          load_rows(p.dO, k - 1, don);
        }
        staged = true;
      }
      const float* st = smem + (k & 1) * L::STAGE;
      const float* sK = st;
      const float* sQ = st + L::OFF_Q;
      const float* sL = st + L::OFF_LAM;
      const float* sW = st + L::OFF_W;

      // Z = KW + c, Z̄₀ = QW + c (one pass over W), this warp's share of C = QKᵀ.
      Frag z = {}, zb = {};
#pragma unroll
      for (int kt = 0; kt < KT; ++kt) {
        const float2 k0v = *reinterpret_cast<const float2*>(sK + gid * LD + kt * 8 + 2 * tig);
        const float2 k1v = *reinterpret_cast<const float2*>(sK + (gid + 8) * LD + kt * 8 + 2 * tig);
        const float2 q0 = *reinterpret_cast<const float2*>(sQ + gid * LD + kt * 8 + 2 * tig);
        const float2 q1 = *reinterpret_cast<const float2*>(sQ + (gid + 8) * LD + kt * 8 + 2 * tig);
        const Op4 ak = op4(k0v.x, k1v.x, k0v.y, k1v.y), aq = op4(q0.x, q1.x, q0.y, q1.y);
        const float* b = sW + (kt * 8 + 2 * tig) * LD + col0 + gid;
        const Op2 w0 = op2(b[0], b[LD]), w1 = op2(b[8], b[LD + 8]);
        mma3(z[0], ak, w0);
        mma3(z[1], ak, w1);
        mma3(zb[0], aq, w0);
        mma3(zb[1], aq, w1);
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float c = st[L::OFF_C + col0 + nt * 8 + 2 * tig + e];
          z[nt][e] += c;
          z[nt][e + 2] += c;
          zb[nt][e] += c;
          zb[nt][e + 2] += c;
        }
      partial_abt<D>(sQ, sK, Mp + warp * 16 * L::LDM, warp, gid, tig);

      // G = lnl2(Z, R), rows ≥ m zeroed (a short last mini-batch).
      Frag r, g, xh, gh;
      float rstdz[2] = {1.0f, 1.0f}, mxg[2] = {0.0f, 0.0f};
      target(v, sK, r);
      lnl2(z, r, g, xh, gh, rstdz, mxg, red, red + L::RED);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (gid + 8 * (i >> 1) >= m) g[nt][i] = 0.0f;
      store_tile<D>(sG, g, col0, gid, tig);
      __syncthreads();  // G and the C partials complete

      // C' = tril(C + 1) and M = E ⊙ C' at the lane's positions, and Mᵀ; Z̄ = Z̄₀ − MG.
      Frag cp, mm, mt;
#pragma unroll
      for (int jt = 0; jt < 2; ++jt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int row = gid + 8 * (i >> 1), j = jt * 8 + 2 * tig + (i & 1);
          const float c = j <= row ? sum_parts<D>(Mp, row, j) + one : 0.0f;
          cp[jt][i] = c;
          mm[jt][i] = -tau_row[i >> 1] * sL[j] * c;  // −M
          mt[jt][i] = row <= j ? -sTau[j] * sL[row] * (sum_parts<D>(Mp, j, row) + one) : 0.0f;  // −Mᵀ
        }
      mma_small_a<D>(zb, mm, sG, col0, gid, tig);

      // Output LN backward: dZ̄ = LN′ᵀ dO; dγ, dβ (per-lane partials).
      Frag dzb;
      if (p.ln) {
        Frag dx;
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) dx[nt][i] = dy[nt][i] * gam[nt][i & 1];
        float mu2[2], rstd2[2], sdx[2], sdxz[2];
        out_ln_round<D>(zb, dx, red + 2 * L::RED, warp, gid, tig, p.eps, mu2, rstd2, sdx, sdxz);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int hf = i >> 1;
            const float x2 = (zb[nt][i] - mu2[hf]) * rstd2[hf];
            dgam[nt][i & 1] += dy[nt][i] * x2;
            dbet[nt][i & 1] += dy[nt][i];
            const float mdxx = sdxz[hf] * rstd2[hf] / float(D);  // mean(dx ⊙ x̂)
            dzb[nt][i] = (dx[nt][i] - sdx[hf] / float(D) - x2 * mdxx) * rstd2[hf];
          }
      } else {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) dzb[nt][i] = dy[nt][i];
      }
      store_tile<D>(sDZb, dzb, col0, gid, tig);
      __syncthreads();  // dZ̄ complete

      // dQ = dO + dZ̄ Wᵀ; this warp's share of dZ̄ Gᵀ (dM = −Σ); δ = dG = −Mᵀ dZ̄ and the commit
      // line: δ −= e ⊙ (K dW' + dc'), dK = −e ⊙ (G dW'ᵀ), de = −Σ_n G ⊙ (K dW' + dc').
      Frag dq, dk = {}, dg = {};
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) dq[nt][i] = p.res ? dy[nt][i] : 0.0f;
      mma_tile_wt<D>(dq, sDZb, sW, col0, gid, tig);
      partial_abt<D>(sDZb, sG, dMp + warp * 16 * L::LDM, warp, gid, tig);
      mma_small_a<D>(dg, mt, sDZb, col0, gid, tig);  // mt holds −Mᵀ
      float dep[2] = {0.0f, 0.0f};
      if (full) {
        Frag kdw = {}, gdw = {};
#pragma unroll
        for (int kt = 0; kt < KT; ++kt) {
          const float2 a0 = *reinterpret_cast<const float2*>(sK + gid * LD + kt * 8 + 2 * tig);
          const float2 a1 = *reinterpret_cast<const float2*>(sK + (gid + 8) * LD + kt * 8 + 2 * tig);
          const Op4 a = op4(a0.x, a1.x, a0.y, a1.y);
          mma3(kdw[0], a, op2(dWr[kt][0], dWr[kt][1]));
          mma3(kdw[1], a, op2(dWr[kt][2], dWr[kt][3]));
        }
        mma_tile_wt<D>(gdw, sG, sdW, col0, gid, tig);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int hf = i >> 1;
            const float e = tb * sL[gid + 8 * hf];
            const float u = kdw[nt][i] + (p.bias ? dcr[nt][i & 1] : 0.0f);
            dg[nt][i] -= e * u;
            dk[nt][i] = -e * gdw[nt][i];
            dep[hf] -= g[nt][i] * u;
          }
      }
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const float s = quad_sum(dep[hf]);
        if (tig == 0) dMp[(warp * 16 + gid + 8 * hf) * L::LDM + 16] = s;
      }

      // Backward of G = lnl2(Z, R) with δ = dG (ttt-spec.md §7.3 step 6): a = P(δ)/σ, dR = −γa,
      // dx̂ = γ²a − (δ·mean(x̂ĝ) + ĝ·mean(x̂δ))/σ, dσ = −(δ·g)/σ, dZ = P(dx̂)/σ + dσ·x̂/d.
      Frag dz, dv;
      if (p.ln) {
        float s[3][2] = {};
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            s[0][i >> 1] += dg[nt][i];
            s[1][i >> 1] += dg[nt][i] * xh[nt][i];
            s[2][i >> 1] += dg[nt][i] * g[nt][i];
          }
        row_sums<D, 3>(s, red + 3 * L::RED, warp, gid, tig);  // also completes dM, de partials
        float u[2][2] = {};
        Frag dxh;
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int hf = i >> 1;
            const float gm = gam[nt][i & 1];
            const float mxd = s[1][hf] / float(D);
            const float a = (dg[nt][i] - s[0][hf] / float(D) - xh[nt][i] * mxd) * rstdz[hf];
            dv[nt][i] = -gm * a;
            dgam[nt][i & 1] += a * (2.0f * gm * xh[nt][i] + bet[nt][i & 1] - r[nt][i]);
            dbet[nt][i & 1] += gm * a;
            if (p.res) dk[nt][i] += gm * a;
            dxh[nt][i] = gm * gm * a - (dg[nt][i] * mxg[hf] + gh[nt][i] * mxd) * rstdz[hf];
            u[0][hf] += dxh[nt][i];
            u[1][hf] += dxh[nt][i] * xh[nt][i];
          }
        row_sums<D, 2>(u, red + 4 * L::RED, warp, gid, tig);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int hf = i >> 1;
            const float dsig = -s[2][hf] * rstdz[hf];
            dz[nt][i] = (dxh[nt][i] - u[0][hf] / float(D) - xh[nt][i] * (u[1][hf] / float(D))) *
                            rstdz[hf] +
                        dsig * xh[nt][i] / float(D);
          }
      } else {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            if (p.res) dk[nt][i] += dg[nt][i];
            dz[nt][i] = dg[nt][i];
            dv[nt][i] = -dg[nt][i];
          }
        __syncthreads();  // dM and de partials complete
      }
      store_tile<D>(sDZ, dz, col0, gid, tig);

      // dM = −Σ_w partials; dC = tril(dM ⊙ E) and dCᵀ at the lane's positions; dQ += dC K,
      // dK += dCᵀ Q; dτ_i = Σ_j dM C' λ_j (row sums), dλ_j = Σ_i dM C' τ_i (column sums), with the
      // commit line's de.
      {
        Frag dcf, dct;
        float dtp[2] = {0.0f, 0.0f}, dlp[2][2] = {};
#pragma unroll
        for (int jt = 0; jt < 2; ++jt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int hf = i >> 1, row = gid + 8 * hf, j = jt * 8 + 2 * tig + (i & 1);
            const float dm = j <= row ? -sum_parts<D>(dMp, row, j) : 0.0f;
            const float dmt = row <= j ? -sum_parts<D>(dMp, j, row) : 0.0f;
            dcf[jt][i] = dm * tau_row[hf] * sL[j];
            dct[jt][i] = dmt * sTau[j] * sL[row];
            const float pr = dm * cp[jt][i];
            dtp[hf] += pr * sL[j];
            dlp[jt][i & 1] += pr * tau_row[hf];
          }
        mma_small_a<D>(dq, dcf, sK, col0, gid, tig);
        mma_small_a<D>(dk, dct, sQ, col0, gid, tig);
        if (warp == 0) {
          // Σ_j de_j λ_j (the commit line's share of dτ_b): lane j and j + 16 hold term j.
          float dl15 = full ? sum_parts<D>(dMp + 16, lane & 15, 0) * sL[lane & 15] : 0.0f;
#pragma unroll
          for (int o = 1; o < 16; o <<= 1) dl15 += __shfl_xor_sync(0xffffffffu, dl15, o);
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            float v = quad_sum(dtp[hf]);
            if (gid + 8 * hf == kMb - 1) v += dl15;
            dtau[hf] += v;
          }
#pragma unroll
          for (int jt = 0; jt < 2; ++jt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int j = jt * 8 + 2 * tig + e;
              float v = col_sum8(dlp[jt][e]);
              if (full) v += tb * sum_parts<D>(dMp + 16, j, 0);
              if (gid == 0 && j < m) p.dlam[std::size_t(blk) * T + t0 + j] = v;
            }
        }
      }
      __syncthreads();  // dZ complete

      // dK += dZ Wᵀ; dQ, dK, dV out.
      mma_tile_wt<D>(dk, sDZ, sW, col0, gid, tig);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int row = gid + 8 * hf;
        if (row >= m) continue;
        const std::size_t off = seq0 + std::size_t(t0 + row) * rs + col0 + 2 * tig;
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          *reinterpret_cast<float2*>(p.dQ + off + nt * 8) =
              make_float2(dq[nt][2 * hf], dq[nt][2 * hf + 1]);
          *reinterpret_cast<float2*>(p.dK + off + nt * 8) =
              make_float2(dk[nt][2 * hf], dk[nt][2 * hf + 1]);
          *reinterpret_cast<float2*>(p.dV + off + nt * 8) =
              make_float2(dv[nt][2 * hf], dv[nt][2 * hf + 1]);
        }
      }

      // The carry: dW' += Qᵀ dZ̄ + Kᵀ dZ (the forward's update layout), dc' += Σ_rows (dZ̄ + dZ);
      // dW' → shared for the next mini-batch's G dW'ᵀ.
#pragma unroll
      for (int js = 0; js < 2; ++js) {
        const int j0 = js * 8 + tig, j1 = j0 + 4;
        const Op4 a1 = op4(sDZb[j0 * LD + col0 + gid], sDZb[j0 * LD + col0 + gid + 8],
                           sDZb[j1 * LD + col0 + gid], sDZb[j1 * LD + col0 + gid + 8]);
        const Op4 a2 = op4(sDZ[j0 * LD + col0 + gid], sDZ[j0 * LD + col0 + gid + 8],
                           sDZ[j1 * LD + col0 + gid], sDZ[j1 * LD + col0 + gid + 8]);
#pragma unroll
        for (int kt = 0; kt < KT; ++kt) {
          mma3(dWr[kt], a1, op2(sQ[j0 * LD + kt * 8 + gid], sQ[j1 * LD + kt * 8 + gid]));
          mma3(dWr[kt], a2, op2(sK[j0 * LD + kt * 8 + gid], sK[j1 * LD + kt * 8 + gid]));
        }
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          dcr[nt][e] += col_sum8(dzb[nt][e] + dzb[nt][e + 2] + dz[nt][e] + dz[nt][e + 2]);
#pragma unroll
      for (int kt = 0; kt < KT; ++kt)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          sdW[(kt * 8 + 2 * tig + (i & 1)) * LD + col0 + gid + 8 * (i >> 1)] = dWr[kt][i];
    }
    __syncthreads();  // the next group's recompute reuses the stage buffers
  }

  // Per-block partials for the fixed-order batch sums.
#pragma unroll
  for (int kt = 0; kt < KT; ++kt)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      p.pW[std::size_t(blk) * D * D + (kt * 8 + 2 * tig + (i & 1)) * D + col0 + gid + 8 * (i >> 1)] =
          dWr[kt][i];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float sg = col_sum8(dgam[nt][e]), sb = col_sum8(dbet[nt][e]);
      if (gid == 0) {
        const std::size_t c = std::size_t(blk) * D + col0 + nt * 8 + 2 * tig + e;
        p.pb[c] = p.bias ? dcr[nt][e] : 0.0f;
        p.pgam[c] = p.ln ? sg : 0.0f;
        p.pbet[c] = p.ln ? sb : 0.0f;
      }
    }
  if (warp == 0 && tig == 0) {
    p.ptau[std::size_t(blk) * kMb + gid] = dtau[0];
    p.ptau[std::size_t(blk) * kMb + gid + 8] = dtau[1];
  }
}

template <int D>
void launch_v3(const BwdParams& p, cudaStream_t stream) {
  const std::size_t bytes = Layout<D>::FLOATS * sizeof(float);
  const void* fn = reinterpret_cast<const void*>(&linear_backward_v3_kernel<D>);
  TTTLAB_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bytes)));
  linear_backward_v3_kernel<D><<<p.B * p.H, Layout<D>::NT, bytes, stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

bool bwd_v3_supports(int d, int b) { return b == kMb && (d == 16 || d == 32 || d == 64); }

std::size_t bwd_v3_smem_bytes(int d) {
  switch (d) {
    case 16:
      return Layout<16>::FLOATS * sizeof(float);
    case 32:
      return Layout<32>::FLOATS * sizeof(float);
    case 64:
      return Layout<64>::FLOATS * sizeof(float);
    default:
      return 0;
  }
}

void launch_linear_backward_v3(const BwdParams& p, CUstream_st* stream) {
  switch (p.d) {
    case 16:
      return launch_v3<16>(p, stream);
    case 32:
      return launch_v3<32>(p, stream);
    case 64:
      return launch_v3<64>(p, stream);
    default:
      throw std::invalid_argument("ttt_linear_backward v3: unsupported head_dim " +
                                  std::to_string(p.d));
  }
}

}  // namespace tttlab::kernels::detail
