// TTT-MLP, dual form, forward on the GPU, hidden width 4d (tttlab/kernels/ttt.hpp; maths in
// docs/MATH.md §5; the CPU engine's dual_chunk_mlp in core/src/ttt/inner.cpp, which both kernels
// follow). Two kernels, every matrix product on tensor cores:
//
// THE FUSED KERNEL (b = 16 and d ∈ {16, 32, 64}; Default in 3xTF32 where Q, K, V, O are 16-byte
// aligned, Tf32 with one tf32 product per term, Bf16 with bf16 inputs, output and products): one block
// of 16 warps per (sequence, head), the state in shared memory for the whole sequence, 6 barriers
// per mini-batch.
//  - The products whose output is one 16-row tile but whose k is long (Z2 = X2 W2 and
//    Z̄2 = X̄2 W2 with k = 4d; M2 = X̄2 X2ᵀ with k = 4d and M1 = Q Kᵀ) are split over k so that all 16
//    warps have a task; the partial tiles go to shared memory and the warp that owns a row sums them
//    where the row is consumed (the LN+L2 gradient for Z2, the output row for Z̄2, whose M2 G2 term
//    is then a per-row sum on CUDA cores).
//  - λ is folded into G1 and G2 once (they are only used as λ ⊙ G: in M G with M's λ_j taken out,
//    and in the update), so there is no scaling pass.
//  - Z1 = K W1 and Q W1 share one pass over W1; M1 is computed beside them. Both stay in the
//    registers of the warp that computed them: G1 and X̄2 = gelu(Q W1 + b1 − M1 G1) are computed by
//    the same warps for the same columns, so they need no buffer and no block barrier.
//  - The state update is split where it is free: W1, b1 beside the M2 / Z̄2 partials, W2 beside the
//    output rows; b2 is double-buffered because the output rows still read the old one.
//  - The next mini-batch's K, Q, V, λ are loaded into registers while the current one is computed.
//  - The operands reach the tensor cores as 8-byte pairs: the state stored as pairs along the
//    dimension its products contract, 16-wide k-steps, the updates computed transposed; with bf16,
//    ldmatrix tiles (the section "The fused kernel" below).
//  - Every product has its shape and operand strides fixed at compile time; GELU uses the SFU
//    exponential instead of tanhf.
// The same phases with fp32 operands read one at a time were slower at the training shape, in
// 3xTF32 and more so with tf32 (docs/KERNELS.md).
//
// THE FALLBACK (every supported shape): one block of 512 threads per (sequence, head), the state
// W1 [d, 4d], b1, W2 [4d, d], b2 in shared memory for the whole sequence where it fits, otherwise in
// a per-block slice of the workspace (the same code through generic pointers; L2 holds it).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "common/cuda_check.hpp"
#include "ttt/ttt_common.cuh"
#include "ttt/ttt_host.hpp"
#include "ttt/ttt_mma.cuh"
#include "tttlab/kernels/ttt.hpp"

namespace tttlab::kernels {
namespace detail {
namespace {

struct MlpParams {
  const float *Q, *K, *V, *lam, *tau, *gamma, *beta, *W1, *b1, *W2, *b2;
  float* O;
  float* scratch;  // [BH, fallback_floats] (the fallback) when its matrices do not fit in shared memory
  float *ckW1, *ckb1, *ckW2, *ckb2;  // checkpoints (nullptr: none), [BH, n_ck, ...]
  int B, H, T, d, b, group, n_ck;  // the fused kernel takes d and b from its template
  bool ln, res, bias;
  float eps;
};

// Writes the committed state (padded rows ldh, ldd) as checkpoint mb / group when mb starts a group.
__device__ inline void write_checkpoint(const MlpParams& p, int blk, int mb, const float* sW1,
                                        const float* sb1, const float* sW2, const float* sb2,
                                        int ldh, int ldd) {
  if (!p.ckW1 || mb % p.group != 0) return;
  const int d = p.d, hd = 4 * d;
  const std::size_t ck = std::size_t(blk) * p.n_ck + mb / p.group;
  for (int i = threadIdx.x; i < d * hd; i += blockDim.x) {
    p.ckW1[ck * d * hd + i] = sW1[(i / hd) * ldh + i % hd];
    p.ckW2[ck * hd * d + i] = sW2[(i / d) * ldd + i % d];
  }
  if (p.ckb1)
    for (int c = threadIdx.x; c < hd; c += blockDim.x) p.ckb1[ck * hd + c] = sb1[c];
  if (p.ckb2)
    for (int c = threadIdx.x; c < d; c += blockDim.x) p.ckb2[ck * d + c] = sb2[c];
}

// ---- The fused kernel's pieces -------------------------------------------------------------------

constexpr int kB = 16;  // the mini-batch: one m16 tile
constexpr int kThreadsFused = 512;
constexpr int kWarpsFused = kThreadsFused / 32;  // = kB: one warp per row in the row passes

// The row passes: one warp per row r of the mini-batch (lane l holds columns l, l + 32, …, as RowFrag).

// Rows of fp32 or bf16 elements, widened to fp32 on the way in and rounded on the way out.
template <class E>
__device__ __forceinline__ float value_of(E x) {
  if constexpr (std::is_same_v<E, float>) {
    return x;
  } else {
    return bf16_value(x);
  }
}
template <class E>
__device__ __forceinline__ E element_of(float x) {
  if constexpr (std::is_same_v<E, float>) {
    return x;
  } else {
    return bf16_bits(x);
  }
}

template <class E>
__device__ __forceinline__ RowFrag row_load_any(const E* p, int n, int lane) {
  RowFrag r;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    const int c = lane + 32 * u;
    r.v[u] = c < n ? value_of(p[c]) : 0.0f;
  }
  return r;
}

template <class E>
__device__ __forceinline__ void row_store_any(E* p, const RowFrag& r, int n, int lane) {
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    const int c = lane + 32 * u;
    if (c < n) p[c] = element_of<E>(r.v[u]);
  }
}

// b2 + the sum of NS split-k partials (P[s][r][c], rows of D) of row r: Z2's or Z̄2's row.
template <int D, int NS>
__device__ __forceinline__ RowFrag partial_row(const float* b2, const float* P, int r, int lane) {
  RowFrag z;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    const int c = lane + 32 * u;
    float acc = 0.0f;
    if (c < D) {
      acc = b2[c];
#pragma unroll
      for (int s = 0; s < NS; ++s) acc += P[(s * kB + r) * D + c];
    }
    z.v[u] = acc;
  }
  return z;
}

// Row r of M without λ_j, in lane j < 16: τ_r (Σ of NS partials P[s][r][j] + 1) for j ≤ r, else 0
// (0 in lanes 16..31). With the bias off the +1 is dropped (`one` = 0).
template <int NS>
__device__ __forceinline__ float m_row(const float* P, const float* sTau, int r, int lane,
                                       float one) {
  float m = 0.0f;
  if (lane < kB) {
    float dot = 0.0f;
#pragma unroll
    for (int s = 0; s < NS; ++s) dot += P[(s * kB + r) * kB + lane];
    m = lane <= r ? sTau[r] * (dot + one) : 0.0f;
  }
  return m;
}

// Phase C: λ_r ⊙ lnl2(Z2 + b2, V [− K]) for row r (Z2 from NS partials, λ_r = sLam[r]), with K's row
// widened from the row buffer; qres gets Q's row with the residual on (for the output row).
template <int D, int NS, class E>
__device__ __forceinline__ RowFrag loss_grad_row(const MlpParams& p, const float* b2,
                                                 const float* P, int r, int lane, const RowFrag& v,
                                                 const E* krow, const E* qrow, const RowFrag& gam,
                                                 const RowFrag& bet, const float* sLam,
                                                 RowFrag& qres) {
  const RowFrag z = partial_row<D, NS>(b2, P, r, lane);
  RowFrag tgt = v;
  if (p.res) {
    const RowFrag k = row_load_any(krow, D, lane);
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) tgt.v[u] -= k.v[u];
    qres = row_load_any(qrow, D, lane);
  }
  RowFrag g2 = row_loss_grad(z, tgt, gam, bet, D, lane, p.eps, p.ln);
  const float lr = sLam[r];
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) g2.v[u] *= lr;
  return g2;
}

