// Device helpers shared by the TTT kernels (ttt_linear_*.cu, ttt_mlp_*.cu): warp reductions and the
// row-wise LayerNorm pieces, one warp per row of at most 128 features (4 per lane, in registers).
// Private to kernels/src.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace tttlab::kernels::detail {

constexpr int kMaxHeadDim = 128;
constexpr int kMaxMiniBatch = 64;
constexpr int kPerLane = kMaxHeadDim / 32;  // row elements per lane in the row helpers

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Lane `lane` holds elements lane, lane+32, lane+64, lane+96 of a row of n ≤ 128; the rest are 0.
struct RowFrag {
  float v[kPerLane];
};

__device__ __forceinline__ RowFrag row_load(const float* p, int n, int lane) {
  RowFrag r;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    const int c = lane + 32 * u;
    r.v[u] = c < n ? p[c] : 0.0f;
  }
  return r;
}

__device__ __forceinline__ void row_store(float* p, const RowFrag& r, int n, int lane) {
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    const int c = lane + 32 * u;
    if (c < n) p[c] = r.v[u];
  }
}

__device__ __forceinline__ float row_sum(const RowFrag& r) {
  float s = 0.0f;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) s += r.v[u];
  return warp_sum(s);
}

__device__ __forceinline__ float row_dot(const RowFrag& a, const RowFrag& b) {
  float s = 0.0f;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) s += a.v[u] * b.v[u];
  return warp_sum(s);
}

// LayerNorm statistics of a row (biased variance): mean and 1/σ, σ = sqrt(var + eps); x̂ is zero on
// the padding lanes so that later row sums need no mask.
struct RowStats {
  float mu;
  float rstd;
};

__device__ __forceinline__ RowStats row_stats(const RowFrag& z, int n, int lane, float eps) {
  RowStats s;
  s.mu = row_sum(z) / float(n);
  float acc = 0.0f;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    const float x = lane + 32 * u < n ? z.v[u] - s.mu : 0.0f;
    acc += x * x;
  }
  s.rstd = 1.0f / sqrtf(warp_sum(acc) / float(n) + eps);
  return s;
}

__device__ __forceinline__ RowFrag row_xhat(const RowFrag& z, RowStats s, int n, int lane) {
  RowFrag x;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u)
    x.v[u] = lane + 32 * u < n ? (z.v[u] - s.mu) * s.rstd : 0.0f;
  return x;
}

// P(u) / σ with P(u) = u − mean(u) − x̂·mean(u⊙x̂) (docs/MATH.md §3.2); zero on padding lanes.
__device__ __forceinline__ RowFrag row_project(const RowFrag& u, const RowFrag& xh, float rstd,
                                               int n, int lane) {
  const float m1 = row_sum(u) / float(n);
  const float m2 = row_dot(u, xh) / float(n);
  RowFrag r;
#pragma unroll
  for (int u2 = 0; u2 < kPerLane; ++u2)
    r.v[u2] = lane + 32 * u2 < n ? (u.v[u2] - m1 - xh.v[u2] * m2) * rstd : 0.0f;
  return r;
}

// The fused LN + L2 gradient of ½‖γ⊙x̂ + β − r‖² with respect to z (layer_norm), or z − r.
__device__ __forceinline__ RowFrag row_loss_grad(const RowFrag& z, const RowFrag& r,
                                                 const RowFrag& gam, const RowFrag& bet, int n,
                                                 int lane, float eps, bool layer_norm) {
  RowFrag g;
  if (!layer_norm) {
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) g.v[u] = z.v[u] - r.v[u];
    return g;
  }
  const RowStats s = row_stats(z, n, lane, eps);
  const RowFrag xh = row_xhat(z, s, n, lane);
  RowFrag gh;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) gh.v[u] = gam.v[u] * (gam.v[u] * xh.v[u] + bet.v[u] - r.v[u]);
  return row_project(gh, xh, s.rstd, n, lane);
}

// y = γ⊙x̂ + β (layer_norm) or z.
__device__ __forceinline__ RowFrag row_layer_norm(const RowFrag& z, const RowFrag& gam,
                                                  const RowFrag& bet, int n, int lane, float eps,
                                                  bool layer_norm) {
  if (!layer_norm) return z;
  const RowStats s = row_stats(z, n, lane, eps);
  const RowFrag xh = row_xhat(z, s, n, lane);
  RowFrag y;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) y.v[u] = gam.v[u] * xh.v[u] + bet.v[u];
  return y;
}

