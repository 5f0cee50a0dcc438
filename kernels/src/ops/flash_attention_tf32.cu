// Causal softmax attention on the tensor cores with tf32 operands and fp32 accumulation, forward and
// backward (AttentionPrecision::tf32 in tttlab/kernels/attention.hpp). The structure is
// flash_attention.cu's (the bf16 kernels): online softmax in log2 units, FlashAttention-2's backward
// in two kernels without atomics; what differs is the operand type.
//
// Every product is mma.sync m16n8k8 .tf32 (ttt/ttt_mma.cuh, mma_tf32). Tiles stay fp32 in shared
// memory (cp.async copies them as they are) and every operand is rounded to tf32 (cvt.rna) as its
// fragment is read, so the kernels take the same fp32 tensors as the CUDA-core kernels. Fragments are
// read with 32-bit loads (ldmatrix moves 16-bit pairs): A (g, t), (g + 8, t), (g, t + 4),
// (g + 8, t + 4) and B (k = t, n = g), (t + 4, g) of the PTX layout, with g = lane/4, t = lane%4.
// Rows are padded to a stride of D + 4 floats (≡ 4 mod 32 banks): the 32 lanes of such a read, 8 rows
// g apart and 4 columns t apart, fall in 32 distinct banks, and rows stay 16-byte aligned.
//
// P into P·V without shared memory: an accumulator fragment holds columns 2t, 2t + 1 of rows g, g + 8,
// while an A fragment wants columns t and t + 4. The product sums over the 8 keys of the k-step in any
// order, so A's column t is taken to be key 2t and column t + 4 key 2t + 1, and B's rows are read in
// the same order (rows 2t and 2t + 1 of the V, dO, Q or K tile). The same holds for Pᵀ, dSᵀ and dS.
//
// Tile sizes: fp32 tiles take twice the bytes of bf16 ones, so where flash_attention.cu streams 64-row
// tiles at every d, these stream 64 rows at d ≤ 64 and 32 rows at d = 128 (a 64 × 132 fp32 tile is
// 33 KB; two double-buffered pairs of them and the resident tiles would exceed 200 KB and leave one
// 4-warp block per SM). Forward: 8 warps own 128 queries (Q fragments in registers), double-buffered
// K and V: 104 KB at d = 64 (two blocks per SM), 132 KB at d = 128. Backward: 4 warps own 64 keys (or
// queries), the other side double-buffered: 103 KB at d = 64, 132 KB at d = 128.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/launch.hpp"
#include "ops/flash_attention_tf32.hpp"
#include "ttt/ttt_mma.cuh"

namespace tttlab::kernels::detail {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

struct Tf32Params {
  const float *Q, *K, *V, *dO, *lse_in, *delta;
  float *O, *lse, *dQ, *dK, *dV;
  int H, T;
  float scale;     // 1/√d
  float scale_l2;  // log2(e)/√d
};

// Rows r0 .. r0 + R − 1 (of T), W floats each, from G (row stride ld) into S[R][W + 4], by the NT
// threads of the block; rows ≥ T as zeros (cp.async reads nothing for them; row 0's address keeps the
// source valid).
template <int R, int W, int NT>
__device__ __forceinline__ void load_rows(float* S, const float* G, int r0, int T, long ld) {
  constexpr int kPieces = W / 4;
  for (int idx = threadIdx.x; idx < R * kPieces; idx += NT) {
    const int r = idx / kPieces, c = (idx % kPieces) * 4;
    const bool ok = r0 + r < T;
    cp_async16(S + r * (W + 4) + c, G + long(ok ? r0 + r : 0) * ld + c, ok ? 16 : 0);
  }
}

// The A fragment (16 × 8, k-step ks) of rows row0 .. row0 + 15 of a row-major tile, rounded to tf32.
template <int LD>
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const float* S, int row0, int ks,
                                       int g, int t) {
  const float* p = S + (row0 + g) * LD + 8 * ks + t;
  a[0] = to_tf32(p[0]);
  a[1] = to_tf32(p[8 * LD]);
  a[2] = to_tf32(p[4]);
  a[3] = to_tf32(p[8 * LD + 4]);
}

