// The element-wise and row operations of a training step (see tttlab/kernels/nn_ops.hpp).
//
// Memory-bound kernels: one thread per element, or one warp per row for the row reductions
// (RMSNorm, LayerNorm, cross-entropy). The ones a training step spends most time in also have a
// float4 version for the shapes of every preset (the convs, RMSNorm forward and backward, RoPE,
// SwiGLU; each says when it applies, and the plain kernel serves every other shape), and the residual
// adds run fused with the RMSNorm that follows each (add_rms_norm_forward); docs/KERNELS.md has the
// profiles that chose them and what each gained. Sums over rows (the gradients of per-feature weights) never
// use atomics: a first pass writes one partial sum per chunk of rows and feature, a second adds the
// chunks in order, so results are bitwise reproducible.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "common/bf16.cuh"
#include "common/cuda_check.hpp"
#include "ttt/ttt_mma.cuh"
#include "tttlab/kernels/gemm.hpp"
#include "tttlab/kernels/nn_ops.hpp"

namespace tttlab::kernels {
using detail::bf16_bits;
using detail::bf16_value;
using detail::mma_bf16;
namespace {

constexpr int kChunkRows = 128;  // rows per partial sum of the column reductions
constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluA = 0.044715f;

void require(bool ok, const char* fn, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(fn) + ": " + what);
}
void check_launch() { TTTLAB_CUDA_CHECK(cudaGetLastError()); }

int blocks_for(std::size_t n, int threads, int cap = 65535 * 8) {
  const std::size_t b = (n + threads - 1) / threads;
  return static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(b, std::size_t(cap))));
}
int chunks(int R) { return (R + kChunkRows - 1) / kChunkRows; }
// Whether every pointer is 16-byte aligned (the float4 kernels' precondition).
bool aligned16(std::initializer_list<const void*> ptrs) {
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
bool aligned8(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 8 == 0; }

// convert_to_bf16 (gemm.hpp): one thread per group of 4 columns of a row, a 16-byte load and an 8-byte
// store where the rows' alignment allows it (ld_src and ld_dst multiples of 4), element by element
// otherwise and at a row's ragged end; 6 bytes of traffic per element.
__global__ void convert_to_bf16_kernel(const float* __restrict__ src, int rows, int cols, long long ld_src,
                                       std::uint16_t* __restrict__ dst, long long ld_dst, bool vector_rows) {
  const long long groups_per_row = (cols + 3) / 4;
  const long long total = groups_per_row * rows;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / groups_per_row;
    const int c = int(i - r * groups_per_row) * 4;
    const float* s = src + r * ld_src + c;
    std::uint16_t* d = dst + r * ld_dst + c;
    if (vector_rows && c + 4 <= cols) {
      const float4 v = *reinterpret_cast<const float4*>(s);
      store_bf16x4(d, v.x, v.y, v.z, v.w);
    } else {
      for (int k = 0; k < 4 && c + k < cols; ++k) d[k] = bf16_bits(s[k]);
    }
  }
}

// Whether the float4 row kernels (a row of D = 128·NV in registers, NV ≤ 8) apply.
bool rows_vec4(int D, std::initializer_list<const void*> ptrs) { return D % 128 == 0 && D <= 1024 && aligned16(ptrs); }

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

// ---- column sums ----------------------------------------------------------------------------------

// partial[chunk, c] = Σ of X[r, c] over the chunk's rows; block (32, 8), grid (⌈C/32⌉, chunks).
__global__ void colsum_partial_kernel(const float* __restrict__ X, int R, int C, float* __restrict__ partial) {
  __shared__ float s[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const int r0 = blockIdx.y * kChunkRows, r1 = min(R, r0 + kChunkRows);
  float acc = 0.f;
  if (c < C)
    for (int r = r0 + threadIdx.y; r < r1; r += 8) acc += X[std::size_t(r) * C + c];
  s[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float t = 0.f;
    for (int j = 0; j < 8; ++j) t += s[j][threadIdx.x];
    partial[std::size_t(blockIdx.y) * C + c] = t;
  }
}

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

// out[c] += Σ_k partial[k, c]: block (32, kPartialRows), grid ⌈C/32⌉.
__global__ void sum_partials_add_kernel(const float* __restrict__ partial, int n_chunks, int C,
                                        float* __restrict__ out) {
  const int c = blockIdx.x * 32 + threadIdx.x;
  const float sum = partials_column_sum(partial, n_chunks, C, c);
  if (threadIdx.y == 0 && c < C) out[c] += sum;
}
void sum_partials_add(const float* partial, int n_chunks, int C, float* out, cudaStream_t st) {
  sum_partials_add_kernel<<<(C + 31) / 32, dim3(32, kPartialRows), 0, st>>>(partial, n_chunks, C,
                                                                            out);
  check_launch();
}

void column_sum_launch(const float* X, int R, int C, float* out, float* ws, cudaStream_t st) {
  if (R <= 0 || C <= 0) return;
  const int n = chunks(R);
  colsum_partial_kernel<<<dim3((C + 31) / 32, n), dim3(32, 8), 0, st>>>(X, R, C, ws);
  check_launch();
  sum_partials_add(ws, n, C, out, st);
}

// ---- element-wise ---------------------------------------------------------------------------------

__global__ void add_kernel(const float* a, const float* b, float* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}

__global__ void embedding_forward_kernel(const float* __restrict__ E, int D, const int* __restrict__ tokens,
                                         std::size_t n, float* __restrict__ H) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = i / D, c = i % D;
    H[i] = E[std::size_t(tokens[r]) * D + c];
  }
}

// Block (v, column tile): dE[v, c] += Σ dH[rows_of[k], c] over the token's rows. Byte text gives
// one token (the space) a sixth of all rows, so that block's chain of loads is the kernel's time: it
// keeps kEmbLanes rows in flight, row k into accumulator k mod kEmbLanes, and adds the accumulators in
// order at the end (a fixed order: bitwise reproducible).
constexpr int kEmbLanes = 8;
__global__ void embedding_backward_kernel(const int* __restrict__ offsets, const int* __restrict__ rows_of, int D,
                                          const float* __restrict__ dH, float* __restrict__ dE) {
  const int v = blockIdx.x;
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= D) return;
  const int k0 = offsets[v], k1 = offsets[v + 1];
  if (k0 == k1) return;
  float acc[kEmbLanes] = {};
  int k = k0;
  for (; k + kEmbLanes <= k1; k += kEmbLanes) {
    int r[kEmbLanes];
#pragma unroll
    for (int j = 0; j < kEmbLanes; ++j) r[j] = rows_of[k + j];
#pragma unroll
    for (int j = 0; j < kEmbLanes; ++j) acc[j] += dH[std::size_t(r[j]) * D + c];
  }
#pragma unroll
  for (int j = 0; j < kEmbLanes - 1; ++j)
    if (k + j < k1) acc[j] += dH[std::size_t(rows_of[k + j]) * D + c];
  float total = 0.f;
#pragma unroll
  for (int j = 0; j < kEmbLanes; ++j) total += acc[j];
  dE[std::size_t(v) * D + c] += total;
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

// The residual add and the RMSNorm after it in one pass: S = H + Dx, Y = S·r·w. Every add of the
// block's residual stream is followed by a norm of its result, so fusing them saves the re-read of S
// (4 passes over [R, D] instead of 5) and a launch. Dx == nullptr: Y = RMSNorm(H), S not written.
// One warp per row; each lane writes and reads back only its own columns.
__global__ void add_rms_forward_kernel(const float* __restrict__ H, const float* __restrict__ Dx,
                                       const float* __restrict__ w, int R, int D, float eps,
                                       float* __restrict__ S, float* __restrict__ Y, std::uint16_t* __restrict__ Y16) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * D;
  float ss = 0.f;
  for (int c = lane; c < D; c += 32) {
    float x = H[o + c];
    if (Dx) {
      x += Dx[o + c];
      S[o + c] = x;
    }
    ss += x * x;
  }
  ss = warp_sum(ss);
  const float r = 1.f / sqrtf(ss / float(D) + eps);
  const float* x = Dx ? S : H;
  for (int c = lane; c < D; c += 32) {
    const float y = x[o + c] * r * w[c];
    if (Y16)
      Y16[o + c] = bf16_bits(y);
    else
      Y[o + c] = y;
  }
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

// The same for D = 128·NV (every preset's width): the row stays in registers.
template <int NV>
__global__ void add_rms_forward_vec4_kernel(const float4* __restrict__ H, const float4* __restrict__ Dx,
                                            const float4* __restrict__ w, int R, float eps,
                                            float4* __restrict__ S, float4* __restrict__ Y,
                                            std::uint16_t* __restrict__ Y16) {
  constexpr int D4 = 32 * NV;
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * D4;
  float4 x[NV];
  float ss = 0.f;
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    x[v] = H[o + lane + 32 * v];
    if (Dx) {
      const float4 a = Dx[o + lane + 32 * v];
      x[v] = make_float4(x[v].x + a.x, x[v].y + a.y, x[v].z + a.z, x[v].w + a.w);
      S[o + lane + 32 * v] = x[v];
    }
    ss = add_squares(ss, x[v]);
  }
  rms_store_row<NV>(x, ss, w, eps, o, lane, Y, Y16);
}

// dX = r·G − c·x̂ with G = dY⊙w, x̂ = x·r, c = r·(G·x̂)/D; prod = dY⊙x̂ (column-summed into dw after).
__global__ void rms_backward_kernel(const float* __restrict__ X, const float* __restrict__ w,
                                    const float* __restrict__ dY, int R, int D, float eps, float* __restrict__ dX,
                                    bool accumulate, float* __restrict__ prod) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * D;
  float ss = 0.f, gx = 0.f;
  for (int c = lane; c < D; c += 32) {
    const float x = X[o + c];
    ss += x * x;
    gx += dY[o + c] * w[c] * x;
  }
  ss = warp_sum(ss);
  gx = warp_sum(gx);
  const float r = 1.f / sqrtf(ss / float(D) + eps);
  const float coef = r * (gx * r) / float(D);
  for (int c = lane; c < D; c += 32) {
    const float xn = X[o + c] * r;
    const float g = dY[o + c] * w[c];
    const float d = r * g - coef * xn;
    dX[o + c] = accumulate ? dX[o + c] + d : d;
    prod[o + c] = dY[o + c] * xn;
  }
}

// The norms' backward row kernels take chunks of kNormChunkRows rows, shorter than the column sums'
// kChunkRows: one block of 8 warps per SM (128-row chunks at R = 16384, the D768 step) left the
// latency of their extra work (the gate's arithmetic, the bf16 copy of dX) exposed.
constexpr int kNormChunkRows = 32;
int norm_chunks(int R) { return (R + kNormChunkRows - 1) / kNormChunkRows; }

// The same backward for D a multiple of 128 up to 1024 (every preset's width), fused with the first
// pass of dw's column sum: one block per kNormChunkRows-row chunk, 8 warps of kNormChunkRows/8 rows
// each. A lane owns the same NV float4 columns in every row (c = 4·lane + 128·v), so it reads its row slices
// once into registers, and adds its columns' dY⊙x̂ over its rows in registers; the 8 warps' sums are
// added in a fixed order through shared memory into partial[chunk, D]. No [R, D] product buffer is
// written and read back (the plain kernel's), and dw stays bitwise reproducible.
template <int NV>
__global__ void rms_backward_vec4_kernel(const float4* __restrict__ X, const float4* __restrict__ w,
                                         const float4* __restrict__ dY, int R, float eps,
                                         float4* __restrict__ dX, bool accumulate,
                                         std::uint16_t* __restrict__ dX16,
                                         float* __restrict__ partial) {
  constexpr int D4 = 32 * NV, D = 4 * D4;
  __shared__ float4 s_sum[8][D4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float4 wv[NV], acc[NV];
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    wv[v] = w[lane + 32 * v];
    acc[v] = f4_zero();
  }
  const int r_end = min(R, (blockIdx.x + 1) * kNormChunkRows);
  for (int row = blockIdx.x * kNormChunkRows + warp; row < r_end; row += 8) {
    const std::size_t o = std::size_t(row) * D4;
    float4 x[NV], g[NV];
    float ss = 0.f, gx = 0.f;
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      x[v] = X[o + lane + 32 * v];
      g[v] = dY[o + lane + 32 * v];
    }
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      ss = add_squares(ss, x[v]);  // as the forward, so r is the forward's r
      gx += g[v].x * wv[v].x * x[v].x + g[v].y * wv[v].y * x[v].y + g[v].z * wv[v].z * x[v].z +
            g[v].w * wv[v].w * x[v].w;
    }
    ss = warp_sum(ss);
    gx = warp_sum(gx);
    const float r = 1.f / sqrtf(ss / float(D) + eps);
    const float coef = r * (gx * r) / float(D);
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      const float4 xn = make_float4(x[v].x * r, x[v].y * r, x[v].z * r, x[v].w * r);
      float4 d = make_float4(r * g[v].x * wv[v].x - coef * xn.x, r * g[v].y * wv[v].y - coef * xn.y,
                             r * g[v].z * wv[v].z - coef * xn.z, r * g[v].w * wv[v].w - coef * xn.w);
      float4* out = dX + o + lane + 32 * v;
      if (accumulate) {
        const float4 p = *out;
        d.x += p.x;
        d.y += p.y;
        d.z += p.z;
        d.w += p.w;
      }
      *out = d;
      if (dX16) store_bf16x4(dX16 + 4 * (o + lane + 32 * v), d.x, d.y, d.z, d.w);
      f4_fma(acc[v], g[v], xn);
    }
  }
  chunk_sum_8_warps<NV>(s_sum, acc, reinterpret_cast<float4*>(partial + std::size_t(blockIdx.x) * D));
}

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

// ---- causal conv ------------------------------------------------------------------------------------

