// The element-wise passes of LaCT's block on the GPU (tttlab/kernels/lact.hpp, "the layer's
// element-wise ops"; core/src/seq/lact_layer.cpp on the CPU). Plain fp32, one thread per element,
// or one warp per (row, head) where a head's channels are summed (in lane order, then warp_sum: a
// fixed order, the same bits run to run).
#include "ops/ops_common.cuh"
#include "tttlab/kernels/lact.hpp"

namespace tttlab::kernels {
namespace {

__device__ __forceinline__ float lact_sigmoid(float z) { return sigmoidf_split(z); }
__device__ __forceinline__ float lact_silu(float z) { return z * lact_sigmoid(z); }
// silu′(z) = σ(z)·(1 + z·(1 − σ(z))), as silu_grad_array.
__device__ __forceinline__ float lact_silu_grad(float z) {
  const float s = lact_sigmoid(z);
  return s * (1.f + z * (1.f - s));
}
// mamba2_softplus: z itself above 20, else max(z, 0) + log1p(exp(−|z|)).
__device__ __forceinline__ float lact_softplus(float z) {
  if (z > 20.f) return z;
  return fmaxf(z, 0.f) + log1pf(expf(-fabsf(z)));
}
__device__ __forceinline__ float lact_softplus_grad(float z) {
  if (z > 20.f) return 1.f;
  return 1.f / (1.f + expf(-z));
}

// A warp per (row, head): warps_total = R·H.
__global__ void lact_qk_forward_kernel(const float* __restrict__ u, const float* __restrict__ scale,
                                       const float* __restrict__ offset, int ld_sb, int R, int H,
                                       int d, float eps, float* __restrict__ us,
                                       float* __restrict__ f) {
  const std::size_t warp = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= std::size_t(R) * H) return;
  const std::size_t r = warp / H;
  const int h = int(warp % H);
  const std::size_t D = std::size_t(H) * d, base = r * D + std::size_t(h) * d;
  float ss = 0.f;
  for (int j = lane; j < d; j += 32) {
    const int c = h * d + j;
    const float s = lact_silu(u[base + j] * scale[std::size_t(c) * ld_sb] + offset[std::size_t(c) * ld_sb]);
    us[base + j] = s;
    ss += s * s;
  }
  ss = warp_sum(ss);
  const float inv = 1.f / (sqrtf(ss) + eps);
  for (int j = lane; j < d; j += 32) f[base + j] = us[base + j] * inv;
}

__global__ void lact_qk_backward_kernel(const float* __restrict__ u, const float* __restrict__ us,
                                        const float* __restrict__ scale,
                                        const float* __restrict__ offset, int ld_sb,
                                        const float* __restrict__ dF, int R, int H, int d,
                                        float eps, float* __restrict__ du, float* __restrict__ dt,
                                        float* __restrict__ dtu) {
  const std::size_t warp = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= std::size_t(R) * H) return;
  const std::size_t r = warp / H;
  const int h = int(warp % H);
  const std::size_t D = std::size_t(H) * d, base = r * D + std::size_t(h) * d;
  float ss = 0.f, ug = 0.f;
  for (int j = lane; j < d; j += 32) {
    const float s = us[base + j];
    ss += s * s;
    ug += s * dF[base + j];
  }
  ss = warp_sum(ss);
  ug = warp_sum(ug);
  // lact_l2_heads_backward: g/(n + ε) − u (u·g) / (n (n + ε)²), g/(n + ε) at u = 0
  const float n = sqrtf(ss), ne = n + eps;
  const float coef = n > 0.f ? ug / (n * ne * ne) : 0.f;
  for (int j = lane; j < d; j += 32) {
    const int c = h * d + j;
    const float sc = scale[std::size_t(c) * ld_sb];
    const float x = u[base + j];
    const float dus = dF[base + j] / ne - us[base + j] * coef;
    const float g = dus * lact_silu_grad(x * sc + offset[std::size_t(c) * ld_sb]);
    dt[base + j] = g;
    dtu[base + j] = g * x;
    du[base + j] += g * sc;
  }
}

__global__ void lact_silu_forward_kernel(const float* __restrict__ x, std::size_t n,
                                         float* __restrict__ y) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    y[i] = lact_silu(x[i]);
}

__global__ void lact_silu_backward_add_kernel(const float* __restrict__ x,
                                              const float* __restrict__ dy, std::size_t n,
                                              float* __restrict__ dx) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    dx[i] += dy[i] * lact_silu_grad(x[i]);
}

