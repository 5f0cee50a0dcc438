// TTT-Linear backward, version 2: the algorithm of version 1 (ttt_linear.cu: one block per
// (sequence, head), checkpoint groups walked in reverse, the states inside a group recomputed, the
// mini-batches walked in reverse with the carry dW', dc'), with every matrix product done by
// block_mma on tensor cores in 3xTF32 (fp32-level accuracy). Row-wise LayerNorm work and the b×b
// element-wise pieces stay on CUDA cores. Matrices are padded to a leading dimension of d + 4 (and
// b + 4): tensor-core fragment loads then hit distinct banks, or two-way at worst.
//
// Per mini-batch (m ≤ b rows, state W, c; ttt-spec.md §7.3 and core/src/ttt/inner_backward.cpp):
//   forward recompute   Z = KW + 1c, C = tril(QKᵀ + 1), G = lnl2(Z, R), M = E ⊙ C, Z̄ = QW + 1c − MG
//   output LN           dZ̄ = LN′ᵀ dO, dγ, dβ;  dQ = dO (residual)
//   Z̄ line              dQ += dZ̄ Wᵀ, dM = −dZ̄ Gᵀ, dG = −Mᵀ dZ̄
//   commit line (full)  dG −= e ⊙ (K dW' + dc'), dK −= e ⊙ (G dW'ᵀ), de
//   M = E ⊙ C           dC = tril(dM ⊙ E): dQ += dC K, dK += dCᵀ Q;  dτ, dλ from dM ⊙ C and de
//   G = lnl2            a, dZ, dR (second order);  dV = dR
//   Z line              dK += dZ Wᵀ − dR;  dW ← [dW' +] Qᵀ dZ̄ + Kᵀ dZ, dc likewise
#include <cuda_runtime.h>

#include <cstddef>

#include "cuda_check.hpp"
#include "ttt_common.cuh"
#include "ttt_host.hpp"
#include "ttt_linear_internal.hpp"
#include "ttt_mma.cuh"

namespace tttlab::kernels::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr bool kSplit = true;

__host__ __device__ inline std::size_t floats_v2(int d, int b) {
  const std::size_t ldd = d + 4, ldb = b + 4;
  return 2 * d * ldd + 4 * std::size_t(d) + 11 * b * ldd + 4 * b * ldb + 7 * std::size_t(b);
}

struct Smem2 {
  float *W, *dW, *c, *dc, *dgam, *dbet;
  float *Q, *K, *R, *dO, *Z, *G, *Zb, *dG, *dZ, *dQ, *dK;  // [b, ldd]
  float *C, *dM, *M, *dC;                        // [b, ldb]
  float *lam, *tau, *mu, *rstd, *rstd2, *de, *dtau;
};

__device__ inline Smem2 carve(float* base, int d, int b) {
  const std::size_t ldd = d + 4, ldb = b + 4;
  Smem2 s;
  float* p = base;
  auto take = [&](std::size_t n) {
    float* r = p;
    p += n;
    return r;
  };
  s.W = take(d * ldd);
  s.dW = take(d * ldd);
  s.c = take(d);
  s.dc = take(d);
  s.dgam = take(d);
  s.dbet = take(d);
  s.Q = take(b * ldd);
  s.K = take(b * ldd);
  s.R = take(b * ldd);
  s.dO = take(b * ldd);
  s.Z = take(b * ldd);
  s.G = take(b * ldd);
  s.Zb = take(b * ldd);
  s.dG = take(b * ldd);
  s.dZ = take(b * ldd);
  s.dQ = take(b * ldd);
  s.dK = take(b * ldd);
  s.C = take(b * ldb);
  s.dM = take(b * ldb);
  s.M = take(b * ldb);
  s.dC = take(b * ldb);
  s.lam = take(b);
  s.tau = take(b);
  s.mu = take(b);
  s.rstd = take(b);
  s.rstd2 = take(b);
  s.de = take(b);
  s.dtau = take(b);
  return s;
}