__global__ void conv_forward_kernel(const float* __restrict__ u, const float* __restrict__ w,
                                    const float* __restrict__ bias, int T, int C, int K, std::size_t n,
                                    float* __restrict__ y) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t row = i / C;
    const int c = int(i % C);
    const int t = int(row % T);
    float acc = bias[c];
    for (int j = 0; j < K; ++j) {
      const int s = t - (K - 1) + j;
      if (s >= 0) acc += w[c * K + j] * u[(row - (K - 1) + j) * C + c];
    }
    y[i] = acc;
  }
}

// du[s, c] = Σ_j w[c, j]·dy[s + K−1−j, c] over the taps whose output lies in the sequence.
// With has_rope, dy is the gradient of the rotated output: each value is rotated back (sign −1) as it is read.
__global__ void conv_backward_input_kernel(const float* __restrict__ w, const float* __restrict__ dy, int T, int C,
                                           int K, std::size_t n, float* __restrict__ du, bool accumulate,
                                           bool has_rope, ConvRope rope) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t row = i / C;
    const int c = int(i % C);
    const int s = int(row % T);
    float acc = 0.f;
    for (int j = K - 1; j >= 0; --j) {
      const int t = s + (K - 1) - j;
      if (t < T) {
        const std::size_t r = row + (K - 1) - j;
        acc += w[c * K + j] * (has_rope ? rope1(dy + r * C, c, rope, t % rope.period, -1.f) : dy[r * C + c]);
      }
    }
    du[i] = accumulate ? du[i] + acc : acc;
  }
}

// partial[chunk, c·(K+1) + j] = Σ over the chunk's rows of dy·u (tap j), and j = K: Σ dy.
__global__ void conv_weight_partial_kernel(const float* __restrict__ u, const float* __restrict__ dy, int R, int T,
                                           int C, int K, float* __restrict__ partial, bool has_rope, ConvRope rope) {
  __shared__ float s[8][32][17];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const int r0 = blockIdx.y * kChunkRows, r1 = min(R, r0 + kChunkRows);
  float acc[17];
#pragma unroll
  for (int j = 0; j < 17; ++j) acc[j] = 0.f;
  if (c < C)
    for (int r = r0 + threadIdx.y; r < r1; r += 8) {
      const int t = r % T;
      const float g = has_rope ? rope1(dy + std::size_t(r) * C, c, rope, t % rope.period, -1.f) : dy[std::size_t(r) * C + c];
#pragma unroll
      for (int j = 0; j < 16; ++j)
        if (j < K && t - (K - 1) + j >= 0) acc[j] += g * u[std::size_t(r - (K - 1) + j) * C + c];
      acc[16] += g;
    }
#pragma unroll
  for (int j = 0; j < 17; ++j) s[threadIdx.y][threadIdx.x][j] = acc[j];
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int j = 0; j <= K; ++j) {
      float t = 0.f;
      for (int q = 0; q < 8; ++q) t += s[q][threadIdx.x][j == K ? 16 : j];
      partial[std::size_t(blockIdx.y) * C * (K + 1) + std::size_t(c) * (K + 1) + j] = t;
    }
  }
}

// dw[c, j] += Σ_k partial[k, c·(K+1) + j] for j < K, and dbias[c] += the sum for j = K: the chunk sums
// of sum_partials_add_kernel over the C·(K+1) columns. block (32, kPartialRows), grid ⌈C·(K+1)/32⌉.
__global__ void conv_weight_finish_kernel(const float* __restrict__ partial, int n_chunks, int C, int K,
                                          float* __restrict__ dw, float* __restrict__ dbias) {
  const int i = blockIdx.x * 32 + threadIdx.x;
  const int width = C * (K + 1);
  const float t = partials_column_sum(partial, n_chunks, width, i);
  if (threadIdx.y != 0 || i >= width) return;
  const int c = i / (K + 1), j = i % (K + 1);
  if (j < K)
    dw[c * K + j] += t;
  else
    dbias[c] += t;
}

// Vectorised versions for the shapes of every model preset (K = 4, C a multiple of 4, 16-byte aligned
// tensors). The element-wise kernels above read each input row K times through the cache and pay a
// 64-bit division per element; these give each thread 4 channels (one float4) and a tile of
// consecutive rows, load the tile and its K−1 neighbouring rows once into registers (all loads in
// flight together), and find each row's position in its sequence with one 32-bit division per tile.
// Profile of a D = 768 training step on an H200 (docs/KERNELS.md, run 11): the three element-wise
// conv kernels took 2.8–4.7× their memory floor.
//
// Each kernel computes N convolutions of one input side by side: N = 1, or N = 2 for the Mamba
// backbone's Q and K views (conv_q and conv_k of the same u), which then read u, and in the backward
// write du, once instead of twice. Every output value is computed with the same operations in the
// same order as by N separate launches, so the pair's results are bitwise those of two single calls.
constexpr int kConvTile = 16;  // the forward's rows per thread

// The N convolutions' parameters and outputs (device pointers; one entry per convolution).
template <int N>
struct ConvForwardSet {
  const float* w[N];     // [C, K]
  const float* bias[N];  // [C]
  float4* y[N];          // [R, C]
};
template <int N>
struct ConvBackwardSet {
  const float* w[N];    // [C, K]
  const float4* dy[N];  // [R, C]: the gradient of each output (of the rotated output with RoPE)
  float* partial[N];    // [chunks, C·(K+1)]: conv_weight_finish_kernel's input
};

// The K taps of 4 channels, tap-major: wt[j] holds w[c .. c+3, j].
template <int K>
__device__ __forceinline__ void load_taps(const float* __restrict__ w, int c, float4 (&wt)[K]) {
#pragma unroll
  for (int j = 0; j < K; ++j) wt[j] = make_float4(w[c * K + j], w[(c + 1) * K + j], w[(c + 2) * K + j], w[(c + 3) * K + j]);
}

// y_n[r, c] = bias_n[c] + Σ_j w_n[c, j]·u[r − (K−1) + j, c] over the taps inside r's sequence.
// grid (⌈C/4 / blockDim.x⌉, tiles), one float4 column per thread.
// ROPE: each output row rotated (sign +1) before its store; m is the pair index of the thread's x.x.
template <int K, bool ROPE, int N>
__global__ void conv_forward_vec4_kernel(const float4* __restrict__ u, ConvForwardSet<N> set, int R,
                                         int T, int C4, ConvRope rope) {
  const int c4 = blockIdx.x * blockDim.x + threadIdx.x;
  if (c4 >= C4) return;
  const int m = ROPE ? 2 * (c4 % (rope.d / 4)) : 0;
  float4 wt[N][K], b[N];
#pragma unroll
  for (int n = 0; n < N; ++n) {
    load_taps<K>(set.w[n], 4 * c4, wt[n]);
    b[n] = make_float4(set.bias[n][4 * c4], set.bias[n][4 * c4 + 1], set.bias[n][4 * c4 + 2],
                       set.bias[n][4 * c4 + 3]);
  }
  for (int tile = blockIdx.y; tile * kConvTile < R; tile += gridDim.y) {
    const int r0 = tile * kConvTile;
    const int t0 = r0 % T;
    // x[i] = u[r0 − (K−1) + i]; rows before r0's sequence, or past R, are zero.
    float4 x[kConvTile + K - 1];
#pragma unroll
    for (int i = 0; i < kConvTile + K - 1; ++i) {
      const int r = r0 - (K - 1) + i;
      const bool ok = r < R && t0 + i - (K - 1) >= 0;
      x[i] = ok ? u[std::size_t(r) * C4 + c4] : f4_zero();
    }
    int t = t0;
#pragma unroll
    for (int i = 0; i < kConvTile; ++i) {
      if (r0 + i >= R) break;
#pragma unroll
      for (int n = 0; n < N; ++n) {
        float4 acc = b[n];
#pragma unroll
        for (int j = 0; j < K; ++j)
          if (t - (K - 1) + j >= 0)
            f4_fma(acc, wt[n][j], x[i + j]);  // tap inside this row's sequence
        if (ROPE)
          acc = rope4(acc, rope.cos_table, rope.sin_table, rope.d / 2, t % rope.period, m, 1.f);
        set.y[n][std::size_t(r0 + i) * C4 + c4] = acc;
      }
      t = t + 1 == T ? 0 : t + 1;
    }
  }
}

// The Mamba backbone's pre-conv with the residual add and the RMSNorm after it, in one pass:
// S = H + conv(u), Y = RMSNorm(S)·w (or only Y16 = bf16(Y)); the convolution's output is never stored
// (its write and read back were 2 of the 6 passes over [R, D]). One block of NV warps per tile of
// kConvNormRows rows, D = 128·NV:
//   1. thread c4 owns float4 column c4, as conv_forward_vec4_kernel: the tile's rows of u and the K−1
//      before them in registers, S = H + conv(u) per row, stored and kept in shared memory;
//   2. warp w normalises rows w, w + NV, ... from shared memory, lane l reading columns l + 32·v as
//      add_rms_forward_vec4_kernel does, with the same row sum (add_squares, then the warp's
//      butterfly) and rms_store_row.
// So every operation and its order are those of the two kernels, and the results are bitwise theirs.
constexpr int kConvNormRows = 8;
template <int K, int NV>
__global__ void __launch_bounds__(32 * NV)
    conv_add_rms_forward_vec4_kernel(const float4* __restrict__ u, const float* __restrict__ conv_w,
                                     const float* __restrict__ conv_bias, int T,
                                     const float4* __restrict__ H, const float4* __restrict__ w,
                                     int R, float eps, float4* __restrict__ S,
                                     float4* __restrict__ Y, std::uint16_t* __restrict__ Y16) {
  constexpr int D4 = 32 * NV;
  __shared__ float4 s_rows[kConvNormRows][D4];
  const int c4 = threadIdx.x;
  float4 wt[K];
  load_taps<K>(conv_w, 4 * c4, wt);
  const float4 b = make_float4(conv_bias[4 * c4], conv_bias[4 * c4 + 1], conv_bias[4 * c4 + 2],
                               conv_bias[4 * c4 + 3]);
  for (int tile = blockIdx.x; tile * kConvNormRows < R; tile += gridDim.x) {
    const int r0 = tile * kConvNormRows;
    const int t0 = r0 % T;
    // x[i] = u[r0 − (K−1) + i]; rows before r0's sequence, or past R, are zero.
    float4 x[kConvNormRows + K - 1];
#pragma unroll
    for (int i = 0; i < kConvNormRows + K - 1; ++i) {
      const int r = r0 - (K - 1) + i;
      x[i] = r < R && t0 + i - (K - 1) >= 0 ? u[std::size_t(r) * D4 + c4] : f4_zero();
    }
    int t = t0;
#pragma unroll
    for (int i = 0; i < kConvNormRows; ++i) {
      if (r0 + i >= R) break;
      float4 acc = b;
#pragma unroll
      for (int j = 0; j < K; ++j)
        if (t - (K - 1) + j >= 0) f4_fma(acc, wt[j], x[i + j]);  // tap inside this row's sequence
      const float4 h = H[std::size_t(r0 + i) * D4 + c4];
      const float4 sum = make_float4(h.x + acc.x, h.y + acc.y, h.z + acc.z, h.w + acc.w);
      S[std::size_t(r0 + i) * D4 + c4] = sum;
      s_rows[i][c4] = sum;
      t = t + 1 == T ? 0 : t + 1;
    }
    __syncthreads();
    const int lane = threadIdx.x % 32;
    for (int i = threadIdx.x / 32; i < kConvNormRows && r0 + i < R; i += NV) {
      float4 xs[NV];
      float ss = 0.f;
#pragma unroll
      for (int v = 0; v < NV; ++v) {
        xs[v] = s_rows[i][lane + 32 * v];
        ss = add_squares(ss, xs[v]);
      }
      rms_store_row<NV>(xs, ss, w, eps, std::size_t(r0 + i) * D4, lane, Y, Y16);
    }
    __syncthreads();  // s_rows is refilled by the next tile
  }
}

// The backward of N convolutions of u in one pass over u and the dy_n:
//   du[s, c] (+)= Σ_n Σ_j w_n[c, j]·dy_n[s + K−1−j, c] over the outputs inside s's sequence, the
//     convolutions' terms added in turn as N separate accumulating launches would: ((du + a₀) + a₁);
//   partial_n[chunk, c·(K+1) + j] = Σ over the chunk's rows of dy_n·u (tap j), and j = K: Σ dy_n, the
//     layout conv_weight_finish_kernel reads.
// (Two kernels before, one for du and one for the partial sums, each reading every dy_n: at D = 768
// the pair's backward read 100 MB more per layer than this one.)
// grid (⌈C/4 / kConvPartialColumns⌉, chunks), block (kConvPartialColumns, kConvRowGroups): one float4
// column per thread, the thread rows taking consecutive quarters of the chunk in tiles of kTile rows.
// A tile needs its rows' dy_n and the K−1 rows after them (du's taps) and its rows' u and the K−1
// rows before them (the weight taps). The window slides: consecutive tiles of a thread share K−1
// rows of each, kept in registers from the last tile, so every row of u and dy_n is loaded (and,
// with ROPE, rotated) once per thread instead of (kTile + K−1)/kTile times (1.75× at kTile = 4);
// only a group's first tile loads the K−1 rows before it (u) and at its start (dy_n) as well. A row
// kept is the value a reload would give wherever a product uses it (a u row zeroed as before the
// reloading tile's sequence never enters one), so the results are unchanged. The groups' partial
// sums are added through shared memory in a fixed order, last group first, so the result stays
// bitwise reproducible (and, the rows of a group being summed in row order whatever the tile, equal
// for N = 1 and 2).
// ROPE: each dy row rotated back (sign −1) once, as it is loaded.
constexpr int kConvRowGroups = 4;
constexpr int kConvPartialColumns = 64;  // float4 columns per block: 256 threads
// Rows per tile: a pair's tile holds two gradients' rows in the registers of one.
template <int N>
constexpr int kConvBackwardTile = N == 1 ? 8 : 4;
static_assert(kChunkRows % (kConvRowGroups * kConvBackwardTile<1>) == 0 &&
                  kChunkRows % (kConvRowGroups * kConvBackwardTile<2>) == 0,
              "row groups of whole tiles");
