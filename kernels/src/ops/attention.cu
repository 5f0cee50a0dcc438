// Causal multi-head attention, forward and backward (see tttlab/kernels/attention.hpp).
//
// Every kernel works on 64 × 64 tiles of one head with 256 threads as a 16 × 16 grid: thread
// (ty, tx) = (tid / 16, tid % 16) owns rows ty + 16·i (i < 4) of the tile, columns tx + 16·j (j < 4)
// of a 64-key tile and DM/16 columns of a d-wide tile (acc_col: four consecutive ones per 64).
// DM ∈ {32, 64, 128} is d rounded up; the padding columns are loaded as zeros and never stored, so
// they change no sum.
//
// Shared-memory tiles are row-major with 4 floats of padding per row (leading dimension DM + 4 or
// 68), so rows stay 16-byte aligned and the products read float4s (a quarter of the load
// instructions of scalar reads) without bank conflicts:
//   A[row(ty, i)][c..c+3]   two rows per warp, each a broadcast over tx;
//   B[col(tx, j)][c..c+3]   8 rows per quarter-warp, 4 banks apart: all 32 banks once;
//   B[k][acc_col(tx, ·)]    contiguous 16-byte pieces.
// The rows of a half-warp share ty, so a row's reductions (max, sum) are shuffles over lanes xor 1..8.
//
// Softmax scores are kept in log2 units (s₂ = q·k·log2(e)/√d, p = 2^(s₂ − m₂)); the saved lse is
// converted back to the natural log. Masked scores are −∞ and give p = 0 exactly.
//
// Sliding window W (Params::window): query q sees the keys k with q − W < k ≤ q (in_band). A query
// tile walks the key tiles from the one holding q0 − W + 1 (its first row's first key) to its own,
// a key tile the query tiles from its own to the one holding k0 + 63 + W − 1 (its last key's last
// query); the mask cuts the boundary tiles. No limit is W = tiles·64, which masks nothing, not even
// in the padding rows, and starts every walk at tile 0: the causal kernels exactly. Without a limit
// the first key of a sequence is visible to every row; with one, a row's first tiles may hold none
// of its keys, so its maximum is still −∞ there and the exponentials subtract 0 in its place
// (p = 0, no NaN). Every row < T sees its own key, so its sum is ≥ 1 at the end. Linear attention
// has no window: its kernels keep the whole walk.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"
#include "ops/flash_attention_tf32.hpp"
#include "tttlab/kernels/attention.hpp"

