// TTT-Linear on the GPU, version 1: the dual-form forward, its second-order backward and the primal
// decode step (see tttlab/kernels/ttt.hpp; maths in ttt-spec.md §3, §5.1, §7.3; the CPU engine in
// core/src/ttt/inner.cpp and inner_backward.cpp, which these kernels follow line by line).
//
// One thread block per (sequence n, head h), 256 threads. The state W [d, d], c [d] stays on chip for
// the whole sequence; the mini-batches are walked in order. Every matrix of a block lives in one
// workspace with padded rows (leading dimension d + 1 and b + 1), so that both row and column walks
// of a warp hit distinct shared-memory banks. The workspace is dynamic shared memory when it fits
// (always for the forward on Hopper) and otherwise a per-block slice of global memory: the code is
// the same, through generic pointers. Products are plain fp32 dot products, one output element per
// thread per step; row-wise LayerNorm work is one warp per row (ttt_common.cuh). Phases are separated
// by __syncthreads(), which also orders the block's global-memory accesses.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "cuda_check.hpp"
#include "ttt_common.cuh"
#include "ttt_host.hpp"
#include "ttt_linear_internal.hpp"
#include "tttlab/kernels/ttt.hpp"

namespace tttlab::kernels {
namespace detail {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// ---- Forward, v1 --------------------------------------------------------------------------------

struct FwdParams {
  const float *Q, *K, *V, *lam, *tau, *gamma, *beta, *W0, *b0;
  float* O;
  float *ckW, *ckb;
  float *fW, *fb, *faW, *fab;
  int B, H, T, d, b, group, n_ck;
  bool ln, res, bias, per_seq;
  float eps;
};

__host__ __device__ inline std::size_t fwd_v1_floats(int d, int b) {
  const std::size_t ldd = d + 1, ldb = b + 1;
  return d * ldd + d + 4 * b * ldd + b * ldb + 2 * b;
}

__global__ void __launch_bounds__(kThreads) linear_forward_v1_kernel(FwdParams p) {
  extern __shared__ float smem[];
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int d = p.d, b = p.b, ldd = d + 1, ldb = b + 1;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float* sW = smem;              // [d, ldd]   the committed state
  float* sc = sW + d * ldd;      // [d]
  float* sK = sc + d;            // [b, ldd]
  float* sX = sK + b * ldd;      // [b, ldd]   V, then Q
  float* sG = sX + b * ldd;      // [b, ldd]   Z, then G
  float* sZb = sG + b * ldd;     // [b, ldd]   Z̄
  float* sM = sZb + b * ldd;     // [b, ldb]   M = E ⊙ tril(QKᵀ + 1)
  float* sLam = sM + b * ldb;    // [b]
  float* sTau = sLam + b;        // [b]

  const std::size_t rs = std::size_t(p.H) * d;  // row stride of Q, K, V, O
  const std::size_t seq0 = std::size_t(n) * p.T * rs + std::size_t(h) * d;
  const float* W0 = p.W0 + (p.per_seq ? std::size_t(blk) : std::size_t(h)) * d * d;
  const float* b0 = p.b0 ? p.b0 + (p.per_seq ? std::size_t(blk) : std::size_t(h)) * d : nullptr;
  for (int i = tid; i < d * d; i += kThreads) sW[(i / d) * ldd + i % d] = W0[i];
  for (int c = tid; c < d; c += kThreads) sc[c] = p.bias ? b0[c] : 0.0f;
  for (int i = tid; i < b; i += kThreads) sTau[i] = p.tau[i];
  const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * d, d, lane) : RowFrag{};
  const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * d, d, lane) : RowFrag{};
  const float one = p.bias ? 1.0f : 0.0f;
  __syncthreads();

