// The depthwise causal convolution (tttlab/kernels/nn_ops.hpp, nn/causal_conv.hpp on the CPU),
// optionally with RoPE fused in, in pairs over one input (the Mamba backbone's Q and K views), and
// fused with the residual add and RMSNorm after it (conv_add_rms_norm_forward); and Mamba-2's
// convolution with its silu (mamba2_conv_silu_forward / _backward, declared in mamba2.hpp), which
// reads in_proj's output in place.
#include "ops/ops_common.cuh"
#include "tttlab/kernels/mamba2.hpp"

namespace tttlab::kernels {
namespace {

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
// In a profile of a D = 768 training step the three element-wise conv kernels took several times
// their memory floor (docs/KERNELS.md).
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

__device__ __forceinline__ float conv_sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
// silu and silu′ as mamba2.cu's silu_f / silu_grad_f (the same operations, so the same bits).
__device__ __forceinline__ float4 conv_silu4(float4 a) {
  return make_float4(a.x * conv_sigmoid(a.x), a.y * conv_sigmoid(a.y), a.z * conv_sigmoid(a.z),
                     a.w * conv_sigmoid(a.w));
}
__device__ __forceinline__ float conv_silu_grad(float x) {
  const float s = conv_sigmoid(x);
  return s * (1.f + x * (1.f - s));
}

// y_n[r, c] = bias_n[c] + Σ_j w_n[c, j]·u[r − (K−1) + j, c] over the taps inside r's sequence. u's
// rows are ld_u4 float4 apart, y's ld_y4 (C4 where contiguous).
// grid (⌈C/4 / blockDim.x⌉, tiles), one float4 column per thread.
// ROPE: each output row rotated (sign +1) before its store; m is the pair index of the thread's x.x.
template <int K, bool ROPE, int N>
__global__ void conv_forward_vec4_kernel(const float4* __restrict__ u, ConvForwardSet<N> set, int R,
                                         int T, int C4, ConvRope rope, int ld_u4, int ld_y4) {
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
      x[i] = ok ? u[std::size_t(r) * ld_u4 + c4] : f4_zero();
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
        set.y[n][std::size_t(r0 + i) * ld_y4 + c4] = acc;
      }
      t = t + 1 == T ? 0 : t + 1;
    }
  }
}

// Mamba-2's conv + silu forward: conv_forward_vec4_kernel's N = 1 form with silu applied to each
// output row before its store (the same operations in the same order, so the same bits), in blocks
// of COLS float4 columns by ROWG threads down the rows, TILE rows a tile, at least MINB blocks per
// SM. conv_forward_vec4_kernel's one-dimensional blocks (tiles of 16 rows, 256 columns, ~120
// registers) left 96 of the second block's 256 threads idle at C = 1664 and two blocks per SM: 80.5
// µs per layer at B8 T2048 against a floor near 51 for its 218 MB. Tiles of 8 rows in blocks of 32
// columns by 4 (13 whole column blocks, six blocks per SM at 80 registers) take 67.2 (ncu, same
// step: tiles of 16 at three blocks 67.5; 8 rows by 8 at three 71.9; 4 rows by 8 at four 89.2).
constexpr int kSiluForwardTile = 8, kSiluForwardColumns = 32, kSiluForwardRowGroups = 4,
              kSiluForwardMinBlocks = 6;