namespace tttlab::kernels {
namespace {

constexpr int kTile = 64;  // queries per query tile, keys per key tile
constexpr int kThreads = 256;

struct Params {
  const float *Q, *K, *V, *O, *dO, *lse_in, *delta_in;
  float *Out, *lse, *delta, *dQ, *dK, *dV;
  int H, T, d;
  int tiles;       // ceil(T / 64)
  float scale;     // 1/√d (softmax), 1 (linear)
  float scale_l2;  // scale·log2(e)
  int window;      // W: the keys q − W + 1 .. q; tiles·64 when there is no limit (masks nothing)
  int band_tiles;  // query tiles a key tile's band meets, ⌊(W + 62)/64⌋ + 1: to k0 + 63 + W − 1
};

constexpr int kLdP = kTile + 4;  // score tiles [64][68]
// d-wide tiles [64][DM + 4]: rows 16-byte aligned for float4 reads.
template <int DM>
__host__ __device__ constexpr int ldt() { return DM + 4; }
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Rows r0 .. r0 + 63 of one head (row stride `ld` floats) into S[64][DM + 4]; rows ≥ T and columns
// ≥ d as zeros. Coalesced: consecutive threads read consecutive columns.
template <int DM>
__device__ __forceinline__ void load_tile(float* S, const float* G, int r0, int T, int d, long ld) {
  for (int idx = threadIdx.x; idx < kTile * DM; idx += kThreads) {
    const int r = idx / DM, c = idx % DM;
    S[r * ldt<DM>() + c] = (r0 + r < T && c < d) ? G[long(r0 + r) * ld + c] : 0.f;
  }
}

// q − W < k ≤ q, in one comparison: q − k ∈ [0, W).
__device__ __forceinline__ bool in_band(int q, int k, int window) {
  return unsigned(q - k) < unsigned(window);
}

// Column of element j (< DM/16) of a thread's d-wide accumulator row: four consecutive columns per
// 64 (DM ≥ 64) or two per 32 (DM = 32), so that B rows are read as float4 / float2.
template <int DM>
__device__ __forceinline__ int acc_col(int tx, int j) {
  if constexpr (DM >= 64) return 4 * tx + 64 * (j / 4) + (j % 4);
  else return 2 * tx + j;
}

__device__ __forceinline__ float half_warp_max(float v) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float half_warp_sum(float v) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// acc[i][j] += Σ_c A[row i][c] · B[col j][c] over c < DM: a 64 × 64 tile of A·Bᵀ, both operands
// row-major [64][DM + 4], read four columns at a time.
template <int DM>
__device__ __forceinline__ void tile_abt(float (&acc)[4][4], const float* A, const float* B, int ty, int tx) {
#pragma unroll 2
  for (int c = 0; c < DM; c += 4) {
    float4 a[4], b[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = *reinterpret_cast<const float4*>(A + (ty + 16 * i) * ldt<DM>() + c);
#pragma unroll
    for (int j = 0; j < 4; ++j) b[j] = *reinterpret_cast<const float4*>(B + (tx + 16 * j) * ldt<DM>() + c);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float v = acc[i][j];
        v = fmaf(a[i].x, b[j].x, v);
        v = fmaf(a[i].y, b[j].y, v);
        v = fmaf(a[i].z, b[j].z, v);
        acc[i][j] = fmaf(a[i].w, b[j].w, v);
      }
  }
}

// Row k of B at the thread's accumulator columns (acc_col).
template <int DM>
__device__ __forceinline__ void load_cols(float (&b)[DM / 16], const float* Brow, int tx) {
  if constexpr (DM >= 64) {
#pragma unroll
    for (int m = 0; m < DM / 64; ++m) {
      const float4 v = *reinterpret_cast<const float4*>(Brow + 4 * tx + 64 * m);
      b[4 * m] = v.x, b[4 * m + 1] = v.y, b[4 * m + 2] = v.z, b[4 * m + 3] = v.w;
    }
  } else {
    const float2 v = *reinterpret_cast<const float2*>(Brow + 2 * tx);
    b[0] = v.x, b[1] = v.y;
  }
}

// acc[i][j] += Σ_k P[row i][k] · B[k][acc_col(j)] over the 64 keys: P [64][68], B [64][DM + 4]; P read
// four keys at a time.
template <int DM>
__device__ __forceinline__ void tile_pb(float (&acc)[4][DM / 16], const float* P, const float* B, int ty, int tx) {
#pragma unroll 2
  for (int k = 0; k < kTile; k += 4) {
    float4 p4[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) p4[i] = *reinterpret_cast<const float4*>(P + (ty + 16 * i) * kLdP + k);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      float b[DM / 16];
      load_cols<DM>(b, B + (k + kk) * ldt<DM>(), tx);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float p = kk == 0 ? p4[i].x : kk == 1 ? p4[i].y : kk == 2 ? p4[i].z : p4[i].w;
#pragma unroll
        for (int j = 0; j < DM / 16; ++j) acc[i][j] = fmaf(p, b[j], acc[i][j]);
      }
    }
  }
}

// Rows r0 + ty + 16·i < T of acc (times `mul`) into one head's [T, d] block of G (row stride ld).
template <int DM>
__device__ __forceinline__ void store_rows(float* G, const float (&acc)[4][DM / 16], float mul, int r0, int T,
                                           int d, long ld, int ty, int tx) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = r0 + ty + 16 * i;
    if (r >= T) continue;
#pragma unroll
    for (int j = 0; j < DM / 16; ++j) {
      const int c = acc_col<DM>(tx, j);
      if (c < d) G[long(r) * ld + c] = acc[i][j] * mul;
    }
  }
}

