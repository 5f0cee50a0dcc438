// The SwiGLU activation, silu(G) ⊙ U, and its backward, in fp32 and on bf16 arrays
// (tttlab/kernels/nn_ops.hpp, nn/swiglu.hpp on the CPU).
#include "ops/ops_common.cuh"

namespace tttlab::kernels {
namespace {

__device__ __forceinline__ float silu_mul(float a, float u) { return a / (1.f + expf(-a)) * u; }

__global__ void silu_mul_forward_kernel(const float* G, const float* U, float* Hd, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    Hd[i] = silu_mul(G[i], U[i]);
}

__global__ void silu_mul_backward_kernel(const float* G, const float* U, const float* dHd, float* dG, float* dU,
                                         std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float a = G[i], h = dHd[i];
    const float sg = 1.f / (1.f + expf(-a));
    dU[i] = h * (a * sg);
    dG[i] = h * U[i] * (sg * (1.f + a * (1.f - sg)));
  }
}

// float4 versions of the two above (n a multiple of 4, 16-byte aligned): a quarter of the threads and
// of the memory instructions; on a D = 768 step the scalar ones ran at 1.5–1.7× their byte floor.
__global__ void silu_mul_forward_vec4_kernel(const float4* __restrict__ G, const float4* __restrict__ U,
                                             float4* __restrict__ Hd, std::size_t n4) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4; i += std::size_t(gridDim.x) * blockDim.x) {
    const float4 a = G[i], u = U[i];
    Hd[i] = make_float4(silu_mul(a.x, u.x), silu_mul(a.y, u.y), silu_mul(a.z, u.z), silu_mul(a.w, u.w));
  }
}

__device__ __forceinline__ void silu_mul_grad(float a, float u, float h, float& dg, float& du) {
  const float sg = 1.f / (1.f + expf(-a));
  du = h * (a * sg);
  dg = h * u * (sg * (1.f + a * (1.f - sg)));
}
__device__ __forceinline__ void silu_mul_grad4(float4 a, float4 u, float4 h, float4& g, float4& v) {
  silu_mul_grad(a.x, u.x, h.x, g.x, v.x);
  silu_mul_grad(a.y, u.y, h.y, g.y, v.y);
  silu_mul_grad(a.z, u.z, h.z, g.z, v.z);
  silu_mul_grad(a.w, u.w, h.w, g.w, v.w);
}
__global__ void silu_mul_backward_vec4_kernel(const float4* __restrict__ G, const float4* __restrict__ U,
                                              const float4* __restrict__ dHd, float4* __restrict__ dG,
                                              float4* __restrict__ dU, std::size_t n4) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4; i += std::size_t(gridDim.x) * blockDim.x) {
    float4 g, v;
    silu_mul_grad4(G[i], U[i], dHd[i], g, v);
    dG[i] = g;
    dU[i] = v;
  }
}

// The mixed-precision SwiGLU: its pre-activations G, U (the products' outputs) and the hidden
// state's gradient come in bf16, and its outputs (the next products' operands) leave in bf16. The
// arithmetic is the kernels' above on the widened values (exact), then round to nearest even; four
// elements per thread where n is a multiple of 4 and every array 8-byte aligned, else one.
__device__ __forceinline__ float4 load_bf16x4(const std::uint16_t* src) {
  const uint2 p =
      *reinterpret_cast<const uint2*>(src);  // little-endian: element 0 is p.x's low half
  return make_float4(__uint_as_float(p.x << 16), __uint_as_float(p.x & 0xffff0000u),
                     __uint_as_float(p.y << 16), __uint_as_float(p.y & 0xffff0000u));
}
__global__ void silu_mul_forward_bf16_vec4_kernel(const std::uint16_t* __restrict__ G16,
                                                  const std::uint16_t* __restrict__ U16,
                                                  std::uint16_t* __restrict__ Hd16,
                                                  std::size_t n4) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4; i += std::size_t(gridDim.x) * blockDim.x) {
    const float4 a = load_bf16x4(G16 + 4 * i), u = load_bf16x4(U16 + 4 * i);
    store_bf16x4(Hd16 + 4 * i, silu_mul(a.x, u.x), silu_mul(a.y, u.y), silu_mul(a.z, u.z), silu_mul(a.w, u.w));
  }
}
__global__ void silu_mul_forward_bf16_kernel(const std::uint16_t* G16, const std::uint16_t* U16,
                                             std::uint16_t* Hd16, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    Hd16[i] = bf16_bits(silu_mul(bf16_value(G16[i]), bf16_value(U16[i])));
}
__global__ void silu_mul_backward_bf16_vec4_kernel(const std::uint16_t* __restrict__ G16,
                                                   const std::uint16_t* __restrict__ U16,
                                                   const std::uint16_t* __restrict__ dHd16,
                                                   std::uint16_t* __restrict__ dG16,
                                                   std::uint16_t* __restrict__ dU16,
                                                   std::size_t n4) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4; i += std::size_t(gridDim.x) * blockDim.x) {
    float4 g, v;
    silu_mul_grad4(load_bf16x4(G16 + 4 * i), load_bf16x4(U16 + 4 * i), load_bf16x4(dHd16 + 4 * i),
                   g, v);
    store_bf16x4(dG16 + 4 * i, g.x, g.y, g.z, g.w);
    store_bf16x4(dU16 + 4 * i, v.x, v.y, v.z, v.w);
  }
}
__global__ void silu_mul_backward_bf16_kernel(const std::uint16_t* G16, const std::uint16_t* U16,
                                              const std::uint16_t* dHd16, std::uint16_t* dG16,
                                              std::uint16_t* dU16, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    float g, v;
    silu_mul_grad(bf16_value(G16[i]), bf16_value(U16[i]), bf16_value(dHd16[i]), g, v);
    dG16[i] = bf16_bits(g);
    dU16[i] = bf16_bits(v);
  }
}

}  // namespace