// Phase F: [Q +] LN(Z̄2 + b2 − M2 (λ ⊙ G2)) for row r (Z̄2 from NS partials; m2 the row of M2 from
// m_row; λ ⊙ G2 fp32 rows of leading dimension LDG).
template <int D, int NS, int LDG>
__device__ __forceinline__ RowFrag output_row(const MlpParams& p, const float* b2, const float* P,
                                              int r, int lane, float m2, const float* sG2,
                                              const RowFrag& gam, const RowFrag& bet,
                                              const RowFrag& qres) {
  RowFrag z = partial_row<D, NS>(b2, P, r, lane);
#pragma unroll
  for (int j = 0; j < kB; ++j) {
    const float mj = __shfl_sync(0xffffffffu, m2, j);
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) {
      const int c = lane + 32 * u;
      if (c < D) z.v[u] -= mj * sG2[j * LDG + c];
    }
  }
  RowFrag o = row_layer_norm(z, gam, bet, D, lane, p.eps, p.ln);
  if (p.res) {
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) o.v[u] += qres.v[u];
  }
  return o;
}

// ---- The fused kernel: the state stored as pairs along k ------------------------------------------
//
// The phases (A–F in the kernel) work in 16-wide k-steps whose operands are 8-byte pairs, in three
// precisions (template arguments BF, SPLIT):
//  - BF (version Bf16): Q, K, V read and O written as bf16; every product on bf16 operands
//    (mma.m16n8k16, fp32 accumulation), half the mma instructions of tf32. The operands that are
//    products' outputs or inputs (K, Q, X2, X̄2, λ ⊙ G1, λ ⊙ G2, M1) are stored in bf16 and read with
//    ldmatrix, one instruction per 16 × 16 fragment.
//  - !BF: fp32 inputs, output and buffers; one tf32 product per term (version Tf32: the raw fp32
//    bits, a truncation), or with SPLIT the 3xTF32 sum of each product (Default: every operand split
//    into tf32 hi and lo parts as it enters its mma, fp32-level accuracy). Each m16n8k8 step takes its
//    k in the order 2t, 2t + 1 for the fragment slots t, t + 4 (the same permutation in A and B leaves
//    the sum unchanged), so a row-major A fragment is two 8-byte loads instead of four scalar ones,
//    and so is a B fragment of an operand stored n-major or as pairs.
// Common to all:
//  - The state W1, b1, W2, b2 stays fp32 (rounded or truncated only as it enters a product), and so
//    do Z1, GELU and its derivative, the LayerNorms, G2 for the output rows, the bias sums, every
//    partial sum, and the checkpoints.
//  - W1 and W2 are stored as pairs along the dimension their products contract: element (k, j) of W1
//    at 2·((k/2)·LW1 + j) + k%2, element (r, c) of W2 at 2·((r/2)·LW2 + c) + r%2, so two consecutive
//    k of one column are one 8-byte load; the updates are computed transposed (G1ᵀK, G2ᵀX2) so that a
//    thread's two accumulators are such a pair too (one 8-byte read-modify-write).
//  - Z1 and Q W1 + b1 stay in the registers of the warp that computed them until phase D, whose
//    products give every element to the same thread (the same 16 × 8·NTW tasks), so they have no
//    shared-memory buffers; the b1 update is a column sum of λ ⊙ G1 over the warp's lanes.
template <int D, bool BF>
struct FusedLayout {
  using E = std::conditional_t<BF, std::uint16_t, float>;  // the element of the row buffers
  static constexpr int ES = sizeof(E);
  static constexpr int HD = 4 * D;
  static constexpr int LW1 = HD + 4;  // W1 pair rows (in pairs): the 8-byte loads of a B fragment
  static constexpr int LW2 = D + 4;   // and W2's fall on distinct banks (stride ≡ 8 words mod 32)
  // Row buffers of width d (K, Q, λ ⊙ G2), 4d (X2, X̄2, λ ⊙ G1) and 16 (M1): bf16 rows 16-byte aligned
  // with the 8 rows an ldmatrix reads on distinct banks; fp32 rows whose 8-byte fragment loads are
  // conflict-free (stride ≡ 8 words mod 32).
  static constexpr int LX = D + 8, LXH = HD + 8, LM = kB + 8;
  static constexpr int LDD = LX;  // the fp32 λ ⊙ G2 (with BF, beside its bf16 copy)
  // Products 16 × 4d (Z1 and Q W1, then G1 and X̄2): tasks of NTW_H n-tiles, one per warp.
  static constexpr int NT_H = HD / 8, NTW_H = NT_H >= 2 * kWarpsFused ? NT_H / kWarpsFused : 1;
  static constexpr int TASKS_H = NT_H / NTW_H;
  // Z2 and Z̄2 (16 × d, k = 4d): NTW_Z n-tiles × NS_Z k-splits; Q Kᵀ: one task per 16-wide k-step;
  // X̄2 X2ᵀ: NS_M2 k-splits (both n-tiles of 16 × 16 in each task).
  static constexpr int KS_H = HD / 16, NT_Z = D / 8, NTW_Z = D >= 32 ? 2 : 1, G_Z = NT_Z / NTW_Z;
  static constexpr int NS_Z = kWarpsFused / G_Z < KS_H ? kWarpsFused / G_Z : KS_H;
  static constexpr int NS_M1 = D / 16, NS_M2 = KS_H < 8 ? KS_H : 8;
  static constexpr int NS_M = NS_M1 > NS_M2 ? NS_M1 : NS_M2;
  // The W2 update G2ᵀ X2 (d × 4d, k = 16): tasks of one m-tile × NTW_U2 n-tiles.
  static constexpr int NTW_U2 = (D / 16) * (HD / 8) / kWarpsFused > 2
                                    ? (D / 16) * (HD / 8) / kWarpsFused
                                    : 2;
  // Byte offsets of the shared-memory buffers (each a multiple of 16).
  static constexpr std::size_t W1 = 0, W2 = W1 + std::size_t(D) * LW1 * 4,
                               B1 = W2 + std::size_t(HD) * LW2 * 4, B2 = B1 + HD * 4,
                               K = B2 + 2 * D * 4, Q = K + kB * LX * ES, G2H = Q + kB * LX * ES,
                               X2 = G2H + (BF ? kB * LX * ES : 0), XB2 = X2 + kB * LXH * ES,
                               G1 = XB2 + kB * LXH * ES, M1 = G1 + kB * LXH * ES,
                               G2 = M1 + kB * LM * ES, PZ = G2 + kB * LDD * 4,
                               PM = PZ + std::size_t(NS_Z) * kB * D * 4,
                               LAM = PM + NS_M * kB * kB * 4, TAU = LAM + kB * 4,
                               bytes = TAU + kB * 4;
  static_assert(NTW_H <= 2 && TASKS_H <= kWarpsFused && KS_H % NS_Z == 0 && KS_H % NS_M2 == 0 &&
                    G_Z * NS_Z <= kWarpsFused && (HD / 8) % NTW_U2 == 0 && NTW_U2 % 2 == 0,
                "tasks");
  static_assert(W2 % 16 == 0 && B1 % 16 == 0 && K % 16 == 0 && X2 % 16 == 0 && G2 % 16 == 0 &&
                    PZ % 16 == 0 && PM % 16 == 0 && LAM % 16 == 0,
                "16-byte aligned buffers");
};

// The inputs and output of version Bf16 (the fp32 ones are MlpParams's).
struct MlpBf16Io {
  const std::uint16_t *Q, *K, *V;
  std::uint16_t* O;
};

using mma_detail::ldsm_x4;

