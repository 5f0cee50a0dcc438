// TTT-MLP dual-form forward on the GPU, versions 1 and 2 (see tttlab/kernels/ttt.hpp; maths in
// ttt-spec.md §4; the CPU engine's dual_chunk_mlp in core/src/ttt/inner.cpp, which both follow).
//
// Version 1: one block per (sequence, head), 256 threads, the state W1 [d, 4d], b1, W2 [4d, d], b2 on chip for
// the whole sequence when it fits in shared memory (d ≤ 64 at b = 16: 200 KB), otherwise in a
// per-block slice of global memory (the same code through generic pointers; L2 holds it). Matrices
// have padded rows (leading dimension + 1) so that row and column walks avoid bank conflicts.
// fp32 CUDA-core dot products, one output element per thread per step; row-wise LayerNorm work is
// one warp per row.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include "cuda_check.hpp"
#include "ttt_common.cuh"
#include "ttt_host.hpp"
#include "ttt_mlp_internal.hpp"
#include "ttt_mma.cuh"
#include "tttlab/kernels/ttt.hpp"

namespace tttlab::kernels {
namespace detail {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

struct MlpParams {
  const float *Q, *K, *V, *lam, *tau, *gamma, *beta, *W1, *b1, *W2, *b2;
  float* O;
  float* scratch;  // [BH, mlp_floats] when the workspace does not fit in shared memory
  float *ckW1, *ckb1, *ckW2, *ckb2;  // checkpoints (nullptr: none), [BH, n_ck, ...]
  int H, T, d, b, group, n_ck;
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

__host__ __device__ inline std::size_t mlp_floats(int d, int b) {
  const std::size_t hd = 4 * std::size_t(d), ldd = d + 1, ldh = hd + 1, ldb = b + 1;
  return d * ldh + hd * ldd + hd + d + 4 * b * ldd + 3 * b * ldh + b * ldb + 2 * std::size_t(b);
}

__global__ void __launch_bounds__(kThreads) mlp_forward_v1_kernel(MlpParams p) {
  extern __shared__ float smem[];
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int d = p.d, b = p.b, hd = 4 * d, ldd = d + 1, ldh = hd + 1, ldb = b + 1;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float* base = p.scratch ? p.scratch + std::size_t(blk) * mlp_floats(d, b) : smem;
  float* sW1 = base;                      // [d, ldh]
  float* sW2 = sW1 + std::size_t(d) * ldh;  // [hd, ldd]
  float* sb1 = sW2 + std::size_t(hd) * ldd;  // [hd]
  float* sb2 = sb1 + hd;                  // [d]
  float* sK = sb2 + d;                    // [b, ldd]
  float* sX = sK + b * ldd;               // [b, ldd]  V, then Q
  float* sG2 = sX + b * ldd;              // [b, ldd]  Z2, then G2
  float* sZb2 = sG2 + b * ldd;            // [b, ldd]  Z̄2
  float* sZ1 = sZb2 + b * ldd;            // [b, ldh]  Z1, then G1
  float* sX2 = sZ1 + b * ldh;             // [b, ldh]  X2 = gelu(Z1)
  float* sXb2 = sX2 + b * ldh;            // [b, ldh]  X̄2 = gelu(Z̄1)
  float* sM = sXb2 + b * ldh;             // [b, ldb]
  float* sLam = sM + b * ldb;             // [b]
  float* sTau = sLam + b;                 // [b]

  const std::size_t rs = std::size_t(p.H) * d;
  const std::size_t seq0 = std::size_t(n) * p.T * rs + std::size_t(h) * d;
  for (int i = tid; i < d * hd; i += kThreads) {
    sW1[(i / hd) * ldh + i % hd] = p.W1[std::size_t(h) * d * hd + i];
    sW2[(i / d) * ldd + i % d] = p.W2[std::size_t(h) * hd * d + i];
  }
  for (int i = tid; i < hd; i += kThreads) sb1[i] = p.bias ? p.b1[std::size_t(h) * hd + i] : 0.0f;
  for (int i = tid; i < d; i += kThreads) sb2[i] = p.bias ? p.b2[std::size_t(h) * d + i] : 0.0f;
  for (int i = tid; i < b; i += kThreads) sTau[i] = p.tau[i];
  const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * d, d, lane) : RowFrag{};
  const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * d, d, lane) : RowFrag{};
  const float one = p.bias ? 1.0f : 0.0f;
  __syncthreads();