  const int n_mb = (p.T + b - 1) / b;
  for (int mb = 0; mb < n_mb; ++mb) {
    const int t0 = mb * b, m = min(b, p.T - t0);
    if (p.ckW && mb % p.group == 0) {
      const std::size_t ck = std::size_t(blk) * p.n_ck + mb / p.group;
      for (int i = tid; i < d * d; i += kThreads) p.ckW[ck * d * d + i] = sW[(i / d) * ldd + i % d];
      if (p.ckb)
        for (int c = tid; c < d; c += kThreads) p.ckb[ck * d + c] = sc[c];
    }
    for (int i = tid; i < m * d; i += kThreads) {
      const int r = i / d, c = i % d;
      const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
      sK[r * ldd + c] = p.K[g];
      sX[r * ldd + c] = p.V[g];
    }
    for (int i = tid; i < m; i += kThreads) sLam[i] = p.lam[std::size_t(blk) * p.T + t0 + i];
    __syncthreads();

    // Z = K W + 1c at the mini-batch start state.
    for (int i = tid; i < m * d; i += kThreads) {
      const int r = i / d, c = i % d;
      float acc = sc[c];
      for (int k = 0; k < d; ++k) acc += sK[r * ldd + k] * sW[k * ldd + c];
      sG[r * ldd + c] = acc;
    }
    __syncthreads();

    // G = ∂ℓ/∂Z row by row, target R = V − K (residual) or V.
    for (int r = warp; r < m; r += kWarps) {
      const RowFrag z = row_load(sG + r * ldd, d, lane);
      RowFrag t = row_load(sX + r * ldd, d, lane);
      if (p.res) {
        const RowFrag k = row_load(sK + r * ldd, d, lane);
#pragma unroll
        for (int u = 0; u < kPerLane; ++u) t.v[u] -= k.v[u];
      }
      row_store(sG + r * ldd, row_loss_grad(z, t, gam, bet, d, lane, p.eps, p.ln), d, lane);
    }
    __syncthreads();

    for (int i = tid; i < m * d; i += kThreads) {
      const int r = i / d, c = i % d;
      sX[r * ldd + c] = p.Q[seq0 + std::size_t(t0 + r) * rs + c];
    }
    __syncthreads();

    // M[i, j] = τ_i λ_j (q_i·k_j + 1) for j ≤ i.
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

    // Z̄ = Q W + 1c − M G.
    for (int i = tid; i < m * d; i += kThreads) {
      const int r = i / d, c = i % d;
      float acc = sc[c];
      for (int k = 0; k < d; ++k) acc += sX[r * ldd + k] * sW[k * ldd + c];
      for (int j = 0; j <= r; ++j) acc -= sM[r * ldb + j] * sG[j * ldd + c];
      sZb[r * ldd + c] = acc;
    }
    __syncthreads();

    // O = [Q +] LN(Z̄), and the state update (disjoint buffers: no barrier between them).
    for (int r = warp; r < m; r += kWarps) {
      RowFrag o = row_layer_norm(row_load(sZb + r * ldd, d, lane), gam, bet, d, lane, p.eps, p.ln);
      if (p.res) {
        const RowFrag q = row_load(sX + r * ldd, d, lane);
#pragma unroll
        for (int u = 0; u < kPerLane; ++u) o.v[u] += q.v[u];
      }
      row_store(p.O + seq0 + std::size_t(t0 + r) * rs, o, d, lane);
    }
    // A = Kᵀ diag(λ) G: committed with τ_b when the mini-batch is full, else the open accumulator.
    const bool full = m == b;
    if (full || p.faW) {
      const float tb = sTau[b - 1];
      for (int i = tid; i < d * d; i += kThreads) {
        const int k = i / d, c = i % d;
        float acc = 0.0f;
        for (int j = 0; j < m; ++j) acc += sLam[j] * sK[j * ldd + k] * sG[j * ldd + c];
        if (full)
          sW[k * ldd + c] -= tb * acc;
        else
          p.faW[std::size_t(blk) * d * d + i] = acc;
      }
      for (int c = tid; c < d; c += kThreads) {
        float acc = 0.0f;
        for (int j = 0; j < m; ++j) acc += sLam[j] * sG[j * ldd + c];
        if (full) {
          if (p.bias) sc[c] -= tb * acc;
        } else if (p.fab) {
          p.fab[std::size_t(blk) * d + c] = p.bias ? acc : 0.0f;
        }
      }
    }
    __syncthreads();
  }

  if (p.fW)
    for (int i = tid; i < d * d; i += kThreads)
      p.fW[std::size_t(blk) * d * d + i] = sW[(i / d) * ldd + i % d];
  if (p.fb)
    for (int c = tid; c < d; c += kThreads) p.fb[std::size_t(blk) * d + c] = sc[c];
  if (p.T % b == 0) {
    if (p.faW)
      for (int i = tid; i < d * d; i += kThreads) p.faW[std::size_t(blk) * d * d + i] = 0.0f;
    if (p.fab)
      for (int c = tid; c < d; c += kThreads) p.fab[std::size_t(blk) * d + c] = 0.0f;
  }
}

// ---- Backward -----------------------------------------------------------------------------------
//
// Per block: walk the checkpoint groups in reverse; recompute the states inside a group from its
// checkpoint (kept in a per-block slot array in global memory); walk the group's mini-batches in
// reverse, carrying dW', dc' (∂L/∂ the state after the mini-batch). The per-block contributions to
// the shared parameters (dW0, db0, dγ, dβ, dτ) are written to partial buffers and summed over the
// batch by a second kernel, in a fixed order.

__host__ __device__ inline std::size_t bwd_floats(int d, int b) {
  const std::size_t ldd = d + 1, ldb = b + 1;
  return 2 * d * ldd + 4 * std::size_t(d) + 9 * b * ldd + 2 * b * ldb + 8 * std::size_t(b);
}

struct BwdSmem {
  float *W, *dW, *c, *dc, *Q, *K, *R, *dO, *Z, *G, *Zb, *dG, *dZ, *C, *dM;
  float *lam, *tau, *mu, *rstd, *mu2, *rstd2, *de, *dtau, *dgam, *dbet;
};

__device__ inline BwdSmem carve_bwd(float* base, int d, int b) {
  const int ldd = d + 1, ldb = b + 1;
  BwdSmem s;
  float* p = base;
  auto take = [&](std::size_t n) {
    float* r = p;
    p += n;
    return r;
  };
  s.W = take(std::size_t(d) * ldd);
  s.dW = take(std::size_t(d) * ldd);
  s.c = take(d);
  s.dc = take(d);
  s.dgam = take(d);
  s.dbet = take(d);
  s.Q = take(std::size_t(b) * ldd);
  s.K = take(std::size_t(b) * ldd);
  s.R = take(std::size_t(b) * ldd);
  s.dO = take(std::size_t(b) * ldd);
  s.Z = take(std::size_t(b) * ldd);
  s.G = take(std::size_t(b) * ldd);
  s.Zb = take(std::size_t(b) * ldd);
  s.dG = take(std::size_t(b) * ldd);
  s.dZ = take(std::size_t(b) * ldd);
  s.C = take(std::size_t(b) * ldb);
  s.dM = take(std::size_t(b) * ldb);
  s.lam = take(b);
  s.tau = take(b);
  s.mu = take(b);
  s.rstd = take(b);
  s.mu2 = take(b);
  s.rstd2 = take(b);
  s.de = take(b);
  s.dtau = take(b);
  return s;
}

