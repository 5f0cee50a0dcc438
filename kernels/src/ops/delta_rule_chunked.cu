// DeltaNet and Gated DeltaNet in the chunked (UT) form on the tensor cores, forward (see
// tttlab/kernels/delta_rule_chunked.hpp for the math and the contract; docs/MATH.md §11.3).
//
// Two kernels, chunks of C = 64 tokens:
//   ut_kernel    one block of 4 warps per (chunk, head), all in parallel. Warp w forms rows 16w ..
//                16w + 15 of K Kᵀ on the tensor cores (only the key blocks at or left of its own),
//                scales them to A_ij = β_i Γ_ij k_i·k_j below the diagonal and leaves them in shared
//                memory in fp32; then each thread solves (I + A) x = rhs for one column of [W | Ũ]
//                (rhs = β_i γ_i K[i, col] or β_i V[i, col]) by forward substitution in blocks of 16
//                rows (a block in registers, the rows before it from shared memory).
//                The system is unit lower-triangular with |A_ij| ≤ β_i (unit keys, Γ ≤ 1), so
//                substitution in fp32 is as accurate as the inputs. The backward's instance
//                (WITH_N) needs N = (I + A)⁻¹ itself: it forms N in fp32 by 16 × 16 blocks, then
//                W = N diag(βγ) K and Ũ = N diag(β) V on the tensor cores, the scaled N entering as a
//                bf16 hi part and a bf16 lo part (to ~2⁻¹⁶ of itself).
//   walk_kernel  one block of 4 warps per (head, 32 value columns cb) walks the chunks in order with
//                S[:, cols] in fp32 accumulators, as the fused chunked linear attention does
//                (linear_attention_chunked.cu). Per chunk: U = Ũ − W S_p and Q S_p (each warp its 16
//                rows; U goes to shared memory as bf16), a barrier, then the masked (Q Kᵀ ⊙ Γ) U for
//                O, and S ← γ_L S + (diag(γ_L/γ) K)ᵀ U (warp w the key rows 16·(MT·w + m)), the
//                diagonal applied to the Kᵀ fragments in registers (chunk_mma.cuh, mma_atb_scaled).
//                The copy of S that enters the products is bf16 in shared memory; the fp32 sum is never
//                rounded. The next chunk's tiles (Q, K, W, Ũ[:, cols], g) load by cp.async while this
//                one is used.
// No atomics: the same bits run to run.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "common/device_ranges.hpp"
#include "common/launch.hpp"
#include "ops/bf16_tiles.cuh"
#include "ops/chunk_mma.cuh"
#include "ttt/ttt_mma.cuh"
#include "tttlab/kernels/delta_rule_chunked.hpp"

namespace tttlab::kernels {
namespace {

using detail::cp_async16;
using detail::cp_async_commit;
using detail::cp_async_wait;
using detail::mma_bf16;
using detail::pack_bf16;
using detail::unpack_bf16;
using namespace detail::bf16_tiles;
using namespace detail::chunk_mma;

constexpr int kChunk = 64;     // C
constexpr int kThreads = 128;  // 4 warps, 16 rows of the chunk each
// Value columns of the state one walk block owns. 16 (twice the blocks, each reading the same Q, K
// and W tiles) measured the same as 32 at T = 2048 and 8192 on an H200 (docs/KERNELS.md).
constexpr int kCols = 32;
constexpr int kStages = 2;       // cp.async stages of the walk kernel
constexpr int kLA = kChunk + 4;  // row stride of the fp32 A tile (16-byte rows for float4 reads)

struct DeltaParams {
  const std::uint16_t *Q, *K, *V;
  const float *beta, *log_alpha;
  std::uint16_t* O;
  std::uint16_t *W, *U;  // workspace: W and Ũ, [R, H·d] bf16
  float* G;              // workspace: g, [B·H, NC·64]
  // The backward's: the ut kernel's N = (I + A)⁻¹ [B·H, NC, 64, 64] (or null: not wanted); the walk's
  // U [R, H·d] and the states S_p before chunks 1 .. NC − 1 [B·H, NC, d, d] (null: not wanted; O may
  // then be null too); the reverse walk's dU [R, H·d] and dS after chunks 0 .. NC − 2 [B·H, NC, d, d].
  std::uint16_t *N, *U_out, *S_out, *dU_out, *dS_out;
  const std::uint16_t* dO;
  const std::uint16_t *Ub, *dUb, *Sb, *dSb;  // the same, read by the gradient kernel
  float *dQ, *dK, *dV, *dbeta, *dlog_alpha;
  int H, T, NC;
};

__device__ __forceinline__ float bf16_value(std::uint16_t b) {
  return __uint_as_float(std::uint32_t(b) << 16);
}

// ---- ut kernel ------------------------------------------------------------------------------------
constexpr int kLT = kChunk + 8;  // row stride of the bf16 [64][64] tiles of the ut kernel
template <int D, bool WITH_N>
constexpr std::size_t ut_smem_bytes() {
  return WITH_N ? std::size_t(2) * kChunk * (D + 8) * sizeof(std::uint16_t) +
                      (2 * std::size_t(kChunk) * kLA + 2 * kChunk) * sizeof(float) +
                      std::size_t(2) * kChunk * kLT * sizeof(std::uint16_t)
                : std::size_t(2) * kChunk * (D + 8) * sizeof(std::uint16_t) +
                      (std::size_t(kChunk) * kLA + 3 * kChunk + std::size_t(kChunk) * 2 * D) *
                          sizeof(float);
}

template <int D, bool GATED, bool WITH_N>
__global__ void __launch_bounds__(kThreads) ut_kernel(DeltaParams p) {
  constexpr int LD = D + 8, KS = D / 16, NS = kChunk / 8;
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* Ks = smem;                                // [64][LD]
  std::uint16_t* Vs = Ks + kChunk * LD;                    // [64][LD]
  float* At = reinterpret_cast<float*>(Vs + kChunk * LD);  // [64][kLA]: At[j][i] = A_ij
  // The forward: At, g, β, then Xs [64][2D], the solved [W | Ũ], and β γ. The backward: At, N = (I + A)⁻¹
  // [64][kLA] (fp32, row-major), g, β, then the bf16 hi and lo parts of N's scaled copies.
  float* Ns = At + kChunk * kLA;
  float* gs = WITH_N ? Ns + kChunk * kLA : At + kChunk * kLA;  // [64] g_i
  float* bs = gs + kChunk;                                     // [64] β_i
  float* Xs = bs + kChunk;
  float* bgs = Xs + kChunk * 2 * D;  // [64] β_i γ_i (the forward's)
  std::uint16_t* Hs = reinterpret_cast<std::uint16_t*>(bs + kChunk);  // [64][kLT]
  std::uint16_t* Ls = Hs + kChunk * kLT;                              // [64][kLT]
  const int c = int(blockIdx.x), bh = int(blockIdx.y), n = bh / p.H, h = bh % p.H;
  const long ld = long(p.H) * D;
  const long base = long(n) * p.T * ld + long(h) * D;
  const int c0 = c * kChunk;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  load_rows<kChunk, D, kThreads>(Ks, p.K + base, c0, p.T, ld);
  load_rows<kChunk, D, kThreads>(Vs, p.V + base, c0, p.T, ld);
  cp_async_commit();
  if (warp == 0) {
    // β and the inclusive prefix sum g of log α over the chunk, two tokens a lane; rows past T have
    // β = 0 and log α = 0 (they write nothing and leave g at the last token's value).
    float b2[2], la[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int row = c0 + 2 * lane + e;
      const bool ok = row < p.T;
      const long gi = (long(n) * p.T + row) * p.H + h;
      b2[e] = ok ? p.beta[gi] : 0.f;
      la[e] = (GATED && ok) ? p.log_alpha[gi] : 0.f;
    }
    const float pair = la[0] + la[1];
    float incl = pair;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const float y = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += y;
    }
    const float g0 = incl - pair + la[0], g1 = incl;
    gs[2 * lane] = g0;
    gs[2 * lane + 1] = g1;
    bs[2 * lane] = b2[0];
    bs[2 * lane + 1] = b2[1];
    if (!WITH_N) {  // β_i γ_i, W's right-hand side: one exponential a row, not one per W column
      bgs[2 * lane] = GATED ? b2[0] * __expf(g0) : b2[0];
      bgs[2 * lane + 1] = GATED ? b2[1] * __expf(g1) : b2[1];
    }
    if (GATED) {
      float* gout = p.G + long(bh) * p.NC * kChunk + c0;
      gout[2 * lane] = g0;
      gout[2 * lane + 1] = g1;
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // A: rows 16·warp + (g, g + 8), the key blocks 0 .. warp (the rest of the row is never read).
  float s[NS][4];
  zero(s);
  mma_abt<LD, KS, NS>(s, Ks, 16 * warp, Ks, lane, 0, warp);
#pragma unroll
  for (int u = 0; u < NS; ++u)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = 16 * warp + g + 8 * (e >> 1), col = 8 * u + 2 * t + (e & 1);
      float a = 0.f;
      if (col < row) {
        a = bs[row] * s[u][e];
        if (GATED) a *= __expf(gs[row] - gs[col]);
      }
      if (u / 2 <= warp) At[col * kLA + row] = a;
    }
  __syncthreads();

  if constexpr (!WITH_N) {
    // Forward substitution, a column of [W | Ũ] per thread, x_i = rhs_i − Σ_{j<i} A_ij x_j, in four
    // blocks of 16 rows: the rows of earlier blocks come back from Xs (this thread's own column, so no
    // barrier), a block's own rows stay in registers.
    constexpr int kXS = 2 * D, ncols = 2 * D;
    for (int col = threadIdx.x; col < ncols; col += kThreads) {
      const bool is_w = col < D;
      const int cc = is_w ? col : col - D;
      const std::uint16_t* src = is_w ? Ks : Vs;
#pragma unroll 1
      for (int blk = 0; blk < kChunk / 16; ++blk) {
        const int i0 = 16 * blk;
        float r[16];
#pragma unroll
        for (int ii = 0; ii < 16; ++ii) {
          const int i = i0 + ii;
          r[ii] = (is_w ? bgs[i] : bs[i]) * bf16_value(src[i * LD + cc]);
        }
#pragma unroll 4
        for (int j = 0; j < i0; ++j) {
          const float xj = Xs[j * kXS + col];
          const float4* aj = reinterpret_cast<const float4*>(At + j * kLA + i0);
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const float4 a = aj[q];
            r[4 * q] = fmaf(-a.x, xj, r[4 * q]);
            r[4 * q + 1] = fmaf(-a.y, xj, r[4 * q + 1]);
            r[4 * q + 2] = fmaf(-a.z, xj, r[4 * q + 2]);
            r[4 * q + 3] = fmaf(-a.w, xj, r[4 * q + 3]);
          }
        }
#pragma unroll
        for (int ii = 1; ii < 16; ++ii)
#pragma unroll
          for (int jj = 0; jj < ii; ++jj)
            r[ii] = fmaf(-At[(i0 + jj) * kLA + i0 + ii], r[jj], r[ii]);
#pragma unroll
        for (int ii = 0; ii < 16; ++ii) {
          Xs[(i0 + ii) * kXS + col] = r[ii];
          const __nv_bfloat16 v = __float2bfloat16_rn(r[ii]);
          const std::uint16_t bits = *reinterpret_cast<const std::uint16_t*>(&v);
          if (c0 + i0 + ii < p.T) ((is_w ? p.W : p.U) + base + cc)[long(c0 + i0 + ii) * ld] = bits;
        }
      }
    }
    return;
  }

