// Tensor-core helpers shared by the TTT kernels: tf32 mma.sync m16n8k8 with fp32 accumulation, the
// split "3xTF32" form (fp32-level accuracy), and block_mma: a whole thread block computing a small
// product of matrices that live in shared (or global) memory, with any strides (so transposes are
// free) and a caller-supplied store (so scaling, masking, bias, activation and accumulation happen
// as the result leaves the registers); and the m16 register-tile helpers of the TTT-Linear forward
// and fused backward. Private to kernels/src.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common/bf16.cuh"

namespace tttlab::kernels::detail {

__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// c += A·B for one 16×8×8 tile. Fragments (PTX ISA, mma.m16n8k8 .tf32), with g = lane/4, t = lane%4:
// A: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4);  B: b0 (t, g), b1 (t+4, g);
// C: c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1).
__device__ __forceinline__ void mma_tf32(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// c += A·B with fp32 operands, converted here. SPLIT: x = hi + lo with hi = tf32(x),
// lo = tf32(x − hi), and a·b ≈ a_hi·b_hi + a_hi·b_lo + a_lo·b_hi (the dropped a_lo·b_lo is ~2^-22
// relative), which recovers fp32-level accuracy at three times the tensor-core work.
template <bool SPLIT>
__device__ __forceinline__ void mma(float (&c)[4], float a0, float a1, float a2, float a3, float b0,
                                    float b1) {
  const uint32_t ah0 = to_tf32(a0), ah1 = to_tf32(a1), ah2 = to_tf32(a2), ah3 = to_tf32(a3);
  const uint32_t bh0 = to_tf32(b0), bh1 = to_tf32(b1);
  if constexpr (SPLIT) {
    const uint32_t al0 = to_tf32(a0 - __uint_as_float(ah0)), al1 = to_tf32(a1 - __uint_as_float(ah1));
    const uint32_t al2 = to_tf32(a2 - __uint_as_float(ah2)), al3 = to_tf32(a3 - __uint_as_float(ah3));
    const uint32_t bl0 = to_tf32(b0 - __uint_as_float(bh0)), bl1 = to_tf32(b1 - __uint_as_float(bh1));
    mma_tf32(c, al0, al1, al2, al3, bh0, bh1);
    mma_tf32(c, ah0, ah1, ah2, ah3, bl0, bl1);
  }
  mma_tf32(c, ah0, ah1, ah2, ah3, bh0, bh1);
}

// A matrix operand in memory: element (i, j) at p[i·rs + j·cs]. A transpose swaps rs and cs.
struct Operand {
  const float* p;
  int rs, cs;
  __device__ __forceinline__ float at(int i, int j) const { return p[i * rs + j * cs]; }
};

__device__ __forceinline__ Operand op(const float* p, int ld) { return {p, ld, 1}; }     // X
__device__ __forceinline__ Operand op_t(const float* p, int ld) { return {p, 1, ld}; }   // Xᵀ

// tf32 parts of an fp32 operand: hi = tf32(x) (round to nearest) and lo = x − hi handed to the tensor
// core as raw fp32 bits (it reads the top 19 bits: a truncation of a term already 2^-11 smaller).
// Without SPLIT the raw bits of x itself (truncation to tf32, no instruction).
template <bool SPLIT>
__device__ __forceinline__ void tf32_parts(float x, uint32_t& hi, uint32_t& lo) {
  if constexpr (SPLIT) {
    hi = to_tf32(x);
    lo = __float_as_uint(x - __uint_as_float(hi));
  } else {
    hi = __float_as_uint(x);
    lo = 0;
  }
}

namespace mma_detail {

// ldmatrix on 32-bit elements: an 8 × 8 matrix of 16-bit values is an 8 × 4 matrix of fp32 values, and
// the fragment ldmatrix gives a thread, row lane/4 and 32-bit word lane%4, is the position (g, t) that
// the tf32 mma's A and B fragments ask for. `row` is the shared-memory address of the row this lane
// provides (16-byte aligned): lanes 8q..8q+7 the rows of matrix q.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
}
__device__ __forceinline__ void ldsm_x2(uint32_t (&r)[2], uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(row));
}

// The column of element e (the C fragment's order) of n-tile u when B was read in column pairs
// (strip_product's npair): fragment column 2t + (e & 1) of the pair (u & ~1, u | 1).
__device__ __forceinline__ int pair_column(int j0, int u, int t, int e) {
  return j0 + 8 * (u & ~1) + 4 * t + 2 * (e & 1) + (u & 1);
}

// One k-step of a warp task from fp32 values: the A fragment (x0..x3, split once) times each of the
// NTW B fragments (y0[u], y1[u]), accumulated into c[u].
template <bool SPLIT, int NTW>
__device__ __forceinline__ void mma_step(float (&c)[NTW][4], float x0, float x1, float x2, float x3,
                                         const float (&y0)[NTW], const float (&y1)[NTW]) {
  uint32_t ah[4], al[4];
  tf32_parts<SPLIT>(x0, ah[0], al[0]);
  tf32_parts<SPLIT>(x1, ah[1], al[1]);
  tf32_parts<SPLIT>(x2, ah[2], al[2]);
  tf32_parts<SPLIT>(x3, ah[3], al[3]);
#pragma unroll
  for (int u = 0; u < NTW; ++u) {
    uint32_t bh0, bl0, bh1, bl1;
    tf32_parts<SPLIT>(y0[u], bh0, bl0);
    tf32_parts<SPLIT>(y1[u], bh1, bl1);
    if constexpr (SPLIT) {
      mma_tf32(c[u], al[0], al[1], al[2], al[3], bh0, bh1);
      mma_tf32(c[u], ah[0], ah[1], ah[2], ah[3], bl0, bl1);
    }
    mma_tf32(c[u], ah[0], ah[1], ah[2], ah[3], bh0, bh1);
  }
}

// Whether a product of a task may take strip_product's kpair: the fast path (`fast`), a row-major A
// and a transposed B in global memory (the TTT-MLP backward's states and carry), with one tf32
// product per term only: the 3xTF32 form, which holds each value's two parts, ran 2% slower with it
// (more registers spilled).
template <bool SPLIT, bool LDSM, int ACC>
__device__ __forceinline__ bool use_kpair(bool fast, const Operand& A, const Operand& B) {
  return !SPLIT && LDSM && ACC % 2 == 0 && fast && A.cs == 1 && B.rs == 1 && __isGlobal(B.p);
}

// One warp task of block_mma: rows i0..i0+15, NTW n-tiles from column j0, one product over k. The
// k-steps go round-robin to ACC accumulator sets, so that NTW·ACC independent mma chains are in flight.
// CHECK: zero-pad rows, columns and k beyond the matrix (partial tiles); without it every index is
// known to be inside and k is a multiple of 8·ACC.
// LDSM (only without CHECK; the caller promises A is in shared memory with 16-byte aligned rows, and
// so is B wherever it is in shared memory): a row-major A (cs = 1) is read with one ldmatrix.x4 per
// k-step instead of four scalar loads, and a B in shared memory with rs = 1 (a transposed operand)
// with one ldmatrix per two n-tiles; fewer shared-memory instructions, the same values.
// npair (only without CHECK, NTW even, B row-major: cs = 1, its rows 8-byte aligned): B is read as
// 8-byte pairs of neighbouring columns, the first for n-tile u and the second for u + 1 (u even), so
// tile u's fragment column c is column j0 + 8u + 2c and tile u + 1's is j0 + 8u + 2c + 1 (pair_column
// gives the column); half the B loads. The caller stores the result by those columns.
// kpair (only without CHECK, ACC even, A row-major in shared memory and B k-contiguous: rs = 1, both
// with 16-byte aligned rows): 16 of k at a time, A and B read as 16-byte runs of k, lane t's run
// k0 + 4t .. 4t + 3 feeding fragment slots (t, t + 4) of two k-steps: (4t, 4t + 1) and (4t + 2, 4t + 3).
// Any order of k gives the same sum as long as A and B agree, and this one needs a quarter of the B
// loads (one 16-byte load per n-tile and 16 of k instead of four 4-byte loads); A's rows are read
// with 16-byte loads instead of ldmatrix. For B in global memory (the TTT-MLP backward's transposed
// states and carry).
template <bool SPLIT, int NTW, int ACC, bool CHECK, bool LDSM = false>
__device__ __forceinline__ void strip_product(float (&c)[ACC][NTW][4], int m, int n, int k,
                                              Operand A, Operand B, int i0, int j0, int g, int t,
                                              bool npair = false, bool kpair = false) {
  const int r0 = i0 + g, r1 = r0 + 8;
  const float* a0p = A.p + r0 * A.rs;
  const float* a1p = A.p + r1 * A.rs;
  constexpr bool kLdsm = LDSM && !CHECK;
  const bool a_ldsm = kLdsm && A.cs == 1;
  const bool b_ldsm = kLdsm && B.rs == 1 && __isShared(B.p);
  uint32_t a_row = 0, b_row = 0;
  if (kLdsm) {
    const int l = threadIdx.x & 31;
    // A: matrices (rows i0.., k0), (rows i0+8.., k0), (rows i0.., k0+4), (rows i0+8.., k0+4): a0..a3.
    if (a_ldsm)
      a_row = static_cast<uint32_t>(
          __cvta_generic_to_shared(A.p + (i0 + (l & 7) + (l & 8)) * A.rs + (l >> 4) * 4));
    // B (element (k, j) at p[j·cs + k]): matrices (n-tile u, k0), (u, k0+4), (u+1, k0), (u+1, k0+4).
    if (b_ldsm)
      b_row = static_cast<uint32_t>(__cvta_generic_to_shared(
          B.p + (j0 + 8 * (l >> 4) + (l & 7)) * B.cs + ((l >> 3) & 1) * 4));
  }
  for (int kbase = 0; kbase < k; kbase += 8 * ACC) {
    if constexpr (!CHECK && ACC % 2 == 0) {
      if (kpair) {
#pragma unroll
        for (int s = 0; s < ACC; s += 2) {
          const int kr = kbase + 8 * s + 4 * t;  // this lane's run of 4
          const float4 ra = *reinterpret_cast<const float4*>(a0p + kr);
          const float4 rb = *reinterpret_cast<const float4*>(a1p + kr);
          float4 bv[NTW];
#pragma unroll
          for (int u = 0; u < NTW; ++u)
            bv[u] = *reinterpret_cast<const float4*>(B.p + (j0 + 8 * u + g) * B.cs + kr);
          float y0[NTW], y1[NTW];
#pragma unroll
          for (int u = 0; u < NTW; ++u) y0[u] = bv[u].x, y1[u] = bv[u].y;
          mma_step<SPLIT, NTW>(c[s], ra.x, rb.x, ra.y, rb.y, y0, y1);
#pragma unroll
          for (int u = 0; u < NTW; ++u) y0[u] = bv[u].z, y1[u] = bv[u].w;
          mma_step<SPLIT, NTW>(c[s + 1], ra.z, rb.z, ra.w, rb.w, y0, y1);
        }
        continue;
      }
    }
#pragma unroll
    for (int s = 0; s < ACC; ++s) {
      const int k0 = kbase + 8 * s;
      if (CHECK && k0 >= k) break;
      const int ka = k0 + t, kb = ka + 4;
      float x0, x1, x2, x3;
      if (CHECK) {
        x0 = r0 < m && ka < k ? a0p[ka * A.cs] : 0.0f;
        x1 = r1 < m && ka < k ? a1p[ka * A.cs] : 0.0f;
        x2 = r0 < m && kb < k ? a0p[kb * A.cs] : 0.0f;
        x3 = r1 < m && kb < k ? a1p[kb * A.cs] : 0.0f;
      } else if (a_ldsm) {
        uint32_t r[4];
        ldsm_x4(r, a_row + 4 * k0);
        x0 = __uint_as_float(r[0]);
        x1 = __uint_as_float(r[1]);
        x2 = __uint_as_float(r[2]);
        x3 = __uint_as_float(r[3]);
      } else {
        x0 = a0p[ka * A.cs];
        x1 = a1p[ka * A.cs];
        x2 = a0p[kb * A.cs];
        x3 = a1p[kb * A.cs];
      }
      const float* bap = B.p + ka * B.rs;
      const float* bbp = B.p + kb * B.rs;
      uint32_t bm[NTW][2] = {};  // with b_ldsm or npair: the B fragments of this k-step
      if (!CHECK && npair) {
#pragma unroll
        for (int u = 0; u + 1 < NTW; u += 2) {
          const float2 p0 = *reinterpret_cast<const float2*>(bap + j0 + 8 * u + 2 * g);
          const float2 p1 = *reinterpret_cast<const float2*>(bbp + j0 + 8 * u + 2 * g);
          bm[u][0] = __float_as_uint(p0.x), bm[u + 1][0] = __float_as_uint(p0.y);
          bm[u][1] = __float_as_uint(p1.x), bm[u + 1][1] = __float_as_uint(p1.y);
        }
      } else if (b_ldsm) {
#pragma unroll
        for (int u = 0; u + 1 < NTW; u += 2) {
          uint32_t r[4];
          ldsm_x4(r, b_row + 4 * (8 * u * B.cs + k0));
          bm[u][0] = r[0], bm[u][1] = r[1], bm[u + 1][0] = r[2], bm[u + 1][1] = r[3];
        }
        if constexpr (NTW % 2 == 1) ldsm_x2(bm[NTW - 1], b_row + 4 * (8 * (NTW - 1) * B.cs + k0));
      }
      float y0[NTW], y1[NTW];
#pragma unroll
      for (int u = 0; u < NTW; ++u) {
        const int cb = j0 + 8 * u + g;
        if (CHECK) {
          y0[u] = ka < k && cb < n ? bap[cb * B.cs] : 0.0f;
          y1[u] = kb < k && cb < n ? bbp[cb * B.cs] : 0.0f;
        } else if (b_ldsm || npair) {
          y0[u] = __uint_as_float(bm[u][0]);
          y1[u] = __uint_as_float(bm[u][1]);
        } else {
          y0[u] = bap[cb * B.cs];
          y1[u] = bbp[cb * B.cs];
        }
      }
      mma_step<SPLIT, NTW>(c[s], x0, x1, x2, x3, y0, y1);
    }
  }
}

// strips' Load for block_mma: nothing is read before the products.
struct NoPreload {};

}  // namespace mma_detail