void silu_mul_forward(const float* G, const float* U, float* hidden, std::size_t n, CUstream_st* stream) {
  if (n == 0) return;
  require(G && U && hidden, "silu_mul_forward", "a pointer is null");
  if (n % 4 == 0 && aligned16({G, U, hidden}))
    silu_mul_forward_vec4_kernel<<<blocks_for(n / 4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(G), reinterpret_cast<const float4*>(U), reinterpret_cast<float4*>(hidden), n / 4);
  else
    silu_mul_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(G, U, hidden, n);
  check_launch();
}

void silu_mul_backward(const float* G, const float* U, const float* dHidden, float* dG, float* dU, std::size_t n,
                       CUstream_st* stream) {
  if (n == 0) return;
  require(G && U && dHidden && dG && dU, "silu_mul_backward", "a pointer is null");
  if (n % 4 == 0 && aligned16({G, U, dHidden, dG, dU}))
    silu_mul_backward_vec4_kernel<<<blocks_for(n / 4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(G), reinterpret_cast<const float4*>(U), reinterpret_cast<const float4*>(dHidden),
        reinterpret_cast<float4*>(dG), reinterpret_cast<float4*>(dU), n / 4);
  else
    silu_mul_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(G, U, dHidden, dG, dU, n);
  check_launch();
}

void silu_mul_forward_bf16(const std::uint16_t* G16, const std::uint16_t* U16,
                           std::uint16_t* hidden16, std::size_t n, CUstream_st* stream) {
  if (n == 0) return;
  require(G16 && U16 && hidden16, "silu_mul_forward_bf16", "a pointer is null");
  if (n % 4 == 0 && aligned8(G16) && aligned8(U16) && aligned8(hidden16))
    silu_mul_forward_bf16_vec4_kernel<<<blocks_for(n / 4, kThreads), kThreads, 0, stream>>>(
        G16, U16, hidden16, n / 4);
  else
    silu_mul_forward_bf16_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(G16, U16,
                                                                                   hidden16, n);
  check_launch();
}

void silu_mul_backward_bf16(const std::uint16_t* G16, const std::uint16_t* U16,
                            const std::uint16_t* dHidden16, std::uint16_t* dG16,
                            std::uint16_t* dU16, std::size_t n, CUstream_st* stream) {
  if (n == 0) return;
  require(G16 && U16 && dHidden16 && dG16 && dU16, "silu_mul_backward_bf16", "a pointer is null");
  if (n % 4 == 0 && aligned8(G16) && aligned8(U16) && aligned8(dHidden16) && aligned8(dG16) &&
      aligned8(dU16))
    silu_mul_backward_bf16_vec4_kernel<<<blocks_for(n / 4, kThreads), kThreads, 0, stream>>>(
        G16, U16, dHidden16, dG16, dU16, n / 4);
  else
    silu_mul_backward_bf16_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
        G16, U16, dHidden16, dG16, dU16, n);
  check_launch();
}

}  // namespace tttlab::kernels
