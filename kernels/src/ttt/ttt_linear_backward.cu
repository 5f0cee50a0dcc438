// TTT-Linear backward on the GPU: the gradients of a dual-form forward, second order through the
// fused LN + L2 gradient (tttlab/kernels/ttt.hpp; maths in docs/MATH.md §7.1–§7.3; the CPU engine in
// core/src/ttt/inner_backward.cpp). Two kernels, both 3xTF32 on tensor cores (fp32-level accuracy);
// the fused one also as version Tf32 (template argument SPLIT = false: one tf32 product per term),
// what the training step runs with tf32 products:
//
// THE FUSED KERNEL (Default where b = 16, d ∈ {16, 32, 64} and the streamed pointers are 16-byte
// aligned): the fallback's maths on the forward's register design (ttt_linear_forward.cu); one m16
// tile per mini-batch, d/16 warps, all of a block's buffers in shared memory at 2 blocks per SM for
// d = 64. Every other shape runs the fallback; d = 128 needs a different buffer plan (two W stages and the
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
// after each update. Every product is 3xTF32 (fp32-level accuracy), or plain tf32 with SPLIT off.
//
// Per mini-batch (the state W, c of its start; carry dW', dc'), 9 barriers with LayerNorm (the fallback:
// 14 phases), each named by what it completes:
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
// sum_over_batch, as in the fallback: deterministic.
//
// THE FUSED KERNEL IN TWO ROLES (Default and Tf32 where every state is a checkpoint, group 1, and
// the B·H blocks fit in one wave at one per SM, as in the training step; TttLinearBackwardArgs::
// two_roles): the same phases, split between two groups of d/16 warps of one block. The front
// recomputes mini-batch k − 1's forward and output-LN backward (everything the carry does not
// touch) while the walk takes mini-batch k through the carry; they meet through double-buffered
// hand-offs in shared memory and named barriers (the section's header has the protocol).
//
// THE FALLBACK (every supported shape): one block of 256 threads per (sequence, head); the
// checkpoint groups are walked in reverse, the states inside a group recomputed, the mini-batches
// walked in reverse with the carry dW', dc'. Every matrix product is done by block_mma on tensor
// cores in 3xTF32 (fp32-level accuracy). Row-wise LayerNorm work and the b×b
// element-wise pieces stay on CUDA cores. Matrices are padded to a leading dimension of d + 4 (and
// b + 4): tensor-core fragment loads then hit distinct banks, or two-way at worst.
//
// Per mini-batch (m ≤ b rows, state W, c; docs/MATH.md §7.3 and core/src/ttt/inner_backward.cpp):
//   forward recompute   Z = KW + 1c, C = tril(QKᵀ + 1), G = lnl2(Z, R), M = E ⊙ C, Z̄ = QW + 1c − MG
//   output LN           dZ̄ = LN′ᵀ dO, dγ, dβ;  dQ = dO (residual)
//   Z̄ line              dQ += dZ̄ Wᵀ, dM = −dZ̄ Gᵀ, dG = −Mᵀ dZ̄
//   commit line (full)  dG −= e ⊙ (K dW' + dc'), dK −= e ⊙ (G dW'ᵀ), de
//   M = E ⊙ C           dC = tril(dM ⊙ E): dQ += dC K, dK += dCᵀ Q;  dτ, dλ from dM ⊙ C and de
//   G = lnl2            a, dZ, dR (second order);  dV = dR
//   Z line              dK += dZ Wᵀ − dR;  dW ← [dW' +] Qᵀ dZ̄ + Kᵀ dZ, dc likewise
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/cuda_check.hpp"
#include "ttt/ttt_common.cuh"
#include "ttt/ttt_host.hpp"
#include "ttt/ttt_mma.cuh"
#include "tttlab/kernels/ttt.hpp"