// ldmatrix row addresses (lane l gives row l % 8 of matrix l / 8) as byte offsets in a bf16 buffer of
// leading dimension LD:
//   frag_rows: matrices (rows 0–7, cols 0–7), (8–15, 0–7), (0–7, 8–15), (8–15, 8–15) of a 16 × 16
//     slice: a row-major A fragment a0..a3; read with .trans, the B fragments (b0, b1) of two n8
//     tiles of a B stored k-major (rows are k);
//   frag_cols: matrices (0–7, 0–7), (0–7, 8–15), (8–15, 0–7), (8–15, 8–15): the B fragments of two
//     n8 tiles of a B stored n-major (rows are n, as Kᵀ in Q Kᵀ); read with .trans, the A fragment
//     a0..a3 of an A stored k-major (G1ᵀ, G2ᵀ in the updates).
template <int LD>
__device__ __forceinline__ uint32_t frag_rows(int lane) {
  return 2 * ((lane & 15) * LD + 8 * (lane >> 4));
}
template <int LD>
__device__ __forceinline__ uint32_t frag_cols(int lane) {
  return 2 * (((lane & 7) + 8 * (lane >> 4)) * LD + 8 * ((lane >> 3) & 1));
}
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The fragments of one 16-wide k-step: bf16, one m16n8k16 (A 4 registers, B 2); tf32, two m16n8k8
// with the k order above (A 8 registers, B 4: the first k-half, then the second).
template <bool BF>
struct Frags {
  static constexpr int A = BF ? 4 : 8, B = BF ? 2 : 4;
};

template <bool BF, bool SPLIT = false>
__device__ __forceinline__ void mma16(float (&c)[4], const uint32_t (&a)[Frags<BF>::A],
                                      const uint32_t (&b)[Frags<BF>::B]) {
  static_assert(!(BF && SPLIT), "3xTF32 is for fp32 operands");
  if constexpr (BF) {
    mma_bf16(c, a, b[0], b[1]);
  } else if constexpr (SPLIT) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t ah[4], al[4], bh[2], bl[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) tf32_parts<true>(__uint_as_float(a[4 * h + i]), ah[i], al[i]);
#pragma unroll
      for (int i = 0; i < 2; ++i) tf32_parts<true>(__uint_as_float(b[2 * h + i]), bh[i], bl[i]);
      mma_tf32(c, al[0], al[1], al[2], al[3], bh[0], bh[1]);
      mma_tf32(c, ah[0], ah[1], ah[2], ah[3], bl[0], bl[1]);
      mma_tf32(c, ah[0], ah[1], ah[2], ah[3], bh[0], bh[1]);
    }
  } else {
    mma_tf32(c, a[0], a[1], a[2], a[3], b[0], b[1]);
    mma_tf32(c, a[4], a[5], a[6], a[7], b[2], b[3]);
  }
}

// Two values of a fragment slot pair (k, k + 1), or of neighbouring columns: bf16 packed, or tf32 bits.
template <bool BF>
__device__ __forceinline__ void put_pair(uint32_t* r, float x, float y) {
  if constexpr (BF) {
    r[0] = pack_bf16(x, y);
  } else {
    r[0] = __float_as_uint(x);
    r[1] = __float_as_uint(y);
  }
}

// A row-major 16 × 16 A slice (rows 0..15, columns k0..k0+15) of a row buffer with leading dim LD.
template <bool BF, int LD, class E>
__device__ __forceinline__ void a_rows(const E* s, int k0, int lane, uint32_t (&a)[Frags<BF>::A]) {
  if constexpr (BF) {
    ldsm_x4(a, smem_addr(s) + frag_rows<LD>(lane) + 2 * k0);
  } else {
    const float* p = s + (lane >> 2) * LD + k0 + 2 * (lane & 3);
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // k0..k0+7, then k0+8..k0+15
      const float2 v0 = *reinterpret_cast<const float2*>(p + 8 * h);
      const float2 v1 = *reinterpret_cast<const float2*>(p + 8 * LD + 8 * h);
      a[4 * h + 0] = __float_as_uint(v0.x);
      a[4 * h + 1] = __float_as_uint(v1.x);
      a[4 * h + 2] = __float_as_uint(v0.y);
      a[4 * h + 3] = __float_as_uint(v1.y);
    }
  }
}

// The A fragment of a 16 × 16 slice stored k-major (element (m, k) at s[k·LD + m], m0..m0+15, k 0..15).
template <bool BF, int LD, class E>
__device__ __forceinline__ void a_kmajor(const E* s, int m0, int lane,
                                         uint32_t (&a)[Frags<BF>::A]) {
  if constexpr (BF) {
    ldsm_x4_trans(a, smem_addr(s) + frag_cols<LD>(lane) + 2 * m0);
  } else {
    const float* p = s + 2 * (lane & 3) * LD + m0 + (lane >> 2);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* q = p + 8 * h * LD;
      a[4 * h + 0] = __float_as_uint(q[0]);
      a[4 * h + 1] = __float_as_uint(q[8]);
      a[4 * h + 2] = __float_as_uint(q[LD]);
      a[4 * h + 3] = __float_as_uint(q[LD + 8]);
    }
  }
}

// The B fragments of two n8 tiles (columns n0..n0+15, k0..k0+15) of an operand stored n-major
// (element (k, n) at s[n·LD + k]).
template <bool BF, int LD, class E>
__device__ __forceinline__ void b_nmajor2(const E* s, int n0, int k0, int lane,
                                          uint32_t (&b)[2][Frags<BF>::B]) {
  if constexpr (BF) {
    uint32_t r[4];
    ldsm_x4(r, smem_addr(s) + frag_cols<LD>(lane) + 2 * (n0 * LD + k0));
    b[0][0] = r[0];
    b[0][1] = r[1];
    b[1][0] = r[2];
    b[1][1] = r[3];
  } else {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const float* p = s + (n0 + 8 * u + (lane >> 2)) * LD + k0 + 2 * (lane & 3);
      const float2 v0 = *reinterpret_cast<const float2*>(p);
      const float2 v1 = *reinterpret_cast<const float2*>(p + 8);
      b[u][0] = __float_as_uint(v0.x);
      b[u][1] = __float_as_uint(v0.y);
      b[u][2] = __float_as_uint(v1.x);
      b[u][3] = __float_as_uint(v1.y);
    }
  }
}

// The B fragments of NT (1 or 2) n8 tiles (columns n0.., k 0..15) of an operand stored k-major
// (element (k, n) at s[k·LD + n]).
template <bool BF, int LD, int NT, class E>
__device__ __forceinline__ void b_kmajor(const E* s, int n0, int lane,
                                         uint32_t (&b)[NT][Frags<BF>::B]) {
  if constexpr (BF) {
    if constexpr (NT == 2) {
      uint32_t r[4];
      ldsm_x4_trans(r, smem_addr(s) + frag_rows<LD>(lane) + 2 * n0);
      b[0][0] = r[0];
      b[0][1] = r[1];
      b[1][0] = r[2];
      b[1][1] = r[3];
    } else {
      ldsm_x2_trans(b[0], smem_addr(s) + frag_rows<LD>(lane) + 2 * n0);
    }
  } else {
#pragma unroll
    for (int u = 0; u < NT; ++u) {
      const float* p = s + 2 * (lane & 3) * LD + n0 + 8 * u + (lane >> 2);
      b[u][0] = __float_as_uint(p[0]);
      b[u][1] = __float_as_uint(p[LD]);
      b[u][2] = __float_as_uint(p[8 * LD]);
      b[u][3] = __float_as_uint(p[9 * LD]);
    }
  }
}

// The B fragment of one n8 column from an fp32 state stored as pairs along k: p points at the pair
// (k0/2 + t, column), and the second k-half's pair is 4 pair rows (8·LDP floats) further.
template <bool BF, int LDP>
__device__ __forceinline__ void b_pairs(const float* p, uint32_t (&b)[Frags<BF>::B]) {
  const float2 v0 = *reinterpret_cast<const float2*>(p);
  const float2 v1 = *reinterpret_cast<const float2*>(p + 8 * LDP);
  put_pair<BF>(b, v0.x, v0.y);
  put_pair<BF>(b + Frags<BF>::B / 2, v1.x, v1.y);
}