template <int K, bool ROPE, int N>
__global__ void __launch_bounds__(kConvPartialColumns* kConvRowGroups)
    conv_backward_vec4_kernel(const float4* __restrict__ u, ConvBackwardSet<N> set, int R, int T,
                              int C4, float4* __restrict__ du, bool accumulate,
                              std::uint16_t* __restrict__ du16, ConvRope rope) {
  constexpr int kTile = kConvBackwardTile<N>;
  __shared__ float4 s_acc[N * (K + 1) * kConvPartialColumns];
  const int c4 = blockIdx.x * blockDim.x + threadIdx.x;
  const int group = threadIdx.y;
  const bool active = c4 < C4;
  const int m = ROPE ? 2 * (c4 % (rope.d / 4)) : 0;
  float4 wt[N][K], acc[N][K + 1];
#pragma unroll
  for (int n = 0; n < N; ++n) {
    if (active) load_taps<K>(set.w[n], 4 * c4, wt[n]);
#pragma unroll
    for (int j = 0; j <= K; ++j) acc[n][j] = f4_zero();
  }
  constexpr int kGroupRows = kChunkRows / kConvRowGroups;
  const int r_begin = blockIdx.y * kChunkRows + group * kGroupRows;
  const int r_end = min(R, r_begin + kGroupRows);
  // A tile never straddles r_end short of R: kGroupRows is a multiple of kTile.
  // Tile r0's window: x[i] = u[r0 − (K−1) + i], zero before r0's sequence; g[n][i] = dy_n[r0 + i],
  // zero past R (rows past a sequence's end are masked below). Its last K − 1 entries are the next
  // tile's first K − 1, moved to the front instead of loaded (and rotated) again.
  float4 x[kTile + K - 1], g[N][kTile + K - 1];
  int tg = 0;  // ROPE: the position of the next dy row loaded, r0 + K − 1's at a tile's start
  if (active && r_begin < r_end) {  // the window's tail as a tile at r_begin − kTile leaves it
    const int tb = r_begin % T;
#pragma unroll
    for (int i = 0; i < K - 1; ++i) {
      const int r = r_begin - (K - 1) + i;
      x[kTile + i] = r < R && tb + i - (K - 1) >= 0 ? u[std::size_t(r) * C4 + c4] : f4_zero();
    }
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int i = 0; i < K - 1; ++i)
        g[n][kTile + i] =
            r_begin + i < R ? set.dy[n][std::size_t(r_begin + i) * C4 + c4] : f4_zero();
    tg = tb;
    if (ROPE) {
#pragma unroll
      for (int i = 0; i < K - 1; ++i) {
#pragma unroll
        for (int n = 0; n < N; ++n)
          g[n][kTile + i] = rope4(g[n][kTile + i], rope.cos_table, rope.sin_table, rope.d / 2,
                                  tg % rope.period, m, -1.f);
        tg = tg + 1 == T ? 0 : tg + 1;
      }
    }
  }
  for (int r0 = r_begin; active && r0 < r_end; r0 += kTile) {
    const int t0 = r0 % T;
#pragma unroll
    for (int i = 0; i < K - 1; ++i) {  // slide: the previous tile's last K − 1 rows
      x[i] = x[kTile + i];
#pragma unroll
      for (int n = 0; n < N; ++n) g[n][i] = g[n][kTile + i];
    }
    // The kTile new rows: u rows r0 .. r0 + kTile − 1, dy_n rows r0 + K − 1 .. r0 + kTile + K − 2.
#pragma unroll
    for (int i = K - 1; i < kTile + K - 1; ++i) {
      const int r = r0 - (K - 1) + i;
      x[i] = r < R && t0 + i - (K - 1) >= 0 ? u[std::size_t(r) * C4 + c4] : f4_zero();
    }
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int i = K - 1; i < kTile + K - 1; ++i)
        g[n][i] = r0 + i < R ? set.dy[n][std::size_t(r0 + i) * C4 + c4] : f4_zero();
    if (ROPE) {
#pragma unroll
      for (int i = K - 1; i < kTile + K - 1; ++i) {
#pragma unroll
        for (int n = 0; n < N; ++n)
          g[n][i] =
              rope4(g[n][i], rope.cos_table, rope.sin_table, rope.d / 2, tg % rope.period, m, -1.f);
        tg = tg + 1 == T ? 0 : tg + 1;
      }
    }
    int t = t0;
#pragma unroll
    for (int i = 0; i < kTile; ++i) {
      if (r0 + i >= R) break;
      // du of row r0 + i
      float4* out = du + std::size_t(r0 + i) * C4 + c4;
      float4 sum = accumulate ? *out : f4_zero();
#pragma unroll
      for (int n = 0; n < N; ++n) {
        float4 a = f4_zero();
#pragma unroll
        for (int j = 0; j < K; ++j)
          if (t + (K - 1 - j) < T) f4_fma(a, wt[n][j], g[n][i + K - 1 - j]);
        if (n == 0 && !accumulate) {
          sum = a;  // as a first, overwriting launch stores it
        } else {
          sum.x += a.x;
          sum.y += a.y;
          sum.z += a.z;
          sum.w += a.w;
        }
      }
      if (du16)
        store_bf16x4(du16 + 4 * (std::size_t(r0 + i) * C4 + c4), sum.x, sum.y, sum.z, sum.w);
      else
        *out = sum;
#pragma unroll
      for (int n = 0; n < N; ++n) {  // the weight sums over row r0 + i
#pragma unroll
        for (int j = 0; j < K; ++j)
          if (t - (K - 1) + j >= 0) f4_fma(acc[n][j], g[n][i], x[i + j]);
        acc[n][K].x += g[n][i].x;
        acc[n][K].y += g[n][i].y;
        acc[n][K].z += g[n][i].z;
        acc[n][K].w += g[n][i].w;
      }
      t = t + 1 == T ? 0 : t + 1;
    }
  }
  // Groups kConvRowGroups−1 .. 0 add their sums in turn: s = ((a₃ + a₂) + a₁) + a₀.
  float4* mine = s_acc + threadIdx.x * N * (K + 1);
  for (int turn = kConvRowGroups - 1; turn >= 0; --turn) {
    if (group == turn) {
#pragma unroll
      for (int n = 0; n < N; ++n)
#pragma unroll
        for (int j = 0; j <= K; ++j) {
          if (turn < kConvRowGroups - 1) {
            const float4 o = mine[n * (K + 1) + j];
            acc[n][j] = make_float4(o.x + acc[n][j].x, o.y + acc[n][j].y, o.z + acc[n][j].z,
                                    o.w + acc[n][j].w);
          }
          mine[n * (K + 1) + j] = acc[n][j];
        }
    }
    __syncthreads();
  }
  if (group != 0 || !active) return;
#pragma unroll
  for (int n = 0; n < N; ++n) {
    float* out = set.partial[n] + std::size_t(blockIdx.y) * (4 * C4) * (K + 1) +
                 std::size_t(4 * c4) * (K + 1);
#pragma unroll
    for (int j = 0; j <= K; ++j) {
      out[j] = acc[n][j].x;
      out[(K + 1) + j] = acc[n][j].y;
      out[2 * (K + 1) + j] = acc[n][j].z;
      out[3 * (K + 1) + j] = acc[n][j].w;
    }
  }
}

// Whether the vectorised kernels apply: K = 4 (every preset), C a multiple of 4, 16-byte alignment.
bool conv_vec4(int C, int K, std::initializer_list<const void*> ptrs) {
  return K == 4 && C % 4 == 0 && aligned16(ptrs);
}
// One float4 column per thread: C/4 rounded up to whole warps, at most 256 (192 at D = 768).
int conv_vec4_threads(int C) { return std::min(256, (C / 4 + 31) / 32 * 32); }
dim3 conv_vec4_grid(int C, int tiles, int threads) {
  return dim3(unsigned((C / 4 + threads - 1) / threads), unsigned(std::max(1, std::min(tiles, 65535))));
}

// ---- RoPE ---------------------------------------------------------------------------------------------

__global__ void rope_kernel(float* X, int T, int H, int d, int period, const float* __restrict__ cos_t,
                            const float* __restrict__ sin_t, float sign, std::size_t n_pairs) {
  const int half = d / 2;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n_pairs;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const int m = int(i % half);
    const std::size_t rh = i / half;  // row·H + head
    const std::size_t row = rh / H;
    const int p = int(row % T) % period;
    const float c = cos_t[p * half + m], s = sign * sin_t[p * half + m];
    float* x = X + rh * d + 2 * m;
    const float a = x[0], b = x[1];
    x[0] = a * c - b * s;
    x[1] = a * s + b * c;
  }
}

// Two pairs per thread (d a multiple of 4, 16-byte aligned, fewer than 2^31 pairs) with 32-bit
// index arithmetic: the kernel above pays five 64-bit divisions per pair, which made it 1.7× its
// byte floor on a D = 768 step.
__global__ void rope_vec4_kernel(float4* X, int T, int H, int quarter, int period, const float* __restrict__ cos_t,
                                 const float* __restrict__ sin_t, float sign, int n4) {
  const int half = 2 * quarter;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    const int m = 2 * (i % quarter);
    const int rh = i / quarter;  // row·H + head
    const int p = (rh / H % T) % period;
    X[i] = rope4(X[i], cos_t, sin_t, half, p, m, sign);
  }
}

// ---- activations ------------------------------------------------------------------------------------

__device__ __forceinline__ float silu_mul(float a, float u) { return a / (1.f + expf(-a)) * u; }

__global__ void silu_mul_forward_kernel(const float* G, const float* U, float* Hd, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    Hd[i] = silu_mul(G[i], U[i]);
}

__global__ void silu_mul_backward_kernel(const float* G, const float* U, const float* dHd, float* dG, float* dU,
                                         std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float a = G[i], h = dHd[i];
    const float sg = 1.f / (1.f + expf(-a));
    dU[i] = h * (a * sg);
    dG[i] = h * U[i] * (sg * (1.f + a * (1.f - sg)));
  }
}

// float4 versions of the two above (n a multiple of 4, 16-byte aligned): a quarter of the threads and
// of the memory instructions; on a D = 768 step the scalar ones ran at 1.5–1.7× their byte floor.
__global__ void silu_mul_forward_vec4_kernel(const float4* __restrict__ G, const float4* __restrict__ U,
                                             float4* __restrict__ Hd, std::size_t n4) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4; i += std::size_t(gridDim.x) * blockDim.x) {
    const float4 a = G[i], u = U[i];
    Hd[i] = make_float4(silu_mul(a.x, u.x), silu_mul(a.y, u.y), silu_mul(a.z, u.z), silu_mul(a.w, u.w));
  }
}

__device__ __forceinline__ void silu_mul_grad(float a, float u, float h, float& dg, float& du) {
  const float sg = 1.f / (1.f + expf(-a));
  du = h * (a * sg);
  dg = h * u * (sg * (1.f + a * (1.f - sg)));
}
__device__ __forceinline__ void silu_mul_grad4(float4 a, float4 u, float4 h, float4& g, float4& v) {
  silu_mul_grad(a.x, u.x, h.x, g.x, v.x);
  silu_mul_grad(a.y, u.y, h.y, g.y, v.y);
  silu_mul_grad(a.z, u.z, h.z, g.z, v.z);
  silu_mul_grad(a.w, u.w, h.w, g.w, v.w);
}
__global__ void silu_mul_backward_vec4_kernel(const float4* __restrict__ G, const float4* __restrict__ U,
                                              const float4* __restrict__ dHd, float4* __restrict__ dG,
                                              float4* __restrict__ dU, std::size_t n4) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4; i += std::size_t(gridDim.x) * blockDim.x) {
    float4 g, v;
    silu_mul_grad4(G[i], U[i], dHd[i], g, v);
    dG[i] = g;
    dU[i] = v;
  }
}

// The mixed-precision SwiGLU: its pre-activations G, U (the products' outputs) and the hidden
// state's gradient come in bf16, and its outputs (the next products' operands) leave in bf16. The
// arithmetic is the kernels' above on the widened values (exact), then round to nearest even; four
// elements per thread where n is a multiple of 4 and every array 8-byte aligned, else one.
__device__ __forceinline__ float4 load_bf16x4(const std::uint16_t* src) {
  const uint2 p =
      *reinterpret_cast<const uint2*>(src);  // little-endian: element 0 is p.x's low half
  return make_float4(__uint_as_float(p.x << 16), __uint_as_float(p.x & 0xffff0000u),
                     __uint_as_float(p.y << 16), __uint_as_float(p.y & 0xffff0000u));
}
__global__ void silu_mul_forward_bf16_vec4_kernel(const std::uint16_t* __restrict__ G16,
                                                  const std::uint16_t* __restrict__ U16,
                                                  std::uint16_t* __restrict__ Hd16,
                                                  std::size_t n4) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4; i += std::size_t(gridDim.x) * blockDim.x) {
    const float4 a = load_bf16x4(G16 + 4 * i), u = load_bf16x4(U16 + 4 * i);
    store_bf16x4(Hd16 + 4 * i, silu_mul(a.x, u.x), silu_mul(a.y, u.y), silu_mul(a.z, u.z), silu_mul(a.w, u.w));
  }
}
__global__ void silu_mul_forward_bf16_kernel(const std::uint16_t* G16, const std::uint16_t* U16,
                                             std::uint16_t* Hd16, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    Hd16[i] = bf16_bits(silu_mul(bf16_value(G16[i]), bf16_value(U16[i])));
}
__global__ void silu_mul_backward_bf16_vec4_kernel(const std::uint16_t* __restrict__ G16,
                                                   const std::uint16_t* __restrict__ U16,
                                                   const std::uint16_t* __restrict__ dHd16,
                                                   std::uint16_t* __restrict__ dG16,
                                                   std::uint16_t* __restrict__ dU16,
                                                   std::size_t n4) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4; i += std::size_t(gridDim.x) * blockDim.x) {
    float4 g, v;
    silu_mul_grad4(load_bf16x4(G16 + 4 * i), load_bf16x4(U16 + 4 * i), load_bf16x4(dHd16 + 4 * i),
                   g, v);
    store_bf16x4(dG16 + 4 * i, g.x, g.y, g.z, g.w);
    store_bf16x4(dU16 + 4 * i, v.x, v.y, v.z, v.w);
  }
}
__global__ void silu_mul_backward_bf16_kernel(const std::uint16_t* G16, const std::uint16_t* U16,
                                              const std::uint16_t* dHd16, std::uint16_t* dG16,
                                              std::uint16_t* dU16, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    float g, v;
    silu_mul_grad(bf16_value(G16[i]), bf16_value(U16[i]), bf16_value(dHd16[i]), g, v);
    dG16[i] = bf16_bits(g);
    dU16[i] = bf16_bits(v);
  }
}

