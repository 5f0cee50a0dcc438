// TTT-MLP, dual form, forward on the GPU, hidden width 4d (tttlab/kernels/ttt.hpp; maths in
// docs/MATH.md §5; the CPU engine's dual_chunk_mlp in core/src/ttt/inner.cpp, which both kernels
// follow). Two kernels, both with every matrix product on tensor cores in 3xTF32; the fused one also
// as version Tf32 (template argument SPLIT = false: one tf32 product per term), what the training
// step runs with tf32 products:
//
// THE FUSED KERNEL (Default where b = 16 and d ∈ {16, 32, 64}): the fallback's state and algorithm
// (every matrix in shared memory, 3xTF32 tensor-core products, 16 warps), reorganised around its
// critical path: 6 barriers per mini-batch instead of 11.
//  - The products whose output is one 16-row tile but whose k is long (Z2 = X2 W2 and
//    Z̄2 = X̄2 W2 with k = 4d: d/8 tiles; M2 = X̄2 X2ᵀ with k = 4d and M1 = Q Kᵀ: 2 tiles) are split
//    over k so that all 16 warps have a task; the partial tiles go to shared memory and the warp
//    that owns a row sums them where the row is consumed (the LN+L2 gradient for Z2, the output
//    row for Z̄2, whose M2 G2 term is then a per-row sum on CUDA cores).
//  - λ is folded into G1 and G2 once (they are only used as λ ⊙ G: in M G with M's λ_j taken out,
//    and in the update), so there is no scaling pass.
//  - Z1 = K W1 and Q W1 share one pass over W1 (its fragments loaded and split once); M1 is
//    computed beside them. G1 and X̄2 = gelu(Q W1 + b1 − M1 G1) are computed by the same warps tile
//    for tile (same (m, n) in tile_mma), so they need no block barrier between them.
//  - The state update is split where it is free: W1, b1 beside the M2 / Z̄2 partials, W2 beside the
//    output rows; b2 is double-buffered because the output rows still read the old one.
//  - The next mini-batch's K, Q, V, λ are loaded into registers while the current one is computed.
//  - Every product has its shape and operand strides fixed at compile time (tile_mma, splitk_strip:
//    fragment addresses are a base plus immediates, no partial-tile paths); the Z2 / Z̄2 split-k
//    tasks are two n-tiles wide so each X2 / X̄2 fragment is split once for both; GELU uses the SFU
//    exponential instead of tanhf (run 16: 5.38 → 4.66 ms at d = 64 on an H200).
//
// THE FALLBACK (every supported shape): one block of 512 threads per (sequence, head), the state
// W1 [d, 4d], b1, W2 [4d, d], b2 in shared memory for the whole sequence where it fits, otherwise in
// a per-block slice of the workspace (the same code through generic pointers; L2 holds it).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "cuda_check.hpp"
#include "ttt_common.cuh"
#include "ttt_host.hpp"
#include "ttt_mma.cuh"
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

// ---- The fused kernel ----------------------------------------------------------------------------

constexpr int kB = 16;  // the mini-batch: one m16 tile
constexpr int kThreadsFused = 512;
constexpr int kWarpsFused = kThreadsFused / 32;  // = kB: one warp per row in the row passes


template <int D>
struct Layout {
  static constexpr int HD = 4 * D, LDD = D + 4, LDH = HD + 4, LDM = kB + 4;
  static constexpr int NT_Z = D / 8;                              // n-tiles of Z2, Z̄2
  static constexpr int NTW_Z = D >= 32 ? 2 : 1;                   // n-tiles per warp task
  static constexpr int NS_Z = kWarpsFused * NTW_Z / NT_Z;            // their k-splits
  static constexpr int NS_M1 = D / 8 < 8 ? D / 8 : 8;             // k-splits of Q Kᵀ (k = d)
  static constexpr int NS_M2 = 8;                                 // k-splits of X̄2 X2ᵀ (k = 4d)
  static constexpr int PZ = NS_Z * kB * D, PM = 8 * kB * kB;      // partial buffers
  static constexpr int PF = (kB * D + kThreadsFused - 1) / kThreadsFused;  // prefetched K, Q per thread
  static constexpr std::size_t floats = std::size_t(D) * LDH + std::size_t(HD) * LDD + HD + 2 * D +
                                        3 * kB * LDD + 3 * kB * LDH + kB * LDM + PZ + PM + 2 * kB;
  static_assert(HD / 8 % NS_Z == 0 && D / 8 % NS_M1 == 0 && HD / 8 % NS_M2 == 0, "k-splits");
};

// GELU with tanh(u) = 1 − 2 / (1 + e^{2u}) on the SFU (ex2, rcp): ~7 instructions instead of tanhf's
// ~20 and a divergent branch, three times per element of a 16 × 4d tile per mini-batch. Absolute
// error of t ~1e-7 (the exponential's relative error is damped by 2e/(1+e)² ≤ 1/2); e^{2u} = inf
// gives t = 1, 0 gives −1.
__device__ __forceinline__ float tanh_sfu(float u) {
  return 1.0f - __fdividef(2.0f, 1.0f + __expf(2.0f * u));
}

__device__ __forceinline__ float gelu_sfu(float x) {
  const float t = tanh_sfu(0.7978845608028654f * (x + 0.044715f * x * x * x));
  return 0.5f * x * (1.0f + t);
}