namespace tttlab::kernels {
namespace detail {

// The backward kernels' parameters (one block per (sequence, head)).
struct BwdParams {
  const float *Q, *K, *V, *lam, *tau, *gamma, *beta, *ckW, *ckb, *dO;
  float *dQ, *dK, *dV, *dlam;
  std::uint16_t* dV16;  // the fused kernel's Tf32 instance: dV as bf16 instead, when set
  float* slots;    // [BH, group, d·d + d]: the states inside the group being walked
  float* scratch;  // [BH, floats per block] when the block's matrices do not fit in shared memory
  float *pW, *pb, *pgam, *pbet, *ptau;  // per-block partials [BH, d·d], [BH, d] ×3, [BH, b]
  int B, H, T, d, b, group, n_ck;
  bool ln, res, bias;
  // The fused kernel: one block per SM and nothing beside it, where one wave holds B·H blocks.
  bool whole_sm;
  float eps;
};


namespace {

// ---- The fused kernel ----------------------------------------------------------------------------


constexpr int kMb = 16;  // the fused kernel's mini-batch: one m16 tile


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
// (already summed over its own positions); on return, the sum over the whole row. One barrier
// (`bar`: the warps of the tile).
template <int D, int N, class Bar = BlockBarrier>
__device__ __forceinline__ void row_sums(float (&v)[N][2], float* red, int warp, int gid, int tig,
                                         Bar bar = {}) {
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
  bar();
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

// The output LayerNorm's round: row mean and 1/σ of Z̄ with, in the same round, Σ dx and
// Σ dx·(Z̄ − μ) for dx = γ ⊙ dO. The latter is formed per warp about the warp's own row mean m_w
// and recombined as Σ_w [S_w(dx·(Z̄ − m_w)) + (m_w − μ)·S_w(dx)], without cancellation.
template <int D, class Bar = BlockBarrier>
__device__ __forceinline__ void out_ln_round(const Frag& x, const Frag& dx, float* red, int warp,
                                             int gid, int tig, float eps, float (&mu)[2],
                                             float (&rstd)[2], float (&sdx)[2], float (&sdxz)[2],
                                             Bar bar = {}) {
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
  bar();
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

template <int D>
__device__ __forceinline__ void load_tile(const float* src, Frag& x, int col0, int gid, int tig) {
  using L = Layout<D>;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const float2 v =
          *reinterpret_cast<const float2*>(src + (gid + 8 * hf) * L::LD + col0 + nt * 8 + 2 * tig);
      x[nt][2 * hf] = v.x;
      x[nt][2 * hf + 1] = v.y;
    }
}

// acc += A·B over k = D: A a [16][LD] tile in shared memory, B[k][n] = S[k][n] (normal) for this
// warp's 16 columns n.
template <int D, bool SPLIT>
__device__ __forceinline__ void mma_tile_w(Frag& acc, const float* A, const float* S, int col0,
                                           int gid, int tig) {
  using L = Layout<D>;
#pragma unroll
  for (int kt = 0; kt < L::KT; ++kt) {
    const float2 a0 = *reinterpret_cast<const float2*>(A + gid * L::LD + kt * 8 + 2 * tig);
    const float2 a1 = *reinterpret_cast<const float2*>(A + (gid + 8) * L::LD + kt * 8 + 2 * tig);
    const Op4 a = op4<SPLIT>(a0.x, a1.x, a0.y, a1.y);
    const float* b = S + (kt * 8 + 2 * tig) * L::LD + col0 + gid;
    mma_parts<SPLIT>(acc[0], a, op2<SPLIT>(b[0], b[L::LD]));
    mma_parts<SPLIT>(acc[1], a, op2<SPLIT>(b[8], b[L::LD + 8]));
  }
}

// acc += A·Sᵀ over k = D: B[k][n] = S[n][k] for this warp's 16 columns n (rows of S).
template <int D, bool SPLIT>
__device__ __forceinline__ void mma_tile_wt(Frag& acc, const float* A, const float* S, int col0,
                                            int gid, int tig) {
  using L = Layout<D>;
#pragma unroll
  for (int kt = 0; kt < L::KT; ++kt) {
    const float2 a0 = *reinterpret_cast<const float2*>(A + gid * L::LD + kt * 8 + 2 * tig);
    const float2 a1 = *reinterpret_cast<const float2*>(A + (gid + 8) * L::LD + kt * 8 + 2 * tig);
    const Op4 a = op4<SPLIT>(a0.x, a1.x, a0.y, a1.y);
    const float2 b0 = *reinterpret_cast<const float2*>(S + (col0 + gid) * L::LD + kt * 8 + 2 * tig);
    const float2 b1 =
        *reinterpret_cast<const float2*>(S + (col0 + 8 + gid) * L::LD + kt * 8 + 2 * tig);
    mma_parts<SPLIT>(acc[0], a, op2<SPLIT>(b0.x, b0.y));
    mma_parts<SPLIT>(acc[1], a, op2<SPLIT>(b1.x, b1.y));
  }
}

// acc += X·B with X a 16×16 matrix held as fragments x (every warp holds all of it) and B rows
// from a [16][LD] tile in shared memory, this warp's 16 columns.
template <int D, bool SPLIT>
__device__ __forceinline__ void mma_small_a(Frag& acc, const Frag& x, const float* B, int col0,
                                            int gid, int tig) {
  using L = Layout<D>;
#pragma unroll
  for (int js = 0; js < 2; ++js) {
    const Op4 a = op4<SPLIT>(x[js][0], x[js][2], x[js][1], x[js][3]);
    const float* b = B + (js * 8 + 2 * tig) * L::LD + col0 + gid;
    mma_parts<SPLIT>(acc[0], a, op2<SPLIT>(b[0], b[L::LD]));
    mma_parts<SPLIT>(acc[1], a, op2<SPLIT>(b[8], b[L::LD + 8]));
  }
}

// This warp's split-k share of the 16×16 product A·Bᵀ (A, B [16][LD] tiles): k-steps warp and
// warp + NW, written to part [16][LDM].
template <int D, bool SPLIT>
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
    const Op4 a = op4<SPLIT>(a0.x, a1.x, a0.y, a1.y);
    mma_parts<SPLIT>(mp[0], a, op2<SPLIT>(b0.x, b0.y));
    mma_parts<SPLIT>(mp[1], a, op2<SPLIT>(b1.x, b1.y));
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

// Issues the cp.async loads of mini-batch mb into stage `st`: K (and, for a full stage, Q, W from
// Wsrc and c from csrc, zero without bias) and λ, rows past T zero-filled; by threads `t` = 0 ..
// `threads` − 1; commits the group.
template <int D>
__device__ __forceinline__ void issue_stage(const BwdParams& p, float* st, int mb, int blk,
                                            std::size_t seq0, std::size_t rs, bool full_stage,
                                            const float* Wsrc, const float* csrc, int t,
                                            int threads) {
  using L = Layout<D>;
  const int t0 = mb * kMb, m = min(kMb, p.T - t0);
  constexpr int CPR = D / 4;  // 16-byte chunks per row
  const int tiles = full_stage ? 2 : 1;
  for (int i = t; i < tiles * kMb * CPR; i += threads) {
    const int tile = i / (kMb * CPR), rem = i % (kMb * CPR), r = rem / CPR, ch = rem % CPR;
    const float* src =
        (tile == 0 ? p.K : p.Q) + seq0 + std::size_t(t0 + min(r, m - 1)) * rs + ch * 4;
    cp_async16(st + tile * L::TILE + r * L::LD + ch * 4, src, r < m ? 16 : 0);
  }
  if (t < kMb)
    cp_async4(st + L::OFF_LAM + t, p.lam + std::size_t(blk) * p.T + t0 + min(t, m - 1),
              t < m ? 4 : 0);
  if (full_stage) {
    for (int i = t; i < D * CPR; i += threads) {
      const int r = i / CPR, ch = i % CPR;
      cp_async16(st + L::OFF_W + r * L::LD + ch * 4, Wsrc + r * D + ch * 4, 16);
    }
    for (int i = t; i < CPR; i += threads)
      cp_async16(st + L::OFF_C + i * 4, csrc ? csrc + i * 4 : Wsrc, csrc ? 16 : 0);
  }
  cp_async_commit();
}

// The inner LayerNorm's γ, β of head h at the lane's columns (1 and 0 without LayerNorm).
template <int D>
__device__ __forceinline__ void load_ln_params(const BwdParams& p, int h, int col0, int tig,
                                               float (&gam)[2][2], float (&bet)[2][2]) {
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int col = col0 + nt * 8 + 2 * tig + e;
      gam[nt][e] = p.ln ? p.gamma[std::size_t(h) * D + col] : 1.0f;
      bet[nt][e] = p.ln ? p.beta[std::size_t(h) * D + col] : 0.0f;
    }
}

// Rows t0 .. t0 + m − 1 of a [B, T, H·D] tensor at the lane's fragment positions (this warp's 16
// columns from col0), zero below row m. seq0: the (sequence, head)'s first element; rs: H·D.
__device__ __forceinline__ void load_frag_rows(const float* src, std::size_t seq0, std::size_t rs,
                                               int t0, int m, int col0, int gid, int tig, Frag& x) {
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
}

// The target R = V − K (residual) or V at the lane's positions; K from a [16][LD] tile.
template <int D>
__device__ __forceinline__ void target_frag(bool res, const Frag& v, const float* sK, Frag& r,
                                            int col0, int gid, int tig) {
  Frag k;
  load_tile<D>(sK, k, col0, gid, tig);
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) r[nt][i] = res ? v[nt][i] - k[nt][i] : v[nt][i];
}

// G = lnl2(Z, R) at the lane's positions (Z with c already added; without LayerNorm G = Z − R);
// keeps x̂, ĝ = γ ⊙ (γ ⊙ x̂ + β − R), 1/σ and mean(x̂ ⊙ ĝ) for the backward. red0, red1: the two
// reduction rounds, met on `bar`.
template <int D, class Bar = BlockBarrier>
__device__ __forceinline__ void lnl2_frag(bool ln, float eps, const float (&gam)[2][2],
                                          const float (&bet)[2][2], const Frag& z, const Frag& r,
                                          Frag& g, Frag& xh, Frag& gh, float (&rstd)[2],
                                          float (&mxg)[2], float* red0, float* red1, int warp,
                                          int gid, int tig, Bar bar = {}) {
  if (ln) {
    float mu[2];
    frag_row_stats<D, 4>(z, red0, warp, gid, tig, eps, mu, rstd, bar);
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
    row_sums<D, 2>(s, red1, warp, gid, tig, bar);
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
}

// ---- The phases of a mini-batch, shared by the one-role and two-role kernels ----------------------
//
// Each works at the lane's fragment positions (this warp's 16 columns from col0); `st` is a stage
// (K, Q, λ, c, W of the mini-batch), the [16][LD] tiles and partials as in Layout.

// Z = KW + c and Z̄₀ = QW + c, one pass over W.
template <int D, bool SPLIT>
__device__ __forceinline__ void z_and_zbar0(const float* st, Frag& z, Frag& zb, int col0, int gid,
                                            int tig) {
  using L = Layout<D>;
  constexpr int LD = L::LD;
  const float *sK = st, *sQ = st + L::OFF_Q, *sW = st + L::OFF_W;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) z[nt][i] = zb[nt][i] = 0.0f;
#pragma unroll
  for (int kt = 0; kt < L::KT; ++kt) {
    const float* b = sW + (kt * 8 + 2 * tig) * LD + col0 + gid;
    const Op2 w0 = op2<SPLIT>(b[0], b[LD]), w1 = op2<SPLIT>(b[8], b[LD + 8]);
    kq_times_w<SPLIT>(z, zb, sK, sQ, LD, kt, gid, tig, w0, w1);
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
}

// From the C = QKᵀ partials Mp: C' = tril(C + 1), −M = −E ⊙ C' and −Mᵀ, every warp all 16×16.
template <int D>
__device__ __forceinline__ void m_frags(const float* Mp, const float* sL, const float* sTau,
                                        const float (&tau_row)[2], float one, Frag& cp, Frag& mm,
                                        Frag& mt, int gid, int tig) {
#pragma unroll
  for (int jt = 0; jt < 2; ++jt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = gid + 8 * (i >> 1), j = jt * 8 + 2 * tig + (i & 1);
      const float c = j <= row ? sum_parts<D>(Mp, row, j) + one : 0.0f;
      cp[jt][i] = c;
      mm[jt][i] = -tau_row[i >> 1] * sL[j] * c;                                             // −M
      mt[jt][i] = row <= j ? -sTau[j] * sL[row] * (sum_parts<D>(Mp, j, row) + one) : 0.0f;  // −Mᵀ
    }
}

// The output LayerNorm's backward: dZ̄ = LN′ᵀ dO from Z̄ and dO (dZ̄ = dO without LayerNorm); adds
// the lane's terms of dγ, dβ. One round on `red`, met on `bar`.
template <int D, class Bar>
__device__ __forceinline__ void out_ln_backward(bool ln, float eps, const float (&gam)[2][2],
                                                const Frag& zb, const Frag& dy, float* red,
                                                int warp, int gid, int tig, Frag& dzb,
                                                float (&dgam)[2][2], float (&dbet)[2][2], Bar bar) {
  if (ln) {
    Frag dx;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) dx[nt][i] = dy[nt][i] * gam[nt][i & 1];
    float mu2[2], rstd2[2], sdx[2], sdxz[2];
    out_ln_round<D>(zb, dx, red, warp, gid, tig, eps, mu2, rstd2, sdx, sdxz, bar);
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
}

// The Z̄ line, from dZ̄ (sDZb) and −Mᵀ (mt): dQ = [dO +] dZ̄ Wᵀ, this warp's share of the partials
// dZ̄ Gᵀ (dM = −Σ_w) into dMp, and δ = dG = −Mᵀ dZ̄.
template <int D, bool SPLIT>
__device__ __forceinline__ void zbar_line(bool res, const Frag& dy, const float* sDZb,
                                          const float* sW, const float* sG, const Frag& mt,
                                          float* dMp, Frag& dq, Frag& dg, int warp, int gid,
                                          int tig, int col0) {
  using L = Layout<D>;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      dq[nt][i] = res ? dy[nt][i] : 0.0f;
      dg[nt][i] = 0.0f;
    }
  mma_tile_wt<D, SPLIT>(dq, sDZb, sW, col0, gid, tig);
  partial_abt<D, SPLIT>(sDZb, sG, dMp + warp * 16 * L::LDM, warp, gid, tig);
  mma_small_a<D, SPLIT>(dg, mt, sDZb, col0, gid, tig);
}

// The commit line of a full mini-batch, from the carry dW' (fragments dWr, and its copy sdW),
// dc': δ −= e ⊙ (K dW' + dc'), dK = −e ⊙ (G dW'ᵀ), de = −Σ_n G ⊙ (K dW' + dc'), whose per-warp
// partials go to column 16 of dMp (zero for a short mini-batch, which commits nothing). dk is set.
template <int D, bool SPLIT>
__device__ __forceinline__ void commit_line(bool full, bool bias, float tb, const float* sK,
                                            const float* sL, const float* sG, const float* sdW,
                                            const float (&dWr)[D / 8][4], const float (&dcr)[2][2],
                                            const Frag& g, Frag& dg, Frag& dk, float* dMp, int warp,
                                            int gid, int tig, int col0) {
  using L = Layout<D>;
  constexpr int LD = L::LD;
  float dep[2] = {0.0f, 0.0f};
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) dk[nt][i] = 0.0f;
  if (full) {
    Frag kdw = {}, gdw = {};
#pragma unroll
    for (int kt = 0; kt < L::KT; ++kt) {
      const float2 a0 = *reinterpret_cast<const float2*>(sK + gid * LD + kt * 8 + 2 * tig);
      const float2 a1 = *reinterpret_cast<const float2*>(sK + (gid + 8) * LD + kt * 8 + 2 * tig);
      const Op4 a = op4<SPLIT>(a0.x, a1.x, a0.y, a1.y);
      mma_parts<SPLIT>(kdw[0], a, op2<SPLIT>(dWr[kt][0], dWr[kt][1]));
      mma_parts<SPLIT>(kdw[1], a, op2<SPLIT>(dWr[kt][2], dWr[kt][3]));
    }
    mma_tile_wt<D, SPLIT>(gdw, sG, sdW, col0, gid, tig);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int hf = i >> 1;
        const float e = tb * sL[gid + 8 * hf];
        const float u = kdw[nt][i] + (bias ? dcr[nt][i & 1] : 0.0f);
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
}

// Backward of G = lnl2(Z, R) with δ = dG (docs/MATH.md §7.2): a = P(δ)/σ, dR = −γa,
// dx̂ = γ²a − (δ·mean(x̂ĝ) + ĝ·mean(x̂δ))/σ, dσ = −(δ·g)/σ, dZ = P(dx̂)/σ + dσ·x̂/d. Sets dz and
// dv (= dR), adds to dk (the residual target's −dR) and the lane's terms of dγ, dβ. Two rounds on
// red0, red1 with LayerNorm, else one barrier; the first also completes the de partials.
template <int D, class Bar>
__device__ __forceinline__ void lnl2_backward(
    bool ln, bool res, const float (&gam)[2][2], const float (&bet)[2][2], const Frag& dg,
    const Frag& xh, const Frag& g, const Frag& gh, const Frag& r, const float (&rstdz)[2],
    const float (&mxg)[2], float* red0, float* red1, int warp, int gid, int tig, Frag& dz, Frag& dv,
    Frag& dk, float (&dgam)[2][2], float (&dbet)[2][2], Bar bar) {
  if (ln) {
    float s[3][2] = {};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        s[0][i >> 1] += dg[nt][i];
        s[1][i >> 1] += dg[nt][i] * xh[nt][i];
        s[2][i >> 1] += dg[nt][i] * g[nt][i];
      }
    row_sums<D, 3>(s, red0, warp, gid, tig, bar);
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
        if (res) dk[nt][i] += gm * a;
        dxh[nt][i] = gm * gm * a - (dg[nt][i] * mxg[hf] + gh[nt][i] * mxd) * rstdz[hf];
        u[0][hf] += dxh[nt][i];
        u[1][hf] += dxh[nt][i] * xh[nt][i];
      }
    row_sums<D, 2>(u, red1, warp, gid, tig, bar);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int hf = i >> 1;
        const float dsig = -s[2][hf] * rstdz[hf];
        dz[nt][i] =
            (dxh[nt][i] - u[0][hf] / float(D) - xh[nt][i] * (u[1][hf] / float(D))) * rstdz[hf] +
            dsig * xh[nt][i] / float(D);
      }
  } else {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (res) dk[nt][i] += dg[nt][i];
        dz[nt][i] = dg[nt][i];
        dv[nt][i] = -dg[nt][i];
      }
    bar();
  }
}