// The destination of block_mma_accumulate: element (i, j) of dst becomes src(i, j) + value, or value
// where src is null; src may be dst. Both have leading dimension ld (even) and 8-byte aligned rows, so
// the old values are read and the new ones written as pairs of neighbouring columns.
struct Accumulate {
  const float* src;
  float* dst;
  int ld;
};

namespace mma_detail {

// The tasks of block_mma and block_mma_accumulate (below). Load: NoPreload (each value handed to
// store(i, j, value)) or Accumulate (store unused). k3 > 0: a third product A3·B3, accumulated with the
// second and scaled by a2.
template <bool SPLIT, int NTW, bool LDSM, int NW, class Store, class Load = NoPreload>
__device__ __forceinline__ void strips(int m, int n, int k1, Operand A1, Operand B1, float a1,
                                       int k2, Operand A2, Operand B2, float a2, Store& store,
                                       Load load = {}, int k3 = 0, Operand A3 = {},
                                       Operand B3 = {}) {
  constexpr bool kAccumulate = std::is_same_v<Load, Accumulate>;
  constexpr int ACC = 4 / NTW;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nwarps = NW ? NW : int(blockDim.x >> 5);
  const int g = lane >> 2, t = lane & 3;
  const int MT = (m + 15) >> 4, NS = (n + 8 * NTW - 1) / (8 * NTW);
  // Whole tiles only: a constant where m and n are (the first test), so the compiler drops the
  // bounds-checked path of such calls.
  const bool whole = m % 16 == 0 && n % (8 * NTW) == 0;
  for (int task = warp; task < MT * NS; task += nwarps) {
    const int i0 = (task / NS) * 16, j0 = (task % NS) * 8 * NTW;
    const bool inside = whole || (i0 + 16 <= m && j0 + 8 * NTW <= n);
    const bool fast1 = inside && k1 % (8 * ACC) == 0, fast2 = inside && k2 % (8 * ACC) == 0,
               fast3 = inside && k3 % (8 * ACC) == 0;
    // Column pairs (strip_product's npair) where every product of the task reads a row-major B on
    // the fast path, since the products' tiles are summed element by element.
    const bool npair = LDSM && NTW % 2 == 0 && fast1 && B1.cs == 1 &&
                       (k2 == 0 || (fast2 && B2.cs == 1)) && (k3 == 0 || (fast3 && B3.cs == 1));
    auto column = [&](int u, int e) {
      return npair ? pair_column(j0, u, t, e) : j0 + 8 * u + 2 * t + (e & 1);
    };
    // One product into c: the fast path (with column pairs and, product by product, kpair) or the
    // bounds-checked one.
    auto product = [&](float(&c)[ACC][NTW][4], int k, bool fast, Operand A, Operand B) {
      if (fast)
        strip_product<SPLIT, NTW, ACC, false, LDSM>(c, m, n, k, A, B, i0, j0, g, t, npair,
                                                    use_kpair<SPLIT, LDSM, ACC>(fast, A, B));
      else
        strip_product<SPLIT, NTW, ACC, true>(c, m, n, k, A, B, i0, j0, g, t);
    };
    // With Accumulate: element (u, e) and the one in the next column, (u + 1, e) with column pairs
    // and (u, e + 1) without; `first` marks the left one of each such pair.
    auto first = [&](int u, int e) { return npair ? u % 2 == 0 : e % 2 == 0; };
    auto next_u = [&](int u) { return npair ? u + 1 : u; };
    auto next_e = [&](int e) { return npair ? e : e + 1; };
    float c1[ACC][NTW][4] = {}, c2[ACC][NTW][4] = {};
    float old[NTW][4];  // with Accumulate: the old values, read before the products
    if constexpr (kAccumulate) {
#pragma unroll
      for (int u = 0; u < NTW; ++u)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (!first(u, e)) continue;
          const int un = next_u(u), en = next_e(e);
          const int i = e < 2 ? i0 + g : i0 + g + 8, j = column(u, e);
          const float* p = load.src + std::size_t(i) * load.ld + j;
          if (load.src && i < m && j + 1 < n) {
            const float2 o = *reinterpret_cast<const float2*>(p);
            old[u][e] = o.x, old[un][en] = o.y;
          } else {
            old[u][e] = load.src && i < m && j < n ? p[0] : 0.0f;
            old[un][en] = load.src && i < m && j + 1 < n ? p[1] : 0.0f;
          }
        }
    }
    product(c1, k1, fast1, A1, B1);
    if (k2 > 0) product(c2, k2, fast2, A2, B2);
    if (k3 > 0) product(c2, k3, fast3, A3, B3);
    float val[NTW][4];
#pragma unroll
    for (int u = 0; u < NTW; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v1 = 0.0f, v2 = 0.0f;
#pragma unroll
        for (int s = 0; s < ACC; ++s) {
          v1 += c1[s][u][e];
          v2 += c2[s][u][e];
        }
        val[u][e] = a1 * v1 + a2 * v2;
      }
#pragma unroll
    for (int u = 0; u < NTW; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = e < 2 ? i0 + g : i0 + g + 8, j = column(u, e);
        if constexpr (kAccumulate) {
          if (!first(u, e)) continue;
          const int un = next_u(u), en = next_e(e);
          float* p = load.dst + std::size_t(i) * load.ld + j;
          const float x = old[u][e] + val[u][e], y = old[un][en] + val[un][en];
          if (i < m && j + 1 < n) {
            *reinterpret_cast<float2*>(p) = make_float2(x, y);
          } else if (i < m && j < n) {
            p[0] = x;
          }
        } else if (i < m && j < n) {
          store(i, j, val[u][e]);
        }
      }
  }
}