__device__ __forceinline__ float gelu_sfu_grad(float x) {
  const float t = tanh_sfu(0.7978845608028654f * (x + 0.044715f * x * x * x));
  const float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

// A matrix operand in shared memory with compile-time strides: element (i, k) at p[i·RS + k·CS]
// (a transpose swaps them), so every fragment address is a base register plus an immediate.
template <int RS, int CS>
struct Op {
  const float* p;
  __device__ __forceinline__ float at(int i, int k) const { return p[i * RS + k * CS]; }
};
template <int LD>
__device__ __forceinline__ Op<LD, 1> op_n(const float* p) {
  return {p};
}
template <int LD>
__device__ __forceinline__ Op<1, LD> op_tr(const float* p) {
  return {p};
}

// The tf32 parts of one k-step's A fragment (rows r0, r0 + 8) and B fragment (column j): with SPLIT
// the 3xTF32 hi and lo parts, without it the raw bits (a tf32 truncation) and no lo part.
template <bool SPLIT, class OA>
__device__ __forceinline__ void a_frag(OA A, int r0, int ka, uint32_t (&h)[4], uint32_t (&l)[4]) {
  tf32_parts<SPLIT>(A.at(r0, ka), h[0], l[0]);
  tf32_parts<SPLIT>(A.at(r0 + 8, ka), h[1], l[1]);
  tf32_parts<SPLIT>(A.at(r0, ka + 4), h[2], l[2]);
  tf32_parts<SPLIT>(A.at(r0 + 8, ka + 4), h[3], l[3]);
}
template <bool SPLIT, class OB>
__device__ __forceinline__ void b_frag(OB B, int ka, int j, uint32_t (&h)[2], uint32_t (&l)[2]) {
  tf32_parts<SPLIT>(B.at(ka, j), h[0], l[0]);
  tf32_parts<SPLIT>(B.at(ka + 4, j), h[1], l[1]);
}
// c += A·B from the parts: the 3xTF32 sum (small terms first) with SPLIT, else one tf32 product.
template <bool SPLIT>
__device__ __forceinline__ void mma3(float (&c)[4], const uint32_t (&ah)[4], const uint32_t (&al)[4],
                                     const uint32_t (&bh)[2], const uint32_t (&bl)[2]) {
  if constexpr (SPLIT) {
    mma_tf32(c, al[0], al[1], al[2], al[3], bh[0], bh[1]);
    mma_tf32(c, ah[0], ah[1], ah[2], ah[3], bl[0], bl[1]);
  }
  mma_tf32(c, ah[0], ah[1], ah[2], ah[3], bh[0], bh[1]);
}

// block_mma specialised to this kernel: R = α A B for R of M × N (multiples of 16 and 8), k = K, 16
// warps, every shape and stride known at compile time (no partial-tile paths). A warp task is 16 rows
// × NTW n-tiles (block_mma's rule: the widest that still gives every warp a task), each A fragment
// split once for the NTW products. The task of an element depends only on (M, N): two calls with the
// same (M, N) give each element to the same thread, which lets phase D chain two products with a
// __syncwarp. (Tasks of two m-tiles, each B fragment split once for both, were measured in run 16:
// they spill at d = 64 and were slower, 4.91 against 4.66 ms.)
template <int M, int N>
struct TileShape {
  static constexpr int MT = M / 16, NT = N / 8;
  static constexpr int NTW = MT * (NT / 4) >= kWarpsFused && NT % 4 == 0   ? 4
                             : MT * (NT / 2) >= kWarpsFused && NT % 2 == 0 ? 2
                                                                         : 1;
  static_assert(M % 16 == 0 && N % 8 == 0, "whole tiles");
};

template <int M, int N, int K, bool SPLIT, class OA, class OB, class Store>
__device__ __forceinline__ void tile_mma(OA A, OB B, float alpha, int warp, int lane, Store store) {
  using S = TileShape<M, N>;
  constexpr int NTW = S::NTW, NG = S::NT / NTW, TASKS = S::MT * NG, KT = K / 8;
  constexpr int ACC = KT % (4 / NTW) == 0 ? 4 / NTW : (KT % 2 == 0 ? 2 : 1);  // chains per n-tile
  static_assert(K % 8 == 0, "whole k-steps");
  const int g = lane >> 2, t = lane & 3;
  for (int task = warp; task < TASKS; task += kWarpsFused) {
    const int i0 = (task / NG) * 16, j0 = (task % NG) * 8 * NTW;
    float c[ACC][NTW][4] = {};
#pragma unroll
    for (int q = 0; q < KT; ++q) {
      const int ka = q * 8 + t;
      uint32_t ah[4], al[4];
      a_frag<SPLIT>(A, i0 + g, ka, ah, al);
#pragma unroll
      for (int u = 0; u < NTW; ++u) {
        uint32_t bh[2], bl[2];
        b_frag<SPLIT>(B, ka, j0 + 8 * u + g, bh, bl);
        mma3<SPLIT>(c[q % ACC][u], ah, al, bh, bl);
      }
    }
#pragma unroll
    for (int u = 0; u < NTW; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = 0.0f;
#pragma unroll
        for (int s = 0; s < ACC; ++s) v += c[s][u][e];
        store(i0 + g + (e < 2 ? 0 : 8), j0 + 8 * u + 2 * t + (e & 1), alpha * v);
      }
  }
}

// P[s][i][j] = Σ over the s-th of NSPLIT equal k-ranges of A(i, k) B(k, j), i < 16, j < N, in
// 3xTF32; tasks (NTW n-tiles, split) go round-robin over the warps, each A fragment split once for
// the NTW products, two accumulator sets per n-tile.
template <int N, int K, int NSPLIT, int NTW, bool SPLIT, class OA, class OB>
__device__ __forceinline__ void splitk_strip(OA A, OB B, float* P, int warp, int lane) {
  constexpr int NG = N / 8 / NTW, KS = K / 8 / NSPLIT;
  static_assert(N % (8 * NTW) == 0 && K % (8 * NSPLIT) == 0, "whole tasks");
  const int g = lane >> 2, t = lane & 3;
  for (int task = warp; task < NG * NSPLIT; task += kWarpsFused) {
    const int j0 = (task % NG) * 8 * NTW, s = task / NG;
    float c[2][NTW][4] = {};
#pragma unroll
    for (int q = 0; q < KS; ++q) {
      const int ka = (s * KS + q) * 8 + t;
      uint32_t ah[4], al[4];
      a_frag<SPLIT>(A, g, ka, ah, al);
#pragma unroll
      for (int u = 0; u < NTW; ++u) {
        uint32_t bh[2], bl[2];
        b_frag<SPLIT>(B, ka, j0 + 8 * u + g, bh, bl);
        mma3<SPLIT>(c[q & 1][u], ah, al, bh, bl);
      }
    }
#pragma unroll
    for (int u = 0; u < NTW; ++u) {
      float* out = P + s * kB * N + j0 + 8 * u + 2 * t;
      out[g * N] = c[0][u][0] + c[1][u][0];
      out[g * N + 1] = c[0][u][1] + c[1][u][1];
      out[(g + 8) * N] = c[0][u][2] + c[1][u][2];
      out[(g + 8) * N + 1] = c[0][u][3] + c[1][u][3];
    }
  }
}

// Z1 = K W1 and Z̄1₀ = Q W1 (16 × 4d, k = d) in one pass over W1: each warp task is 16 rows ×
// 8·NTW columns, and the B fragments of W1 are loaded and split once for both products.
// store(i, j, z1, zb1) gets every element once.
template <int D, bool SPLIT, class Store>
__device__ __forceinline__ void dual_strip(const float* sK, const float* sQ, const float* sW1,
                                           int warp, int lane, Store store) {
  constexpr int LDD = D + 4, LDH = 4 * D + 4, NT = 4 * D / 8;
  constexpr int NTW = NT >= 2 * kWarpsFused ? NT / kWarpsFused : 1, NS = NT / NTW;
  const int g = lane >> 2, t = lane & 3;
  for (int task = warp; task < NS; task += kWarpsFused) {
    const int j0 = task * 8 * NTW;
    float ck[NTW][4] = {}, cq[NTW][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < D; k0 += 8) {
      const int ka = k0 + t, kb = ka + 4;
      uint32_t kh[4], kl[4], qh[4], ql[4];
      tf32_parts<SPLIT>(sK[g * LDD + ka], kh[0], kl[0]);
      tf32_parts<SPLIT>(sK[(g + 8) * LDD + ka], kh[1], kl[1]);
      tf32_parts<SPLIT>(sK[g * LDD + kb], kh[2], kl[2]);
      tf32_parts<SPLIT>(sK[(g + 8) * LDD + kb], kh[3], kl[3]);
      tf32_parts<SPLIT>(sQ[g * LDD + ka], qh[0], ql[0]);
      tf32_parts<SPLIT>(sQ[(g + 8) * LDD + ka], qh[1], ql[1]);
      tf32_parts<SPLIT>(sQ[g * LDD + kb], qh[2], ql[2]);
      tf32_parts<SPLIT>(sQ[(g + 8) * LDD + kb], qh[3], ql[3]);
#pragma unroll
      for (int u = 0; u < NTW; ++u) {
        const int j = j0 + 8 * u + g;
        uint32_t bh0, bl0, bh1, bl1;
        tf32_parts<SPLIT>(sW1[ka * LDH + j], bh0, bl0);
        tf32_parts<SPLIT>(sW1[kb * LDH + j], bh1, bl1);
        if constexpr (SPLIT) {
          mma_tf32(ck[u], kl[0], kl[1], kl[2], kl[3], bh0, bh1);
          mma_tf32(cq[u], ql[0], ql[1], ql[2], ql[3], bh0, bh1);
          mma_tf32(ck[u], kh[0], kh[1], kh[2], kh[3], bl0, bl1);
          mma_tf32(cq[u], qh[0], qh[1], qh[2], qh[3], bl0, bl1);
        }
        mma_tf32(ck[u], kh[0], kh[1], kh[2], kh[3], bh0, bh1);
        mma_tf32(cq[u], qh[0], qh[1], qh[2], qh[3], bh0, bh1);
      }
    }
#pragma unroll
    for (int u = 0; u < NTW; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        store(e < 2 ? g : g + 8, j0 + 8 * u + 2 * t + (e & 1), ck[u][e], cq[u][e]);
  }
}

template <int D, bool SPLIT>
__global__ void __launch_bounds__(kThreadsFused, 1) mlp_forward_fused_kernel(MlpParams p) {
  using L = Layout<D>;
  constexpr int HD = L::HD, LDD = L::LDD, LDH = L::LDH, LDM = L::LDM;
  extern __shared__ float smem[];
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float* sW1 = smem;                         // [D, LDH]
  float* sW2 = sW1 + D * LDH;                // [HD, LDD]
  float* sb1 = sW2 + HD * LDD;               // [HD]
  float* sb2 = sb1 + HD;                     // [2][D]: the committed b2 and the next one
  float* sK = sb2 + 2 * D;                   // [kB, LDD]
  float* sQ = sK + kB * LDD;                 // [kB, LDD]
  float* sG2 = sQ + kB * LDD;                // [kB, LDD]  λ ⊙ G2
  float* sZ1 = sG2 + kB * LDD;               // [kB, LDH]  Z1, then λ ⊙ G1
  float* sX2 = sZ1 + kB * LDH;               // [kB, LDH]  X2 = gelu(Z1)
  float* sXb2 = sX2 + kB * LDH;              // [kB, LDH]  Q W1 + b1, then X̄2 = gelu(Z̄1)
  float* sM = sXb2 + kB * LDH;               // [kB, LDM]  M1 without λ_j
  float* sPZ = sM + kB * LDM;                // [NS_Z, kB, D]  partials of Z2, then of Z̄2
  float* sPM = sPZ + L::PZ;                  // [≤ 8, kB, kB]  partials of Q Kᵀ, then of X̄2 X2ᵀ
  float* sLam = sPM + L::PM;                 // [kB]
  float* sTau = sLam + kB;                   // [kB]

  const std::size_t rs = std::size_t(p.H) * D;
  const std::size_t seq0 = std::size_t(n) * p.T * rs + std::size_t(h) * D;
  for (int i = tid; i < D * HD; i += kThreadsFused) {
    sW1[(i / HD) * LDH + i % HD] = p.W1[std::size_t(h) * D * HD + i];
    sW2[(i / D) * LDD + i % D] = p.W2[std::size_t(h) * HD * D + i];
  }
  for (int i = tid; i < HD; i += kThreadsFused) sb1[i] = p.bias ? p.b1[std::size_t(h) * HD + i] : 0.0f;
  for (int i = tid; i < D; i += kThreadsFused) sb2[i] = p.bias ? p.b2[std::size_t(h) * D + i] : 0.0f;
  if (tid < kB) sTau[tid] = p.tau[tid];
  const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * D, D, lane) : RowFrag{};
  const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * D, D, lane) : RowFrag{};
  const float one = p.bias ? 1.0f : 0.0f;

  // The inputs of mini-batch mb into registers (rows past T as zeros): K and Q spread over the
  // block, V's row `warp` in the warp (it is only read by the row pass), λ in threads 0..15.
  float pk[L::PF], pq[L::PF], plam = 0.0f;
  RowFrag pv;
  auto prefetch = [&](int mb) {
    const int t0 = mb * kB, m = min(kB, p.T - t0);
#pragma unroll
    for (int u = 0; u < L::PF; ++u) {
      const int i = tid + u * kThreadsFused, r = i / D, c = i % D;
      const bool in = i < kB * D && r < m;
      const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
      pk[u] = in ? p.K[g] : 0.0f;
      pq[u] = in ? p.Q[g] : 0.0f;
    }
    if (warp < m) {
      pv = row_load(p.V + seq0 + std::size_t(t0 + warp) * rs, D, lane);
    } else {
      pv = RowFrag{};
    }
    plam = tid < m ? p.lam[std::size_t(blk) * p.T + t0 + tid] : 0.0f;
  };
  auto stage = [&]() {
#pragma unroll
    for (int u = 0; u < L::PF; ++u) {
      const int i = tid + u * kThreadsFused;
      if (i < kB * D) {
        sK[(i / D) * LDD + i % D] = pk[u];
        sQ[(i / D) * LDD + i % D] = pq[u];
      }
    }
    if (tid < kB) sLam[tid] = plam;
  };
  prefetch(0);
  stage();
  RowFrag v = pv;
  __syncthreads();

  const int n_mb = (p.T + kB - 1) / kB;
  int cur = 0;  // which half of sb2 holds the committed b2
  for (int mb = 0; mb < n_mb; ++mb) {
    const int t0 = mb * kB, m = min(kB, p.T - t0);
    const float* b2 = sb2 + cur * D;
    if (p.ckW1 && mb % p.group == 0) {
      const std::size_t ck = std::size_t(blk) * p.n_ck + mb / p.group;
      for (int i = tid; i < D * HD; i += kThreadsFused) {
        p.ckW1[ck * D * HD + i] = sW1[(i / HD) * LDH + i % HD];
        p.ckW2[ck * HD * D + i] = sW2[(i / D) * LDD + i % D];
      }
      if (p.ckb1)
        for (int c = tid; c < HD; c += kThreadsFused) p.ckb1[ck * HD + c] = sb1[c];
      if (p.ckb2)
        for (int c = tid; c < D; c += kThreadsFused) p.ckb2[ck * D + c] = b2[c];
    }

    // A. Z1 = K W1 + b1, X2 = gelu(Z1), and Q W1 + b1;  partials of Q Kᵀ.
    dual_strip<D, SPLIT>(sK, sQ, sW1, warp, lane, [&](int i, int j, float zk, float zq) {
      const float z = zk + sb1[j];
      sZ1[i * LDH + j] = z;
      sX2[i * LDH + j] = gelu_sfu(z);
      sXb2[i * LDH + j] = zq + sb1[j];
    });
    splitk_strip<kB, D, L::NS_M1, 1, SPLIT>(op_n<LDD>(sQ), op_tr<LDD>(sK), sPM, warp, lane);
    __syncthreads();

    // B. Partials of Z2 = X2 W2.
    splitk_strip<D, HD, L::NS_Z, L::NTW_Z, SPLIT>(op_n<LDH>(sX2), op_n<LDD>(sW2), sPZ, warp, lane);
    __syncthreads();

    // C. Row `warp`: λ ⊙ G2 = λ ⊙ lnl2(Z2 + b2, V [− K]);  M1 without λ_j (τ_i (q_i·k_j + 1), j ≤ i).
    RowFrag qres{};
    {
      const int r = warp;
      RowFrag z;
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) {
        const int c = lane + 32 * u;
        float acc = 0.0f;
        if (c < D) {
          acc = b2[c];
#pragma unroll
          for (int s = 0; s < L::NS_Z; ++s) acc += sPZ[(s * kB + r) * D + c];
        }
        z.v[u] = acc;
      }
      RowFrag tgt = v;
      if (p.res) {
        const RowFrag k = row_load(sK + r * LDD, D, lane);
#pragma unroll
        for (int u = 0; u < kPerLane; ++u) tgt.v[u] -= k.v[u];
        qres = row_load(sQ + r * LDD, D, lane);
      }
      RowFrag g2 = row_loss_grad(z, tgt, gam, bet, D, lane, p.eps, p.ln);
      const float lr = sLam[r];
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) g2.v[u] *= lr;
      row_store(sG2 + r * LDD, g2, D, lane);
      if (lane < kB) {
        float dot = 0.0f;
#pragma unroll
        for (int s = 0; s < L::NS_M1; ++s) dot += sPM[(s * kB + r) * kB + lane];
        sM[r * LDM + lane] = lane <= r ? sTau[r] * (dot + one) : 0.0f;
      }
    }
    __syncthreads();

    // D. λ ⊙ G1 = (λ ⊙ G2) W2ᵀ ⊙ gelu′(Z1), in place of Z1; then, tile for tile by the same warps,
    // X̄2 = gelu(Q W1 + b1 − M1 G1).
    tile_mma<kB, HD, D, SPLIT>(op_n<LDD>(sG2), op_tr<LDD>(sW2), 1.0f, warp, lane, [&](int i, int j, float val) {
      sZ1[i * LDH + j] = val * gelu_sfu_grad(sZ1[i * LDH + j]);
    });
    __syncwarp();
    tile_mma<kB, HD, kB, SPLIT>(op_n<LDM>(sM), op_n<LDH>(sZ1), -1.0f, warp, lane, [&](int i, int j, float val) {
      sXb2[i * LDH + j] = gelu_sfu(sXb2[i * LDH + j] + val);
    });
    __syncthreads();

    // E. Partials of M2 = X̄2 X2ᵀ and Z̄2 = X̄2 W2;  W1 −= τ_b Kᵀ(λ ⊙ G1), b1, and the next b2;
    // the next mini-batch's inputs start to load.
    if (mb + 1 < n_mb) prefetch(mb + 1);
    splitk_strip<kB, HD, L::NS_M2, 1, SPLIT>(op_n<LDH>(sXb2), op_tr<LDH>(sX2), sPM, warp, lane);
    splitk_strip<D, HD, L::NS_Z, L::NTW_Z, SPLIT>(op_n<LDH>(sXb2), op_n<LDD>(sW2), sPZ, warp, lane);
    const bool commit = m == kB;  // a short last mini-batch stays uncommitted
    const float tb = sTau[kB - 1];
    if (commit) {
      tile_mma<D, HD, kB, SPLIT>(op_tr<LDD>(sK), op_n<LDH>(sZ1), 1.0f, warp, lane,
                      [&](int i, int j, float val) { sW1[i * LDH + j] -= tb * val; });
      if (p.bias) {
        for (int c = tid; c < HD; c += kThreadsFused) {
          float acc = 0.0f;
#pragma unroll
          for (int j = 0; j < kB; ++j) acc += sZ1[j * LDH + c];
          sb1[c] -= tb * acc;
        }
        for (int c = tid; c < D; c += kThreadsFused) {
          float acc = 0.0f;
#pragma unroll
          for (int j = 0; j < kB; ++j) acc += sG2[j * LDD + c];
          sb2[(cur ^ 1) * D + c] = b2[c] - tb * acc;
        }
      }
    }
    __syncthreads();

    // F. Row `warp`: Z̄2 = Σ partials + b2 − M2 (λ ⊙ G2), O = [Q +] LN(Z̄2);  W2 −= τ_b X2ᵀ(λ ⊙ G2);
    // the next inputs into shared memory (nothing here reads K, Q or λ).
    {
      const int r = warp;
      float m2 = 0.0f;
      if (lane < kB) {
        float dot = 0.0f;
#pragma unroll
        for (int s = 0; s < L::NS_M2; ++s) dot += sPM[(s * kB + r) * kB + lane];
        m2 = lane <= r ? sTau[r] * (dot + one) : 0.0f;
      }
      RowFrag z;
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) {
        const int c = lane + 32 * u;
        float acc = 0.0f;
        if (c < D) {
          acc = b2[c];
#pragma unroll
          for (int s = 0; s < L::NS_Z; ++s) acc += sPZ[(s * kB + r) * D + c];
        }
        z.v[u] = acc;
      }