// dM = −Σ_w dMp; dC = tril(dM ⊙ E) and dCᵀ at the lane's positions; dQ += dC K, dK += dCᵀ Q;
// dτ_i = Σ_j dM C' λ_j (row sums), dλ_j = Σ_i dM C' τ_i (column sums), with the commit line's de
// (column 16 of dMp): warp 0 adds its share to dtau and writes dλ of the mini-batch's m rows.
template <int D, bool SPLIT>
__device__ __forceinline__ void dc_products(const float* dMp, const Frag& cp, const float* sK,
                                            const float* sQ, const float* sL, const float* sTau,
                                            const float (&tau_row)[2], float tb, bool full, int m,
                                            float* dlam, Frag& dq, Frag& dk, float (&dtau)[2],
                                            int warp, int lane, int gid, int tig, int col0) {
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
  mma_small_a<D, SPLIT>(dq, dcf, sK, col0, gid, tig);
  mma_small_a<D, SPLIT>(dk, dct, sQ, col0, gid, tig);
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
        if (gid == 0 && j < m) dlam[j] = v;
      }
  }
}

// dQ, dK, dV of the mini-batch's m rows from t0 (DV16: dV as bf16 into p.dV16, the two of a pair
// in one 4-byte store, rounded as convert_to_bf16 rounds).
template <bool DV16>
__device__ __forceinline__ void store_grads(const BwdParams& p, std::size_t seq0, std::size_t rs,
                                            int t0, int m, int col0, int gid, int tig,
                                            const Frag& dq, const Frag& dk, const Frag& dv) {
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
      if constexpr (DV16)
        *reinterpret_cast<__nv_bfloat162*>(p.dV16 + off + nt * 8) =
            __floats2bfloat162_rn(dv[nt][2 * hf], dv[nt][2 * hf + 1]);
      else
        *reinterpret_cast<float2*>(p.dV + off + nt * 8) =
            make_float2(dv[nt][2 * hf], dv[nt][2 * hf + 1]);
    }
  }
}

// The carry: dW' += Qᵀ dZ̄ + Kᵀ dZ (the forward's update layout), dc' += Σ_rows (dZ̄ + dZ); then
// dW' → sdW for the next mini-batch's G dW'ᵀ (the caller orders it against this one's reads).
template <int D, bool SPLIT>
__device__ __forceinline__ void carry_update(const float* sQ, const float* sK, const float* sDZb,
                                             const float* sDZ, const Frag& dzb, const Frag& dz,
                                             float (&dWr)[D / 8][4], float (&dcr)[2][2], float* sdW,
                                             int gid, int tig, int col0) {
  using L = Layout<D>;
  constexpr int LD = L::LD;
#pragma unroll
  for (int js = 0; js < 2; ++js) {
    const int j0 = js * 8 + tig, j1 = j0 + 4;
    const Op4 a1 = op4<SPLIT>(sDZb[j0 * LD + col0 + gid], sDZb[j0 * LD + col0 + gid + 8],
                              sDZb[j1 * LD + col0 + gid], sDZb[j1 * LD + col0 + gid + 8]);
    const Op4 a2 = op4<SPLIT>(sDZ[j0 * LD + col0 + gid], sDZ[j0 * LD + col0 + gid + 8],
                              sDZ[j1 * LD + col0 + gid], sDZ[j1 * LD + col0 + gid + 8]);
#pragma unroll
    for (int kt = 0; kt < L::KT; ++kt) {
      mma_parts<SPLIT>(dWr[kt], a1,
                       op2<SPLIT>(sQ[j0 * LD + kt * 8 + gid], sQ[j1 * LD + kt * 8 + gid]));
      mma_parts<SPLIT>(dWr[kt], a2,
                       op2<SPLIT>(sK[j0 * LD + kt * 8 + gid], sK[j1 * LD + kt * 8 + gid]));
    }
  }
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e)
      dcr[nt][e] += col_sum8(dzb[nt][e] + dzb[nt][e + 2] + dz[nt][e] + dz[nt][e + 2]);
#pragma unroll
  for (int kt = 0; kt < L::KT; ++kt)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      sdW[(kt * 8 + 2 * tig + (i & 1)) * LD + col0 + gid + 8 * (i >> 1)] = dWr[kt][i];
}

// The walk's per-block partials for the fixed-order batch sums: dW0 (the carry), db0 and dτ.
template <int D>
__device__ __forceinline__ void store_walk_partials(const BwdParams& p, int blk,
                                                    const float (&dWr)[D / 8][4],
                                                    const float (&dcr)[2][2],
                                                    const float (&dtau)[2], int warp, int gid,
                                                    int tig, int col0) {
#pragma unroll
  for (int kt = 0; kt < D / 8; ++kt)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      p.pW[std::size_t(blk) * D * D + (kt * 8 + 2 * tig + (i & 1)) * D + col0 + gid +
           8 * (i >> 1)] = dWr[kt][i];
  if (gid == 0)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e)
        p.pb[std::size_t(blk) * D + col0 + nt * 8 + 2 * tig + e] = p.bias ? dcr[nt][e] : 0.0f;
  if (warp == 0 && tig == 0) {
    p.ptau[std::size_t(blk) * kMb + gid] = dtau[0];
    p.ptau[std::size_t(blk) * kMb + gid + 8] = dtau[1];
  }
}

