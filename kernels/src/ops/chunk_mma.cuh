// Warp-level products over the bf16 tiles of bf16_tiles.cuh for the chunked kernels of the matrix
// fast-weight rules (linear_attention_chunked.cu, delta_rule_chunked.cu): a warp owns 16 rows of a
// product and keeps it as mma.sync m16n8k16 C fragments (fp32), and a C fragment rounded to bf16 is
// the A fragment of the next product, so a masked score tile never touches shared memory. Chunks
// are 64 tokens. Private to kernels/src.
#pragma once

#include <cstdint>

#include "ops/bf16_tiles.cuh"
#include "ttt/ttt_mma.cuh"

namespace tttlab::kernels::detail::chunk_mma {

using detail::mma_bf16;
using detail::pack_bf16;
using detail::unpack_bf16;
using namespace detail::bf16_tiles;

constexpr int kChunk64 = 64;  // tokens of a chunk: the k extent of mma_p_y's score fragment

// acc[16 × 8·NN] += A[rows arow0.., 16·KS] · Yᵀ; only the 16-column blocks np ∈ [lo, hi] (the rest
// of acc is left as it is).
template <int LD, int KS, int NN>
__device__ __forceinline__ void mma_abt(float (&acc)[NN][4], const std::uint16_t* A, int arow0,
                                        const std::uint16_t* Y, int lane, int lo = 0,
                                        int hi = NN / 2 - 1) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    std::uint32_t a[4];
    load_a<LD>(a, A, arow0, ks, lane);
#pragma unroll
    for (int np = 0; np < NN / 2; ++np) {
      if (np < lo || np > hi) continue;
      std::uint32_t b[4];
      load_b_rows<LD>(b, Y, np, ks, lane);
      mma_bf16(acc[2 * np], a, b[0], b[1]);
      mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}


// acc[16 × 8·NN] += P · Y, P [16 × 64] a C-layout fragment rounded to bf16 here, Y row-major [64, 8·NN];
// only the 16-wide k-steps kk ∈ [lo, hi] (P is zero elsewhere).
template <int LD, int NN>
__device__ __forceinline__ void mma_p_y(float (&acc)[NN][4], const float (&p)[kChunk64 / 8][4],
                                        const std::uint16_t* Y, int lane, int lo, int hi) {
#pragma unroll
  for (int kk = 0; kk < kChunk64 / 16; ++kk) {
    if (kk < lo || kk > hi) continue;
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

template <int N>
__device__ __forceinline__ void zero(float (&x)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) x[i][0] = x[i][1] = x[i][2] = x[i][3] = 0.f;
}

// acc[16 × 8·NN] += A[rows arow0.., 16·KS] · Y, A row stride LA, Y row-major [16·KS, 8·NN] with row
// stride LY.
template <int LA, int LY, int KS, int NN>
__device__ __forceinline__ void mma_ab_strided(float (&acc)[NN][4], const std::uint16_t* A,
                                               int arow0, const std::uint16_t* Y, int lane) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    std::uint32_t a[4];
    load_a<LA>(a, A, arow0, ks, lane);
#pragma unroll
    for (int np = 0; np < NN / 2; ++np) {
      std::uint32_t b[4];
      load_b_cols<LY>(b, Y, np, ks, lane);
      mma_bf16(acc[2 * np], a, b[0], b[1]);
      mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// acc[16 × 8·NN] += A[rows arow0.., 16·KS] · Y, Y row-major [16·KS, 8·NN], both with row stride LD.
template <int LD, int KS, int NN>
__device__ __forceinline__ void mma_ab(float (&acc)[NN][4], const std::uint16_t* A, int arow0,
                                       const std::uint16_t* Y, int lane) {
  mma_ab_strided<LD, LD, KS, NN>(acc, A, arow0, Y, lane);
}

// acc[16 × 8·NN] += Xᵀ[rows m0.., 16·KS] · Y: X row-major [16·KS, ≥ m0 + 16] (row stride LX), read
// transposed by ldmatrix; Y row-major [16·KS, 8·NN] (row stride LY).
template <int LX, int LY, int KS, int NN>
__device__ __forceinline__ void mma_atb(float (&acc)[NN][4], const std::uint16_t* X, int m0,
                                        const std::uint16_t* Y, int lane) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    std::uint32_t a[4];
    load_a_trans<LX>(a, X, m0, ks, lane);
#pragma unroll
    for (int np = 0; np < NN / 2; ++np) {
      std::uint32_t b[4];
      load_b_cols<LY>(b, Y, np, ks, lane);
      mma_bf16(acc[2 * np], a, b[0], b[1]);
      mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// The same with row k of X (k along the contraction, 0 .. 16·KS − 1) scaled by w(k): the A fragments
// are widened, scaled and rounded back to bf16, so a diagonal scaling of X needs no copy of it.
template <int LX, int LY, int KS, int NN, class W>
__device__ __forceinline__ void mma_atb_scaled(float (&acc)[NN][4], const std::uint16_t* X, int m0,
                                               const std::uint16_t* Y, int lane, W w) {
  const int t = lane % 4;
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    std::uint32_t a[4];
    load_a_trans<LX>(a, X, m0, ks, lane);
    // a0, a1: k = 16·ks + 2t, +1 (rows m0 + g, m0 + g + 8); a2, a3: the same k + 8.
    const int k0 = 16 * ks + 2 * t;
    const float w0 = w(k0), w1 = w(k0 + 1), w8 = w(k0 + 8), w9 = w(k0 + 9);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float2 v = unpack_bf16(a[r]);
      a[r] = r < 2 ? pack_bf16(v.x * w0, v.y * w1) : pack_bf16(v.x * w8, v.y * w9);
    }
#pragma unroll
    for (int np = 0; np < NN / 2; ++np) {
      std::uint32_t b[4];
      load_b_cols<LY>(b, Y, np, ks, lane);
      mma_bf16(acc[2 * np], a, b[0], b[1]);
      mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// Rows 16·warp + (g, g + 8) of a [64, ·] fp32 result (a warp's 16-row C fragments) to global memory (rows < T).
template <int ND>
__device__ __forceinline__ void store_rows(float* G, const float (&x)[ND][4], int row0, int T,
                                           long ld, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + g + 8 * r;
    if (row >= T) continue;
    float* dst = G + long(row) * ld;
#pragma unroll
    for (int u = 0; u < ND; ++u)
      *reinterpret_cast<float2*>(dst + 8 * u + 2 * t) = make_float2(x[u][2 * r], x[u][2 * r + 1]);
  }
}

}  // namespace tttlab::kernels::detail::chunk_mma