  // N = (I + A)⁻¹ in fp32, by 16 × 16 blocks (I + A is unit lower triangular, so N is too):
  // (1) each diagonal block N_bb = (I + A_bb)⁻¹ by forward substitution, a column per thread;
  // (2) block row i = 1, 2, 3 in turn: N_ij = −N_ii Σ_{k=j}^{i−1} A_ik N_kj for j < i, the sum T_ij
  //     first (into Hs, free until (3)), then its product with N_ii.
  // Every step is a 16-term fp32 sum per entry; the longest chain a thread runs is ~100 FMAs, where
  // substituting [W | Ũ] column by column took ~2000.
  if (threadIdx.x < kChunk) {
    const int b = threadIdx.x / 16, cc = threadIdx.x % 16, i0 = 16 * b;
    float x[16];
#pragma unroll
    for (int ii = 0; ii < 16; ++ii) {
      float v = ii == cc ? 1.f : 0.f;
#pragma unroll
      for (int jj = 0; jj < ii; ++jj) v = fmaf(-At[(i0 + jj) * kLA + i0 + ii], x[jj], v);
      x[ii] = v;
    }
#pragma unroll
    for (int ii = 0; ii < 16; ++ii) Ns[(i0 + ii) * kLA + i0 + cc] = x[ii];
  }
  // The blocks above the diagonal are zero.
  for (int idx = threadIdx.x; idx < kChunk * kChunk; idx += kThreads) {
    const int r = idx / kChunk, col = idx % kChunk;
    if (col / 16 > r / 16) Ns[r * kLA + col] = 0.f;
  }
  float* Tt = reinterpret_cast<float*>(Hs);  // [3][16][16]: T_ij of the current block row
  for (int bi = 1; bi < kChunk / 16; ++bi) {
    __syncthreads();  // the blocks of rows before bi are final
    for (int idx = threadIdx.x; idx < bi * 256; idx += kThreads) {
      const int bj = idx / 256, r = (idx / 16) % 16, cs = idx % 16;
      float t = 0.f;
      for (int m = 16 * bj; m < 16 * bi; ++m)
        t = fmaf(At[m * kLA + 16 * bi + r], Ns[m * kLA + 16 * bj + cs], t);
      Tt[idx] = t;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < bi * 256; idx += kThreads) {
      const int bj = idx / 256, r = (idx / 16) % 16, cs = idx % 16;
      float v = 0.f;
#pragma unroll
      for (int m = 0; m < 16; ++m)
        v = fmaf(Ns[(16 * bi + r) * kLA + 16 * bi + m], Tt[bj * 256 + m * 16 + cs], v);
      Ns[(16 * bi + r) * kLA + 16 * bj + cs] = -v;
    }
  }
  __syncthreads();
  // The backward's copy of N, bf16.
  for (int idx = threadIdx.x; idx < kChunk * kChunk / 2; idx += kThreads) {
    const int r = idx / (kChunk / 2), col = 2 * (idx % (kChunk / 2));
    *reinterpret_cast<std::uint32_t*>(p.N + (long(bh) * p.NC + c) * kChunk * kChunk + r * kChunk +
                                      col) = pack_bf16(Ns[r * kLA + col], Ns[r * kLA + col + 1]);
  }

  // (3) W = N diag(β γ) K and Ũ = N diag(β) V on the tensor cores. The scaled N goes in as two bf16
  // parts, hi = bf16(x) and lo = bf16(x − hi), so that it enters the products to ~2⁻¹⁶ of itself,
  // as accurate as the fp32 substitution was; K and V are the exact bf16 inputs. Warp w forms rows
  // 16w .. 16w + 15 and writes them as bf16 (rows < T).
  constexpr int NV = D / 8;
#pragma unroll 1
  for (int which = 0; which < 2; ++which) {  // W, then Ũ
    if (which == 1) __syncthreads();         // every warp is done reading the hi and lo parts for W
    for (int idx = threadIdx.x; idx < kChunk * kChunk / 2; idx += kThreads) {
      const int r = idx / (kChunk / 2), col = 2 * (idx % (kChunk / 2));
      float x[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = col + e;
        x[e] = Ns[r * kLA + j] * bs[j];
        if (GATED && which == 0) x[e] *= __expf(gs[j]);
      }
      const std::uint32_t hi = pack_bf16(x[0], x[1]);
      const float2 hf = unpack_bf16(hi);
      *reinterpret_cast<std::uint32_t*>(Hs + r * kLT + col) = hi;
      *reinterpret_cast<std::uint32_t*>(Ls + r * kLT + col) = pack_bf16(x[0] - hf.x, x[1] - hf.y);
    }
    __syncthreads();
    const std::uint16_t* Y = which == 0 ? Ks : Vs;
    float acc[NV][4];
    zero(acc);
    mma_ab_strided<kLT, LD, kChunk / 16, NV>(acc, Hs, 16 * warp, Y, lane);
    mma_ab_strided<kLT, LD, kChunk / 16, NV>(acc, Ls, 16 * warp, Y, lane);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = 16 * warp + g + 8 * r;
      if (c0 + row >= p.T) continue;
      std::uint16_t* out = (which == 0 ? p.W : p.U) + base + long(c0 + row) * ld;
#pragma unroll
      for (int uu = 0; uu < NV; ++uu)
        *reinterpret_cast<std::uint32_t*>(out + 8 * uu + 2 * t) =
            pack_bf16(acc[uu][2 * r], acc[uu][2 * r + 1]);
    }
  }
}