// DV16: dV stored as bf16 into p.dV16 instead of p.dV (a compile-time choice: a run-time test in the
// store loop cost 3% of the Tf32 kernel's time on an H100).
template <int D, bool SPLIT, bool DV16 = false>
__global__ void __launch_bounds__(2 * D) linear_backward_fused_kernel(BwdParams p) {
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
  load_ln_params<D>(p, h, col0, tig, gam, bet);
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
    issue_stage<D>(p, st, mb, blk, seq0, rs, full_stage, Wsrc, csrc, tid, L::NT);
  };

  // V and dO of a mini-batch at the lane's positions, rows < m.
  auto load_rows = [&](const float* src, int mb, Frag& x) {
    const int t0 = mb * kMb;
    load_frag_rows(src, seq0, rs, t0, min(kMb, T - t0), col0, gid, tig, x);
  };
  auto lnl2 = [&](const Frag& z, const Frag& r, Frag& g, Frag& xh, Frag& gh, float(&rstd)[2],
                  float(&mxg)[2], float* red0, float* red1) {
    lnl2_frag<D>(p.ln, p.eps, gam, bet, z, r, g, xh, gh, rstd, mxg, red0, red1, warp, gid, tig);
  };
  auto target = [&](const Frag& v, const float* sK, Frag& r) {
    target_frag<D>(p.res, v, sK, r, col0, gid, tig);
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
        cp_async_wait<0>();
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
          const Op4 a = op4<SPLIT>(a0.x, a1.x, a0.y, a1.y);
          mma_parts<SPLIT>(z[0], a, op2<SPLIT>(Wr[kt][0], Wr[kt][1]));
          mma_parts<SPLIT>(z[1], a, op2<SPLIT>(Wr[kt][2], Wr[kt][3]));
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
          const Op4 ag = op4<SPLIT>(e0 * sG[j0 * LD + col0 + gid], e0 * sG[j0 * LD + col0 + gid + 8],
                             e1 * sG[j1 * LD + col0 + gid], e1 * sG[j1 * LD + col0 + gid + 8]);
#pragma unroll
          for (int kt = 0; kt < KT; ++kt)
            mma_parts<SPLIT>(Wr[kt], ag, op2<SPLIT>(sK[j0 * LD + kt * 8 + gid], sK[j1 * LD + kt * 8 + gid]));
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
      cp_async_wait<0>();
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
      Frag z, zb;
      z_and_zbar0<D, SPLIT>(st, z, zb, col0, gid, tig);
      partial_abt<D, SPLIT>(sQ, sK, Mp + warp * 16 * L::LDM, warp, gid, tig);

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
      m_frags<D>(Mp, sL, sTau, tau_row, one, cp, mm, mt, gid, tig);
      mma_small_a<D, SPLIT>(zb, mm, sG, col0, gid, tig);

      // Output LN backward: dZ̄ = LN′ᵀ dO; dγ, dβ (per-lane partials).
      Frag dzb;
      out_ln_backward<D>(p.ln, p.eps, gam, zb, dy, red + 2 * L::RED, warp, gid, tig, dzb, dgam,
                         dbet, BlockBarrier());
      store_tile<D>(sDZb, dzb, col0, gid, tig);
      __syncthreads();  // dZ̄ complete

      // dQ = dO + dZ̄ Wᵀ; this warp's share of dZ̄ Gᵀ (dM = −Σ); δ = dG = −Mᵀ dZ̄ and the commit
      // line: δ −= e ⊙ (K dW' + dc'), dK = −e ⊙ (G dW'ᵀ), de = −Σ_n G ⊙ (K dW' + dc').
      Frag dq, dk, dg;
      zbar_line<D, SPLIT>(p.res, dy, sDZb, sW, sG, mt, dMp, dq, dg, warp, gid, tig, col0);
      commit_line<D, SPLIT>(full, p.bias, tb, sK, sL, sG, sdW, dWr, dcr, g, dg, dk, dMp, warp, gid,
                            tig, col0);

      Frag dz, dv;
      lnl2_backward<D>(p.ln, p.res, gam, bet, dg, xh, g, gh, r, rstdz, mxg, red + 3 * L::RED,
                       red + 4 * L::RED, warp, gid, tig, dz, dv, dk, dgam, dbet, BlockBarrier());
      store_tile<D>(sDZ, dz, col0, gid, tig);

      dc_products<D, SPLIT>(dMp, cp, sK, sQ, sL, sTau, tau_row, tb, full, m,
                            p.dlam + std::size_t(blk) * T + t0, dq, dk, dtau, warp, lane, gid, tig,
                            col0);
      __syncthreads();  // dZ complete

      // dK += dZ Wᵀ; dQ, dK, dV out.
      mma_tile_wt<D, SPLIT>(dk, sDZ, sW, col0, gid, tig);
      store_grads<DV16>(p, seq0, rs, t0, m, col0, gid, tig, dq, dk, dv);
      carry_update<D, SPLIT>(sQ, sK, sDZb, sDZ, dzb, dz, dWr, dcr, sdW, gid, tig, col0);
    }
    __syncthreads();  // the next group's recompute reuses the stage buffers
  }

  // Per-block partials for the fixed-order batch sums.
  store_walk_partials<D>(p, blk, dWr, dcr, dtau, warp, gid, tig, col0);
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float sg = col_sum8(dgam[nt][e]), sb = col_sum8(dbet[nt][e]);
      if (gid == 0) {
        const std::size_t c = std::size_t(blk) * D + col0 + nt * 8 + 2 * tig + e;
        p.pgam[c] = p.ln ? sg : 0.0f;
        p.pbet[c] = p.ln ? sb : 0.0f;
      }
    }
}

template <int D, bool SPLIT>
void launch_fused(const BwdParams& p, cudaStream_t stream) {
  const std::size_t bytes =
      whole_sm_bytes(Layout<D>::FLOATS * sizeof(float), p.B * p.H, p.whole_sm);
  // dV in bf16 exists for the Tf32 version only (the host checks), so only those instances.
  const auto fn = SPLIT || !p.dV16 ? &linear_backward_fused_kernel<D, SPLIT>
                                   : &linear_backward_fused_kernel<D, false, true>;
  TTTLAB_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bytes)));
  fn<<<p.B * p.H, Layout<D>::NT, bytes, stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

// ---- The fused kernel in two roles ---------------------------------------------------------------
//
// Where every state is a checkpoint (group 1) and the B·H blocks fit in one wave at one per SM (the
// training step's shapes), a block runs two groups of d/16 warps on the fused kernel's layout:
//   the front  recomputes a mini-batch's forward (Z, G, M, Z̄), the output LayerNorm's backward
//              (dZ̄), dQ = dO + dZ̄Wᵀ, the dZ̄Gᵀ partials and δ = −Mᵀ dZ̄: all that the carry does not
//              touch, and hands them over through shared memory;
//   the walk   holds the carry dW', dc' and does the rest: the commit line, G's backward, dZ, the
//              dC products, dK's last term, the stores and the carry's update.
// The front works on mini-batch k − 1 while the walk finishes mini-batch k, so each mini-batch costs
// about the longer of the two chains instead of both in turn, on twice the warps of an SM that would
// otherwise run one warp per scheduler. Hand-offs: the front arrives on FULL[k & 1] when mini-batch
// k's buffer is written; the walk arrives on EMPTY[k & 1] when it is done with mini-batch k, which
// frees that buffer and the stage of mini-batch k (3 stages: the walk's, the front's and the one in
// flight). Each group meets on its own barrier within a mini-batch. The maths and the order of every
// sum per element are the one-role kernel's; dγ and dβ are summed per role and added at the end.
constexpr int kBarFront = 1, kBarWalk = 2, kBarFull = 3, kBarEmpty = 5;  // hardware barrier ids

template <int D>
struct RolesLayout {
  using L = Layout<D>;
  static constexpr int NT = L::NT;     // threads per role
  static constexpr int LANE = NT * 8;  // a 16×D tile in fragment order: [2][NT][4]
  // One hand-off buffer: G and dZ̄ ([16][LD]: read across warps), dQ so far, δ so far, x̂ and C'
  // (fragment order: read by the lane that wrote them), the C and dZ̄Gᵀ partials, 1/σ and
  // mean(x̂ ⊙ ĝ) of each row.
  static constexpr int H_G = 0, H_DZB = L::TILE, H_DQ = 2 * L::TILE, H_DG = H_DQ + LANE,
                       H_XH = H_DG + LANE, H_CP = H_XH + LANE, H_MP = H_CP + LANE,
                       H_DMP = H_MP + L::NW * 16 * L::LDM, H_ROW = H_DMP + L::NW * 16 * L::LDM,
                       HAND = H_ROW + 2 * kMb;
  static constexpr int NSTAGE = 3;
  static constexpr int OFF_HAND = NSTAGE * L::STAGE, OFF_DZ = OFF_HAND + 2 * HAND,
                       OFF_DW = OFF_DZ + L::TILE, OFF_RED = OFF_DW + D * L::LD,
                       OFF_TAU = OFF_RED + 5 * L::RED, FLOATS = OFF_TAU + kMb;
  static_assert(L::STAGE % 4 == 0 && HAND % 4 == 0 && H_DQ % 4 == 0 && H_MP % 4 == 0,
                "16-byte aligned buffers");
};

// A fragment to and from a fragment-order tile: plane nt holds x[nt][0..3] of every thread, so a
// warp's 16-byte accesses are contiguous.
template <int NT>
__device__ __forceinline__ void store_lane(float* tile, const Frag& x, int rt) {
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
    reinterpret_cast<float4*>(tile)[nt * NT + rt] =
        make_float4(x[nt][0], x[nt][1], x[nt][2], x[nt][3]);
}
template <int NT>
__device__ __forceinline__ void load_lane(const float* tile, Frag& x, int rt) {
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const float4 v = reinterpret_cast<const float4*>(tile)[nt * NT + rt];
    x[nt][0] = v.x;
    x[nt][1] = v.y;
    x[nt][2] = v.z;
    x[nt][3] = v.w;
  }
}