// The loss gradient G = ∂ℓ/∂Z of rows r = warp, warp + warps, … < m, in place over Z (rows of
// leading dimension ld), with the target R = V − K (residual) or V. One warp per row.
__device__ __forceinline__ void rows_loss_grad(float* ZG, const float* V, const float* K, int ld,
                                               int m, int d, int warp, int warps, int lane,
                                               const RowFrag& gam, const RowFrag& bet, float eps,
                                               bool ln, bool res) {
  for (int r = warp; r < m; r += warps) {
    const RowFrag z = row_load(ZG + r * ld, d, lane);
    RowFrag t = row_load(V + r * ld, d, lane);
    if (res) {
      const RowFrag k = row_load(K + r * ld, d, lane);
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) t.v[u] -= k.v[u];
    }
    row_store(ZG + r * ld, row_loss_grad(z, t, gam, bet, d, lane, eps, ln), d, lane);
  }
}

// The output O = [Q +] LN(Z̄) (or Z̄ without layer_norm) of rows r = warp, warp + warps, … < m:
// Z̄ and Q rows of leading dimension ld, row r written to out + r·out_stride. One warp per row.
__device__ __forceinline__ void rows_output(float* out, std::size_t out_stride, const float* Zb,
                                            const float* Q, int ld, int m, int d, int warp,
                                            int warps, int lane, const RowFrag& gam,
                                            const RowFrag& bet, float eps, bool ln, bool res) {
  for (int r = warp; r < m; r += warps) {
    RowFrag o = row_layer_norm(row_load(Zb + r * ld, d, lane), gam, bet, d, lane, eps, ln);
    if (res) {
      const RowFrag q = row_load(Q + r * ld, d, lane);
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) o.v[u] += q.v[u];
    }
    row_store(out + r * out_stride, o, d, lane);
  }
}

// The bias carry of the backward: dc[c] = [dc[c] if full +] Σ_{r < m} (A[r, c] + B[r, c]) for the
// n columns (rows of leading dimension ld), columns spread over the block's threads.
__device__ __forceinline__ void block_carry_colsum(float* dc, const float* A, const float* B, int ld,
                                                   int m, int n, bool full, int tid, int threads) {
  for (int c = tid; c < n; c += threads) {
    float acc = full ? dc[c] : 0.0f;
    for (int r = 0; r < m; ++r) acc += A[r * ld + c] + B[r * ld + c];
    dc[c] = acc;
  }
}

// g = row_loss_grad(z, r) for the warp's row, stored to g; when ln, z's row_stats are also kept in
// *mu and *rstd (by lane 0) for row_loss_grad_backward. Rows of n ≤ 128 floats.
__device__ __forceinline__ void row_loss_grad_keep_stats(const float* z, const float* r, float* g,
                                                         float* mu, float* rstd, const RowFrag& gam,
                                                         const RowFrag& bet, int n, int lane,
                                                         float eps, bool ln) {
  const RowFrag zr = row_load(z, n, lane);
  const RowFrag t = row_load(r, n, lane);
  if (ln) {
    const RowStats st = row_stats(zr, n, lane, eps);
    if (lane == 0) {
      *mu = st.mu;
      *rstd = st.rstd;
    }
  }
  row_store(g, row_loss_grad(zr, t, gam, bet, n, lane, eps, ln), n, lane);
}

// Second-order backward of row_loss_grad for the warp's row: given δ, the cotangent of
// g = row_loss_grad(z, r), writes the cotangents of its inputs (docs/MATH.md §7.2).
//   io    [in]  δ (n floats);  [out] a = P(δ)/σ when ln (left as δ otherwise). The dγ, dβ sums of
//               block_loss_grad_param_backward read a from here.
//   z, r  the row's pre-LN input and target (read only when ln); mu, rstd point at its saved
//         row_stats (read only when ln).
//   dr    [out] ∂/∂r:  −γ⊙a (ln) or −δ.     dz [out] ∂/∂z:  the full second-order term (ln) or δ.
// All pointers are rows of n ≤ 128 floats; io may not alias z, r, dr or dz. No synchronisation.
__device__ __forceinline__ void row_loss_grad_backward(float* io, const float* z, const float* r,
                                                       const float* mu, const float* rstd,
                                                       const RowFrag& gam, const RowFrag& bet,
                                                       int n, int lane, bool ln, float* dr,
                                                       float* dz) {
  const RowFrag delta = row_load(io, n, lane);
  if (!ln) {
    RowFrag nd;
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) nd.v[u] = -delta.v[u];
    row_store(dr, nd, n, lane);
    row_store(dz, delta, n, lane);
    return;
  }
  const RowFrag zr = row_load(z, n, lane);
  const RowFrag t = row_load(r, n, lane);
  const RowStats st{*mu, *rstd};
  const RowFrag xh = row_xhat(zr, st, n, lane);
  RowFrag gh;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) gh.v[u] = gam.v[u] * (gam.v[u] * xh.v[u] + bet.v[u] - t.v[u]);
  const RowFrag g = row_project(gh, xh, st.rstd, n, lane);
  const RowFrag a = row_project(delta, xh, st.rstd, n, lane);
  const float m_xg = row_dot(xh, gh) / float(n);
  const float m_xd = row_dot(xh, delta) / float(n);
  const float dsig = -row_dot(delta, g) * st.rstd;
  RowFrag dxh, drr;
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    dxh.v[u] = gam.v[u] * gam.v[u] * a.v[u] - (delta.v[u] * m_xg + gh.v[u] * m_xd) * st.rstd;
    drr.v[u] = -gam.v[u] * a.v[u];
  }
  RowFrag dzr = row_project(dxh, xh, st.rstd, n, lane);
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) dzr.v[u] += dsig * xh.v[u] / float(n);
  row_store(dr, drr, n, lane);
  row_store(dz, dzr, n, lane);
  row_store(io, a, n, lane);
}