  const int n_mb = (p.T + b - 1) / b;
  for (int mb = 0; mb < n_mb; ++mb) {
    const int t0 = mb * b, m = min(b, p.T - t0);
    write_checkpoint(p, blk, mb, sW1, sb1, sW2, sb2, ldh, ldd);
    for (int i = tid; i < m * d; i += kThreads) {
      const int r = i / d, c = i % d;
      const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
      sK[r * ldd + c] = p.K[g];
      sX[r * ldd + c] = p.V[g];
    }
    for (int i = tid; i < m; i += kThreads) sLam[i] = p.lam[std::size_t(blk) * p.T + t0 + i];
    __syncthreads();

    // Z1 = K W1 + b1,  X2 = gelu(Z1).
    for (int i = tid; i < m * hd; i += kThreads) {
      const int r = i / hd, c = i % hd;
      float acc = sb1[c];
      for (int k = 0; k < d; ++k) acc += sK[r * ldd + k] * sW1[k * ldh + c];
      sZ1[r * ldh + c] = acc;
      sX2[r * ldh + c] = gelu_tanh(acc);
    }
    __syncthreads();

    // Z2 = X2 W2 + b2.
    for (int i = tid; i < m * d; i += kThreads) {
      const int r = i / d, c = i % d;
      float acc = sb2[c];
      for (int k = 0; k < hd; ++k) acc += sX2[r * ldh + k] * sW2[k * ldd + c];
      sG2[r * ldd + c] = acc;
    }
    __syncthreads();

    // G2 = lnl2(Z2, R).
    for (int r = warp; r < m; r += kWarps) {
      const RowFrag z = row_load(sG2 + r * ldd, d, lane);
      RowFrag t = row_load(sX + r * ldd, d, lane);
      if (p.res) {
        const RowFrag k = row_load(sK + r * ldd, d, lane);
#pragma unroll
        for (int u = 0; u < kPerLane; ++u) t.v[u] -= k.v[u];
      }
      row_store(sG2 + r * ldd, row_loss_grad(z, t, gam, bet, d, lane, p.eps, p.ln), d, lane);
    }
    __syncthreads();

    // G1 = (G2 W2ᵀ) ⊙ gelu′(Z1) in place of Z1;  Q into the V buffer.
    for (int i = tid; i < m * hd; i += kThreads) {
      const int r = i / hd, j = i % hd;
      float acc = 0.0f;
      for (int c = 0; c < d; ++c) acc += sG2[r * ldd + c] * sW2[j * ldd + c];
      sZ1[r * ldh + j] = acc * gelu_tanh_grad(sZ1[r * ldh + j]);
    }
    for (int i = tid; i < m * d; i += kThreads) {
      const int r = i / d, c = i % d;
      sX[r * ldd + c] = p.Q[seq0 + std::size_t(t0 + r) * rs + c];
    }
    __syncthreads();

    // M1[i, j] = τ_i λ_j (q_i·k_j + 1), j ≤ i.
    for (int i = tid; i < m * m; i += kThreads) {
      const int r = i / m, j = i % m;
      float v = 0.0f;
      if (j <= r) {
        float dot = 0.0f;
        for (int k = 0; k < d; ++k) dot += sX[r * ldd + k] * sK[j * ldd + k];
        v = sTau[r] * sLam[j] * (dot + one);
      }
      sM[r * ldb + j] = v;
    }
    __syncthreads();

    // X̄2 = gelu(Q W1 + b1 − M1 G1).
    for (int i = tid; i < m * hd; i += kThreads) {
      const int r = i / hd, c = i % hd;
      float acc = sb1[c];
      for (int k = 0; k < d; ++k) acc += sX[r * ldd + k] * sW1[k * ldh + c];
      for (int j = 0; j <= r; ++j) acc -= sM[r * ldb + j] * sZ1[j * ldh + c];
      sXb2[r * ldh + c] = gelu_tanh(acc);
    }
    __syncthreads();

    // M2[i, j] = τ_i λ_j (x̄2_i·x2_j + 1), j ≤ i.
    for (int i = tid; i < m * m; i += kThreads) {
      const int r = i / m, j = i % m;
      float v = 0.0f;
      if (j <= r) {
        float dot = 0.0f;
        for (int k = 0; k < hd; ++k) dot += sXb2[r * ldh + k] * sX2[j * ldh + k];
        v = sTau[r] * sLam[j] * (dot + one);
      }
      sM[r * ldb + j] = v;
    }
    __syncthreads();

    // Z̄2 = X̄2 W2 + b2 − M2 G2.
    for (int i = tid; i < m * d; i += kThreads) {
      const int r = i / d, c = i % d;
      float acc = sb2[c];
      for (int k = 0; k < hd; ++k) acc += sXb2[r * ldh + k] * sW2[k * ldd + c];
      for (int j = 0; j <= r; ++j) acc -= sM[r * ldb + j] * sG2[j * ldd + c];
      sZb2[r * ldd + c] = acc;
    }
    __syncthreads();

    // O = [Q +] LN(Z̄2), and the state update (disjoint buffers).
    for (int r = warp; r < m; r += kWarps) {
      RowFrag o = row_layer_norm(row_load(sZb2 + r * ldd, d, lane), gam, bet, d, lane, p.eps, p.ln);
      if (p.res) {
        const RowFrag q = row_load(sX + r * ldd, d, lane);
#pragma unroll
        for (int u = 0; u < kPerLane; ++u) o.v[u] += q.v[u];
      }
      row_store(p.O + seq0 + std::size_t(t0 + r) * rs, o, d, lane);
    }
    if (m == b) {
      const float tb = sTau[b - 1];
      for (int i = tid; i < d * hd; i += kThreads) {
        {  // W1[k, c] −= τ_b Σ_j λ_j K[j, k] G1[j, c]
          const int k = i / hd, c = i % hd;
          float acc = 0.0f;
          for (int j = 0; j < b; ++j) acc += sLam[j] * sK[j * ldd + k] * sZ1[j * ldh + c];
          sW1[k * ldh + c] -= tb * acc;
        }
        {  // W2[k, c] −= τ_b Σ_j λ_j X2[j, k] G2[j, c]
          const int k = i / d, c = i % d;
          float acc = 0.0f;
          for (int j = 0; j < b; ++j) acc += sLam[j] * sX2[j * ldh + k] * sG2[j * ldd + c];
          sW2[k * ldd + c] -= tb * acc;
        }
      }
      if (p.bias) {
        for (int c = tid; c < hd; c += kThreads) {
          float acc = 0.0f;
          for (int j = 0; j < b; ++j) acc += sLam[j] * sZ1[j * ldh + c];
          sb1[c] -= tb * acc;
        }
        for (int c = tid; c < d; c += kThreads) {
          float acc = 0.0f;
          for (int j = 0; j < b; ++j) acc += sLam[j] * sG2[j * ldd + c];
          sb2[c] -= tb * acc;
        }
      }
    }
    __syncthreads();
  }
}


// ---- Version 2: the same algorithm with every matrix product on tensor cores --------------------
//
// block_mma (ttt_mma.cuh, 3xTF32: fp32-level accuracy) over the same shared-memory matrices, padded
// to leading dimensions d + 4, 4d + 4 and b + 4 (conflict-free or two-way fragment loads). GELU,
// the mask, the biases and the λ-weighting are applied in the products' store step.

// 16 warps: the products and row passes of a mini-batch are short, so more warps shorten each phase
// (the block holds a whole SM's shared memory anyway).
constexpr int kThreadsV2 = 512;
constexpr int kWarpsV2 = kThreadsV2 / 32;

__host__ __device__ inline std::size_t mlp_v2_floats(int d, int b) {
  const std::size_t hd = 4 * std::size_t(d), ldd = d + 4, ldh = hd + 4, ldb = b + 4;
  return d * ldh + hd * ldd + hd + d + 4 * b * ldd + 3 * b * ldh + b * ldb + 2 * std::size_t(b);
}

__global__ void __launch_bounds__(kThreadsV2, 1) mlp_forward_v2_kernel(MlpParams p) {
  constexpr bool kSplit = true;
  extern __shared__ float smem[];
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int d = p.d, b = p.b, hd = 4 * d, ldd = d + 4, ldh = hd + 4, ldb = b + 4;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float* base = p.scratch ? p.scratch + std::size_t(blk) * mlp_v2_floats(d, b) : smem;
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
  for (int i = tid; i < d * hd; i += kThreadsV2) {
    sW1[(i / hd) * ldh + i % hd] = p.W1[std::size_t(h) * d * hd + i];
    sW2[(i / d) * ldd + i % d] = p.W2[std::size_t(h) * hd * d + i];
  }
  for (int i = tid; i < hd; i += kThreadsV2) sb1[i] = p.bias ? p.b1[std::size_t(h) * hd + i] : 0.0f;
  for (int i = tid; i < d; i += kThreadsV2) sb2[i] = p.bias ? p.b2[std::size_t(h) * d + i] : 0.0f;
  for (int i = tid; i < b; i += kThreadsV2) sTau[i] = p.tau[i];
  const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * d, d, lane) : RowFrag{};
  const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * d, d, lane) : RowFrag{};
  const float one = p.bias ? 1.0f : 0.0f;
  __syncthreads();

  const int n_mb = (p.T + b - 1) / b;
  for (int mb = 0; mb < n_mb; ++mb) {
    const int t0 = mb * b, m = min(b, p.T - t0);
    write_checkpoint(p, blk, mb, sW1, sb1, sW2, sb2, ldh, ldd);
    for (int i = tid; i < m * d; i += kThreadsV2) {
      const int r = i / d, c = i % d;
      const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
      sK[r * ldd + c] = p.K[g];
      sX[r * ldd + c] = p.V[g];
    }
    for (int i = tid; i < m; i += kThreadsV2) sLam[i] = p.lam[std::size_t(blk) * p.T + t0 + i];
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
    for (int r = warp; r < m; r += kWarpsV2) {
      const RowFrag z = row_load(sG2 + r * ldd, d, lane);
      RowFrag t = row_load(sX + r * ldd, d, lane);
      if (p.res) {
        const RowFrag k = row_load(sK + r * ldd, d, lane);
#pragma unroll
        for (int u = 0; u < kPerLane; ++u) t.v[u] -= k.v[u];
      }
      row_store(sG2 + r * ldd, row_loss_grad(z, t, gam, bet, d, lane, p.eps, p.ln), d, lane);
    }
    __syncthreads();
    // G1 = (G2 W2ᵀ) ⊙ gelu′(Z1), in place of Z1;  Q into the V buffer.
    block_mma<kSplit>(m, hd, d, op(sG2, ldd), op_t(sW2, ldd), 1.0f, [&](int i, int j, float v) {
      sZ1[i * ldh + j] = v * gelu_tanh_grad(sZ1[i * ldh + j]);
    });
    for (int i = tid; i < m * d; i += kThreadsV2) {
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
    for (int r = warp; r < m; r += kWarpsV2) {
      RowFrag o = row_layer_norm(row_load(sZb2 + r * ldd, d, lane), gam, bet, d, lane, p.eps, p.ln);
      if (p.res) {
        const RowFrag q = row_load(sX + r * ldd, d, lane);
#pragma unroll
        for (int u = 0; u < kPerLane; ++u) o.v[u] += q.v[u];
      }
      row_store(p.O + seq0 + std::size_t(t0 + r) * rs, o, d, lane);
    }
    if (m < b) {
      __syncthreads();
      continue;  // a short last mini-batch stays uncommitted
    }
    for (int i = tid; i < b * hd; i += kThreadsV2) sZ1[(i / hd) * ldh + i % hd] *= sLam[i / hd];
    for (int i = tid; i < b * d; i += kThreadsV2) sG2[(i / d) * ldd + i % d] *= sLam[i / d];
    __syncthreads();
    // W1 −= τ_b Kᵀ(λ ⊙ G1),  W2 −= τ_b X2ᵀ(λ ⊙ G2),  b1, b2 likewise.
    const float tb = sTau[b - 1];
    block_mma<kSplit>(d, hd, b, op_t(sK, ldd), op(sZ1, ldh), 1.0f,
                      [&](int i, int j, float v) { sW1[i * ldh + j] -= tb * v; });
    block_mma<kSplit>(hd, d, b, op_t(sX2, ldh), op(sG2, ldd), 1.0f,
                      [&](int i, int j, float v) { sW2[i * ldd + j] -= tb * v; });
    if (p.bias) {
      for (int c = tid; c < hd; c += kThreadsV2) {
        float acc = 0.0f;
        for (int j = 0; j < b; ++j) acc += sZ1[j * ldh + c];
        sb1[c] -= tb * acc;
      }
      for (int c = tid; c < d; c += kThreadsV2) {
        float acc = 0.0f;
        for (int j = 0; j < b; ++j) acc += sG2[j * ldd + c];
        sb2[c] -= tb * acc;
      }
    }
    __syncthreads();
  }
}

}  // namespace
}  // namespace detail