// One full mini-batch of the forward without the read-out: W ← W − τ_b Kᵀdiag(λ)G, c likewise.
// Uses s.K, s.R, s.Z, s.G, s.lam as scratch. Ends with a barrier.
__device__ void bwd_advance(const BwdParams& p, const BwdSmem& s, std::size_t seq0, std::size_t rs,
                            int blk, int t0, const RowFrag& gam, const RowFrag& bet) {
  const int d = p.d, b = p.b, ldd = d + 1;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int i = tid; i < b * d; i += kThreads) {
    const int r = i / d, c = i % d;
    const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
    const float k = p.K[g], v = p.V[g];
    s.K[r * ldd + c] = k;
    s.R[r * ldd + c] = p.res ? v - k : v;
  }
  for (int i = tid; i < b; i += kThreads) s.lam[i] = p.lam[std::size_t(blk) * p.T + t0 + i];
  __syncthreads();
  for (int i = tid; i < b * d; i += kThreads) {
    const int r = i / d, c = i % d;
    float acc = s.c[c];
    for (int k = 0; k < d; ++k) acc += s.K[r * ldd + k] * s.W[k * ldd + c];
    s.Z[r * ldd + c] = acc;
  }
  __syncthreads();
  for (int r = warp; r < b; r += kWarps) {
    const RowFrag z = row_load(s.Z + r * ldd, d, lane);
    const RowFrag t = row_load(s.R + r * ldd, d, lane);
    row_store(s.G + r * ldd, row_loss_grad(z, t, gam, bet, d, lane, p.eps, p.ln), d, lane);
  }
  __syncthreads();
  const float tb = s.tau[b - 1];
  for (int i = tid; i < d * d; i += kThreads) {
    const int k = i / d, c = i % d;
    float acc = 0.0f;
    for (int j = 0; j < b; ++j) acc += s.lam[j] * s.K[j * ldd + k] * s.G[j * ldd + c];
    s.W[k * ldd + c] -= tb * acc;
  }
  if (p.bias)
    for (int c = tid; c < d; c += kThreads) {
      float acc = 0.0f;
      for (int j = 0; j < b; ++j) acc += s.lam[j] * s.G[j * ldd + c];
      s.c[c] -= tb * acc;
    }
  __syncthreads();
}

