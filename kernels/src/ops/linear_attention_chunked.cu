// Causal linear attention in the chunk form on the tensor cores, bf16 operands and fp32
// accumulation, forward and backward (see "Chunked linear attention" in tttlab/kernels/attention.hpp).
//
// With chunks of C = 64 tokens and S_c = Σ_{chunks before c} K_c'ᵀ V_c' ([d, d], row = key dim):
//   O_c  = Q_c S_c + tril(Q_c K_cᵀ) V_c
//   dQ_c = dO_c S_cᵀ + tril(dO_c V_cᵀ) K_c
//   dK_c = V_c G_cᵀ + tril(dO_c V_cᵀ)ᵀ Q_c,   dV_c = K_c G_c + tril(Q_c K_cᵀ)ᵀ dO_c
// with G_c = Σ_{chunks after c} Q_c'ᵀ dO_c' (docs/MATH.md §8.6, "In chunks"). Three kinds of
// kernel:
//   fused   the forward at D = 64, 128: one block per (head, 32 value columns) walks the chunks in
//           order with its slice of S in fp32 accumulators and writes O chunk by chunk (the
//           minimum traffic: Q, K, V read and O written once, no state in memory);
//   state   one block per (head, 32 value columns) walks the chunks in order (S) or in reverse (G),
//           the running sum in fp32 accumulators, and writes each chunk's prefix rounded to bf16;
//   chunk   one block per (chunk, head), fully parallel: the forward's O (D = 32), or the
//           backward's dQ, dK and dV, from the chunk's tiles and its prefix states.
// The prefix is rounded to bf16 because it is an mma operand of the chunk kernels, which a bf16
// mma needs; the running sum itself is never rounded, so the rounding does not accumulate along
// the sequence (relative 2⁻⁹ per element of each S_c, as for every bf16 input).
//
// Every product is mma.sync m16n8k16 with ldmatrix operands. A warp owns 16 rows of its product; a
// C-layout accumulator rounded to bf16 is the A fragment of the next product (the masked scores
// never touch shared memory), as in flash_attention.cu, whose fragment helpers are repeated here.
// Shared-memory tiles are row-major bf16, row stride W + 8 (no ldmatrix bank conflicts, 16-byte
// aligned rows for cp.async). Rows past T are zero-filled, so they add nothing anywhere and are
// never stored. No atomics: the results are the same bit for bit from run to run.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/cuda_check.hpp"
#include "common/device_ranges.hpp"
#include "ops/bf16_tiles.cuh"
#include "ops/chunk_mma.cuh"
#include "ttt/ttt_mma.cuh"
#include "tttlab/kernels/attention.hpp"

namespace tttlab::kernels {
namespace {

using detail::cp_async_commit;
using detail::cp_async_wait;
using detail::mma_bf16;
using detail::pack_bf16;
using namespace detail::bf16_tiles;
using namespace detail::chunk_mma;

constexpr int kChunk = 64;      // C
constexpr int kThreads = 128;   // chunk kernels: 4 warps, 16 rows of the chunk each
constexpr int kStateCols = 32;  // value columns of the state one state block owns
// cp.async stages of the state kernel: its blocks are few and walk the chunks one after another, so
// it is bound by the latency of its loads, which three chunks in flight hide.
constexpr int kStages = 4;

struct LinParams {
  const std::uint16_t *Q, *K, *V, *dO;
  std::uint16_t* O;
  const std::uint16_t *S, *G;  // [B·H, NC, d, d] bf16: S_c and G_c, row = key (query) dim
  float *dQ, *dK, *dV;
  int H, T, NC;
};

// The causal mask of a warp's 16 × 64 score fragment inside one chunk: rows 16·warp + (g, g + 8) of
// the chunk. LOWER: keep column ≤ row (Q Kᵀ, dO Vᵀ as rows t); else keep column ≥ row (the
// transposed products K Qᵀ, V dOᵀ as rows s).
template <bool LOWER>
__device__ __forceinline__ void mask_causal(float (&x)[kChunk / 8][4], int warp, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int u = 0; u < kChunk / 8; ++u)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = 8 * u + 2 * t + (e & 1), row = 16 * warp + g + 8 * (e >> 1);
      if (LOWER ? col > row : col < row) x[u][e] = 0.f;
    }
}