template <int D, bool SPLIT, bool DV16 = false>
__global__ void __launch_bounds__(4 * D, 1) linear_backward_roles_kernel(BwdParams p) {
  using L = Layout<D>;
  using R = RolesLayout<D>;
  constexpr int KT = L::KT, LD = L::LD, NT = L::NT;
  using FrontBar = GroupBarrier<kBarFront, NT>;
  using WalkBar = GroupBarrier<kBarWalk, NT>;
  extern __shared__ __align__(16) float smem[];
  float* sDZ = smem + R::OFF_DZ;
  float* sdW = smem + R::OFF_DW;
  float* red = smem + R::OFF_RED;
  float* sTau = smem + R::OFF_TAU;

  const int tid = threadIdx.x, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
  const bool front = tid < NT;
  const int rt = front ? tid : tid - NT;  // thread within its role
  const int warp = rt >> 5;               // warp within its role: its 16 columns
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int T = p.T, n_mb = (T + kMb - 1) / kMb;
  const std::size_t rs = std::size_t(p.H) * D;
  const std::size_t seq0 = std::size_t(n) * T * rs + std::size_t(h) * D;
  const int col0 = warp * 16;
  const float one = p.bias ? 1.0f : 0.0f;

  float gam[2][2], bet[2][2];
  load_ln_params<D>(p, h, col0, tig, gam, bet);
  const float tau_row[2] = {p.tau[gid], p.tau[gid + 8]};
  const float tb = p.tau[kMb - 1];
  if (tid < kMb) sTau[tid] = p.tau[tid];
  for (int i = tid; i < D * LD; i += 2 * NT) sdW[i] = 0.0f;
  __syncthreads();

  auto stage = [&](int k) { return smem + (k % R::NSTAGE) * L::STAGE; };
  auto hand = [&](int k) { return smem + R::OFF_HAND + (k & 1) * R::HAND; };
  float dgam[2][2] = {}, dbet[2][2] = {};

  if (front) {
    // K, Q, λ, c and W of mini-batch k (its checkpoint), by the front's threads.
    auto issue = [&](int k) {
      const std::size_t ck = std::size_t(blk) * p.n_ck + k;
      issue_stage<D>(p, stage(k), k, blk, seq0, rs, true, p.ckW + ck * D * D,
                     p.bias ? p.ckb + ck * D : nullptr, rt, NT);
    };
    Frag vn, don;
    issue(n_mb - 1);
    load_frag_rows(p.V, seq0, rs, (n_mb - 1) * kMb, T - (n_mb - 1) * kMb, col0, gid, tig, vn);
    load_frag_rows(p.dO, seq0, rs, (n_mb - 1) * kMb, T - (n_mb - 1) * kMb, col0, gid, tig, don);
    for (int k = n_mb - 1; k >= 0; --k) {
      const int m = min(kMb, T - k * kMb);
      Frag v, dy;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          v[nt][i] = vn[nt][i];
          dy[nt][i] = don[nt][i];
        }
      // The walk is done with mini-batch k + 2: its buffer and its stage (k − 1's) are free.
      if (k + 2 < n_mb) barrier_sync(kBarEmpty + (k & 1), 2 * NT);
      if (k > 0) {
        issue(k - 1);
        load_frag_rows(p.V, seq0, rs, (k - 1) * kMb, kMb, col0, gid, tig, vn);
        load_frag_rows(p.dO, seq0, rs, (k - 1) * kMb, kMb, col0, gid, tig, don);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      FrontBar()();  // stage k landed for the front
      const float* st = stage(k);
      const float* sK = st;
      const float* sQ = st + L::OFF_Q;
      const float* sL = st + L::OFF_LAM;
      const float* sW = st + L::OFF_W;
      float* hd = hand(k);
      float* sG = hd + R::H_G;
      float* sDZb = hd + R::H_DZB;
      float* Mp = hd + R::H_MP;

      // Z = KW + c, Z̄₀ = QW + c, this warp's share of C = QKᵀ.
      Frag z, zb;
      z_and_zbar0<D, SPLIT>(st, z, zb, col0, gid, tig);
      partial_abt<D, SPLIT>(sQ, sK, Mp + warp * 16 * L::LDM, warp, gid, tig);

      Frag r, g, xh, gh;
      float rstdz[2] = {1.0f, 1.0f}, mxg[2] = {0.0f, 0.0f};
      target_frag<D>(p.res, v, sK, r, col0, gid, tig);
      lnl2_frag<D>(p.ln, p.eps, gam, bet, z, r, g, xh, gh, rstdz, mxg, red, red + L::RED, warp, gid,
                   tig, FrontBar());
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (gid + 8 * (i >> 1) >= m) g[nt][i] = 0.0f;
      store_tile<D>(sG, g, col0, gid, tig);
      FrontBar()();  // G and the C partials complete

      Frag cp, mm, mt;
      m_frags<D>(Mp, sL, sTau, tau_row, one, cp, mm, mt, gid, tig);
      mma_small_a<D, SPLIT>(zb, mm, sG, col0, gid, tig);

      Frag dzb;
      out_ln_backward<D>(p.ln, p.eps, gam, zb, dy, red + 2 * L::RED, warp, gid, tig, dzb, dgam,
                         dbet, FrontBar());
      store_tile<D>(sDZb, dzb, col0, gid, tig);
      FrontBar()();  // dZ̄ complete

      Frag dq, dg;
      zbar_line<D, SPLIT>(p.res, dy, sDZb, sW, sG, mt, hd + R::H_DMP, dq, dg, warp, gid, tig, col0);
      store_lane<NT>(hd + R::H_DQ, dq, rt);
      store_lane<NT>(hd + R::H_DG, dg, rt);
      store_lane<NT>(hd + R::H_XH, xh, rt);
      store_lane<NT>(hd + R::H_CP, cp, rt);
      if (warp == 0 && tig == 0)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          hd[R::H_ROW + gid + 8 * hf] = rstdz[hf];
          hd[R::H_ROW + kMb + gid + 8 * hf] = mxg[hf];
        }
      // The front's barrier first, so that every front thread's hand-off writes are closed by a
      // sync before the arrive. PTX orders them through arrive → sync anyway, but
      // compute-sanitizer's racecheck credits only writes closed by a sync (291 hazards reported
      // without it); it costs about 1% of the kernel's time.
      FrontBar()();
      barrier_arrive(kBarFull + (k & 1), 2 * NT);
    }
  } else {
    float dWr[KT][4] = {};
    float dcr[2][2] = {};
    float dtau[2] = {0.0f, 0.0f};
    Frag vn;
    load_frag_rows(p.V, seq0, rs, (n_mb - 1) * kMb, T - (n_mb - 1) * kMb, col0, gid, tig, vn);
    for (int k = n_mb - 1; k >= 0; --k) {
      const int t0 = k * kMb, m = min(kMb, T - t0);
      const bool full = m == kMb;
      Frag v;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) v[nt][i] = vn[nt][i];
      if (k > 0) load_frag_rows(p.V, seq0, rs, (k - 1) * kMb, kMb, col0, gid, tig, vn);
      barrier_sync(kBarFull + (k & 1), 2 * NT);  // the front's hand-off of mini-batch k
      const float* st = stage(k);
      const float* sK = st;
      const float* sQ = st + L::OFF_Q;
      const float* sL = st + L::OFF_LAM;
      const float* sW = st + L::OFF_W;
      float* hd = hand(k);
      const float* sG = hd + R::H_G;
      const float* sDZb = hd + R::H_DZB;
      float* dMp = hd + R::H_DMP;
      Frag g, xh, dq, dg, cp, r, gh;
      load_lane<NT>(hd + R::H_DQ, dq, rt);
      load_lane<NT>(hd + R::H_DG, dg, rt);
      load_lane<NT>(hd + R::H_XH, xh, rt);
      load_lane<NT>(hd + R::H_CP, cp, rt);
      float rstdz[2], mxg[2];
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        rstdz[hf] = hd[R::H_ROW + gid + 8 * hf];
        mxg[hf] = hd[R::H_ROW + kMb + gid + 8 * hf];
      }
      Frag dzb;
      load_tile<D>(sG, g, col0, gid, tig);
      load_tile<D>(sDZb, dzb, col0, gid, tig);
      target_frag<D>(p.res, v, sK, r, col0, gid, tig);
      if (p.ln)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float gm = gam[nt][i & 1];
            gh[nt][i] = gm * (gm * xh[nt][i] + bet[nt][i & 1] - r[nt][i]);
          }

      Frag dk;
      commit_line<D, SPLIT>(full, p.bias, tb, sK, sL, sG, sdW, dWr, dcr, g, dg, dk, dMp, warp, gid,
                            tig, col0);

      Frag dz, dv;
      lnl2_backward<D>(p.ln, p.res, gam, bet, dg, xh, g, gh, r, rstdz, mxg, red + 3 * L::RED,
                       red + 4 * L::RED, warp, gid, tig, dz, dv, dk, dgam, dbet, WalkBar());
      store_tile<D>(sDZ, dz, col0, gid, tig);

      dc_products<D, SPLIT>(dMp, cp, sK, sQ, sL, sTau, tau_row, tb, full, m,
                            p.dlam + std::size_t(blk) * T + t0, dq, dk, dtau, warp, lane, gid, tig,
                            col0);
      WalkBar()();  // dZ complete

      // dK += dZ Wᵀ; dQ, dK, dV out.
      mma_tile_wt<D, SPLIT>(dk, sDZ, sW, col0, gid, tig);
      store_grads<DV16>(p, seq0, rs, t0, m, col0, gid, tig, dq, dk, dv);
      // dW' → shared memory for the next mini-batch's G dW'ᵀ: ordered by the next FULL barrier,
      // which every walk thread passes.
      carry_update<D, SPLIT>(sQ, sK, sDZb, sDZ, dzb, dz, dWr, dcr, sdW, gid, tig, col0);
      // Every read of this mini-batch's stage and buffer is above; the front may refill them.
      if (k >= 2) {
        WalkBar()();  // as the front's before FULL: the walk's reads closed by a sync
        barrier_arrive(kBarEmpty + (k & 1), 2 * NT);
      }
    }
    // Per-block partials for the fixed-order batch sums (dγ, dβ below, with the front's).
    store_walk_partials<D>(p, blk, dWr, dcr, dtau, warp, gid, tig, col0);
  }

  // dγ, dβ: the front's column sums into the block's partial slots, then the walk's added to them
  // in that order. Through global memory, which the __syncthreads orders as it would shared memory:
  // compute-sanitizer's racecheck reports that same hand-off through shared memory as a hazard
  // after the named barriers above, though it is ordered.
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const std::size_t c = std::size_t(blk) * D + col0 + nt * 8 + 2 * tig + e;
      const float sg = col_sum8(dgam[nt][e]), sb = col_sum8(dbet[nt][e]);
      if (front && gid == 0) {
        p.pgam[c] = sg;
        p.pbet[c] = sb;
      }
    }
  __syncthreads();
  if (!front)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const std::size_t c = std::size_t(blk) * D + col0 + nt * 8 + 2 * tig + e;
        const float sg = col_sum8(dgam[nt][e]), sb = col_sum8(dbet[nt][e]);
        if (gid == 0) {
          p.pgam[c] = p.ln ? p.pgam[c] + sg : 0.0f;
          p.pbet[c] = p.ln ? p.pbet[c] + sb : 0.0f;
        }
      }
}