// A thread per (row, head).
__global__ void lact_rates_forward_kernel(const float* z, const float* __restrict__ bias,
                                          float base, int R, int H, float* zl,
                                          float* __restrict__ lr0, float* __restrict__ lr1,
                                          float* __restrict__ lr2) {
  const std::size_t n = std::size_t(R) * H;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = i / H;
    const int h = int(i % H);
    float* out[3] = {lr0, lr1, lr2};
    for (int k = 0; k < 3; ++k) {
      const std::size_t e = r * 3 * H + 3 * h + k;
      const float v = (z[e] + bias[3 * h + k]) + base;
      zl[e] = v;
      out[k][i] = lact_softplus(v);
    }
  }
}

__global__ void lact_rates_backward_kernel(const float* __restrict__ zl,
                                           const float* __restrict__ dlr0,
                                           const float* __restrict__ dlr1,
                                           const float* __restrict__ dlr2, int R, int H,
                                           float* __restrict__ dz) {
  const std::size_t n = std::size_t(R) * H;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = i / H;
    const int h = int(i % H);
    const float* g[3] = {dlr0, dlr1, dlr2};
    for (int k = 0; k < 3; ++k) {
      const std::size_t e = r * 3 * H + 3 * h + k;
      dz[e] = g[k][i] * lact_softplus_grad(zl[e]);
    }
  }
}

__global__ void lact_scale_forward_kernel(const float* __restrict__ nrm, const float* __restrict__ z,
                                          const float* __restrict__ bias, const float* a, int R,
                                          int H, int d, float* o) {
  const std::size_t D = std::size_t(H) * d, n = std::size_t(R) * D;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = i / D;
    const int h = int((i % D) / d);
    o[i] = a[i] + nrm[i] * lact_silu(z[r * H + h] + bias[h]);
  }
}

// A warp per (row, head).
__global__ void lact_scale_backward_kernel(const float* __restrict__ nrm,
                                           const float* __restrict__ z,
                                           const float* __restrict__ bias,
                                           const float* __restrict__ dO, int R, int H, int d,
                                           float* __restrict__ dn, float* __restrict__ dz) {
  const std::size_t warp = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= std::size_t(R) * H) return;
  const std::size_t r = warp / H;
  const int h = int(warp % H);
  const std::size_t base = r * H * std::size_t(d) + std::size_t(h) * d;
  const float zz = z[warp] + bias[h];
  const float sc = lact_silu(zz);
  float s = 0.f;
  for (int j = lane; j < d; j += 32) {
    const float g = dO[base + j];
    s += g * nrm[base + j];
    dn[base + j] = g * sc;
  }
  s = warp_sum(s);
  if (lane == 0) dz[r * H + h] = s * lact_silu_grad(zz);
}

__global__ void lact_add_strided_kernel(const float* __restrict__ src, int n, float* dst,
                                        int stride) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    dst[std::size_t(i) * stride] += src[i];
}

// The warp kernels are not grid-stride loops: every (row, head) needs its own warp.
int warp_blocks(std::size_t warps) {
  const std::size_t b = (warps * 32 + kThreads - 1) / kThreads;
  if (b > std::size_t(0x7fffffff)) throw std::invalid_argument("lact ops: too many rows x heads");
  return int(b);
}

void check_heads(const char* fn, int R, int D, int d) {
  require(R >= 0, fn, "R must be >= 0, got " + std::to_string(R));
  require(d >= 1 && D >= 1 && D % d == 0, fn,
          "the head dim d (" + std::to_string(d) + ") must divide the width D (" +
              std::to_string(D) + ")");
}

}  // namespace

void lact_qk_forward(const float* u, const float* scale, const float* offset, int ld_sb, int R,
                     int D, int d, float eps, float* us, float* f, CUstream_st* st) {
  const char* fn = "lact_qk_forward";
  check_heads(fn, R, D, d);
  require(ld_sb >= 1, fn, "ld_sb must be >= 1");
  require(eps > 0.f, fn, "eps must be positive");
  require(u && scale && offset && us && f, fn, "a pointer is null");
  if (R == 0) return;
  const int H = D / d;
  const std::size_t warps = std::size_t(R) * H;
  lact_qk_forward_kernel<<<warp_blocks(warps), kThreads, 0, st>>>(u, scale, offset, ld_sb, R, H, d,
                                                                   eps, us, f);
  check_launch();
}