// gelu(x) = ½x(1 + tanh u), u = c(x + k x³), written with 1 + tanh u = 2σ(2u) and 1 − tanh² u =
// 4σ(2u)σ(−2u): the same function without the cancellation of 1 + tanh u for negative x (at x = −5,
// 1 + tanh u ≈ 1e-4 and fp32's tanh leaves ~1e-3 relative error there; this form stays at a few ulp).
__device__ __forceinline__ float gelu_tanh(float x) {
  const float u = kGeluC * (x + kGeluA * x * x * x);
  return x * sigmoidf_split(2.f * u);
}
// gelu(x), returned, and gelu′(x) = σ(2u) + 2x·σ(2u)σ(−2u)·u′ into grad: both σ from one exponential
// and one division (sigmoidf_split's split by sign).
__device__ __forceinline__ float gelu_tanh_and_grad(float x, float& grad) {
  const float u = kGeluC * (x + kGeluA * x * x * x);
  const float e = expf(-fabsf(2.f * u)), inv = 1.f / (1.f + e);
  const float sp = 2.f * u >= 0.f ? inv : e * inv,
              sn = 2.f * u >= 0.f ? e * inv : inv;  // σ(2u), σ(−2u)
  const float du = kGeluC * (1.f + 3.f * kGeluA * x * x);
  grad = sp + 2.f * x * sp * sn * du;
  return x * sp;
}

// ---- LayerNorm, alone or gated: one warp per row ---------------------------------------------------
// The TTT layer's post-norm Y = LN(O) = x̂ ⊙ γ + β, x̂ = (O − μ)·rstd, rstd = 1/√(var + ε). With the Mamba
// backbone its only reader is the gate, out = Y ⊙ gelu(A), so the kernels take the gate as an option
// (A != null): the forward writes out (or bf16(out)) and never Y, and the backward recomputes Y from O
// and takes dOut, the gate's output gradient, in place of dY: dA = dOut ⊙ Y ⊙ gelu′(A) and
// dY = dOut ⊙ gelu(A), which then flows through the LayerNorm's backward as any dY. That saves
// writing Y and reading it twice (4 of 10 passes over [R, D] per layer and step) and two launches.

// Y = LN(X), or with A: out = LN(X) ⊙ gelu(A); bf16 into Y16 when that is not null.
__global__ void ln_forward_kernel(const float* __restrict__ X, const float* __restrict__ gamma,
                                  const float* __restrict__ beta, const float* __restrict__ A,
                                  int R, int D, float eps, float* __restrict__ Y,
                                  std::uint16_t* __restrict__ Y16) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * D;
  const float* x = X + o;
  float s = 0.f;
  for (int c = lane; c < D; c += 32) s += x[c];
  const float mu = warp_sum(s) / float(D);
  float v = 0.f;
  for (int c = lane; c < D; c += 32) v += (x[c] - mu) * (x[c] - mu);
  const float rstd = 1.f / sqrtf(warp_sum(v) / float(D) + eps);
  for (int c = lane; c < D; c += 32) {
    float y = (x[c] - mu) * rstd * gamma[c] + beta[c];
    if (A) y *= gelu_tanh(A[o + c]);
    if (Y16)
      Y16[o + c] = bf16_bits(y);
    else
      Y[o + c] = y;
  }
}

// A warp's row of D = 128·NV values (NV float4 per lane: columns 4·lane + 128·v) centred in place,
// x − μ, for the LayerNorm kernels below; returns rstd = 1/√(var + ε).
template <int NV>
__device__ __forceinline__ float centre_row(float4 (&x)[NV], float eps) {
  constexpr int D = 128 * NV;
  float s = 0.f;
#pragma unroll
  for (int v = 0; v < NV; ++v) s += x[v].x + x[v].y + x[v].z + x[v].w;
  const float mu = warp_sum(s) / float(D);
  float var = 0.f;
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    x[v] = make_float4(x[v].x - mu, x[v].y - mu, x[v].z - mu, x[v].w - mu);
    var += x[v].x * x[v].x + x[v].y * x[v].y + x[v].z * x[v].z + x[v].w * x[v].w;
  }
  return 1.f / sqrtf(warp_sum(var) / float(D) + eps);
}

// The same for D = 128·NV (every preset's width): the row stays in registers.
template <int NV>
__global__ void ln_forward_vec4_kernel(const float4* __restrict__ X,
                                       const float4* __restrict__ gamma,
                                       const float4* __restrict__ beta,
                                       const float4* __restrict__ A, int R, float eps,
                                       float4* __restrict__ Y, std::uint16_t* __restrict__ Y16) {
  constexpr int D4 = 32 * NV;
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * D4;
  // A is read with X, before the row's reductions (as in the backward below).
  float4 x[NV], a_row[NV];
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    x[v] = X[o + lane + 32 * v];
    if (A) a_row[v] = A[o + lane + 32 * v];
  }
  const float rstd = centre_row<NV>(x, eps);
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    const float4 g = gamma[lane + 32 * v], b = beta[lane + 32 * v];
    float4 y = make_float4(x[v].x * rstd * g.x + b.x, x[v].y * rstd * g.y + b.y,
                           x[v].z * rstd * g.z + b.z, x[v].w * rstd * g.w + b.w);
    if (A) {
      const float4 a = a_row[v];
      y = make_float4(y.x * gelu_tanh(a.x), y.y * gelu_tanh(a.y), y.z * gelu_tanh(a.z),
                      y.w * gelu_tanh(a.w));
    }
    if (Y16)
      store_bf16x4(Y16 + 4 * (o + lane + 32 * v), y.x, y.y, y.z, y.w);
    else
      Y[o + lane + 32 * v] = y;
  }
}

// The gate's backward at one element: dOut → dY = dOut·gelu(a) (returned), dA = dOut·y·gelu′(a) with
// y = x̂·γ + β. (With gelu_tanh and a gelu′ of its own, three exponentials and divisions per element,
// the row kernel was compute-bound: 281 µs against 50 µs for the plain LayerNorm at D = 768,
// R = 16384 on an H100.)
__device__ __forceinline__ float gate_backward(float dout, float xh, float gamma, float beta,
                                               float a, float& da) {
  float grad;
  const float g = gelu_tanh_and_grad(a, grad);
  da = dout * (xh * gamma + beta) * grad;
  return dout * g;
}

// dX = rstd·(G − mean(G) − x̂·mean(G⊙x̂)), G = dY⊙γ; prod = dY⊙x̂ (for dγ). With A (gated): dY is the
// gate's dOut, dA is written and the LayerNorm's dY into dY_used (for dβ).
__global__ void ln_backward_kernel(const float* __restrict__ X, const float* __restrict__ gamma,
                                   const float* __restrict__ beta, const float* __restrict__ A,
                                   const float* __restrict__ dY, int R, int D, float eps,
                                   float* __restrict__ dX, float* __restrict__ dA,
                                   float* __restrict__ dY_used, float* __restrict__ prod) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * D;
  float s = 0.f;
  for (int c = lane; c < D; c += 32) s += X[o + c];
  const float mu = warp_sum(s) / float(D);
  float v = 0.f;
  for (int c = lane; c < D; c += 32) v += (X[o + c] - mu) * (X[o + c] - mu);
  const float rstd = 1.f / sqrtf(warp_sum(v) / float(D) + eps);
  // dy at column c: the given dY, or the gate's backward of it (writing dA and dY_used once, in the
  // first pass).
  auto dy_at = [&](int c, bool first) {
    if (!A) return dY[o + c];
    float da;
    const float dy =
        gate_backward(dY[o + c], (X[o + c] - mu) * rstd, gamma[c], beta[c], A[o + c], da);
    if (first) {
      dA[o + c] = da;
      dY_used[o + c] = dy;
    }
    return dy;
  };
  float sg = 0.f, sgx = 0.f;
  for (int c = lane; c < D; c += 32) {
    const float g = dy_at(c, true) * gamma[c];
    sg += g;
    sgx += g * (X[o + c] - mu) * rstd;
  }
  const float mean_g = warp_sum(sg) / float(D);
  const float mean_gx = warp_sum(sgx) / float(D);
  for (int c = lane; c < D; c += 32) {
    const float xh = (X[o + c] - mu) * rstd;
    const float dy = dy_at(c, false);
    const float g = dy * gamma[c];
    dX[o + c] = rstd * (g - mean_g - xh * mean_gx);
    prod[o + c] = dy * xh;
  }
}

// The same for D = 128·NV (every preset's width), as rms_backward_vec4_kernel: a block per chunk of
// kNormChunkRows rows, 8 warps taking a row at a time from registers; dγ (Σ dY⊙x̂) and dβ (Σ dY) summed
// per chunk in registers and shared memory into partial[chunk, D] and partial[chunks + chunk, D], so no
// [R, D] product buffer is written and read back. With A (gated): dY is the gate's dOut; dA is written.
template <int NV>
__global__ void ln_backward_vec4_kernel(const float4* __restrict__ X,
                                        const float4* __restrict__ gamma,
                                        const float4* __restrict__ beta,
                                        const float4* __restrict__ A, const float4* __restrict__ dY,
                                        int R, float eps, float4* __restrict__ dX,
                                        float4* __restrict__ dA, std::uint16_t* __restrict__ dA16,
                                        float* __restrict__ partial) {
  constexpr int D4 = 32 * NV, D = 4 * D4;
  __shared__ float4 s_sum[8][D4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float4 gm[NV], acc_g[NV], acc_b[NV];
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    gm[v] = gamma[lane + 32 * v];
    acc_g[v] = f4_zero();
    acc_b[v] = f4_zero();
  }
  const int r_end = min(R, (blockIdx.x + 1) * kNormChunkRows);
  for (int row = blockIdx.x * kNormChunkRows + warp; row < r_end; row += 8) {
    const std::size_t o = std::size_t(row) * D4;
    // The gate's A is read with X and dY, before the row's reductions: read after them, its loads
    // were a second exposed memory latency per row.
    float4 x[NV], dy[NV], a_row[NV];
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      x[v] = X[o + lane + 32 * v];
      dy[v] = dY[o + lane + 32 * v];
      if (A) a_row[v] = A[o + lane + 32 * v];
    }
    const float rstd = centre_row<NV>(x, eps);
    float sg = 0.f, sgx = 0.f;
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      x[v] = make_float4(x[v].x * rstd, x[v].y * rstd, x[v].z * rstd, x[v].w * rstd);  // x̂
      if (A) {
        const float4 a = a_row[v], b = beta[lane + 32 * v];
        float4 da;
        dy[v] = make_float4(gate_backward(dy[v].x, x[v].x, gm[v].x, b.x, a.x, da.x),
                            gate_backward(dy[v].y, x[v].y, gm[v].y, b.y, a.y, da.y),
                            gate_backward(dy[v].z, x[v].z, gm[v].z, b.z, a.z, da.z),
                            gate_backward(dy[v].w, x[v].w, gm[v].w, b.w, a.w, da.w));
        if (dA16)
          store_bf16x4(dA16 + 4 * (o + lane + 32 * v), da.x, da.y, da.z, da.w);
        else
          dA[o + lane + 32 * v] = da;
      }
      const float4 g =
          make_float4(dy[v].x * gm[v].x, dy[v].y * gm[v].y, dy[v].z * gm[v].z, dy[v].w * gm[v].w);
      sg += g.x + g.y + g.z + g.w;
      sgx += g.x * x[v].x + g.y * x[v].y + g.z * x[v].z + g.w * x[v].w;
    }
    const float mean_g = warp_sum(sg) / float(D);
    const float mean_gx = warp_sum(sgx) / float(D);
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      const float4 g =
          make_float4(dy[v].x * gm[v].x, dy[v].y * gm[v].y, dy[v].z * gm[v].z, dy[v].w * gm[v].w);
      dX[o + lane + 32 * v] = make_float4(
          rstd * (g.x - mean_g - x[v].x * mean_gx), rstd * (g.y - mean_g - x[v].y * mean_gx),
          rstd * (g.z - mean_g - x[v].z * mean_gx), rstd * (g.w - mean_g - x[v].w * mean_gx));
      f4_fma(acc_g[v], dy[v], x[v]);
      acc_b[v].x += dy[v].x;
      acc_b[v].y += dy[v].y;
      acc_b[v].z += dy[v].z;
      acc_b[v].w += dy[v].w;
    }
  }
  // dγ, then dβ through the same shared array.
  chunk_sum_8_warps<NV>(s_sum, acc_g,
                        reinterpret_cast<float4*>(partial + std::size_t(blockIdx.x) * D));
  chunk_sum_8_warps<NV>(
      s_sum, acc_b, reinterpret_cast<float4*>(partial + (std::size_t(gridDim.x) + blockIdx.x) * D));
}