#pragma unroll
      for (int j = 0; j < kB; ++j) {
        const float mj = __shfl_sync(0xffffffffu, m2, j);
#pragma unroll
        for (int u = 0; u < kPerLane; ++u) {
          const int c = lane + 32 * u;
          if (c < D) z.v[u] -= mj * sG2[j * LDD + c];
        }
      }
      RowFrag o = row_layer_norm(z, gam, bet, D, lane, p.eps, p.ln);
      if (p.res) {
#pragma unroll
        for (int u = 0; u < kPerLane; ++u) o.v[u] += qres.v[u];
      }
      if (r < m) row_store(p.O + seq0 + std::size_t(t0 + r) * rs, o, D, lane);
    }
    if (commit) {
      tile_mma<HD, D, kB, SPLIT>(op_tr<LDH>(sX2), op_n<LDD>(sG2), 1.0f, warp, lane,
                      [&](int i, int j, float val) { sW2[i * LDD + j] -= tb * val; });
      if (p.bias) cur ^= 1;
    }
    if (mb + 1 < n_mb) {
      stage();
      v = pv;
    }
    __syncthreads();
  }
}

struct FusedShape {
  int d;
  const void* kernel;
  std::size_t bytes;
};

template <bool SPLIT>
FusedShape fused_shape(int d) {
  switch (d) {
    case 16:
      return {16, reinterpret_cast<const void*>(&mlp_forward_fused_kernel<16, SPLIT>),
              Layout<16>::floats * sizeof(float)};
    case 32:
      return {32, reinterpret_cast<const void*>(&mlp_forward_fused_kernel<32, SPLIT>),
              Layout<32>::floats * sizeof(float)};
    case 64:
      return {64, reinterpret_cast<const void*>(&mlp_forward_fused_kernel<64, SPLIT>),
              Layout<64>::floats * sizeof(float)};
    default:
      return {d, nullptr, 0};
  }
}