// ---- walk kernel ----------------------------------------------------------------------------------
// One stage of the walk kernel: Q, K, W [64][D + 8], Ũ[:, cols] [64][COLS + 8], g [64] fp32.
template <int D, int COLS>
__host__ __device__ constexpr int walk_tile_elems() {
  return kChunk * (3 * (D + 8) + COLS + 8) + 2 * kChunk;
}
template <int D, int COLS>
constexpr std::size_t walk_smem_bytes() {
  return (std::size_t(kStages) * walk_tile_elems<D, COLS>() +
          (std::size_t(D) + kChunk) * (COLS + 8)) *
         sizeof(std::uint16_t);
}

template <int D, bool GATED, int COLS>
__global__ void __launch_bounds__(kThreads) walk_kernel(DeltaParams p) {
  static_assert(D % 64 == 0, "the walk needs D / 16 to be a multiple of the 4 warps");
  constexpr int LD = D + 8, LV = COLS + 8, KS = D / 16, NV = COLS / 8, MT = D / 64;
  constexpr int kTile = walk_tile_elems<D, COLS>();
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* Ss = smem + kStages * kTile;  // [D][LV]: S_p[:, cols] as bf16
  std::uint16_t* Us = Ss + D * LV;             // [64][LV]: U
  const int cb = int(blockIdx.x), bh = int(blockIdx.y), n = bh / p.H, h = bh % p.H;
  const long ld = long(p.H) * D;
  const long base = long(n) * p.T * ld + long(h) * D;
  const int v0 = cb * COLS;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  auto load = [&](int c, int b) {
    std::uint16_t* st = smem + b * kTile;
    load_rows<kChunk, D, kThreads>(st, p.Q + base, c * kChunk, p.T, ld);
    load_rows<kChunk, D, kThreads>(st + kChunk * LD, p.K + base, c * kChunk, p.T, ld);
    load_rows<kChunk, D, kThreads>(st + 2 * kChunk * LD, p.W + base, c * kChunk, p.T, ld);
    load_rows<kChunk, COLS, kThreads>(st + 3 * kChunk * LD, p.U + base + v0, c * kChunk, p.T, ld);
    if (GATED && threadIdx.x < kChunk / 4)
      cp_async16(st + 3 * kChunk * LD + kChunk * LV + 8 * threadIdx.x,
                 p.G + long(bh) * p.NC * kChunk + c * kChunk + 4 * threadIdx.x, 16);
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < p.NC) load(i, i);
    cp_async_commit();
  }
  float st[MT][NV][4];  // the running state, key rows 16·(MT·warp + m) .., columns v0 ..
#pragma unroll
  for (int m = 0; m < MT; ++m) zero(st[m]);
  for (int c = 0; c < p.NC; ++c) {
    const int b = c % kStages;
    cp_async_wait<kStages - 2>();  // chunk c's group has landed
    __syncthreads();  // every warp is done with chunk c − 1 (its buffers, U, the state copy) and
                      // chunk c's state copy is written
    if (c + kStages - 1 < p.NC) load(c + kStages - 1, (c + kStages - 1) % kStages);
    cp_async_commit();
    const std::uint16_t* Qs = smem + b * kTile;
    const std::uint16_t* Ks = Qs + kChunk * LD;
    const std::uint16_t* Ws = Ks + kChunk * LD;
    const std::uint16_t* Ut = Ws + kChunk * LD;  // Ũ[:, cols]
    const float* gs = reinterpret_cast<const float*>(Ut + kChunk * LV);
    const float gL = GATED ? gs[kChunk - 1] : 0.f;

    // (Q Kᵀ) ⊙ Γ masked to j ≤ i, for O; warp w's rows see the key blocks 0 .. w. It does not wait for
    // U, so the gated rule forms it beside U's products, where its exponentials overlap the state's
    // chain (4 % less time at T = 8192) rather than following the barrier; DeltaNet's, with no
    // exponentials, forms it after the barrier (1 % less time there than beside U).
    float s[kChunk / 8][4];
    auto masked_scores = [&] {
      zero(s);
      mma_abt<LD, KS, kChunk / 8>(s, Qs, 16 * warp, Ks, lane, 0, warp);
#pragma unroll
      for (int uu = 0; uu < kChunk / 8; ++uu)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = 8 * uu + 2 * t + (e & 1), row = 16 * warp + g + 8 * (e >> 1);
          if (col > row)
            s[uu][e] = 0.f;
          else if (GATED)
            s[uu][e] *= __expf(gs[row] - gs[col]);
        }
    };

    // U = Ũ − W S_p and diag(γ) Q S_p on this warp's rows.
    float u[NV][4], o[NV][4];
    zero(u);
    zero(o);
    if (c > 0) {
      mma_ab_strided<LD, LV, KS, NV>(u, Ws, 16 * warp, Ss, lane);
      mma_ab_strided<LD, LV, KS, NV>(o, Qs, 16 * warp, Ss, lane);
    }
    if (GATED && p.O) masked_scores();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = 16 * warp + g + 8 * r;
      const float gi = GATED ? gs[row] : 0.f;
      const float gamma = GATED ? __expf(gi) : 1.f;
#pragma unroll
      for (int uu = 0; uu < NV; ++uu) {
        const int col = 8 * uu + 2 * t;
        const float2 ut = unpack_bf16(*reinterpret_cast<const std::uint32_t*>(Ut + row * LV + col));
        const float a0 = ut.x - u[uu][2 * r], a1 = ut.y - u[uu][2 * r + 1];
        *reinterpret_cast<std::uint32_t*>(Us + row * LV + col) = pack_bf16(a0, a1);
        if (p.U_out && c * kChunk + row < p.T)
          *reinterpret_cast<std::uint32_t*>(p.U_out + base + long(c * kChunk + row) * ld + v0 +
                                            col) = pack_bf16(a0, a1);
        if (GATED) {
          o[uu][2 * r] *= gamma;
          o[uu][2 * r + 1] *= gamma;
        }
      }
    }
    __syncthreads();  // every row of U is written

    // O = diag(γ) Q S_p + ((Q Kᵀ) ⊙ Γ, j ≤ i) U.
    if (p.O) {
      if (!GATED) masked_scores();
      mma_p_y<LV, NV>(o, s, Us, lane, 0, warp);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = c * kChunk + 16 * warp + g + 8 * r;
        if (row >= p.T) continue;
        std::uint16_t* out = p.O + base + long(row) * ld + v0;
#pragma unroll
        for (int uu = 0; uu < NV; ++uu)
          *reinterpret_cast<std::uint32_t*>(out + 8 * uu + 2 * t) =
              pack_bf16(o[uu][2 * r], o[uu][2 * r + 1]);
      }
    }
    if (c + 1 == p.NC) break;

    // S ← γ_L S + (diag(γ_L/γ) K)ᵀ U, the diagonal applied to Kᵀ's fragments. The copy S_p in Ss was
    // last read before the barrier above, so it is overwritten in place; the next chunk reads it after
    // its own first barrier.
    const float decay = GATED ? __expf(gL) : 1.f;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const int m0 = 16 * (MT * warp + m);
      if (GATED)
#pragma unroll
        for (int uu = 0; uu < NV; ++uu)
#pragma unroll
          for (int e = 0; e < 4; ++e) st[m][uu][e] *= decay;
      if (GATED)
        mma_atb_scaled<LD, LV, kChunk / 16, NV>(st[m], Ks, m0, Us, lane,
                                                [&](int k) { return __expf(gL - gs[k]); });
      else
        mma_atb<LD, LV, kChunk / 16, NV>(st[m], Ks, m0, Us, lane);
#pragma unroll
      for (int uu = 0; uu < NV; ++uu)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const std::uint32_t v = pack_bf16(st[m][uu][2 * r], st[m][uu][2 * r + 1]);
          *reinterpret_cast<std::uint32_t*>(Ss + (m0 + g + 8 * r) * LV + 8 * uu + 2 * t) = v;
          if (p.S_out)
            *reinterpret_cast<std::uint32_t*>(p.S_out + (long(bh) * p.NC + c + 1) * D * D +
                                              (m0 + g + 8 * r) * D + v0 + 8 * uu + 2 * t) = v;
        }
    }
  }
  cp_async_wait<0>();
}