// Stores two neighbouring columns (j, j + 1) of a row buffer.
template <bool BF, class E>
__device__ __forceinline__ void store_pair(E* p, float x, float y) {
  if constexpr (BF) {
    *reinterpret_cast<uint32_t*>(p) = pack_bf16(x, y);
  } else {
    *reinterpret_cast<float2*>(p) = make_float2(x, y);
  }
}

// P[s] (16 × N fp32, row-major) = the s-th k-split of A B for a 16-row A (row buffer, leading
// dimension LDA) and an fp32 pair-stored B (element (k, j) at 2·((k/2)·LDB + j) + k%2): tasks of NTW
// n-tiles × NS k-splits go to the warps in turn.
template <bool BF, int N, int K, int NS, int NTW, int LDA, int LDB, class E, bool SPLIT = false>
__device__ __forceinline__ void splitk_pairs(const E* A, const float* B, float* P, int warp,
                                             int lane) {
  constexpr int NG = N / 8 / NTW, KS = K / 16 / NS;
  const int g = lane >> 2, t = lane & 3;
  for (int task = warp; task < NG * NS; task += kWarpsFused) {
    const int j0 = (task % NG) * 8 * NTW, s = task / NG;
    float c[NTW][4] = {};
#pragma unroll
    for (int q = 0; q < KS; ++q) {
      const int k0 = (s * KS + q) * 16;
      uint32_t a[Frags<BF>::A];
      a_rows<BF, LDA>(A, k0, lane, a);
#pragma unroll
      for (int u = 0; u < NTW; ++u) {
        uint32_t b[Frags<BF>::B];
        b_pairs<BF, LDB>(B + 2 * ((k0 / 2 + t) * LDB + j0 + 8 * u + g), b);
        mma16<BF, SPLIT>(c[u], a, b);
      }
    }
#pragma unroll
    for (int u = 0; u < NTW; ++u) {
      float* out = P + s * kB * N + j0 + 8 * u + 2 * t;
      *reinterpret_cast<float2*>(out + g * N) = make_float2(c[u][0], c[u][1]);
      *reinterpret_cast<float2*>(out + (g + 8) * N) = make_float2(c[u][2], c[u][3]);
    }
  }
}

// P[s] (16 × 16 fp32) = the s-th of NS k-splits of A Bᵀ for two 16-row buffers (K = their width):
// Q Kᵀ, X̄2 X2ᵀ. Task s goes to warp FIRST + s.
template <bool BF, int K, int NS, int LD, int FIRST, class E, bool SPLIT = false>
__device__ __forceinline__ void splitk_abt(const E* A, const E* B, float* P, int warp, int lane) {
  constexpr int KS = K / 16 / NS;
  const int s = warp - FIRST;
  if (s < 0 || s >= NS) return;
  const int g = lane >> 2, t = lane & 3;
  float c[2][4] = {};
#pragma unroll
  for (int q = 0; q < KS; ++q) {
    const int k0 = (s * KS + q) * 16;
    uint32_t a[Frags<BF>::A], b[2][Frags<BF>::B];
    a_rows<BF, LD>(A, k0, lane, a);
    b_nmajor2<BF, LD>(B, 0, k0, lane, b);
    mma16<BF, SPLIT>(c[0], a, b[0]);
    mma16<BF, SPLIT>(c[1], a, b[1]);
  }
  float* out = P + s * kB * kB + 2 * t;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    *reinterpret_cast<float2*>(out + g * kB + 8 * u) = make_float2(c[u][0], c[u][1]);
    *reinterpret_cast<float2*>(out + (g + 8) * kB + 8 * u) = make_float2(c[u][2], c[u][3]);
  }
}

// S −= τ_b · Aᵀ B for a state S stored as pairs along its rows (element (i, j) at 2·((i/2)·LDS + j)
// + i%2), computed as its transpose Bᵀ A so that a thread's two accumulators (columns 2t, 2t + 1 of
// the transposed tile) are a pair of S: M × N = Bᵀ A with B (16 × M, k-major A operand) and A
// (16 × N, k-major B operand), k = 16. Tasks: one m-tile × NTW n-tiles.
template <bool BF, int M, int N, int NTW, int LDB, int LDA, int LDS, class E, bool SPLIT = false>
__device__ __forceinline__ void update_pairs(const E* B, const E* A, float* S, float tb, int warp,
                                             int lane) {
  constexpr int NG = N / 8 / NTW, TASKS = M / 16 * NG;
  const int g = lane >> 2, t = lane & 3;
  for (int task = warp; task < TASKS; task += kWarpsFused) {
    const int m0 = (task / NG) * 16, n0 = (task % NG) * 8 * NTW;
    uint32_t a[Frags<BF>::A];
    a_kmajor<BF, LDB>(B, m0, lane, a);
    float c[NTW][4] = {};
#pragma unroll
    for (int u = 0; u < NTW; u += 2) {
      uint32_t b[2][Frags<BF>::B];
      b_kmajor<BF, LDA, 2>(A, n0 + 8 * u, lane, b);
      mma16<BF, SPLIT>(c[u], a, b[0]);
      mma16<BF, SPLIT>(c[u + 1], a, b[1]);
    }
#pragma unroll
    for (int u = 0; u < NTW; ++u) {
      float2* s0 = reinterpret_cast<float2*>(S + 2 * ((n0 / 2 + 4 * u + t) * LDS + m0 + g));
      float2* s1 = s0 + 8;
      float2 v0 = *s0, v1 = *s1;
      v0.x -= tb * c[u][0];
      v0.y -= tb * c[u][1];
      v1.x -= tb * c[u][2];
      v1.y -= tb * c[u][3];
      *s0 = v0;
      *s1 = v1;
    }
  }
}