template <int K, int TILE, int COLS, int ROWG, int MINB>
__global__ void __launch_bounds__(COLS* ROWG, MINB)
    conv_silu_forward_vec4_kernel(const float4* __restrict__ u, const float* __restrict__ w,
                                  const float* __restrict__ bias, int R, int T, int C4, int ld_u4,
                                  int ld_y4, float4* __restrict__ y) {
  const int c4 = blockIdx.x * COLS + threadIdx.x;
  if (c4 >= C4) return;
  float4 wt[K];
  load_taps<K>(w, 4 * c4, wt);
  const float4 b = make_float4(bias[4 * c4], bias[4 * c4 + 1], bias[4 * c4 + 2], bias[4 * c4 + 3]);
  for (int tile = blockIdx.y * ROWG + threadIdx.y; tile * TILE < R; tile += gridDim.y * ROWG) {
    const int r0 = tile * TILE;
    const int t0 = r0 % T;
    // x[i] = u[r0 − (K−1) + i]; rows before r0's sequence, or past R, are zero.
    float4 x[TILE + K - 1];
#pragma unroll
    for (int i = 0; i < TILE + K - 1; ++i) {
      const int r = r0 - (K - 1) + i;
      const bool ok = r < R && t0 + i - (K - 1) >= 0;
      x[i] = ok ? u[std::size_t(r) * ld_u4 + c4] : f4_zero();
    }
    int t = t0;
#pragma unroll
    for (int i = 0; i < TILE; ++i) {
      if (r0 + i >= R) break;
      float4 acc = b;
#pragma unroll
      for (int j = 0; j < K; ++j)
        if (t - (K - 1) + j >= 0) f4_fma(acc, wt[j], x[i + j]);  // tap inside this row's sequence
      y[std::size_t(r0 + i) * ld_y4 + c4] = conv_silu4(acc);
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
// SILU (N = 1, no RoPE; Mamba-2's conv + silu): dy is the gradient of silu(conv(u) + bias), turned
// into the convolution's gradient as each row is loaded, dy·silu′(a) with a = bias + Σ_j w_j·u[s −
// (K−1) + j] recomputed as conv_forward_vec4_kernel computes it (the same operations, so the same
// bits as the separate pass that wrote the product back to dy before: it read u and dy and wrote dy,
// [R, C] each). The u window then reaches K − 1 rows further, to the last dy row's.
constexpr int kConvRowGroups = 4;
constexpr int kConvPartialColumns = 64;  // float4 columns per block: 256 threads
// Rows per tile: a pair's tile holds two gradients' rows in the registers of one.
template <int N>
constexpr int kConvBackwardTile = N == 1 ? 8 : 4;
static_assert(kChunkRows % (kConvRowGroups * kConvBackwardTile<1>) == 0 &&
                  kChunkRows % (kConvRowGroups * kConvBackwardTile<2>) == 0,
              "row groups of whole tiles");
// Mamba-2's conv + silu backward (SILU) holds a longer u window: with the tiles of 8 rows and 64
// columns it took 172 registers, one block of 256 threads per SM and 2.7× its memory floor. It runs
// tiles of 4 rows in blocks of 32 columns (128 threads), four blocks per SM at 128 registers with
// no spills (13 whole column blocks at C = 1664, where 64 columns left half of the last one idle).
// A group's rows are summed in the same order whatever the tile, so the results are the same bits.
constexpr int kSiluTile = 4, kSiluColumns = 32, kSiluMinBlocks = 4;
static_assert(kChunkRows % (kConvRowGroups * kSiluTile) == 0, "row groups of whole tiles");
template <int K, bool ROPE, int N, bool SILU = false, int TILE = kConvBackwardTile<N>,
          int COLS = kConvPartialColumns, int MINB = 1>
__global__ void __launch_bounds__(COLS* kConvRowGroups, MINB)
    conv_backward_vec4_kernel(const float4* __restrict__ u, ConvBackwardSet<N> set, int R, int T,
                              int C4, float4* __restrict__ du, bool accumulate,
                              std::uint16_t* __restrict__ du16, ConvRope rope, int ld_u4,
                              int ld_du4, const float* __restrict__ silu_bias) {
  static_assert(!SILU || (N == 1 && !ROPE), "the silu backward is Mamba-2's single convolution");
  constexpr int kTile = TILE;
  constexpr int kXRows = kTile + (SILU ? 2 : 1) * (K - 1);  // the u window
  constexpr int kXKeep = kXRows - kTile;                    // its rows kept from the last tile
  __shared__ float4 s_acc[N * (K + 1) * COLS];
  const int c4 = blockIdx.x * blockDim.x + threadIdx.x;
  const int group = threadIdx.y;
  const bool active = c4 < C4;
  const int m = ROPE ? 2 * (c4 % (rope.d / 4)) : 0;
  float4 wt[N][K], acc[N][K + 1], sb = f4_zero();
#pragma unroll
  for (int n = 0; n < N; ++n) {
    if (active) load_taps<K>(set.w[n], 4 * c4, wt[n]);
#pragma unroll
    for (int j = 0; j <= K; ++j) acc[n][j] = f4_zero();
  }
  if (SILU && active)
    sb = make_float4(silu_bias[4 * c4], silu_bias[4 * c4 + 1], silu_bias[4 * c4 + 2],
                     silu_bias[4 * c4 + 3]);
  constexpr int kGroupRows = kChunkRows / kConvRowGroups;
  const int r_begin = blockIdx.y * kChunkRows + group * kGroupRows;
  const int r_end = min(R, r_begin + kGroupRows);
  // A tile never straddles r_end short of R: kGroupRows is a multiple of kTile.
  // Tile r0's window: x[i] = u[r0 − (K−1) + i], zero before r0's sequence; g[n][i] = dy_n[r0 + i],
  // zero past R (rows past a sequence's end are masked below). Its last K − 1 entries are the next
  // tile's first K − 1, moved to the front instead of loaded (and rotated) again.
  float4 x[kXRows], g[N][kTile + K - 1];
  // SILU: dy row s (at position ts, x[xi] = u row s − (K−1)) times silu′ of its pre-activation.
  auto silu_grad_row = [&](float4 dy, int xi, int ts) {
    float4 a = sb;
#pragma unroll
    for (int j = 0; j < K; ++j)
      if (ts - (K - 1) + j >= 0) f4_fma(a, wt[0][j], x[xi + j]);  // tap inside s's sequence
    return make_float4(dy.x * conv_silu_grad(a.x), dy.y * conv_silu_grad(a.y),
                       dy.z * conv_silu_grad(a.z), dy.w * conv_silu_grad(a.w));
  };
  int tg = 0;  // ROPE: the position of the next dy row loaded, r0 + K − 1's at a tile's start
  if (active && r_begin < r_end) {  // the window's tail as a tile at r_begin − kTile leaves it
    const int tb = r_begin % T;
#pragma unroll
    for (int i = 0; i < kXKeep; ++i) {
      const int r = r_begin - (K - 1) + i;
      x[kTile + i] = r < R && tb + i - (K - 1) >= 0 ? u[std::size_t(r) * ld_u4 + c4] : f4_zero();
    }
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int i = 0; i < K - 1; ++i)
        g[n][kTile + i] =
            r_begin + i < R ? set.dy[n][std::size_t(r_begin + i) * C4 + c4] : f4_zero();
    if (SILU) {
      int ts = tb;
#pragma unroll
      for (int i = 0; i < K - 1; ++i) {
        if (r_begin + i < R) g[0][kTile + i] = silu_grad_row(g[0][kTile + i], kTile + i, ts);
        ts = ts + 1 == T ? 0 : ts + 1;
      }
    }
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
    for (int i = 0; i < kXKeep; ++i) x[i] = x[kTile + i];  // slide: the previous tile's last rows
#pragma unroll
    for (int i = 0; i < K - 1; ++i) {
#pragma unroll
      for (int n = 0; n < N; ++n) g[n][i] = g[n][kTile + i];
    }
    // The kTile new rows: u rows r0 .. r0 + kTile − 1 (SILU: + K − 1), dy_n rows r0 + K − 1 ..
    // r0 + kTile + K − 2.
#pragma unroll
    for (int i = kXKeep; i < kXRows; ++i) {
      const int r = r0 - (K - 1) + i;
      x[i] = r < R && t0 + i - (K - 1) >= 0 ? u[std::size_t(r) * ld_u4 + c4] : f4_zero();
    }
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int i = K - 1; i < kTile + K - 1; ++i)
        g[n][i] = r0 + i < R ? set.dy[n][std::size_t(r0 + i) * C4 + c4] : f4_zero();
    if (SILU) {
      int ts = (t0 + K - 1) % T;
#pragma unroll
      for (int i = K - 1; i < kTile + K - 1; ++i) {
        if (r0 + i < R) g[0][i] = silu_grad_row(g[0][i], i, ts);
        ts = ts + 1 == T ? 0 : ts + 1;
      }
    }
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
      float4* out = du + std::size_t(r0 + i) * ld_du4 + c4;
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
        store_bf16x4(du16 + 4 * (std::size_t(r0 + i) * ld_du4 + c4), sum.x, sum.y, sum.z, sum.w);
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

}  // namespace

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
    conv_forward_vec4_kernel<4, true, N>
        <<<grid, threads, 0, stream>>>(u4, set, R, T, C / 4, *rope, C / 4, C / 4);
  else
    conv_forward_vec4_kernel<4, false, N>
        <<<grid, threads, 0, stream>>>(u4, set, R, T, C / 4, ConvRope{}, C / 4, C / 4);
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
    conv_backward_vec4_kernel<4, true, N><<<grid, block, 0, stream>>>(
        u4, set, R, T, C / 4, du4, accumulate, du16, r, C / 4, C / 4, nullptr);
  else
    conv_backward_vec4_kernel<4, false, N><<<grid, block, 0, stream>>>(
        u4, set, R, T, C / 4, du4, accumulate, du16, r, C / 4, C / 4, nullptr);
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
    launch_rows_vec4(D, [&](auto nv) {
      constexpr int NV = decltype(nv)::value;
      conv_add_rms_forward_vec4_kernel<4, NV>
          <<<grid, 32 * NV, 0, stream>>>(u4, conv_w, conv_bias, T, H4, w4, R, eps, S4, Y4, Y16);
    });
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

namespace {
void check_mamba2_conv(const char* fn, int B, int T, int C, int K, int ld_zx) {
  check_conv_shape(fn, B, T, C, K);
  require(K == 4 && C % 4 == 0 && ld_zx % 4 == 0 && ld_zx >= C, fn,
          "needs d_conv 4 and C, ld_zx multiples of 4 with ld_zx >= C (got d_conv " +
              std::to_string(K) + ", C " + std::to_string(C) + ", ld_zx " + std::to_string(ld_zx) +
              ")");
}
}  // namespace

void mamba2_conv_silu_forward(const float* u, int ld_u, const float* w, const float* bias, int B,
                              int T, int C, int K, float* xbc, CUstream_st* stream) {
  const char* fn = "mamba2_conv_silu_forward";
  check_mamba2_conv(fn, B, T, C, K, ld_u);
  require(u && w && bias && xbc, fn, "a pointer is null");
  require(aligned16({u, xbc}), fn, "u and xbc must be 16-byte aligned");
  const int R = B * T;
  const int tiles = (R + kSiluForwardTile - 1) / kSiluForwardTile;
  const dim3 grid(
      unsigned((C / 4 + kSiluForwardColumns - 1) / kSiluForwardColumns),
      unsigned(std::max(
          1, std::min((tiles + kSiluForwardRowGroups - 1) / kSiluForwardRowGroups, 65535))));
  conv_silu_forward_vec4_kernel<4, kSiluForwardTile, kSiluForwardColumns, kSiluForwardRowGroups,
                                kSiluForwardMinBlocks>
      <<<grid, dim3(kSiluForwardColumns, kSiluForwardRowGroups), 0, stream>>>(
          reinterpret_cast<const float4*>(u), w, bias, R, T, C / 4, ld_u / 4, C / 4,
          reinterpret_cast<float4*>(xbc));
  check_launch();
}

std::size_t mamba2_conv_silu_backward_workspace(int B, int T, int C, int K) {
  return causal_conv_backward_workspace(B, T, C, K);
}

void mamba2_conv_silu_backward(const float* u, int ld_u, const float* w, const float* bias, int B,
                               int T, int C, int K, const float* dxbc, float* du,
                               std::uint16_t* du16,
                               int ld_du, float* dw, float* dbias, float* workspace,
                               CUstream_st* stream) {
  const char* fn = "mamba2_conv_silu_backward";
  check_mamba2_conv(fn, B, T, C, K, ld_u);
  require(u && w && bias && dxbc && (du || du16) && dw && dbias && workspace, fn,
          "a pointer is null");
  require(ld_du % 4 == 0 && ld_du >= C, fn, "ld_du must be a multiple of 4 and >= C");
  require(aligned16({u, dxbc, du}) && aligned8(du16), fn,
          "u, dxbc, du must be 16-byte aligned and du16 8-byte aligned");
  const int R = B * T;
  // dxbc ⊙ silu′(conv(u) + bias) as the rows are loaded (the pre-activation recomputed from u, not
  // kept), then du (or its bf16 copy) into its columns of the caller's [R, ld_du] rows, and the
  // weight sums.
  const ConvBackwardSet<1> set{{w}, {reinterpret_cast<const float4*>(dxbc)}, {workspace}};
  const dim3 grid(unsigned((C / 4 + kSiluColumns - 1) / kSiluColumns), unsigned(chunks(R)));
  conv_backward_vec4_kernel<4, false, 1, true, kSiluTile, kSiluColumns, kSiluMinBlocks>
      <<<grid, dim3(kSiluColumns, kConvRowGroups), 0, stream>>>(
          reinterpret_cast<const float4*>(u), set, R, T, C / 4, reinterpret_cast<float4*>(du),
          false, du16, ConvRope{}, ld_u / 4, ld_du / 4, bias);
  check_launch();
  conv_weight_finish(workspace, R, C, K, dw, dbias, stream);
}

}  // namespace tttlab::kernels