// ---- forward ---------------------------------------------------------------------------------------
// Block (x, y): query tile tiles − 1 − x (the longest first) of head y = n·H + h.
template <int DM, bool kLinear>
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(Params p) {
  extern __shared__ float smem[];
  float* Qs = smem;
  float* Ks = Qs + kTile * ldt<DM>();
  float* Vs = Ks + kTile * ldt<DM>();
  float* Ps = Vs + kTile * ldt<DM>();
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const int qt = p.tiles - 1 - int(blockIdx.x), q0 = qt * kTile;
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * p.d;
  const long head = long(n) * p.T * ld + long(h) * p.d;
  load_tile<DM>(Qs, p.Q + head, q0, p.T, p.d, ld);

  float acc[4][DM / 16] = {};
  float m[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) m[i] = -INFINITY, l[i] = 0.f;

  for (int kt = kLinear ? 0 : max(0, q0 - p.window + 1) / kTile; kt <= qt; ++kt) {
    const int k0 = kt * kTile;
    __syncthreads();  // the previous tile's readers of Ks, Vs, Ps are done
    load_tile<DM>(Ks, p.K + head, k0, p.T, p.d, ld);
    load_tile<DM>(Vs, p.V + head, k0, p.T, p.d, ld);
    __syncthreads();
    float s[4][4] = {};
    tile_abt<DM>(s, Qs, Ks, ty, tx);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int q = q0 + ty + 16 * i;
      if constexpr (kLinear) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int k = k0 + tx + 16 * j;
          Ps[(ty + 16 * i) * kLdP + tx + 16 * j] = (k <= q && k < p.T) ? s[i][j] : 0.f;
        }
      } else {
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int k = k0 + tx + 16 * j;
          s[i][j] = (in_band(q, k, p.window) && k < p.T) ? s[i][j] * p.scale_l2 : -INFINITY;
          mx = fmaxf(mx, s[i][j]);
        }
        const float m_new = fmaxf(m[i], half_warp_max(mx));
        // −∞ while none of the row's keys has been seen (windowed rows only): subtract 0 instead,
        // which keeps alpha and every p at 0 rather than exp2(−∞ + ∞) = NaN.
        const float m_sub = m_new == -INFINITY ? 0.f : m_new;
        const float alpha = exp2f(m[i] - m_sub);  // 0 on the row's first tile (m = −∞)
        m[i] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float e = exp2f(s[i][j] - m_sub);
          sum += e;
          Ps[(ty + 16 * i) * kLdP + tx + 16 * j] = e;
        }
        l[i] = l[i] * alpha + sum;  // this thread's columns only; summed over tx at the end
#pragma unroll
        for (int j = 0; j < DM / 16; ++j) acc[i][j] *= alpha;
      }
    }
    __syncthreads();
    tile_pb<DM>(acc, Ps, Vs, ty, tx);
  }

  if constexpr (kLinear) {
    store_rows<DM>(p.Out + head, acc, 1.f, q0, p.T, p.d, ld, ty, tx);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float total = half_warp_sum(l[i]);  // ≥ 1 for q < T: the row's maximum contributes 2⁰
      const int q = q0 + ty + 16 * i;
      const float inv = 1.f / total;
#pragma unroll
      for (int j = 0; j < DM / 16; ++j) acc[i][j] *= inv;
      if (p.lse && tx == 0 && q < p.T) p.lse[(long(n) * p.H + h) * p.T + q] = (m[i] + log2f(total)) * kLn2;
    }
    store_rows<DM>(p.Out + head, acc, 1.f, q0, p.T, p.d, ld, ty, tx);
  }
}