// The backward of one mini-batch (m ≤ b rows from t0) at state (s.W, s.c), carry (s.dW, s.dc).
__device__ void bwd_chunk(const BwdParams& p, const BwdSmem& s, std::size_t seq0, std::size_t rs,
                          int blk, int t0, int m, const RowFrag& gam, const RowFrag& bet) {
  const int d = p.d, b = p.b, ldd = d + 1, ldb = b + 1;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const bool full = m == b;
  const float one = p.bias ? 1.0f : 0.0f;
  const float tb = s.tau[b - 1];
  float* dQ = p.dQ + seq0 + std::size_t(t0) * rs;  // rows of this mini-batch, leading dim rs
  float* dK = p.dK + seq0 + std::size_t(t0) * rs;
  float* dV = p.dV + seq0 + std::size_t(t0) * rs;

  // P1: inputs.
  for (int i = tid; i < m * d; i += kThreads) {
    const int r = i / d, c = i % d;
    const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
    const float k = p.K[g], v = p.V[g];
    s.Q[r * ldd + c] = p.Q[g];
    s.K[r * ldd + c] = k;
    s.R[r * ldd + c] = p.res ? v - k : v;
    s.dO[r * ldd + c] = p.dO[g];
    dK[std::size_t(r) * rs + c] = 0.0f;
  }
  for (int i = tid; i < m; i += kThreads) s.lam[i] = p.lam[std::size_t(blk) * p.T + t0 + i];
  __syncthreads();

  // P2: Z = K W + 1c;  C = tril(QKᵀ + 1).
  for (int i = tid; i < m * d; i += kThreads) {
    const int r = i / d, c = i % d;
    float acc = s.c[c];
    for (int k = 0; k < d; ++k) acc += s.K[r * ldd + k] * s.W[k * ldd + c];
    s.Z[r * ldd + c] = acc;
  }
  for (int i = tid; i < m * m; i += kThreads) {
    const int r = i / m, j = i % m;
    float v = 0.0f;
    if (j <= r) {
      float dot = 0.0f;
      for (int k = 0; k < d; ++k) dot += s.Q[r * ldd + k] * s.K[j * ldd + k];
      v = dot + one;
    }
    s.C[r * ldb + j] = v;
  }
  __syncthreads();

  // P3: G = lnl2(Z, R); keep Z's row statistics.
  for (int r = warp; r < m; r += kWarps)
    row_loss_grad_keep_stats(s.Z + r * ldd, s.R + r * ldd, s.G + r * ldd, s.mu + r, s.rstd + r,
                             gam, bet, d, lane, p.eps, p.ln);
  __syncthreads();

  // P4: Z̄ = Q W + 1c − M G,  M[i,j] = τ_i λ_j C[i,j].
  for (int i = tid; i < m * d; i += kThreads) {
    const int r = i / d, c = i % d;
    float acc = s.c[c];
    for (int k = 0; k < d; ++k) acc += s.Q[r * ldd + k] * s.W[k * ldd + c];
    const float tr = s.tau[r];
    for (int j = 0; j <= r; ++j) acc -= tr * s.lam[j] * s.C[r * ldb + j] * s.G[j * ldd + c];
    s.Zb[r * ldd + c] = acc;
  }
  __syncthreads();

  // P5–P6: O = [Q +] LN(Z̄) backward: x̂(Z̄) into s.dZ (free until P7), dγ and dβ of the output LN
  // (column walk, one thread per feature: deterministic), dZ̄ into s.Zb, dQ = dO (residual) or 0.
  block_output_ln_backward<kThreads>(s.Zb, s.dZ, s.dO, s.rstd2, gam, s.dgam, s.dbet, dQ, rs, m, d,
                                     ldd, p.eps, p.ln, p.res);
  __syncthreads();

  // P7: dQ += dZ̄ Wᵀ;  dM = −dZ̄ Gᵀ (lower triangle);  KdW = K dW' into s.dZ (full only).
  for (int i = tid; i < m * d; i += kThreads) {
    const int r = i / d, k = i % d;
    float acc = 0.0f;
    for (int c = 0; c < d; ++c) acc += s.Zb[r * ldd + c] * s.W[k * ldd + c];
    dQ[std::size_t(r) * rs + k] += acc;
  }
  for (int i = tid; i < m * m; i += kThreads) {
    const int r = i / m, j = i % m;
    float v = 0.0f;
    if (j <= r)
      for (int c = 0; c < d; ++c) v -= s.Zb[r * ldd + c] * s.G[j * ldd + c];
    s.dM[r * ldb + j] = v;
  }
  if (full)
    for (int i = tid; i < m * d; i += kThreads) {
      const int j = i / d, c = i % d;
      float acc = 0.0f;
      for (int k = 0; k < d; ++k) acc += s.K[j * ldd + k] * s.dW[k * ldd + c];
      s.dZ[j * ldd + c] = acc;
    }
  __syncthreads();

  // P8: dG = −Mᵀ dZ̄ − diag(e)(K dW') − e ⊗ dc';  dK −= diag(e) G dW'ᵀ;
  //     de_j = −Σ_c (K dW')[j,c] G[j,c] − G_j·dc'   (e = τ_b λ, full mini-batches only).
  for (int i = tid; i < m * d; i += kThreads) {
    const int j = i / d, c = i % d;
    float acc = 0.0f;
    const float lj = s.lam[j];
    for (int r = j; r < m; ++r) acc -= s.tau[r] * lj * s.C[r * ldb + j] * s.Zb[r * ldd + c];
    if (full) {
      const float e = tb * lj;
      acc -= e * s.dZ[j * ldd + c];
      if (p.bias) acc -= e * s.dc[c];
    }
    s.dG[j * ldd + c] = acc;
  }
  if (full) {
    for (int i = tid; i < m * d; i += kThreads) {
      const int j = i / d, k = i % d;
      float acc = 0.0f;
      for (int c = 0; c < d; ++c) acc += s.G[j * ldd + c] * s.dW[k * ldd + c];
      dK[std::size_t(j) * rs + k] -= tb * s.lam[j] * acc;
    }
    for (int j = warp; j < m; j += kWarps) {
      const RowFrag kdw = row_load(s.dZ + j * ldd, d, lane);
      const RowFrag g = row_load(s.G + j * ldd, d, lane);
      float v = -row_dot(kdw, g);
      if (p.bias) v -= row_dot(g, row_load(s.dc, d, lane));
      if (lane == 0) s.de[j] = v;
    }
  }
  __syncthreads();

  // P9: dC = tril(dM ⊙ E): dQ += dC K, dK += dCᵀ Q;  the η chain (dE = dM ⊙ C): dτ, dλ;
  //     backward of G = lnl2(Z, R): a = P(δ)/σ into s.dG, dZ into s.dZ, dV = dR.
  for (int i = tid; i < m * d; i += kThreads) {
    const int r = i / d, k = i % d;
    float aq = 0.0f, ak = 0.0f;
    for (int j = 0; j <= r; ++j) aq += s.dM[r * ldb + j] * s.lam[j] * s.K[j * ldd + k];
    dQ[std::size_t(r) * rs + k] += s.tau[r] * aq;
    const int j = r;  // dK row j: Σ_{i ≥ j} dC[i, j] Q[i, k]
    for (int r2 = j; r2 < m; ++r2) ak += s.dM[r2 * ldb + j] * s.tau[r2] * s.Q[r2 * ldd + k];
    dK[std::size_t(j) * rs + k] += s.lam[j] * ak;
  }
  for (int i = tid; i < m; i += kThreads) {
    float dt = 0.0f, dl = 0.0f;
    for (int j = 0; j <= i; ++j) dt += s.dM[i * ldb + j] * s.C[i * ldb + j] * s.lam[j];
    for (int r = i; r < m; ++r) dl += s.dM[r * ldb + i] * s.C[r * ldb + i] * s.tau[r];
    if (full) {
      dl += tb * s.de[i];
      if (i == b - 1)
        for (int j = 0; j < m; ++j) dt += s.de[j] * s.lam[j];
    }
    s.dtau[i] += dt;
    p.dlam[std::size_t(blk) * p.T + t0 + i] = dl;
  }
  for (int r = warp; r < m; r += kWarps)
    row_loss_grad_backward(s.dG + r * ldd, s.Z + r * ldd, s.R + r * ldd, s.mu + r, s.rstd + r, gam,
                           bet, d, lane, p.ln, dV + std::size_t(r) * rs, s.dZ + r * ldd);
  __syncthreads();

  // P10: dK += dZ Wᵀ − dR (residual);  dγ, dβ of the loss LN;  the carry:
  //      dW ← [dW' +] Qᵀ dZ̄ + Kᵀ dZ,  dc ← [dc' +] 1ᵀdZ̄ + 1ᵀdZ.
  for (int i = tid; i < m * d; i += kThreads) {
    const int j = i / d, k = i % d;
    float acc = 0.0f;
    for (int c = 0; c < d; ++c) acc += s.dZ[j * ldd + c] * s.W[k * ldd + c];
    if (p.res) {
      const float x = s.dG[j * ldd + k];  // a (LN) or δ (no LN):  −dR = γ⊙a or δ
      acc += p.ln ? p.gamma[std::size_t(blk % p.H) * d + k] * x : x;
    }
    dK[std::size_t(j) * rs + k] += acc;
  }
  if (p.ln)
    block_loss_grad_param_backward(s.dG, s.Z, s.R, s.mu, s.rstd, m, d, ldd,
                                   p.gamma + std::size_t(blk % p.H) * d,
                                   p.beta + std::size_t(blk % p.H) * d, s.dgam, s.dbet, tid,
                                   kThreads);
  for (int i = tid; i < d * d; i += kThreads) {
    const int k = i / d, c = i % d;
    float acc = full ? s.dW[k * ldd + c] : 0.0f;
    for (int r = 0; r < m; ++r)
      acc += s.Q[r * ldd + k] * s.Zb[r * ldd + c] + s.K[r * ldd + k] * s.dZ[r * ldd + c];
    s.dW[k * ldd + c] = acc;
  }
  for (int c = tid; c < d; c += kThreads) {
    float acc = full ? s.dc[c] : 0.0f;
    for (int r = 0; r < m; ++r) acc += s.Zb[r * ldd + c] + s.dZ[r * ldd + c];
    s.dc[c] = acc;
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads) linear_backward_v1_kernel(BwdParams p) {
  extern __shared__ float smem[];
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int d = p.d, b = p.b, ldd = d + 1;
  const int tid = threadIdx.x, lane = tid & 31;
  float* base = p.scratch ? p.scratch + std::size_t(blk) * bwd_floats(d, b) : smem;
  const BwdSmem s = carve_bwd(base, d, b);
  const std::size_t rs = std::size_t(p.H) * d;
  const std::size_t seq0 = std::size_t(n) * p.T * rs + std::size_t(h) * d;
  const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * d, d, lane) : RowFrag{};
  const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * d, d, lane) : RowFrag{};
  const std::size_t slot_floats = std::size_t(d) * d + d;
  float* slots = p.slots + std::size_t(blk) * p.group * slot_floats;

  for (int i = tid; i < d * ldd; i += kThreads) s.dW[i] = 0.0f;
  for (int c = tid; c < d; c += kThreads) s.dc[c] = s.dgam[c] = s.dbet[c] = 0.0f;
  for (int i = tid; i < b; i += kThreads) {
    s.tau[i] = p.tau[i];
    s.dtau[i] = 0.0f;
  }

  const int n_mb = (p.T + b - 1) / b;
  for (int grp = p.n_ck - 1; grp >= 0; --grp) {
    const int k0 = grp * p.group, k1 = min(n_mb, k0 + p.group);
    __syncthreads();
    const std::size_t ck = std::size_t(blk) * p.n_ck + grp;
    for (int i = tid; i < d * d; i += kThreads) s.W[(i / d) * ldd + i % d] = p.ckW[ck * d * d + i];
    for (int c = tid; c < d; c += kThreads) s.c[c] = p.bias ? p.ckb[ck * d + c] : 0.0f;
    __syncthreads();
    for (int k = k0; k + 1 < k1; ++k) {
      float* slot = slots + std::size_t(k - k0) * slot_floats;
      for (int i = tid; i < d * d; i += kThreads) slot[i] = s.W[(i / d) * ldd + i % d];
      for (int c = tid; c < d; c += kThreads) slot[d * d + c] = s.c[c];
      bwd_advance(p, s, seq0, rs, blk, k * b, gam, bet);  // reads s.W only after its first barrier
    }
    for (int k = k1 - 1; k >= k0; --k) {
      if (k != k1 - 1) {
        const float* slot = slots + std::size_t(k - k0) * slot_floats;
        for (int i = tid; i < d * d; i += kThreads) s.W[(i / d) * ldd + i % d] = slot[i];
        for (int c = tid; c < d; c += kThreads) s.c[c] = slot[d * d + c];
        __syncthreads();
      }
      const int t0 = k * b;
      bwd_chunk(p, s, seq0, rs, blk, t0, min(b, p.T - t0), gam, bet);
    }
  }

  for (int i = tid; i < d * d; i += kThreads)
    p.pW[std::size_t(blk) * d * d + i] = s.dW[(i / d) * ldd + i % d];
  for (int c = tid; c < d; c += kThreads) {
    p.pb[std::size_t(blk) * d + c] = p.bias ? s.dc[c] : 0.0f;
    p.pgam[std::size_t(blk) * d + c] = s.dgam[c];
    p.pbet[std::size_t(blk) * d + c] = s.dbet[c];
  }
  for (int i = tid; i < b; i += kThreads) p.ptau[std::size_t(blk) * b + i] = s.dtau[i];
}