template <int D, bool BF, bool SPLIT = false>
__global__ void __launch_bounds__(kThreadsFused, 1)
    mlp_forward_fused_kernel(MlpParams p, MlpBf16Io io) {
  using L = FusedLayout<D, BF>;
  using E = typename L::E;
  constexpr int HD = L::HD, LW1 = L::LW1, LW2 = L::LW2, LX = L::LX, LXH = L::LXH, LM = L::LM,
                LDD = L::LDD, NTW_H = L::NTW_H;
  extern __shared__ __align__(16) float smem[];
  unsigned char* base = reinterpret_cast<unsigned char*>(smem);
  float* sW1 = reinterpret_cast<float*>(base + L::W1);  // pairs along k: [D/2][LW1][2]
  float* sW2 = reinterpret_cast<float*>(base + L::W2);  // pairs along r: [HD/2][LW2][2]
  float* sb1 = reinterpret_cast<float*>(base + L::B1);  // [HD]
  float* sb2 = reinterpret_cast<float*>(base + L::B2);  // [2][D]: the committed b2 and the next one
  E* sK = reinterpret_cast<E*>(base + L::K);            // [kB, LX]
  E* sQ = reinterpret_cast<E*>(base + L::Q);            // [kB, LX]
  E* sX2 = reinterpret_cast<E*>(base + L::X2);          // [kB, LXH]  X2
  E* sXb2 = reinterpret_cast<E*>(base + L::XB2);        // [kB, LXH]  X̄2
  E* sG1 = reinterpret_cast<E*>(base + L::G1);          // [kB, LXH]  λ ⊙ G1
  E* sM1 = reinterpret_cast<E*>(base + L::M1);          // [kB, LM]   M1 without λ_j
  float* sG2 = reinterpret_cast<float*>(base + L::G2);  // [kB, LDD]  λ ⊙ G2
  E* sG2p = reinterpret_cast<E*>(base + (BF ? L::G2H : L::G2));  // λ ⊙ G2 as the products read it
  float* sPZ = reinterpret_cast<float*>(base + L::PZ);  // [NS_Z, kB, D] partials of Z2, then Z̄2
  float* sPM = reinterpret_cast<float*>(base + L::PM);  // [NS_M, kB, kB] of Q Kᵀ, then X̄2 X2ᵀ
  float* sLam = reinterpret_cast<float*>(base + L::LAM);
  float* sTau = reinterpret_cast<float*>(base + L::TAU);

  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const std::size_t rs = std::size_t(p.H) * D;
  const std::size_t seq0 = std::size_t(n) * p.T * rs + std::size_t(h) * D;
  for (int i = tid; i < D * HD; i += kThreadsFused) {
    const int k = i / HD, j = i % HD, r = i / D, c = i % D;
    sW1[2 * ((k >> 1) * LW1 + j) + (k & 1)] = p.W1[std::size_t(h) * D * HD + i];
    sW2[2 * ((r >> 1) * LW2 + c) + (r & 1)] = p.W2[std::size_t(h) * HD * D + i];
  }
  for (int i = tid; i < HD; i += kThreadsFused)
    sb1[i] = p.bias ? p.b1[std::size_t(h) * HD + i] : 0.0f;
  for (int i = tid; i < D; i += kThreadsFused)
    sb2[i] = p.bias ? p.b2[std::size_t(h) * D + i] : 0.0f;
  if (tid < kB) sTau[tid] = p.tau[tid];
  const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * D, D, lane) : RowFrag{};
  const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * D, D, lane) : RowFrag{};
  const float one = p.bias ? 1.0f : 0.0f;
  const E* gK = BF ? reinterpret_cast<const E*>(io.K) : reinterpret_cast<const E*>(p.K);
  const E* gQ = BF ? reinterpret_cast<const E*>(io.Q) : reinterpret_cast<const E*>(p.Q);
  const E* gV = BF ? reinterpret_cast<const E*>(io.V) : reinterpret_cast<const E*>(p.V);
  E* gO = BF ? reinterpret_cast<E*>(io.O) : reinterpret_cast<E*>(p.O);

  // The inputs of mini-batch mb into registers (rows past T as zeros): K and Q as 8-byte chunks
  // (4 bf16 or 2 fp32), at most one per thread, V's row `warp` widened in the warp, λ in threads
  // 0..15.
  constexpr int PER = 8 / L::ES, CHUNKS = kB * D / PER;
  static_assert(CHUNKS <= kThreadsFused, "one chunk per thread");
  uint2 pk = {0u, 0u}, pq = {0u, 0u};
  float plam = 0.0f;
  RowFrag pv;
  auto prefetch = [&](int mb) {
    const int t0 = mb * kB, m = min(kB, p.T - t0);
    const int r = tid / (D / PER), c = PER * (tid % (D / PER));
    const bool in = tid < CHUNKS && r < m;
    const std::size_t at = seq0 + std::size_t(t0 + r) * rs + c;
    pk = in ? *reinterpret_cast<const uint2*>(gK + at) : uint2{0u, 0u};
    pq = in ? *reinterpret_cast<const uint2*>(gQ + at) : uint2{0u, 0u};
    pv = warp < m ? row_load_any(gV + seq0 + std::size_t(t0 + warp) * rs, D, lane) : RowFrag{};
    plam = tid < m ? p.lam[std::size_t(blk) * p.T + t0 + tid] : 0.0f;
  };
  auto stage = [&]() {
    if (tid < CHUNKS) {
      const int r = tid / (D / PER), c = PER * (tid % (D / PER));
      *reinterpret_cast<uint2*>(sK + r * LX + c) = pk;
      *reinterpret_cast<uint2*>(sQ + r * LX + c) = pq;
    }
    if (tid < kB) sLam[tid] = plam;
  };
  prefetch(0);
  stage();
  RowFrag v = pv;
  __syncthreads();

  const int n_mb = (p.T + kB - 1) / kB;
  const float tb = sTau[kB - 1];
  const int jh = warp * 8 * NTW_H;  // this warp's columns of the 16 × 4d products
  const bool has_h = warp < L::TASKS_H;
  int cur = 0;  // which half of sb2 holds the committed b2
  for (int mb = 0; mb < n_mb; ++mb) {
    const int t0 = mb * kB, m = min(kB, p.T - t0);
    const float* b2 = sb2 + cur * D;
    const bool commit = m == kB;  // a short last mini-batch stays uncommitted
    if (p.ckW1 && mb % p.group == 0) {
      const std::size_t ck = std::size_t(blk) * p.n_ck + mb / p.group;
      for (int i = tid; i < D * HD; i += kThreadsFused) {
        const int k = i / HD, j = i % HD, r = i / D, c = i % D;
        p.ckW1[ck * D * HD + i] = sW1[2 * ((k >> 1) * LW1 + j) + (k & 1)];
        p.ckW2[ck * HD * D + i] = sW2[2 * ((r >> 1) * LW2 + c) + (r & 1)];
      }
      if (p.ckb1)
        for (int c = tid; c < HD; c += kThreadsFused) p.ckb1[ck * HD + c] = sb1[c];
      if (p.ckb2)
        for (int c = tid; c < D; c += kThreadsFused) p.ckb2[ck * D + c] = b2[c];
    }

    // A. Z1 = K W1 + b1 and Q W1 + b1 (kept in registers), X2 = gelu(Z1);  partials of Q Kᵀ.
    float z1[NTW_H][4], zq[NTW_H][4];
    if (has_h) {
      float ck[NTW_H][4] = {}, cq[NTW_H][4] = {};
#pragma unroll
      for (int k0 = 0; k0 < D; k0 += 16) {
        uint32_t ak[Frags<BF>::A], aq[Frags<BF>::A];
        a_rows<BF, LX>(sK, k0, lane, ak);
        a_rows<BF, LX>(sQ, k0, lane, aq);
#pragma unroll
        for (int u = 0; u < NTW_H; ++u) {
          uint32_t b[Frags<BF>::B];
          b_pairs<BF, LW1>(sW1 + 2 * ((k0 / 2 + t) * LW1 + jh + 8 * u + g), b);
          mma16<BF, SPLIT>(ck[u], ak, b);
          mma16<BF, SPLIT>(cq[u], aq, b);
        }
      }
#pragma unroll
      for (int u = 0; u < NTW_H; ++u) {
        const int j = jh + 8 * u + 2 * t;
        const float c0 = sb1[j], c1 = sb1[j + 1];
        z1[u][0] = ck[u][0] + c0;
        z1[u][1] = ck[u][1] + c1;
        z1[u][2] = ck[u][2] + c0;
        z1[u][3] = ck[u][3] + c1;
        zq[u][0] = cq[u][0] + c0;
        zq[u][1] = cq[u][1] + c1;
        zq[u][2] = cq[u][2] + c0;
        zq[u][3] = cq[u][3] + c1;
        store_pair<BF>(sX2 + g * LXH + j, gelu_tanh(z1[u][0]), gelu_tanh(z1[u][1]));
        store_pair<BF>(sX2 + (g + 8) * LXH + j, gelu_tanh(z1[u][2]), gelu_tanh(z1[u][3]));
      }
    }
    splitk_abt<BF, D, L::NS_M1, LX, 0, E, SPLIT>(sQ, sK, sPM, warp, lane);
    __syncthreads();

    // B. Partials of Z2 = X2 W2.
    splitk_pairs<BF, D, HD, L::NS_Z, L::NTW_Z, LXH, LW2, E, SPLIT>(sX2, sW2, sPZ, warp, lane);
    __syncthreads();

    // C. Row `warp`: λ ⊙ G2 = λ ⊙ lnl2(Z2 + b2, V [− K]) (fp32; with BF also its bf16 copy for the
    // products); M1 without λ_j (τ_i (q_i·k_j + 1), j ≤ i).
    RowFrag qres{};
    {
      const int r = warp;
      const RowFrag g2 = loss_grad_row<D, L::NS_Z>(p, b2, sPZ, r, lane, v, sK + r * LX, sQ + r * LX,
                                                   gam, bet, sLam, qres);
      row_store(sG2 + r * LDD, g2, D, lane);
      if constexpr (BF) row_store_any(sG2p + r * LX, g2, D, lane);
      const float m1 = m_row<L::NS_M1>(sPM, sTau, r, lane, one);
      if (lane < kB) sM1[r * LM + lane] = element_of<E>(m1);
    }
    __syncthreads();

    // D. λ ⊙ G1 = (λ ⊙ G2) W2ᵀ ⊙ gelu′(Z1) (b1 −= τ_b Σ_rows λ ⊙ G1 from the fp32 values); then, by
    // the same warps for the same columns, X̄2 = gelu(Q W1 + b1 − M1 (λ ⊙ G1)).
    if (has_h) {
      float c[NTW_H][4] = {};
#pragma unroll
      for (int k0 = 0; k0 < D; k0 += 16) {
        uint32_t a[Frags<BF>::A];
        a_rows<BF, LX>(sG2p, k0, lane, a);
#pragma unroll
        for (int u = 0; u < NTW_H; ++u) {
          // B(k, j) = W2(j, k): two k of one row of W2, stored 2 floats apart.
          const int r = jh + 8 * u + g;
          const float* w = sW2 + 2 * ((r >> 1) * LW2 + k0 + 2 * t) + (r & 1);
          uint32_t b[Frags<BF>::B];
          put_pair<BF>(b, w[0], w[2]);
          put_pair<BF>(b + Frags<BF>::B / 2, w[16], w[18]);
          mma16<BF, SPLIT>(c[u], a, b);
        }
      }
#pragma unroll
      for (int u = 0; u < NTW_H; ++u) {
        const int j = jh + 8 * u + 2 * t;
#pragma unroll
        for (int e = 0; e < 4; ++e) c[u][e] *= gelu_tanh_grad(z1[u][e]);
        store_pair<BF>(sG1 + g * LXH + j, c[u][0], c[u][1]);
        store_pair<BF>(sG1 + (g + 8) * LXH + j, c[u][2], c[u][3]);
        if (commit && p.bias) {
          const float s0 = col_sum8(c[u][0] + c[u][2]), s1 = col_sum8(c[u][1] + c[u][3]);
          if (g == 0) {
            sb1[j] -= tb * s0;
            sb1[j + 1] -= tb * s1;
          }
        }
      }
      __syncwarp();
      float x[NTW_H][4] = {};
      uint32_t am[Frags<BF>::A], b[NTW_H][Frags<BF>::B];
      a_rows<BF, LM>(sM1, 0, lane, am);
      b_kmajor<BF, LXH, NTW_H>(sG1, jh, lane, b);
#pragma unroll
      for (int u = 0; u < NTW_H; ++u) mma16<BF, SPLIT>(x[u], am, b[u]);
#pragma unroll
      for (int u = 0; u < NTW_H; ++u) {
        const int j = jh + 8 * u + 2 * t;
        store_pair<BF>(sXb2 + g * LXH + j, gelu_tanh(zq[u][0] - x[u][0]),
                       gelu_tanh(zq[u][1] - x[u][1]));
        store_pair<BF>(sXb2 + (g + 8) * LXH + j, gelu_tanh(zq[u][2] - x[u][2]),
                       gelu_tanh(zq[u][3] - x[u][3]));
      }
    }
    __syncthreads();

    // E. Partials of Z̄2 = X̄2 W2 and of M2 = X̄2 X2ᵀ (on the last NS_M2 warps);
    // W1 −= τ_b Kᵀ(λ ⊙ G1) and the next b2; the next mini-batch's inputs start to load.
    if (mb + 1 < n_mb) prefetch(mb + 1);
    splitk_pairs<BF, D, HD, L::NS_Z, L::NTW_Z, LXH, LW2, E, SPLIT>(sXb2, sW2, sPZ, warp, lane);
    splitk_abt<BF, HD, L::NS_M2, LXH, kWarpsFused - L::NS_M2, E, SPLIT>(sXb2, sX2, sPM, warp, lane);
    if (commit) {
      update_pairs<BF, HD, D, D / 8, LXH, LX, LW1, E, SPLIT>(sG1, sK, sW1, tb, warp, lane);
      if (p.bias)
        for (int c = tid; c < D; c += kThreadsFused) {
          float acc = 0.0f;
#pragma unroll
          for (int j = 0; j < kB; ++j) acc += sG2[j * LDD + c];
          sb2[(cur ^ 1) * D + c] = b2[c] - tb * acc;
        }
    }
    __syncthreads();

    // F. Row `warp`: Z̄2 = Σ partials + b2 − M2 (λ ⊙ G2), O = [Q +] LN(Z̄2);
    // W2 −= τ_b X2ᵀ(λ ⊙ G2); the next inputs into shared memory (nothing here reads K, Q or λ).
    {
      const int r = warp;
      const float m2 = m_row<L::NS_M2>(sPM, sTau, r, lane, one);
      const RowFrag o = output_row<D, L::NS_Z, LDD>(p, b2, sPZ, r, lane, m2, sG2, gam, bet, qres);
      if (r < m) row_store_any(gO + seq0 + std::size_t(t0 + r) * rs, o, D, lane);
    }
    if (commit) {
      update_pairs<BF, D, HD, L::NTW_U2, LX, LXH, LW2, E, SPLIT>(sG2p, sX2, sW2, tb, warp, lane);
      if (p.bias) cur ^= 1;
    }
    if (mb + 1 < n_mb) {
      stage();
      v = pv;
    }
    __syncthreads();
  }
}