// ---- backward --------------------------------------------------------------------------------------
// δ_t = dO_t · O_t of every row (= Σ_s P_ts dP_ts, the softmax backward's row term). One warp per row.
__global__ void attention_delta_kernel(Params p, long rows) {
  const long w = (long(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (w >= rows) return;
  // w enumerates (n, h, t) in the order of the [B, H, T] output.
  const int t = int(w % p.T);
  const long nh = w / p.T;
  const int h = int(nh % p.H), n = int(nh / p.H);
  const long off = (long(n) * p.T + t) * p.H * p.d + long(h) * p.d;
  float s = 0.f;
  for (int c = lane; c < p.d; c += 32) s = fmaf(p.dO[off + c], p.O[off + c], s);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) p.delta[w] = s;
}

// dQ: block (x, y) owns query tile tiles − 1 − x of head y and walks the key tiles that meet its
// band, up to qt.
//   softmax: P = 2^(s₂ − lse₂), dS = P ⊙ (dO Vᵀ − δ), dQ = (1/√d) Σ dS K
//   linear:  dA = tril(dO Vᵀ), dQ = Σ dA K
template <int DM, bool kLinear>
__global__ void __launch_bounds__(kThreads) attention_dq_kernel(Params p) {
  extern __shared__ float smem[];
  float* Qs = smem;
  float* dOs = Qs + kTile * ldt<DM>();
  float* Ks = dOs + kTile * ldt<DM>();
  float* Vs = Ks + kTile * ldt<DM>();
  float* dSs = Vs + kTile * ldt<DM>();
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const int qt = p.tiles - 1 - int(blockIdx.x), q0 = qt * kTile;
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * p.d;
  const long head = long(n) * p.T * ld + long(h) * p.d;
  const long rowbase = (long(n) * p.H + h) * p.T;
  if constexpr (!kLinear) load_tile<DM>(Qs, p.Q + head, q0, p.T, p.d, ld);
  load_tile<DM>(dOs, p.dO + head, q0, p.T, p.d, ld);
  float lse2[4] = {}, delta[4] = {};
  if constexpr (!kLinear) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int q = q0 + ty + 16 * i;
      if (q < p.T) lse2[i] = p.lse_in[rowbase + q] * kLog2e, delta[i] = p.delta_in[rowbase + q];
    }
  }
  float acc[4][DM / 16] = {};
  for (int kt = kLinear ? 0 : max(0, q0 - p.window + 1) / kTile; kt <= qt; ++kt) {
    const int k0 = kt * kTile;
    __syncthreads();
    load_tile<DM>(Ks, p.K + head, k0, p.T, p.d, ld);
    load_tile<DM>(Vs, p.V + head, k0, p.T, p.d, ld);
    __syncthreads();
    float dp[4][4] = {};
    tile_abt<DM>(dp, dOs, Vs, ty, tx);
    float s[4][4] = {};
    if constexpr (!kLinear) tile_abt<DM>(s, Qs, Ks, ty, tx);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int q = q0 + ty + 16 * i;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int k = k0 + tx + 16 * j;
        const bool visible = in_band(q, k, p.window) && k < p.T && q < p.T;
        float ds;
        if constexpr (kLinear) {
          ds = visible ? dp[i][j] : 0.f;
        } else {
          ds = visible ? exp2f(s[i][j] * p.scale_l2 - lse2[i]) * (dp[i][j] - delta[i]) : 0.f;
        }
        dSs[(ty + 16 * i) * kLdP + tx + 16 * j] = ds;
      }
    }
    __syncthreads();
    tile_pb<DM>(acc, dSs, Ks, ty, tx);
  }
  store_rows<DM>(p.dQ + head, acc, p.scale, q0, p.T, p.d, ld, ty, tx);
}