template <int D, bool SPLIT>
void launch_roles(const BwdParams& p, cudaStream_t stream) {
  const std::size_t bytes =
      whole_sm_bytes(RolesLayout<D>::FLOATS * sizeof(float), p.B * p.H, p.whole_sm);
  const auto fn = SPLIT || !p.dV16 ? &linear_backward_roles_kernel<D, SPLIT>
                                   : &linear_backward_roles_kernel<D, false, true>;
  set_smem_limit(reinterpret_cast<const void*>(fn), bytes);
  fn<<<p.B * p.H, 2 * Layout<D>::NT, bytes, stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

// ---- The fallback --------------------------------------------------------------------------------


constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr bool kSplit = true;

__host__ __device__ inline std::size_t block_floats(int d, int b) {
  const std::size_t ldd = d + 4, ldb = b + 4;
  return 2 * d * ldd + 4 * std::size_t(d) + 11 * b * ldd + 4 * b * ldb + 7 * std::size_t(b);
}

struct BlockSmem {
  float *W, *dW, *c, *dc, *dgam, *dbet;
  float *Q, *K, *R, *dO, *Z, *G, *Zb, *dG, *dZ, *dQ, *dK;  // [b, ldd]
  float *C, *dM, *M, *dC;                        // [b, ldb]
  float *lam, *tau, *mu, *rstd, *rstd2, *de, *dtau;
};

__device__ inline BlockSmem carve(float* base, int d, int b) {
  const std::size_t ldd = d + 4, ldb = b + 4;
  BlockSmem s;
  float* p = base;
  auto take = [&](std::size_t n) {
    float* r = p;
    p += n;
    return r;
  };
  s.W = take(d * ldd);
  s.dW = take(d * ldd);
  s.c = take(d);
  s.dc = take(d);
  s.dgam = take(d);
  s.dbet = take(d);
  s.Q = take(b * ldd);
  s.K = take(b * ldd);
  s.R = take(b * ldd);
  s.dO = take(b * ldd);
  s.Z = take(b * ldd);
  s.G = take(b * ldd);
  s.Zb = take(b * ldd);
  s.dG = take(b * ldd);
  s.dZ = take(b * ldd);
  s.dQ = take(b * ldd);
  s.dK = take(b * ldd);
  s.C = take(b * ldb);
  s.dM = take(b * ldb);
  s.M = take(b * ldb);
  s.dC = take(b * ldb);
  s.lam = take(b);
  s.tau = take(b);
  s.mu = take(b);
  s.rstd = take(b);
  s.rstd2 = take(b);
  s.de = take(b);
  s.dtau = take(b);
  return s;
}

// One full mini-batch of the forward without the read-out: W ← W − τ_b Kᵀ (λ ⊙ G), c likewise.
__device__ void advance(const BwdParams& p, const BlockSmem& s, std::size_t seq0, std::size_t rs, int blk,
                        int t0, const RowFrag& gam, const RowFrag& bet) {
  const int d = p.d, b = p.b, ldd = d + 4;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int i = tid; i < b * d; i += kThreads) {
    const int r = i / d, c = i % d;
    const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
    const float k = p.K[g], v = p.V[g];
    s.K[r * ldd + c] = k;
    s.R[r * ldd + c] = p.res ? v - k : v;
  }
  for (int i = tid; i < b; i += kThreads) s.lam[i] = p.lam[std::size_t(blk) * p.T + t0 + i];
  __syncthreads();
  block_mma<kSplit>(b, d, d, op(s.K, ldd), op(s.W, ldd), 1.0f,
                    [&](int i, int j, float v) { s.Z[i * ldd + j] = v + s.c[j]; });
  __syncthreads();
  for (int r = warp; r < b; r += kWarps) {
    const RowFrag z = row_load(s.Z + r * ldd, d, lane);
    const RowFrag t = row_load(s.R + r * ldd, d, lane);
    RowFrag g = row_loss_grad(z, t, gam, bet, d, lane, p.eps, p.ln);
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) g.v[u] *= s.lam[r];
    row_store(s.G + r * ldd, g, d, lane);  // λ ⊙ G
  }
  __syncthreads();
  const float tb = s.tau[b - 1];
  block_mma<kSplit>(d, d, b, op_t(s.K, ldd), op(s.G, ldd), 1.0f,
                    [&](int i, int j, float v) { s.W[i * ldd + j] -= tb * v; });
  if (p.bias)
    for (int c = tid; c < d; c += kThreads) {
      float acc = 0.0f;
      for (int j = 0; j < b; ++j) acc += s.G[j * ldd + c];
      s.c[c] -= tb * acc;
    }
  __syncthreads();
}

