// The element-wise and per-head passes of the DeltaNet and Gated DeltaNet layers on the GPU (see
// tttlab/kernels/deltanet.hpp; the CPU functions they mirror are l2_normalize_heads / _backward in
// core/src/seq/short_conv_branch.cpp and the β and α gates of core/src/seq/deltanet_layer.cpp,
// docs/MATH.md §11.8). Memory-bound and small beside the inner loop: one warp per (row, head) for the
// L2 normalisation, one thread per element for the gates. No atomics.
#include <cfloat>
#include <cstdint>

#include "ops/ops_common.cuh"
#include "tttlab/kernels/deltanet.hpp"

namespace tttlab::kernels {
namespace {

// The reference's softplus (PyTorch's): r itself above 20, as mamba2_softplus.
__device__ __forceinline__ float dn_softplus(float r) {
  return r > 20.f ? r : fmaxf(r, 0.f) + log1pf(expf(-fabsf(r)));
}
__device__ __forceinline__ float dn_softplus_grad(float r) {
  return r > 20.f ? 1.f : 1.f / (1.f + expf(-r));
}

// One warp per (row, head): n = sqrt(‖a_h‖² + ε), out_h = a_h / n (scale 1, a division as the CPU's)
// or a_h · (scale / n).
__global__ void l2_heads_forward_kernel(const float* __restrict__ a, int ld, int R, int H, int d,
                                        float scale, float eps, float* __restrict__ out) {
  const long long w = (long long)blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  if (w >= (long long)R * H) return;
  const int lane = threadIdx.x % 32;
  const long long r = w / H;
  const int h = int(w % H);
  const float* src = a + r * ld + (long long)h * d;
  float* dst = out + r * ld + (long long)h * d;
  float ss = 0.f;
  for (int j = lane; j < d; j += 32) ss = fmaf(src[j], src[j], ss);
  ss = warp_sum(ss);
  const float n = sqrtf(ss + eps);
  if (scale == 1.f) {
    for (int j = lane; j < d; j += 32) dst[j] = src[j] / n;
  } else {
    const float s = scale / n;
    for (int j = lane; j < d; j += 32) dst[j] = src[j] * s;
  }
}

// da_h = (g_h − a_h (a_h·g_h)/n²) / n (scale 1) or (scale / n)(g_h − a_h (a_h·g_h)/n²).
__global__ void l2_heads_backward_kernel(const float* __restrict__ a, const float* __restrict__ g,
                                         int ld, int R, int H, int d, float scale, float eps,
                                         float* __restrict__ da) {
  const long long w = (long long)blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  if (w >= (long long)R * H) return;
  const int lane = threadIdx.x % 32;
  const long long r = w / H;
  const int h = int(w % H);
  const long long off = r * ld + (long long)h * d;
  float ss = 0.f, ag = 0.f;
  for (int j = lane; j < d; j += 32) {
    ss = fmaf(a[off + j], a[off + j], ss);
    ag = fmaf(a[off + j], g[off + j], ag);
  }
  ss = warp_sum(ss);
  ag = warp_sum(ag);
  const float n2 = ss + eps, n = sqrtf(n2), c = ag / n2;
  for (int j = lane; j < d; j += 32) {
    const float t = g[off + j] - a[off + j] * c;
    da[off + j] = scale == 1.f ? t / n : (scale / n) * t;
  }
}

__global__ void sigmoid_kernel(float* __restrict__ z, std::size_t n) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) z[i] = 1.f / (1.f + expf(-z[i]));
}

__global__ void sigmoid_backward_kernel(const float* __restrict__ beta,
                                        const float* __restrict__ dbeta, float* __restrict__ dz,
                                        std::size_t n) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dz[i] = dbeta[i] * beta[i] * (1.f - beta[i]);
}

// r += dt_bias (in place), α = max(exp(−exp(A_log)·softplus(r)), FLT_MIN).
__global__ void alpha_forward_kernel(float* __restrict__ r, const float* __restrict__ dt_bias,
                                     const float* __restrict__ A_log, int H, std::size_t n,
                                     float* __restrict__ alpha) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int h = int(i % H);
  const float rv = r[i] + dt_bias[h];
  r[i] = rv;
  const float g = -expf(A_log[h]) * dn_softplus(rv);
  alpha[i] = fmaxf(expf(g), FLT_MIN);
}

// dg = dα·α; the A_log term dg·(−A·softplus(r)) (summed over rows by the caller) and
// dr = dg·(−A)·softplus′(r).
__global__ void alpha_backward_kernel(const float* __restrict__ r, const float* __restrict__ alpha,
                                      const float* __restrict__ dalpha,
                                      const float* __restrict__ A_log, int H, std::size_t n,
                                      float* __restrict__ dr, float* __restrict__ dA_terms) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int h = int(i % H);
  const float A = expf(A_log[h]);
  const float dg = alpha ? dalpha[i] * alpha[i] : dalpha[i];  // alpha null: dalpha is dg already
  dA_terms[i] = dg * (-A * dn_softplus(r[i]));
  dr[i] = dg * (-A) * dn_softplus_grad(r[i]);
}