// ---- Version Bf16: bf16 inputs, output and products ----------------------------------------------
//
// The fused kernel's algorithm and phases with Q, K, V read and O written as bf16, and every product
// on bf16 operands (mma.m16n8k16, fp32 accumulation): half the mma instructions of tf32, and the
// operands that are products' outputs or inputs (K, Q, X2, X̄2, λ ⊙ G1, λ ⊙ G2, M1) are stored in bf16
// once and read with ldmatrix, one instruction per 16 × 16 fragment instead of eight scalar loads.
// What stays fp32: the state W1, b1, W2, b2 (rounded to bf16 only as it enters a product), Z1, the
// GELU and its derivative, the LayerNorms, G2 for the output rows, the bias sums, every partial sum,
// and the checkpoints.
//  - W1 and W2 are stored as pairs along the dimension their products contract: element (k, j) of W1
//    at 2·((k/2)·LW1 + j) + k%2, element (r, c) of W2 at 2·((r/2)·LW2 + c) + r%2, so a bf16 B
//    fragment register (two consecutive k of one column) is one 8-byte load; the updates are
//    computed transposed (G1ᵀK, G2ᵀX2) so that a thread's two accumulators are such a pair too.
//  - Z1 and Q W1 + b1 stay in the registers of the warp that computed them until phase D, whose
//    products give every element to the same thread (same 16 × 8·NTW tasks), so they have no
//    shared-memory buffers; the b1 update is a column sum of G1 over the warp's lanes.
using mma_detail::ldsm_x4;