// One full mini-batch of the forward without the read-out: W ← W − τ_b Kᵀ (λ ⊙ G), c likewise.
__device__ void advance(const BwdParams& p, const Smem2& s, std::size_t seq0, std::size_t rs, int blk,
                        int t0, const RowFrag& gam, const RowFrag& bet) {
  const int d = p.d, b = p.b, ldd = d + 4;
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
  block_mma<kSplit>(b, d, d, op(s.K, ldd), op(s.W, ldd), 1.0f,
                    [&](int i, int j, float v) { s.Z[i * ldd + j] = v + s.c[j]; });
  __syncthreads();
  for (int r = warp; r < b; r += kWarps) {
    const RowFrag z = row_load(s.Z + r * ldd, d, lane);
    const RowFrag t = row_load(s.R + r * ldd, d, lane);
    RowFrag g = row_loss_grad(z, t, gam, bet, d, lane, p.eps, p.ln);
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) g.v[u] *= s.lam[r];
    row_store(s.G + r * ldd, g, d, lane);  // λ ⊙ G
  }
  __syncthreads();
  const float tb = s.tau[b - 1];
  block_mma<kSplit>(d, d, b, op_t(s.K, ldd), op(s.G, ldd), 1.0f,
                    [&](int i, int j, float v) { s.W[i * ldd + j] -= tb * v; });
  if (p.bias)
    for (int c = tid; c < d; c += kThreads) {
      float acc = 0.0f;
      for (int j = 0; j < b; ++j) acc += s.G[j * ldd + c];
      s.c[c] -= tb * acc;
    }
  __syncthreads();
}