// dK, dV: block (x, y) owns key tile x of head y (tile 0, the longest, first) and walks the query
// tiles from kt to the last that meets its band (tiles − 1 without a limit). The tiles are computed
// transposed (rows = keys, columns = queries):
//   softmax: Pᵀ = 2^(K Qᵀ·scale₂ − lse₂), dV = Σ Pᵀ dO, dSᵀ = Pᵀ ⊙ (V dOᵀ − δ), dK = (1/√d) Σ dSᵀ Q
//   linear:  Aᵀ = triu(K Qᵀ), dV = Σ Aᵀ dO, dAᵀ = triu(V dOᵀ), dK = Σ dAᵀ Q
template <int DM, bool kLinear>
__device__ __forceinline__ void attention_dkdv(const Params& p) {
  extern __shared__ float smem[];
  float* Ks = smem;
  float* Vs = Ks + kTile * ldt<DM>();
  float* Qs = Vs + kTile * ldt<DM>();
  float* dOs = Qs + kTile * ldt<DM>();
  float* Pts = dOs + kTile * ldt<DM>();
  float* dSts = Pts + kTile * kLdP;
  float* lse2s = dSts + kTile * kLdP;
  float* deltas = lse2s + kTile;
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const int kt = int(blockIdx.x), k0 = kt * kTile;
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * p.d;
  const long head = long(n) * p.T * ld + long(h) * p.d;
  const long rowbase = (long(n) * p.H + h) * p.T;
  load_tile<DM>(Ks, p.K + head, k0, p.T, p.d, ld);
  load_tile<DM>(Vs, p.V + head, k0, p.T, p.d, ld);
  float dk[4][DM / 16] = {}, dv[4][DM / 16] = {};
  for (int qt = kt; qt < p.tiles && (kLinear || qt - kt < p.band_tiles); ++qt) {
    const int q0 = qt * kTile;
    __syncthreads();
    load_tile<DM>(Qs, p.Q + head, q0, p.T, p.d, ld);
    load_tile<DM>(dOs, p.dO + head, q0, p.T, p.d, ld);
    if constexpr (!kLinear) {
      if (tid < kTile) {
        const int q = q0 + tid;
        lse2s[tid] = q < p.T ? p.lse_in[rowbase + q] * kLog2e : 0.f;
        deltas[tid] = q < p.T ? p.delta_in[rowbase + q] : 0.f;
      }
    }
    __syncthreads();
    float st[4][4] = {}, dpt[4][4] = {};
    tile_abt<DM>(st, Ks, Qs, ty, tx);
    tile_abt<DM>(dpt, Vs, dOs, ty, tx);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int k = k0 + ty + 16 * i;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int qj = tx + 16 * j, q = q0 + qj;
        const bool visible = in_band(q, k, p.window) && q < p.T;
        float pt, ds;
        if constexpr (kLinear) {
          pt = visible ? st[i][j] : 0.f;
          ds = visible ? dpt[i][j] : 0.f;
        } else {
          pt = visible ? exp2f(st[i][j] * p.scale_l2 - lse2s[qj]) : 0.f;
          ds = visible ? pt * (dpt[i][j] - deltas[qj]) : 0.f;
        }
        Pts[(ty + 16 * i) * kLdP + qj] = pt;
        dSts[(ty + 16 * i) * kLdP + qj] = ds;
      }
    }
    __syncthreads();
    tile_pb<DM>(dv, Pts, dOs, ty, tx);
    tile_pb<DM>(dk, dSts, Qs, ty, tx);
  }
  store_rows<DM>(p.dV + head, dv, 1.f, k0, p.T, p.d, ld, ty, tx);
  store_rows<DM>(p.dK + head, dk, p.scale, k0, p.T, p.d, ld, ty, tx);
}

template <int DM, bool kLinear>
__global__ void __launch_bounds__(kThreads) attention_dkdv_kernel(Params p) {
  attention_dkdv<DM, kLinear>(p);
}

// The softmax instance at DM = 64 held to 128 registers, two blocks per SM (105 KB of shared memory
// each): ptxas's own choice for it moves between 128 registers with a few spills and 146 without
// (one block per SM) on changes elsewhere as small as two more ints in Params. A minimum of one
// block on the other instances would change their allocation too, hence a kernel of its own.
__global__ void __launch_bounds__(kThreads, 2) attention_dkdv_softmax64_kernel(Params p) {
  attention_dkdv<64, false>(p);
}

// ---- host ------------------------------------------------------------------------------------------

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

std::size_t tensor_floats(const AttentionDims& d) {
  return std::size_t(d.batch) * d.seq_len * d.heads * d.head_dim;
}
std::size_t row_floats(const AttentionDims& d) { return std::size_t(d.batch) * d.heads * d.seq_len; }