// out = log(α) (α ≥ FLT_MIN, so finite).
__global__ void log_kernel(const float* __restrict__ a, std::size_t n, float* __restrict__ out) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = logf(a[i]);
}

// bf16 bit patterns widened to fp32 (exact).
__global__ void widen_bf16_kernel(const std::uint16_t* __restrict__ a, std::size_t n,
                                  float* __restrict__ out) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __uint_as_float(std::uint32_t(a[i]) << 16);
}

}  // namespace

void deltanet_log(const float* a, std::size_t n, float* out, CUstream_st* stream) {
  require(n == 0 || (a && out), "deltanet_log", "a pointer is null");
  if (n == 0) return;
  log_kernel<<<blocks_for(n, kThreads, 1 << 30), kThreads, 0, stream>>>(a, n, out);
  check_launch();
}

void deltanet_widen_bf16(const std::uint16_t* a, std::size_t n, float* out, CUstream_st* stream) {
  require(n == 0 || (a && out), "deltanet_widen_bf16", "a pointer is null");
  if (n == 0) return;
  widen_bf16_kernel<<<blocks_for(n, kThreads, 1 << 30), kThreads, 0, stream>>>(a, n, out);
  check_launch();
}

void deltanet_l2norm_heads_forward(const float* a, int R, int H, int d, float scale, float eps,
                                   float* out, CUstream_st* stream) {
  const char* fn = "deltanet_l2norm_heads_forward";
  require(R >= 0 && H >= 1 && d >= 1, fn, "R must be >= 0, H and d >= 1");
  require(R == 0 || (a && out), fn, "a pointer is null");
  if (R == 0) return;
  l2_heads_forward_kernel<<<row_blocks(R * H), kThreads, 0, stream>>>(a, H * d, R, H, d, scale, eps,
                                                                      out);
  check_launch();
}

void deltanet_l2norm_heads_backward(const float* a, const float* dout, int R, int H, int d,
                                    float scale, float eps, float* da, CUstream_st* stream) {
  const char* fn = "deltanet_l2norm_heads_backward";
  require(R >= 0 && H >= 1 && d >= 1, fn, "R must be >= 0, H and d >= 1");
  require(R == 0 || (a && dout && da), fn, "a pointer is null");
  if (R == 0) return;
  l2_heads_backward_kernel<<<row_blocks(R * H), kThreads, 0, stream>>>(a, dout, H * d, R, H, d,
                                                                       scale, eps, da);
  check_launch();
}

void deltanet_sigmoid_forward(float* z, std::size_t n, CUstream_st* stream) {
  require(n == 0 || z, "deltanet_sigmoid_forward", "a pointer is null");
  if (n == 0) return;
  sigmoid_kernel<<<blocks_for(n, kThreads, 1 << 30), kThreads, 0, stream>>>(z, n);
  check_launch();
}

void deltanet_sigmoid_backward(const float* beta, const float* dbeta, float* dz, std::size_t n,
                               CUstream_st* stream) {
  require(n == 0 || (beta && dbeta && dz), "deltanet_sigmoid_backward", "a pointer is null");
  if (n == 0) return;
  sigmoid_backward_kernel<<<blocks_for(n, kThreads, 1 << 30), kThreads, 0, stream>>>(beta, dbeta,
                                                                                     dz, n);
  check_launch();
}

void deltanet_alpha_forward(float* r, const float* dt_bias, const float* A_log, int R, int H,
                            float* alpha, CUstream_st* stream) {
  const char* fn = "deltanet_alpha_forward";
  require(R >= 0 && H >= 1, fn, "R must be >= 0 and H >= 1");
  require(R == 0 || (r && dt_bias && A_log && alpha), fn, "a pointer is null");
  const std::size_t n = std::size_t(R) * H;
  if (n == 0) return;
  alpha_forward_kernel<<<blocks_for(n, kThreads, 1 << 30), kThreads, 0, stream>>>(r, dt_bias, A_log,
                                                                                  H, n, alpha);
  check_launch();
}

void deltanet_alpha_backward(const float* r, const float* alpha, const float* dalpha,
                             const float* A_log, int R, int H, float* dr, float* dA_terms,
                             CUstream_st* stream) {
  const char* fn = "deltanet_alpha_backward";
  require(R >= 0 && H >= 1, fn, "R must be >= 0 and H >= 1");
  require(R == 0 || (r && dalpha && A_log && dr && dA_terms), fn, "a pointer is null");
  const std::size_t n = std::size_t(R) * H;
  if (n == 0) return;
  alpha_backward_kernel<<<blocks_for(n, kThreads, 1 << 30), kThreads, 0, stream>>>(
      r, alpha, dalpha, A_log, H, n, dr, dA_terms);
  check_launch();
}

}  // namespace tttlab::kernels