// ---- backward: the reverse walk ---------------------------------------------------------------------
// One block of 4 warps per (32 value columns cb, head bh) walks the chunks from the last with G = ∂L/∂S
// (the state after the chunk) in fp32 accumulators, [D, 32] per block. Per chunk, with P = (Q Kᵀ) ⊙ Γ
// masked to j ≤ i (read after the write), K̃ = diag(γ_L/γ) K and G the gradient of S_next:
//   dU = Pᵀ dO + K̃ G                     (U enters O through P and S_next through K̃ᵀ U)
//   G ← γ_L G + (diag(γ) Q)ᵀ dO − Wᵀ dU  (the gradient of S_p: O = diag(γ) Q S_p + …,
//                                          S_next = γ_L S_p + …, U = Ũ − W S_p)
// (γ = Γ = 1 for DeltaNet.) dU and each G (before the chunk that consumes it) go to the workspace in
// bf16 for the gradient kernel. G enters K G as a bf16 copy in shared memory, as S does in the forward
// walk; for the gated rule diag(γ) scales Q's fragments in registers, as K's in the forward walk.
template <int D>
__host__ __device__ constexpr int rwalk_tile_elems() {  // Q, K, W [64][D + 8], dO[:, cols], g
  return kChunk * (3 * (D + 8) + kCols + 8) + 2 * kChunk;
}
template <int D>
constexpr std::size_t rwalk_smem_bytes() {
  return (std::size_t(kStages) * rwalk_tile_elems<D>() + (std::size_t(D) + kChunk) * (kCols + 8)) *
         sizeof(std::uint16_t);
}

template <int D, bool GATED>
__global__ void __launch_bounds__(kThreads) rwalk_kernel(DeltaParams p) {
  constexpr int LD = D + 8, LV = kCols + 8, NV = kCols / 8, MT = D / 64, last = kChunk / 16 - 1;
  constexpr int kTile = rwalk_tile_elems<D>();
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* Gs = smem + kStages * kTile;  // [D][LV]: G[:, cols] as bf16
  std::uint16_t* dUs = Gs + D * LV;            // [64][LV]: dU[:, cols]
  const int cb = int(blockIdx.x), bh = int(blockIdx.y), n = bh / p.H, h = bh % p.H;
  const long ld = long(p.H) * D;
  const long base = long(n) * p.T * ld + long(h) * D;
  const int v0 = cb * kCols;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  auto load = [&](int i, int b) {
    const int c = p.NC - 1 - i, c0 = c * kChunk;
    std::uint16_t* st = smem + b * kTile;
    load_rows<kChunk, D, kThreads>(st, p.Q + base, c0, p.T, ld);
    load_rows<kChunk, D, kThreads>(st + kChunk * LD, p.K + base, c0, p.T, ld);
    load_rows<kChunk, D, kThreads>(st + 2 * kChunk * LD, p.W + base, c0, p.T, ld);
    load_rows<kChunk, kCols, kThreads>(st + 3 * kChunk * LD, p.dO + base + v0, c0, p.T, ld);
    if (GATED && threadIdx.x < kChunk / 4)
      cp_async16(st + 3 * kChunk * LD + kChunk * LV + 8 * threadIdx.x,
                 p.G + long(bh) * p.NC * kChunk + c0 + 4 * threadIdx.x, 16);
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < p.NC) load(i, i);
    cp_async_commit();
  }
  float gacc[MT][NV][4];
#pragma unroll
  for (int m = 0; m < MT; ++m) zero(gacc[m]);
  for (int i = 0; i < p.NC; ++i) {
    const int c = p.NC - 1 - i, b = i % kStages;
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (i + kStages - 1 < p.NC) load(i + kStages - 1, (i + kStages - 1) % kStages);
    cp_async_commit();
    const std::uint16_t* Qs = smem + b * kTile;
    const std::uint16_t* Ks = Qs + kChunk * LD;
    const std::uint16_t* Ws = Ks + kChunk * LD;
    const std::uint16_t* dOs = Ws + kChunk * LD;
    const float* gs = reinterpret_cast<const float*>(dOs + kChunk * LV);
    const float gL = GATED ? gs[kChunk - 1] : 0.f;

    // dU on this warp's rows (as keys: the queries at or after them, blocks warp .. last).
    float du[NV][4], x[kChunk / 8][4];
    zero(du);
    zero(x);
    mma_abt<LD, D / 16, kChunk / 8>(x, Ks, 16 * warp, Qs, lane, warp, last);
#pragma unroll
    for (int u = 0; u < kChunk / 8; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * u + 2 * t + (e & 1), row = 16 * warp + g + 8 * (e >> 1);
        if (col < row)
          x[u][e] = 0.f;
        else if (GATED)
          x[u][e] *= __expf(gs[col] - gs[row]);
      }
    mma_p_y<LV, NV>(du, x, dOs, lane, warp, last);
    if (i > 0) {
      if (GATED) {
        float kg[NV][4];
        zero(kg);
        mma_ab_strided<LD, LV, D / 16, NV>(kg, Ks, 16 * warp, Gs, lane);
        const float f0 = __expf(gL - gs[16 * warp + g]), f1 = __expf(gL - gs[16 * warp + g + 8]);
#pragma unroll
        for (int uu = 0; uu < NV; ++uu) {
          du[uu][0] += f0 * kg[uu][0];
          du[uu][1] += f0 * kg[uu][1];
          du[uu][2] += f1 * kg[uu][2];
          du[uu][3] += f1 * kg[uu][3];
        }
      } else {
        mma_ab_strided<LD, LV, D / 16, NV>(du, Ks, 16 * warp, Gs, lane);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = 16 * warp + g + 8 * r;
#pragma unroll
      for (int uu = 0; uu < NV; ++uu) {
        const std::uint32_t v = pack_bf16(du[uu][2 * r], du[uu][2 * r + 1]);
        *reinterpret_cast<std::uint32_t*>(dUs + row * LV + 8 * uu + 2 * t) = v;
        if (c * kChunk + row < p.T)
          *reinterpret_cast<std::uint32_t*>(p.dU_out + base + long(c * kChunk + row) * ld + v0 +
                                            8 * uu + 2 * t) = v;
      }
    }
    if (c == 0) break;
    __syncthreads();  // every row of dU is written; G's copy was last read above

    // G ← γ_L G + (diag(γ) Q)ᵀ dO − Wᵀ dU on the key rows 16·(MT·warp + m).
    const float decay = GATED ? __expf(gL) : 1.f;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const int m0 = 16 * (MT * warp + m);
      float wdu[NV][4];
      zero(wdu);
      if (GATED)
#pragma unroll
        for (int uu = 0; uu < NV; ++uu)
#pragma unroll
          for (int e = 0; e < 4; ++e) gacc[m][uu][e] *= decay;
      if (GATED)
        mma_atb_scaled<LD, LV, kChunk / 16, NV>(gacc[m], Qs, m0, dOs, lane,
                                                [&](int k) { return __expf(gs[k]); });
      else
        mma_atb<LD, LV, kChunk / 16, NV>(gacc[m], Qs, m0, dOs, lane);
      mma_atb<LD, LV, kChunk / 16, NV>(wdu, Ws, m0, dUs, lane);
#pragma unroll
      for (int uu = 0; uu < NV; ++uu)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          gacc[m][uu][2 * r] -= wdu[uu][2 * r];
          gacc[m][uu][2 * r + 1] -= wdu[uu][2 * r + 1];
          const std::uint32_t v = pack_bf16(gacc[m][uu][2 * r], gacc[m][uu][2 * r + 1]);
          *reinterpret_cast<std::uint32_t*>(Gs + (m0 + g + 8 * r) * LV + 8 * uu + 2 * t) = v;
          *reinterpret_cast<std::uint32_t*>(p.dS_out + (long(bh) * p.NC + c - 1) * D * D +
                                            (m0 + g + 8 * r) * D + v0 + 8 * uu + 2 * t) = v;
        }
    }
  }
  cp_async_wait<0>();
}

