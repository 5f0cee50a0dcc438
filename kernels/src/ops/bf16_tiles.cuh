// bf16 tiles in shared memory for the tensor-core attention kernels (flash_attention.cu,
// linear_attention_chunked.cu): rows copied in with cp.async, and the ldmatrix reads that give
// mma.sync m16n8k16 (ttt/ttt_mma.cuh, mma_bf16) its A and B fragments. A tile is row-major with a row
// stride LD of its width plus 8 elements, which keeps the eight rows one ldmatrix reads in eight
// different banks. Private to kernels/src; in a namespace of its own so that files which say `using
// namespace detail` keep their own helpers of the same names.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ttt/ttt_mma.cuh"

namespace tttlab::kernels::detail::bf16_tiles {

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// Rows r0 .. r0 + R − 1 (of T), W columns from G (row stride ld elements) into S[R][W + 8], by the NT
// threads of the block; rows ≥ T as zeros (cp.async reads nothing for them, but its address must
// still be valid: row 0's).
template <int R, int W, int NT>
__device__ __forceinline__ void load_rows(std::uint16_t* S, const std::uint16_t* G, int r0, int T,
                                          long ld) {
  constexpr int kPieces = W / 8;  // 16-byte pieces per row
  for (int idx = threadIdx.x; idx < R * kPieces; idx += NT) {
    const int r = idx / kPieces, c = (idx % kPieces) * 8;
    const bool ok = r0 + r < T;
    cp_async16(S + r * (W + 8) + c, G + long(ok ? r0 + r : 0) * ld + c, ok ? 16 : 0);
  }
}

// The A fragment (16 × 16, k-step ks) of rows row0 .. row0 + 15 of a row-major tile.
template <int LD>
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const std::uint16_t* S, int row0,
                                       int ks, int lane) {
  const int r = row0 + (lane & 7) + ((lane >> 3) & 1) * 8, c = ks * 16 + (lane >> 4) * 8;
  mma_detail::ldsm_x4(a, smem_addr(S + r * LD + c));
}

// The A fragment of Xᵀ (rows m0.. of Xᵀ = columns m0.. of X, k-step ks = rows of X) for X row-major:
// ldmatrix .trans of the 8 × 8 blocks (k 0–7 | 8–15) × (m 0–7 | 8–15) in a0..a3's order.
template <int LD>
__device__ __forceinline__ void load_a_trans(std::uint32_t (&a)[4], const std::uint16_t* S, int m0,
                                             int ks, int lane) {
  const int r = ks * 16 + (lane & 7) + ((lane >> 4) & 1) * 8, c = m0 + ((lane >> 3) & 1) * 8;
  ldsm_x4_trans(a, smem_addr(S + r * LD + c));
}

// The B fragments of n-tiles 2np and 2np + 1 (8 columns each) at k-step ks, for a product X·Yᵀ with Y
// stored row-major (a row of Y is a column of the product): b[0], b[1] for n-tile 2np, b[2], b[3] for
// n-tile 2np + 1.
template <int LD>
__device__ __forceinline__ void load_b_rows(std::uint32_t (&b)[4], const std::uint16_t* S, int np,
                                            int ks, int lane) {
  const int r = np * 16 + (lane & 7) + ((lane >> 4) << 3), c = ks * 16 + ((lane >> 3) & 1) * 8;
  mma_detail::ldsm_x4(b, smem_addr(S + r * LD + c));
}

// The B fragments of n-tiles 2np, 2np + 1 at k-step ks for a product X·Y with Y stored row-major
// (rows = the contraction): ldmatrix .trans.
template <int LD>
__device__ __forceinline__ void load_b_cols(std::uint32_t (&b)[4], const std::uint16_t* S, int np,
                                            int ks, int lane) {
  const int r = ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, c = np * 16 + (lane >> 4) * 8;
  ldsm_x4_trans(b, smem_addr(S + r * LD + c));
}

}  // namespace tttlab::kernels::detail::bf16_tiles