__device__ void chunk(const BwdParams& p, const BlockSmem& s, std::size_t seq0, std::size_t rs, int blk,
                      int t0, int m, const RowFrag& gam, const RowFrag& bet) {
  const int d = p.d, b = p.b, ldd = d + 4, ldb = b + 4;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const bool full = m == b;
  const float one = p.bias ? 1.0f : 0.0f;
  const float tb = s.tau[b - 1];
  const int h = blk % p.H;
  // dQ and dK of the mini-batch accumulate in shared memory (s.dQ, s.dK) and go to global memory
  // once, at the end; dV is written once, directly.
  float* dQ = s.dQ;
  float* dK = s.dK;
  float* dV = p.dV + seq0 + std::size_t(t0) * rs;
  const int lrs = ldd;

  // P1: inputs.
  load_backward_inputs<kThreads>(p, s, seq0, rs, blk, t0, m, d, ldd);
  __syncthreads();

  // P2: Z = K W + 1c;  C = Q Kᵀ (raw).
  block_mma<kSplit>(m, d, d, op(s.K, ldd), op(s.W, ldd), 1.0f,
                    [&](int i, int j, float v) { s.Z[i * ldd + j] = v + s.c[j]; });
  block_mma<kSplit>(m, m, d, op(s.Q, ldd), op_t(s.K, ldd), 1.0f,
                    [&](int i, int j, float v) { s.C[i * ldb + j] = v; });
  __syncthreads();

  // P3: G = lnl2(Z, R) with Z's statistics;  C ← tril(C + 1),  M = E ⊙ C.
  for (int r = warp; r < m; r += kWarps)
    row_loss_grad_keep_stats(s.Z + r * ldd, s.R + r * ldd, s.G + r * ldd, s.mu + r, s.rstd + r,
                             gam, bet, d, lane, p.eps, p.ln);
  for (int i = tid; i < m * d; i += kThreads) dK[(i / d) * ldd + i % d] = 0.0f;
  for (int i = tid; i < m * m; i += kThreads) {
    const int r = i / m, j = i % m;
    const float cv = j <= r ? s.C[r * ldb + j] + one : 0.0f;
    s.C[r * ldb + j] = cv;
    s.M[r * ldb + j] = s.tau[r] * s.lam[j] * cv;
  }
  __syncthreads();

  // P4: Z̄ = Q W + 1c − M G.
  block_mma<kSplit>(m, d, d, op(s.Q, ldd), op(s.W, ldd), 1.0f, m, op(s.M, ldb), op(s.G, ldd), -1.0f,
                    [&](int i, int j, float v) { s.Zb[i * ldd + j] = v + s.c[j]; });
  __syncthreads();

  // P5–P6: the output LN backward: x̂(Z̄) into s.dZ, dγ and dβ (column walk), dZ̄ into s.Zb;
  // dQ = dO (residual) or 0.
  block_output_ln_backward<kThreads>(s.Zb, s.dZ, s.dO, s.rstd2, gam, s.dgam, s.dbet, dQ, ldd, m, d,
                                     ldd, p.eps, p.ln, p.res);
  __syncthreads();

  // P7: dQ += dZ̄ Wᵀ;  dM = −dZ̄ Gᵀ;  K dW' into s.dZ (full).
  block_mma<kSplit>(m, d, d, op(s.Zb, ldd), op_t(s.W, ldd), 1.0f,
                    [&](int i, int j, float v) { dQ[i * lrs + j] += v; });
  block_mma<kSplit>(m, m, d, op(s.Zb, ldd), op_t(s.G, ldd), -1.0f,
                    [&](int i, int j, float v) { s.dM[i * ldb + j] = v; });
  if (full)
    block_mma<kSplit>(m, d, d, op(s.K, ldd), op(s.dW, ldd), 1.0f,
                      [&](int i, int j, float v) { s.dZ[i * ldd + j] = v; });
  __syncthreads();

  // P8: dG = −Mᵀ dZ̄ − e ⊙ (K dW' + dc');  dK −= e ⊙ (G dW'ᵀ);  de;  dC = tril(dM ⊙ E).
  block_mma<kSplit>(m, d, m, op_t(s.M, ldb), op(s.Zb, ldd), -1.0f, [&](int i, int j, float v) {
    if (full) v -= tb * s.lam[i] * (s.dZ[i * ldd + j] + (p.bias ? s.dc[j] : 0.0f));
    s.dG[i * ldd + j] = v;
  });
  if (full) {
    block_mma<kSplit>(m, d, d, op(s.G, ldd), op_t(s.dW, ldd), 1.0f,
                      [&](int i, int j, float v) { dK[i * lrs + j] -= tb * s.lam[i] * v; });
    for (int j = warp; j < m; j += kWarps) {
      const RowFrag kdw = row_load(s.dZ + j * ldd, d, lane);
      const RowFrag g = row_load(s.G + j * ldd, d, lane);
      float v = -row_dot(kdw, g);
      if (p.bias) v -= row_dot(g, row_load(s.dc, d, lane));
      if (lane == 0) s.de[j] = v;
    }
  }
  for (int i = tid; i < m * m; i += kThreads) {
    const int r = i / m, j = i % m;
    s.dC[r * ldb + j] = j <= r ? s.dM[r * ldb + j] * s.tau[r] * s.lam[j] : 0.0f;
  }
  __syncthreads();

  // P9: dQ += dC K, dK += dCᵀ Q;  dτ, dλ;  the backward of G = lnl2(Z, R).
  block_mma<kSplit>(m, d, m, op(s.dC, ldb), op(s.K, ldd), 1.0f,
                    [&](int i, int j, float v) { dQ[i * lrs + j] += v; });
  block_mma<kSplit>(m, d, m, op_t(s.dC, ldb), op(s.Q, ldd), 1.0f,
                    [&](int i, int j, float v) { dK[i * lrs + j] += v; });
  for (int i = tid; i < m; i += kThreads) {
    float dt = 0.0f, dl = 0.0f;
    for (int j = 0; j <= i; ++j) dt += s.dM[i * ldb + j] * s.C[i * ldb + j] * s.lam[j];
    for (int r = i; r < m; ++r) dl += s.dM[r * ldb + i] * s.C[r * ldb + i] * s.tau[r];
    if (full) {
      dl += tb * s.de[i];
      if (i == b - 1)
        for (int j = 0; j < m; ++j) dt += s.de[j] * s.lam[j];
    }
    s.dtau[i] += dt;
    p.dlam[std::size_t(blk) * p.T + t0 + i] = dl;
  }
  for (int r = warp; r < m; r += kWarps)
    row_loss_grad_backward(s.dG + r * ldd, s.Z + r * ldd, s.R + r * ldd, s.mu + r, s.rstd + r, gam,
                           bet, d, lane, p.ln, dV + std::size_t(r) * rs, s.dZ + r * ldd);
  __syncthreads();

  // P10: dK += dZ Wᵀ − dR;  dγ, dβ of the loss LN;  the carry dW, dc.
  const float* gamma_h = p.ln ? p.gamma + std::size_t(h) * d : nullptr;
  block_mma<kSplit>(m, d, d, op(s.dZ, ldd), op_t(s.W, ldd), 1.0f, [&](int i, int j, float v) {
    if (p.res) {
      const float x = s.dG[i * ldd + j];  // a (LN) or δ (no LN): −dR = γ ⊙ a, or δ
      v += p.ln ? gamma_h[j] * x : x;
    }
    dK[i * lrs + j] += v;
  });
  if (p.ln)
    block_loss_grad_param_backward(s.dG, s.Z, s.R, s.mu, s.rstd, m, d, ldd, gamma_h,
                                   p.beta + std::size_t(h) * d, s.dgam, s.dbet, tid, kThreads);
  block_mma<kSplit>(d, d, m, op_t(s.Q, ldd), op(s.Zb, ldd), 1.0f, m, op_t(s.K, ldd), op(s.dZ, ldd),
                    1.0f, [&](int i, int j, float v) {
                      s.dW[i * ldd + j] = (full ? s.dW[i * ldd + j] : 0.0f) + v;
                    });
  block_carry_colsum(s.dc, s.Zb, s.dZ, ldd, m, d, full, tid, kThreads);
  __syncthreads();
  // Copy-out, overlapping the next mini-batch's P1 (which does not touch s.dQ, s.dK; s.dK is next
  // written in P3 and s.dQ in P6, both after barriers).
  for (int i = tid; i < m * d; i += kThreads) {
    const int r = i / d, c = i % d;
    const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
    p.dQ[g] = s.dQ[r * ldd + c];
    p.dK[g] = s.dK[r * ldd + c];
  }
}

__global__ void __launch_bounds__(kThreads, 2) linear_backward_block_kernel(BwdParams p) {
  extern __shared__ float smem[];
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int d = p.d, b = p.b, ldd = d + 4;
  const int tid = threadIdx.x, lane = tid & 31;
  float* base = p.scratch ? p.scratch + std::size_t(blk) * block_floats(d, b) : smem;
  const BlockSmem s = carve(base, d, b);
  const std::size_t rs = std::size_t(p.H) * d;
  const std::size_t seq0 = std::size_t(n) * p.T * rs + std::size_t(h) * d;
  const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * d, d, lane) : RowFrag{};
  const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * d, d, lane) : RowFrag{};
  const std::size_t slot_floats = std::size_t(d) * d + d;
  float* slots = p.slots + std::size_t(blk) * p.group * slot_floats;

  for (int i = tid; i < d * ldd; i += kThreads) s.dW[i] = 0.0f;
  for (int c = tid; c < d; c += kThreads) s.dc[c] = s.dgam[c] = s.dbet[c] = 0.0f;
  for (int i = tid; i < b; i += kThreads) {
    s.tau[i] = p.tau[i];
    s.dtau[i] = 0.0f;
  }

  const int n_mb = (p.T + b - 1) / b;
  for (int grp = p.n_ck - 1; grp >= 0; --grp) {
    const int k0 = grp * p.group, k1 = min(n_mb, k0 + p.group);
    __syncthreads();
    const std::size_t ck = std::size_t(blk) * p.n_ck + grp;
    for (int i = tid; i < d * d; i += kThreads) s.W[(i / d) * ldd + i % d] = p.ckW[ck * d * d + i];
    for (int c = tid; c < d; c += kThreads) s.c[c] = p.bias ? p.ckb[ck * d + c] : 0.0f;
    __syncthreads();
    for (int k = k0; k + 1 < k1; ++k) {
      float* slot = slots + std::size_t(k - k0) * slot_floats;
      for (int i = tid; i < d * d; i += kThreads) slot[i] = s.W[(i / d) * ldd + i % d];
      for (int c = tid; c < d; c += kThreads) slot[d * d + c] = s.c[c];
      advance(p, s, seq0, rs, blk, k * b, gam, bet);  // touches s.W only after its first barrier
    }
    for (int k = k1 - 1; k >= k0; --k) {
      if (k != k1 - 1) {
        const float* slot = slots + std::size_t(k - k0) * slot_floats;
        for (int i = tid; i < d * d; i += kThreads) s.W[(i / d) * ldd + i % d] = slot[i];
        for (int c = tid; c < d; c += kThreads) s.c[c] = slot[d * d + c];
        __syncthreads();
      }
      const int t0 = k * b;
      chunk(p, s, seq0, rs, blk, t0, min(b, p.T - t0), gam, bet);
    }
  }

  for (int i = tid; i < d * d; i += kThreads)
    p.pW[std::size_t(blk) * d * d + i] = s.dW[(i / d) * ldd + i % d];
  for (int c = tid; c < d; c += kThreads) {
    p.pb[std::size_t(blk) * d + c] = p.bias ? s.dc[c] : 0.0f;
    p.pgam[std::size_t(blk) * d + c] = s.dgam[c];
    p.pbet[std::size_t(blk) * d + c] = s.dbet[c];
  }
  for (int i = tid; i < b; i += kThreads) p.ptau[std::size_t(blk) * b + i] = s.dtau[i];
}


// See sum_over_batch in ttt_host.hpp.
__global__ void sum_over_batch_kernel(const float* part, float* out, int B, int H, int len) {
  const std::size_t total = std::size_t(H) * len;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < total;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t h = i / len, e = i % len;
    float acc = 0.0f;
    for (int n = 0; n < B; ++n) acc += part[(std::size_t(n) * H + h) * len + e];
    out[i] = acc;
  }
}

}  // namespace

bool fused_supports(int d, int b) { return b == kMb && (d == 16 || d == 32 || d == 64); }