// ---- η ---------------------------------------------------------------------------------------------------

__global__ void eta_forward_kernel(const float* __restrict__ U, const float* __restrict__ bias, int T, int H,
                                   float scale, std::size_t n, float* __restrict__ lam) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    if (!U) {
      lam[i] = scale;
      continue;
    }
    const std::size_t t = i % T, nh = i / T;
    const int h = int(nh % H);
    const std::size_t seq = nh / H;
    lam[i] = scale * sigmoidf_split(U[(seq * T + t) * H + h] + bias[h]);
  }
}

__global__ void eta_backward_kernel(const float* __restrict__ lam, const float* __restrict__ dlam, int T, int H,
                                    float scale, std::size_t n, float* __restrict__ dU) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t t = i % T, nh = i / T;
    const int h = int(nh % H);
    const std::size_t seq = nh / H;
    const float l = lam[i];
    dU[(seq * T + t) * H + h] = dlam[i] * l * (1.f - l / scale);
  }
}

// The learned gate in one pass each way, for a group of heads (blockIdx.y) at a time. U = x·θᵀ is
// [R, H], a product whose N = H (12 at D = 768) left cuBLAS with narrow tiles (at R = 16384 on an
// H100: 18.5 µs for U, 37.5 µs for dθ = dUᵀx, against 9 µs to read x in bf16), and λ, dU and the sums
// around them were passes of their own. The backward reads x in fp32 (x16 null) or as bf16 bit
// patterns (x null); θ and the sums stay fp32.
__device__ __forceinline__ float gate_input(const float* __restrict__ x,
                                            const std::uint16_t* __restrict__ x16, std::size_t i) {
  return x16 ? bf16_value(x16[i]) : x[i];
}

// λ[seq, h, t] = scale·σ(x_r·θ_h + β_h), r = seq·T + t, from bf16 x and θ on the tensor cores: a block
// per 16 rows and up to 16 heads (two m16n8k16 tiles, heads past H read as zeros), its kEtaWarps warps
// taking every kEtaWarps-th k-step of 16 over D, the fragments loaded straight from global memory (θ's
// stay in L1); the warps' sums are added in a fixed order through shared memory, then the bias and σ.
// Splitting k over the warps gives every SM ~30 warps' loads to hide the memory latency with: with a
// warp per 16 rows and all of D it took 24 µs at R = 16384, D = 768, H = 12 on an H100 (cuBLAS's
// product alone 18.5 µs, with narrow tiles for N = H; a CUDA-core version 81 µs, issue-bound).
constexpr int kEtaWarps = 4;
__device__ __forceinline__ std::uint32_t bf16_pair(const std::uint16_t* __restrict__ p, bool ok) {
  return ok ? *reinterpret_cast<const std::uint32_t*>(p) : 0u;
}
__global__ void __launch_bounds__(32 * kEtaWarps)
    eta_gate_forward_bf16_kernel(const std::uint16_t* __restrict__ x16,
                                 const std::uint16_t* __restrict__ theta16,
                                 const float* __restrict__ bias, int R, int T, int H, int D,
                                 float scale, float* __restrict__ lam) {
  __shared__ float s_acc[kEtaWarps][32][8];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int r0 = blockIdx.x * 16, h0 = blockIdx.y * 16;
  const int ra = r0 + gid, rb = r0 + gid + 8;  // the lane's A rows
  const int ha = h0 + gid, hb = h0 + 8 + gid;  // the lane's B columns (heads), per n-tile
  const std::uint16_t* xa = x16 + std::size_t(min(ra, R - 1)) * D + 2 * tig;
  const std::uint16_t* xb = x16 + std::size_t(min(rb, R - 1)) * D + 2 * tig;
  const std::uint16_t* ta = theta16 + std::size_t(min(ha, H - 1)) * D + 2 * tig;
  const std::uint16_t* tb = theta16 + std::size_t(min(hb, H - 1)) * D + 2 * tig;
  float acc[2][4] = {};
#pragma unroll 4
  for (int k0 = 16 * warp; k0 < D; k0 += 16 * kEtaWarps) {  // D % 16 == 0 (the host checks)
    const std::uint32_t a[4] = {bf16_pair(xa + k0, ra < R), bf16_pair(xb + k0, rb < R),
                                bf16_pair(xa + k0 + 8, ra < R), bf16_pair(xb + k0 + 8, rb < R)};
    mma_bf16(acc[0], a, bf16_pair(ta + k0, ha < H), bf16_pair(ta + k0 + 8, ha < H));
    mma_bf16(acc[1], a, bf16_pair(tb + k0, hb < H), bf16_pair(tb + k0 + 8, hb < H));
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) s_acc[warp][lane][e] = acc[e / 4][e % 4];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    float u = s_acc[0][lane][e];
#pragma unroll
    for (int w = 1; w < kEtaWarps; ++w) u += s_acc[w][lane][e];
    // element e: accumulator (n, i) = (e / 4, e % 4): row r0 + gid + 8·(i / 2), head
    // h0 + 8n + 2·tig + i % 2
    const int n = e / 4, i = e % 4;
    const int row = r0 + gid + 8 * (i / 2), h = h0 + 8 * n + 2 * tig + i % 2;
    if (row < R && h < H)
      lam[(std::size_t(row / T) * H + h) * T + row % T] = scale * sigmoidf_split(u + bias[h]);
  }
}

// dU[r, h] = dλ·λ·(1 − λ/scale) for the chunk's rows (written, and dU16 = bf16(dU) when given), then
// the chunk's partial sums dθ_h = Σ_r dU[r, h]·x_r into partial[chunk, h, :] and dβ_h = Σ_r dU[r, h]
// into partial_b[chunk, h]: a thread per column, its rows in order, so the sums are deterministic.
constexpr int kEtaChunkRows = 64, kEtaCols = 3;
template <int HG>
__global__ void __launch_bounds__(256, 2)
    eta_gate_backward_kernel(const float* __restrict__ lam, const float* __restrict__ dlam,
                             const float* __restrict__ x, const std::uint16_t* __restrict__ x16,
                             int R, int T, int H, int D, float scale, float* __restrict__ dU,
                             std::uint16_t* __restrict__ dU16, float* __restrict__ partial,
                             float* __restrict__ partial_b) {
  __shared__ float s_du[kEtaChunkRows][HG];
  const int r0 = blockIdx.x * kEtaChunkRows, h0 = blockIdx.y * HG;
  const int rows = min(kEtaChunkRows, R - r0);
  for (int i = threadIdx.x; i < kEtaChunkRows * HG; i += blockDim.x) {
    const int r = i / HG, h = i % HG;
    float v = 0.f;
    if (r < rows && h0 + h < H) {
      const int row = r0 + r;
      const std::size_t li = (std::size_t(row / T) * H + h0 + h) * T + row % T;
      const float l = lam[li];
      v = dlam[li] * l * (1.f - l / scale);
      dU[std::size_t(row) * H + h0 + h] = v;
      if (dU16) dU16[std::size_t(row) * H + h0 + h] = bf16_bits(v);
    }
    s_du[r][h] = v;
  }
  __syncthreads();
  // kEtaCols columns per thread at once (all of D = 768 on 256 threads), 4 rows unrolled: 12 loads
  // in flight per thread, at two blocks per SM.
  for (int cb = threadIdx.x; cb < D; cb += kEtaCols * blockDim.x) {
    float acc[kEtaCols][HG] = {};
    const std::size_t base = std::size_t(r0) * D;
#pragma unroll 4
    for (int r = 0; r < rows; ++r) {
      float xv[kEtaCols];
#pragma unroll
      for (int k = 0; k < kEtaCols; ++k) {
        const int c = cb + k * blockDim.x;
        xv[k] = c < D ? gate_input(x, x16, base + std::size_t(r) * D + c) : 0.f;
      }
#pragma unroll
      for (int k = 0; k < kEtaCols; ++k)
#pragma unroll
        for (int h = 0; h < HG; ++h) acc[k][h] = fmaf(s_du[r][h], xv[k], acc[k][h]);
    }
#pragma unroll
    for (int k = 0; k < kEtaCols; ++k) {
      const int c = cb + k * blockDim.x;
      if (c >= D) break;
#pragma unroll
      for (int h = 0; h < HG; ++h)
        if (h0 + h < H) partial[(std::size_t(blockIdx.x) * H + h0 + h) * D + c] = acc[k][h];
    }
  }
  if (threadIdx.x < HG && h0 + threadIdx.x < H) {
    float t = 0.f;
    for (int r = 0; r < rows; ++r) t += s_du[r][threadIdx.x];
    partial_b[std::size_t(blockIdx.x) * H + h0 + threadIdx.x] = t;
  }
}

__global__ void token_index_forward_kernel(const float* delta, int b, bool on, float* tau) {
  for (int i = threadIdx.x; i < b; i += blockDim.x) tau[i] = on ? fmaxf(1.f / float(i + 1) + delta[i], 0.f) : 1.f;
}

__global__ void token_index_backward_kernel(const float* delta, const float* dtau, int b, float* ddelta) {
  for (int i = threadIdx.x; i < b; i += blockDim.x)
    if (1.f / float(i + 1) + delta[i] > 0.f) ddelta[i] += dtau[i];
}

// ---- cross-entropy: one warp per row ------------------------------------------------------------

__global__ void cross_entropy_kernel(const float* logits, const int* __restrict__ targets, int R, int V,
                                     float grad_scale, float* __restrict__ losses, float* dlogits) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * V;
  const int y = targets[row];
  if (y < 0) {
    if (lane == 0) losses[row] = 0.f;
    if (dlogits)
      for (int j = lane; j < V; j += 32) dlogits[o + j] = 0.f;
    return;
  }
  const float ly = logits[o + y];
  float m = -INFINITY;
  for (int j = lane; j < V; j += 32) m = fmaxf(m, logits[o + j]);
  m = warp_max(m);
  float s = 0.f;
  for (int j = lane; j < V; j += 32) s += expf(logits[o + j] - m);
  s = warp_sum(s);  // every lane has read its logits before any lane writes below
  if (lane == 0) losses[row] = logf(s) + (m - ly);
  if (dlogits) {
    const float k = grad_scale / s;
    for (int j = lane; j < V; j += 32) {
      const float e = expf(logits[o + j] - m) * k;
      dlogits[o + j] = j == y ? e - grad_scale : e;
    }
  }
}

// ---- AdamW -------------------------------------------------------------------------------------------

constexpr int kNormThreads = 256;

int norm_blocks(std::size_t n) { return blocks_for(n, kNormThreads * 4, 1024); }

// The sum of every thread's t over a block of kNormThreads threads, in a fixed order (a tree through
// s), returned to thread 0.
__device__ double block_sum_double(double t, double (&s)[kNormThreads]) {
  s[threadIdx.x] = t;
  __syncthreads();
  for (int w = kNormThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  return s[0];
}

// Each block's Σ g² over a grid-strided share of g, in float4 loads where g is 16-byte aligned (the
// last n mod 4 values, and all of an unaligned g, by block 0 alone), accumulated in double and summed
// over the block's threads in a fixed order: the result is bitwise reproducible.
__global__ void sum_squares_partial_kernel(const float* __restrict__ g, std::size_t n, double* __restrict__ partial) {
  __shared__ double s[kNormThreads];
  double acc = 0;
  const bool vec = reinterpret_cast<std::uintptr_t>(g) % 16 == 0;
  const std::size_t n4 = vec ? n / 4 : 0;
  const auto* g4 = reinterpret_cast<const float4*>(g);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float4 v = g4[i];
    acc += double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z + double(v.w) * v.w;
  }
  if (blockIdx.x == 0)
    for (std::size_t i = 4 * n4 + threadIdx.x; i < n; i += blockDim.x) acc += double(g[i]) * g[i];
  const double sum = block_sum_double(acc, s);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// Σ of n partials by one block of kNormThreads threads, in a fixed order (a thread's strided share,
// then a tree): one thread's loop over the 1024 partials took 36 us, a latency chain of loads.
__global__ void sum_partials_double_kernel(const double* partial, int n, double* out) {
  __shared__ double s[kNormThreads];
  double t = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) t += partial[i];
  const double sum = block_sum_double(t, s);
  if (threadIdx.x == 0) *out = sum;
}

// p16 (optional): bf16(p) after the update, the bf16 products' mirror of the parameters, written in
// this pass instead of a separate conversion that reads p again.
__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g,
                             float* __restrict__ m, float* __restrict__ v,
                             std::uint16_t* __restrict__ p16, std::size_t n, AdamWScalars s) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float gj = g[i] * s.scale;
    const float mj = s.b1 * m[i] + s.one_minus_b1 * gj;
    const float vj = s.b2 * v[i] + s.one_minus_b2 * gj * gj;
    m[i] = mj;
    v[i] = vj;
    const float mhat = mj * s.inv_bc1, vhat = vj * s.inv_bc2;
    const float pj = p[i];
    const float pn = pj - s.lr * (mhat / (sqrtf(vhat) + s.eps) + s.wd * pj);
    p[i] = pn;
    if (p16) p16[i] = bf16_bits(pn);
  }
}

// ---- fallback GEMM: 64×64 tiles, 16-deep k-steps, 256 threads of 4×4 outputs -------------------------

