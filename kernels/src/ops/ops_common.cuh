// Private helpers of the op kernels in kernels/src/ops/ (the families of tttlab/kernels/nn_ops.hpp):
// argument checks and launch sizes on the host; warp sums, float4 arithmetic, bf16 stores, the
// column-sum passes and the row-kernel pieces that several families share on the device.
//
// Memory-bound kernels: one thread per element, or one warp per row for the row reductions
// (RMSNorm, LayerNorm, cross-entropy). The ones a training step spends most time in also have a
// float4 version for the shapes of every preset (the convs, RMSNorm forward and backward, RoPE,
// SwiGLU; each says when it applies, and the plain kernel serves every other shape), and the residual
// adds run fused with the RMSNorm that follows each (add_rms_norm_forward); docs/KERNELS.md has the
// profiles that chose them. Sums over rows (the gradients of per-feature weights) never use atomics:
// a first pass writes one partial sum per chunk of rows and feature, a second adds the chunks in
// order (reductions.cu), so results are bitwise reproducible.
//
// Everything here has internal linkage (an unnamed namespace), as when the families shared one
// file: each .cu compiles its own copy of the device helpers, inlined where it uses them. Only the
// two column-sum launches, defined once in reductions.cu, are shared functions (namespace ops).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/bf16.cuh"
#include "common/cuda_check.hpp"
#include "tttlab/kernels/gemm.hpp"
#include "tttlab/kernels/nn_ops.hpp"

namespace tttlab::kernels {
using detail::bf16_bits;
using detail::bf16_value;

namespace ops {
// out[c] += Σ_k partial[k, c] over n_chunks chunk sums, in a fixed order (reductions.cu).
void sum_partials_add(const float* partial, int n_chunks, int C, float* out, cudaStream_t st);
// out[c] += Σ_r X[r, c] over R rows: chunk sums into ws (chunks(R)·C floats), then sum_partials_add.
void column_sum_launch(const float* X, int R, int C, float* out, float* ws, cudaStream_t st);
}  // namespace ops
using ops::column_sum_launch;
using ops::sum_partials_add;

namespace {

constexpr int kChunkRows = 128;  // rows per partial sum of the column reductions

inline void require(bool ok, const char* fn, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(fn) + ": " + what);
}
inline void check_launch() { TTTLAB_CUDA_CHECK(cudaGetLastError()); }

inline int blocks_for(std::size_t n, int threads, int cap = 65535 * 8) {
  const std::size_t b = (n + threads - 1) / threads;
  return static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(b, std::size_t(cap))));
}
inline int chunks(int R) { return (R + kChunkRows - 1) / kChunkRows; }
// Whether every pointer is 16-byte aligned (the float4 kernels' precondition).
inline bool aligned16(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  return true;
}
// bf16 outputs (mixed precision, the operands of the matrix products): round to nearest even, as
// convert_to_bf16; four values in one 8-byte store.
__device__ __forceinline__ void store_bf16x4(std::uint16_t* dst, float a, float b, float c, float d) {
  __nv_bfloat162 lo = __floats2bfloat162_rn(a, b), hi = __floats2bfloat162_rn(c, d);
  uint2 packed;
  packed.x = *reinterpret_cast<unsigned*>(&lo);
  packed.y = *reinterpret_cast<unsigned*>(&hi);
  *reinterpret_cast<uint2*>(dst) = packed;
}
inline bool aligned8(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 8 == 0; }