// acc[16 × 8·NN] += A[rows arow0.., 8·KS] · Yᵀ with A and Y row-major in shared memory (a row of Y is a
// column of the product).
template <int LD, int KS, int NN>
__device__ __forceinline__ void mma_a_smem_bt(float (&acc)[NN][4], const float* A, int arow0,
                                              const float* Y, int g, int t) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    std::uint32_t a[4];
    load_a<LD>(a, A, arow0, ks, g, t);
#pragma unroll
    for (int nt = 0; nt < NN; ++nt) {
      const float* y = Y + (8 * nt + g) * LD + 8 * ks + t;
      mma_tf32(acc[nt], a[0], a[1], a[2], a[3], to_tf32(y[0]), to_tf32(y[4]));
    }
  }
}

// acc[16 × 8·NN] += P · Y where P [16 × 8·KS] is an accumulator-layout fragment (p[k-step][4]) rounded
// to tf32 here, and Y [8·KS × 8·NN] row-major in shared memory; keys in the permuted order above.
template <int LD, int KS, int NN>
__device__ __forceinline__ void mma_p_y(float (&acc)[NN][4], const float (&p)[KS][4],
                                        const float* Y, int g, int t) {
#pragma unroll
  for (int kk = 0; kk < KS; ++kk) {
    const std::uint32_t a0 = to_tf32(p[kk][0]), a1 = to_tf32(p[kk][2]), a2 = to_tf32(p[kk][1]),
                        a3 = to_tf32(p[kk][3]);
    const float* y = Y + (8 * kk + 2 * t) * LD + g;
#pragma unroll
    for (int nt = 0; nt < NN; ++nt)
      mma_tf32(acc[nt], a0, a1, a2, a3, to_tf32(y[8 * nt]), to_tf32(y[LD + 8 * nt]));
  }
}

// ---- forward --------------------------------------------------------------------------------------
constexpr int kFwdWarps = 8, kFwdRows = 16 * kFwdWarps;

template <int D>
__host__ __device__ constexpr int key_tile() {
  return D > 64 ? 32 : 64;
}

template <int D>
constexpr std::size_t fwd_smem_bytes() {
  return std::size_t(kFwdRows + 4 * key_tile<D>()) * (D + 4) * sizeof(float);
}