// ---- backward: the gradient kernel ----------------------------------------------------------------
// One block of 4 warps per (chunk, head), all in parallel, from the chunk's tiles, its U and dU (the
// walks'), S_p (before it; zero for chunk 0), G (the gradient of the state after it; zero for the last
// chunk) and N = (I + A)⁻¹ (the ut kernel's); T̃ = N diag(β), A = tril(diag(β)(K Kᵀ ⊙ Γ), −1),
// K̃ = diag(γ_L/γ) K, Kγ = diag(γ) K, P = (Q Kᵀ) ⊙ Γ and dP = dO Uᵀ, both masked to j ≤ i.
// Warp w owns rows 16w .. 16w + 15 of every [64, ·] result:
//   dQ  = diag(γ) dO S_pᵀ + (dP ⊙ Γ) K
//   dK  = (dP ⊙ Γ)ᵀ Q + diag(γ_L/γ) U Gᵀ + diag(γ) T̃ᵀ dW + E K + Eᵀ K
//   dV  = T̃ᵀ dU,   dW = −dU S_pᵀ
//   dT̃ = dU Vᵀ + dW Kγᵀ,   dN = dT̃ diag(β),   dA = −(Nᵀ dN Nᵀ) below the diagonal,
//   E = diag(β) (dA ⊙ Γ),   dβ_j = Σ_i N_ij dT̃_ij + Σ_{i<j} dA_ji Γ_ji (k_j·k_i)
// The gated rule adds the gradient of g (the chunk's cumulative log α), from the five places γ and Γ
// enter, each term read off a product above:
//   dg_i += γ_i q_i·(dO S_pᵀ)_i                  (O's diag(γ) Q S_p)
//   dg_i += Σ_j Z_ij, dg_j −= Σ_i Z_ij,  Z = dP ⊙ P   (P's Γ; the same for A's Γ with Z = dA ⊙ A)
//   dg_i −= z_i, dg_L += Σ_i z_i,  z_i = (γ_L/γ_i) k_i·(U Gᵀ)_i   (K̃)
//   dg_i += γ_i k_i·(T̃ᵀ dW)_i                    (Kγ)
//   dg_L += γ_L ⟨G, S_p⟩                          (S_next's γ_L S_p)
// and d log α_t = Σ_{i ≥ t} dg_i within the chunk (g_i = Σ_{t ≤ i} log α_t); the chunks before see
// α through S_p, whose gradient the reverse walk carried. (γ = Γ = 1 and no g for DeltaNet.) The
// intermediates dW, dN, Nᵀ dN and E pass between warps as bf16 tiles in shared memory, one barrier
// each; the row and column sums of dβ and dg go through small fp32 arrays, summed in a fixed order.
template <int D>
constexpr std::size_t grad_smem_bytes() {
  return (std::size_t(6) * kChunk * (D + 8) + std::size_t(2) * D * (D + 8) +
          std::size_t(3) * kChunk * (kChunk + 8)) *
             sizeof(std::uint16_t) +
         std::size_t(kChunk) * 16 * sizeof(float);
}

// A [16 × 64] C fragment (rows 16·warp ..) to a bf16 tile [64][LDT], each element times f(row, col).
template <int LDT, class F>
__device__ __forceinline__ void store_tile_bf16(std::uint16_t* S, const float (&x)[kChunk / 8][4],
                                                int warp, int lane, F f) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int u = 0; u < kChunk / 8; ++u)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = 16 * warp + g + 8 * r, col = 8 * u + 2 * t;
      *reinterpret_cast<std::uint32_t*>(S + row * LDT + col) =
          pack_bf16(x[u][2 * r] * f(row, col), x[u][2 * r + 1] * f(row, col + 1));
    }
}

// Σ over columns of x[row, col]·Y[row, col] for this warp's rows 16·warp + (g, g + 8), Y a bf16 tile
// [·][LY]: the two row sums, complete in every lane of the quad.
template <int LY, int NN>
__device__ __forceinline__ void row_dots(float (&rs)[2], const float (&x)[NN][4],
                                         const std::uint16_t* Y, int warp, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = 16 * warp + g + 8 * r;
    float s = 0.f;
#pragma unroll
    for (int u = 0; u < NN; ++u) {
      const float2 y =
          unpack_bf16(*reinterpret_cast<const std::uint32_t*>(Y + row * LY + 8 * u + 2 * t));
      s = fmaf(x[u][2 * r], y.x, fmaf(x[u][2 * r + 1], y.y, s));
    }
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    rs[r] = s;
  }
}

// The row sums (complete in every lane of a quad) and column sums (complete in lanes g = 0) of a warp's
// [16 × 64] fragment.
__device__ __forceinline__ void frag_sums(const float (&x)[kChunk / 8][4], float (&rs)[2],
                                          float (&cs)[kChunk / 8][2]) {
  rs[0] = rs[1] = 0.f;
#pragma unroll
  for (int u = 0; u < kChunk / 8; ++u) {
    rs[0] += x[u][0] + x[u][1];
    rs[1] += x[u][2] + x[u][3];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float c = x[u][e] + x[u][2 + e];
#pragma unroll
      for (int off = 4; off < 32; off *= 2) c += __shfl_xor_sync(0xffffffffu, c, off);
      cs[u][e] = c;
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    rs[r] += __shfl_xor_sync(0xffffffffu, rs[r], 1);
    rs[r] += __shfl_xor_sync(0xffffffffu, rs[r], 2);
  }
}