__global__ void gemm_kernel(bool ta, bool tb, int M, int N, int K, float alpha, const float* __restrict__ A, int lda,
                            const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {
  __shared__ float As[16][64 + 1];
  __shared__ float Bs[16][64 + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += 16) {
    for (int q = 0; q < 4; ++q) {
      const int e = threadIdx.x + 256 * q;
      // A tile element (mm, kk) and B tile element (kk, nn), read along memory's fast axis.
      int mm, kk;
      if (ta) { kk = e / 64; mm = e % 64; } else { mm = e / 16; kk = e % 16; }
      const int gm = m0 + mm, gk = k0 + kk;
      float a = 0.f;
      if (gm < M && gk < K) a = ta ? A[std::size_t(gk) * lda + gm] : A[std::size_t(gm) * lda + gk];
      As[kk][mm] = a;
      int nn, kb;
      if (tb) { nn = e / 16; kb = e % 16; } else { kb = e / 64; nn = e % 64; }
      const int gn = n0 + nn, gkb = k0 + kb;
      float b = 0.f;
      if (gn < N && gkb < K) b = tb ? B[std::size_t(gn) * ldb + gkb] : B[std::size_t(gkb) * ldb + gn];
      Bs[kb][nn] = b;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int gm = m0 + ty + 16 * i, gn = n0 + tx + 16 * j;
      if (gm < M && gn < N) {
        float* c = C + std::size_t(gm) * ldc + gn;
        *c = beta == 0.f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * *c;
      }
    }
}

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;

int row_blocks(int R) { return (R + kRowsPerBlock - 1) / kRowsPerBlock; }

}  // namespace

// ---- host wrappers -----------------------------------------------------------------------------------

std::size_t column_sum_workspace(int R, int C) {
  return R > 0 && C > 0 ? std::size_t(chunks(R)) * C : 0;
}

void column_sum_add(const float* X, int R, int C, float* out, float* workspace, CUstream_st* stream) {
  const char* fn = "column_sum_add";
  require(R >= 0 && C >= 1, fn, "R must be >= 0 and C >= 1");
  require(R == 0 || (X && out && workspace), fn, "a pointer is null");
  column_sum_launch(X, R, C, out, workspace, stream);
}

void add(const float* a, const float* b, float* out, std::size_t n, CUstream_st* stream) {
  if (n == 0) return;
  require(a && b && out, "add", "a pointer is null");
  add_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(a, b, out, n);
  check_launch();
}

void embedding_forward(const float* E, int V, int D, const int* tokens, int R, float* H, CUstream_st* stream) {
  const char* fn = "embedding_forward";
  require(V >= 1 && D >= 1 && R >= 0, fn, "V, D must be >= 1 and R >= 0");
  if (R == 0) return;
  require(E && tokens && H, fn, "a pointer is null");
  const std::size_t n = std::size_t(R) * D;
  embedding_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(E, D, tokens, n, H);
  check_launch();
}

void embedding_backward(const int* offsets, const int* rows_of, int V, int D, const float* dH, float* dE,
                        CUstream_st* stream) {
  const char* fn = "embedding_backward";
  require(V >= 1 && D >= 1, fn, "V and D must be >= 1");
  require(offsets && rows_of && dH && dE, fn, "a pointer is null");
  embedding_backward_kernel<<<dim3(V, (D + 127) / 128), 128, 0, stream>>>(offsets, rows_of, D, dH, dE);
  check_launch();
}

namespace {
// S = H + Dx (when Dx) and Y = RMSNorm(S or H)·w, or its bf16 rounding in Y16 when that is not null;
// the float4 kernel where D = 128·NV ≤ 1024 and every pointer is 16-byte aligned (Y16: 8-byte).
void add_rms_launch(const float* H, const float* Dx, const float* w, int R, int D, float eps, float* S, float* Y,
                    std::uint16_t* Y16, CUstream_st* stream) {
  const int grid = row_blocks(R);
  if (rows_vec4(D, {H, Dx, w, S, Y}) && aligned8(Y16)) {
    const auto* H4 = reinterpret_cast<const float4*>(H);
    const auto* Dx4 = reinterpret_cast<const float4*>(Dx);
    const auto* w4 = reinterpret_cast<const float4*>(w);
    auto* S4 = reinterpret_cast<float4*>(S);
    auto* Y4 = reinterpret_cast<float4*>(Y);
    switch (D / 128) {
#define TTTLAB_ADD_RMS(NV) \
  case NV: add_rms_forward_vec4_kernel<NV><<<grid, kThreads, 0, stream>>>(H4, Dx4, w4, R, eps, S4, Y4, Y16); break;
      TTTLAB_ADD_RMS(1) TTTLAB_ADD_RMS(2) TTTLAB_ADD_RMS(3) TTTLAB_ADD_RMS(4)
      TTTLAB_ADD_RMS(5) TTTLAB_ADD_RMS(6) TTTLAB_ADD_RMS(7) TTTLAB_ADD_RMS(8)
#undef TTTLAB_ADD_RMS
    }
  } else {
    add_rms_forward_kernel<<<grid, kThreads, 0, stream>>>(H, Dx, w, R, D, eps, S, Y, Y16);
  }
  check_launch();
}
}  // namespace

void rms_norm_forward(const float* X, const float* w, int R, int D, float eps, float* Y, CUstream_st* stream) {
  const char* fn = "rms_norm_forward";
  require(R >= 0 && D >= 1, fn, "R must be >= 0 and D >= 1");
  require(eps > 0.f, fn, "eps must be > 0");
  if (R == 0) return;
  require(X && w && Y && X != Y, fn, "pointers must be non-null and Y must not alias X");
  add_rms_launch(X, nullptr, w, R, D, eps, nullptr, Y, nullptr, stream);
}

void rms_norm_forward_bf16(const float* X, const float* w, int R, int D, float eps, std::uint16_t* Y16,
                           CUstream_st* stream) {
  const char* fn = "rms_norm_forward_bf16";
  require(R >= 0 && D >= 1, fn, "R must be >= 0 and D >= 1");
  require(eps > 0.f, fn, "eps must be > 0");
  if (R == 0) return;
  require(X && w && Y16, fn, "a pointer is null");
  add_rms_launch(X, nullptr, w, R, D, eps, nullptr, nullptr, Y16, stream);
}

void add_rms_norm_forward(const float* H, const float* Dx, const float* w, int R, int D, float eps, float* S,
                          float* Y, CUstream_st* stream) {
  const char* fn = "add_rms_norm_forward";
  require(R >= 0 && D >= 1, fn, "R must be >= 0 and D >= 1");
  require(eps > 0.f, fn, "eps must be > 0");
  if (R == 0) return;
  require(H && Dx && w && S && Y, fn, "a pointer is null");
  require(S != Y && Y != H && Y != Dx && S != H && S != Dx, fn, "S, Y, H and Dx must be four different buffers");
  add_rms_launch(H, Dx, w, R, D, eps, S, Y, nullptr, stream);
}

void add_rms_norm_forward_bf16(const float* H, const float* Dx, const float* w, int R, int D, float eps, float* S,
                               std::uint16_t* Y16, CUstream_st* stream) {
  const char* fn = "add_rms_norm_forward_bf16";
  require(R >= 0 && D >= 1, fn, "R must be >= 0 and D >= 1");
  require(eps > 0.f, fn, "eps must be > 0");
  if (R == 0) return;
  require(H && Dx && w && S && Y16, fn, "a pointer is null");
  require(S != H && S != Dx, fn, "S, H and Dx must be three different buffers");
  add_rms_launch(H, Dx, w, R, D, eps, S, nullptr, Y16, stream);
}

std::size_t rms_norm_backward_workspace(int R, int D) {
  return std::size_t(std::max(R, 0)) * std::max(D, 0) + column_sum_workspace(R, D);
}

void rms_norm_backward(const float* X, const float* w, const float* dY, int R, int D, float eps,
                       float* dX, bool accumulate, float* dw, float* workspace, CUstream_st* stream,
                       std::uint16_t* dX16) {
  const char* fn = "rms_norm_backward";
  require(R >= 0 && D >= 1, fn, "R must be >= 0 and D >= 1");
  require(eps > 0.f, fn, "eps must be > 0");
  if (R == 0) return;
  require(X && w && dY && dX && dw && workspace, fn, "a pointer is null");
  require(dX != X && dX != dY, fn, "dX must not alias X or dY");
  if (rows_vec4(D, {X, w, dY, dX, workspace}) && aligned8(dX16)) {
    const int n = norm_chunks(R);
    const auto* X4 = reinterpret_cast<const float4*>(X);
    const auto* w4 = reinterpret_cast<const float4*>(w);
    const auto* dY4 = reinterpret_cast<const float4*>(dY);
    auto* dX4 = reinterpret_cast<float4*>(dX);
    switch (D / 128) {
#define TTTLAB_RMS_BWD(NV)                                                              \
  case NV:                                                                              \
    rms_backward_vec4_kernel<NV>                                                        \
        <<<n, 256, 0, stream>>>(X4, w4, dY4, R, eps, dX4, accumulate, dX16, workspace); \
    break;
      TTTLAB_RMS_BWD(1) TTTLAB_RMS_BWD(2) TTTLAB_RMS_BWD(3) TTTLAB_RMS_BWD(4)
      TTTLAB_RMS_BWD(5) TTTLAB_RMS_BWD(6) TTTLAB_RMS_BWD(7) TTTLAB_RMS_BWD(8)
#undef TTTLAB_RMS_BWD
    }
    check_launch();
    sum_partials_add(workspace, n, D, dw, stream);
    check_launch();
    return;
  }
  float* prod = workspace;
  rms_backward_kernel<<<row_blocks(R), kThreads, 0, stream>>>(X, w, dY, R, D, eps, dX, accumulate, prod);
  check_launch();
  column_sum_launch(prod, R, D, dw, workspace + std::size_t(R) * D, stream);
  if (dX16) convert_to_bf16(dX, R, D, D, dX16, D, stream);
}

namespace {
// LayerNorm forward, plain (A null) or gated; into Y, or bf16 into Y16 when that is not null.
void ln_forward_launch(const float* X, const float* gamma, const float* beta, const float* A, int R,
                       int D, float eps, float* Y, std::uint16_t* Y16, CUstream_st* stream) {
  if (rows_vec4(D, {X, gamma, beta, A, Y}) && aligned8(Y16)) {
    const auto* X4 = reinterpret_cast<const float4*>(X);
    const auto* g4 = reinterpret_cast<const float4*>(gamma);
    const auto* b4 = reinterpret_cast<const float4*>(beta);
    const auto* A4 = reinterpret_cast<const float4*>(A);
    auto* Y4 = reinterpret_cast<float4*>(Y);
    switch (D / 128) {
#define TTTLAB_LN_FWD(NV)                                                          \
  case NV:                                                                         \
    ln_forward_vec4_kernel<NV>                                                     \
        <<<row_blocks(R), kThreads, 0, stream>>>(X4, g4, b4, A4, R, eps, Y4, Y16); \
    break;
      TTTLAB_LN_FWD(1)
      TTTLAB_LN_FWD(2) TTTLAB_LN_FWD(3) TTTLAB_LN_FWD(4) TTTLAB_LN_FWD(5) TTTLAB_LN_FWD(6)
          TTTLAB_LN_FWD(7) TTTLAB_LN_FWD(8)
#undef TTTLAB_LN_FWD
    }
  } else {
    ln_forward_kernel<<<row_blocks(R), kThreads, 0, stream>>>(X, gamma, beta, A, R, D, eps, Y, Y16);
  }
  check_launch();
}

// LayerNorm backward, plain (A null: dY is the LayerNorm's output gradient) or gated (dY is the gate's
// dOut; dA written). The workspace: layer_norm_backward_workspace, plus R·D floats when gated.
void ln_backward_launch(const float* X, const float* gamma, const float* beta, const float* A,
                        const float* dY, int R, int D, float eps, float* dX, float* dA,
                        std::uint16_t* dA16, float* dgamma, float* dbeta, float* workspace,
                        CUstream_st* stream) {
  if (rows_vec4(D, {X, gamma, beta, A, dY, dX, dA, workspace}) && aligned8(dA16)) {
    const int n = norm_chunks(R);
    const auto* X4 = reinterpret_cast<const float4*>(X);
    const auto* g4 = reinterpret_cast<const float4*>(gamma);
    const auto* b4 = reinterpret_cast<const float4*>(beta);
    const auto* A4 = reinterpret_cast<const float4*>(A);
    const auto* dY4 = reinterpret_cast<const float4*>(dY);
    auto* dX4 = reinterpret_cast<float4*>(dX);
    auto* dA4 = reinterpret_cast<float4*>(dA);
    switch (D / 128) {
#define TTTLAB_LN_BWD(NV)                                                                \
  case NV:                                                                               \
    ln_backward_vec4_kernel<NV>                                                          \
        <<<n, 256, 0, stream>>>(X4, g4, b4, A4, dY4, R, eps, dX4, dA4, dA16, workspace); \
    break;
      TTTLAB_LN_BWD(1) TTTLAB_LN_BWD(2) TTTLAB_LN_BWD(3) TTTLAB_LN_BWD(4)
      TTTLAB_LN_BWD(5) TTTLAB_LN_BWD(6) TTTLAB_LN_BWD(7) TTTLAB_LN_BWD(8)
#undef TTTLAB_LN_BWD
    }
    check_launch();
    sum_partials_add(workspace, n, D, dgamma, stream);
    sum_partials_add(workspace + std::size_t(n) * D, n, D, dbeta, stream);
    check_launch();
    return;
  }
  // [R, D] each: prod = dY⊙x̂, then (gated) the LayerNorm's dY, then the column sums' partials.
  float* prod = workspace;
  float* dy_used = A ? workspace + std::size_t(R) * D : nullptr;
  float* ws = workspace + std::size_t(R) * D * (A ? 2 : 1);
  ln_backward_kernel<<<row_blocks(R), kThreads, 0, stream>>>(X, gamma, beta, A, dY, R, D, eps, dX,
                                                             dA, dy_used, prod);
  check_launch();
  column_sum_launch(prod, R, D, dgamma, ws, stream);
  column_sum_launch(A ? dy_used : dY, R, D, dbeta, ws, stream);
  if (dA16) convert_to_bf16(dA, R, D, D, dA16, D, stream);
}

void check_layer_norm(const char* fn, int R, int D, float eps) {
  require(R >= 0 && D >= 1, fn, "R must be >= 0 and D >= 1");
  require(eps > 0.f, fn, "eps must be > 0");
}
}  // namespace

void layer_norm_forward(const float* X, const float* gamma, const float* beta, int R, int D,
                        float eps, float* Y, CUstream_st* stream) {
  const char* fn = "layer_norm_forward";
  check_layer_norm(fn, R, D, eps);
  if (R == 0) return;
  require(X && gamma && beta && Y && X != Y, fn,
          "pointers must be non-null and Y must not alias X");
  ln_forward_launch(X, gamma, beta, nullptr, R, D, eps, Y, nullptr, stream);
}

std::size_t layer_norm_backward_workspace(int R, int D) {
  // The vectorised kernel's partial sums of dγ and dβ, or the general one's product buffer and sums.
  return std::max(2 * std::size_t(norm_chunks(std::max(R, 1))) * std::max(D, 0),
                  rms_norm_backward_workspace(R, D));
}

void layer_norm_backward(const float* X, const float* gamma, const float* dY, int R, int D,
                         float eps, float* dX, float* dgamma, float* dbeta, float* workspace,
                         CUstream_st* stream) {
  const char* fn = "layer_norm_backward";
  check_layer_norm(fn, R, D, eps);
  if (R == 0) return;
  require(X && gamma && dY && dX && dgamma && dbeta && workspace, fn, "a pointer is null");
  require(dX != X && dX != dY, fn, "dX must not alias X or dY");
  ln_backward_launch(X, gamma, nullptr, nullptr, dY, R, D, eps, dX, nullptr, nullptr, dgamma, dbeta,
                     workspace, stream);
}

void gated_layer_norm_forward(const float* O, const float* gamma, const float* beta, const float* A,
                              int R, int D, float eps, float* out, std::uint16_t* out16,
                              CUstream_st* stream) {
  const char* fn = "gated_layer_norm_forward";
  check_layer_norm(fn, R, D, eps);
  if (R == 0) return;
  require(O && gamma && beta && A && (out || out16), fn, "a pointer is null");
  require(out != O && out != A, fn, "out must not alias O or A");
  ln_forward_launch(O, gamma, beta, A, R, D, eps, out16 ? nullptr : out, out16, stream);
}

std::size_t gated_layer_norm_backward_workspace(int R, int D) {
  return std::size_t(std::max(R, 0)) * std::max(D, 0) + layer_norm_backward_workspace(R, D);
}

void gated_layer_norm_backward(const float* O, const float* gamma, const float* beta,
                               const float* A, const float* dOut, int R, int D, float eps,
                               float* dO, float* dA, float* dgamma, float* dbeta, float* workspace,
                               CUstream_st* stream, std::uint16_t* dA16) {
  const char* fn = "gated_layer_norm_backward";
  check_layer_norm(fn, R, D, eps);
  if (R == 0) return;
  require(O && gamma && beta && A && dOut && dO && dA && dgamma && dbeta && workspace, fn,
          "a pointer is null");
  require(dO != O && dO != A && dO != dOut && dA != O && dA != A && dA != dOut && dO != dA, fn,
          "dO and dA must not alias each other or an input");
  ln_backward_launch(O, gamma, beta, A, dOut, R, D, eps, dO, dA, dA16, dgamma, dbeta, workspace,
                     stream);
}

namespace {
void check_conv_rope(const char* fn, int C, const ConvRope* rope) {
  if (!rope) return;
  require(rope->cos_table && rope->sin_table, fn, "the RoPE tables are null");
  require(rope->d >= 2 && rope->d % 2 == 0 && C % rope->d == 0, fn,
          "the RoPE head dim must be even and divide C (got d = " + std::to_string(rope->d) + ", C = " +
              std::to_string(C) + ")");
  require(rope->period >= 1, fn, "the RoPE period must be >= 1");
}
// The vectorised conv kernels take RoPE where a float4 holds two whole pairs of one head.
bool conv_vec4_rope(int C, int K, const ConvRope* rope, std::initializer_list<const void*> ptrs) {
  return conv_vec4(C, K, ptrs) && (!rope || rope->d % 4 == 0);
}
}  // namespace

namespace {
// The vectorised forward of N convolutions of u (conv_vec4_rope holds).
template <int N>
void conv_forward_vec4(const float* u, const ConvForwardSet<N>& set, int R, int T, int C,
                       CUstream_st* stream, const ConvRope* rope) {
  const int threads = conv_vec4_threads(C);
  const dim3 grid = conv_vec4_grid(C, (R + kConvTile - 1) / kConvTile, threads);
  const auto* u4 = reinterpret_cast<const float4*>(u);
  if (rope)
    conv_forward_vec4_kernel<4, true, N><<<grid, threads, 0, stream>>>(u4, set, R, T, C / 4, *rope);
  else
    conv_forward_vec4_kernel<4, false, N>
        <<<grid, threads, 0, stream>>>(u4, set, R, T, C / 4, ConvRope{});
  check_launch();
}

// The vectorised backward of N convolutions of u (conv_vec4_rope holds), one pass: du, and each
// one's partial sums (set.partial) for conv_weight_finish_kernel.
template <int N>
void conv_backward_vec4(const float* u, const ConvBackwardSet<N>& set, int R, int T, int C,
                        float* du, bool accumulate, std::uint16_t* du16, CUstream_st* stream,
                        const ConvRope* rope) {
  const dim3 grid(unsigned((C / 4 + kConvPartialColumns - 1) / kConvPartialColumns),
                  unsigned(chunks(R)));
  const dim3 block(kConvPartialColumns, kConvRowGroups);
  const auto* u4 = reinterpret_cast<const float4*>(u);
  auto* du4 = reinterpret_cast<float4*>(du);
  const ConvRope r = rope ? *rope : ConvRope{};
  if (rope)
    conv_backward_vec4_kernel<4, true, N>
        <<<grid, block, 0, stream>>>(u4, set, R, T, C / 4, du4, accumulate, du16, r);
  else
    conv_backward_vec4_kernel<4, false, N>
        <<<grid, block, 0, stream>>>(u4, set, R, T, C / 4, du4, accumulate, du16, r);
  check_launch();
}

void conv_weight_finish(const float* partial, int R, int C, int K, float* dw, float* dbias,
                        CUstream_st* stream) {
  const int width = C * (K + 1);
  conv_weight_finish_kernel<<<(width + 31) / 32, dim3(32, kPartialRows), 0, stream>>>(
      partial, chunks(R), C, K, dw, dbias);
  check_launch();
}

void check_conv_shape(const char* fn, int B, int T, int C, int K) {
  require(B >= 1 && T >= 1 && C >= 1, fn, "B, T, C must be >= 1");
  require(K >= 1 && K <= 16, fn, "K must be in 1..16 (got " + std::to_string(K) + ")");
}
}  // namespace

void causal_conv_forward(const float* u, const float* w, const float* bias, int B, int T, int C, int K, float* y,
                         CUstream_st* stream, const ConvRope* rope) {
  const char* fn = "causal_conv_forward";
  check_conv_shape(fn, B, T, C, K);
  require(u && w && bias && y && u != y, fn, "pointers must be non-null and y must not alias u");
  check_conv_rope(fn, C, rope);
  const std::size_t n = std::size_t(B) * T * C;
  if (conv_vec4_rope(C, K, rope, {u, y})) {
    conv_forward_vec4<1>(u, ConvForwardSet<1>{{w}, {bias}, {reinterpret_cast<float4*>(y)}}, B * T,
                         T, C, stream, rope);
  } else {
    conv_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(u, w, bias, T, C, K, n, y);
    check_launch();
    if (rope) rope_rotate(y, B, T, C / rope->d, rope->d, rope->period, rope->cos_table, rope->sin_table, 1.f, stream);
  }
}

void causal_conv_pair_forward(const float* u, const float* w_a, const float* bias_a,
                              const float* w_b, const float* bias_b, int B, int T, int C, int K,
                              float* y_a, float* y_b, CUstream_st* stream, const ConvRope* rope) {
  const char* fn = "causal_conv_pair_forward";
  check_conv_shape(fn, B, T, C, K);
  require(u && w_a && bias_a && w_b && bias_b && y_a && y_b, fn, "a pointer is null");
  require(y_a != u && y_b != u && y_a != y_b, fn, "y_a, y_b must not alias u or each other");
  check_conv_rope(fn, C, rope);
  if (conv_vec4_rope(C, K, rope, {u, y_a, y_b})) {
    const ConvForwardSet<2> set{{w_a, w_b},
                                {bias_a, bias_b},
                                {reinterpret_cast<float4*>(y_a), reinterpret_cast<float4*>(y_b)}};
    conv_forward_vec4<2>(u, set, B * T, T, C, stream, rope);
  } else {
    causal_conv_forward(u, w_a, bias_a, B, T, C, K, y_a, stream, rope);
    causal_conv_forward(u, w_b, bias_b, B, T, C, K, y_b, stream, rope);
  }
}

void conv_add_rms_norm_forward(const float* u, const float* conv_w, const float* conv_bias, int B,
                               int T, int D, int K, const float* H, const float* w, float eps,
                               float* S, float* Y, std::uint16_t* Y16, float* scratch,
                               CUstream_st* stream) {
  const char* fn = "conv_add_rms_norm_forward";
  check_conv_shape(fn, B, T, D, K);
  require(u && conv_w && conv_bias && H && w && S && scratch, fn, "a pointer is null");
  require((Y == nullptr) != (Y16 == nullptr), fn, "exactly one of Y and Y16 must be given");
  const int R = B * T;
  if (K == 4 && rows_vec4(D, {u, H, w, S, Y}) && aligned8(Y16)) {
    const auto* u4 = reinterpret_cast<const float4*>(u);
    const auto* H4 = reinterpret_cast<const float4*>(H);
    const auto* w4 = reinterpret_cast<const float4*>(w);
    auto* S4 = reinterpret_cast<float4*>(S);
    auto* Y4 = reinterpret_cast<float4*>(Y);
    const int grid = std::min((R + kConvNormRows - 1) / kConvNormRows, 1 << 20);
    switch (D / 128) {
#define TTTLAB_CONV_ADD_RMS(NV)                                                                \
  case NV:                                                                                     \
    conv_add_rms_forward_vec4_kernel<4, NV>                                                    \
        <<<grid, 32 * NV, 0, stream>>>(u4, conv_w, conv_bias, T, H4, w4, R, eps, S4, Y4, Y16); \
    break;
      // clang-format off
      TTTLAB_CONV_ADD_RMS(1) TTTLAB_CONV_ADD_RMS(2) TTTLAB_CONV_ADD_RMS(3) TTTLAB_CONV_ADD_RMS(4)
      TTTLAB_CONV_ADD_RMS(5) TTTLAB_CONV_ADD_RMS(6) TTTLAB_CONV_ADD_RMS(7) TTTLAB_CONV_ADD_RMS(8)
      // clang-format on
#undef TTTLAB_CONV_ADD_RMS
    }
    check_launch();
  } else {
    causal_conv_forward(u, conv_w, conv_bias, B, T, D, K, scratch, stream);
    if (Y16)
      add_rms_norm_forward_bf16(H, scratch, w, R, D, eps, S, Y16, stream);
    else
      add_rms_norm_forward(H, scratch, w, R, D, eps, S, Y, stream);
  }
}

std::size_t causal_conv_backward_workspace(int B, int T, int C, int K) {
  return std::size_t(chunks(std::max(B * T, 1))) * std::max(C, 0) * (std::max(K, 0) + 1);
}

std::size_t causal_conv_pair_backward_workspace(int B, int T, int C, int K) {
  return 2 * causal_conv_backward_workspace(B, T, C, K);
}

void causal_conv_backward(const float* u, const float* w, const float* dy, int B, int T, int C, int K, float* du,
                          bool accumulate, float* dw, float* dbias, float* workspace, CUstream_st* stream,
                          const ConvRope* rope) {
  const char* fn = "causal_conv_backward";
  check_conv_shape(fn, B, T, C, K);
  require(u && w && dy && du && dw && dbias && workspace, fn, "a pointer is null");
  require(du != dy && du != u, fn, "du must not alias u or dy");
  check_conv_rope(fn, C, rope);
  const int R = B * T;
  if (conv_vec4_rope(C, K, rope, {u, dy, du})) {
    conv_backward_vec4<1>(
        u, ConvBackwardSet<1>{{w}, {reinterpret_cast<const float4*>(dy)}, {workspace}}, R, T, C, du,
        accumulate, nullptr, stream, rope);
  } else {
    const ConvRope r = rope ? *rope : ConvRope{};
    const std::size_t n = std::size_t(R) * C;
    conv_backward_input_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(w, dy, T, C, K, n, du, accumulate,
                                                                                 rope != nullptr, r);
    check_launch();
    conv_weight_partial_kernel<<<dim3((C + 31) / 32, chunks(R)), dim3(32, 8), 0, stream>>>(
        u, dy, R, T, C, K, workspace, rope != nullptr, r);
    check_launch();
  }
  conv_weight_finish(workspace, R, C, K, dw, dbias, stream);
}

void causal_conv_pair_backward(const float* u, const float* w_a, const float* dy_a,
                               const float* w_b, const float* dy_b, int B, int T, int C, int K,
                               float* du, bool accumulate, float* dw_a, float* dbias_a, float* dw_b,
                               float* dbias_b, float* workspace, CUstream_st* stream,
                               const ConvRope* rope, std::uint16_t* du16) {
  const char* fn = "causal_conv_pair_backward";
  check_conv_shape(fn, B, T, C, K);
  require(u && w_a && dy_a && w_b && dy_b && du && dw_a && dbias_a && dw_b && dbias_b && workspace,
          fn, "a pointer is null");
  require(du != dy_a && du != dy_b && du != u, fn, "du must not alias u, dy_a or dy_b");
  check_conv_rope(fn, C, rope);
  const int R = B * T;
  if (conv_vec4_rope(C, K, rope, {u, dy_a, dy_b, du}) && aligned8(du16)) {
    float* partial_b = workspace + causal_conv_backward_workspace(B, T, C, K);
    const ConvBackwardSet<2> set{
        {w_a, w_b},
        {reinterpret_cast<const float4*>(dy_a), reinterpret_cast<const float4*>(dy_b)},
        {workspace, partial_b}};
    conv_backward_vec4<2>(u, set, R, T, C, du, accumulate, du16, stream, rope);
    conv_weight_finish(workspace, R, C, K, dw_a, dbias_a, stream);
    conv_weight_finish(partial_b, R, C, K, dw_b, dbias_b, stream);
  } else {
    causal_conv_backward(u, w_a, dy_a, B, T, C, K, du, accumulate, dw_a, dbias_a, workspace, stream,
                         rope);
    causal_conv_backward(u, w_b, dy_b, B, T, C, K, du, true, dw_b, dbias_b, workspace, stream,
                         rope);
    if (du16) convert_to_bf16(du, R, C, C, du16, C, stream);
  }
}

void rope_tables(int d, int period, double theta, float* cos_host, float* sin_host) {
  if (d < 2 || d % 2 != 0 || period < 1)
    throw std::invalid_argument("rope_tables: d must be even and >= 2, period >= 1");
  const int half = d / 2;
  for (int m = 0; m < half; ++m) {
    // As the CPU op: the frequency and the angle in double, cos and sin rounded to float.
    const double freq = std::pow(theta, -2.0 * double(m) / double(d));
    for (int p = 0; p < period; ++p) {
      const double phi = double(p) * freq;
      cos_host[p * half + m] = float(std::cos(phi));
      sin_host[p * half + m] = float(std::sin(phi));
    }
  }
}

void rope_rotate(float* X, int B, int T, int H, int d, int period, const float* cos_table, const float* sin_table,
                 float sign, CUstream_st* stream) {
  const char* fn = "rope_rotate";
  require(B >= 1 && T >= 1 && H >= 1 && period >= 1, fn, "B, T, H and the period must be >= 1");
  require(d >= 2 && d % 2 == 0, fn, "the head dim must be even");
  require(X && cos_table && sin_table, fn, "a pointer is null");
  const std::size_t n = std::size_t(B) * T * H * (d / 2);
  if (d % 4 == 0 && n / 2 < std::size_t(1) << 31 && aligned16({X})) {
    const int n4 = int(n / 2);
    rope_vec4_kernel<<<blocks_for(std::size_t(n4), kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(X), T, H, d / 4, period, cos_table, sin_table, sign, n4);
  } else {
    rope_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(X, T, H, d, period, cos_table, sin_table, sign, n);
  }
  check_launch();
}

void silu_mul_forward(const float* G, const float* U, float* hidden, std::size_t n, CUstream_st* stream) {
  if (n == 0) return;
  require(G && U && hidden, "silu_mul_forward", "a pointer is null");
  if (n % 4 == 0 && aligned16({G, U, hidden}))
    silu_mul_forward_vec4_kernel<<<blocks_for(n / 4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(G), reinterpret_cast<const float4*>(U), reinterpret_cast<float4*>(hidden), n / 4);
  else
    silu_mul_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(G, U, hidden, n);
  check_launch();
}

void silu_mul_backward(const float* G, const float* U, const float* dHidden, float* dG, float* dU, std::size_t n,
                       CUstream_st* stream) {
  if (n == 0) return;
  require(G && U && dHidden && dG && dU, "silu_mul_backward", "a pointer is null");
  if (n % 4 == 0 && aligned16({G, U, dHidden, dG, dU}))
    silu_mul_backward_vec4_kernel<<<blocks_for(n / 4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(G), reinterpret_cast<const float4*>(U), reinterpret_cast<const float4*>(dHidden),
        reinterpret_cast<float4*>(dG), reinterpret_cast<float4*>(dU), n / 4);
  else
    silu_mul_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(G, U, dHidden, dG, dU, n);
  check_launch();
}

void silu_mul_forward_bf16(const std::uint16_t* G16, const std::uint16_t* U16,
                           std::uint16_t* hidden16, std::size_t n, CUstream_st* stream) {
  if (n == 0) return;
  require(G16 && U16 && hidden16, "silu_mul_forward_bf16", "a pointer is null");
  if (n % 4 == 0 && aligned8(G16) && aligned8(U16) && aligned8(hidden16))
    silu_mul_forward_bf16_vec4_kernel<<<blocks_for(n / 4, kThreads), kThreads, 0, stream>>>(
        G16, U16, hidden16, n / 4);
  else
    silu_mul_forward_bf16_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(G16, U16,
                                                                                   hidden16, n);
  check_launch();
}

void silu_mul_backward_bf16(const std::uint16_t* G16, const std::uint16_t* U16,
                            const std::uint16_t* dHidden16, std::uint16_t* dG16,
                            std::uint16_t* dU16, std::size_t n, CUstream_st* stream) {
  if (n == 0) return;
  require(G16 && U16 && dHidden16 && dG16 && dU16, "silu_mul_backward_bf16", "a pointer is null");
  if (n % 4 == 0 && aligned8(G16) && aligned8(U16) && aligned8(dHidden16) && aligned8(dG16) &&
      aligned8(dU16))
    silu_mul_backward_bf16_vec4_kernel<<<blocks_for(n / 4, kThreads), kThreads, 0, stream>>>(
        G16, U16, dHidden16, dG16, dU16, n / 4);
  else
    silu_mul_backward_bf16_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
        G16, U16, dHidden16, dG16, dU16, n);
  check_launch();
}

