// Causal softmax attention on the tensor cores, bf16 operands and fp32 accumulation, forward and
// backward (see "Tensor-core softmax attention" in tttlab/kernels/attention.hpp).
//
// Every product is mma.sync m16n8k16 (bf16 × bf16 → fp32), its operands read from shared memory with
// ldmatrix. A warp always owns 16 rows of the product it computes, so the rows' reductions (softmax
// maximum and sum) stay inside a quad of 4 lanes. The score fragment a warp accumulates (C layout:
// lane (g, t) = (lane/4, lane%4) holds rows g and g+8, columns 2t, 2t+1 of each 8-wide n-tile) is
// exactly the A fragment of the next product once rounded to bf16, two n-tiles per 16-wide k-step,
// so P (forward), Pᵀ and dSᵀ (dK, dV kernel) and dS (dQ kernel) never touch shared memory.
//
// Shared-memory tiles are row-major bf16 with 8 elements of padding per row (row stride D + 8, i.e.
// 16 bytes past a multiple of 128): the 8 row addresses of one ldmatrix matrix fall on 8 distinct
// 16-byte bank groups, so no ldmatrix conflicts, and rows stay 16-byte aligned for cp.async.
//
// Scores are kept in log2 units: s₂ = q·k·log2(e)/√d, p = 2^(s₂ − m₂). The saved lse is the natural
// log; the backward converts it back. Masked scores are −∞ and give p = 0 exactly; key 0 is visible to
// every row and is in the first tile every warp visits, so no running maximum stays −∞ once used.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/cuda_check.hpp"
#include "common/launch.hpp"
#include "ops/bf16_tiles.cuh"
#include "ops/flash_attention_sm90a.hpp"
#include "ttt/ttt_mma.cuh"
#include "tttlab/kernels/attention.hpp"