template <int D>
struct Bf16MlpLayout {
  static constexpr int HD = 4 * D;
  static constexpr int LW1 = HD + 4;  // W1 pair rows (in pairs): the 8-byte loads of a B fragment
  static constexpr int LW2 = D + 4;   // and W2's fall on distinct banks (stride ≡ 8 words mod 32)
  static constexpr int LX = D + 8;  // bf16 rows of width d (K, Q, λ ⊙ G2): 16-byte aligned, and
  static constexpr int LXH = HD + 8;  // the 8 rows an ldmatrix reads on distinct banks; of width 4d
  static constexpr int LM = kB + 8;   // (X2, X̄2, λ ⊙ G1); M1
  static constexpr int LDD = D + 4;   // fp32 λ ⊙ G2
  // Products 16 × 4d (Z1 and Q W1, then G1 and X̄2): tasks of NTW_H n-tiles, one per warp.
  static constexpr int NT_H = HD / 8, NTW_H = NT_H >= 2 * kWarpsFused ? NT_H / kWarpsFused : 1;
  static constexpr int TASKS_H = NT_H / NTW_H;
  // Z2 and Z̄2 (16 × d, k = 4d): NTW_Z n-tiles × NS_Z k-splits; Q Kᵀ: one task per k16-step;
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
                               K16 = B2 + 2 * D * 4, Q16 = K16 + kB * LX * 2,
                               G2H = Q16 + kB * LX * 2, X2H = G2H + kB * LX * 2,
                               XB2H = X2H + kB * LXH * 2, G1H = XB2H + kB * LXH * 2,
                               M1H = G1H + kB * LXH * 2, G2 = M1H + kB * LM * 2,
                               PZ = G2 + kB * LDD * 4, PM = PZ + std::size_t(NS_Z) * kB * D * 4,
                               LAM = PM + NS_M * kB * kB * 4, TAU = LAM + kB * 4,
                               bytes = TAU + kB * 4;
  static_assert(NTW_H <= 2 && TASKS_H <= kWarpsFused && KS_H % NS_Z == 0 && KS_H % NS_M2 == 0 &&
                    G_Z * NS_Z <= kWarpsFused && (HD / 8) % NTW_U2 == 0 && NTW_U2 % 2 == 0,
                "tasks");
  static_assert(W2 % 16 == 0 && B1 % 16 == 0 && K16 % 16 == 0 && X2H % 16 == 0 && G2 % 16 == 0 &&
                    PZ % 16 == 0 && PM % 16 == 0 && LAM % 16 == 0,
                "16-byte aligned buffers");
};

struct MlpBf16Io {
  const std::uint16_t *Q, *K, *V;
  std::uint16_t* O;
};

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

// The bf16 B fragment register of two consecutive k of one column, from an fp32 pair (8 bytes).
__device__ __forceinline__ uint32_t pair_bf16(const float* p) {
  const float2 v = *reinterpret_cast<const float2*>(p);
  return pack_bf16(v.x, v.y);
}

__device__ __forceinline__ RowFrag row_load_bf16(const std::uint16_t* p, int n, int lane) {
  RowFrag r;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    const int c = lane + 32 * u;
    r.v[u] = c < n ? bf16_value(p[c]) : 0.0f;
  }
  return r;
}

__device__ __forceinline__ void row_store_bf16(std::uint16_t* p, const RowFrag& r, int n,
                                               int lane) {
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    const int c = lane + 32 * u;
    if (c < n) p[c] = bf16_bits(r.v[u]);
  }
}