template <int D>
__global__ void __launch_bounds__(kFwdWarps * 32, D <= 64 ? 2 : 1)
    tf32_forward_kernel(Tf32Params p) {
  constexpr int LD = D + 4, BK = key_tile<D>(), KS = D / 8, NS = BK / 8, ND = D / 8,
                NT = kFwdWarps * 32;
  extern __shared__ __align__(16) float smem[];
  float* Qs = smem;
  float* Ks = Qs + kFwdRows * LD;  // [2][BK][LD]
  float* Vs = Ks + 2 * BK * LD;

  const int T = p.T, qtiles = (T + kFwdRows - 1) / kFwdRows;
  const int qt = qtiles - 1 - int(blockIdx.x);  // longest first
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * D;
  const long base = long(n) * T * ld + long(h) * D;
  const int q0 = qt * kFwdRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wrow0 = q0 + 16 * warp;
  const int last = min(q0 + kFwdRows, T) - 1;
  const int nkt = last / BK + 1;

  load_rows<kFwdRows, D, NT>(Qs, p.Q + base, q0, T, ld);
  load_rows<BK, D, NT>(Ks, p.K + base, 0, T, ld);
  load_rows<BK, D, NT>(Vs, p.V + base, 0, T, ld);
  cp_async_commit();

  float o[ND][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < ND; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  std::uint32_t qf[KS][4];

  for (int j = 0; j < nkt; ++j) {
    if (j + 1 < nkt) {
      const int b = (j + 1) & 1;
      load_rows<BK, D, NT>(Ks + b * BK * LD, p.K + base, (j + 1) * BK, T, ld);
      load_rows<BK, D, NT>(Vs + b * BK * LD, p.V + base, (j + 1) * BK, T, ld);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) load_a<LD>(qf[ks], Qs, 16 * warp, ks, g, t);
    }
    const int k0 = j * BK;
    const float* Kt = Ks + (j & 1) * BK * LD;
    const float* Vt = Vs + (j & 1) * BK * LD;
    if (k0 <= wrow0 + 15) {  // some key of the tile is visible to some row of the warp
      float s[NS][4];
#pragma unroll
      for (int i = 0; i < NS; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
#pragma unroll
        for (int nt = 0; nt < NS; ++nt) {
          const float* y = Kt + (8 * nt + g) * LD + 8 * ks + t;
          mma_tf32(s[nt], qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3], to_tf32(y[0]), to_tf32(y[4]));
        }
      const bool edge = k0 + BK - 1 > wrow0 || k0 + BK > T;
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int i = 0; i < NS; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[i][e];  // raw score; the scale joins the exponent (scale_l2 > 0)
          if (edge) {
            const int key = k0 + 8 * i + 2 * t + (e & 1), row = wrow0 + g + 8 * (e >> 1);
            if (key > row || key >= T) x = -INFINITY;
          }
          s[i][e] = x;
          mx[e >> 1] = fmaxf(mx[e >> 1], x);
        }
      float alpha[2], ms[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        // A row whose keys in this tile are all masked keeps its maximum (quad_max of −∞·scale is
        // −∞, fmaxf takes the old one); its first tile always holds key 0.
        const float mn = fmaxf(m[r], quad_max(mx[r] * p.scale_l2));
        alpha[r] = exp2_fast(m[r] - mn);  // m = −∞ on the first tile: 0
        m[r] = mn;
        ms[r] = -mn;
        l[r] *= alpha[r];
      }
#pragma unroll
      for (int i = 0; i < ND; ++i) {
        o[i][0] *= alpha[0];
        o[i][1] *= alpha[0];
        o[i][2] *= alpha[1];
        o[i][3] *= alpha[1];
      }
#pragma unroll
      for (int i = 0; i < NS; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float pe = exp2_fast(fmaf(s[i][e], p.scale_l2, ms[e >> 1]));
          s[i][e] = pe;
          l[e >> 1] += pe;
        }
      mma_p_y<LD, NS, ND>(o, s, Vt, g, t);
    }
    __syncthreads();  // the buffer read here is the one the next iteration's load overwrites
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float lr = quad_sum(l[r]);
    const int row = wrow0 + g + 8 * r;
    if (row < T) {
      const float inv = 1.f / lr;
      float* out = p.O + base + long(row) * ld;
#pragma unroll
      for (int i = 0; i < ND; ++i)
        *reinterpret_cast<float2*>(out + 8 * i + 2 * t) =
            make_float2(o[i][2 * r] * inv, o[i][2 * r + 1] * inv);
      if (p.lse && t == 0) p.lse[(long(n) * p.H + h) * T + row] = (m[r] + log2f(lr)) * kLn2;
    }
  }
}

// ---- backward -------------------------------------------------------------------------------------
// Both kernels: 4 warps own 64 rows (16 per warp) and stream double-buffered tiles of the other side,
// BN = key_tile<D>() rows each.
constexpr int kBwdRows = 64, kBwdThreads = 128;

template <int D>
constexpr std::size_t bwd_smem_bytes() {
  return std::size_t(2 * kBwdRows + 4 * key_tile<D>()) * (D + 4) * sizeof(float) +
         4 * key_tile<D>() * sizeof(float);
}