template <int D, bool BF, bool SPLIT>
void launch_fused(const MlpParams& p, const MlpBf16Io& io, int blocks, cudaStream_t stream) {
  constexpr std::size_t bytes = FusedLayout<D, BF>::bytes;
  const void* fn = reinterpret_cast<const void*>(&mlp_forward_fused_kernel<D, BF, SPLIT>);
  set_smem_limit(fn, bytes);
  mlp_forward_fused_kernel<D, BF, SPLIT><<<blocks, kThreadsFused, bytes, stream>>>(p, io);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

template <bool BF, bool SPLIT = false>
void dispatch_fused(const MlpParams& p, const MlpBf16Io& io, int d, int blocks,
                    cudaStream_t stream) {
  switch (d) {
    case 16: return launch_fused<16, BF, SPLIT>(p, io, blocks, stream);
    case 32: return launch_fused<32, BF, SPLIT>(p, io, blocks, stream);
    default: return launch_fused<64, BF, SPLIT>(p, io, blocks, stream);
  }
}

template <bool BF>
std::size_t fused_bytes(int d) {
  switch (d) {
    case 16: return FusedLayout<16, BF>::bytes;
    case 32: return FusedLayout<32, BF>::bytes;
    case 64: return FusedLayout<64, BF>::bytes;
    default: return 0;
  }
}

// Whether the fused kernel runs these dims in this precision (b = 16, d ∈ {16, 32, 64}, and its
// shared memory on this device).
template <bool BF>
bool fused_supports(const TttDims& dims) {
  const std::size_t bytes = fused_bytes<BF>(dims.head_dim);
  return dims.mini_batch == kB && bytes > 0 && bytes <= max_dynamic_smem();
}

// ---- The fallback --------------------------------------------------------------------------------
//
// block_mma (ttt_mma.cuh, 3xTF32: fp32-level accuracy) over shared-memory matrices with rows
// padded to leading dimensions d + 4, 4d + 4 and b + 4 (conflict-free or two-way fragment loads). GELU,
// the mask, the biases and the λ-weighting are applied in the products' store step.

// 16 warps: the products and row passes of a mini-batch are short, so more warps shorten each phase
// (the block holds a whole SM's shared memory anyway).
constexpr int kThreadsFallback = 512;
constexpr int kWarpsFallback = kThreadsFallback / 32;

__host__ __device__ inline std::size_t fallback_floats(int d, int b) {
  const std::size_t hd = 4 * std::size_t(d), ldd = d + 4, ldh = hd + 4, ldb = b + 4;
  return d * ldh + hd * ldd + hd + d + 4 * b * ldd + 3 * b * ldh + b * ldb + 2 * std::size_t(b);
}

__global__ void __launch_bounds__(kThreadsFallback, 1) mlp_forward_fallback_kernel(MlpParams p) {
  constexpr bool kSplit = true;
  extern __shared__ float smem[];
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int d = p.d, b = p.b, hd = 4 * d, ldd = d + 4, ldh = hd + 4, ldb = b + 4;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float* base = p.scratch ? p.scratch + std::size_t(blk) * fallback_floats(d, b) : smem;
  float* sW1 = base;                         // [d, ldh]
  float* sW2 = sW1 + std::size_t(d) * ldh;   // [hd, ldd]
  float* sb1 = sW2 + std::size_t(hd) * ldd;  // [hd]
  float* sb2 = sb1 + hd;                     // [d]
  float* sK = sb2 + d;                       // [b, ldd]
  float* sX = sK + b * ldd;                  // [b, ldd]  V, then Q
  float* sG2 = sX + b * ldd;                 // [b, ldd]  Z2, then G2 (λ ⊙ G2 for the update)
  float* sZb2 = sG2 + b * ldd;               // [b, ldd]  Z̄2
  float* sZ1 = sZb2 + b * ldd;               // [b, ldh]  Z1, then G1 (λ ⊙ G1 for the update)
  float* sX2 = sZ1 + b * ldh;                // [b, ldh]  X2 = gelu(Z1)
  float* sXb2 = sX2 + b * ldh;               // [b, ldh]  X̄2 = gelu(Z̄1)
  float* sM = sXb2 + b * ldh;                // [b, ldb]
  float* sLam = sM + b * ldb;                // [b]
  float* sTau = sLam + b;                    // [b]

  const std::size_t rs = std::size_t(p.H) * d;
  const std::size_t seq0 = std::size_t(n) * p.T * rs + std::size_t(h) * d;
  for (int i = tid; i < d * hd; i += kThreadsFallback) {
    sW1[(i / hd) * ldh + i % hd] = p.W1[std::size_t(h) * d * hd + i];
    sW2[(i / d) * ldd + i % d] = p.W2[std::size_t(h) * hd * d + i];
  }
  for (int i = tid; i < hd; i += kThreadsFallback) sb1[i] = p.bias ? p.b1[std::size_t(h) * hd + i] : 0.0f;
  for (int i = tid; i < d; i += kThreadsFallback) sb2[i] = p.bias ? p.b2[std::size_t(h) * d + i] : 0.0f;
  for (int i = tid; i < b; i += kThreadsFallback) sTau[i] = p.tau[i];
  const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * d, d, lane) : RowFrag{};
  const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * d, d, lane) : RowFrag{};
  const float one = p.bias ? 1.0f : 0.0f;
  __syncthreads();

  const int n_mb = (p.T + b - 1) / b;
  for (int mb = 0; mb < n_mb; ++mb) {
    const int t0 = mb * b, m = min(b, p.T - t0);
    write_checkpoint(p, blk, mb, sW1, sb1, sW2, sb2, ldh, ldd);
    for (int i = tid; i < m * d; i += kThreadsFallback) {
      const int r = i / d, c = i % d;
      const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
      sK[r * ldd + c] = p.K[g];
      sX[r * ldd + c] = p.V[g];
    }
    for (int i = tid; i < m; i += kThreadsFallback) sLam[i] = p.lam[std::size_t(blk) * p.T + t0 + i];
    __syncthreads();

    // Z1 = K W1 + b1,  X2 = gelu(Z1).
    block_mma<kSplit>(m, hd, d, op(sK, ldd), op(sW1, ldh), 1.0f, [&](int i, int j, float v) {
      const float z = v + sb1[j];
      sZ1[i * ldh + j] = z;
      sX2[i * ldh + j] = gelu_tanh(z);
    });
    __syncthreads();
    // Z2 = X2 W2 + b2.
    block_mma<kSplit>(m, d, hd, op(sX2, ldh), op(sW2, ldd), 1.0f,
                      [&](int i, int j, float v) { sG2[i * ldd + j] = v + sb2[j]; });
    __syncthreads();
    // G2 = lnl2(Z2, R).
    rows_loss_grad(sG2, sX, sK, ldd, m, d, warp, kWarpsFallback, lane, gam, bet, p.eps, p.ln, p.res);
    __syncthreads();
    // G1 = (G2 W2ᵀ) ⊙ gelu′(Z1), in place of Z1;  Q into the V buffer.
    block_mma<kSplit>(m, hd, d, op(sG2, ldd), op_t(sW2, ldd), 1.0f, [&](int i, int j, float v) {
      sZ1[i * ldh + j] = v * gelu_tanh_grad(sZ1[i * ldh + j]);
    });
    for (int i = tid; i < m * d; i += kThreadsFallback) {
      const int r = i / d, c = i % d;
      sX[r * ldd + c] = p.Q[seq0 + std::size_t(t0 + r) * rs + c];
    }
    __syncthreads();
    // M1 = E ⊙ tril(Q Kᵀ + 1).
    block_mma<kSplit>(m, m, d, op(sX, ldd), op_t(sK, ldd), 1.0f, [&](int i, int j, float v) {
      sM[i * ldb + j] = j <= i ? sTau[i] * sLam[j] * (v + one) : 0.0f;
    });
    __syncthreads();
    // X̄2 = gelu(Q W1 + b1 − M1 G1).
    block_mma<kSplit>(m, hd, d, op(sX, ldd), op(sW1, ldh), 1.0f, m, op(sM, ldb), op(sZ1, ldh), -1.0f,
                      [&](int i, int j, float v) { sXb2[i * ldh + j] = gelu_tanh(v + sb1[j]); });
    __syncthreads();
    // M2 = E ⊙ tril(X̄2 X2ᵀ + 1).
    block_mma<kSplit>(m, m, hd, op(sXb2, ldh), op_t(sX2, ldh), 1.0f, [&](int i, int j, float v) {
      sM[i * ldb + j] = j <= i ? sTau[i] * sLam[j] * (v + one) : 0.0f;
    });
    __syncthreads();
    // Z̄2 = X̄2 W2 + b2 − M2 G2.
    block_mma<kSplit>(m, d, hd, op(sXb2, ldh), op(sW2, ldd), 1.0f, m, op(sM, ldb), op(sG2, ldd),
                      -1.0f, [&](int i, int j, float v) { sZb2[i * ldd + j] = v + sb2[j]; });
    __syncthreads();
    // O = [Q +] LN(Z̄2);  λ-weight G1 and G2 for the update.
    rows_output(p.O + seq0 + std::size_t(t0) * rs, rs, sZb2, sX, ldd, m, d, warp, kWarpsFallback,
                lane, gam, bet, p.eps, p.ln, p.res);
    if (m < b) {
      __syncthreads();
      continue;  // a short last mini-batch stays uncommitted
    }
    for (int i = tid; i < b * hd; i += kThreadsFallback) sZ1[(i / hd) * ldh + i % hd] *= sLam[i / hd];
    for (int i = tid; i < b * d; i += kThreadsFallback) sG2[(i / d) * ldd + i % d] *= sLam[i / d];
    __syncthreads();
    // W1 −= τ_b Kᵀ(λ ⊙ G1),  W2 −= τ_b X2ᵀ(λ ⊙ G2),  b1, b2 likewise.
    const float tb = sTau[b - 1];
    block_mma<kSplit>(d, hd, b, op_t(sK, ldd), op(sZ1, ldh), 1.0f,
                      [&](int i, int j, float v) { sW1[i * ldh + j] -= tb * v; });
    block_mma<kSplit>(hd, d, b, op_t(sX2, ldh), op(sG2, ldd), 1.0f,
                      [&](int i, int j, float v) { sW2[i * ldd + j] -= tb * v; });
    if (p.bias) {
      for (int c = tid; c < hd; c += kThreadsFallback) {
        float acc = 0.0f;
        for (int j = 0; j < b; ++j) acc += sZ1[j * ldh + c];
        sb1[c] -= tb * acc;
      }
      for (int c = tid; c < d; c += kThreadsFallback) {
        float acc = 0.0f;
        for (int j = 0; j < b; ++j) acc += sG2[j * ldd + c];
        sb2[c] -= tb * acc;
      }
    }
    __syncthreads();
  }
}