// Picks the task width for block_mma and block_mma_accumulate: w = 4, 2 or 1 n-tiles, the widest that
// still gives every warp a task. NW: the block's warps where the caller knows them at compile time
// (0: blockDim.x / 32). With NW and the shapes constant, the choice of width, the task loop and the
// bounds checks fold away, so only one of the six forms of the product is compiled per call (the
// TTT-MLP backward's compile-time instance was 474 KB of code with all six, more than the
// instruction cache holds).
template <bool SPLIT, bool LDSM, int NW, class Store, class Load>
__device__ __forceinline__ void block_tasks(int m, int n, int k1, Operand A1, Operand B1, float a1,
                                            int k2, Operand A2, Operand B2, float a2, int k3,
                                            Operand A3, Operand B3, Store& store, Load load) {
  const int nwarps = NW ? NW : int(blockDim.x >> 5);
  const int MT = (m + 15) >> 4, NT = (n + 7) >> 3;
  if (MT * ((NT + 3) / 4) >= nwarps)
    strips<SPLIT, 4, LDSM, NW>(m, n, k1, A1, B1, a1, k2, A2, B2, a2, store, load, k3, A3, B3);
  else if (MT * ((NT + 1) / 2) >= nwarps)
    strips<SPLIT, 2, LDSM, NW>(m, n, k1, A1, B1, a1, k2, A2, B2, a2, store, load, k3, A3, B3);
  else
    strips<SPLIT, 1, LDSM, NW>(m, n, k1, A1, B1, a1, k2, A2, B2, a2, store, load, k3, A3, B3);
}

}  // namespace mma_detail