// dK and dV: a block owns 64 keys (warp w: keys 16w .. 16w + 15) and walks the query tiles at or below
// its diagonal. With Sᵀ = K Qᵀ, Pᵀ = 2^(Sᵀ·log2e/√d − lse₂[q]):
//   dV += Pᵀ dO,   dPᵀ = V dOᵀ,   dSᵀ = Pᵀ ⊙ (dPᵀ − δ[q]),   dK += dSᵀ Q / √d.
template <int D>
__global__ void __launch_bounds__(kBwdThreads, D <= 64 ? 2 : 1) tf32_dkdv_kernel(Tf32Params p) {
  constexpr int LD = D + 4, BN = key_tile<D>(), KS = D / 8, NS = BN / 8, ND = D / 8;
  extern __shared__ __align__(16) float smem[];
  float* Ks = smem;
  float* Vs = Ks + kBwdRows * LD;
  float* Qs = Vs + kBwdRows * LD;   // [2][BN][LD]
  float* dOs = Qs + 2 * BN * LD;    // [2][BN][LD]
  float* lse2 = dOs + 2 * BN * LD;  // [2][BN]
  float* dlt = lse2 + 2 * BN;       // [2][BN]

  const int T = p.T, tiles = (T + BN - 1) / BN;
  const int kt = int(blockIdx.x);  // tile 0 has the most query tiles: launched first
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * D;
  const long base = long(n) * T * ld + long(h) * D;
  const long rbase = (long(n) * p.H + h) * T;
  const int k0 = kt * kBwdRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wkey0 = k0 + 16 * warp;

  auto load_q_tile = [&](int i, int b) {
    const int q0 = i * BN;
    load_rows<BN, D, kBwdThreads>(Qs + b * BN * LD, p.Q + base, q0, T, ld);
    load_rows<BN, D, kBwdThreads>(dOs + b * BN * LD, p.dO + base, q0, T, ld);
    for (int r = threadIdx.x; r < BN; r += kBwdThreads) {
      const bool ok = q0 + r < T;
      // Rows past T: a finite lse keeps 2^(s − lse) finite; their P is masked to 0 anyway.
      lse2[b * BN + r] = ok ? p.lse_in[rbase + q0 + r] * kLog2e : 0.f;
      dlt[b * BN + r] = ok ? p.delta[rbase + q0 + r] : 0.f;
    }
  };

  const int first = k0 / BN;  // the first query tile with a query ≥ k0
  load_rows<kBwdRows, D, kBwdThreads>(Ks, p.K + base, k0, T, ld);
  load_rows<kBwdRows, D, kBwdThreads>(Vs, p.V + base, k0, T, ld);
  load_q_tile(first, 0);
  cp_async_commit();

  float dk[ND][4], dv[ND][4];
#pragma unroll
  for (int i = 0; i < ND; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.f;

  for (int i = first; i < tiles; ++i) {
    const int b = (i - first) & 1;
    if (i + 1 < tiles) {
      load_q_tile(i + 1, b ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int q0 = i * BN;
    const float* Qt = Qs + b * BN * LD;
    const float* dOt = dOs + b * BN * LD;
    const float* l2 = lse2 + b * BN;
    const float* dl = dlt + b * BN;
    if (q0 + BN - 1 >= wkey0) {  // some query of the tile sees some key of the warp
      float s[NS][4], dp[NS][4];
#pragma unroll
      for (int u = 0; u < NS; ++u)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[u][e] = dp[u][e] = 0.f;
      mma_a_smem_bt<LD, KS, NS>(s, Ks, 16 * warp, Qt, g, t);
      const bool edge = q0 < wkey0 + 15 || q0 + BN > T;
#pragma unroll
      for (int u = 0; u < NS; ++u)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int qc = 8 * u + 2 * t + (e & 1);
          float pe = exp2_fast(fmaf(s[u][e], p.scale_l2, -l2[qc]));
          if (edge) {
            const int key = wkey0 + g + 8 * (e >> 1), q = q0 + qc;
            if (q < key || q >= T) pe = 0.f;
          }
          s[u][e] = pe;
        }
      mma_p_y<LD, NS, ND>(dv, s, dOt, g, t);
      mma_a_smem_bt<LD, KS, NS>(dp, Vs, 16 * warp, dOt, g, t);
#pragma unroll
      for (int u = 0; u < NS; ++u)
#pragma unroll
        for (int e = 0; e < 4; ++e) dp[u][e] = s[u][e] * (dp[u][e] - dl[8 * u + 2 * t + (e & 1)]);
      mma_p_y<LD, NS, ND>(dk, dp, Qt, g, t);
    }
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = wkey0 + g + 8 * r;
    if (key >= T) continue;
    float* dK = p.dK + base + long(key) * ld;
    float* dV = p.dV + base + long(key) * ld;
#pragma unroll
    for (int u = 0; u < ND; ++u) {
      *reinterpret_cast<float2*>(dK + 8 * u + 2 * t) =
          make_float2(dk[u][2 * r] * p.scale, dk[u][2 * r + 1] * p.scale);
      *reinterpret_cast<float2*>(dV + 8 * u + 2 * t) = make_float2(dv[u][2 * r], dv[u][2 * r + 1]);
    }
  }
}

// dQ: a block owns 64 queries (warp w: rows 16w .. 16w + 15) and walks the key tiles at or below its
// diagonal: P = 2^(S·log2e/√d − lse₂), dP = dO Vᵀ, dS = P ⊙ (dP − δ), dQ += dS K / √d.
template <int D>
__global__ void __launch_bounds__(kBwdThreads, D <= 64 ? 2 : 1) tf32_dq_kernel(Tf32Params p) {
  constexpr int LD = D + 4, BN = key_tile<D>(), KS = D / 8, NS = BN / 8, ND = D / 8;
  extern __shared__ __align__(16) float smem[];
  float* Qs = smem;
  float* dOs = Qs + kBwdRows * LD;
  float* Ks = dOs + kBwdRows * LD;  // [2][BN][LD]
  float* Vs = Ks + 2 * BN * LD;

  const int T = p.T, tiles = (T + kBwdRows - 1) / kBwdRows;
  const int qt = tiles - 1 - int(blockIdx.x);  // longest first
  const int n = int(blockIdx.y) / p.H, h = int(blockIdx.y) % p.H;
  const long ld = long(p.H) * D;
  const long base = long(n) * T * ld + long(h) * D;
  const long rbase = (long(n) * p.H + h) * T;
  const int q0 = qt * kBwdRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wrow0 = q0 + 16 * warp;
  const int nkt = (min(q0 + kBwdRows, T) - 1) / BN + 1;

  load_rows<kBwdRows, D, kBwdThreads>(Qs, p.Q + base, q0, T, ld);
  load_rows<kBwdRows, D, kBwdThreads>(dOs, p.dO + base, q0, T, ld);
  load_rows<BN, D, kBwdThreads>(Ks, p.K + base, 0, T, ld);
  load_rows<BN, D, kBwdThreads>(Vs, p.V + base, 0, T, ld);
  cp_async_commit();

  float l2[2], dl[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = wrow0 + g + 8 * r;
    l2[r] = row < T ? p.lse_in[rbase + row] * kLog2e : 0.f;
    dl[r] = row < T ? p.delta[rbase + row] : 0.f;
  }
  float dq[ND][4];
#pragma unroll
  for (int i = 0; i < ND; ++i) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;

  for (int j = 0; j < nkt; ++j) {
    const int b = j & 1;
    if (j + 1 < nkt) {
      load_rows<BN, D, kBwdThreads>(Ks + (b ^ 1) * BN * LD, p.K + base, (j + 1) * BN, T, ld);
      load_rows<BN, D, kBwdThreads>(Vs + (b ^ 1) * BN * LD, p.V + base, (j + 1) * BN, T, ld);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int k0 = j * BN;
    const float* Kt = Ks + b * BN * LD;
    const float* Vt = Vs + b * BN * LD;
    if (k0 <= wrow0 + 15) {
      float s[NS][4], dp[NS][4];
#pragma unroll
      for (int u = 0; u < NS; ++u)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[u][e] = dp[u][e] = 0.f;
      mma_a_smem_bt<LD, KS, NS>(s, Qs, 16 * warp, Kt, g, t);
      mma_a_smem_bt<LD, KS, NS>(dp, dOs, 16 * warp, Vt, g, t);
      const bool edge = k0 + BN - 1 > wrow0 || k0 + BN > T;
#pragma unroll
      for (int u = 0; u < NS; ++u)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1;
          float pe = exp2_fast(fmaf(s[u][e], p.scale_l2, -l2[r]));
          if (edge) {
            const int key = k0 + 8 * u + 2 * t + (e & 1), row = wrow0 + g + 8 * r;
            if (key > row || key >= T) pe = 0.f;
          }
          dp[u][e] = pe * (dp[u][e] - dl[r]);
        }
      mma_p_y<LD, NS, ND>(dq, dp, Kt, g, t);
    }
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = wrow0 + g + 8 * r;
    if (row >= T) continue;
    float* dQ = p.dQ + base + long(row) * ld;
#pragma unroll
    for (int u = 0; u < ND; ++u)
      *reinterpret_cast<float2*>(dQ + 8 * u + 2 * t) =
          make_float2(dq[u][2 * r] * p.scale, dq[u][2 * r + 1] * p.scale);
  }
}

// ---- host side ------------------------------------------------------------------------------------

template <class Kernel>
void launch(Kernel kernel, dim3 grid, int threads, std::size_t smem, cudaStream_t st,
            const Tf32Params& p) {
  allow_shared_memory(kernel, smem);
  kernel<<<grid, threads, smem, st>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

Tf32Params make_params(const FlashTf32Args& a) {
  Tf32Params p{};
  p.Q = a.Q;
  p.K = a.K;
  p.V = a.V;
  p.dO = a.dO;
  p.lse_in = a.lse_in;
  p.delta = a.delta;
  p.O = a.O;
  p.lse = a.lse;
  p.dQ = a.dQ;
  p.dK = a.dK;
  p.dV = a.dV;
  p.H = a.H;
  p.T = a.T;
  p.scale = float(1.0 / std::sqrt(double(a.d)));
  p.scale_l2 = float(1.4426950408889634 / std::sqrt(double(a.d)));
  return p;
}

template <int D>
void forward_launch(const Tf32Params& p, int bh, cudaStream_t st) {
  launch(tf32_forward_kernel<D>, dim3((p.T + kFwdRows - 1) / kFwdRows, bh), kFwdWarps * 32,
         fwd_smem_bytes<D>(), st, p);
}

template <int D>
void backward_launch(const Tf32Params& p, int bh, cudaStream_t st) {
  const unsigned tiles = (p.T + kBwdRows - 1) / kBwdRows;
  launch(tf32_dkdv_kernel<D>, dim3(tiles, bh), kBwdThreads, bwd_smem_bytes<D>(), st, p);
  launch(tf32_dq_kernel<D>, dim3(tiles, bh), kBwdThreads, bwd_smem_bytes<D>(), st, p);
}

}  // namespace

void flash_tf32_forward(const FlashTf32Args& a) {
  const Tf32Params p = make_params(a);
  const int bh = a.B * a.H;
  switch (a.d) {
    case 32: forward_launch<32>(p, bh, a.stream); break;
    case 64: forward_launch<64>(p, bh, a.stream); break;
    default: forward_launch<128>(p, bh, a.stream); break;
  }
}

void flash_tf32_backward(const FlashTf32Args& a) {
  const Tf32Params p = make_params(a);
  const int bh = a.B * a.H;
  switch (a.d) {
    case 32: backward_launch<32>(p, bh, a.stream); break;
    case 64: backward_launch<64>(p, bh, a.stream); break;
    default: backward_launch<128>(p, bh, a.stream); break;
  }
}

}  // namespace tttlab::kernels::detail
