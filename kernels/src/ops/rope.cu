// RoPE (tttlab/kernels/nn_ops.hpp, nn/rope.hpp on the CPU): the rotation kernels and the host
// tables. The float4 rotation itself (rope4) is shared with the conv kernels (ops_common.cuh).
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "ops/ops_common.cuh"

namespace tttlab::kernels {
namespace {

__global__ void rope_kernel(float* X, int T, int H, int d, int period, const float* __restrict__ cos_t,
                            const float* __restrict__ sin_t, float sign, std::size_t n_pairs) {
  const int half = d / 2;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n_pairs;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const int m = int(i % half);
    const std::size_t rh = i / half;  // row·H + head
    const std::size_t row = rh / H;
    const int p = int(row % T) % period;
    const float c = cos_t[p * half + m], s = sign * sin_t[p * half + m];
    float* x = X + rh * d + 2 * m;
    const float a = x[0], b = x[1];
    x[0] = a * c - b * s;
    x[1] = a * s + b * c;
  }
}

// Two pairs per thread (d a multiple of 4, 16-byte aligned, fewer than 2^31 pairs) with 32-bit
// index arithmetic: the kernel above pays five 64-bit divisions per pair, which made it 1.7× its
// byte floor on a D = 768 step.
__global__ void rope_vec4_kernel(float4* X, int T, int H, int quarter, int period, const float* __restrict__ cos_t,
                                 const float* __restrict__ sin_t, float sign, int n4) {
  const int half = 2 * quarter;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    const int m = 2 * (i % quarter);
    const int rh = i / quarter;  // row·H + head
    const int p = (rh / H % T) % period;
    X[i] = rope4(X[i], cos_t, sin_t, half, p, m, sign);
  }
}

// rope_rotate_to_bf16: four elements (two pairs) per thread, written as 8 bytes of bf16.
__global__ void rope_vec4_bf16_kernel(const float4* X, int T, int H, int quarter, int period,
                                      const float* __restrict__ cos_t, const float* __restrict__ sin_t, float sign,
                                      int n4, uint2* Y) {
  const int half = 2 * quarter;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    const int m = 2 * (i % quarter);
    const int rh = i / quarter;  // row·H + head
    const int p = (rh / H % T) % period;
    const float4 r = rope4(X[i], cos_t, sin_t, half, p, m, sign);
    const __nv_bfloat162 lo = __floats2bfloat162_rn(r.x, r.y), hi = __floats2bfloat162_rn(r.z, r.w);
    Y[i] = make_uint2(*reinterpret_cast<const unsigned*>(&lo), *reinterpret_cast<const unsigned*>(&hi));
  }
}

// Any even d: one pair per thread.
__global__ void rope_bf16_kernel(const float* X, int T, int H, int d, int period, const float* __restrict__ cos_t,
                                 const float* __restrict__ sin_t, float sign, std::size_t n_pairs,
                                 std::uint16_t* Y) {
  const int half = d / 2;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n_pairs;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const int m = int(i % half);
    const std::size_t rh = i / half;
    const int p = int(rh / H % T) % period;
    const float c = cos_t[p * half + m], s = sign * sin_t[p * half + m];
    const float a = X[rh * d + 2 * m], b = X[rh * d + 2 * m + 1];
    Y[rh * d + 2 * m] = __bfloat16_as_ushort(__float2bfloat16_rn(a * c - b * s));
    Y[rh * d + 2 * m + 1] = __bfloat16_as_ushort(__float2bfloat16_rn(a * s + b * c));
  }
}

}  // namespace

void rope_rotate_to_bf16(const float* X, int B, int T, int H, int d, int period, const float* cos_table,
                         const float* sin_table, float sign, std::uint16_t* Y16, CUstream_st* stream) {
  const char* fn = "rope_rotate_to_bf16";
  require(B >= 1 && T >= 1 && H >= 1 && period >= 1, fn, "B, T, H and the period must be >= 1");
  require(d >= 2 && d % 2 == 0, fn, "the head dim must be even");
  require(X && cos_table && sin_table && Y16, fn, "a pointer is null");
  const std::size_t n = std::size_t(B) * T * H * (d / 2);
  if (d % 4 == 0 && n / 2 < std::size_t(1) << 31 && aligned16({X}) && reinterpret_cast<std::uintptr_t>(Y16) % 8 == 0) {
    const int n4 = int(n / 2);
    rope_vec4_bf16_kernel<<<blocks_for(std::size_t(n4), kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(X), T, H, d / 4, period, cos_table, sin_table, sign, n4,
        reinterpret_cast<uint2*>(Y16));
  } else {
    rope_bf16_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(X, T, H, d, period, cos_table, sin_table, sign,
                                                                       n, Y16);
  }
  check_launch();
}

void rope_tables(int d, int period, double theta, float* cos_host, float* sin_host) {
  if (d < 2 || d % 2 != 0 || period < 1)
    throw std::invalid_argument("rope_tables: d must be even and >= 2, period >= 1");
  const int half = d / 2;
  for (int m = 0; m < half; ++m) {
    // As the CPU op: the frequency and the angle in double, cos and sin rounded to float.
    const double freq = std::pow(theta, -2.0 * double(m) / double(d));
    for (int p = 0; p < period; ++p) {
      const double phi = double(p) * freq;
      cos_host[p * half + m] = float(std::cos(phi));
      sin_host[p * half + m] = float(std::sin(phi));
    }
  }
}

void rope_rotate(float* X, int B, int T, int H, int d, int period, const float* cos_table, const float* sin_table,
                 float sign, CUstream_st* stream) {
  const char* fn = "rope_rotate";
  require(B >= 1 && T >= 1 && H >= 1 && period >= 1, fn, "B, T, H and the period must be >= 1");
  require(d >= 2 && d % 2 == 0, fn, "the head dim must be even");
  require(X && cos_table && sin_table, fn, "a pointer is null");
  const std::size_t n = std::size_t(B) * T * H * (d / 2);
  if (d % 4 == 0 && n / 2 < std::size_t(1) << 31 && aligned16({X})) {
    const int n4 = int(n / 2);
    rope_vec4_kernel<<<blocks_for(std::size_t(n4), kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(X), T, H, d / 4, period, cos_table, sin_table, sign, n4);
  } else {
    rope_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(X, T, H, d, period, cos_table, sin_table, sign, n);
  }
  check_launch();
}

}  // namespace tttlab::kernels