// ---- state kernel ---------------------------------------------------------------------------------
// Block (column block cb, head bh, pass z) of D/16 warps: warp w owns rows 16w .. 16w + 15 (key dims)
// and the value columns 32·cb .. 32·cb + 31 of the state. Pass 0 (S: X, Y = K, V) walks the chunks
// in order, pass 1 (G: X, Y = Q, dO) in reverse; the backward launches both passes at once (they are
// independent, and each alone has few blocks). Chunk by chunk a block first writes the state it has,
// the sum over the chunks already walked, as bf16 to Out[bh][c], then adds Xᵀ Y of the chunk. The
// next chunks' tiles load (cp.async, kStages − 1 ahead) while this one is used.
struct StatePass {
  const std::uint16_t *X, *Y;
  std::uint16_t* Out;
};

template <int D>
__global__ void __launch_bounds__(2 * D)
    state_kernel(StatePass fwd, StatePass rev, int H, int T, int NC) {
  constexpr int NT = 2 * D, LX = D + 8, LY = kStateCols + 8, NN = kStateCols / 8;
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* Xs = smem;                        // [kStages][kChunk][LX]
  std::uint16_t* Ys = Xs + kStages * kChunk * LX;  // [kStages][kChunk][LY]
  const bool reverse = blockIdx.z == 1;
  const std::uint16_t* X = reverse ? rev.X : fwd.X;
  const std::uint16_t* Y = reverse ? rev.Y : fwd.Y;
  std::uint16_t* Out = reverse ? rev.Out : fwd.Out;
  const int cb = int(blockIdx.x), bh = int(blockIdx.y), n = bh / H, h = bh % H;
  const long ld = long(H) * D;
  const long base = long(n) * T * ld + long(h) * D;
  const int v0 = cb * kStateCols;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int m0 = 16 * warp;
  auto chunk_of = [&](int i) { return reverse ? NC - 1 - i : i; };
  auto load = [&](int i, int b) {
    const int c0 = chunk_of(i) * kChunk;
    load_rows<kChunk, D, NT>(Xs + b * kChunk * LX, X + base, c0, T, ld);
    load_rows<kChunk, kStateCols, NT>(Ys + b * kChunk * LY, Y + base + v0, c0, T, ld);
  };
  // The last chunk walked adds to no state that is written: its tiles are never loaded. One cp.async
  // group per chunk (empty past the end), kStages − 1 chunks ahead.
  const int walked = NC - 1;
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < walked) load(i, i);
    cp_async_commit();
  }
  float acc[NN][4];
  zero(acc);
  for (int i = 0; i < NC; ++i) {
    const int b = i % kStages;
    std::uint16_t* out = Out + (long(bh) * NC + chunk_of(i)) * D * D + v0;
#pragma unroll
    for (int u = 0; u < NN; ++u)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        *reinterpret_cast<std::uint32_t*>(out + (m0 + g + 8 * r) * D + 8 * u + 2 * t) =
            pack_bf16(acc[u][2 * r], acc[u][2 * r + 1]);
    if (i == walked) break;
    cp_async_wait<kStages - 2>();  // chunk i's group has landed
    __syncthreads();               // and every warp is done with the buffer loaded next
    if (i + kStages - 1 < walked) load(i + kStages - 1, (i + kStages - 1) % kStages);
    cp_async_commit();
    mma_atb<LX, LY, kChunk / 16, NN>(acc, Xs + b * kChunk * LX, m0, Ys + b * kChunk * LY, lane);
  }
  cp_async_wait<0>();
}

// ---- chunk kernels --------------------------------------------------------------------------------
template <int D>
constexpr std::size_t fwd_smem_bytes() {
  return std::size_t(3 * kChunk + D) * (D + 8) * sizeof(std::uint16_t);
}
template <int D>
constexpr std::size_t bwd_smem_bytes() {
  return std::size_t(4 * kChunk + 2 * D) * (D + 8) * sizeof(std::uint16_t);
}