namespace tttlab::kernels {
namespace {

using detail::allow_shared_memory;
using detail::cp_async_commit;
using detail::cp_async_wait;
using detail::exp2_fast;
using detail::mma_bf16;
using detail::pack_bf16;
using detail::quad_max;
using detail::quad_sum;
using namespace detail::bf16_tiles;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

struct FlashParams {
  const std::uint16_t *Q, *K, *V, *O, *dO;
  std::uint16_t* Out;
  const float* lse_in;
  float *lse, *delta, *dQ, *dK, *dV;
  int H, T;
  float scale;     // 1/√d
  float scale_l2;  // log2(e)/√d
};

// ---- small device helpers (the tile loads are ops/bf16_tiles.cuh) -------------------------------

// acc[16 × 8·NN] += A[16 × 16·KS] · Yᵀ with Y row-major in shared memory, A from shared memory.
template <int LD, int KS, int NN>
__device__ __forceinline__ void mma_a_smem_bt(float (&acc)[NN][4], const std::uint16_t* A,
                                              int arow0, const std::uint16_t* Y, int lane) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    std::uint32_t a[4];
    load_a<LD>(a, A, arow0, ks, lane);
#pragma unroll
    for (int np = 0; np < NN / 2; ++np) {
      std::uint32_t b[4];
      load_b_rows<LD>(b, Y, np, ks, lane);
      mma_bf16(acc[2 * np], a, b[0], b[1]);
      mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// acc[16 × 8·NN] += P · Y where P [16 × 16·KS] is a C-layout score fragment (p[8-wide n-tile][4])
// rounded to bf16 here, and Y [16·KS × 8·NN] row-major in shared memory.
template <int LD, int KS, int NN>
__device__ __forceinline__ void mma_p_y(float (&acc)[NN][4], const float (&p)[2 * KS][4],
                                        const std::uint16_t* Y, int lane) {
#pragma unroll
  for (int kk = 0; kk < KS; ++kk) {
    const std::uint32_t a[4] = {pack_bf16(p[2 * kk][0], p[2 * kk][1]),
                                pack_bf16(p[2 * kk][2], p[2 * kk][3]),
                                pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                                pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int np = 0; np < NN / 2; ++np) {
      std::uint32_t b[4];
      load_b_cols<LD>(b, Y, np, kk, lane);
      mma_bf16(acc[2 * np], a, b[0], b[1]);
      mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// ---- forward --------------------------------------------------------------------------------------
// A block of NW warps owns 16·MT·NW queries of one head (warp w: MT m-tiles of 16 rows from row
// 16·MT·w), keeps its Q fragments in registers and streams 64-key tiles of K and V through a double
// buffer (cp.async: the next tile loads while this one is used). With MT = 2 every K and V fragment
// read from shared memory feeds two mma instead of one. Query tiles are launched longest first.
constexpr int kFwdK = 64;

template <int D, int MT, int NW>
constexpr std::size_t fwd_smem_bytes() {
  return std::size_t(16 * MT * NW + 4 * kFwdK) * (D + 8) * sizeof(std::uint16_t);
}

template <int D, int MT, int NW>
__global__ void __launch_bounds__(NW * 32, (D <= 64 && MT == 1) ? 2 : 1)
    flash_forward_kernel(FlashParams p) {
  constexpr int LD = D + 8, KS = D / 16, NS = kFwdK / 8, ND = D / 8, BQ = 16 * MT * NW,
                NT = NW * 32;
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* Qs = smem;
  std::uint16_t* Ks = Qs + BQ * LD;  // [2][kFwdK][LD]
  std::uint16_t* Vs = Ks + 2 * kFwdK * LD;

  const int T = p.T, qtiles = (T + BQ - 1) / BQ;
  const int qt = qtiles - 1 - int(blockIdx.x);
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * D;
  const long base = long(n) * T * ld + long(h) * D;
  const int q0 = qt * BQ;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wrow0 = q0 + 16 * MT * warp;

  const int last = min(q0 + BQ, T) - 1;  // the tile's last real row sees keys up to `last`
  const int nkt = last / kFwdK + 1;

  load_rows<BQ, D, NT>(Qs, p.Q + base, q0, T, ld);
  load_rows<kFwdK, D, NT>(Ks, p.K + base, 0, T, ld);
  load_rows<kFwdK, D, NT>(Vs, p.V + base, 0, T, ld);
  cp_async_commit();

  float o[MT][ND][4];
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int i = 0; i < ND; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
  }
  std::uint32_t qf[MT][KS][4];

  for (int j = 0; j < nkt; ++j) {
    if (j + 1 < nkt) {
      const int b = (j + 1) & 1;
      load_rows<kFwdK, D, NT>(Ks + b * kFwdK * LD, p.K + base, (j + 1) * kFwdK, T, ld);
      load_rows<kFwdK, D, NT>(Vs + b * kFwdK * LD, p.V + base, (j + 1) * kFwdK, T, ld);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) load_a<LD>(qf[mt][ks], Qs, 16 * (MT * warp + mt), ks, lane);
    }
    const int k0 = j * kFwdK;
    const std::uint16_t* Kt = Ks + (j & 1) * kFwdK * LD;
    const std::uint16_t* Vt = Vs + (j & 1) * kFwdK * LD;
    if (k0 <= wrow0 + 16 * MT - 1) {  // some key of the tile is visible to some row of the warp
      float s[MT][NS][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < NS; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
#pragma unroll
        for (int np = 0; np < NS / 2; ++np) {
          std::uint32_t b[4];
          load_b_rows<LD>(b, Kt, np, ks, lane);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(s[mt][2 * np], qf[mt][ks], b[0], b[1]);
            mma_bf16(s[mt][2 * np + 1], qf[mt][ks], b[2], b[3]);
          }
        }
      const bool edge = k0 + kFwdK - 1 > wrow0 || k0 + kFwdK > T;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int i = 0; i < NS; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            // Raw scores here; the scale joins the exponent's FFMA below (scale_l2 > 0 keeps the
            // maximum's position).
            float x = s[mt][i][e];
            if (edge) {
              const int key = k0 + 8 * i + 2 * t + (e & 1),
                        row = wrow0 + 16 * mt + g + 8 * (e >> 1);
              if (key > row || key >= T) x = -INFINITY;
            }
            s[mt][i][e] = x;
            mx[e >> 1] = fmaxf(mx[e >> 1], x);
          }
        float alpha[2], ms[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float mn = fmaxf(m[mt][r], quad_max(mx[r] * p.scale_l2));
          alpha[r] = exp2_fast(m[mt][r] - mn);  // m = −∞ on the first tile: 0
          m[mt][r] = mn;
          ms[r] = -mn;
          l[mt][r] *= alpha[r];
        }
#pragma unroll
        for (int i = 0; i < ND; ++i) {
          o[mt][i][0] *= alpha[0];
          o[mt][i][1] *= alpha[0];
          o[mt][i][2] *= alpha[1];
          o[mt][i][3] *= alpha[1];
        }
#pragma unroll
        for (int i = 0; i < NS; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float pe = exp2_fast(fmaf(s[mt][i][e], p.scale_l2, ms[e >> 1]));
            s[mt][i][e] = pe;
            l[mt][e >> 1] += pe;
          }
      }
      // O += P·V, each V fragment used by the MT m-tiles.
#pragma unroll
      for (int kk = 0; kk < kFwdK / 16; ++kk) {
        std::uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          a[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          a[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          a[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          a[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int np = 0; np < ND / 2; ++np) {
          std::uint32_t b[4];
          load_b_cols<LD>(b, Vt, np, kk, lane);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(o[mt][2 * np], a[mt], b[0], b[1]);
            mma_bf16(o[mt][2 * np + 1], a[mt], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // the buffer read here is the one the next iteration's load overwrites
  }

  // O = acc / l, rounded to bf16; lse (natural log) by lane t = 0 of each row.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float lr = quad_sum(l[mt][r]);
      const int row = wrow0 + 16 * mt + g + 8 * r;
      if (row < T) {
        const float inv = 1.f / lr;
        std::uint16_t* out = p.Out + base + long(row) * ld;
#pragma unroll
        for (int i = 0; i < ND; ++i)
          *reinterpret_cast<std::uint32_t*>(out + 8 * i + 2 * t) =
              pack_bf16(o[mt][i][2 * r] * inv, o[mt][i][2 * r + 1] * inv);
        if (p.lse && t == 0) p.lse[(long(n) * p.H + h) * T + row] = (m[mt][r] + log2f(lr)) * kLn2;
      }
    }
}

// ---- backward -------------------------------------------------------------------------------------
// δ_t = dO_t · O_t per row (FlashAttention-2's D): one warp per row.
__global__ void flash_delta_kernel(FlashParams p, int d, long rows) {
  const long row = (long(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const long t = row % p.T, nh = row / p.T, h = nh % p.H, n = nh / p.H;
  const long off = (n * p.T + t) * long(p.H) * d + h * d;
  float s = 0.f;
  for (int c = lane; c < d; c += 32)
    s += detail::bf16_value(p.dO[off + c]) * detail::bf16_value(p.O[off + c]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) p.delta[row] = s;
}

// Both backward kernels: 4 warps, 64 rows per block (16 per warp) against 64-wide tiles of the other
// side, double-buffered.
constexpr int kBwdTile = 64, kBwdThreads = 128;

template <int D>
constexpr std::size_t bwd_smem_bytes() {
  return std::size_t(6 * kBwdTile) * (D + 8) * sizeof(std::uint16_t) + 4 * kBwdTile * sizeof(float);
}

// dK and dV: a block owns 64 keys (warp w: keys 16w .. 16w + 15) and walks the query tiles at or below
// its diagonal. With Sᵀ = K Qᵀ (this warp's rows are keys), Pᵀ = 2^(Sᵀ·log2e/√d − lse₂[q]):
//   dV += Pᵀ dO,   dPᵀ = V dOᵀ,   dSᵀ = Pᵀ ⊙ (dPᵀ − δ[q]),   dK += dSᵀ Q / √d.
template <int D>
__global__ void __launch_bounds__(kBwdThreads, D <= 64 ? 3 : 1) flash_dkdv_kernel(FlashParams p) {
  constexpr int LD = D + 8, KS = D / 16, NS = kBwdTile / 8, ND = D / 8;
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* Ks = smem;
  std::uint16_t* Vs = Ks + kBwdTile * LD;
  std::uint16_t* Qs = Vs + kBwdTile * LD;                           // [2][64][LD]
  std::uint16_t* dOs = Qs + 2 * kBwdTile * LD;                      // [2][64][LD]
  float* lse2 = reinterpret_cast<float*>(dOs + 2 * kBwdTile * LD);  // [2][64]
  float* dlt = lse2 + 2 * kBwdTile;                                 // [2][64]

  const int T = p.T, tiles = (T + kBwdTile - 1) / kBwdTile;
  const int kt = int(blockIdx.x);  // tile 0 has the most query tiles: launched first
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * D;
  const long base = long(n) * T * ld + long(h) * D;
  const long rbase = (long(n) * p.H + h) * T;
  const int k0 = kt * kBwdTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wkey0 = k0 + 16 * warp;

  auto load_q_tile = [&](int i, int b) {
    const int q0 = i * kBwdTile;
    load_rows<kBwdTile, D, kBwdThreads>(Qs + b * kBwdTile * LD, p.Q + base, q0, T, ld);
    load_rows<kBwdTile, D, kBwdThreads>(dOs + b * kBwdTile * LD, p.dO + base, q0, T, ld);
    for (int r = threadIdx.x; r < kBwdTile; r += kBwdThreads) {
      const bool ok = q0 + r < T;
      // Rows past T: a finite lse keeps 2^(s − lse) finite; their P is masked to 0 anyway.
      lse2[b * kBwdTile + r] = ok ? p.lse_in[rbase + q0 + r] * kLog2e : 0.f;
      dlt[b * kBwdTile + r] = ok ? p.delta[rbase + q0 + r] : 0.f;
    }
  };

  load_rows<kBwdTile, D, kBwdThreads>(Ks, p.K + base, k0, T, ld);
  load_rows<kBwdTile, D, kBwdThreads>(Vs, p.V + base, k0, T, ld);
  load_q_tile(kt, 0);
  cp_async_commit();

  float dk[ND][4], dv[ND][4];
#pragma unroll
  for (int i = 0; i < ND; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.f;

  for (int i = kt; i < tiles; ++i) {
    const int b = (i - kt) & 1;
    if (i + 1 < tiles) {
      load_q_tile(i + 1, b ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int q0 = i * kBwdTile;
    const std::uint16_t* Qt = Qs + b * kBwdTile * LD;
    const std::uint16_t* dOt = dOs + b * kBwdTile * LD;
    const float* l2 = lse2 + b * kBwdTile;
    const float* dl = dlt + b * kBwdTile;

    float s[NS][4], dp[NS][4];
#pragma unroll
    for (int u = 0; u < NS; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[u][e] = dp[u][e] = 0.f;
    mma_a_smem_bt<LD, KS, NS>(s, Ks, 16 * warp, Qt, lane);
    const bool edge = q0 < wkey0 + 15 || q0 + kBwdTile > T;
#pragma unroll
    for (int u = 0; u < NS; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qc = 8 * u + 2 * t + (e & 1);
        float pe = exp2_fast(fmaf(s[u][e], p.scale_l2, -l2[qc]));
        if (edge) {
          const int key = wkey0 + g + 8 * (e >> 1), q = q0 + qc;
          if (q < key || q >= T) pe = 0.f;
        }
        s[u][e] = pe;
      }
    mma_p_y<LD, kBwdTile / 16, ND>(dv, s, dOt, lane);
    mma_a_smem_bt<LD, KS, NS>(dp, Vs, 16 * warp, dOt, lane);
#pragma unroll
    for (int u = 0; u < NS; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[u][e] = s[u][e] * (dp[u][e] - dl[8 * u + 2 * t + (e & 1)]);
    mma_p_y<LD, kBwdTile / 16, ND>(dk, dp, Qt, lane);
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = wkey0 + g + 8 * r;
    if (key >= T) continue;
    float* dK = p.dK + base + long(key) * ld;
    float* dV = p.dV + base + long(key) * ld;
#pragma unroll
    for (int u = 0; u < ND; ++u) {
      *reinterpret_cast<float2*>(dK + 8 * u + 2 * t) =
          make_float2(dk[u][2 * r] * p.scale, dk[u][2 * r + 1] * p.scale);
      *reinterpret_cast<float2*>(dV + 8 * u + 2 * t) = make_float2(dv[u][2 * r], dv[u][2 * r + 1]);
    }
  }
}

// dQ: a block owns 64 queries (warp w: rows 16w .. 16w + 15) and walks the key tiles at or below its
// diagonal: P = 2^(S·log2e/√d − lse₂), dP = dO Vᵀ, dS = P ⊙ (dP − δ), dQ += dS K / √d.
template <int D>
__global__ void __launch_bounds__(kBwdThreads, D <= 64 ? 3 : 1) flash_dq_kernel(FlashParams p) {
  constexpr int LD = D + 8, KS = D / 16, NS = kBwdTile / 8, ND = D / 8;
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* Qs = smem;
  std::uint16_t* dOs = Qs + kBwdTile * LD;
  std::uint16_t* Ks = dOs + kBwdTile * LD;  // [2][64][LD]
  std::uint16_t* Vs = Ks + 2 * kBwdTile * LD;

  const int T = p.T, tiles = (T + kBwdTile - 1) / kBwdTile;
  const int qt = tiles - 1 - int(blockIdx.x);
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * D;
  const long base = long(n) * T * ld + long(h) * D;
  const long rbase = (long(n) * p.H + h) * T;
  const int q0 = qt * kBwdTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wrow0 = q0 + 16 * warp;

  load_rows<kBwdTile, D, kBwdThreads>(Qs, p.Q + base, q0, T, ld);
  load_rows<kBwdTile, D, kBwdThreads>(dOs, p.dO + base, q0, T, ld);
  load_rows<kBwdTile, D, kBwdThreads>(Ks, p.K + base, 0, T, ld);
  load_rows<kBwdTile, D, kBwdThreads>(Vs, p.V + base, 0, T, ld);
  cp_async_commit();

  float l2[2], dl[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = wrow0 + g + 8 * r;
    l2[r] = row < T ? p.lse_in[rbase + row] * kLog2e : 0.f;
    dl[r] = row < T ? p.delta[rbase + row] : 0.f;
  }
  float dq[ND][4];
#pragma unroll
  for (int i = 0; i < ND; ++i) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;

  for (int j = 0; j <= qt; ++j) {
    const int b = j & 1;
    if (j + 1 <= qt) {
      load_rows<kBwdTile, D, kBwdThreads>(Ks + (b ^ 1) * kBwdTile * LD, p.K + base,
                                          (j + 1) * kBwdTile, T, ld);
      load_rows<kBwdTile, D, kBwdThreads>(Vs + (b ^ 1) * kBwdTile * LD, p.V + base,
                                          (j + 1) * kBwdTile, T, ld);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int k0 = j * kBwdTile;
    const std::uint16_t* Kt = Ks + b * kBwdTile * LD;
    const std::uint16_t* Vt = Vs + b * kBwdTile * LD;
    float s[NS][4], dp[NS][4];
#pragma unroll
    for (int u = 0; u < NS; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[u][e] = dp[u][e] = 0.f;
    mma_a_smem_bt<LD, KS, NS>(s, Qs, 16 * warp, Kt, lane);
    mma_a_smem_bt<LD, KS, NS>(dp, dOs, 16 * warp, Vt, lane);
    const bool edge = k0 + kBwdTile - 1 > wrow0 || k0 + kBwdTile > T;
#pragma unroll
    for (int u = 0; u < NS; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        float pe = exp2_fast(fmaf(s[u][e], p.scale_l2, -l2[r]));
        if (edge) {
          const int key = k0 + 8 * u + 2 * t + (e & 1), row = wrow0 + g + 8 * r;
          if (key > row || key >= T) pe = 0.f;
        }
        dp[u][e] = pe * (dp[u][e] - dl[r]);
      }
    mma_p_y<LD, kBwdTile / 16, ND>(dq, dp, Kt, lane);
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = wrow0 + g + 8 * r;
    if (row >= T) continue;
    float* dQ = p.dQ + base + long(row) * ld;
#pragma unroll
    for (int u = 0; u < ND; ++u)
      *reinterpret_cast<float2*>(dQ + 8 * u + 2 * t) =
          make_float2(dq[u][2 * r] * p.scale, dq[u][2 * r + 1] * p.scale);
  }
}

// ---- host side ------------------------------------------------------------------------------------

void require(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument(msg);
}

void check_flash_dims(const char* fn, const AttentionDims& d) {
  const std::string f(fn);
  require(d.batch >= 1 && d.heads >= 1 && d.seq_len >= 1,
          f + ": batch, heads and seq_len must be >= 1 (got B=" + std::to_string(d.batch) +
              " H=" + std::to_string(d.heads) + " T=" + std::to_string(d.seq_len) + ")");
  require(flash_attention_supported(d),
          f + ": head_dim must be 32, 64 or 128 (got " + std::to_string(d.head_dim) + ")");
  require(double(d.batch) * d.seq_len * d.heads * d.head_dim < 9.0e18 && d.seq_len <= (1 << 30),
          f + ": tensors too large");
  require(double(d.batch) * d.heads <= 65535.0, f + ": batch·heads must be <= 65535 (grid limit)");
}

void check_ptr(const char* fn, const void* p, const char* name) {
  if (!p) throw std::invalid_argument(std::string(fn) + ": " + name + " is null");
}

// Byte ranges [a, a + na) and [b, b + nb) must not overlap.
void check_disjoint(const char* fn, const void* a, std::size_t na, const char* an, const void* b,
                    std::size_t nb, const char* bn) {
  if (!a || !b) return;
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  if (pa < pb + nb && pb < pa + na)
    throw std::invalid_argument(std::string(fn) + ": " + an + " overlaps " + bn);
}

void check_aligned(const char* fn, const void* p, const char* name) {
  require(reinterpret_cast<std::uintptr_t>(p) % 16 == 0,
          std::string(fn) + ": " + name + " must be 16-byte aligned (cudaMalloc gives 256)");
}

std::size_t elems(const AttentionDims& d) {
  return std::size_t(d.batch) * d.seq_len * d.heads * d.head_dim;
}
std::size_t rows_of(const AttentionDims& d) { return std::size_t(d.batch) * d.heads * d.seq_len; }

FlashParams make_params(const AttentionDims& d) {
  FlashParams p{};
  p.H = d.heads;
  p.T = d.seq_len;
  p.scale = float(1.0 / std::sqrt(double(d.head_dim)));
  p.scale_l2 = float(1.4426950408889634 / std::sqrt(double(d.head_dim)));
  return p;
}

template <class Kernel>
void launch(Kernel kernel, dim3 grid, int threads, std::size_t smem, cudaStream_t st,
            const FlashParams& p) {
  allow_shared_memory(kernel, smem);
  kernel<<<grid, threads, smem, st>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

template <int D, int MT, int NW>
void forward_launch_v(const FlashParams& p, int bh, cudaStream_t st) {
  constexpr int BQ = 16 * MT * NW;
  launch(flash_forward_kernel<D, MT, NW>, dim3((p.T + BQ - 1) / BQ, bh), NW * 32,
         fwd_smem_bytes<D, MT, NW>(), st, p);
}

// One m-tile per warp, 8 warps: at d = 64 on an H200 two m-tiles per warp (4 or 8 warps) measured
// 2–11% slower at T = 2048 and 8192 (fewer warps per SM to hide the softmax's latency behind the other warps' products).
template <int D>
void forward_launch(const FlashParams& p, int bh, cudaStream_t st) {
  forward_launch_v<D, 1, 8>(p, bh, st);
}

template <int D>
void backward_launch(const FlashParams& p, int bh, cudaStream_t st) {
  const unsigned tiles = (p.T + kBwdTile - 1) / kBwdTile;
  launch(flash_dkdv_kernel<D>, dim3(tiles, bh), kBwdThreads, bwd_smem_bytes<D>(), st, p);
  launch(flash_dq_kernel<D>, dim3(tiles, bh), kBwdThreads, bwd_smem_bytes<D>(), st, p);
}

}  // namespace

bool flash_attention_supported(const AttentionDims& d) {
  return d.head_dim == 32 || d.head_dim == 64 || d.head_dim == 128;
}

#if !TTTLAB_HAVE_SM90A
// A build without compute capability 9.0 among its targets has no sm_90a image to run.
bool detail::flash_sm90_available(int) { return false; }
void detail::flash_forward_sm90(const FlashSm90Forward&) {
  throw std::logic_error("flash_forward_sm90: this build has no sm_90a kernels");
}
void detail::flash_backward_sm90(const FlashSm90Backward&) {
  throw std::logic_error("flash_backward_sm90: this build has no sm_90a kernels");
}
#endif

bool flash_attention_wgmma_available(const AttentionDims& d) {
  return detail::flash_sm90_available(d.head_dim);
}

namespace {
// Whether the wgmma kernels run this call; a request for them where they cannot is refused.
bool use_wgmma(const char* fn, const AttentionDims& d, FlashPath path) {
  const bool wgmma = path != FlashPath::mma_sync && flash_attention_wgmma_available(d);
  require(wgmma || path != FlashPath::wgmma,
          std::string(fn) +
              ": the wgmma kernels need a compute capability 9.0 device, head_dim 64 "
              "or 128 and a build for architecture 90 (flash_attention_wgmma_available)");
  return wgmma;
}
}  // namespace

void flash_attention_forward(const FlashAttentionForwardArgs& a) {
  const char* fn = "flash_attention_forward";
  check_flash_dims(fn, a.dims);
  check_ptr(fn, a.Q, "Q");
  check_ptr(fn, a.K, "K");
  check_ptr(fn, a.V, "V");
  check_ptr(fn, a.O, "O");
  for (auto [ptr, name] :
       {std::pair<const void*, const char*>{a.Q, "Q"}, {a.K, "K"}, {a.V, "V"}, {a.O, "O"}})
    check_aligned(fn, ptr, name);
  const std::size_t nb = elems(a.dims) * 2, lb = rows_of(a.dims) * 4;
  for (auto [ptr, name] : {std::pair<const void*, const char*>{a.Q, "Q"}, {a.K, "K"}, {a.V, "V"}}) {
    check_disjoint(fn, a.O, nb, "O", ptr, nb, name);
    check_disjoint(fn, a.lse, lb, "lse", ptr, nb, name);
  }
  check_disjoint(fn, a.lse, lb, "lse", a.O, nb, "O");
  FlashParams p = make_params(a.dims);
  if (use_wgmma(fn, a.dims, a.path)) {
    detail::flash_forward_sm90({a.Q, a.K, a.V, a.O, a.lse, a.dims.batch, a.dims.heads,
                                a.dims.seq_len, a.dims.head_dim, p.scale_l2, a.stream});
    return;
  }
  p.Q = a.Q;
  p.K = a.K;
  p.V = a.V;
  p.Out = a.O;
  p.lse = a.lse;
  const int bh = a.dims.batch * a.dims.heads;
  switch (a.dims.head_dim) {
    case 32: forward_launch<32>(p, bh, a.stream); break;
    case 64: forward_launch<64>(p, bh, a.stream); break;
    default: forward_launch<128>(p, bh, a.stream); break;
  }
}

std::size_t flash_attention_backward_workspace_bytes(const AttentionDims& dims) {
  check_flash_dims("flash_attention_backward_workspace_bytes", dims);
  return rows_of(dims) * sizeof(float);
}

void flash_attention_backward(const FlashAttentionBackwardArgs& a) {
  const char* fn = "flash_attention_backward";
  check_flash_dims(fn, a.dims);
  struct Range {
    const void* p;
    std::size_t bytes;
    const char* name;
  };
  const std::size_t nb = elems(a.dims) * 2, fb = elems(a.dims) * 4, lb = rows_of(a.dims) * 4;
  const Range ins[] = {{a.Q, nb, "Q"}, {a.K, nb, "K"},   {a.V, nb, "V"},
                       {a.O, nb, "O"}, {a.dO, nb, "dO"}, {a.lse, lb, "lse"}};
  const Range outs[] = {
      {a.dQ, fb, "dQ"}, {a.dK, fb, "dK"}, {a.dV, fb, "dV"}, {a.workspace, lb, "workspace"}};
  for (const Range& r : ins) check_ptr(fn, r.p, r.name);
  for (const Range& r : outs) check_ptr(fn, r.p, r.name);
  for (const Range& r : ins)
    if (r.bytes == nb) check_aligned(fn, r.p, r.name);
  for (int i = 0; i < 3; ++i) check_aligned(fn, outs[i].p, outs[i].name);
  const std::size_t need = flash_attention_backward_workspace_bytes(a.dims);
  require(a.workspace_bytes >= need, std::string(fn) + ": workspace has " +
                                         std::to_string(a.workspace_bytes) + " bytes, needs " +
                                         std::to_string(need) +
                                         " (flash_attention_backward_workspace_bytes)");
  for (int i = 0; i < 4; ++i) {
    for (const Range& r : ins)
      check_disjoint(fn, outs[i].p, outs[i].bytes, outs[i].name, r.p, r.bytes, r.name);
    for (int j = i + 1; j < 4; ++j)
      check_disjoint(fn, outs[i].p, outs[i].bytes, outs[i].name, outs[j].p, outs[j].bytes,
                     outs[j].name);
  }
  FlashParams p = make_params(a.dims);
  p.Q = a.Q;
  p.K = a.K;
  p.V = a.V;
  p.O = a.O;
  p.dO = a.dO;
  p.lse_in = a.lse;
  p.delta = static_cast<float*>(a.workspace);
  p.dQ = a.dQ;
  p.dK = a.dK;
  p.dV = a.dV;
  const long rows = long(rows_of(a.dims));
  const int threads = 256;
  const long blocks = (rows * 32 + threads - 1) / threads;
  flash_delta_kernel<<<unsigned(blocks), threads, 0, a.stream>>>(p, a.dims.head_dim, rows);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
  if (use_wgmma(fn, a.dims, a.path)) {
    detail::flash_backward_sm90({a.Q, a.K, a.V, a.dO, a.lse, p.delta, a.dQ, a.dK, a.dV,
                                 a.dims.batch, a.dims.heads, a.dims.seq_len, a.dims.head_dim,
                                 p.scale, p.scale_l2, a.stream});
    return;
  }
  const int bh = a.dims.batch * a.dims.heads;
  switch (a.dims.head_dim) {
    case 32: backward_launch<32>(p, bh, a.stream); break;
    case 64: backward_launch<64>(p, bh, a.stream); break;
    default: backward_launch<128>(p, bh, a.stream); break;
  }
}

}  // namespace tttlab::kernels