// The whole block computes  R = α₁·A₁B₁ (+ α₂·A₂B₂)  for R of m × n (A₁: m × k1, B₁: k1 × n; the
// optional second product has k2 > 0) and hands every element to store(i, j, value); each element
// exactly once, by one thread. Warps take tasks of 16 rows × 8·w columns in turn (w: block_tasks): the
// A fragment of a k-step is loaded and split once for the w products. Partial tiles are zero-padded on
// load and masked on store. The operands must not be written during the call; what store() writes
// must not be read by other threads before a barrier. Two calls with the same (m, n) give every
// element to the same thread, so a store may read what the previous call's store wrote at the same
// (i, j) without a barrier.
// LDSM: the operands may be read with ldmatrix (strip_product says when and what it requires), with
// two n-tiles per task a row-major B in column pairs (npair; B's rows must then be 8-byte aligned),
// and in the tf32 form a transposed B in global memory in 16-byte runs of k (kpair; A's and B's rows
// must then be 16-byte aligned). NW: see block_tasks.
template <bool SPLIT, bool LDSM = false, int NW = 0, class Store>
__device__ __forceinline__ void block_mma(int m, int n, int k1, Operand A1, Operand B1, float a1,
                                          int k2, Operand A2, Operand B2, float a2, Store store) {
  mma_detail::block_tasks<SPLIT, LDSM, NW>(m, n, k1, A1, B1, a1, k2, A2, B2, a2, 0, Operand{},
                                           Operand{}, store, mma_detail::NoPreload{});
}