// The loss LayerNorm's parameter cotangents summed over m rows, after row_loss_grad_backward:
// dgam[c] += Σ_r a[r,c] (2γ_c x̂[r,c] + β_c − r[r,c]),  dbet[c] += Σ_r γ_c a[r,c]. A, Z, R are m×n
// row blocks of leading dimension ld; mu, rstd the saved row stats; gamma, beta the head's n
// parameters. Threads tid, tid + nthreads, ... of the block each own columns; no synchronisation.
__device__ __forceinline__ void block_loss_grad_param_backward(
    const float* A, const float* Z, const float* R, const float* mu, const float* rstd, int m,
    int n, int ld, const float* gamma, const float* beta, float* dgam, float* dbet, int tid,
    int nthreads) {
  for (int c = tid; c < n; c += nthreads) {
    const float gc = gamma[c], bc = beta[c];
    float ag = 0.0f, ab = 0.0f;
    for (int r = 0; r < m; ++r) {
      const float a = A[r * ld + c];
      const float xh = (Z[r * ld + c] - mu[r]) * rstd[r];
      ag += a * (2.0f * gc * xh + bc - R[r * ld + c]);
      ab += gc * a;
    }
    dgam[c] += ag;
    dbet[c] += ab;
  }
}

// An output LayerNorm's parameter cotangents summed over m rows: dgam[c] += Σ_r dY[r,c] x̂[r,c],
// dbet[c] += Σ_r dY[r,c]. dY, Xh are m×n row blocks of leading dimension ld. A column walk, one
// thread per feature, so the sums are deterministic; no synchronisation.
__device__ __forceinline__ void block_ln_param_backward(const float* dY, const float* Xh, int m,
                                                        int n, int ld, float* dgam, float* dbet,
                                                        int tid, int nthreads) {
  for (int c = tid; c < n; c += nthreads) {
    float ag = 0.0f, ab = 0.0f;
    for (int r = 0; r < m; ++r) {
      ag += dY[r * ld + c] * Xh[r * ld + c];
      ab += dY[r * ld + c];
    }
    dgam[c] += ag;
    dbet[c] += ab;
  }
}

// The output LayerNorm's backward over an m-row block, for O = [Q +] γ⊙x̂(Z̄) + β (ln) or [Q +] Z̄.
// Called by all NT threads of the block together (it synchronises once, when ln).
//   ln:   x̂(Z̄) into Xh and 1/σ into rstd; dgam, dbet += Σ_rows of dO⊙x̂ and dO;
//         Z̄ ← dZ̄ = P(γ⊙dO)/σ (in place).            not ln: Z̄ ← dZ̄ = dO.
//   dq:   the residual's share of dQ, dO (res) or 0; row r at dq + r·dq_ld.
// Zb, Xh, dO are m×n blocks of leading dimension ld (n ≤ 128). No barrier at the end: callers
// synchronise before reading Zb or dq.
template <int NT>
__device__ __forceinline__ void block_output_ln_backward(float* Zb, float* Xh, const float* dO,
                                                         float* rstd, const RowFrag& gam,
                                                         float* dgam, float* dbet, float* dq,
                                                         std::size_t dq_ld, int m, int n, int ld,
                                                         float eps, bool ln, bool res) {
  constexpr int kWarpsNT = NT / 32;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (ln) {
    for (int r = warp; r < m; r += kWarpsNT) {
      const RowFrag z = row_load(Zb + r * ld, n, lane);
      const RowStats st = row_stats(z, n, lane, eps);
      row_store(Xh + r * ld, row_xhat(z, st, n, lane), n, lane);
      if (lane == 0) rstd[r] = st.rstd;
    }
    __syncthreads();
    block_ln_param_backward(dO, Xh, m, n, ld, dgam, dbet, tid, NT);
  }
  for (int r = warp; r < m; r += kWarpsNT) {
    const RowFrag dy = row_load(dO + r * ld, n, lane);
    if (ln) {
      const RowFrag xh = row_load(Xh + r * ld, n, lane);
      RowFrag dxh;
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) dxh.v[u] = dy.v[u] * gam.v[u];
      row_store(Zb + r * ld, row_project(dxh, xh, rstd[r], n, lane), n, lane);
    } else {
      row_store(Zb + r * ld, dy, n, lane);
    }
    RowFrag q0;
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) q0.v[u] = res ? dy.v[u] : 0.0f;
    row_store(dq + std::size_t(r) * dq_ld, q0, n, lane);
  }
}