void lact_qk_backward(const float* u, const float* us, const float* scale, const float* offset,
                      int ld_sb, const float* dF, int R, int D, int d, float eps, float* du,
                      float* dt, float* dtu, CUstream_st* st) {
  const char* fn = "lact_qk_backward";
  check_heads(fn, R, D, d);
  require(ld_sb >= 1, fn, "ld_sb must be >= 1");
  require(eps > 0.f, fn, "eps must be positive");
  require(u && us && scale && offset && dF && du && dt && dtu, fn, "a pointer is null");
  if (R == 0) return;
  const int H = D / d;
  const std::size_t warps = std::size_t(R) * H;
  lact_qk_backward_kernel<<<warp_blocks(warps), kThreads, 0, st>>>(u, us, scale, offset, ld_sb, dF,
                                                                    R, H, d, eps, du, dt, dtu);
  check_launch();
}

void lact_silu_forward(const float* x, std::size_t n, float* y, CUstream_st* st) {
  require(x && y, "lact_silu_forward", "a pointer is null");
  if (n == 0) return;
  lact_silu_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, st>>>(x, n, y);
  check_launch();
}

void lact_silu_backward_add(const float* x, const float* dy, std::size_t n, float* dx,
                            CUstream_st* st) {
  require(x && dy && dx, "lact_silu_backward_add", "a pointer is null");
  if (n == 0) return;
  lact_silu_backward_add_kernel<<<blocks_for(n, kThreads), kThreads, 0, st>>>(x, dy, n, dx);
  check_launch();
}

void lact_rates_forward(const float* z, const float* bias, float base, int R, int H, float* zl,
                        float* lr0, float* lr1, float* lr2, CUstream_st* st) {
  const char* fn = "lact_rates_forward";
  require(R >= 0 && H >= 1, fn, "needs R >= 0 and H >= 1");
  require(z && bias && zl && lr0 && lr1 && lr2, fn, "a pointer is null");
  if (R == 0) return;
  const std::size_t n = std::size_t(R) * H;
  lact_rates_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, st>>>(z, bias, base, R, H, zl,
                                                                           lr0, lr1, lr2);
  check_launch();
}

void lact_rates_backward(const float* zl, const float* dlr0, const float* dlr1, const float* dlr2,
                         int R, int H, float* dz, CUstream_st* st) {
  const char* fn = "lact_rates_backward";
  require(R >= 0 && H >= 1, fn, "needs R >= 0 and H >= 1");
  require(zl && dlr0 && dlr1 && dlr2 && dz, fn, "a pointer is null");
  if (R == 0) return;
  const std::size_t n = std::size_t(R) * H;
  lact_rates_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, st>>>(zl, dlr0, dlr1, dlr2, R,
                                                                            H, dz);
  check_launch();
}

void lact_scale_forward(const float* n, const float* z, const float* bias, const float* a, int R,
                        int H, int d, float* o, CUstream_st* st) {
  const char* fn = "lact_scale_forward";
  require(R >= 0 && H >= 1 && d >= 1, fn, "needs R >= 0, H >= 1 and d >= 1");
  require(n && z && bias && a && o, fn, "a pointer is null");
  if (R == 0) return;
  const std::size_t total = std::size_t(R) * H * d;
  lact_scale_forward_kernel<<<blocks_for(total, kThreads), kThreads, 0, st>>>(n, z, bias, a, R, H,
                                                                               d, o);
  check_launch();
}

void lact_scale_backward(const float* n, const float* z, const float* bias, const float* dO, int R,
                         int H, int d, float* dn, float* dz, CUstream_st* st) {
  const char* fn = "lact_scale_backward";
  require(R >= 0 && H >= 1 && d >= 1, fn, "needs R >= 0, H >= 1 and d >= 1");
  require(n && z && bias && dO && dn && dz, fn, "a pointer is null");
  if (R == 0) return;
  const std::size_t warps = std::size_t(R) * H;
  lact_scale_backward_kernel<<<warp_blocks(warps), kThreads, 0, st>>>(n, z, bias, dO, R, H, d, dn,
                                                                       dz);
  check_launch();
}

void lact_add_strided(const float* src, int n, float* dst, int stride, CUstream_st* st) {
  const char* fn = "lact_add_strided";
  require(n >= 0 && stride >= 1, fn, "needs n >= 0 and stride >= 1");
  require(src && dst, fn, "a pointer is null");
  if (n == 0) return;
  lact_add_strided_kernel<<<blocks_for(std::size_t(n), kThreads), kThreads, 0, st>>>(src, n, dst,
                                                                                      stride);
  check_launch();
}

}  // namespace tttlab::kernels