// P[s] (16 × N fp32, row-major) = the s-th k-split of A B for a 16-row bf16 A (read with ldmatrix
// from uA, leading dimension LDA) and an fp32 pair-stored B (element (k, j) at 2·((k/2)·LDB + j) +
// k%2): tasks of NTW n-tiles × NS k-splits go to the warps in turn.
template <int N, int K, int NS, int NTW, int LDA, int LDB>
__device__ __forceinline__ void splitk_bf16(uint32_t uA, const float* B, float* P, int warp,
                                            int lane) {
  constexpr int NG = N / 8 / NTW, KS = K / 16 / NS;
  const int g = lane >> 2, t = lane & 3;
  for (int task = warp; task < NG * NS; task += kWarpsFused) {
    const int j0 = (task % NG) * 8 * NTW, s = task / NG;
    float c[NTW][4] = {};
#pragma unroll
    for (int q = 0; q < KS; ++q) {
      const int k0 = (s * KS + q) * 16;
      uint32_t a[4];
      ldsm_x4(a, uA + frag_rows<LDA>(lane) + 2 * k0);
#pragma unroll
      for (int u = 0; u < NTW; ++u) {
        const float* b = B + 2 * ((k0 / 2 + t) * LDB + j0 + 8 * u + g);
        mma_bf16(c[u], a, pair_bf16(b), pair_bf16(b + 8 * LDB));
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

// P[s] (16 × 16 fp32) = the s-th of NS k-splits of A Bᵀ for two 16-row bf16 matrices (K = their
// width), both read with ldmatrix: Q Kᵀ, X̄2 X2ᵀ. Task s goes to warp FIRST + s.
template <int K, int NS, int LD, int FIRST>
__device__ __forceinline__ void splitk_abt(uint32_t uA, uint32_t uB, float* P, int warp, int lane) {
  constexpr int KS = K / 16 / NS;
  const int s = warp - FIRST;
  if (s < 0 || s >= NS) return;
  const int g = lane >> 2, t = lane & 3;
  float c[2][4] = {};
#pragma unroll
  for (int q = 0; q < KS; ++q) {
    const int k0 = (s * KS + q) * 16;
    uint32_t a[4], b[4];
    ldsm_x4(a, uA + frag_rows<LD>(lane) + 2 * k0);
    ldsm_x4(b, uB + frag_cols<LD>(lane) + 2 * k0);
    mma_bf16(c[0], a, b[0], b[1]);
    mma_bf16(c[1], a, b[2], b[3]);
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
// the transposed tile) are a pair of S: M × N = Bᵀ A with B (16 × M, bf16, read .trans as the A
// operand) and A (16 × N, bf16, read .trans as the B operand), k = 16. Tasks: one m-tile × NTW
// n-tiles.
template <int M, int N, int NTW, int LDB16, int LDA16, int LDS>
__device__ __forceinline__ void update_pairs(uint32_t uB, uint32_t uA, float* S, float tb, int warp,
                                             int lane) {
  constexpr int NG = N / 8 / NTW, TASKS = M / 16 * NG;
  const int g = lane >> 2, t = lane & 3;
  for (int task = warp; task < TASKS; task += kWarpsFused) {
    const int m0 = (task / NG) * 16, n0 = (task % NG) * 8 * NTW;
    uint32_t a[4];
    ldsm_x4_trans(a, uB + frag_cols<LDB16>(lane) + 2 * m0);
    float c[NTW][4] = {};
#pragma unroll
    for (int u = 0; u < NTW; u += 2) {
      uint32_t b[4];
      ldsm_x4_trans(b, uA + frag_rows<LDA16>(lane) + 2 * (n0 + 8 * u));
      mma_bf16(c[u], a, b[0], b[1]);
      mma_bf16(c[u + 1], a, b[2], b[3]);
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

template <int D>
__global__ void __launch_bounds__(kThreadsFused, 1)
    mlp_forward_bf16_kernel(MlpParams p, MlpBf16Io io) {
  using L = Bf16MlpLayout<D>;
  constexpr int HD = L::HD, LW1 = L::LW1, LW2 = L::LW2, LX = L::LX, LXH = L::LXH, LM = L::LM,
                LDD = L::LDD, NTW_H = L::NTW_H;
  extern __shared__ __align__(16) float smem[];
  unsigned char* base = reinterpret_cast<unsigned char*>(smem);
  float* sW1 = reinterpret_cast<float*>(base + L::W1);  // pairs along k: [D/2][LW1][2]
  float* sW2 = reinterpret_cast<float*>(base + L::W2);  // pairs along r: [HD/2][LW2][2]
  float* sb1 = reinterpret_cast<float*>(base + L::B1);  // [HD]
  float* sb2 = reinterpret_cast<float*>(base + L::B2);  // [2][D]: the committed b2 and the next one
  std::uint16_t* sK = reinterpret_cast<std::uint16_t*>(base + L::K16);     // [kB, LX]
  std::uint16_t* sQ = reinterpret_cast<std::uint16_t*>(base + L::Q16);     // [kB, LX]
  std::uint16_t* sG2h = reinterpret_cast<std::uint16_t*>(base + L::G2H);   // [kB, LX]   λ ⊙ G2
  std::uint16_t* sX2 = reinterpret_cast<std::uint16_t*>(base + L::X2H);    // [kB, LXH]  X2
  std::uint16_t* sXb2 = reinterpret_cast<std::uint16_t*>(base + L::XB2H);  // [kB, LXH]  X̄2
  std::uint16_t* sG1 = reinterpret_cast<std::uint16_t*>(base + L::G1H);    // [kB, LXH]  λ ⊙ G1
  std::uint16_t* sM1 = reinterpret_cast<std::uint16_t*>(base + L::M1H);    // [kB, LM]   M1 w/o λ_j
  float* sG2 = reinterpret_cast<float*>(base + L::G2);                     // [kB, LDD]  λ ⊙ G2
  float* sPZ = reinterpret_cast<float*>(base + L::PZ);  // [NS_Z, kB, D] partials of Z2, then Z̄2
  float* sPM = reinterpret_cast<float*>(base + L::PM);  // [NS_M, kB, kB] of Q Kᵀ, then X̄2 X2ᵀ
  float* sLam = reinterpret_cast<float*>(base + L::LAM);
  float* sTau = reinterpret_cast<float*>(base + L::TAU);
  const uint32_t u0 = static_cast<uint32_t>(__cvta_generic_to_shared(base));
  const uint32_t uK = u0 + L::K16, uQ = u0 + L::Q16, uG2h = u0 + L::G2H, uX2 = u0 + L::X2H,
                 uXb2 = u0 + L::XB2H, uG1 = u0 + L::G1H, uM1 = u0 + L::M1H;

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

  // The inputs of mini-batch mb into registers (rows past T as zeros): K and Q as bf16 pairs, one
  // per thread (16 × d / 2 ≤ 512 pairs), V's row `warp` widened in the warp, λ in threads 0..15.
  static_assert(kB * D / 2 <= kThreadsFused, "one pair per thread");
  uint32_t pk = 0, pq = 0;
  float plam = 0.0f;
  RowFrag pv;
  auto prefetch = [&](int mb) {
    const int t0 = mb * kB, m = min(kB, p.T - t0);
    const int r = tid / (D / 2), c = 2 * (tid % (D / 2));
    const bool in = tid < kB * D / 2 && r < m;
    const std::size_t at = seq0 + std::size_t(t0 + r) * rs + c;
    pk = in ? *reinterpret_cast<const uint32_t*>(io.K + at) : 0u;
    pq = in ? *reinterpret_cast<const uint32_t*>(io.Q + at) : 0u;
    pv = warp < m ? row_load_bf16(io.V + seq0 + std::size_t(t0 + warp) * rs, D, lane) : RowFrag{};
    plam = tid < m ? p.lam[std::size_t(blk) * p.T + t0 + tid] : 0.0f;
  };
  auto stage = [&]() {
    if (tid < kB * D / 2) {
      const int r = tid / (D / 2), c = 2 * (tid % (D / 2));
      *reinterpret_cast<uint32_t*>(sK + r * LX + c) = pk;
      *reinterpret_cast<uint32_t*>(sQ + r * LX + c) = pq;
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
        uint32_t ak[4], aq[4];
        ldsm_x4(ak, uK + frag_rows<LX>(lane) + 2 * k0);
        ldsm_x4(aq, uQ + frag_rows<LX>(lane) + 2 * k0);
#pragma unroll
        for (int u = 0; u < NTW_H; ++u) {
          const float* b = sW1 + 2 * ((k0 / 2 + t) * LW1 + jh + 8 * u + g);
          const uint32_t b0 = pair_bf16(b), b1 = pair_bf16(b + 8 * LW1);
          mma_bf16(ck[u], ak, b0, b1);
          mma_bf16(cq[u], aq, b0, b1);
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
        *reinterpret_cast<uint32_t*>(sX2 + g * LXH + j) =
            pack_bf16(gelu_sfu(z1[u][0]), gelu_sfu(z1[u][1]));
        *reinterpret_cast<uint32_t*>(sX2 + (g + 8) * LXH + j) =
            pack_bf16(gelu_sfu(z1[u][2]), gelu_sfu(z1[u][3]));
      }
    }
    splitk_abt<D, L::NS_M1, LX, 0>(uQ, uK, sPM, warp, lane);
    __syncthreads();

    // B. Partials of Z2 = X2 W2.
    splitk_bf16<D, HD, L::NS_Z, L::NTW_Z, LXH, LW2>(uX2, sW2, sPZ, warp, lane);
    __syncthreads();

    // C. Row `warp`: λ ⊙ G2 = λ ⊙ lnl2(Z2 + b2, V [− K]) (fp32, and its bf16 copy for the products);
    // M1 without λ_j (τ_i (q_i·k_j + 1), j ≤ i) in bf16.
    RowFrag qres{};
    {
      const int r = warp;
      RowFrag z;
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) {
        const int c = lane + 32 * u;
        float acc = 0.0f;
        if (c < D) {
          acc = b2[c];
#pragma unroll
          for (int s = 0; s < L::NS_Z; ++s) acc += sPZ[(s * kB + r) * D + c];
        }
        z.v[u] = acc;
      }
      RowFrag tgt = v;
      if (p.res) {
        const RowFrag k = row_load_bf16(sK + r * LX, D, lane);
#pragma unroll
        for (int u = 0; u < kPerLane; ++u) tgt.v[u] -= k.v[u];
        qres = row_load_bf16(sQ + r * LX, D, lane);
      }
      RowFrag g2 = row_loss_grad(z, tgt, gam, bet, D, lane, p.eps, p.ln);
      const float lr = sLam[r];
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) g2.v[u] *= lr;
      row_store(sG2 + r * LDD, g2, D, lane);
      row_store_bf16(sG2h + r * LX, g2, D, lane);
      if (lane < kB) {
        float dot = 0.0f;
#pragma unroll
        for (int s = 0; s < L::NS_M1; ++s) dot += sPM[(s * kB + r) * kB + lane];
        sM1[r * LM + lane] = bf16_bits(lane <= r ? sTau[r] * (dot + one) : 0.0f);
      }
    }
    __syncthreads();

    // D. λ ⊙ G1 = (λ ⊙ G2) W2ᵀ ⊙ gelu′(Z1) (bf16 copy; b1 −= τ_b Σ_rows λ ⊙ G1 from the fp32 values);
    // then, by the same warps for the same columns, X̄2 = gelu(Q W1 + b1 − M1 (λ ⊙ G1)).
    if (has_h) {
      float c[NTW_H][4] = {};
#pragma unroll
      for (int k0 = 0; k0 < D; k0 += 16) {
        uint32_t a[4];
        ldsm_x4(a, uG2h + frag_rows<LX>(lane) + 2 * k0);
#pragma unroll
        for (int u = 0; u < NTW_H; ++u) {
          // B(k, j) = W2(j, k): two k of one row of W2, stored 2 floats apart.
          const int r = jh + 8 * u + g;
          const float* w = sW2 + 2 * ((r >> 1) * LW2 + k0 + 2 * t) + (r & 1);
          mma_bf16(c[u], a, pack_bf16(w[0], w[2]), pack_bf16(w[16], w[18]));
        }
      }
#pragma unroll
      for (int u = 0; u < NTW_H; ++u) {
        const int j = jh + 8 * u + 2 * t;
#pragma unroll
        for (int e = 0; e < 4; ++e) c[u][e] *= gelu_sfu_grad(z1[u][e]);
        *reinterpret_cast<uint32_t*>(sG1 + g * LXH + j) = pack_bf16(c[u][0], c[u][1]);
        *reinterpret_cast<uint32_t*>(sG1 + (g + 8) * LXH + j) = pack_bf16(c[u][2], c[u][3]);
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
      uint32_t am[4];
      ldsm_x4(am, uM1 + frag_rows<LM>(lane));
      if constexpr (NTW_H == 2) {
        uint32_t b[4];
        ldsm_x4_trans(b, uG1 + frag_rows<LXH>(lane) + 2 * jh);
        mma_bf16(x[0], am, b[0], b[1]);
        mma_bf16(x[1], am, b[2], b[3]);
      } else {
        uint32_t b[2];
        ldsm_x2_trans(b, uG1 + frag_rows<LXH>(lane) + 2 * jh);
        mma_bf16(x[0], am, b[0], b[1]);
      }
#pragma unroll
      for (int u = 0; u < NTW_H; ++u) {
        const int j = jh + 8 * u + 2 * t;
        *reinterpret_cast<uint32_t*>(sXb2 + g * LXH + j) =
            pack_bf16(gelu_sfu(zq[u][0] - x[u][0]), gelu_sfu(zq[u][1] - x[u][1]));
        *reinterpret_cast<uint32_t*>(sXb2 + (g + 8) * LXH + j) =
            pack_bf16(gelu_sfu(zq[u][2] - x[u][2]), gelu_sfu(zq[u][3] - x[u][3]));
      }
    }
    __syncthreads();

    // E. Partials of Z̄2 = X̄2 W2 and of M2 = X̄2 X2ᵀ (on the last NS_M2 warps);
    // W1 −= τ_b Kᵀ(λ ⊙ G1) and the next b2; the next mini-batch's inputs start to load.
    if (mb + 1 < n_mb) prefetch(mb + 1);
    splitk_bf16<D, HD, L::NS_Z, L::NTW_Z, LXH, LW2>(uXb2, sW2, sPZ, warp, lane);
    splitk_abt<HD, L::NS_M2, LXH, kWarpsFused - L::NS_M2>(uXb2, uX2, sPM, warp, lane);
    if (commit) {
      update_pairs<HD, D, D / 8, LXH, LX, LW1>(uG1, uK, sW1, tb, warp, lane);
      if (p.bias)
        for (int c = tid; c < D; c += kThreadsFused) {
          float acc = 0.0f;
#pragma unroll
          for (int j = 0; j < kB; ++j) acc += sG2[j * LDD + c];
          sb2[(cur ^ 1) * D + c] = b2[c] - tb * acc;
        }
    }
    __syncthreads();

    // F. Row `warp`: Z̄2 = Σ partials + b2 − M2 (λ ⊙ G2), O = [Q +] LN(Z̄2) in bf16;
    // W2 −= τ_b X2ᵀ(λ ⊙ G2); the next inputs into shared memory (nothing here reads K, Q or λ).
    {
      const int r = warp;
      float m2 = 0.0f;
      if (lane < kB) {
        float dot = 0.0f;
#pragma unroll
        for (int s = 0; s < L::NS_M2; ++s) dot += sPM[(s * kB + r) * kB + lane];
        m2 = lane <= r ? sTau[r] * (dot + one) : 0.0f;
      }
      RowFrag z;
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) {
        const int c = lane + 32 * u;
        float acc = 0.0f;
        if (c < D) {
          acc = b2[c];
#pragma unroll
          for (int s = 0; s < L::NS_Z; ++s) acc += sPZ[(s * kB + r) * D + c];
        }
        z.v[u] = acc;
      }
#pragma unroll
      for (int j = 0; j < kB; ++j) {
        const float mj = __shfl_sync(0xffffffffu, m2, j);
#pragma unroll
        for (int u = 0; u < kPerLane; ++u) {
          const int c = lane + 32 * u;
          if (c < D) z.v[u] -= mj * sG2[j * LDD + c];
        }
      }
      RowFrag o = row_layer_norm(z, gam, bet, D, lane, p.eps, p.ln);
      if (p.res) {
#pragma unroll
        for (int u = 0; u < kPerLane; ++u) o.v[u] += qres.v[u];
      }
      if (r < m) row_store_bf16(io.O + seq0 + std::size_t(t0 + r) * rs, o, D, lane);
    }
    if (commit) {
      update_pairs<D, HD, L::NTW_U2, LX, LXH, LW2>(uG2h, uX2, sW2, tb, warp, lane);
      if (p.bias) cur ^= 1;
    }
    if (mb + 1 < n_mb) {
      stage();
      v = pv;
    }
    __syncthreads();
  }
}

template <int D>
void launch_bf16(const MlpParams& p, const MlpBf16Io& io, int blocks, cudaStream_t stream) {
  constexpr std::size_t bytes = Bf16MlpLayout<D>::bytes;
  const void* fn = reinterpret_cast<const void*>(&mlp_forward_bf16_kernel<D>);
  set_smem_limit(fn, bytes);
  mlp_forward_bf16_kernel<D><<<blocks, kThreadsFused, bytes, stream>>>(p, io);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
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

bool fused_supports(const TttDims& dims) {
  if (dims.mini_batch != kB) return false;
  const FusedShape s = fused_shape<true>(dims.head_dim);  // the same layout for both SPLITs
  return s.kernel != nullptr && s.bytes <= max_dynamic_smem();
}

bool bf16_supports(const TttDims& dims) {
  if (dims.mini_batch != kB) return false;
  switch (dims.head_dim) {
    case 16: return Bf16MlpLayout<16>::bytes <= max_dynamic_smem();
    case 32: return Bf16MlpLayout<32>::bytes <= max_dynamic_smem();
    case 64: return Bf16MlpLayout<64>::bytes <= max_dynamic_smem();
    default: return false;
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

// SPLIT: 3xTF32 products (Default), or one tf32 product per term (Tf32).
template <bool SPLIT>
void launch_fused(const MlpParams& p, const TttDims& D, cudaStream_t stream) {
  const FusedShape s = fused_shape<SPLIT>(D.head_dim);
  set_smem_limit(s.kernel, s.bytes);
  const int blocks = D.batch * D.heads;
  switch (s.d) {
    case 16:
      mlp_forward_fused_kernel<16, SPLIT><<<blocks, kThreadsFused, s.bytes, stream>>>(p);
      break;
    case 32:
      mlp_forward_fused_kernel<32, SPLIT><<<blocks, kThreadsFused, s.bytes, stream>>>(p);
      break;
    default:
      mlp_forward_fused_kernel<64, SPLIT><<<blocks, kThreadsFused, s.bytes, stream>>>(p);
      break;
  }
  TTTLAB_CUDA_CHECK(cudaGetLastError());
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
  if (version == TttMlpForwardVersion::Bf16) return bf16_supports(dims);
  if (version == TttMlpForwardVersion::Tf32) return fused_supports(dims);
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
  if (bf16_io) {
    require(bf16_supports(D),
            "ttt_mlp_forward: version Bf16 needs mini_batch 16 and head_dim 16, 32 "
            "or 64 (got head_dim " +
                std::to_string(D.head_dim) + ", mini_batch " + std::to_string(D.mini_batch) + ")");
    require(
        aligned16(a.Q_bf16) && aligned16(a.K_bf16) && aligned16(a.V_bf16) && aligned16(a.O_bf16),
        "ttt_mlp_forward: version Bf16 needs Q_bf16, K_bf16, V_bf16 and O_bf16 16-byte aligned");
    const MlpParams p = mlp_params(a, ck, nullptr);
    const MlpBf16Io io{a.Q_bf16, a.K_bf16, a.V_bf16, a.O_bf16};
    const int blocks = D.batch * D.heads;
    switch (D.head_dim) {
      case 16: launch_bf16<16>(p, io, blocks, a.stream); break;
      case 32: launch_bf16<32>(p, io, blocks, a.stream); break;
      default: launch_bf16<64>(p, io, blocks, a.stream); break;
    }
    return;
  }
  require(ttt_mlp_forward_supports(a.version, a.dims),
          "ttt_mlp_forward: version Tf32 needs mini_batch 16 and head_dim 16, 32 or 64 (the fused "
          "kernel's shapes; ttt_mlp_forward_supports)");
  if (a.version == TttMlpForwardVersion::Tf32) {
    launch_fused<false>(mlp_params(a, ck, nullptr), D, a.stream);
    return;
  }
  // Default: the fused kernel where it applies (run 15, H200: 5.41 against the fallback's 10.09 ms
  // at the issue's shape; docs/KERNELS.md), the fallback elsewhere.
  if (a.version == TttMlpForwardVersion::Default && fused_supports(D)) {
    launch_fused<true>(mlp_params(a, ck, nullptr), D, a.stream);
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