std::size_t fallback_block_bytes(const TttDims& dims) {
  return fallback_floats(dims.head_dim, dims.mini_batch) * sizeof(float);
}

// The kernels' parameters from the checked arguments; ck: whether checkpoints are written.
MlpParams mlp_params(const TttMlpForwardArgs& a, bool ck, float* scratch) {
  const TttDims& D = a.dims;
  MlpParams p{};
  set_token_inputs(p, a);
  p.W1 = a.W1;
  p.b1 = a.b1;
  p.W2 = a.W2;
  p.b2 = a.b2;
  p.O = a.O;
  p.scratch = scratch;
  p.ckW1 = ck ? a.checkpoint_W1 : nullptr;
  p.ckb1 = ck ? a.checkpoint_b1 : nullptr;
  p.ckW2 = ck ? a.checkpoint_W2 : nullptr;
  p.ckb2 = ck ? a.checkpoint_b2 : nullptr;
  p.group = ck ? a.checkpoint_group : 1;
  p.n_ck = ttt_num_checkpoints(D, p.group);
  set_dims(p, D);
  set_options(p, a.opt);
  return p;
}

}  // namespace
}  // namespace detail

using namespace detail;

std::size_t ttt_mlp_forward_workspace_bytes(const TttDims& dims) {
  check_dims("ttt_mlp_forward_workspace_bytes", dims);
  const std::size_t per_block = fallback_block_bytes(dims);
  return per_block > max_dynamic_smem() ? per_block * std::size_t(dims.batch) * dims.heads : 0;
}