// tanh(u) = 1 − 2 / (1 + e^{2u}) on the SFU (ex2, rcp): ~7 instructions instead of tanhf's ~20 and a
// divergent branch. Absolute error of t ~1e-7 (the exponential's relative error is damped by
// 2e/(1+e)² ≤ 1/2); e^{2u} = inf gives t = 1, 0 gives −1.
__device__ __forceinline__ float tanh_sfu(float u) {
  return 1.0f - __fdividef(2.0f, 1.0f + __expf(2.0f * u));
}

// The tanh-approximate GELU, gelu′ and gelu″ (docs/MATH.md §1, §5), the inner model of TTT-MLP. Every
// TTT-MLP kernel (forward, backward, decode) takes these, so a backward's recomputed gelu(Z1) is the
// forward's value for the same Z1. Each evaluates tanh once per element (gelu_tanh_grads: for both
// derivatives); a 16 × 4d tile is evaluated several times per mini-batch in the forward and backward.
__device__ __forceinline__ float gelu_tanh(float x) {
  const float t = tanh_sfu(0.7978845608028654f * (x + 0.044715f * x * x * x));
  return 0.5f * x * (1.0f + t);
}

__device__ __forceinline__ float gelu_tanh_grad(float x) {
  const float t = tanh_sfu(0.7978845608028654f * (x + 0.044715f * x * x * x));
  const float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

// gelu′(x) into g1 and gelu″(x) into g2 (as gelu_tanh_grad2 in tttlab/nn/activations.hpp).
__device__ __forceinline__ void gelu_tanh_grads(float x, float& g1, float& g2) {
  const float c = 0.7978845608028654f, a = 0.044715f;
  const float t = tanh_sfu(c * (x + a * x * x * x));
  const float du = c * (1.0f + 3.0f * a * x * x);
  const float d2u = c * 6.0f * a * x;
  const float sech2 = 1.0f - t * t;
  g1 = 0.5f * (1.0f + t) + 0.5f * x * sech2 * du;
  g2 = sech2 * du - x * t * sech2 * du * du + 0.5f * x * sech2 * d2u;
}

// One mini-batch of a backward's token inputs into shared memory: Q, K, the inner target R (V − K
// with the residual, else V) and dO as m rows of stride ldd, and λ. Shared by the TTT-Linear
// fallback backward and the TTT-MLP backward, whose parameter and shared-memory structs name these
// fields alike. The caller synchronises the block afterwards.
template <int kThreads, class Params, class Smem>
__device__ __forceinline__ void load_backward_inputs(const Params& p, const Smem& s, std::size_t seq0,
                                                     std::size_t rs, int blk, int t0, int m, int d,
                                                     int ldd) {
  for (int i = threadIdx.x; i < m * d; i += kThreads) {
    const int r = i / d, c = i % d;
    const std::size_t g = seq0 + std::size_t(t0 + r) * rs + c;
    const float k = p.K[g], v = p.V[g];
    s.Q[r * ldd + c] = p.Q[g];
    s.K[r * ldd + c] = k;
    s.R[r * ldd + c] = p.res ? v - k : v;
    s.dO[r * ldd + c] = p.dO[g];
  }
  for (int i = threadIdx.x; i < m; i += kThreads) s.lam[i] = p.lam[std::size_t(blk) * p.T + t0 + i];
}

// ---- decode (primal form, one token) ----------------------------------------------------------------

// The decode step of one state element (docs/MATH.md §6): its accumulator becomes `a` (the old value
// plus the token's λ-weighted gradient term, computed by the caller), the state is read out as
// w = W − τ·a (returned), and at a commit (the mini-batch's last token) w is stored and the
// accumulator zeroed. The TTT-Linear and TTT-MLP decode kernels run it on every weight and bias
// element.
__device__ __forceinline__ float decode_state_step(float& W, float& acc, float a, float tau,
                                                   bool commit) {
  const float w = W - tau * a;
  if (commit) {
    W = w;
    acc = 0.0f;
  } else {
    acc = a;
  }
  return w;
}

}  // namespace tttlab::kernels::detail