// block_mma into an Accumulate target: dst(i, j) = src(i, j) + a1·(A₁B₁)(i, j) + a2·(A₂B₂ + A₃B₃)(i, j)
// (k2, k3 may be 0), the same tasks and threads as block_mma. Each task reads its old values before its
// products, so that their latency overlaps the mma chains (an accumulation into global memory that
// read each value after them put an L2 round trip per element on the path), and reads and writes them
// as column pairs: 8-byte loads and stores (the TTT-MLP backward's carry and commits).
template <bool SPLIT, bool LDSM = false, int NW = 0>
__device__ __forceinline__ void block_mma_accumulate(int m, int n, int k1, Operand A1, Operand B1,
                                                     float a1, int k2, Operand A2, Operand B2,
                                                     float a2, int k3, Operand A3, Operand B3,
                                                     Accumulate target) {
  mma_detail::NoPreload unused;
  mma_detail::block_tasks<SPLIT, LDSM, NW>(m, n, k1, A1, B1, a1, k2, A2, B2, a2, k3, A3, B3, unused,
                                           target);
}

// One product only.
template <bool SPLIT, bool LDSM = false, int NW = 0, class Store>
__device__ __forceinline__ void block_mma(int m, int n, int k, Operand A, Operand B, float alpha,
                                          Store store) {
  block_mma<SPLIT, LDSM, NW>(m, n, k, A, B, alpha, 0, A, B, 0.0f, store);
}

