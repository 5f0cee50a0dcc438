// Causal attention, version 2: v1's tiles and passes (attention.cu) with every tile product on the
// tensor cores, mma.sync m16n8k8 with split 3xTF32 operands (fp32-level accuracy; ttt_mma.cuh).
//
// The products are block_mma calls (a whole block computes a 64 × 64 or 64 × d tile product from
// shared memory and hands each element to a store). Its fixed element-to-thread map does the rest:
// the accumulators (O, dQ, dK, dV) live in shared memory and each store adds to its own element
// without a barrier, and a second product of the same shape can read what the first one's store
// wrote at the same (i, j) (the score, to finish P and dS in the dP product's store).
//
// Shared-memory strides: tiles read as the A operand or as a transposed B operand have a leading
// dimension ≡ 4 (mod 32) floats (rows g = 0..7, columns t = 0..3 of a fragment fall in distinct
// banks); V in the forward, read as a row-major B operand, ≡ 8 (mod 32). The backward reuses Q, dO and
// K in both roles and accepts two-way conflicts on one of them.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "attention_internal.hpp"
#include "cuda_check.hpp"
#include "ttt_mma.cuh"

namespace tttlab::kernels::attention_detail {
namespace {

using detail::block_mma;
using detail::op;
using detail::op_t;

constexpr int kLdS = kTile + 4;  // score tiles [64][68]
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int DM>
__host__ __device__ constexpr int lda() { return DM + 4; }
template <int DM>
__host__ __device__ constexpr int ldb() { return DM + 8; }

// Rows r0 .. r0 + 63 of one head (row stride ld) into S[64][LD]; rows ≥ T and columns ≥ d as zeros.
template <int DM, int LD>
__device__ __forceinline__ void load_tile(float* S, const float* G, int r0, int T, int d, long ld) {
  for (int idx = threadIdx.x; idx < kTile * DM; idx += kThreads) {
    const int r = idx / DM, c = idx % DM;
    S[r * LD + c] = (r0 + r < T && c < d) ? G[long(r0 + r) * ld + c] : 0.f;
  }
}

template <int DM>
__device__ __forceinline__ void zero(float* A) {
  for (int idx = threadIdx.x; idx < kTile * DM; idx += kThreads) A[idx] = 0.f;
}

// acc [64][DM] (times mul) into rows r0.. < T, columns < d of one head's block of G.
template <int DM>
__device__ __forceinline__ void store_tile(float* G, const float* acc, float mul, int r0, int T, int d, long ld) {
  for (int idx = threadIdx.x; idx < kTile * DM; idx += kThreads) {
    const int r = idx / DM, c = idx % DM;
    if (r0 + r < T && c < d) G[long(r0 + r) * ld + c] = acc[idx] * mul;
  }
}

// ---- forward ---------------------------------------------------------------------------------------
template <int DM, bool kLinear>
__global__ void __launch_bounds__(kThreads) attention_forward_v2_kernel(Params p) {
  extern __shared__ float smem[];
  float* Qs = smem;
  float* Ks = Qs + kTile * lda<DM>();
  float* Vs = Ks + kTile * lda<DM>();
  float* Ss = Vs + kTile * ldb<DM>();
  float* Oacc = Ss + kTile * kLdS;
  float* row_m = Oacc + kTile * DM;
  float* row_l = row_m + kTile;
  float* row_alpha = row_l + kTile;
  const int tid = threadIdx.x;
  const int qt = p.tiles - 1 - int(blockIdx.x), q0 = qt * kTile;
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * p.d;
  const long head = long(n) * p.T * ld + long(h) * p.d;
  const int T = p.T;
  load_tile<DM, lda<DM>()>(Qs, p.Q + head, q0, T, p.d, ld);
  zero<DM>(Oacc);
  if (tid < kTile) row_m[tid] = -INFINITY, row_l[tid] = 0.f, row_alpha[tid] = 1.f;

  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * kTile;
    __syncthreads();  // the previous tile's readers of Ks, Vs, Ss, row_alpha are done
    load_tile<DM, lda<DM>()>(Ks, p.K + head, k0, T, p.d, ld);
    load_tile<DM, ldb<DM>()>(Vs, p.V + head, k0, T, p.d, ld);
    __syncthreads();
    // S = Q·Kᵀ (log2 units for softmax), masked.
    block_mma<true>(kTile, kTile, DM, op(Qs, lda<DM>()), op_t(Ks, lda<DM>()), kLinear ? 1.f : p.scale_l2,
                    [&](int i, int j, float v) {
                      const int q = q0 + i, k = k0 + j;
                      const bool visible = k <= q && k < T;
                      Ss[i * kLdS + j] = visible ? v : (kLinear ? 0.f : -INFINITY);
                    });
    if constexpr (!kLinear) {
      __syncthreads();
      // Online softmax: 4 threads per row (consecutive lanes), 16 columns each.
      const int row = tid / 4, part = tid % 4;
      float* srow = Ss + row * kLdS + part * 16;
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 16; ++j) mx = fmaxf(mx, srow[j]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_old = row_m[row];
      const float m_new = fmaxf(m_old, mx);  // finite: key 0 (tile 0) or key q0 (diagonal) is visible
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const float e = exp2f(srow[j] - m_new);
        srow[j] = e;
        sum += e;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      __syncwarp();
      if (part == 0) {
        const float alpha = exp2f(m_old - m_new);
        row_alpha[row] = alpha;
        row_l[row] = row_l[row] * alpha + sum;
        row_m[row] = m_new;
      }
    }
    __syncthreads();
    // O = α·O + P·V
    block_mma<true>(kTile, DM, kTile, op(Ss, kLdS), op(Vs, ldb<DM>()), 1.f, [&](int i, int j, float v) {
      float& o = Oacc[i * DM + j];
      o = kLinear ? o + v : o * row_alpha[i] + v;
    });
  }
  __syncthreads();
  for (int idx = tid; idx < kTile * DM; idx += kThreads) {
    const int r = idx / DM, c = idx % DM;
    if (q0 + r < T && c < p.d) {
      const float v = Oacc[idx];
      p.Out[head + long(q0 + r) * ld + c] = kLinear ? v : v / row_l[r];
    }
  }
  if constexpr (!kLinear) {
    if (p.lse && tid < kTile && q0 + tid < T)
      p.lse[(long(n) * p.H + h) * T + q0 + tid] = (row_m[tid] + log2f(row_l[tid])) * kLn2;
  }
}

// ---- backward: dQ ----------------------------------------------------------------------------------
template <int DM, bool kLinear>
__global__ void __launch_bounds__(kThreads) attention_dq_v2_kernel(Params p) {
  extern __shared__ float smem[];
  constexpr int LD = lda<DM>();
  float* Qs = smem;
  float* dOs = Qs + kTile * LD;
  float* Ks = dOs + kTile * LD;
  float* Vs = Ks + kTile * LD;
  float* Ss = Vs + kTile * LD;
  float* acc = Ss + kTile * kLdS;
  float* lse2 = acc + kTile * DM;
  float* delta = lse2 + kTile;
  const int tid = threadIdx.x;
  const int qt = p.tiles - 1 - int(blockIdx.x), q0 = qt * kTile;
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * p.d;
  const long head = long(n) * p.T * ld + long(h) * p.d;
  const long rowbase = (long(n) * p.H + h) * p.T;
  const int T = p.T;
  if constexpr (!kLinear) {
    load_tile<DM, LD>(Qs, p.Q + head, q0, T, p.d, ld);
    if (tid < kTile) {
      const int q = q0 + tid;
      lse2[tid] = q < T ? p.lse_in[rowbase + q] * kLog2e : 0.f;
      delta[tid] = q < T ? p.delta_in[rowbase + q] : 0.f;
    }
  }
  load_tile<DM, LD>(dOs, p.dO + head, q0, T, p.d, ld);
  zero<DM>(acc);
  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * kTile;
    __syncthreads();
    load_tile<DM, LD>(Ks, p.K + head, k0, T, p.d, ld);
    load_tile<DM, LD>(Vs, p.V + head, k0, T, p.d, ld);
    __syncthreads();
    if constexpr (!kLinear)
      block_mma<true>(kTile, kTile, DM, op(Qs, LD), op_t(Ks, LD), p.scale_l2,
                      [&](int i, int j, float v) { Ss[i * kLdS + j] = v; });
    // dP = dO·Vᵀ; the store finishes dS at its own (i, j) (same map as the product above).
    block_mma<true>(kTile, kTile, DM, op(dOs, LD), op_t(Vs, LD), 1.f, [&](int i, int j, float v) {
      const int q = q0 + i, k = k0 + j;
      const bool visible = k <= q && q < T;
      float ds = 0.f;
      if (visible) ds = kLinear ? v : exp2f(Ss[i * kLdS + j] - lse2[i]) * (v - delta[i]);
      Ss[i * kLdS + j] = ds;
    });
    __syncthreads();
    block_mma<true>(kTile, DM, kTile, op(Ss, kLdS), op(Ks, LD), 1.f,
                    [&](int i, int j, float v) { acc[i * DM + j] += v; });
  }
  __syncthreads();
  store_tile<DM>(p.dQ + head, acc, p.scale, q0, T, p.d, ld);
}