template <int D, bool GATED>
__global__ void __launch_bounds__(kThreads) grad_kernel(DeltaParams p) {
  constexpr int LD = D + 8, LC = kChunk + 8, KS = D / 16, ND = D / 8, NS = kChunk / 8;
  constexpr int last = kChunk / 16 - 1;
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* Qs = smem;
  std::uint16_t* Ks = Qs + kChunk * LD;
  std::uint16_t* Vs = Ks + kChunk * LD;
  std::uint16_t* dOs = Vs + kChunk * LD;
  std::uint16_t* Us = dOs + kChunk * LD;
  std::uint16_t* dUs = Us + kChunk * LD;
  std::uint16_t* Ss = dUs + kChunk * LD;                   // [D][LD] S_p
  std::uint16_t* Gs = Ss + D * LD;                         // [D][LD] G
  std::uint16_t* Ns = Gs + D * LD;                         // [64][LC] N
  std::uint16_t* X1 = Ns + kChunk * LC;                    // [64][LC]: dW, then Nᵀ dN
  std::uint16_t* X2 = X1 + kChunk * LC;                    // [64][LC]: dN, then E
  float* bs = reinterpret_cast<float*>(X2 + kChunk * LC);  // [64] β
  float* gs = bs + kChunk;                                 // [64] g
  float* colsum = gs + kChunk;                             // [4][64] Σ_i N_ij dT̃_ij per warp
  float* rowsum = colsum + 4 * kChunk;                     // [64] Σ_j dA_ij A_ij / β_i
  float* dgrow = rowsum + kChunk;                          // [64] dg's row terms
  float* dgcol = dgrow + kChunk;                           // [4][64] dg's column terms per warp
  float* dgl = dgcol + 4 * kChunk;                         // [4] dg_L's terms per warp
  float* egs = dgl + 4;                                    // [64] γ_i = e^{g_i}
  static_assert(D == 64, "the gradient kernel keeps dW in a [64][72] tile");
  const int c = int(blockIdx.x), bh = int(blockIdx.y), n = bh / p.H, h = bh % p.H;
  const long ld = long(p.H) * D;
  const long base = long(n) * p.T * ld + long(h) * D;
  const int c0 = c * kChunk;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const bool first = c == 0, last_chunk = c == p.NC - 1;
  load_rows<kChunk, D, kThreads>(Qs, p.Q + base, c0, p.T, ld);
  load_rows<kChunk, D, kThreads>(Ks, p.K + base, c0, p.T, ld);
  load_rows<kChunk, D, kThreads>(Vs, p.V + base, c0, p.T, ld);
  load_rows<kChunk, D, kThreads>(dOs, p.dO + base, c0, p.T, ld);
  load_rows<kChunk, D, kThreads>(Us, p.Ub + base, c0, p.T, ld);
  load_rows<kChunk, D, kThreads>(dUs, p.dUb + base, c0, p.T, ld);
  const long soff = (long(bh) * p.NC + c) * D * D;
  if (!first) load_rows<D, D, kThreads>(Ss, p.Sb + soff, 0, D, D);
  if (!last_chunk) load_rows<D, D, kThreads>(Gs, p.dSb + soff, 0, D, D);
  load_rows<kChunk, kChunk, kThreads>(Ns, p.N + (long(bh) * p.NC + c) * kChunk * kChunk, 0, kChunk,
                                      kChunk);
  cp_async_commit();
  if (threadIdx.x < kChunk) {
    const int row = c0 + threadIdx.x;
    bs[threadIdx.x] = row < p.T ? p.beta[(long(n) * p.T + row) * p.H + h] : 0.f;
    if (GATED) {
      const float gi = p.G[long(bh) * p.NC * kChunk + c0 + threadIdx.x];
      gs[threadIdx.x] = gi;
      egs[threadIdx.x] = __expf(gi);
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  const int row0 = c0 + 16 * warp, ra = 16 * warp + g, rb = ra + 8;
  const float gL = GATED ? gs[kChunk - 1] : 0.f;
  // Γ at this thread's 32 fragment positions (row 16·warp + g + 8·(e >> 1), col 8u + 2t + (e & 1)), in
  // both triangles: e^{g_row − g_col} for col ≤ row, as the tiles with queries (or A's rows) down
  // take it, and e^{g_col − g_row} for col > row, as the transposed tile of dK's second term takes it.
  // One exponential per position here, where each use computed its own (the gated kernel's largest
  // cost over DeltaNet's).
  float gam[NS][4];
#pragma unroll
  for (int u = 0; u < NS; ++u)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = 8 * u + 2 * t + (e & 1), row = 16 * warp + g + 8 * (e >> 1);
      gam[u][e] = GATED ? __expf(col <= row ? gs[row] - gs[col] : gs[col] - gs[row]) : 1.f;
    }
  float rs[2], cs[NS][2], dgr[2] = {0.f, 0.f}, dgc[NS][2], dgl_w = 0.f;
#pragma unroll
  for (int u = 0; u < NS; ++u) dgc[u][0] = dgc[u][1] = 0.f;

  // dQ = diag(γ) dO S_pᵀ + (dP ⊙ Γ) K; dg's O and P terms.
  float acc[ND][4], x[NS][4];
  zero(acc);
  zero(x);
  if (!first) mma_abt<LD, KS, ND>(acc, dOs, 16 * warp, Ss, lane);
  if (GATED) {
    row_dots<LD, ND>(rs, acc, Qs, warp, lane);
    const float ea = egs[ra], eb = egs[rb];
    dgr[0] += ea * rs[0];
    dgr[1] += eb * rs[1];
#pragma unroll
    for (int u = 0; u < ND; ++u) {
      acc[u][0] *= ea;
      acc[u][1] *= ea;
      acc[u][2] *= eb;
      acc[u][3] *= eb;
    }
  }
  mma_abt<LD, KS, NS>(x, dOs, 16 * warp, Us, lane, 0, warp);  // dP
  if (GATED) {
    float qk[NS][4], z[NS][4];
    zero(qk);
    mma_abt<LD, KS, NS>(qk, Qs, 16 * warp, Ks, lane, 0, warp);
#pragma unroll
    for (int u = 0; u < NS; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * u + 2 * t + (e & 1), row = 16 * warp + g + 8 * (e >> 1);
        x[u][e] *= col <= row ? gam[u][e] : 0.f;
        z[u][e] = x[u][e] * qk[u][e];
      }
    frag_sums(z, rs, cs);
    dgr[0] += rs[0];
    dgr[1] += rs[1];
#pragma unroll
    for (int u = 0; u < NS; ++u) {
      dgc[u][0] -= cs[u][0];
      dgc[u][1] -= cs[u][1];
    }
  } else {
#pragma unroll
    for (int u = 0; u < NS; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (8 * u + 2 * t + (e & 1) > 16 * warp + g + 8 * (e >> 1)) x[u][e] = 0.f;
  }
  mma_p_y<LD, ND>(acc, x, Ks, lane, 0, warp);
  store_rows(p.dQ + base, acc, row0, p.T, ld, lane);

  // dK, first terms: diag(γ_L/γ) U Gᵀ + ((dP ⊙ Γ)ᵀ masked to queries ≥ key) Q, kept in dk to the end.
  float dk[ND][4];
  zero(dk);
  zero(x);
  if (!last_chunk) {
    mma_abt<LD, KS, ND>(dk, Us, 16 * warp, Gs, lane);
    if (GATED) {
      const float fa = __expf(gL - gs[ra]), fb = __expf(gL - gs[rb]);
#pragma unroll
      for (int u = 0; u < ND; ++u) {
        dk[u][0] *= fa;
        dk[u][1] *= fa;
        dk[u][2] *= fb;
        dk[u][3] *= fb;
      }
      row_dots<LD, ND>(rs, dk, Ks, warp, lane);
      dgr[0] -= rs[0];
      dgr[1] -= rs[1];
      dgl_w += rs[0] + rs[1];  // the quad's rows; summed over g below
    }
  }
  mma_abt<LD, KS, NS>(x, Us, 16 * warp, dOs, lane, warp, last);
#pragma unroll
  for (int u = 0; u < NS; ++u)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = 8 * u + 2 * t + (e & 1), row = 16 * warp + g + 8 * (e >> 1);
      x[u][e] = col < row ? 0.f : x[u][e] * gam[u][e];
    }
  mma_p_y<LD, ND>(dk, x, Qs, lane, warp, last);

  // dW = −dU S_pᵀ (zero for the first chunk) to X1.
  zero(acc);
  if (!first) mma_abt<LD, KS, ND>(acc, dUs, 16 * warp, Ss, lane);
  store_tile_bf16<LC>(X1, acc, warp, lane, [](int, int) { return -1.f; });
  __syncthreads();

  // dV = diag(β) Nᵀ dU; dK += diag(γ β) Nᵀ dW (and its dg term).
  zero(acc);
  mma_atb<LC, LD, kChunk / 16, ND>(acc, Ns, 16 * warp, dUs, lane);
  {
    const float b0 = bs[ra], b1 = bs[rb];
#pragma unroll
    for (int u = 0; u < ND; ++u) {
      acc[u][0] *= b0;
      acc[u][1] *= b0;
      acc[u][2] *= b1;
      acc[u][3] *= b1;
    }
    store_rows(p.dV + base, acc, row0, p.T, ld, lane);
    zero(acc);
    mma_atb<LC, LC, kChunk / 16, ND>(acc, Ns, 16 * warp, X1, lane);
    const float w0 = b0 * (GATED ? egs[ra] : 1.f), w1 = b1 * (GATED ? egs[rb] : 1.f);
#pragma unroll
    for (int u = 0; u < ND; ++u) {
      acc[u][0] *= w0;
      acc[u][1] *= w0;
      acc[u][2] *= w1;
      acc[u][3] *= w1;
      dk[u][0] += acc[u][0];
      dk[u][1] += acc[u][1];
      dk[u][2] += acc[u][2];
      dk[u][3] += acc[u][3];
    }
    if (GATED) {
      row_dots<LD, ND>(rs, acc, Ks, warp, lane);
      dgr[0] += rs[0];
      dgr[1] += rs[1];
    }
  }

  // dT̃ = dU Vᵀ + dW Kγᵀ (rows i of this warp, all 64 columns j); dβ_j's first term, dN = dT̃ diag(β).
  zero(x);
  mma_abt<LD, KS, NS>(x, dUs, 16 * warp, Vs, lane);
  if (GATED) {
    float y[NS][4];
    zero(y);
    mma_abt<LC, KS, NS>(y, X1, 16 * warp, Ks, lane);
#pragma unroll
    for (int u = 0; u < NS; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) x[u][e] += y[u][e] * egs[8 * u + 2 * t + (e & 1)];
  } else {
    mma_abt<LC, KS, NS>(x, X1, 16 * warp, Ks, lane);
  }
#pragma unroll
  for (int u = 0; u < NS; ++u) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int col = 8 * u + 2 * t + e;
      float s =
          bf16_value(Ns[ra * LC + col]) * x[u][e] + bf16_value(Ns[rb * LC + col]) * x[u][2 + e];
#pragma unroll
      for (int off = 4; off < 32; off *= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
      if (g == 0) colsum[warp * kChunk + col] = s;
    }
  }
  __syncthreads();  // every warp is done reading X1 (dW)
  store_tile_bf16<LC>(X2, x, warp, lane, [&](int, int col) { return bs[col]; });
  __syncthreads();

  // Nᵀ dN to X1.
  zero(x);
  mma_atb<LC, LC, kChunk / 16, NS>(x, Ns, 16 * warp, X2, lane);
  __syncthreads();  // every warp is done reading X2 (dN)
  store_tile_bf16<LC>(X1, x, warp, lane, [](int, int) { return 1.f; });
  __syncthreads();

  // dA = −(Nᵀ dN) Nᵀ below the diagonal; with K Kᵀ ⊙ Γ (= A / β_i below it): dβ's second term, dg's A
  // terms (Z = dA ⊙ A) and E = diag(β)(dA ⊙ Γ).
  zero(x);
  mma_abt<LC, kChunk / 16, NS>(x, X1, 16 * warp, Ns, lane);
  float kk[NS][4];
  zero(kk);
  mma_abt<LD, KS, NS>(kk, Ks, 16 * warp, Ks, lane, 0, warp);
#pragma unroll
  for (int u = 0; u < NS; ++u)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = 8 * u + 2 * t + (e & 1), row = 16 * warp + g + 8 * (e >> 1);
      x[u][e] = col < row ? -x[u][e] : 0.f;     // dA
      kk[u][e] *= col < row ? gam[u][e] : 0.f;  // A / β_i
    }
  {
    float z[NS][4];
#pragma unroll
    for (int u = 0; u < NS; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) z[u][e] = x[u][e] * kk[u][e];
    frag_sums(z, rs, cs);
  }
  if (t == 0) {
    rowsum[ra] = rs[0];
    rowsum[rb] = rs[1];
  }
  if (GATED) {
    dgr[0] += bs[ra] * rs[0];
    dgr[1] += bs[rb] * rs[1];
    // Column sums of dA ⊙ A = β_i (dA ⊙ kk): rows scaled by β first.
    float z[NS][4];
#pragma unroll
    for (int u = 0; u < NS; ++u) {
      z[u][0] = bs[ra] * x[u][0] * kk[u][0];
      z[u][1] = bs[ra] * x[u][1] * kk[u][1];
      z[u][2] = bs[rb] * x[u][2] * kk[u][2];
      z[u][3] = bs[rb] * x[u][3] * kk[u][3];
    }
    float rs2[2];
    frag_sums(z, rs2, cs);
#pragma unroll
    for (int u = 0; u < NS; ++u) {
      dgc[u][0] -= cs[u][0];
      dgc[u][1] -= cs[u][1];
    }
  }
  // E = diag(β)(dA ⊙ Γ); dA is zero on and above the diagonal already.
  {
    const float b0 = bs[ra], b1 = bs[rb];
#pragma unroll
    for (int u = 0; u < NS; ++u) {
      x[u][0] *= b0 * gam[u][0];
      x[u][1] *= b0 * gam[u][1];
      x[u][2] *= b1 * gam[u][2];
      x[u][3] *= b1 * gam[u][3];
    }
  }
  store_tile_bf16<LC>(X2, x, warp, lane, [](int, int) { return 1.f; });
  if (GATED) {
    if (t == 0) {
      dgrow[ra] = dgr[0];
      dgrow[rb] = dgr[1];
    }
    if (g == 0)
#pragma unroll
      for (int u = 0; u < NS; ++u) {
        dgcol[warp * kChunk + 8 * u + 2 * t] = dgc[u][0];
        dgcol[warp * kChunk + 8 * u + 2 * t + 1] = dgc[u][1];
      }
    // dg_L: the K̃ terms (one value per quad, summed over the warp's quads) and γ_L ⟨G, S_p⟩ over this
    // warp's quarter of the state.
    float l = t == 0 ? dgl_w : 0.f;
    if (!first && !last_chunk) {
      float gsum = 0.f;
      for (int e = threadIdx.x; e < D * D; e += kThreads) {
        const int r = e / D, col = e % D;
        gsum = fmaf(bf16_value(Gs[r * LD + col]), bf16_value(Ss[r * LD + col]), gsum);
      }
      l += __expf(gL) * gsum;
    }
#pragma unroll
    for (int off = 1; off < 32; off *= 2) l += __shfl_xor_sync(0xffffffffu, l, off);
    if (lane == 0) dgl[warp] = l;
  }
  __syncthreads();

  // dK += E K + Eᵀ K, then out; dβ; d log α.
  mma_ab_strided<LC, LD, kChunk / 16, ND>(dk, X2, 16 * warp, Ks, lane);
  mma_atb<LC, LD, kChunk / 16, ND>(dk, X2, 16 * warp, Ks, lane);
  store_rows(p.dK + base, dk, row0, p.T, ld, lane);
  if (threadIdx.x < kChunk && c0 + int(threadIdx.x) < p.T) {
    const int j = threadIdx.x;
    p.dbeta[(long(n) * p.T + c0 + j) * p.H + h] = colsum[j] + colsum[kChunk + j] +
                                                  colsum[2 * kChunk + j] + colsum[3 * kChunk + j] +
                                                  rowsum[j];
  }
  if (GATED && warp == 0) {
    float d2[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int i = 2 * lane + e;
      d2[e] =
          dgrow[i] + dgcol[i] + dgcol[kChunk + i] + dgcol[2 * kChunk + i] + dgcol[3 * kChunk + i];
      if (i == kChunk - 1) d2[e] += dgl[0] + dgl[1] + dgl[2] + dgl[3];
    }
    // Suffix sums: d log α_t = Σ_{i ≥ t} dg_i.
    const float pair = d2[0] + d2[1];
    float suf = pair;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const float y = __shfl_down_sync(0xffffffffu, suf, off);
      if (lane + off < 32) suf += y;
    }
    const float s0 = suf, s1 = suf - d2[0];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int row = c0 + 2 * lane + e;
      if (row < p.T) p.dlog_alpha[(long(n) * p.T + row) * p.H + h] = e == 0 ? s0 : s1;
    }
  }
}