__device__ void chunk(const BwdParams& p, const Smem2& s, std::size_t seq0, std::size_t rs, int blk,
                      int t0, int m, const RowFrag& gam, const RowFrag& bet) {
  const int d = p.d, b = p.b, ldd = d + 4, ldb = b + 4;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const bool full = m == b;
  const float one = p.bias ? 1.0f : 0.0f;
  const float tb = s.tau[b - 1];
  const int h = blk % p.H;
  // dQ and dK of the mini-batch accumulate in shared memory (s.dQ, s.dK) and go to global memory
  // once, at the end; dV is written once, directly.
  float* dQ = s.dQ;
  float* dK = s.dK;
  float* dV = p.dV + seq0 + std::size_t(t0) * rs;
  const int lrs = ldd;

  // P1: inputs.
  for (int i = tid; i < m * d; i += kThreads) {
    const int r = i / d, c = i % d;
    const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
    const float k = p.K[g], v = p.V[g];
    s.Q[r * ldd + c] = p.Q[g];
    s.K[r * ldd + c] = k;
    s.R[r * ldd + c] = p.res ? v - k : v;
    s.dO[r * ldd + c] = p.dO[g];
  }
  for (int i = tid; i < m; i += kThreads) s.lam[i] = p.lam[std::size_t(blk) * p.T + t0 + i];
  __syncthreads();

  // P2: Z = K W + 1c;  C = Q Kᵀ (raw).
  block_mma<kSplit>(m, d, d, op(s.K, ldd), op(s.W, ldd), 1.0f,
                    [&](int i, int j, float v) { s.Z[i * ldd + j] = v + s.c[j]; });
  block_mma<kSplit>(m, m, d, op(s.Q, ldd), op_t(s.K, ldd), 1.0f,
                    [&](int i, int j, float v) { s.C[i * ldb + j] = v; });
  __syncthreads();

  // P3: G = lnl2(Z, R) with Z's statistics;  C ← tril(C + 1),  M = E ⊙ C.
  for (int r = warp; r < m; r += kWarps)
    row_loss_grad_keep_stats(s.Z + r * ldd, s.R + r * ldd, s.G + r * ldd, s.mu + r, s.rstd + r,
                             gam, bet, d, lane, p.eps, p.ln);
  for (int i = tid; i < m * d; i += kThreads) dK[(i / d) * ldd + i % d] = 0.0f;
  for (int i = tid; i < m * m; i += kThreads) {
    const int r = i / m, j = i % m;
    const float cv = j <= r ? s.C[r * ldb + j] + one : 0.0f;
    s.C[r * ldb + j] = cv;
    s.M[r * ldb + j] = s.tau[r] * s.lam[j] * cv;
  }
  __syncthreads();

  // P4: Z̄ = Q W + 1c − M G.
  block_mma<kSplit>(m, d, d, op(s.Q, ldd), op(s.W, ldd), 1.0f, m, op(s.M, ldb), op(s.G, ldd), -1.0f,
                    [&](int i, int j, float v) { s.Zb[i * ldd + j] = v + s.c[j]; });
  __syncthreads();

  // P5–P6: the output LN backward: x̂(Z̄) into s.dZ, dγ and dβ (column walk), dZ̄ into s.Zb;
  // dQ = dO (residual) or 0.
  block_output_ln_backward<kThreads>(s.Zb, s.dZ, s.dO, s.rstd2, gam, s.dgam, s.dbet, dQ, ldd, m, d,
                                     ldd, p.eps, p.ln, p.res);
  __syncthreads();

  // P7: dQ += dZ̄ Wᵀ;  dM = −dZ̄ Gᵀ;  K dW' into s.dZ (full).
  block_mma<kSplit>(m, d, d, op(s.Zb, ldd), op_t(s.W, ldd), 1.0f,
                    [&](int i, int j, float v) { dQ[i * lrs + j] += v; });
  block_mma<kSplit>(m, m, d, op(s.Zb, ldd), op_t(s.G, ldd), -1.0f,
                    [&](int i, int j, float v) { s.dM[i * ldb + j] = v; });
  if (full)
    block_mma<kSplit>(m, d, d, op(s.K, ldd), op(s.dW, ldd), 1.0f,
                      [&](int i, int j, float v) { s.dZ[i * ldd + j] = v; });
  __syncthreads();

  // P8: dG = −Mᵀ dZ̄ − e ⊙ (K dW' + dc');  dK −= e ⊙ (G dW'ᵀ);  de;  dC = tril(dM ⊙ E).
  block_mma<kSplit>(m, d, m, op_t(s.M, ldb), op(s.Zb, ldd), -1.0f, [&](int i, int j, float v) {
    if (full) v -= tb * s.lam[i] * (s.dZ[i * ldd + j] + (p.bias ? s.dc[j] : 0.0f));
    s.dG[i * ldd + j] = v;
  });
  if (full) {
    block_mma<kSplit>(m, d, d, op(s.G, ldd), op_t(s.dW, ldd), 1.0f,
                      [&](int i, int j, float v) { dK[i * lrs + j] -= tb * s.lam[i] * v; });
    for (int j = warp; j < m; j += kWarps) {
      const RowFrag kdw = row_load(s.dZ + j * ldd, d, lane);
      const RowFrag g = row_load(s.G + j * ldd, d, lane);
      float v = -row_dot(kdw, g);
      if (p.bias) v -= row_dot(g, row_load(s.dc, d, lane));
      if (lane == 0) s.de[j] = v;
    }
  }
  for (int i = tid; i < m * m; i += kThreads) {
    const int r = i / m, j = i % m;
    s.dC[r * ldb + j] = j <= r ? s.dM[r * ldb + j] * s.tau[r] * s.lam[j] : 0.0f;
  }
  __syncthreads();

  // P9: dQ += dC K, dK += dCᵀ Q;  dτ, dλ;  the backward of G = lnl2(Z, R).
  block_mma<kSplit>(m, d, m, op(s.dC, ldb), op(s.K, ldd), 1.0f,
                    [&](int i, int j, float v) { dQ[i * lrs + j] += v; });
  block_mma<kSplit>(m, d, m, op_t(s.dC, ldb), op(s.Q, ldd), 1.0f,
                    [&](int i, int j, float v) { dK[i * lrs + j] += v; });
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

  // P10: dK += dZ Wᵀ − dR;  dγ, dβ of the loss LN;  the carry dW, dc.
  const float* gamma_h = p.ln ? p.gamma + std::size_t(h) * d : nullptr;
  block_mma<kSplit>(m, d, d, op(s.dZ, ldd), op_t(s.W, ldd), 1.0f, [&](int i, int j, float v) {
    if (p.res) {
      const float x = s.dG[i * ldd + j];  // a (LN) or δ (no LN): −dR = γ ⊙ a, or δ
      v += p.ln ? gamma_h[j] * x : x;
    }
    dK[i * lrs + j] += v;
  });
  if (p.ln)
    block_loss_grad_param_backward(s.dG, s.Z, s.R, s.mu, s.rstd, m, d, ldd, gamma_h,
                                   p.beta + std::size_t(h) * d, s.dgam, s.dbet, tid, kThreads);
  block_mma<kSplit>(d, d, m, op_t(s.Q, ldd), op(s.Zb, ldd), 1.0f, m, op_t(s.K, ldd), op(s.dZ, ldd),
                    1.0f, [&](int i, int j, float v) {
                      s.dW[i * ldd + j] = (full ? s.dW[i * ldd + j] : 0.0f) + v;
                    });
  for (int c = tid; c < d; c += kThreads) {
    float acc = full ? s.dc[c] : 0.0f;
    for (int r = 0; r < m; ++r) acc += s.Zb[r * ldd + c] + s.dZ[r * ldd + c];
    s.dc[c] = acc;
  }
  __syncthreads();
  // Copy-out, overlapping the next mini-batch's P1 (which does not touch s.dQ, s.dK; s.dK is next
  // written in P3 and s.dQ in P6, both after barriers).
  for (int i = tid; i < m * d; i += kThreads) {
    const int r = i / d, c = i % d;
    const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
    p.dQ[g] = s.dQ[r * ldd + c];
    p.dK[g] = s.dK[r * ldd + c];
  }
}