bool ttt_mlp_forward_supports(TttMlpForwardVersion version, const TttDims& dims) {
  if (version == TttMlpForwardVersion::Bf16) return fused_supports<true>(dims);
  if (version == TttMlpForwardVersion::Tf32) return fused_supports<false>(dims);
  return version == TttMlpForwardVersion::Default || version == TttMlpForwardVersion::Fallback;
}

void ttt_mlp_forward(const TttMlpForwardArgs& a) {
  const char* fn = "ttt_mlp_forward";
  check_dims(fn, a.dims);
  check_eps(fn, a.opt);
  const bool bf16_io = a.version == TttMlpForwardVersion::Bf16;
  if (bf16_io) {
    require(!a.Q && !a.K && !a.V && !a.O,
            "ttt_mlp_forward: version Bf16 reads Q_bf16, K_bf16, V_bf16 and writes O_bf16; Q, K, V "
            "and O must be null");
    for (auto [ptr, name] : {std::pair<const void*, const char*>{a.Q_bf16, "Q_bf16"},
                             {a.K_bf16, "K_bf16"},
                             {a.V_bf16, "V_bf16"},
                             {a.O_bf16, "O_bf16"}})
      check_ptr(fn, ptr, name);
  } else {
    require(!a.Q_bf16 && !a.K_bf16 && !a.V_bf16 && !a.O_bf16,
            "ttt_mlp_forward: Q_bf16, K_bf16, V_bf16 and O_bf16 are for version Bf16 only");
    for (auto [ptr, name] :
         {std::pair<const void*, const char*>{a.Q, "Q"}, {a.K, "K"}, {a.V, "V"}, {a.O, "O"}})
      check_ptr(fn, ptr, name);
  }
  for (auto [ptr, name] : {std::pair<const void*, const char*>{a.lambda, "lambda"},
                           {a.tau, "tau"},
                           {a.W1, "W1"},
                           {a.W2, "W2"}})
    check_ptr(fn, ptr, name);
  if (a.opt.bias) {
    check_ptr(fn, a.b1, "b1 (bias is on)");
    check_ptr(fn, a.b2, "b2 (bias is on)");
  }
  check_ln_params(fn, a);
  const bool ck = a.checkpoint_W1 || a.checkpoint_W2 || a.checkpoint_b1 || a.checkpoint_b2;
  if (ck) {
    require(a.checkpoint_group >= 1,
            "ttt_mlp_forward: checkpoint_group must be >= 1 when checkpoints are requested");
    check_ptr(fn, a.checkpoint_W1, "checkpoint_W1 (other checkpoints are set)");
    check_ptr(fn, a.checkpoint_W2, "checkpoint_W2 (other checkpoints are set)");
  }
  require(a.version == TttMlpForwardVersion::Default ||
              a.version == TttMlpForwardVersion::Fallback ||
              a.version == TttMlpForwardVersion::Tf32 || bf16_io,
          "ttt_mlp_forward: unknown version " + std::to_string(int(a.version)));
  const TttDims& D = a.dims;
  // The alignment first: it needs no device (the shape checks read its shared-memory limit).
  if (bf16_io) {
    require(
        aligned16(a.Q_bf16) && aligned16(a.K_bf16) && aligned16(a.V_bf16) && aligned16(a.O_bf16),
        "ttt_mlp_forward: version Bf16 needs Q_bf16, K_bf16, V_bf16 and O_bf16 16-byte aligned");
    require(fused_supports<true>(D),
            "ttt_mlp_forward: version Bf16 needs mini_batch 16 and head_dim 16, 32 "
            "or 64 (got head_dim " +
                std::to_string(D.head_dim) + ", mini_batch " + std::to_string(D.mini_batch) + ")");
    const MlpParams p = mlp_params(a, ck, nullptr);
    const MlpBf16Io io{a.Q_bf16, a.K_bf16, a.V_bf16, a.O_bf16};
    dispatch_fused<true>(p, io, D.head_dim, D.batch * D.heads, a.stream);
    return;
  }
  if (a.version == TttMlpForwardVersion::Tf32) {
    require(aligned16(a.Q) && aligned16(a.K) && aligned16(a.V) && aligned16(a.O),
            "ttt_mlp_forward: version Tf32 needs Q, K, V and O 16-byte aligned");
    require(
        fused_supports<false>(D),
        "ttt_mlp_forward: version Tf32 needs mini_batch 16 and head_dim 16, 32 or 64 (the fused "
        "kernel's shapes; ttt_mlp_forward_supports)");
    // The fused kernel with one tf32 product per term.
    dispatch_fused<false>(mlp_params(a, ck, nullptr), MlpBf16Io{}, D.head_dim, D.batch * D.heads,
                          a.stream);
    return;
  }
  // Default: the fused kernel in 3xTF32 where it applies (it is faster than the fallback at the
  // training shape; `tttlab bench --device cuda` times both), the fallback elsewhere, unaligned
  // pointers included.
  if (a.version == TttMlpForwardVersion::Default && fused_supports<false>(D) && aligned16(a.Q) &&
      aligned16(a.K) && aligned16(a.V) && aligned16(a.O)) {
    dispatch_fused<false, true>(mlp_params(a, ck, nullptr), MlpBf16Io{}, D.head_dim,
                                D.batch * D.heads, a.stream);
    return;
  }
  const bool in_smem = fallback_block_bytes(D) <= max_dynamic_smem();
  const std::size_t need = in_smem ? 0 : ttt_mlp_forward_workspace_bytes(D);
  if (need > 0) {
    check_ptr(fn, a.workspace, "workspace (ttt_mlp_forward_workspace_bytes > 0 for this shape)");
    require(a.workspace_bytes >= need, "ttt_mlp_forward: workspace has " +
                                           std::to_string(a.workspace_bytes) + " bytes, needs " +
                                           std::to_string(need));
  }
  const MlpParams p = mlp_params(a, ck, need > 0 ? static_cast<float*>(a.workspace) : nullptr);
  const std::size_t smem = in_smem ? fallback_block_bytes(D) : 0;
  set_smem_limit(reinterpret_cast<const void*>(&mlp_forward_fallback_kernel), smem);
  mlp_forward_fallback_kernel<<<D.batch * D.heads, kThreadsFallback, smem, a.stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tttlab::kernels