void eta_forward(const float* U, const float* bias, int B, int T, int H, float scale, float* lambda,
                 CUstream_st* stream) {
  const char* fn = "eta_forward";
  require(B >= 1 && T >= 1 && H >= 1, fn, "B, T, H must be >= 1");
  require(lambda && (!U || bias), fn, "lambda (and bias with U) must be non-null");
  const std::size_t n = std::size_t(B) * H * T;
  eta_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(U, bias, T, H, scale, n, lambda);
  check_launch();
}

void eta_backward(const float* lambda, const float* dlambda, int B, int T, int H, float scale, float* dU,
                  CUstream_st* stream) {
  const char* fn = "eta_backward";
  require(B >= 1 && T >= 1 && H >= 1, fn, "B, T, H must be >= 1");
  require(lambda && dlambda && dU, fn, "a pointer is null");
  const std::size_t n = std::size_t(B) * H * T;
  eta_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(lambda, dlambda, T, H,
                                                                           scale > 0.f ? scale : 1.f, n, dU);
  check_launch();
}

// The head-group width of eta_gate_backward_kernel for H heads: each thread holds HG accumulators
// per column.
int eta_head_group(int H) { return H <= 4 ? 4 : H <= 8 ? 8 : 16; }

void check_eta_gate_dims(const char* fn, int B, int T, int H, int D) {
  require(B >= 1 && T >= 1 && H >= 1 && D >= 1, fn, "B, T, H, D must be >= 1");
  require(std::size_t(B) * T <= std::size_t(INT_MAX), fn, "B·T must fit an int");
}