// ---- m16 register tiles: the TTT-Linear forward's and fused backward's design --------------------
//
// A mini-batch of 16 rows is one m16 tile; each warp owns 16 columns of it, held as two n8
// accumulator fragments x[nt][i] at row gid + 8·(i>>1), column 16·warp + 8·nt + 2·tig + (i&1)
// (gid = lane / 4, tig = lane % 4). Operands are converted to their tf32 parts once per use site
// (Op4: an A fragment, Op2: a B fragment) and shared by the products that read them.
struct Op4 {
  uint32_t h[4], l[4];
};
struct Op2 {
  uint32_t h[2], l[2];
};

template <bool SPLIT>
__device__ __forceinline__ Op4 op4(float a0, float a1, float a2, float a3) {
  Op4 o;
  tf32_parts<SPLIT>(a0, o.h[0], o.l[0]);
  tf32_parts<SPLIT>(a1, o.h[1], o.l[1]);
  tf32_parts<SPLIT>(a2, o.h[2], o.l[2]);
  tf32_parts<SPLIT>(a3, o.h[3], o.l[3]);
  return o;
}

template <bool SPLIT>
__device__ __forceinline__ Op2 op2(float b0, float b1) {
  Op2 o;
  tf32_parts<SPLIT>(b0, o.h[0], o.l[0]);
  tf32_parts<SPLIT>(b1, o.h[1], o.l[1]);
  return o;
}

