// The TTT-MLP backward kernel, mlp_backward_kernel<kSplit, kD, kB>: its design is described in
// ttt_mlp_backward.cu, which sizes the workspace and launches it. Its four instances (the compile-time
// training shape d = 64, b = 16 and the run-time shape, each in 3xTF32 and in tf32) are compiled in
// files of their own, ttt_mlp_backward_<shape>_<version>.cu, each returning its instance's address:
// in one file they were the longest compile of the build and finished it alone on one core, while
// apart nvcc builds them side by side. Only where the instances are compiled differs; the code and
// the numbers are the same.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "ttt/ttt_common.cuh"
#include "ttt/ttt_mma.cuh"

namespace tttlab::kernels {
namespace detail {

// Outside the anonymous namespace below: the instance getters' type names it, and the getters are
// defined in one file and called from another.
struct MlpBwdParams {
  const float *Q, *K, *V, *lam, *tau, *gamma, *beta, *ckW1, *ckb1, *ckW2, *ckb2, *dO;
  float *dQ, *dK, *dV, *dlam;
  float* slots;    // [BH, group, slot floats]: the states inside the group being walked
  float* scratch;  // [BH, global floats]: the block's matrices that do not fit in shared memory
  float *pW1, *pb1, *pW2, *pb2, *pgam, *pbet, *ptau;  // per-block partials
  std::size_t smem_cap;       // floats of shared memory the layout may use
  std::size_t global_floats;  // floats per block in scratch
  int B, H, T, d, b, group, n_ck;
  bool ln, res, bias;
  float eps;
};

using MlpBwdKernel = void (*)(MlpBwdParams);
MlpBwdKernel mlp_backward_fixed_3xtf32();    // <true, 64, 16>: ttt_mlp_backward_fixed_3xtf32.cu
MlpBwdKernel mlp_backward_fixed_tf32();      // <false, 64, 16>: ttt_mlp_backward_fixed_tf32.cu
MlpBwdKernel mlp_backward_runtime_3xtf32();  // <true, 0, 0>: ttt_mlp_backward_runtime_3xtf32.cu
MlpBwdKernel mlp_backward_runtime_tf32();    // <false, 0, 0>: ttt_mlp_backward_runtime_tf32.cu

namespace {

// 512 threads under a 128-register cap (some spills) beat 384 and 256 threads without them
// (docs/KERNELS.md): the chain wants warps more than registers.
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
// The shared memory the compile-time instance lays its buffers out in, in floats: the opt-in maximum
// per block of an H100 or H200 (227 KB). Devices with less run the run-time instance.
constexpr std::size_t kFixedSmemCap = 232448 / sizeof(float);


// Split-k products: the 16-row products with a long k (k = 4d) have only n/8 output tiles, so
// block_mma would give them to n/8 warps that each walk all of k. Here the k range is cut into S
// slices so that tasks × S ≈ 16 warp tasks; every task writes its α-scaled partial tile to
// part[(s·m + i)·n + j] (all S slices are written, zeros for an empty one), and the consumer sums
// the slices in a fixed order (psum) after a barrier, usually inside the next phase's element-wise
// or row work (no barrier of its own). NTW: n-tiles per task. With NTW = 2 and kLdsm, a row-major B
// is read in column pairs (strip_product's npair: half the loads of B, which at d = 64 is the state
// or the carry in global memory); splitk_slices must be given the same NTW.
__device__ __forceinline__ int splitk_slices(int m, int n, int k, std::size_t cap, int ntw = 1) {
  const int tasks = ((m + 15) >> 4) * ((n + 8 * ntw - 1) / (8 * ntw));
  int S = min(max(1, kWarps / tasks), max(1, (k + 31) / 32));
  while (S > 1 && std::size_t(S) * m * n > cap) --S;
  return S;
}

template <bool kSplit, bool kLdsm, int NTW = 1>
__device__ __forceinline__ void splitk_mma(int m, int n, int S, int k, Operand A, Operand B,
                                           float alpha, float* part) {
  constexpr int ACC = 4 / NTW;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int MT = (m + 15) >> 4, NT = (n + 8 * NTW - 1) / (8 * NTW);
  const int ks = ((k + S - 1) / S + 31) & ~31;
  const bool whole =
      m % 16 == 0 && n % (8 * NTW) == 0;  // a constant where m and n are (as in strips)
  for (int task = warp; task < MT * NT * S; task += kWarps) {
    const int sl = task / (MT * NT), tile = task % (MT * NT);
    const int i0 = (tile / NT) * 16, j0 = (tile % NT) * 8 * NTW;
    const bool inside = whole || (i0 + 16 <= m && j0 + 8 * NTW <= n);
    const int lo = min(k, sl * ks), l = min(k, lo + ks) - lo;
    const bool fast = inside && l % 32 == 0;
    const bool npair = kLdsm && NTW % 2 == 0 && fast && B.cs == 1;
    const bool kpair = mma_detail::use_kpair<kSplit, kLdsm, ACC>(fast, A, B);
    float c[ACC][NTW][4] = {};
    if (l > 0) {
      const Operand As{A.p + lo * A.cs, A.rs, A.cs}, Bs{B.p + lo * B.rs, B.rs, B.cs};
      if (fast)
        mma_detail::strip_product<kSplit, NTW, ACC, false, kLdsm>(c, m, n, l, As, Bs, i0, j0, g, t,
                                                                  npair, kpair);
      else
        mma_detail::strip_product<kSplit, NTW, ACC, true>(c, m, n, l, As, Bs, i0, j0, g, t);
    }
#pragma unroll
    for (int u = 0; u < NTW; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = e < 2 ? i0 + g : i0 + g + 8;
        const int j = npair ? mma_detail::pair_column(j0, u, t, e) : j0 + 8 * u + 2 * t + (e & 1);
        float v = 0.0f;
#pragma unroll
        for (int a = 0; a < ACC; ++a) v += c[a][u][e];
        if (i < m && j < n) part[(sl * m + i) * n + j] = alpha * v;
      }
  }
}

// Σ over the S slices of element (i, j), in slice order.
__device__ __forceinline__ float psum(const float* part, int S, int m, int n, int i, int j) {
  float v = 0.0f;
  for (int sl = 0; sl < S; ++sl) v += part[(sl * m + i) * n + j];
  return v;
}

struct Bufs {
  // vectors
  float *lam, *tau, *mu, *rstd, *rstd2, *de, *dtau, *b1, *b2, *db1, *db2, *dgam, *dbet;
  // [b, ldb]
  float *C1, *C2, *M1, *M2, *dM, *dC, *dE;
  // [b, ldd]
  float *Q, *K, *R, *dO, *Z2, *G2, *Zb2, *Xh, *dG2, *dQ, *dK, *T2;
  // [b, ldh]
  float *Z1, *X2, *P1, *G1, *Zb1, *Xb2, *dZb1, *dX2, *dG1, *T1;
  // state [d, ldh], [hd, ldd] and carry
  float *W1, *W2, *dW1, *dW2;
};

// Places the buffers in priority order: into shared memory (sm_at(offset) gives the pointer) while
// the running total stays within cap floats, else into global memory (gl_at). Returns the floats used
// in each; with NoMemory for both it only counts (the host's sizing, the static_assert below). Each
// pointer is a base plus an offset with no test on the base, so that where d, b and cap are
// compile-time constants every buffer is a base plus a constant and the compiler can see which are
// in shared memory: a `base ? base + offset : nullptr` here made every shared-memory access of the
// kernel a generic one (docs/KERNELS.md). states_in_place (the compile-time
// instance, which reads each state from its checkpoint or slot): no W1, W2 of the block's own.
struct NoMemory {
  constexpr __host__ __device__ float* operator()(std::size_t) const { return nullptr; }
};
template <class SmAt, class GlAt>
constexpr __host__ __device__ __forceinline__ void carve(Bufs& s, SmAt sm_at, GlAt gl_at, int d,
                                                         int b, std::size_t cap,
                                                         bool states_in_place, std::size_t& used_s,
                                                         std::size_t& used_g) {
  const std::size_t hd = 4 * std::size_t(d), ldd = d + 4, ldh = hd + 4, ldb = b + 4;
  used_s = used_g = 0;
  auto take = [&](float*& ptr, std::size_t n) {
    n = (n + 3) & ~std::size_t(3);  // keep every buffer 16-byte aligned
    if (used_s + n <= cap) {
      ptr = sm_at(used_s);
      used_s += n;
    } else {
      ptr = gl_at(used_g);
      used_g += n;
    }
  };
  // (explicit calls: std::initializer_list is not usable in device code)
  take(s.lam, b), take(s.tau, b), take(s.mu, b), take(s.rstd, b), take(s.rstd2, b), take(s.de, b);
  take(s.dtau, b);
  take(s.b2, d), take(s.db2, d), take(s.dgam, d), take(s.dbet, d), take(s.b1, hd), take(s.db1, hd);
  const std::size_t bb = b * ldb, bd = b * ldd, bh = b * ldh;
  take(s.C1, bb), take(s.C2, bb), take(s.M1, bb), take(s.M2, bb), take(s.dM, bb), take(s.dC, bb);
  take(s.dE, bb);
  take(s.Q, bd), take(s.K, bd), take(s.R, bd), take(s.dO, bd), take(s.Z2, bd), take(s.G2, bd);
  take(s.Zb2, bd), take(s.Xh, bd), take(s.dG2, bd), take(s.dQ, bd), take(s.dK, bd), take(s.T2, bd);
  take(s.Z1, bh), take(s.X2, bh), take(s.P1, bh), take(s.G1, bh), take(s.Zb1, bh);
  take(s.Xb2, bh), take(s.dZb1, bh), take(s.dX2, bh), take(s.dG1, bh), take(s.T1, bh);
  if (states_in_place) {
    s.W1 = s.W2 = nullptr;
  } else {
    take(s.W1, d * ldh);
    take(s.W2, hd * ldd);
  }
  take(s.dW1, d * ldh);
  take(s.dW2, hd * ldd);
}

// The compile-time instance's layout: every per-mini-batch buffer in shared memory, the carry dW1, dW2
// (and nothing else) in the block's scratch, which assume_global and the kLdsm products rely on.
constexpr bool fixed_layout_keeps_only_the_carry_global(int d, int b) {
  Bufs s{};
  std::size_t used_s = 0, used_g = 0;
  carve(s, NoMemory{}, NoMemory{}, d, b, kFixedSmemCap, true, used_s, used_g);
  const std::size_t hd = 4 * std::size_t(d), carry = std::size_t(d) * (hd + 4) + hd * (d + 4);
  return used_g == carry;  // both sizes are multiples of 4: no rounding
}
static_assert(fixed_layout_keeps_only_the_carry_global(64, 16),
              "the compile-time instance needs every per-mini-batch buffer in shared memory");

// Tells the compiler that these pointers are in global memory (in the compile-time instance: the
// states, which are the checkpoint or a slot, and the carry; see the static_assert above), so that
// their loads and stores are LDG/STG rather than generic ones (PTX of that instance: 880 generic
// loads become global ones).
template <class... P>
__device__ __forceinline__ void assume_global(const P*... q) {
  (__builtin_assume(__isGlobal(q)), ...);
}

// One full mini-batch of the forward without the read-out: the commit
// W1 −= τ_b Kᵀ(λ ⊙ G1), W2 −= τ_b X2ᵀ(λ ⊙ G2), b1, b2 likewise. Ends with a barrier.
template <bool kSplit, int kD, int kB>
__device__ __forceinline__ void advance(const MlpBwdParams& p, const Bufs& s, std::size_t seq0,
                                        std::size_t rs, int blk, int t0, const RowFrag& gam,
                                        const RowFrag& bet, float* W1n, float* W2n) {
  const int d = kD ? kD : p.d, b = kB ? kB : p.b, hd = 4 * d, ldd = d + 4, ldh = hd + 4;
  const int lw1 = kD ? hd : ldh, lw2 = kD ? d : ldd;  // the state's leading dims (see the kernel)
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // The compile-time instance: every A operand in shared memory (the static_assert above), so its
  // products may read them with ldmatrix.
  constexpr bool kLdsm = kD != 0;
  if constexpr (kD != 0) assume_global(s.W1, s.W2, W1n, W2n);
  // The split-k products whose B is row-major (the state W2 or the carry dW2) read it in column
  // pairs in this instance: two n-tiles per task.
  constexpr int kPairs = kLdsm ? 2 : 1;
  for (int i = tid; i < b * d; i += kThreads) {
    const int r = i / d, c = i % d;
    const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
    const float k = p.K[g], v = p.V[g];
    s.K[r * ldd + c] = k;
    s.R[r * ldd + c] = p.res ? v - k : v;
  }
  for (int i = tid; i < b; i += kThreads) s.lam[i] = p.lam[std::size_t(blk) * p.T + t0 + i];
  __syncthreads();
  block_mma<kSplit, kLdsm, kWarps>(b, hd, d, op(s.K, ldd), op(s.W1, lw1), 1.0f,
                                   [&](int i, int j, float v) {
                                     const float z = v + s.b1[j];
                                     s.Z1[i * ldh + j] = z;
                                     s.X2[i * ldh + j] = gelu_tanh(z);
                                   });
  __syncthreads();
  const int Sz = splitk_slices(b, d, hd, std::size_t(b) * ldh, kPairs);
  splitk_mma<kSplit, kLdsm, kPairs>(b, d, Sz, hd, op(s.X2, ldh), op(s.W2, lw2), 1.0f,
                                    s.T1);  // Z2 − b2, partials
  __syncthreads();
  for (int r = warp; r < b; r += kWarps) {
    for (int c = lane; c < d; c += 32) s.Z2[r * ldd + c] = psum(s.T1, Sz, b, d, r, c) + s.b2[c];
    __syncwarp();
    const RowFrag z = row_load(s.Z2 + r * ldd, d, lane);
    const RowFrag t = row_load(s.R + r * ldd, d, lane);
    RowFrag g = row_loss_grad(z, t, gam, bet, d, lane, p.eps, p.ln);
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) g.v[u] *= s.lam[r];
    row_store(s.G2 + r * ldd, g, d, lane);  // λ ⊙ G2
  }
  __syncthreads();
  block_mma<kSplit, kLdsm, kWarps>(
      b, hd, d, op(s.G2, ldd), op_t(s.W2, lw2), 1.0f, [&](int i, int j, float v) {
        s.G1[i * ldh + j] = v * gelu_tanh_grad(s.Z1[i * ldh + j]);  // λ ⊙ G1
      });
  __syncthreads();
  // The commit, into W1n, W2n (the state itself in the run-time instance; the next slot in the
  // compile-time one), each old value read before the products.
  const float tb = s.tau[b - 1];
  const float* W1 = s.W1;
  const float* W2 = s.W2;
  block_mma_accumulate<kSplit, kLdsm, kWarps>(d, hd, b, op_t(s.K, ldd), op(s.G1, ldh), -tb, 0, {},
                                              {}, 0.0f, 0, {}, {}, Accumulate{W1, W1n, lw1});
  block_mma_accumulate<kSplit, kLdsm, kWarps>(hd, d, b, op_t(s.X2, ldh), op(s.G2, ldd), -tb, 0, {},
                                              {}, 0.0f, 0, {}, {}, Accumulate{W2, W2n, lw2});
  if (p.bias) {
    for (int c = tid; c < hd; c += kThreads) {
      float acc = 0.0f;
      for (int j = 0; j < b; ++j) acc += s.G1[j * ldh + c];
      s.b1[c] -= tb * acc;
    }
    for (int c = tid; c < d; c += kThreads) {
      float acc = 0.0f;
      for (int j = 0; j < b; ++j) acc += s.G2[j * ldd + c];
      s.b2[c] -= tb * acc;
    }
  }
  __syncthreads();
}

template <bool kSplit, int kD, int kB>
__device__ __forceinline__ void chunk(const MlpBwdParams& p, const Bufs& s, std::size_t seq0,
                                      std::size_t rs, int blk, int t0, int rows, const RowFrag& gam,
                                      const RowFrag& bet) {
  const int d = kD ? kD : p.d, b = kB ? kB : p.b, hd = 4 * d, ldd = d + 4, ldh = hd + 4, ldb = b + 4;
  const int m = kB ? kB : rows;  // the compile-time shapes run only where b divides T
  const int lw1 = kD ? hd : ldh, lw2 = kD ? d : ldd;  // the state's leading dims (see the kernel)
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  constexpr bool kLdsm = kD != 0;  // as in advance
  if constexpr (kD != 0) assume_global(s.W1, s.W2, s.dW1, s.dW2);
  constexpr int kPairs = kLdsm ? 2 : 1;  // as in advance
  const bool full = m == b;
  const float one = p.bias ? 1.0f : 0.0f;
  const float tb = s.tau[b - 1];
  const int h = blk % p.H;
  const std::size_t cap_h = std::size_t(b) * ldh, cap_d = std::size_t(b) * ldd;  // partials' room
  float* dV = p.dV + seq0 + std::size_t(t0) * rs;

  // Inputs.
  load_backward_inputs<kThreads>(p, s, seq0, rs, blk, t0, m, d, ldd);
  __syncthreads();

  // Z1 = K W1 + b1, X2 = gelu(Z1);  C1 = Q Kᵀ (raw).
  block_mma<kSplit, kLdsm, kWarps>(m, hd, d, op(s.K, ldd), op(s.W1, lw1), 1.0f,
                                   [&](int i, int j, float v) {
                                     const float z = v + s.b1[j];
                                     s.Z1[i * ldh + j] = z;
                                     s.X2[i * ldh + j] = gelu_tanh(z);
                                   });
  block_mma<kSplit, kLdsm, kWarps>(m, m, d, op(s.Q, ldd), op_t(s.K, ldd), 1.0f,
                                   [&](int i, int j, float v) { s.C1[i * ldb + j] = v; });
  __syncthreads();

  // X2 W2 (split-k partials in T1);  C1 ← tril(C1 + 1), M1 = E ⊙ C1;  dK = 0.
  const int Sz2 = splitk_slices(m, d, hd, cap_h, kPairs);
  splitk_mma<kSplit, kLdsm, kPairs>(m, d, Sz2, hd, op(s.X2, ldh), op(s.W2, lw2), 1.0f, s.T1);
  for (int i = tid; i < m * m; i += kThreads) {
    const int r = i / m, j = i % m;
    const float cv = j <= r ? s.C1[r * ldb + j] + one : 0.0f;
    s.C1[r * ldb + j] = cv;
    s.M1[r * ldb + j] = s.tau[r] * s.lam[j] * cv;
  }
  for (int i = tid; i < m * d; i += kThreads) s.dK[(i / d) * ldd + i % d] = 0.0f;
  __syncthreads();

  // Z2 = X2 W2 + b2 (the partials summed by the row's warp), G2 = lnl2(Z2, R), Z2's statistics kept.
  for (int r = warp; r < m; r += kWarps) {
    for (int c = lane; c < d; c += 32) s.Z2[r * ldd + c] = psum(s.T1, Sz2, m, d, r, c) + s.b2[c];
    __syncwarp();
    row_loss_grad_keep_stats(s.Z2 + r * ldd, s.R + r * ldd, s.G2 + r * ldd, s.mu + r, s.rstd + r,
                             gam, bet, d, lane, p.eps, p.ln);
  }
  __syncthreads();

  // P1 = G2 W2ᵀ,  G1 = P1 ⊙ gelu′(Z1).
  block_mma<kSplit, kLdsm, kWarps>(m, hd, d, op(s.G2, ldd), op_t(s.W2, lw2), 1.0f,
                                   [&](int i, int j, float v) {
                                     s.P1[i * ldh + j] = v;
                                     s.G1[i * ldh + j] = v * gelu_tanh_grad(s.Z1[i * ldh + j]);
                                   });
  __syncthreads();

  // Z̄1 = Q W1 + b1 − M1 G1,  X̄2 = gelu(Z̄1).
  block_mma<kSplit, kLdsm, kWarps>(m, hd, d, op(s.Q, ldd), op(s.W1, lw1), 1.0f, m, op(s.M1, ldb),
                                   op(s.G1, ldh), -1.0f, [&](int i, int j, float v) {
                                     const float z = v + s.b1[j];
                                     s.Zb1[i * ldh + j] = z;
                                     s.Xb2[i * ldh + j] = gelu_tanh(z);
                                   });
  __syncthreads();

  // X̄2 X2ᵀ and X̄2 W2 as split-k partials (in dZb1 and dX2, both written later).
  const int Sc2 = splitk_slices(m, m, hd, cap_h), Szb2 = splitk_slices(m, d, hd, cap_h, kPairs);
  splitk_mma<kSplit, kLdsm>(m, m, Sc2, hd, op(s.Xb2, ldh), op_t(s.X2, ldh), 1.0f, s.dZb1);
  splitk_mma<kSplit, kLdsm, kPairs>(m, d, Szb2, hd, op(s.Xb2, ldh), op(s.W2, lw2), 1.0f, s.dX2);
  __syncthreads();

  // C2 = tril(X̄2 X2ᵀ + 1), M2 = E ⊙ C2.
  for (int i = tid; i < m * m; i += kThreads) {
    const int r = i / m, j = i % m;
    const float cv = j <= r ? psum(s.dZb1, Sc2, m, m, r, j) + one : 0.0f;
    s.C2[r * ldb + j] = cv;
    s.M2[r * ldb + j] = s.tau[r] * s.lam[j] * cv;
  }
  __syncthreads();

  // Z̄2 = X̄2 W2 + b2 − M2 G2.
  block_mma<kSplit, kLdsm, kWarps>(
      m, d, m, op(s.M2, ldb), op(s.G2, ldd), -1.0f, [&](int i, int j, float v) {
        s.Zb2[i * ldd + j] = v + psum(s.dX2, Szb2, m, d, i, j) + s.b2[j];
      });
  __syncthreads();

  // Output LN backward: x̂(Z̄2) into s.Xh, dγ and dβ (column walk), dZ̄2 into s.Zb2; dQ = dO or 0.
  block_output_ln_backward<kThreads>(s.Zb2, s.Xh, s.dO, s.rstd2, gam, s.dgam, s.dbet, s.dQ, ldd, m,
                                     d, ldd, p.eps, p.ln, p.res);
  __syncthreads();

  // dM2 = −dZ̄2 G2ᵀ;  (full) T2 = X2 dW2' (split-k partials in dG1, written later), T1 = K dW1'.
  block_mma<kSplit, kLdsm, kWarps>(m, m, d, op(s.Zb2, ldd), op_t(s.G2, ldd), -1.0f,
                                   [&](int i, int j, float v) { s.dM[i * ldb + j] = v; });
  const int St2 = splitk_slices(m, d, hd, cap_h, kPairs);
  if (full) {
    splitk_mma<kSplit, kLdsm, kPairs>(m, d, St2, hd, op(s.X2, ldh), op(s.dW2, ldd), 1.0f, s.dG1);
    block_mma<kSplit, kLdsm, kWarps>(m, hd, d, op(s.K, ldd), op(s.dW1, ldh), 1.0f,
                                     [&](int i, int j, float v) { s.T1[i * ldh + j] = v; });
  }
  __syncthreads();

  // dE = dM2 ⊙ C2, dC2 = tril(dM2 ⊙ E);  dG2 = −M2ᵀ dZ̄2 − e ⊙ (T2 + db2');  de (full).
  for (int i = tid; i < m * m; i += kThreads) {
    const int r = i / m, j = i % m;
    const float dm = s.dM[r * ldb + j];
    s.dE[r * ldb + j] = j <= r ? dm * s.C2[r * ldb + j] : 0.0f;
    s.dC[r * ldb + j] = j <= r ? dm * s.tau[r] * s.lam[j] : 0.0f;
  }
  block_mma<kSplit, kLdsm, kWarps>(
      m, d, m, op_t(s.M2, ldb), op(s.Zb2, ldd), -1.0f, [&](int i, int j, float v) {
        if (full) v -= tb * s.lam[i] * (psum(s.dG1, St2, m, d, i, j) + (p.bias ? s.db2[j] : 0.0f));
        s.dG2[i * ldd + j] = v;
      });
  if (full)
    for (int j = warp; j < m; j += kWarps) {
      float v = 0.0f;
      for (int c = lane; c < hd; c += 32) {
        const float g1 = s.G1[j * ldh + c];
        v -= g1 * (s.T1[j * ldh + c] + (p.bias ? s.db1[c] : 0.0f));
      }
      for (int c = lane; c < d; c += 32) {
        const float g2 = s.G2[j * ldd + c];
        v -= g2 * (psum(s.dG1, St2, m, d, j, c) + (p.bias ? s.db2[c] : 0.0f));
      }
      v = warp_sum(v);
      if (lane == 0) s.de[j] = v;
    }
  __syncthreads();

  // dZ̄1 = (dZ̄2 W2ᵀ + dC2 X2) ⊙ gelu′(Z̄1);  dX2 = dC2ᵀ X̄2 [− e ⊙ (G2 dW2'ᵀ)].
  block_mma<kSplit, kLdsm, kWarps>(
      m, hd, d, op(s.Zb2, ldd), op_t(s.W2, lw2), 1.0f, m, op(s.dC, ldb), op(s.X2, ldh), 1.0f,
      [&](int i, int j, float v) { s.dZb1[i * ldh + j] = v * gelu_tanh_grad(s.Zb1[i * ldh + j]); });
  block_mma<kSplit, kLdsm, kWarps>(m, hd, m, op_t(s.dC, ldb), op(s.Xb2, ldh), 1.0f,
                                   [&](int i, int j, float v) { s.dX2[i * ldh + j] = v; });
  if (full)  // same (m, n) as the call above: each element stays with its thread
    block_mma<kSplit, kLdsm, kWarps>(
        m, hd, d, op(s.G2, ldd), op_t(s.dW2, ldd), 1.0f,
        [&](int i, int j, float v) { s.dX2[i * ldh + j] -= tb * s.lam[i] * v; });
  __syncthreads();

  // Split-k partials of dZ̄1 W1ᵀ (into Z̄1's buffer, dead now), (full) G1 dW1'ᵀ (after it) and
  // dM1 = −dZ̄1 G1ᵀ (in T2, or in dM where T2 is too small);  dG1 = −M1ᵀ dZ̄1 [− e ⊙ (T1 + db1')].
  const int Sq = splitk_slices(m, d, hd, cap_h / 2), Sk = splitk_slices(m, d, hd, cap_h / 2);
  float* const pq = s.Zb1;
  float* const pk = s.Zb1 + std::size_t(Sq) * m * d;
  const int Sm1 = splitk_slices(m, m, hd, cap_d);
  float* const pm1 = std::size_t(Sm1) * m * m <= cap_d ? s.T2 : s.dM;
  splitk_mma<kSplit, kLdsm>(m, d, Sq, hd, op(s.dZb1, ldh), op_t(s.W1, lw1), 1.0f, pq);
  if (full) splitk_mma<kSplit, kLdsm>(m, d, Sk, hd, op(s.G1, ldh), op_t(s.dW1, ldh), 1.0f, pk);
  splitk_mma<kSplit, kLdsm>(m, m, Sm1, hd, op(s.dZb1, ldh), op_t(s.G1, ldh), -1.0f, pm1);
  block_mma<kSplit, kLdsm, kWarps>(
      m, hd, m, op_t(s.M1, ldb), op(s.dZb1, ldh), -1.0f, [&](int i, int j, float v) {
        if (full) v -= tb * s.lam[i] * (s.T1[i * ldh + j] + (p.bias ? s.db1[j] : 0.0f));
        s.dG1[i * ldh + j] = v;
      });
  __syncthreads();

  // dQ += dZ̄1 W1ᵀ, (full) dK −= e ⊙ (G1 dW1'ᵀ);  dE += dM1 ⊙ C1, dC1 = tril(dM1 ⊙ E);
  // dP1 = dG1 ⊙ gelu′(Z1) in place of dG1, dZ1 = dG1 ⊙ P1 ⊙ gelu″(Z1) into T1.
  for (int i = tid; i < m * d; i += kThreads) {
    const int r = i / d, c = i % d;
    s.dQ[r * ldd + c] += psum(pq, Sq, m, d, r, c);
    if (full) s.dK[r * ldd + c] -= tb * s.lam[r] * psum(pk, Sk, m, d, r, c);
  }
  for (int i = tid; i < m * m; i += kThreads) {
    const int r = i / m, j = i % m;
    const float dm = psum(pm1, Sm1, m, m, r, j);
    if (j <= r) s.dE[r * ldb + j] += dm * s.C1[r * ldb + j];
    s.dC[r * ldb + j] = j <= r ? dm * s.tau[r] * s.lam[j] : 0.0f;
  }
  for (int i = tid; i < m * hd; i += kThreads) {
    const int r = i / hd, c = i % hd;
    const float g = s.dG1[r * ldh + c];
    float g1, g2;
    gelu_tanh_grads(s.Z1[r * ldh + c], g1, g2);
    s.T1[r * ldh + c] = g * s.P1[r * ldh + c] * g2;
    s.dG1[r * ldh + c] = g * g1;
  }
  __syncthreads();

  // dQ += dC1 K, dK += dC1ᵀ Q;  dG2 += dP1 W2;  dτ, dλ.
  block_mma<kSplit, kLdsm, kWarps>(m, d, m, op(s.dC, ldb), op(s.K, ldd), 1.0f,
                                   [&](int i, int j, float v) { s.dQ[i * ldd + j] += v; });
  block_mma<kSplit, kLdsm, kWarps>(m, d, m, op_t(s.dC, ldb), op(s.Q, ldd), 1.0f,
                                   [&](int i, int j, float v) { s.dK[i * ldd + j] += v; });
  const int Sg2 = splitk_slices(m, d, hd, cap_h, kPairs);
  splitk_mma<kSplit, kLdsm, kPairs>(m, d, Sg2, hd, op(s.dG1, ldh), op(s.W2, lw2), 1.0f,
                                    s.Zb1);  // dP1 W2, partials
  for (int i = tid; i < m; i += kThreads) {
    float dt = 0.0f, dl = 0.0f;
    for (int j = 0; j <= i; ++j) dt += s.dE[i * ldb + j] * s.lam[j];
    for (int r = i; r < m; ++r) dl += s.dE[r * ldb + i] * s.tau[r];
    if (full) {
      dl += tb * s.de[i];
      if (i == b - 1)
        for (int j = 0; j < m; ++j) dt += s.de[j] * s.lam[j];
    }
    s.dtau[i] += dt;
    p.dlam[std::size_t(blk) * p.T + t0 + i] = dl;
  }
  __syncthreads();

  // dG2 += dP1 W2 (the partials summed by the row's warp);  G2 = lnl2(Z2, R) backward: dZ2 into
  // s.Xh, a (LN) into s.dG2 in place, dV = dR.
  for (int r = warp; r < m; r += kWarps) {
    for (int c = lane; c < d; c += 32) s.dG2[r * ldd + c] += psum(s.Zb1, Sg2, m, d, r, c);
    __syncwarp();
    row_loss_grad_backward(s.dG2 + r * ldd, s.Z2 + r * ldd, s.R + r * ldd, s.mu + r, s.rstd + r, gam,
                           bet, d, lane, p.ln, dV + std::size_t(r) * rs, s.Xh + r * ldd);
  }
  __syncthreads();

  // dZ1 += (dX2 + dZ2 W2ᵀ) ⊙ gelu′(Z1);  dγ, dβ of the loss LN;  the carry dW2, db2.
  block_mma<kSplit, kLdsm, kWarps>(
      m, hd, d, op(s.Xh, ldd), op_t(s.W2, lw2), 1.0f, [&](int i, int j, float v) {
        s.T1[i * ldh + j] += (s.dX2[i * ldh + j] + v) * gelu_tanh_grad(s.Z1[i * ldh + j]);
      });
  if (p.ln)
    block_loss_grad_param_backward(s.dG2, s.Z2, s.R, s.mu, s.rstd, m, d, ldd,
                                   p.gamma + std::size_t(h) * d, p.beta + std::size_t(h) * d,
                                   s.dgam, s.dbet, tid, kThreads);
  // The carry's updates read its old values before their products, in column pairs
  // (block_mma_accumulate): at d = 64 the carry is in global memory, and reading each value after the
  // products put an L2 round trip per element on the path. dW2's three products in one pass.
  block_mma_accumulate<kSplit, kLdsm, kWarps>(
      hd, d, m, op_t(s.Xb2, ldh), op(s.Zb2, ldd), 1.0f, m, op_t(s.X2, ldh), op(s.Xh, ldd), 1.0f, m,
      op_t(s.dG1, ldh), op(s.G2, ldd), Accumulate{full ? s.dW2 : nullptr, s.dW2, ldd});
  block_carry_colsum(s.db2, s.Zb2, s.Xh, ldd, m, d, full, tid, kThreads);
  __syncthreads();

  // dZ1 W1ᵀ (split-k partials in Z̄1's buffer, summed at the copy-out);  the carry dW1, db1.
  const int Sk2 = splitk_slices(m, d, hd, cap_h);
  splitk_mma<kSplit, kLdsm>(m, d, Sk2, hd, op(s.T1, ldh), op_t(s.W1, lw1), 1.0f, s.Zb1);
  block_mma_accumulate<kSplit, kLdsm, kWarps>(d, hd, m, op_t(s.Q, ldd), op(s.dZb1, ldh), 1.0f, m,
                                              op_t(s.K, ldd), op(s.T1, ldh), 1.0f, 0, {}, {},
                                              Accumulate{full ? s.dW1 : nullptr, s.dW1, ldh});
  block_carry_colsum(s.db1, s.dZb1, s.T1, ldh, m, hd, full, tid, kThreads);
  __syncthreads();
  // Copy-out with dK += dZ1 W1ᵀ − dR (residual); the next mini-batch's first writes to s.dQ, s.dK
  // and Z̄1's buffer come after barriers.
  for (int i = tid; i < m * d; i += kThreads) {
    const int r = i / d, c = i % d;
    const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
    float k = s.dK[r * ldd + c] + psum(s.Zb1, Sk2, m, d, r, c);
    if (p.res) {
      const float x = s.dG2[r * ldd + c];  // a (LN) or δ (no LN): −dR = γ ⊙ a, or δ
      k += p.ln ? p.gamma[std::size_t(h) * d + c] * x : x;
    }
    p.dQ[g] = s.dQ[r * ldd + c];
    p.dK[g] = k;
  }
}

// kD, kB: the head dimension and the mini-batch size at compile time (0: read from p at run time). With
// both known, every index, loop bound, stride and split-k slice count of the code above is a constant;
// the host runs such an instance only where b divides T (no short last mini-batch).
template <bool kSplit, int kD, int kB>
__global__ void __launch_bounds__(kThreads, 1) mlp_backward_kernel(MlpBwdParams p) {
  extern __shared__ float smem[];
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int d = kD ? kD : p.d, b = kB ? kB : p.b, hd = 4 * d, ldd = d + 4, ldh = hd + 4;
  const int tid = threadIdx.x, lane = tid & 31;
  Bufs s;
  std::size_t used_s = 0, used_g = 0;
  // With compile-time shapes the cap is one too (the host checks the device allows it), so the whole
  // layout is: every buffer a constant offset from smem or from the block's scratch.
  float* const scratch = p.scratch ? p.scratch + std::size_t(blk) * p.global_floats : nullptr;
  carve(
      s, [&](std::size_t offset) { return smem + offset; },
      [&](std::size_t offset) { return scratch + offset; },  // called only where scratch is set
      d, b, kD ? kFixedSmemCap : p.smem_cap, kD != 0, used_s, used_g);
  const std::size_t rs = std::size_t(p.H) * d;
  const std::size_t seq0 = std::size_t(n) * p.T * rs + std::size_t(h) * d;
  const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * d, d, lane) : RowFrag{};
  const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * d, d, lane) : RowFrag{};
  const std::size_t dh = std::size_t(d) * hd, slot_floats = 2 * dh + hd + d;
  float* slots = p.slots + std::size_t(blk) * p.group * slot_floats;