void check_dims(const char* fn, const AttentionDims& d) {
  const std::string f(fn);
  require(d.batch >= 1 && d.heads >= 1 && d.seq_len >= 1, f + ": batch, heads and seq_len must be >= 1");
  require(d.head_dim >= 1 && d.head_dim <= 128, f + ": head_dim must be in 1..128 (got " + std::to_string(d.head_dim) + ")");
  require(double(d.batch) * d.seq_len * d.heads * d.head_dim < 9.0e18 && d.seq_len <= (1 << 30),
          f + ": tensors too large");
  require(double(d.batch) * d.heads <= 2147483647.0 && d.batch * d.heads <= 65535,
          f + ": batch·heads must be <= 65535 (grid limit)");
}

void check_ptr(const char* fn, const void* p, const char* name) {
  if (!p) throw std::invalid_argument(std::string(fn) + ": " + name + " is null");
}

// Byte ranges [p, p + n floats) must not overlap.
void check_disjoint(const char* fn, const float* a, std::size_t na, const char* an, const float* b, std::size_t nb,
                    const char* bn) {
  if (!a || !b) return;
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  if (pa < pb + nb * sizeof(float) && pb < pa + na * sizeof(float))
    throw std::invalid_argument(std::string(fn) + ": " + an + " overlaps " + bn);
}

int dm_of(int d) { return d <= 32 ? 32 : d <= 64 ? 64 : 128; }
std::size_t tile_bytes(int dm) { return std::size_t(kTile) * (dm + 4) * sizeof(float); }
std::size_t p_bytes() { return std::size_t(kTile) * kLdP * sizeof(float); }

Params make_params(const AttentionDims& D, AttentionKind kind, int window) {
  Params p{};
  p.H = D.heads;
  p.T = D.seq_len;
  p.d = D.head_dim;
  p.tiles = (D.seq_len + kTile - 1) / kTile;
  p.window = window > 0 && window < D.seq_len ? window : p.tiles * kTile;
  p.band_tiles = int((long(p.window) + kTile - 2) / kTile + 1);
  p.scale = kind == AttentionKind::Softmax ? float(1.0 / std::sqrt(double(D.head_dim))) : 1.f;
  p.scale_l2 = float(double(p.scale) * 1.4426950408889634);
  return p;
}

template <class Kernel>
void launch(Kernel kernel, dim3 grid, std::size_t smem, cudaStream_t st, const Params& p) {
  TTTLAB_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<grid, kThreads, smem, st>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

template <int DM, bool kLinear>
void forward_launch(const Params& p, int bh, cudaStream_t st) {
  launch(attention_forward_kernel<DM, kLinear>, dim3(p.tiles, bh), 3 * tile_bytes(DM) + p_bytes(), st, p);
}

template <int DM, bool kLinear>
void backward_launch(const Params& p, int bh, cudaStream_t st) {
  launch(attention_dq_kernel<DM, kLinear>, dim3(p.tiles, bh), 4 * tile_bytes(DM) + p_bytes(), st, p);
  const std::size_t dkdv_smem = 4 * tile_bytes(DM) + 2 * p_bytes() + 2 * kTile * sizeof(float);
  if constexpr (DM == 64 && !kLinear)
    launch(attention_dkdv_softmax64_kernel, dim3(p.tiles, bh), dkdv_smem, st, p);
  else
    launch(attention_dkdv_kernel<DM, kLinear>, dim3(p.tiles, bh), dkdv_smem, st, p);
}

template <bool kLinear>
void forward_dispatch(const Params& p, int bh, cudaStream_t st) {
  switch (dm_of(p.d)) {
    case 32: forward_launch<32, kLinear>(p, bh, st); break;
    case 64: forward_launch<64, kLinear>(p, bh, st); break;
    default: forward_launch<128, kLinear>(p, bh, st); break;
  }
}

template <bool kLinear>
void backward_dispatch(const Params& p, int bh, cudaStream_t st) {
  switch (dm_of(p.d)) {
    case 32: backward_launch<32, kLinear>(p, bh, st); break;
    case 64: backward_launch<64, kLinear>(p, bh, st); break;
    default: backward_launch<128, kLinear>(p, bh, st); break;
  }
}

// A window (> 0) is for the fp32 softmax kernels only.
void check_window(const char* fn, int window, AttentionKind kind, AttentionPrecision precision) {
  if (window <= 0) return;
  require(kind == AttentionKind::Softmax,
          std::string(fn) + ": window is for softmax attention only (linear attention is causal)");
  require(
      precision == AttentionPrecision::fp32,
      std::string(fn) + ": window needs AttentionPrecision::fp32 (the tf32 kernels are causal)");
}

// AttentionPrecision::tf32's own conditions: softmax, head_dim 32/64/128, 16-byte aligned tensors.
bool check_tf32(const char* fn, AttentionPrecision precision, AttentionKind kind,
                const AttentionDims& d,
                std::initializer_list<std::pair<const void*, const char*>> ptrs) {
  if (precision == AttentionPrecision::fp32) return false;
  require(precision == AttentionPrecision::tf32, std::string(fn) + ": unknown precision");
  require(kind == AttentionKind::Softmax,
          std::string(fn) + ": AttentionPrecision::tf32 is for softmax attention only");
  require(attention_tf32_supported(d), std::string(fn) +
                                           ": AttentionPrecision::tf32 needs head_dim 32, 64 or "
                                           "128 (got " +
                                           std::to_string(d.head_dim) + ")");
  for (auto [ptr, name] : ptrs)
    require(reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0,
            std::string(fn) + ": " + name +
                " must be 16-byte aligned for AttentionPrecision::tf32 (cudaMalloc gives 256)");
  return true;
}

// The shape and stream of the tf32 kernels' arguments; the tensors are the caller's to set.
detail::FlashTf32Args tf32_args(const AttentionDims& d, CUstream_st* stream) {
  detail::FlashTf32Args t;
  t.B = d.batch;
  t.H = d.heads;
  t.T = d.seq_len;
  t.d = d.head_dim;
  t.stream = stream;
  return t;
}

}  // namespace