__global__ void __launch_bounds__(kThreads, 2) linear_backward_v2_kernel(BwdParams p) {
  extern __shared__ float smem[];
  const int blk = blockIdx.x, n = blk / p.H, h = blk % p.H;
  const int d = p.d, b = p.b, ldd = d + 4;
  const int tid = threadIdx.x, lane = tid & 31;
  float* base = p.scratch ? p.scratch + std::size_t(blk) * floats_v2(d, b) : smem;
  const Smem2 s = carve(base, d, b);
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
      advance(p, s, seq0, rs, blk, k * b, gam, bet);  // touches s.W only after its first barrier
    }
    for (int k = k1 - 1; k >= k0; --k) {
      if (k != k1 - 1) {
        const float* slot = slots + std::size_t(k - k0) * slot_floats;
        for (int i = tid; i < d * d; i += kThreads) s.W[(i / d) * ldd + i % d] = slot[i];
        for (int c = tid; c < d; c += kThreads) s.c[c] = slot[d * d + c];
        __syncthreads();
      }
      const int t0 = k * b;
      chunk(p, s, seq0, rs, blk, t0, min(b, p.T - t0), gam, bet);
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

}  // namespace

std::size_t bwd_v2_floats(int d, int b) { return floats_v2(d, b); }

void launch_linear_backward_v2(const BwdParams& p, std::size_t smem_bytes, CUstream_st* stream) {
  set_smem_limit(reinterpret_cast<const void*>(&linear_backward_v2_kernel), smem_bytes);
  linear_backward_v2_kernel<<<p.B * p.H, kThreads, smem_bytes, stream>>>(p);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tttlab::kernels::detail