// ---- host side ------------------------------------------------------------------------------------

void require(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument(msg);
}

int chunks(const AttentionDims& d) { return (d.seq_len + kChunk - 1) / kChunk; }
std::size_t elems(const AttentionDims& d) {
  return std::size_t(d.batch) * d.seq_len * d.heads * d.head_dim;
}
std::size_t gate_elems(const AttentionDims& d) {
  return std::size_t(d.batch) * d.seq_len * d.heads;
}
std::size_t g_bytes(const AttentionDims& d) {
  return std::size_t(d.batch) * d.heads * chunks(d) * kChunk * sizeof(float);
}

void check_dims(const char* fn, const AttentionDims& d) {
  detail::check_chunked_dims(fn, d.batch, d.heads, d.seq_len, d.head_dim,
                             chunked_delta_rule_supported(d), "64 or 128");
}

using detail::check_device_ranges;
using Range = detail::DeviceRange;

// All of L1 as shared memory: at d = 64 three walk blocks (76 KiB each) fit an SM, one wave at B16 H12.
template <class Kernel>
void launch(Kernel kernel, dim3 grid, std::size_t smem, cudaStream_t st, const DeltaParams& p) {
  detail::allow_shared_memory(kernel, smem);
  kernel<<<grid, kThreads, smem, st>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

template <int D, bool GATED>
void forward_launch(const DeltaParams& p, int bh, cudaStream_t st) {
  launch(ut_kernel<D, GATED, false>, dim3(p.NC, bh), ut_smem_bytes<D, false>(), st, p);
  launch(walk_kernel<D, GATED, kCols>, dim3(D / kCols, bh), walk_smem_bytes<D, kCols>(), st, p);
}

// The backward's ut and walk kernels: N, W, Ũ and g, then U and the states before each chunk (and O when
// p.O is set: the forward that keeps them for its backward).
template <bool GATED>
void recompute_launch64(const DeltaParams& p, int bh, cudaStream_t st) {
  launch(ut_kernel<64, GATED, true>, dim3(p.NC, bh), ut_smem_bytes<64, true>(), st, p);
  launch(walk_kernel<64, GATED, kCols>, dim3(64 / kCols, bh), walk_smem_bytes<64, kCols>(), st, p);
}

template <bool GATED>
void backward_launch64(const DeltaParams& p, int bh, bool kept, cudaStream_t st) {
  if (!kept) recompute_launch64<GATED>(p, bh, st);
  launch(rwalk_kernel<64, GATED>, dim3(64 / kCols, bh), rwalk_smem_bytes<64>(), st, p);
  launch(grad_kernel<64, GATED>, dim3(p.NC, bh), grad_smem_bytes<64>(), st, p);
}

std::size_t state_bytes(const AttentionDims& d) {
  return std::size_t(d.batch) * d.heads * chunks(d) * d.head_dim * d.head_dim *
         sizeof(std::uint16_t);
}
std::size_t n_bytes(const AttentionDims& d) {
  return std::size_t(d.batch) * d.heads * chunks(d) * kChunk * kChunk * sizeof(std::uint16_t);
}

// Points p at the memory a forward keeps for its backward, laid out in this order: W, Ũ, U, the states,
// N, g.
void point_at_kept(DeltaParams& p, const AttentionDims& d, void* base) {
  const std::size_t ne = elems(d);
  p.W = static_cast<std::uint16_t*>(base);
  p.U = p.W + ne;
  p.U_out = p.U + ne;
  p.S_out = p.U_out + ne;
  p.N = p.S_out + state_bytes(d) / sizeof(std::uint16_t);
  p.G = reinterpret_cast<float*>(p.N + n_bytes(d) / sizeof(std::uint16_t));
}

}  // namespace