// See sum_over_batch in ttt_host.hpp.
__global__ void sum_over_batch_kernel(const float* part, float* out, int B, int H, int len) {
  const std::size_t total = std::size_t(H) * len;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < total;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t h = i / len, e = i % len;
    float acc = 0.0f;
    for (int n = 0; n < B; ++n) acc += part[(std::size_t(n) * H + h) * len + e];
    out[i] = acc;
  }
}

// ---- Decode: one token, primal form --------------------------------------------------------------

struct DecodeParams {
  const float *q, *k, *v, *lam, *tau, *gamma, *beta;
  float *W, *c, *aW, *ac, *o;
  int B, H, d, b, pos;
  bool ln, res, bias;
  float eps;
};

constexpr int kDecodeThreads = 128;

__global__ void __launch_bounds__(kDecodeThreads) linear_decode(DecodeParams p) {
  __shared__ float sq[kMaxHeadDim], sk[kMaxHeadDim], sz[kMaxHeadDim], sg[kMaxHeadDim];
  const int blk = blockIdx.x, h = blk % p.H;
  const int d = p.d, tid = threadIdx.x, lane = tid & 31;
  const std::size_t row = std::size_t(blk) * d;  // (n·H + h)·d: the token's head slice
  for (int c = tid; c < d; c += kDecodeThreads) {
    sq[c] = p.q[row + c];
    sk[c] = p.k[row + c];
  }
  __syncthreads();
  float* W = p.W + std::size_t(blk) * d * d;
  float* aW = p.aW + std::size_t(blk) * d * d;
  for (int c = tid; c < d; c += kDecodeThreads) {
    float acc = p.bias ? p.c[row + c] : 0.0f;
    for (int k = 0; k < d; ++k) acc += sk[k] * W[std::size_t(k) * d + c];
    sz[c] = acc;
  }
  __syncthreads();
  if (tid < 32) {
    const RowFrag z = row_load(sz, d, lane);
    RowFrag t = row_load(p.v + row, d, lane);
    if (p.res) {
      const RowFrag kk = row_load(sk, d, lane);
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) t.v[u] -= kk.v[u];
    }
    const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * d, d, lane) : RowFrag{};
    const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * d, d, lane) : RowFrag{};
    row_store(sg, row_loss_grad(z, t, gam, bet, d, lane, p.eps, p.ln), d, lane);
  }
  __syncthreads();
  // Each thread owns columns c of W, A_W, c, A_c: accumulate, materialise W_t, read out, commit.
  const float lam = p.lam[blk], tp = p.tau[p.pos];
  const bool commit = p.pos + 1 == p.b;
  for (int c = tid; c < d; c += kDecodeThreads) {
    const float gc = sg[c];
    float zb = 0.0f;
    for (int k = 0; k < d; ++k) {
      const std::size_t e = std::size_t(k) * d + c;
      const float a = aW[e] + lam * sk[k] * gc;
      const float w = W[e] - tp * a;
      zb += sq[k] * w;
      if (commit) {
        W[e] = w;
        aW[e] = 0.0f;
      } else {
        aW[e] = a;
      }
    }
    if (p.bias) {
      const float a = p.ac[row + c] + lam * gc;
      const float cb = p.c[row + c] - tp * a;
      zb += cb;
      if (commit) {
        p.c[row + c] = cb;
        p.ac[row + c] = 0.0f;
      } else {
        p.ac[row + c] = a;
      }
    }
    sz[c] = zb;
  }
  __syncthreads();
  if (tid < 32) {
    const RowFrag gam = p.ln ? row_load(p.gamma + std::size_t(h) * d, d, lane) : RowFrag{};
    const RowFrag bet = p.ln ? row_load(p.beta + std::size_t(h) * d, d, lane) : RowFrag{};
    RowFrag o = row_layer_norm(row_load(sz, d, lane), gam, bet, d, lane, p.eps, p.ln);
    if (p.res) {
      const RowFrag q = row_load(sq, d, lane);
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) o.v[u] += q.v[u];
    }
    row_store(p.o + row, o, d, lane);
  }
}

}  // namespace