// Whether the float4 row kernels (a row of D = 128·NV in registers, NV ≤ 8) apply.
inline bool rows_vec4(int D, std::initializer_list<const void*> ptrs) { return D % 128 == 0 && D <= 1024 && aligned16(ptrs); }
// Calls launch(std::integral_constant<int, NV>{}) with NV = D / 128 where that is 1..8: picks the
// instance of a float4 row kernel (where rows_vec4 holds) that launch starts.
template <class Launch>
void launch_rows_vec4(int D, Launch&& launch) {
  switch (D / 128) {
    case 1: launch(std::integral_constant<int, 1>{}); break;
    case 2: launch(std::integral_constant<int, 2>{}); break;
    case 3: launch(std::integral_constant<int, 3>{}); break;
    case 4: launch(std::integral_constant<int, 4>{}); break;
    case 5: launch(std::integral_constant<int, 5>{}); break;
    case 6: launch(std::integral_constant<int, 6>{}); break;
    case 7: launch(std::integral_constant<int, 7>{}); break;
    case 8: launch(std::integral_constant<int, 8>{}); break;
    default: break;
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float4 f4_zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
// ss + x.x² + x.y² + x.z² + x.w² as explicit fmas, so that every row kernel that uses it rounds the
// same way: left to the compiler, x.x² + x.y² contracts to fma(x.y, x.y, x.x²) in one kernel and
// fma(x.x, x.x, x.y²) in another (seen in add_rms_forward_vec4_kernel and its fused conv twin).
__device__ __forceinline__ float add_squares(float ss, float4 x) {
  return fmaf(x.w, x.w, fmaf(x.z, x.z, fmaf(x.y, x.y, fmaf(x.x, x.x, ss))));
}
__device__ __forceinline__ void f4_fma(float4& acc, float4 w, float4 x) {
  acc.x = fmaf(w.x, x.x, acc.x);
  acc.y = fmaf(w.y, x.y, acc.y);
  acc.z = fmaf(w.z, x.z, acc.z);
  acc.w = fmaf(w.w, x.w, acc.w);
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float sigmoidf_split(float x) {
  // Split by sign as the CPU's sigmoid(): exp never overflows.
  if (x >= 0.f) return 1.f / (1.f + expf(-x));
  const float e = expf(x);
  return e / (1.f + e);
}

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;

inline int row_blocks(int R) { return (R + kRowsPerBlock - 1) / kRowsPerBlock; }

// ---- column sums ----------------------------------------------------------------------------------

// Σ_k partial[k, c] over the chunks, for a block (32, kPartialRows) whose column x is c: thread row y
// sums the chunks k ≡ y (mod kPartialRows) in order, and the row sums are added in row order: a
// fixed order, so bitwise reproducible. The sum is returned to the threads of row 0 (the others get
// 0). Every norm's weight gradient ends in this pass, on only ⌈C/32⌉ blocks (24 at C = 768), so each
// block needs many loads in flight: with 8 rows it took 9.4 µs for 512 chunks, with one thread per
// column ~25 µs.
constexpr int kPartialRows = 32;
__device__ float partials_column_sum(const float* __restrict__ partial, int n_chunks, int C,
                                     int c) {
  __shared__ float s[kPartialRows][33];
  float t = 0.f;
  if (c < C)
    for (int k = threadIdx.y; k < n_chunks; k += kPartialRows) t += partial[std::size_t(k) * C + c];
  s[threadIdx.y][threadIdx.x] = t;
  __syncthreads();
  float sum = 0.f;
  if (threadIdx.y == 0)
    for (int j = 0; j < kPartialRows; ++j) sum += s[j][threadIdx.x];
  return sum;
}

// ---- RMSNorm / LayerNorm: one warp per row ------------------------------------------------------------

// The row kernels' per-column sums over a chunk of rows: each of the 8 warps holds its sums of the
// columns lane + 32·v (float4 each); they are added in warp order (bitwise reproducible) into
// out[0, 32·NV). Every thread of the 256-thread block must call it; s_sum is free again on return.
template <int NV>
__device__ void chunk_sum_8_warps(float4 (&s_sum)[8][32 * NV], const float4 (&acc)[NV], float4* __restrict__ out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int v = 0; v < NV; ++v) s_sum[warp][lane + 32 * v] = acc[v];
  __syncthreads();
  for (int c4 = threadIdx.x; c4 < 32 * NV; c4 += blockDim.x) {
    float4 t = s_sum[0][c4];
    for (int q = 1; q < 8; ++q) {
      const float4 u = s_sum[q][c4];
      t.x += u.x;
      t.y += u.y;
      t.z += u.z;
      t.w += u.w;
    }
    out[c4] = t;
  }
  __syncthreads();
}

// The end of a float4 row kernel's RMSNorm: lane's part x of row o (columns lane + 32·v, v < NV)
// with ss the lane's sum of their squares; Y = x·r·w, or only its bf16 rounding in Y16 when not null.
template <int NV>
__device__ __forceinline__ void rms_store_row(const float4 (&x)[NV], float ss,
                                              const float4* __restrict__ w, float eps,
                                              std::size_t o, int lane, float4* __restrict__ Y,
                                              std::uint16_t* __restrict__ Y16) {
  constexpr int D = 128 * NV;
  ss = warp_sum(ss);
  const float r = 1.f / sqrtf(ss / float(D) + eps);
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    const float4 wv = w[lane + 32 * v];
    const float4 y =
        make_float4(x[v].x * r * wv.x, x[v].y * r * wv.y, x[v].z * r * wv.z, x[v].w * r * wv.w);
    if (Y16)
      store_bf16x4(Y16 + 4 * (o + lane + 32 * v), y.x, y.y, y.z, y.w);
    else
      Y[o + lane + 32 * v] = y;
  }
}

// The norms' backward row kernels take chunks of kNormChunkRows rows, shorter than the column sums'
// kChunkRows: one block of 8 warps per SM (128-row chunks at R = 16384, the D768 step) left the
// latency of their extra work (the gate's arithmetic, the bf16 copy of dX) exposed.
constexpr int kNormChunkRows = 32;
inline int norm_chunks(int R) { return (R + kNormChunkRows - 1) / kNormChunkRows; }

// ---- RoPE inside other kernels ------------------------------------------------------------------------

// The two pairs of a float4 rotated as rope_rotate does, (a, b) → (a·c − b·s, a·s + b·c) with
// c = cos_t[p·half + m], s = sign·sin_t[p·half + m] (m the pair index of x.x, then m + 1).
// rope_vec4_kernel and the conv kernels with RoPE fused in share it. (A fused conv's results can still
// differ from the two separate passes' in the last bits: 1.8e-7 of the largest value, measured by
// CausalConvWithRopeEqualsConvThenRope.)
__device__ __forceinline__ float4 rope4(float4 x, const float* __restrict__ cos_t, const float* __restrict__ sin_t,
                                        int half, int p, int m, float sign) {
  const float c0 = cos_t[p * half + m], s0 = sign * sin_t[p * half + m];
  const float c1 = cos_t[p * half + m + 1], s1 = sign * sin_t[p * half + m + 1];
  return make_float4(x.x * c0 - x.y * s0, x.x * s0 + x.y * c0, x.z * c1 - x.w * s1, x.z * s1 + x.w * c1);
}

// Element c of a row under the same rotation at position p: its pair is (c & ~1, c | 1), since every
// head starts at an even column.
__device__ __forceinline__ float rope1(const float* __restrict__ row, int c, const ConvRope& r, int p, float sign) {
  const int half = r.d / 2, m = (c % r.d) >> 1;
  const float cs = r.cos_table[p * half + m], sn = sign * r.sin_table[p * half + m];
  const float a = row[c & ~1], b = row[c | 1];
  return (c & 1) ? a * sn + b * cs : a * cs - b * sn;
}

}  // namespace
}  // namespace tttlab::kernels