bool attention_tf32_supported(const AttentionDims& d) {
  return d.head_dim == 32 || d.head_dim == 64 || d.head_dim == 128;
}

void attention_forward(const AttentionForwardArgs& a) {
  const char* fn = "attention_forward";
  check_dims(fn, a.dims);
  check_ptr(fn, a.Q, "Q");
  check_ptr(fn, a.K, "K");
  check_ptr(fn, a.V, "V");
  check_ptr(fn, a.O, "O");
  const std::size_t n = tensor_floats(a.dims);
  check_disjoint(fn, a.O, n, "O", a.Q, n, "Q");
  check_disjoint(fn, a.O, n, "O", a.K, n, "K");
  check_disjoint(fn, a.O, n, "O", a.V, n, "V");
  const bool linear = a.kind == AttentionKind::Linear;
  if (!linear) {
    for (auto [t, name] : {std::pair{a.Q, "Q"}, std::pair{a.K, "K"}, std::pair{a.V, "V"},
                           std::pair{static_cast<const float*>(a.O), "O"}})
      check_disjoint(fn, a.lse, row_floats(a.dims), "lse", t, n, name);
  }
  check_window(fn, a.window, a.kind, a.precision);
  if (check_tf32(fn, a.precision, a.kind, a.dims,
                 {{a.Q, "Q"}, {a.K, "K"}, {a.V, "V"}, {a.O, "O"}})) {
    detail::FlashTf32Args t = tf32_args(a.dims, a.stream);
    t.Q = a.Q;
    t.K = a.K;
    t.V = a.V;
    t.O = a.O;
    t.lse = a.lse;
    detail::flash_tf32_forward(t);
    return;
  }
  Params p = make_params(a.dims, a.kind, a.window);
  p.Q = a.Q;
  p.K = a.K;
  p.V = a.V;
  p.Out = a.O;
  p.lse = linear ? nullptr : a.lse;
  const int bh = a.dims.batch * a.dims.heads;
  if (linear)
    forward_dispatch<true>(p, bh, a.stream);
  else
    forward_dispatch<false>(p, bh, a.stream);
}

std::size_t attention_backward_workspace_bytes(const AttentionDims& dims, AttentionKind kind) {
  check_dims("attention_backward_workspace_bytes", dims);
  return kind == AttentionKind::Softmax ? row_floats(dims) * sizeof(float) : 0;
}