using namespace detail;

namespace {
std::size_t per_block_bytes(const TttDims& dims, TttMlpForwardVersion v) {
  return (v == TttMlpForwardVersion::V1Simt ? mlp_floats(dims.head_dim, dims.mini_batch)
                                            : mlp_v2_floats(dims.head_dim, dims.mini_batch)) *
         sizeof(float);
}
}  // namespace

std::size_t ttt_mlp_forward_workspace_bytes(const TttDims& dims) {
  check_dims("ttt_mlp_forward_workspace_bytes", dims);
  const std::size_t limit = max_dynamic_smem();
  std::size_t need = 0;
  for (TttMlpForwardVersion v : {TttMlpForwardVersion::V1Simt, TttMlpForwardVersion::V2Tf32x3}) {
    const std::size_t per_block = per_block_bytes(dims, v);
    if (per_block > limit) need = std::max(need, per_block * std::size_t(dims.batch) * dims.heads);
  }
  return need;
}

bool ttt_mlp_forward_supports(TttMlpForwardVersion version, const TttDims& dims) {
  return version != TttMlpForwardVersion::V3Tf32x3 || mlp_forward_v3_supports(dims);
}

void ttt_mlp_forward(const TttMlpForwardArgs& a) {
  const char* fn = "ttt_mlp_forward";
  check_dims(fn, a.dims);
  check_eps(fn, a.opt);
  for (auto [ptr, name] : {std::pair<const void*, const char*>{a.Q, "Q"}, {a.K, "K"}, {a.V, "V"},
                           {a.lambda, "lambda"}, {a.tau, "tau"}, {a.W1, "W1"}, {a.W2, "W2"},
                           {a.O, "O"}})
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
  require(a.version == TttMlpForwardVersion::Default || a.version == TttMlpForwardVersion::V1Simt ||
              a.version == TttMlpForwardVersion::V2Tf32x3 ||
              a.version == TttMlpForwardVersion::V3Tf32x3,
          "ttt_mlp_forward: unknown version " + std::to_string(int(a.version)));
  const TttDims& D = a.dims;
  require(ttt_mlp_forward_supports(a.version, D),
          "ttt_mlp_forward: version 3 needs mini_batch 16 and head_dim 16, 32 or 64 (got b = " +
              std::to_string(D.mini_batch) + ", d = " + std::to_string(D.head_dim) + ")");
  // Default: version 3 where it applies (run 15, H200: 5.41 against version 2's 10.09 ms at the
  // issue's shape; docs/KERNELS.md), version 2 elsewhere.
  if (a.version == TttMlpForwardVersion::V3Tf32x3 ||
      (a.version == TttMlpForwardVersion::Default && mlp_forward_v3_supports(D))) {
    const int group = ck ? a.checkpoint_group : 1;
    mlp_forward_v3(a, ck, group, ttt_num_checkpoints(D, group));
    return;
  }
  const TttMlpForwardVersion v =
      a.version == TttMlpForwardVersion::Default ? TttMlpForwardVersion::V2Tf32x3 : a.version;
  const bool in_smem = per_block_bytes(D, v) <= max_dynamic_smem();
  const std::size_t need = in_smem ? 0 : ttt_mlp_forward_workspace_bytes(D);
  if (need > 0) {
    check_ptr(fn, a.workspace, "workspace (ttt_mlp_forward_workspace_bytes > 0 for this shape)");
    require(a.workspace_bytes >= need, "ttt_mlp_forward: workspace has " +
                                           std::to_string(a.workspace_bytes) + " bytes, needs " +
                                           std::to_string(need));
  }
  MlpParams p{};
  set_token_inputs(p, a);
  p.W1 = a.W1;
  p.b1 = a.b1;
  p.W2 = a.W2;
  p.b2 = a.b2;
  p.O = a.O;
  p.scratch = need > 0 ? static_cast<float*>(a.workspace) : nullptr;
  p.ckW1 = ck ? a.checkpoint_W1 : nullptr;
  p.ckb1 = ck ? a.checkpoint_b1 : nullptr;
  p.ckW2 = ck ? a.checkpoint_W2 : nullptr;
  p.ckb2 = ck ? a.checkpoint_b2 : nullptr;
  p.group = ck ? a.checkpoint_group : 1;
  p.n_ck = ttt_num_checkpoints(D, p.group);
  p.H = D.heads;
  p.T = D.seq_len;
  p.d = D.head_dim;
  p.b = D.mini_batch;
  p.ln = a.opt.layer_norm;
  p.res = a.opt.residual;
  p.bias = a.opt.bias;
  p.eps = a.opt.ln_eps;
  const std::size_t smem = in_smem ? per_block_bytes(D, v) : 0;
  const void* kernel = v == TttMlpForwardVersion::V1Simt
                       ? reinterpret_cast<const void*>(&mlp_forward_v1_kernel)
                       : reinterpret_cast<const void*>(&mlp_forward_v2_kernel);
  set_smem_limit(kernel, smem);
  if (v == TttMlpForwardVersion::V1Simt)
    mlp_forward_v1_kernel<<<D.batch * D.heads, kThreads, smem, a.stream>>>(p);
  else
    mlp_forward_v2_kernel<<<D.batch * D.heads, kThreadsV2, smem, a.stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tttlab::kernels