// ---- backward: dK, dV ------------------------------------------------------------------------------
// Transposed tiles (rows = keys, columns = queries), as v1. One score buffer: Pᵀ, then dSᵀ.
template <int DM, bool kLinear>
__global__ void __launch_bounds__(kThreads) attention_dkdv_v2_kernel(Params p) {
  extern __shared__ float smem[];
  constexpr int LD = lda<DM>();
  float* Ks = smem;
  float* Vs = Ks + kTile * LD;
  float* Qs = Vs + kTile * LD;
  float* dOs = Qs + kTile * LD;
  float* Ps = dOs + kTile * LD;
  float* dk = Ps + kTile * kLdS;
  float* dv = dk + kTile * DM;
  float* lse2 = dv + kTile * DM;
  float* delta = lse2 + kTile;
  const int tid = threadIdx.x;
  const int kt = int(blockIdx.x), k0 = kt * kTile;
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * p.d;
  const long head = long(n) * p.T * ld + long(h) * p.d;
  const long rowbase = (long(n) * p.H + h) * p.T;
  const int T = p.T;
  load_tile<DM, LD>(Ks, p.K + head, k0, T, p.d, ld);
  load_tile<DM, LD>(Vs, p.V + head, k0, T, p.d, ld);
  zero<DM>(dk);
  zero<DM>(dv);
  for (int qt = kt; qt < p.tiles; ++qt) {
    const int q0 = qt * kTile;
    __syncthreads();
    load_tile<DM, LD>(Qs, p.Q + head, q0, T, p.d, ld);
    load_tile<DM, LD>(dOs, p.dO + head, q0, T, p.d, ld);
    if (!kLinear && tid < kTile) {
      const int q = q0 + tid;
      lse2[tid] = q < T ? p.lse_in[rowbase + q] * kLog2e : 0.f;
      delta[tid] = q < T ? p.delta_in[rowbase + q] : 0.f;
    }
    __syncthreads();
    // Pᵀ = K·Qᵀ (softmax: 2^(s₂ − lse₂)), masked.
    block_mma<true>(kTile, kTile, DM, op(Ks, LD), op_t(Qs, LD), kLinear ? 1.f : p.scale_l2,
                    [&](int i, int j, float v) {
                      const int k = k0 + i, q = q0 + j;
                      const bool visible = k <= q && q < T;
                      Ps[i * kLdS + j] = visible ? (kLinear ? v : exp2f(v - lse2[j])) : 0.f;
                    });
    __syncthreads();
    block_mma<true>(kTile, DM, kTile, op(Ps, kLdS), op(dOs, LD), 1.f,
                    [&](int i, int j, float v) { dv[i * DM + j] += v; });
    __syncthreads();  // every warp is done reading Pᵀ before it becomes dSᵀ
    // dPᵀ = V·dOᵀ; the store turns its own Pᵀ element into dSᵀ.
    block_mma<true>(kTile, kTile, DM, op(Vs, LD), op_t(dOs, LD), 1.f, [&](int i, int j, float v) {
      const int k = k0 + i, q = q0 + j;
      const bool visible = k <= q && q < T;
      float ds = 0.f;
      if (visible) ds = kLinear ? v : Ps[i * kLdS + j] * (v - delta[j]);
      Ps[i * kLdS + j] = ds;
    });
    __syncthreads();
    block_mma<true>(kTile, DM, kTile, op(Ps, kLdS), op(Qs, LD), 1.f,
                    [&](int i, int j, float v) { dk[i * DM + j] += v; });
  }
  __syncthreads();
  store_tile<DM>(p.dV + head, dv, 1.f, k0, T, p.d, ld);
  store_tile<DM>(p.dK + head, dk, p.scale, k0, T, p.d, ld);
}

