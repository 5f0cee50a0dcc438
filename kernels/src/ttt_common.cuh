// Device helpers shared by the TTT kernels (ttt_linear*.cu, ttt_mlp.cu): warp reductions and the
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

// P(u) / σ with P(u) = u − mean(u) − x̂·mean(u⊙x̂) (ttt-spec.md §3 step 3); zero on padding lanes.
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

// tanh-approximate GELU and its derivative (ttt-spec.md §1, §4 step 3).
__device__ __forceinline__ float gelu_tanh(float x) {
  const float t = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x));
  return 0.5f * x * (1.0f + t);
}

__device__ __forceinline__ float gelu_tanh_grad(float x) {
  const float t = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x));
  const float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

}  // namespace tttlab::kernels::detail