// O_c = Q_c S_c + tril(Q_c K_cᵀ) V_c; warp w owns the chunk's rows 16w .. 16w + 15, which see the
// chunk's keys 0 .. 16w + 15 (16-blocks 0 .. w).
template <int D>
__global__ void __launch_bounds__(kThreads) forward_chunk_kernel(LinParams p) {
  constexpr int LD = D + 8, KS = D / 16, ND = D / 8;
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* Qs = smem;
  std::uint16_t* Ks = Qs + kChunk * LD;
  std::uint16_t* Vs = Ks + kChunk * LD;
  std::uint16_t* Ss = Vs + kChunk * LD;  // [D][LD]
  const int c = int(blockIdx.x), bh = int(blockIdx.y), n = bh / p.H, h = bh % p.H;
  const long ld = long(p.H) * D;
  const long base = long(n) * p.T * ld + long(h) * D;
  const int c0 = c * kChunk;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  load_rows<kChunk, D, kThreads>(Qs, p.Q + base, c0, p.T, ld);
  load_rows<kChunk, D, kThreads>(Ks, p.K + base, c0, p.T, ld);
  load_rows<kChunk, D, kThreads>(Vs, p.V + base, c0, p.T, ld);
  if (c > 0) load_rows<D, D, kThreads>(Ss, p.S + (long(bh) * p.NC + c) * D * D, 0, D, D);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  float o[ND][4], s[kChunk / 8][4];
  zero(o);
  zero(s);
  if (c > 0) mma_ab<LD, KS, ND>(o, Qs, 16 * warp, Ss, lane);
  mma_abt<LD, KS, kChunk / 8>(s, Qs, 16 * warp, Ks, lane, 0, warp);
  mask_causal<true>(s, warp, lane);
  mma_p_y<LD, ND>(o, s, Vs, lane, 0, warp);

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = c0 + 16 * warp + g + 8 * r;
    if (row >= p.T) continue;
    std::uint16_t* out = p.O + base + long(row) * ld;
#pragma unroll
    for (int u = 0; u < ND; ++u)
      *reinterpret_cast<std::uint32_t*>(out + 8 * u + 2 * t) =
          pack_bf16(o[u][2 * r], o[u][2 * r + 1]);
  }
}

// ---- fused forward --------------------------------------------------------------------------------
// One block per (32 value columns cb, head bh) walks the head's chunks in order with its slice of the
// running state S[:, 32·cb ..] in fp32 accumulators, so no prefix state leaves the chip and K, Q are
// read once per column block (the sibling block of the same head reads the same tiles at about the
// same time, from L2). Per chunk: O_c[:, cols] = Q_c S_c[:, cols] + tril(Q_c K_cᵀ) V_c[:, cols],
// written at once; then S += K_cᵀ V_c[:, cols]. The state enters Q_c S_c as a bf16 copy in shared
// memory (double-buffered: the copy for chunk c + 1 is written while other warps may still read
// chunk c's); the fp32 sum is never rounded. Warp w owns the chunk's rows 16w .. 16w + 15 for O and
// the state's key rows 16·(MT·w + m), m < MT = D / 64, for the update. The next chunk's tiles load
// (cp.async) while this one is used.
constexpr int kFusedStages = 2;

template <int D>
constexpr std::size_t fused_smem_bytes() {
  return (std::size_t(kFusedStages) * kChunk * (2 * (D + 8) + kStateCols + 8) +
          2 * std::size_t(D) * (kStateCols + 8)) *
         sizeof(std::uint16_t);
}