  for (int i = tid; i < d * ldh; i += kThreads) s.dW1[i] = 0.0f;
  for (int i = tid; i < hd * ldd; i += kThreads) s.dW2[i] = 0.0f;
  for (int c = tid; c < hd; c += kThreads) s.db1[c] = 0.0f;
  for (int c = tid; c < d; c += kThreads) s.db2[c] = s.dgam[c] = s.dbet[c] = 0.0f;
  for (int i = tid; i < b; i += kThreads) {
    s.tau[i] = p.tau[i];
    s.dtau[i] = 0.0f;
  }

  const int n_mb = (p.T + b - 1) / b;
  if constexpr (kD != 0) {
    // The compile-time instance reads the states where they are, in global memory (the checkpoint,
    // then the slots), with unpadded rows: no copy into the block's W1, W2. Mini-batch k0's state is
    // the checkpoint; the recomputation writes state k + 1 into slot k − k0 from state k; only the
    // biases (shared memory) are copied. The source-level profile of the copying form put 16% of the
    // stall samples on the copies (docs/KERNELS.md).
    for (int grp = p.n_ck - 1; grp >= 0; --grp) {
      const int k0 = grp * p.group, k1 = min(n_mb, k0 + p.group);
      const std::size_t ck = std::size_t(blk) * p.n_ck + grp;
      // W1, W2, b1, b2 of mini-batch k's state. The checkpoint's are only read (chunk and advance
      // read W1, W2; advance writes the next state's), hence the const_cast into Bufs' float*.
      auto state = [&](int k) {
        struct S { float *W1, *W2; const float *b1, *b2; };
        if (k == k0)
          return S{const_cast<float*>(p.ckW1 + ck * dh), const_cast<float*>(p.ckW2 + ck * dh),
                   p.bias ? p.ckb1 + ck * hd : nullptr, p.bias ? p.ckb2 + ck * d : nullptr};
        float* slot = slots + std::size_t(k - k0 - 1) * slot_floats;
        return S{slot, slot + dh, slot + 2 * dh, slot + 2 * dh + hd};
      };
      auto load_biases = [&](int k) {
        const auto st = state(k);
        for (int c = tid; c < hd; c += kThreads) s.b1[c] = st.b1 ? st.b1[c] : 0.0f;
        for (int c = tid; c < d; c += kThreads) s.b2[c] = st.b2 ? st.b2[c] : 0.0f;
      };
      __syncthreads();
      load_biases(k0);
      __syncthreads();
      for (int k = k0; k + 1 < k1; ++k) {
        const auto in = state(k), out = state(k + 1);
        Bufs sk = s;
        sk.W1 = in.W1;
        sk.W2 = in.W2;
        advance<kSplit, kD, kB>(p, sk, seq0, rs, blk, k * b, gam, bet, out.W1, out.W2);  // ends with a barrier
        float* ob = const_cast<float*>(out.b1);  // a slot: written here, read back by load_biases
        for (int c = tid; c < hd; c += kThreads) ob[c] = s.b1[c];
        for (int c = tid; c < d; c += kThreads) ob[hd + c] = s.b2[c];
      }
      for (int k = k1 - 1; k >= k0; --k) {
        if (k != k1 - 1) load_biases(k);
        __syncthreads();
        const auto st = state(k);
        Bufs sk = s;
        sk.W1 = st.W1;
        sk.W2 = st.W2;
        const int t0 = k * b;
        chunk<kSplit, kD, kB>(p, sk, seq0, rs, blk, t0, min(b, p.T - t0), gam, bet);
        __syncthreads();
      }
    }
  } else {
    for (int grp = p.n_ck - 1; grp >= 0; --grp) {
      const int k0 = grp * p.group, k1 = min(n_mb, k0 + p.group);
      __syncthreads();
      const std::size_t ck = std::size_t(blk) * p.n_ck + grp;
      for (int i = tid; i < d * hd; i += kThreads) {
        s.W1[(i / hd) * ldh + i % hd] = p.ckW1[ck * dh + i];
        s.W2[(i / d) * ldd + i % d] = p.ckW2[ck * dh + i];
      }
      for (int c = tid; c < hd; c += kThreads) s.b1[c] = p.bias ? p.ckb1[ck * hd + c] : 0.0f;
      for (int c = tid; c < d; c += kThreads) s.b2[c] = p.bias ? p.ckb2[ck * d + c] : 0.0f;
      __syncthreads();
      for (int k = k0; k + 1 < k1; ++k) {
        float* slot = slots + std::size_t(k - k0) * slot_floats;
        for (int i = tid; i < d * hd; i += kThreads) {
          slot[i] = s.W1[(i / hd) * ldh + i % hd];
          slot[dh + i] = s.W2[(i / d) * ldd + i % d];
        }
        for (int c = tid; c < hd; c += kThreads) slot[2 * dh + c] = s.b1[c];
        for (int c = tid; c < d; c += kThreads) slot[2 * dh + hd + c] = s.b2[c];
        // writes the state (in place) only after its barriers
        advance<kSplit, kD, kB>(p, s, seq0, rs, blk, k * b, gam, bet, s.W1, s.W2);
      }
      for (int k = k1 - 1; k >= k0; --k) {
        if (k != k1 - 1) {
          const float* slot = slots + std::size_t(k - k0) * slot_floats;
          for (int i = tid; i < d * hd; i += kThreads) {
            s.W1[(i / hd) * ldh + i % hd] = slot[i];
            s.W2[(i / d) * ldd + i % d] = slot[dh + i];
          }
          for (int c = tid; c < hd; c += kThreads) s.b1[c] = slot[2 * dh + c];
          for (int c = tid; c < d; c += kThreads) s.b2[c] = slot[2 * dh + hd + c];
        }
        __syncthreads();
        const int t0 = k * b;
        chunk<kSplit, kD, kB>(p, s, seq0, rs, blk, t0, min(b, p.T - t0), gam, bet);
        __syncthreads();
      }
    }
  }

  for (int i = tid; i < d * hd; i += kThreads) {
    p.pW1[std::size_t(blk) * dh + i] = s.dW1[(i / hd) * ldh + i % hd];
    p.pW2[std::size_t(blk) * dh + i] = s.dW2[(i / d) * ldd + i % d];
  }
  for (int c = tid; c < hd; c += kThreads) p.pb1[std::size_t(blk) * hd + c] = p.bias ? s.db1[c] : 0.0f;
  for (int c = tid; c < d; c += kThreads) {
    p.pb2[std::size_t(blk) * d + c] = p.bias ? s.db2[c] : 0.0f;
    p.pgam[std::size_t(blk) * d + c] = s.dgam[c];
    p.pbet[std::size_t(blk) * d + c] = s.dbet[c];
  }
  for (int i = tid; i < b; i += kThreads) p.ptau[std::size_t(blk) * b + i] = s.dtau[i];
}

}  // namespace
}  // namespace detail
}  // namespace tttlab::kernels