// c += a·b from the parts: with SPLIT the 3xTF32 sum (small terms first), else one tf32 product.
template <bool SPLIT>
__device__ __forceinline__ void mma_parts(float (&c)[4], const Op4& a, const Op2& b) {
  if constexpr (SPLIT) {
    mma_tf32(c, a.l[0], a.l[1], a.l[2], a.l[3], b.h[0], b.h[1]);
    mma_tf32(c, a.h[0], a.h[1], a.h[2], a.h[3], b.l[0], b.l[1]);
  }
  mma_tf32(c, a.h[0], a.h[1], a.h[2], a.h[3], b.h[0], b.h[1]);
}

// Asynchronous global → shared copies (cp.async) of 16 bytes of any type (fp32 or bf16 rows) and of
// one float; `bytes` < the size zero-fills the rest.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void cp_async4(float* dst, const float* src, int bytes) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Sum over the 4 lanes of a quad (the lanes that share a row in an accumulator fragment).
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}
// The maximum over the same 4 lanes.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
// 2^x on the special-function unit, subnormal results flushed to 0 (2^−∞ = 0): what a softmax in log2
// units needs. exp2f would add the instructions that keep subnormal results, which a probability
// below 2^−126 does not need.
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Sum over the 8 lanes that share tig (the rows of an accumulator fragment's column).
__device__ __forceinline__ float col_sum8(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 4);
  v += __shfl_xor_sync(0xffffffffu, v, 8);
  v += __shfl_xor_sync(0xffffffffu, v, 16);
  return v;
}

// One k-step kt (8 of the contraction) of Z += K·W and Z̄ += Q·W for a 16-row K and Q tile in
// shared memory (leading dimension ld), with this warp's two n8 fragments w0, w1 of W already in
// operand form. K and Q are read as 8-byte pairs: contraction position t of the fragment holds
// column 2t and t + 4 holds 2t + 1 (the permutation W's fragments use too).
template <bool SPLIT>
__device__ __forceinline__ void kq_times_w(float (&z)[2][4], float (&zb)[2][4], const float* sK,
                                           const float* sQ, int ld, int kt, int gid, int tig,
                                           const Op2& w0, const Op2& w1) {
  const float2 k0 = *reinterpret_cast<const float2*>(sK + gid * ld + kt * 8 + 2 * tig);
  const float2 k1 = *reinterpret_cast<const float2*>(sK + (gid + 8) * ld + kt * 8 + 2 * tig);
  const float2 q0 = *reinterpret_cast<const float2*>(sQ + gid * ld + kt * 8 + 2 * tig);
  const float2 q1 = *reinterpret_cast<const float2*>(sQ + (gid + 8) * ld + kt * 8 + 2 * tig);
  const Op4 ak = op4<SPLIT>(k0.x, k1.x, k0.y, k1.y), aq = op4<SPLIT>(q0.x, q1.x, q0.y, q1.y);
  mma_parts<SPLIT>(z[0], ak, w0);
  mma_parts<SPLIT>(z[1], ak, w1);
  mma_parts<SPLIT>(zb[0], aq, w0);
  mma_parts<SPLIT>(zb[1], aq, w1);
}