bool chunked_delta_rule_supported(const AttentionDims& d) {
  return d.head_dim == 64 || d.head_dim == 128;
}

std::size_t chunked_delta_rule_forward_workspace_bytes(const AttentionDims& dims) {
  check_dims("chunked_delta_rule_forward_workspace_bytes", dims);
  return 2 * elems(dims) * sizeof(std::uint16_t) + g_bytes(dims);
}

std::size_t chunked_delta_rule_keep_bytes(const AttentionDims& dims) {
  check_dims("chunked_delta_rule_keep_bytes", dims);
  return 3 * elems(dims) * sizeof(std::uint16_t) + state_bytes(dims) + n_bytes(dims) +
         g_bytes(dims);
}

void chunked_delta_rule_forward(const ChunkedDeltaRuleForwardArgs& a) {
  const char* fn = "chunked_delta_rule_forward";
  check_dims(fn, a.dims);
  const bool keep = a.keep != nullptr;
  require(!keep || chunked_delta_rule_backward_supported(a.dims),
          std::string(fn) + ": keep needs head_dim 64, the backward's (got " +
              std::to_string(a.dims.head_dim) + ")");
  const std::size_t nb = elems(a.dims) * sizeof(std::uint16_t),
                    gb = gate_elems(a.dims) * sizeof(float),
                    wsb = keep ? chunked_delta_rule_keep_bytes(a.dims)
                               : chunked_delta_rule_forward_workspace_bytes(a.dims);
  if (keep)
    require(a.keep_bytes >= wsb, std::string(fn) + ": keep has " + std::to_string(a.keep_bytes) +
                                     " bytes, needs " + std::to_string(wsb) +
                                     " (chunked_delta_rule_keep_bytes)");
  else
    require(a.workspace_bytes >= wsb, std::string(fn) + ": workspace has " +
                                          std::to_string(a.workspace_bytes) + " bytes, needs " +
                                          std::to_string(wsb) +
                                          " (chunked_delta_rule_forward_workspace_bytes)");
  const bool gated = a.log_alpha != nullptr;
  // log_alpha is optional: a null one is the DeltaNet, not a missing input, so it is checked only
  // when given.
  const Range ins[] = {{a.Q, nb, "Q"},
                       {a.K, nb, "K"},
                       {a.V, nb, "V"},
                       {a.beta, gb, "beta"},
                       {gated ? a.log_alpha : a.beta, gb, gated ? "log_alpha" : "beta"}};
  const Range outs[] = {{a.O, nb, "O"},
                        {keep ? a.keep : a.workspace, wsb, keep ? "keep" : "workspace"}};
  check_device_ranges(fn, ins, 5, outs, 2);
  DeltaParams p{};
  p.Q = a.Q;
  p.K = a.K;
  p.V = a.V;
  p.beta = a.beta;
  p.log_alpha = a.log_alpha;
  p.O = a.O;
  p.H = a.dims.heads;
  p.T = a.dims.seq_len;
  p.NC = chunks(a.dims);
  const int bh = a.dims.batch * a.dims.heads;
  const cudaStream_t st = a.stream;
  if (keep) {
    point_at_kept(p, a.dims, a.keep);
    gated ? recompute_launch64<true>(p, bh, st) : recompute_launch64<false>(p, bh, st);
    return;
  }
  p.W = static_cast<std::uint16_t*>(a.workspace);
  p.U = p.W + elems(a.dims);
  p.G = reinterpret_cast<float*>(p.U + elems(a.dims));
  if (a.dims.head_dim == 64) {
    gated ? forward_launch<64, true>(p, bh, st) : forward_launch<64, false>(p, bh, st);
  } else {
    gated ? forward_launch<128, true>(p, bh, st) : forward_launch<128, false>(p, bh, st);
  }
}

bool chunked_delta_rule_backward_supported(const AttentionDims& d) { return d.head_dim == 64; }

std::size_t chunked_delta_rule_backward_workspace_bytes(const AttentionDims& dims, bool kept) {
  check_dims("chunked_delta_rule_backward_workspace_bytes", dims);
  // dU and the state gradients, after what a forward could have kept.
  const std::size_t own = elems(dims) * sizeof(std::uint16_t) + state_bytes(dims);
  return kept ? own : own + chunked_delta_rule_keep_bytes(dims);
}

void chunked_delta_rule_backward(const ChunkedDeltaRuleBackwardArgs& a) {
  const char* fn = "chunked_delta_rule_backward";
  check_dims(fn, a.dims);
  require(chunked_delta_rule_backward_supported(a.dims),
          std::string(fn) + ": head_dim must be 64 (got " + std::to_string(a.dims.head_dim) + ")");
  const bool gated = a.log_alpha != nullptr;
  require(gated == (a.dlog_alpha != nullptr),
          std::string(fn) + ": dlog_alpha must be given exactly with log_alpha (Gated DeltaNet)");
  const bool kept = a.kept != nullptr;
  const std::size_t nb = elems(a.dims) * sizeof(std::uint16_t), fb = elems(a.dims) * sizeof(float),
                    gb = gate_elems(a.dims) * sizeof(float),
                    wsb = chunked_delta_rule_backward_workspace_bytes(a.dims, kept),
                    kb = kept ? chunked_delta_rule_keep_bytes(a.dims) : 0;
  require(a.workspace_bytes >= wsb,
          std::string(fn) + ": workspace has " + std::to_string(a.workspace_bytes) +
              " bytes, needs " + std::to_string(wsb) + " (chunked_delta_rule_backward_workspace_bytes" +
              (kept ? " with kept" : "") + ")");
  require(!kept || a.kept_bytes >= kb, std::string(fn) + ": kept has " +
                                           std::to_string(a.kept_bytes) + " bytes, needs " +
                                           std::to_string(kb) + " (chunked_delta_rule_keep_bytes)");
  // log_alpha and dlog_alpha are optional (DeltaNet): a null pair stands in by repeating beta and
  // dbeta, so that only given pointers are checked.
  const Range ins[] = {{a.Q, nb, "Q"},
                       {a.K, nb, "K"},
                       {a.V, nb, "V"},
                       {a.beta, gb, "beta"},
                       {a.dO, nb, "dO"},
                       {gated ? a.log_alpha : a.beta, gb, gated ? "log_alpha" : "beta"},
                       {kept ? a.kept : a.beta, kept ? kb : gb, kept ? "kept" : "beta"}};
  const Range outs[] = {{a.dQ, fb, "dQ"},
                        {a.dK, fb, "dK"},
                        {a.dV, fb, "dV"},
                        {a.dbeta, gb, "dbeta"},
                        {a.workspace, wsb, "workspace"},
                        {gated ? a.dlog_alpha : nullptr, gated ? gb : 0, "dlog_alpha"}};
  check_device_ranges(fn, ins, 7, outs, gated ? 6 : 5);
  DeltaParams p{};
  p.Q = a.Q;
  p.K = a.K;
  p.V = a.V;
  p.beta = a.beta;
  p.dO = a.dO;
  p.dQ = a.dQ;
  p.dK = a.dK;
  p.dV = a.dV;
  p.dbeta = a.dbeta;
  p.log_alpha = a.log_alpha;
  p.dlog_alpha = a.dlog_alpha;
  // The workspace: dU, the state gradients, then (unless kept) room for what the forward keeps. The
  // kernels read the kept memory only (rwalk and grad), so a const_cast makes no write to it.
  p.dU_out = static_cast<std::uint16_t*>(a.workspace);
  p.dS_out = p.dU_out + elems(a.dims);
  point_at_kept(p, a.dims,
                kept ? const_cast<void*>(a.kept)
                     : static_cast<void*>(p.dS_out + state_bytes(a.dims) / sizeof(std::uint16_t)));
  p.Ub = p.U_out;
  p.dUb = p.dU_out;
  p.Sb = p.S_out;
  p.dSb = p.dS_out;
  p.H = a.dims.heads;
  p.T = a.dims.seq_len;
  p.NC = chunks(a.dims);
  const int bh = a.dims.batch * a.dims.heads;
  gated ? backward_launch64<true>(p, bh, kept, a.stream)
        : backward_launch64<false>(p, bh, kept, a.stream);
}

}  // namespace tttlab::kernels