void eta_gate_forward_bf16(const std::uint16_t* x16, const std::uint16_t* theta16,
                           const float* bias, int B, int T, int H, int D, float scale,
                           float* lambda, CUstream_st* stream) {
  const char* fn = "eta_gate_forward_bf16";
  check_eta_gate_dims(fn, B, T, H, D);
  require(D % 16 == 0, fn, "D must be a multiple of 16");
  require(x16 && theta16 && bias && lambda, fn, "a pointer is null");
  require(reinterpret_cast<std::uintptr_t>(x16) % 4 == 0 &&
              reinterpret_cast<std::uintptr_t>(theta16) % 4 == 0,
          fn, "x16 and theta16 must be 4-byte aligned");
  const int R = B * T;
  const dim3 grid((R + 15) / 16, (H + 15) / 16);
  eta_gate_forward_bf16_kernel<<<grid, 32 * kEtaWarps, 0, stream>>>(x16, theta16, bias, R, T, H, D,
                                                                    scale, lambda);
  check_launch();
}

std::size_t eta_gate_backward_workspace(int R, int H, int D) {
  const std::size_t chunks = (std::size_t(std::max(R, 1)) + kEtaChunkRows - 1) / kEtaChunkRows;
  return chunks * std::size_t(H) * (std::size_t(D) + 1);
}

void eta_gate_backward(const float* lambda, const float* dlambda, const float* x,
                       const std::uint16_t* x16, int B, int T, int H, int D, float scale, float* dU,
                       std::uint16_t* dU16, float* dtheta, float* dbias, float* workspace,
                       CUstream_st* stream) {
  const char* fn = "eta_gate_backward";
  check_eta_gate_dims(fn, B, T, H, D);
  require((x != nullptr) != (x16 != nullptr), fn, "exactly one of x and x16 must be given");
  require(lambda && dlambda && dU && dtheta && dbias && workspace, fn, "a pointer is null");
  const int R = B * T, hg = eta_head_group(H);
  const int chunks = (R + kEtaChunkRows - 1) / kEtaChunkRows;
  float* partial = workspace;
  float* partial_b = workspace + std::size_t(chunks) * H * D;
  const dim3 grid(chunks, (H + hg - 1) / hg);
  const float s = scale > 0.f ? scale : 1.f;  // as eta_backward
  switch (hg) {
#define TTTLAB_ETA_BWD(HG)                                                     \
  case HG:                                                                     \
    eta_gate_backward_kernel<HG><<<grid, kThreads, 0, stream>>>(               \
        lambda, dlambda, x, x16, R, T, H, D, s, dU, dU16, partial, partial_b); \
    break;
    TTTLAB_ETA_BWD(4) TTTLAB_ETA_BWD(8) TTTLAB_ETA_BWD(16)
#undef TTTLAB_ETA_BWD
  }
  check_launch();
  sum_partials_add(partial, chunks, H * D, dtheta, stream);
  sum_partials_add(partial_b, chunks, H, dbias, stream);
}

void token_index_forward(const float* delta, int b, bool token_index, float* tau, CUstream_st* stream) {
  require(b >= 1 && delta && tau, "token_index_forward", "b must be >= 1 and pointers non-null");
  token_index_forward_kernel<<<1, 64, 0, stream>>>(delta, b, token_index, tau);
  check_launch();
}

void token_index_backward(const float* delta, const float* dtau, int b, bool token_index, float* ddelta,
                          CUstream_st* stream) {
  require(b >= 1 && delta && dtau && ddelta, "token_index_backward", "b must be >= 1 and pointers non-null");
  if (!token_index) return;
  token_index_backward_kernel<<<1, 64, 0, stream>>>(delta, dtau, b, ddelta);
  check_launch();
}

void cross_entropy(const float* logits, const int* targets, int R, int V, float grad_scale, float* losses,
                   float* dlogits, CUstream_st* stream) {
  const char* fn = "cross_entropy";
  require(R >= 0 && V >= 1, fn, "R must be >= 0 and V >= 1");
  if (R == 0) return;
  require(logits && targets && losses, fn, "a pointer is null");
  cross_entropy_kernel<<<row_blocks(R), kThreads, 0, stream>>>(logits, targets, R, V, grad_scale, losses, dlogits);
  check_launch();
}

std::size_t sum_squares_workspace(std::size_t n) { return std::size_t(norm_blocks(n)); }

void sum_squares(const float* g, std::size_t n, double* out, double* workspace, CUstream_st* stream) {
  require(out && workspace && (n == 0 || g), "sum_squares", "a pointer is null");
  const int nb = norm_blocks(n);
  sum_squares_partial_kernel<<<nb, kNormThreads, 0, stream>>>(g, n, workspace);
  check_launch();
  sum_partials_double_kernel<<<1, kNormThreads, 0, stream>>>(workspace, nb, out);
  check_launch();
}

void adamw_update(float* p, const float* g, float* m, float* v, std::size_t n,
                  const AdamWScalars& s, CUstream_st* stream, std::uint16_t* p16) {
  if (n == 0) return;
  require(p && g && m && v, "adamw_update", "a pointer is null");
  adamw_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(p, g, m, v, p16, n, s);
  check_launch();
}

void gemm_builtin(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                  const float* B, int ldb, float beta, float* C, int ldc, CUstream_st* stream) {
  if (M <= 0 || N <= 0) return;
  require(M <= 65535 * 64, "gemm_builtin", "M too large for the grid");
  gemm_kernel<<<dim3((N + 63) / 64, (M + 63) / 64), 256, 0, stream>>>(trans_a, trans_b, M, N, K, alpha, A, lda, B,
                                                                      ldb, beta, C, ldc);
  check_launch();
}

void convert_to_bf16(const float* src, int rows, int cols, int ld_src, std::uint16_t* dst, int ld_dst,
                     CUstream_st* stream) {
  const char* fn = "convert_to_bf16";
  require(rows >= 0 && cols >= 0 && ld_src >= cols && ld_dst >= cols, fn,
          "need rows, cols >= 0 and leading dimensions >= cols (rows " + std::to_string(rows) + ", cols " +
              std::to_string(cols) + ", ld_src " + std::to_string(ld_src) + ", ld_dst " + std::to_string(ld_dst) + ")");
  if (rows == 0 || cols == 0) return;
  require(src && dst, fn, "a pointer is null");
  const bool vector_rows = ld_src % 4 == 0 && ld_dst % 4 == 0 && aligned16({src}) && aligned8(dst);
  const std::size_t groups = std::size_t(rows) * ((cols + 3) / 4);
  convert_to_bf16_kernel<<<blocks_for(groups, kThreads), kThreads, 0, stream>>>(src, rows, cols, ld_src, dst, ld_dst,
                                                                                 vector_rows);
  check_launch();
}

}  // namespace tttlab::kernels