// ---- Barriers ----------------------------------------------------------------------------------------
//
// A kernel whose block runs groups of warps in different roles meets within a group on a hardware
// barrier of its own (ids 1–15; id 0 is __syncthreads's) and hands work from one group to another
// with arrive (no wait) on one side and sync on the other. Both order the shared-memory accesses
// before them for the threads that pass the barrier after them.
__device__ __forceinline__ void barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The barrier a reduction round meets on: the whole block, or one group of THREADS threads.
struct BlockBarrier {
  __device__ __forceinline__ void operator()() const { __syncthreads(); }
};
template <int ID, int THREADS>
struct GroupBarrier {
  static_assert(ID >= 1 && ID < 16 && THREADS % 32 == 0, "a hardware barrier id and whole warps");
  __device__ __forceinline__ void operator()() const { barrier_sync(ID, THREADS); }
};

// Row mean and 1/σ of a 16 × D tile in fragments (D/16 warps × 16 columns), rows gid (half 0) and
// gid + 8 (half 1). Parallel variance: each warp contributes (sum, M2 about its own 16-column mean)
// through `red` (STRIDE ≥ 2 floats per warp and row) and the parts are combined exactly. One barrier
// (`bar`: the warps of the tile).
template <int D, int STRIDE, class Bar = BlockBarrier>
__device__ __forceinline__ void frag_row_stats(const float (&x)[2][4], float* red, int warp,
                                               int gid, int tig, float eps, float (&mu)[2],
                                               float (&rstd)[2], Bar bar = {}) {
  constexpr int NW = D / 16;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float s = quad_sum(x[0][2 * hf] + x[0][2 * hf + 1] + x[1][2 * hf] + x[1][2 * hf + 1]);
    const float mw = s * (1.0f / 16.0f);
    float q = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float dv = x[nt][2 * hf + e] - mw;
        q += dv * dv;
      }
    q = quad_sum(q);
    if (tig == 0) {
      red[(warp * 16 + gid + 8 * hf) * STRIDE + 0] = s;
      red[(warp * 16 + gid + 8 * hf) * STRIDE + 1] = q;
    }
  }
  bar();
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int row = gid + 8 * hf;
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < NW; ++w) s += red[(w * 16 + row) * STRIDE];
    const float m = s / float(D);
    float m2 = 0.0f;
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      const float dm = red[(w * 16 + row) * STRIDE] * (1.0f / 16.0f) - m;
      m2 += red[(w * 16 + row) * STRIDE + 1] + 16.0f * dm * dm;
    }
    mu[hf] = m;
    rstd[hf] = 1.0f / sqrtf(m2 / float(D) + eps);
  }
}

// ---- bf16 products (the TTT-Linear forward's version Bf16) ------------------------------------------

// Two fp32 values rounded to bf16 (to nearest, ties to even: convert_to_bf16's rounding) in one
// 32-bit register, `lo` in the low half: the order of k (or of columns) in the mma fragments below.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The two bf16 of a register widened to fp32 (exact).
__device__ __forceinline__ float2 unpack_bf16(uint32_t v) {
  return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
}

// c += A·B for one 16×8×16 tile with bf16 operands and fp32 accumulation. Fragments (PTX ISA,
// mma.m16n8k16 .bf16), g = lane/4, t = lane%4, each register two bf16 with the lower k (or column)
// in its low half: A a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..);
// B b0 (2t..2t+1, g), b1 (2t+8.., g); C as for tf32: c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8 × 8 matrices of 16-bit values transposed on the way (ldmatrix .trans): thread l receives
// elements (rows 2(l%4), 2(l%4)+1; column l/4) of each, which is a bf16 B fragment's register
// from a matrix stored k-major (row = k). `row` as for ldsm_x4.
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
}

// The same for two matrices (lanes 0–15 give the rows): one n8 tile's B fragment b0, b1.
__device__ __forceinline__ void ldsm_x2_trans(uint32_t (&r)[2], uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(row));
}

}  // namespace tttlab::kernels::detail