template <int D>
__global__ void __launch_bounds__(kThreads) forward_fused_kernel(LinParams p) {
  static_assert(D % 64 == 0, "the fused forward needs D / 16 to be a multiple of the 4 warps");
  constexpr int LD = D + 8, LV = kStateCols + 8, KS = D / 16, NV = kStateCols / 8, MT = D / 64;
  constexpr int kTile = kChunk * (2 * LD + LV);  // elements of one stage: Q, K, V[:, cols]
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* Ss = smem + kFusedStages * kTile;  // [2][D][LV]: S_c[:, cols] as bf16
  const int cb = int(blockIdx.x), bh = int(blockIdx.y), n = bh / p.H, h = bh % p.H;
  const long ld = long(p.H) * D;
  const long base = long(n) * p.T * ld + long(h) * D;
  const int v0 = cb * kStateCols;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  auto load = [&](int c, int b) {
    std::uint16_t* st = smem + b * kTile;
    load_rows<kChunk, D, kThreads>(st, p.Q + base, c * kChunk, p.T, ld);
    load_rows<kChunk, D, kThreads>(st + kChunk * LD, p.K + base, c * kChunk, p.T, ld);
    load_rows<kChunk, kStateCols, kThreads>(st + 2 * kChunk * LD, p.V + base + v0, c * kChunk, p.T,
                                            ld);
  };
#pragma unroll
  for (int i = 0; i < kFusedStages - 1; ++i) {
    if (i < p.NC) load(i, i);
    cp_async_commit();
  }
  float st[MT][NV][4];  // the running state, rows 16·(MT·warp + m) .., columns v0 ..
#pragma unroll
  for (int m = 0; m < MT; ++m) zero(st[m]);
  for (int c = 0; c < p.NC; ++c) {
    const int b = c % kFusedStages;
    cp_async_wait<kFusedStages - 2>();  // chunk c's group has landed
    __syncthreads();  // every warp is done with chunk c − 1 (its buffer, its state copy) and
                      // chunk c's state copy is written
    if (c + kFusedStages - 1 < p.NC)
      load(c + kFusedStages - 1, (c + kFusedStages - 1) % kFusedStages);
    cp_async_commit();
    const std::uint16_t* Qs = smem + b * kTile;
    const std::uint16_t* Ks = Qs + kChunk * LD;
    const std::uint16_t* Vs = Ks + kChunk * LD;
    float o[NV][4], s[kChunk / 8][4];
    zero(o);
    zero(s);
    if (c > 0) mma_ab_strided<LD, LV, KS, NV>(o, Qs, 16 * warp, Ss + (c % 2) * D * LV, lane);
    mma_abt<LD, KS, kChunk / 8>(s, Qs, 16 * warp, Ks, lane, 0, warp);
    mask_causal<true>(s, warp, lane);
    mma_p_y<LV, NV>(o, s, Vs, lane, 0, warp);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = c * kChunk + 16 * warp + g + 8 * r;
      if (row >= p.T) continue;
      std::uint16_t* out = p.O + base + long(row) * ld + v0;
#pragma unroll
      for (int u = 0; u < NV; ++u)
        *reinterpret_cast<std::uint32_t*>(out + 8 * u + 2 * t) =
            pack_bf16(o[u][2 * r], o[u][2 * r + 1]);
    }
    if (c + 1 == p.NC) break;
    std::uint16_t* next = Ss + ((c + 1) % 2) * D * LV;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const int m0 = 16 * (MT * warp + m);
      mma_atb<LD, LV, kChunk / 16, NV>(st[m], Ks, m0, Vs, lane);
#pragma unroll
      for (int u = 0; u < NV; ++u)
#pragma unroll
        for (int r = 0; r < 2; ++r)
          *reinterpret_cast<std::uint32_t*>(next + (m0 + g + 8 * r) * LV + 8 * u + 2 * t) =
              pack_bf16(st[m][u][2 * r], st[m][u][2 * r + 1]);
    }
  }
  cp_async_wait<0>();
}

// dQ_c, dK_c, dV_c of one chunk, one after the other (one accumulator live at a time). Warp w owns
// the chunk's rows 16w .. 16w + 15: as queries (dQ: keys 16-blocks 0 .. w) and as keys (dK, dV:
// queries 16-blocks w .. 3).
template <int D>
__global__ void __launch_bounds__(kThreads) backward_chunk_kernel(LinParams p) {
  constexpr int LD = D + 8, KS = D / 16, ND = D / 8, NS = kChunk / 8, last = kChunk / 16 - 1;
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* Qs = smem;
  std::uint16_t* Ks = Qs + kChunk * LD;
  std::uint16_t* Vs = Ks + kChunk * LD;
  std::uint16_t* dOs = Vs + kChunk * LD;
  std::uint16_t* Ss = dOs + kChunk * LD;  // [D][LD]
  std::uint16_t* Gs = Ss + D * LD;        // [D][LD]
  const int c = int(blockIdx.x), bh = int(blockIdx.y), n = bh / p.H, h = bh % p.H;
  const long ld = long(p.H) * D;
  const long base = long(n) * p.T * ld + long(h) * D;
  const int c0 = c * kChunk;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool first = c == 0, last_chunk = c == p.NC - 1;
  load_rows<kChunk, D, kThreads>(Qs, p.Q + base, c0, p.T, ld);
  load_rows<kChunk, D, kThreads>(Ks, p.K + base, c0, p.T, ld);
  load_rows<kChunk, D, kThreads>(Vs, p.V + base, c0, p.T, ld);
  load_rows<kChunk, D, kThreads>(dOs, p.dO + base, c0, p.T, ld);
  const long soff = (long(bh) * p.NC + c) * D * D;
  if (!first) load_rows<D, D, kThreads>(Ss, p.S + soff, 0, D, D);
  if (!last_chunk) load_rows<D, D, kThreads>(Gs, p.G + soff, 0, D, D);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int row0 = c0 + 16 * warp;
  float acc[ND][4], x[NS][4];
  // dQ = dO Sᵀ + tril(dO Vᵀ) K
  zero(acc);
  zero(x);
  if (!first) mma_abt<LD, KS, ND>(acc, dOs, 16 * warp, Ss, lane);
  mma_abt<LD, KS, NS>(x, dOs, 16 * warp, Vs, lane, 0, warp);
  mask_causal<true>(x, warp, lane);
  mma_p_y<LD, ND>(acc, x, Ks, lane, 0, warp);
  store_rows(p.dQ + base, acc, row0, p.T, ld, lane);
  // dK = V Gᵀ + (V dOᵀ masked to queries ≥ key) Q
  zero(acc);
  zero(x);
  if (!last_chunk) mma_abt<LD, KS, ND>(acc, Vs, 16 * warp, Gs, lane);
  mma_abt<LD, KS, NS>(x, Vs, 16 * warp, dOs, lane, warp, last);
  mask_causal<false>(x, warp, lane);
  mma_p_y<LD, ND>(acc, x, Qs, lane, warp, last);
  store_rows(p.dK + base, acc, row0, p.T, ld, lane);
  // dV = K G + (K Qᵀ masked to queries ≥ key) dO
  zero(acc);
  zero(x);
  if (!last_chunk) mma_ab<LD, KS, ND>(acc, Ks, 16 * warp, Gs, lane);
  mma_abt<LD, KS, NS>(x, Ks, 16 * warp, Qs, lane, warp, last);
  mask_causal<false>(x, warp, lane);
  mma_p_y<LD, ND>(acc, x, dOs, lane, warp, last);
  store_rows(p.dV + base, acc, row0, p.T, ld, lane);
}