void sum_over_batch(const float* part, float* out, int B, int H, int len, cudaStream_t stream) {
  const std::size_t total = std::size_t(H) * len;
  const int grid = static_cast<int>(std::min<std::size_t>(ceil_div(total, 256), 1024));
  sum_over_batch_kernel<<<grid, 256, 0, stream>>>(part, out, B, H, len);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

void linear_forward_v1(const TttLinearForwardArgs& a) {
  const TttDims& D = a.dims;
  const std::size_t bytes = fwd_v1_floats(D.head_dim, D.mini_batch) * sizeof(float);
  const std::size_t limit = max_dynamic_smem();
  require(bytes <= limit, "ttt_linear_forward: head_dim " + std::to_string(D.head_dim) +
                              " with mini_batch " + std::to_string(D.mini_batch) + " needs " +
                              std::to_string(bytes) + " bytes of shared memory per block; the "
                              "device allows " + std::to_string(limit));
  FwdParams p{};
  set_token_inputs(p, a);
  p.W0 = a.W0;
  p.b0 = a.b0;
  p.O = a.O;
  p.ckW = a.checkpoint_W;
  p.ckb = a.checkpoint_b;
  p.fW = a.final_W;
  p.fb = a.final_b;
  p.faW = a.final_acc_W;
  p.fab = a.final_acc_b;
  p.B = D.batch;
  p.H = D.heads;
  p.T = D.seq_len;
  p.d = D.head_dim;
  p.b = D.mini_batch;
  p.group = a.checkpoint_group > 0 ? a.checkpoint_group : 1;
  p.n_ck = ttt_num_checkpoints(D, p.group);
  p.ln = a.opt.layer_norm;
  p.res = a.opt.residual;
  p.bias = a.opt.bias;
  p.per_seq = a.per_sequence_init;
  p.eps = a.opt.ln_eps;
  set_smem_limit(reinterpret_cast<const void*>(&linear_forward_v1_kernel), bytes);
  linear_forward_v1_kernel<<<D.batch * D.heads, kThreads, bytes, a.stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace detail

using namespace detail;

// The version Default picks where the tensor-core kernel supports the shape (docs/KERNELS.md says
// why this one).
constexpr TttLinearForwardVersion kDefaultTensorCoreVersion = TttLinearForwardVersion::V5Tf32x3;
// The backward version Default picks where backward v3 supports the shape (else v2).
constexpr TttBackwardVersion kDefaultBackwardVersion = TttBackwardVersion::V3Fused;

int ttt_num_mini_batches(const TttDims& dims) {
  return (dims.seq_len + dims.mini_batch - 1) / dims.mini_batch;
}

int ttt_num_checkpoints(const TttDims& dims, int checkpoint_group) {
  if (checkpoint_group < 1) throw std::invalid_argument("checkpoint_group must be >= 1");
  return (ttt_num_mini_batches(dims) + checkpoint_group - 1) / checkpoint_group;
}

void check_linear_forward_args(const TttLinearForwardArgs& a) {
  const char* fn = "ttt_linear_forward";
  check_dims(fn, a.dims);
  check_eps(fn, a.opt);
  check_ptr(fn, a.Q, "Q");
  check_ptr(fn, a.K, "K");
  check_ptr(fn, a.V, "V");
  check_ptr(fn, a.lambda, "lambda");
  check_ptr(fn, a.tau, "tau");
  check_ptr(fn, a.W0, "W0");
  check_ptr(fn, a.O, "O");
  if (a.opt.bias) check_ptr(fn, a.b0, "b0 (bias is on)");
  check_ln_params(fn, a);
  if (a.checkpoint_W || a.checkpoint_b) {
    require(a.checkpoint_group >= 1, "ttt_linear_forward: checkpoint_group must be >= 1 when "
                                     "checkpoints are requested");
    check_ptr(fn, a.checkpoint_W, "checkpoint_W (checkpoint_b is set)");
  }
  if (a.final_acc_b) check_ptr(fn, a.final_acc_W, "final_acc_W (final_acc_b is set)");
}

bool ttt_linear_forward_supports(TttLinearForwardVersion version, const TttDims& dims) {
  switch (version) {
    case TttLinearForwardVersion::Default:
    case TttLinearForwardVersion::V1Simt:
      return true;
    case TttLinearForwardVersion::V2Tf32:
    case TttLinearForwardVersion::V3Tf32x3:
    case TttLinearForwardVersion::V4Tf32:
    case TttLinearForwardVersion::V5Tf32x3:
      return linear_forward_v2_supports(dims);
  }
  return false;
}

void ttt_linear_forward(const TttLinearForwardArgs& a) {
  check_linear_forward_args(a);
  TttLinearForwardVersion v = a.version;
  if (v == TttLinearForwardVersion::Default) {
    auto al = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
    const bool aligned = al(a.Q) && al(a.K) && al(a.V) && al(a.O);
    v = linear_forward_v2_supports(a.dims) && aligned ? kDefaultTensorCoreVersion
                                                      : TttLinearForwardVersion::V1Simt;
  }
  require(ttt_linear_forward_supports(v, a.dims),
          "ttt_linear_forward: version " + std::to_string(int(v)) + " does not support head_dim " +
              std::to_string(a.dims.head_dim) + ", mini_batch " +
              std::to_string(a.dims.mini_batch) + " (docs/KERNELS.md lists the shapes)");
  switch (v) {
    case TttLinearForwardVersion::V2Tf32:
      linear_forward_v2(a, false);
      break;
    case TttLinearForwardVersion::V3Tf32x3:
      linear_forward_v2(a, true);
      break;
    case TttLinearForwardVersion::V4Tf32:
      linear_forward_v4(a, false);
      break;
    case TttLinearForwardVersion::V5Tf32x3:
      linear_forward_v4(a, true);
      break;
    default:
      linear_forward_v1(a);
  }
}

// Workspace of the backward, in floats: [slots][scratch?][partials].
namespace {
struct BwdLayout {
  std::size_t slots = 0, scratch = 0, pW = 0, pb = 0, pgam = 0, pbet = 0, ptau = 0, total = 0;
  bool use_smem = true;
  std::size_t smem_bytes = 0;
};

// The per-block scratch goes to global memory only where the block's matrices exceed the shared
// memory of the device; the workspace is sized for the larger of the versions.
BwdLayout bwd_layout(const TttDims& D, int group, TttBackwardVersion v) {
  BwdLayout L;
  const std::size_t BH = std::size_t(D.batch) * D.heads, d = D.head_dim, b = D.mini_batch;
  const std::size_t limit = max_dynamic_smem();
  auto needs_global = [&](std::size_t floats) { return floats * sizeof(float) > limit; };
  const std::size_t f1 = bwd_floats(D.head_dim, D.mini_batch);
  const std::size_t f2 = bwd_v2_floats(D.head_dim, D.mini_batch);
  const std::size_t per_block = v == TttBackwardVersion::V1Simt ? f1 : f2;
  L.smem_bytes = per_block * sizeof(float);
  L.use_smem = !needs_global(per_block);
  std::size_t scratch_floats = 0;
  if (needs_global(f1)) scratch_floats = std::max(scratch_floats, BH * f1);
  if (needs_global(f2)) scratch_floats = std::max(scratch_floats, BH * f2);
  std::size_t off = 0;
  L.slots = off;
  off += BH * std::size_t(group) * (d * d + d);
  L.scratch = off;
  off += scratch_floats;
  L.pW = off;
  off += BH * d * d;
  L.pb = off;
  off += BH * d;
  L.pgam = off;
  off += BH * d;
  L.pbet = off;
  off += BH * d;
  L.ptau = off;
  off += BH * b;
  L.total = off;
  return L;
}
}  // namespace

std::size_t ttt_linear_backward_workspace_bytes(const TttDims& dims, int checkpoint_group) {
  check_dims("ttt_linear_backward_workspace_bytes", dims);
  require(checkpoint_group >= 1, "ttt_linear_backward_workspace_bytes: checkpoint_group must be >= 1");
  return bwd_layout(dims, checkpoint_group, TttBackwardVersion::V1Simt).total * sizeof(float);
}

bool ttt_linear_backward_supports(TttBackwardVersion version, const TttDims& dims) {
  switch (version) {
    case TttBackwardVersion::Default:
    case TttBackwardVersion::V1Simt:
    case TttBackwardVersion::V2Tf32x3:
      return true;
    case TttBackwardVersion::V3Fused:
      return bwd_v3_supports(dims.head_dim, dims.mini_batch) &&
             bwd_v3_smem_bytes(dims.head_dim) <= max_dynamic_smem();
  }
  return false;
}

void ttt_linear_backward(const TttLinearBackwardArgs& a) {
  const char* fn = "ttt_linear_backward";
  check_dims(fn, a.dims);
  check_eps(fn, a.opt);
  require(a.checkpoint_group >= 1, "ttt_linear_backward: checkpoint_group must be >= 1");
  for (auto [ptr, name] : {std::pair<const void*, const char*>{a.Q, "Q"}, {a.K, "K"}, {a.V, "V"},
                           {a.lambda, "lambda"}, {a.tau, "tau"}, {a.checkpoint_W, "checkpoint_W"},
                           {a.dO, "dO"}, {a.dQ, "dQ"}, {a.dK, "dK"}, {a.dV, "dV"},
                           {a.dlambda, "dlambda"}, {a.dtau, "dtau"}, {a.dln_weight, "dln_weight"},
                           {a.dln_bias, "dln_bias"}, {a.dW0, "dW0"}, {a.db0, "db0"},
                           {a.workspace, "workspace"}})
    check_ptr(fn, ptr, name);
  if (a.opt.bias) check_ptr(fn, a.checkpoint_b, "checkpoint_b (bias is on)");
  check_ln_params(fn, a);
  const TttDims& D = a.dims;
  auto al = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  const bool aligned = al(a.Q) && al(a.K) && al(a.V) && al(a.dO) && al(a.dQ) && al(a.dK) &&
                       al(a.dV) && al(a.workspace) && al(a.checkpoint_W) &&
                       (!a.opt.bias || al(a.checkpoint_b));
  TttBackwardVersion v = a.version;
  if (v == TttBackwardVersion::Default)
    v = ttt_linear_backward_supports(TttBackwardVersion::V3Fused, D) && aligned
            ? kDefaultBackwardVersion
            : TttBackwardVersion::V2Tf32x3;
  require(ttt_linear_backward_supports(v, D),
          "ttt_linear_backward: version " + std::to_string(int(v)) + " does not support head_dim " +
              std::to_string(D.head_dim) + ", mini_batch " + std::to_string(D.mini_batch) +
              " (docs/KERNELS.md lists the shapes)");
  require(v != TttBackwardVersion::V3Fused || aligned,
          "ttt_linear_backward v3: Q, K, V, dO, dQ, dK, dV, the checkpoints and the workspace must "
          "be 16-byte aligned");
  const BwdLayout L = bwd_layout(D, a.checkpoint_group, v);
  require(a.workspace_bytes >= L.total * sizeof(float),
          "ttt_linear_backward: workspace has " + std::to_string(a.workspace_bytes) +
              " bytes, needs " + std::to_string(L.total * sizeof(float)) +
              " (ttt_linear_backward_workspace_bytes)");
  float* ws = static_cast<float*>(a.workspace);
  BwdParams p{};
  set_token_inputs(p, a);
  p.ckW = a.checkpoint_W;
  p.ckb = a.checkpoint_b;
  p.dO = a.dO;
  p.dQ = a.dQ;
  p.dK = a.dK;
  p.dV = a.dV;
  p.dlam = a.dlambda;
  p.slots = ws + L.slots;
  p.scratch = L.use_smem ? nullptr : ws + L.scratch;
  p.pW = ws + L.pW;
  p.pb = ws + L.pb;
  p.pgam = ws + L.pgam;
  p.pbet = ws + L.pbet;
  p.ptau = ws + L.ptau;
  p.B = D.batch;
  p.H = D.heads;
  p.T = D.seq_len;
  p.d = D.head_dim;
  p.b = D.mini_batch;
  p.group = a.checkpoint_group;
  p.n_ck = ttt_num_checkpoints(D, a.checkpoint_group);
  p.ln = a.opt.layer_norm;
  p.res = a.opt.residual;
  p.bias = a.opt.bias;
  p.eps = a.opt.ln_eps;
  const std::size_t smem = L.use_smem ? L.smem_bytes : 0;
  if (v == TttBackwardVersion::V1Simt) {
    set_smem_limit(reinterpret_cast<const void*>(&linear_backward_v1_kernel), smem);
    linear_backward_v1_kernel<<<D.batch * D.heads, kThreads, smem, a.stream>>>(p);
    TTTLAB_CUDA_CHECK(cudaGetLastError());
  } else if (v == TttBackwardVersion::V3Fused) {
    launch_linear_backward_v3(p, a.stream);
  } else {
    launch_linear_backward_v2(p, smem, a.stream);
  }
  const int d = D.head_dim;
  auto sum = [&](const float* part, float* out, int B, int H, int len) {
    sum_over_batch(part, out, B, H, len, a.stream);
  };
  sum(p.pW, a.dW0, D.batch, D.heads, d * d);
  sum(p.pb, a.db0, D.batch, D.heads, d);
  sum(p.pgam, a.dln_weight, D.batch, D.heads, d);
  sum(p.pbet, a.dln_bias, D.batch, D.heads, d);
  sum(p.ptau, a.dtau, D.batch * D.heads, 1, D.mini_batch);
}

void ttt_linear_decode_step(const TttLinearDecodeArgs& a) {
  const char* fn = "ttt_linear_decode_step";
  TttDims D = a.dims;
  D.seq_len = 1;
  check_dims(fn, D);
  check_eps(fn, a.opt);
  require(a.pos >= 0 && a.pos < D.mini_batch,
          "ttt_linear_decode_step: pos must be in 0..mini_batch-1 (got " + std::to_string(a.pos) +
              ")");
  for (auto [ptr, name] :
       {std::pair<const void*, const char*>{a.q, "q"}, {a.k, "k"}, {a.v, "v"},
        {a.lambda, "lambda"}, {a.tau, "tau"}, {a.W, "W"}, {a.acc_W, "acc_W"}, {a.o, "o"}})
    check_ptr(fn, ptr, name);
  if (a.opt.bias) {
    check_ptr(fn, a.b, "b (bias is on)");
    check_ptr(fn, a.acc_b, "acc_b (bias is on)");
  }
  check_ln_params(fn, a);
  DecodeParams p{};
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.lam = a.lambda;
  p.tau = a.tau;
  p.gamma = a.ln_weight;
  p.beta = a.ln_bias;
  p.W = a.W;
  p.c = a.b;
  p.aW = a.acc_W;
  p.ac = a.acc_b;
  p.o = a.o;
  p.B = D.batch;
  p.H = D.heads;
  p.d = D.head_dim;
  p.b = D.mini_batch;
  p.pos = a.pos;
  p.ln = a.opt.layer_norm;
  p.res = a.opt.residual;
  p.bias = a.opt.bias;
  p.eps = a.opt.ln_eps;
  linear_decode<<<D.batch * D.heads, kDecodeThreads, 0, a.stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tttlab::kernels