void attention_backward(const AttentionBackwardArgs& a) {
  const char* fn = "attention_backward";
  check_dims(fn, a.dims);
  const bool linear = a.kind == AttentionKind::Linear;
  check_ptr(fn, a.Q, "Q");
  check_ptr(fn, a.K, "K");
  check_ptr(fn, a.V, "V");
  check_ptr(fn, a.dO, "dO");
  check_ptr(fn, a.dQ, "dQ");
  check_ptr(fn, a.dK, "dK");
  check_ptr(fn, a.dV, "dV");
  const std::size_t n = tensor_floats(a.dims), rows = row_floats(a.dims);
  const std::size_t need = attention_backward_workspace_bytes(a.dims, a.kind);
  if (!linear) {
    check_ptr(fn, a.O, "O (softmax)");
    check_ptr(fn, a.lse, "lse (softmax)");
    check_ptr(fn, a.workspace, "workspace (softmax)");
  }
  require(a.workspace_bytes >= need, std::string(fn) + ": workspace has " + std::to_string(a.workspace_bytes) +
                                         " bytes, needs " + std::to_string(need) +
                                         " (attention_backward_workspace_bytes)");
  const float* ws = static_cast<const float*>(a.workspace);
  struct Range {
    const float* p;
    std::size_t n;
    const char* name;
  };
  const Range outs[] = {{a.dQ, n, "dQ"}, {a.dK, n, "dK"}, {a.dV, n, "dV"}, {linear ? nullptr : ws, rows, "workspace"}};
  const Range ins[] = {{a.Q, n, "Q"},   {a.K, n, "K"},   {a.V, n, "V"},
                       {a.dO, n, "dO"}, {linear ? nullptr : a.O, n, "O"}, {linear ? nullptr : a.lse, rows, "lse"}};
  for (std::size_t i = 0; i < 4; ++i) {
    for (const Range& r : ins) check_disjoint(fn, outs[i].p, outs[i].n, outs[i].name, r.p, r.n, r.name);
    for (std::size_t j = i + 1; j < 4; ++j)
      check_disjoint(fn, outs[i].p, outs[i].n, outs[i].name, outs[j].p, outs[j].n, outs[j].name);
  }
  check_window(fn, a.window, a.kind, a.precision);
  const bool tf32 = check_tf32(fn, a.precision, a.kind, a.dims,
                              {{a.Q, "Q"}, {a.K, "K"}, {a.V, "V"}, {a.dO, "dO"}, {a.dQ, "dQ"},
                               {a.dK, "dK"}, {a.dV, "dV"}});
  Params p = make_params(a.dims, a.kind, a.window);
  p.Q = a.Q;
  p.K = a.K;
  p.V = a.V;
  p.dO = a.dO;
  p.dQ = a.dQ;
  p.dK = a.dK;
  p.dV = a.dV;
  const int bh = a.dims.batch * a.dims.heads;
  if (linear) {
    backward_dispatch<true>(p, bh, a.stream);
    return;
  }
  p.O = a.O;
  p.lse_in = a.lse;
  p.delta = static_cast<float*>(a.workspace);
  p.delta_in = p.delta;
  const long warps_per_block = kThreads / 32;
  const long blocks = (long(rows) + warps_per_block - 1) / warps_per_block;
  attention_delta_kernel<<<unsigned(blocks), kThreads, 0, a.stream>>>(p, long(rows));
  TTTLAB_CUDA_CHECK(cudaGetLastError());
  if (tf32) {
    detail::FlashTf32Args t = tf32_args(a.dims, a.stream);
    t.Q = a.Q;
    t.K = a.K;
    t.V = a.V;
    t.dO = a.dO;
    t.lse_in = a.lse;
    t.delta = p.delta;
    t.dQ = a.dQ;
    t.dK = a.dK;
    t.dV = a.dV;
    detail::flash_tf32_backward(t);
    return;
  }
  backward_dispatch<false>(p, bh, a.stream);
}

}  // namespace tttlab::kernels