std::size_t fused_smem_bytes(int d) {
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

// split: 3xTF32 products (Default), or one tf32 product per term (Tf32).
void launch_backward_fused(const BwdParams& p, bool split, cudaStream_t stream) {
  switch (p.d) {
    case 16:
      return split ? launch_fused<16, true>(p, stream) : launch_fused<16, false>(p, stream);
    case 32:
      return split ? launch_fused<32, true>(p, stream) : launch_fused<32, false>(p, stream);
    case 64:
      return split ? launch_fused<64, true>(p, stream) : launch_fused<64, false>(p, stream);
    default:
      throw std::invalid_argument("ttt_linear_backward (fused): unsupported head_dim " +
                                  std::to_string(p.d));
  }
}

std::size_t roles_smem_bytes(int d) {
  switch (d) {
    case 16: return RolesLayout<16>::FLOATS * sizeof(float);
    case 32: return RolesLayout<32>::FLOATS * sizeof(float);
    case 64: return RolesLayout<64>::FLOATS * sizeof(float);
    default: return 0;
  }
}

void launch_backward_roles(const BwdParams& p, bool split, cudaStream_t stream) {
  switch (p.d) {
    case 16: return split ? launch_roles<16, true>(p, stream) : launch_roles<16, false>(p, stream);
    case 32: return split ? launch_roles<32, true>(p, stream) : launch_roles<32, false>(p, stream);
    case 64: return split ? launch_roles<64, true>(p, stream) : launch_roles<64, false>(p, stream);
    default:
      throw std::invalid_argument("ttt_linear_backward (two roles): unsupported head_dim " +
                                  std::to_string(p.d));
  }
}

void launch_backward_block(const BwdParams& p, std::size_t smem_bytes, cudaStream_t stream) {
  set_smem_limit(reinterpret_cast<const void*>(&linear_backward_block_kernel), smem_bytes);
  linear_backward_block_kernel<<<p.B * p.H, kThreads, smem_bytes, stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void sum_over_batch(const float* part, float* out, int B, int H, int len, cudaStream_t stream) {
  const std::size_t total = std::size_t(H) * len;
  const int grid = static_cast<int>(std::min<std::size_t>(ceil_div(total, 256), 1024));
  sum_over_batch_kernel<<<grid, 256, 0, stream>>>(part, out, B, H, len);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace detail

using namespace detail;

// Workspace of the backward, in floats: [slots][scratch?][partials].
namespace detail {
namespace {

struct BwdLayout {
  std::size_t slots = 0, scratch = 0, pW = 0, pb = 0, pgam = 0, pbet = 0, ptau = 0, total = 0;
  bool use_smem = true;
  std::size_t smem_bytes = 0;
};

// The fallback's per-block scratch goes to global memory only where the block's matrices exceed the
// shared memory of the device (the fused kernel needs none).
BwdLayout bwd_layout(const TttDims& D, int group) {
  BwdLayout L;
  const std::size_t BH = std::size_t(D.batch) * D.heads, d = D.head_dim, b = D.mini_batch;
  const std::size_t limit = max_dynamic_smem();
  auto needs_global = [&](std::size_t floats) { return floats * sizeof(float) > limit; };
  const std::size_t per_block = block_floats(D.head_dim, D.mini_batch);
  L.smem_bytes = per_block * sizeof(float);
  L.use_smem = !needs_global(per_block);
  const std::size_t scratch_floats = L.use_smem ? 0 : BH * per_block;
  std::size_t off = 0;
  L.slots = off;
  off += BH * std::size_t(group) * (d * d + d);
  L.scratch = off;
  off += scratch_floats;
  L.pW = off;
  off += BH * d * d;
  L.pb = off;
  off += BH * d;
  L.pgam = off;
  off += BH * d;
  L.pbet = off;
  off += BH * d;
  L.ptau = off;
  off += BH * b;
  L.total = off;
  return L;
}
}  // namespace
}  // namespace detail

std::size_t ttt_linear_backward_workspace_bytes(const TttDims& dims, int checkpoint_group) {
  check_dims("ttt_linear_backward_workspace_bytes", dims);
  require(checkpoint_group >= 1, "ttt_linear_backward_workspace_bytes: checkpoint_group must be >= 1");
  return bwd_layout(dims, checkpoint_group).total * sizeof(float);
}

bool ttt_linear_backward_supports(TttBackwardVersion version, const TttDims& dims) {
  switch (version) {
    case TttBackwardVersion::Default:
    case TttBackwardVersion::Fallback:
      return true;
    case TttBackwardVersion::Tf32:
      return fused_supports(dims.head_dim, dims.mini_batch) &&
             fused_smem_bytes(dims.head_dim) <= max_dynamic_smem();
  }
  return false;
}

void ttt_linear_backward(const TttLinearBackwardArgs& a) {
  const char* fn = "ttt_linear_backward";
  check_dims(fn, a.dims);
  check_eps(fn, a.opt);
  require(a.checkpoint_group >= 1, "ttt_linear_backward: checkpoint_group must be >= 1");
  // With dV_bf16 the kernel writes that instead of dV, which may then be null.
  const void* dV_out = a.dV_bf16 ? static_cast<const void*>(a.dV_bf16) : a.dV;
  // clang-format off
  for (auto [ptr, name] : {std::pair<const void*, const char*>{a.Q, "Q"}, {a.K, "K"}, {a.V, "V"},
                           {a.lambda, "lambda"}, {a.tau, "tau"}, {a.checkpoint_W, "checkpoint_W"},
                           {a.dO, "dO"}, {a.dQ, "dQ"}, {a.dK, "dK"}, {dV_out, "dV"},
                           {a.dlambda, "dlambda"}, {a.dtau, "dtau"}, {a.dln_weight, "dln_weight"},
                           {a.dln_bias, "dln_bias"}, {a.dW0, "dW0"}, {a.db0, "db0"},
                           {a.workspace, "workspace"}})
    check_ptr(fn, ptr, name);
  // clang-format on
  if (a.opt.bias) check_ptr(fn, a.checkpoint_b, "checkpoint_b (bias is on)");
  check_ln_params(fn, a);
  const TttDims& D = a.dims;
  auto al = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  const bool aligned = al(a.Q) && al(a.K) && al(a.V) && al(a.dO) && al(a.dQ) && al(a.dK) &&
                       al(a.dV) && al(a.workspace) && al(a.checkpoint_W) &&
                       (!a.opt.bias || al(a.checkpoint_b));
  require(a.version == TttBackwardVersion::Default || a.version == TttBackwardVersion::Fallback ||
              a.version == TttBackwardVersion::Tf32,
          "ttt_linear_backward: unknown version " + std::to_string(int(a.version)));
  const bool tf32 = a.version == TttBackwardVersion::Tf32;
  require(!tf32 || (ttt_linear_backward_supports(a.version, D) && aligned),
          "ttt_linear_backward: version Tf32 needs mini_batch 16, head_dim 16, 32 or 64 and 16-byte "
          "aligned Q, K, V, dO, dQ, dK, dV, checkpoints and workspace (the fused kernel's)");
  const bool fused = tf32 || (a.version == TttBackwardVersion::Default && aligned &&
                              ttt_linear_backward_supports(TttBackwardVersion::Tf32, D));
  require(
      !a.dV_bf16 || (tf32 && reinterpret_cast<std::uintptr_t>(a.dV_bf16) % 4 == 0),
      "ttt_linear_backward: dV_bf16 needs version Tf32 (the fused kernel: mini_batch 16, head_dim "
      "16, 32 or 64, 16-byte aligned buffers) and 4-byte alignment");
  const BwdLayout L = bwd_layout(D, a.checkpoint_group);
  require(a.workspace_bytes >= L.total * sizeof(float),
          "ttt_linear_backward: workspace has " + std::to_string(a.workspace_bytes) +
              " bytes, needs " + std::to_string(L.total * sizeof(float)) +
              " (ttt_linear_backward_workspace_bytes)");
  float* ws = static_cast<float*>(a.workspace);
  BwdParams p{};
  set_token_inputs(p, a);
  p.ckW = a.checkpoint_W;
  p.ckb = a.checkpoint_b;
  set_token_grads(p, a);
  p.dV16 = a.dV_bf16;
  p.whole_sm = a.whole_sm;
  p.slots = ws + L.slots;
  p.scratch = L.use_smem ? nullptr : ws + L.scratch;
  p.pW = ws + L.pW;
  p.pb = ws + L.pb;
  p.pgam = ws + L.pgam;
  p.pbet = ws + L.pbet;
  p.ptau = ws + L.ptau;
  set_dims(p, D);
  p.group = a.checkpoint_group;
  p.n_ck = ttt_num_checkpoints(D, a.checkpoint_group);
  set_options(p, a.opt);
  const std::size_t smem = L.use_smem ? L.smem_bytes : 0;
  // The two-role form where each block has an SM of its own and every state is a checkpoint.
  const bool roles = fused && a.two_roles && a.checkpoint_group == 1 &&
                     D.batch * D.heads <= multiprocessor_count() &&
                     roles_smem_bytes(D.head_dim) <= max_dynamic_smem();
  if (roles)
    launch_backward_roles(p, !tf32, a.stream);
  else if (fused)
    launch_backward_fused(p, !tf32, a.stream);
  else
    launch_backward_block(p, smem, a.stream);
  const int d = D.head_dim;
  auto sum = [&](const float* part, float* out, int B, int H, int len) {
    sum_over_batch(part, out, B, H, len, a.stream);
  };
  sum(p.pW, a.dW0, D.batch, D.heads, d * d);
  sum(p.pb, a.db0, D.batch, D.heads, d);
  sum(p.pgam, a.dln_weight, D.batch, D.heads, d);
  sum(p.pbet, a.dln_bias, D.batch, D.heads, d);
  sum(p.ptau, a.dtau, D.batch * D.heads, 1, D.mini_batch);
}

}  // namespace tttlab::kernels