// ---- host ------------------------------------------------------------------------------------------
template <class Kernel>
void launch(Kernel kernel, dim3 grid, std::size_t smem, cudaStream_t st, const Params& p) {
  TTTLAB_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<grid, kThreads, smem, st>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

template <int DM>
constexpr std::size_t tile_a() { return std::size_t(kTile) * lda<DM>() * sizeof(float); }
template <int DM>
constexpr std::size_t tile_acc() { return std::size_t(kTile) * DM * sizeof(float); }
constexpr std::size_t tile_s() { return std::size_t(kTile) * kLdS * sizeof(float); }
constexpr std::size_t rows_bytes(int n) { return std::size_t(n) * kTile * sizeof(float); }

template <int DM, bool kLinear>
void forward_dm(const Params& p, int bh, cudaStream_t st) {
  const std::size_t smem = 2 * tile_a<DM>() + std::size_t(kTile) * ldb<DM>() * sizeof(float) + tile_s() +
                           tile_acc<DM>() + rows_bytes(3);
  launch(attention_forward_v2_kernel<DM, kLinear>, dim3(p.tiles, bh), smem, st, p);
}

template <int DM, bool kLinear>
void backward_dm(const Params& p, int bh, cudaStream_t st) {
  launch(attention_dq_v2_kernel<DM, kLinear>, dim3(p.tiles, bh), 4 * tile_a<DM>() + tile_s() + tile_acc<DM>() + rows_bytes(2),
         st, p);
  launch(attention_dkdv_v2_kernel<DM, kLinear>, dim3(p.tiles, bh),
         4 * tile_a<DM>() + tile_s() + 2 * tile_acc<DM>() + rows_bytes(2), st, p);
}

}  // namespace

void forward_v2(const Params& p, int bh, int dm, bool linear, CUstream_st* st) {
  if (linear) {
    if (dm == 32) forward_dm<32, true>(p, bh, st);
    else if (dm == 64) forward_dm<64, true>(p, bh, st);
    else forward_dm<128, true>(p, bh, st);
  } else {
    if (dm == 32) forward_dm<32, false>(p, bh, st);
    else if (dm == 64) forward_dm<64, false>(p, bh, st);
    else forward_dm<128, false>(p, bh, st);
  }
}

void backward_v2(const Params& p, int bh, int dm, bool linear, CUstream_st* st) {
  if (linear) {
    if (dm == 32) backward_dm<32, true>(p, bh, st);
    else if (dm == 64) backward_dm<64, true>(p, bh, st);
    else backward_dm<128, true>(p, bh, st);
  } else {
    if (dm == 32) backward_dm<32, false>(p, bh, st);
    else if (dm == 64) backward_dm<64, false>(p, bh, st);
    else backward_dm<128, false>(p, bh, st);
  }
}

}  // namespace tttlab::kernels::attention_detail