// ---- host side ------------------------------------------------------------------------------------

void require(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument(msg);
}

void check_dims(const char* fn, const AttentionDims& d) {
  detail::check_chunked_dims(fn, d.batch, d.heads, d.seq_len, d.head_dim,
                             chunked_linear_attention_supported(d), "32, 64 or 128");
}

using detail::check_device_ranges;
using Range = detail::DeviceRange;

std::size_t elems(const AttentionDims& d) {
  return std::size_t(d.batch) * d.seq_len * d.heads * d.head_dim;
}
int chunks(const AttentionDims& d) { return (d.seq_len + kChunk - 1) / kChunk; }
std::size_t state_bytes(const AttentionDims& d) {
  return std::size_t(d.batch) * d.heads * chunks(d) * d.head_dim * d.head_dim *
         sizeof(std::uint16_t);
}

void check_workspace(const char* fn, std::size_t have, std::size_t need, const char* sizer) {
  require(have >= need, std::string(fn) + ": workspace has " + std::to_string(have) +
                            " bytes, needs " + std::to_string(need) + " (" + sizer + ")");
}

template <class Kernel>
void launch(Kernel kernel, dim3 grid, std::size_t smem, cudaStream_t st, const LinParams& p) {
  TTTLAB_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<grid, kThreads, smem, st>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

// The forward's path: the fused kernel (one pass, no prefix states in memory) wherever its 4 warps
// split the state's key rows into 16-row tiles (D = 64, 128); at D = 32 the state kernel and the
// chunk kernel. The fused kernel's blocks walk all the chunks of a head, so it has B·H·D/32 blocks
// at any T; the two-pass path has more blocks at short T, but writes and reads every prefix state.
bool use_fused_forward(int d) { return d % 64 == 0; }

// The S pass alone (passes = 1) or the S and G passes together (passes = 2).
template <int D>
void launch_state(const StatePass& fwd, const StatePass& rev, int passes, const LinParams& p,
                  int bh, cudaStream_t st) {
  const std::size_t smem =
      std::size_t(kStages) * kChunk * (D + 8 + kStateCols + 8) * sizeof(std::uint16_t);
  TTTLAB_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(state_kernel<D>),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  state_kernel<D><<<dim3(D / kStateCols, bh, passes), 2 * D, smem, st>>>(fwd, rev, p.H, p.T, p.NC);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

template <int D>
void forward_launch(LinParams p, std::uint16_t* S, int bh, cudaStream_t st) {
  if constexpr (D % 64 == 0) {
    if (use_fused_forward(D)) {
      launch(forward_fused_kernel<D>, dim3(D / kStateCols, bh), fused_smem_bytes<D>(), st, p);
      return;
    }
  }
  launch_state<D>(StatePass{p.K, p.V, S}, StatePass{}, 1, p, bh, st);
  p.S = S;
  launch(forward_chunk_kernel<D>, dim3(p.NC, bh), fwd_smem_bytes<D>(), st, p);
}

template <int D>
void backward_launch(LinParams p, std::uint16_t* S, std::uint16_t* G, int bh, cudaStream_t st) {
  launch_state<D>(StatePass{p.K, p.V, S}, StatePass{p.Q, p.dO, G}, 2, p, bh, st);
  p.S = S;
  p.G = G;
  launch(backward_chunk_kernel<D>, dim3(p.NC, bh), bwd_smem_bytes<D>(), st, p);
}

LinParams make_params(const AttentionDims& d) {
  LinParams p{};
  p.H = d.heads;
  p.T = d.seq_len;
  p.NC = chunks(d);
  return p;
}

}  // namespace

bool chunked_linear_attention_supported(const AttentionDims& d) {
  return d.head_dim == 32 || d.head_dim == 64 || d.head_dim == 128;
}

std::size_t chunked_linear_attention_forward_workspace_bytes(const AttentionDims& dims) {
  check_dims("chunked_linear_attention_forward_workspace_bytes", dims);
  return state_bytes(dims);
}

std::size_t chunked_linear_attention_backward_workspace_bytes(const AttentionDims& dims) {
  check_dims("chunked_linear_attention_backward_workspace_bytes", dims);
  return 2 * state_bytes(dims);
}

void chunked_linear_attention_forward(const ChunkedLinearAttentionForwardArgs& a) {
  const char* fn = "chunked_linear_attention_forward";
  check_dims(fn, a.dims);
  const std::size_t nb = elems(a.dims) * 2, sb = state_bytes(a.dims);
  check_workspace(fn, a.workspace_bytes, sb, "chunked_linear_attention_forward_workspace_bytes");
  const Range ins[] = {{a.Q, nb, "Q"}, {a.K, nb, "K"}, {a.V, nb, "V"}};
  const Range outs[] = {{a.O, nb, "O"}, {a.workspace, sb, "workspace"}};
  check_device_ranges(fn, ins, 3, outs, 2);
  LinParams p = make_params(a.dims);
  p.Q = a.Q;
  p.K = a.K;
  p.V = a.V;
  p.O = a.O;
  auto* S = static_cast<std::uint16_t*>(a.workspace);
  const int bh = a.dims.batch * a.dims.heads;
  switch (a.dims.head_dim) {
    case 32: forward_launch<32>(p, S, bh, a.stream); break;
    case 64: forward_launch<64>(p, S, bh, a.stream); break;
    default: forward_launch<128>(p, S, bh, a.stream); break;
  }
}

void chunked_linear_attention_backward(const ChunkedLinearAttentionBackwardArgs& a) {
  const char* fn = "chunked_linear_attention_backward";
  check_dims(fn, a.dims);
  const std::size_t nb = elems(a.dims) * 2, fb = elems(a.dims) * 4, sb = state_bytes(a.dims);
  check_workspace(fn, a.workspace_bytes, 2 * sb,
                  "chunked_linear_attention_backward_workspace_bytes");
  const Range ins[] = {{a.Q, nb, "Q"}, {a.K, nb, "K"}, {a.V, nb, "V"}, {a.dO, nb, "dO"}};
  const Range outs[] = {
      {a.dQ, fb, "dQ"}, {a.dK, fb, "dK"}, {a.dV, fb, "dV"}, {a.workspace, 2 * sb, "workspace"}};
  check_device_ranges(fn, ins, 4, outs, 4);
  LinParams p = make_params(a.dims);
  p.Q = a.Q;
  p.K = a.K;
  p.V = a.V;
  p.dO = a.dO;
  p.dQ = a.dQ;
  p.dK = a.dK;
  p.dV = a.dV;
  auto* S = static_cast<std::uint16_t*>(a.workspace);
  std::uint16_t* G = S + sb / sizeof(std::uint16_t);
  const int bh = a.dims.batch * a.dims.heads;
  switch (a.dims.head_dim) {
    case 32: backward_launch<32>(p, S, G, bh, a.stream); break;
    case 64: backward_launch<64>(p, S, G, bh, a.stream); break;
    default: backward_launch<128>(p, S, G, bh, a.stream); break;
  }
}

}  // namespace tttlab::kernels
