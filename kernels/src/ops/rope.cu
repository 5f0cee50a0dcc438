// RoPE (tttlab/kernels/nn_ops.hpp, nn/rope.hpp on the CPU): the rotation kernels and the host
// tables. The float4 rotation itself (rope4) is shared with the conv kernels (ops_common.cuh).
#include <cmath>
#include <cstdint>

#include "ops/ops_common.cuh"

namespace tttlab::kernels {
namespace {

// One pair per thread, any even d. Y16 null: the rotation of X written to Y (X itself for
// rope_rotate); else to Y16 only, rounded to bf16 (rope_rotate_to_bf16).
__global__ void rope_kernel(const float* X, float* Y, int T, int H, int d, int period,
                            const float* __restrict__ cos_t, const float* __restrict__ sin_t,
                            float sign, std::size_t n_pairs, std::uint16_t* Y16) {
  const int half = d / 2;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n_pairs;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const int m = int(i % half);
    const std::size_t rh = i / half;  // row·H + head
    const std::size_t row = rh / H;
    const int p = int(row % T) % period;
    const float c = cos_t[p * half + m], s = sign * sin_t[p * half + m];
    const std::size_t o = rh * d + 2 * m;
    const float a = X[o], b = X[o + 1];
    const float y0 = a * c - b * s, y1 = a * s + b * c;
    if (Y16) {
      Y16[o] = bf16_bits(y0);
      Y16[o + 1] = bf16_bits(y1);
    } else {
      Y[o] = y0;
      Y[o + 1] = y1;
    }
  }
}

// Two pairs per thread (d a multiple of 4, 16-byte aligned, fewer than 2^31 pairs) with 32-bit
// index arithmetic: the kernel above pays five 64-bit divisions per pair, which made it 1.7× its
// byte floor on a D = 768 step. Y16 as above (8-byte aligned).
__global__ void rope_vec4_kernel(const float4* X, float4* Y, int T, int H, int quarter, int period,
                                 const float* __restrict__ cos_t, const float* __restrict__ sin_t,
                                 float sign, int n4, std::uint16_t* Y16) {
  const int half = 2 * quarter;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    const int m = 2 * (i % quarter);
    const int rh = i / quarter;  // row·H + head
    const int p = (rh / H % T) % period;
    const float4 y = rope4(X[i], cos_t, sin_t, half, p, m, sign);
    if (Y16)
      store_bf16x4(Y16 + 4 * std::size_t(i), y.x, y.y, y.z, y.w);
    else
      Y[i] = y;
  }
}

// rope_rotate (Y = X, Y16 null) and rope_rotate_to_bf16 (Y null).
void rope_launch(const char* fn, const float* X, float* Y, int B, int T, int H, int d, int period,
                 const float* cos_table, const float* sin_table, float sign, std::uint16_t* Y16,
                 CUstream_st* stream) {
  require(B >= 1 && T >= 1 && H >= 1 && period >= 1, fn, "B, T, H and the period must be >= 1");
  require(d >= 2 && d % 2 == 0, fn, "the head dim must be even");
  require(X && (Y || Y16) && cos_table && sin_table, fn, "a pointer is null");
  const std::size_t n = std::size_t(B) * T * H * (d / 2);
  if (d % 4 == 0 && n / 2 < std::size_t(1) << 31 && aligned16({X}) && (!Y16 || aligned8(Y16))) {
    const int n4 = int(n / 2);
    rope_vec4_kernel<<<blocks_for(std::size_t(n4), kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(X), reinterpret_cast<float4*>(Y), T, H, d / 4, period,
        cos_table, sin_table, sign, n4, Y16);
  } else {
    rope_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(X, Y, T, H, d, period, cos_table,
                                                                  sin_table, sign, n, Y16);
  }
  check_launch();
}

}  // namespace

void rope_rotate_to_bf16(const float* X, int B, int T, int H, int d, int period,
                         const float* cos_table, const float* sin_table, float sign,
                         std::uint16_t* Y16, CUstream_st* stream) {
  require(Y16 != nullptr, "rope_rotate_to_bf16", "a pointer is null");
  rope_launch("rope_rotate_to_bf16", X, nullptr, B, T, H, d, period, cos_table, sin_table, sign,
              Y16, stream);
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

void rope_rotate(float* X, int B, int T, int H, int d, int period, const float* cos_table,
                 const float* sin_table, float sign, CUstream_st* stream) {
  rope_launch("rope_rotate", X, X, B, T, H, d, period, cos_table, sin_table, sign, nullptr, stream);
}

}  // namespace tttlab::kernels
