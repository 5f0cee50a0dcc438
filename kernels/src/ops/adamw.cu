// AdamW's update and the sum of squares of the gradients (the clipping norm) (tttlab/kernels/
// nn_ops.hpp, optim/adamw.hpp on the CPU).
#include "ops/ops_common.cuh"

namespace tttlab::kernels {
namespace {

constexpr int kNormThreads = 256;

int norm_blocks(std::size_t n) { return blocks_for(n, kNormThreads * 4, 1024); }

// The sum of every thread's t over a block of kNormThreads threads, in a fixed order (a tree through
// s), returned to thread 0.
__device__ double block_sum_double(double t, double (&s)[kNormThreads]) {
  s[threadIdx.x] = t;
  __syncthreads();
  for (int w = kNormThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  return s[0];
}

// Each block's Σ g² over a grid-strided share of g, in float4 loads where g is 16-byte aligned (the
// last n mod 4 values, and all of an unaligned g, by block 0 alone), accumulated in double and summed
// over the block's threads in a fixed order: the result is bitwise reproducible.
__global__ void sum_squares_partial_kernel(const float* __restrict__ g, std::size_t n, double* __restrict__ partial) {
  __shared__ double s[kNormThreads];
  double acc = 0;
  const bool vec = reinterpret_cast<std::uintptr_t>(g) % 16 == 0;
  const std::size_t n4 = vec ? n / 4 : 0;
  const auto* g4 = reinterpret_cast<const float4*>(g);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float4 v = g4[i];
    acc += double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z + double(v.w) * v.w;
  }
  if (blockIdx.x == 0)
    for (std::size_t i = 4 * n4 + threadIdx.x; i < n; i += blockDim.x) acc += double(g[i]) * g[i];
  const double sum = block_sum_double(acc, s);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// Σ of n partials by one block of kNormThreads threads, in a fixed order (a thread's strided share,
// then a tree): one thread's loop over the 1024 partials took 36 us, a latency chain of loads.
__global__ void sum_partials_double_kernel(const double* partial, int n, double* out) {
  __shared__ double s[kNormThreads];
  double t = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) t += partial[i];
  const double sum = block_sum_double(t, s);
  if (threadIdx.x == 0) *out = sum;
}

// p16 (optional): bf16(p) after the update, the bf16 products' mirror of the parameters, written in
// this pass instead of a separate conversion that reads p again.
__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g,
                             float* __restrict__ m, float* __restrict__ v,
                             std::uint16_t* __restrict__ p16, std::size_t n, AdamWScalars s) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float gj = g[i] * s.scale;
    const float mj = s.b1 * m[i] + s.one_minus_b1 * gj;
    const float vj = s.b2 * v[i] + s.one_minus_b2 * gj * gj;
    m[i] = mj;
    v[i] = vj;
    const float mhat = mj * s.inv_bc1, vhat = vj * s.inv_bc2;
    const float pj = p[i];
    const float pn = pj - s.lr * (mhat / (sqrtf(vhat) + s.eps) + s.wd * pj);
    p[i] = pn;
    if (p16) p16[i] = bf16_bits(pn);
  }
}

}  // namespace

std::size_t sum_squares_workspace(std::size_t n) { return std::size_t(norm_blocks(n)); }

void sum_squares(const float* g, std::size_t n, double* out, double* workspace, CUstream_st* stream) {
  require(out && workspace && (n == 0 || g), "sum_squares", "a pointer is null");
  const int nb = norm_blocks(n);
  sum_squares_partial_kernel<<<nb, kNormThreads, 0, stream>>>(g, n, workspace);
  check_launch();
  sum_partials_double_kernel<<<1, kNormThreads, 0, stream>>>(workspace, nb, out);
  check_launch();
}

void adamw_update(float* p, const float* g, float* m, float* v, std::size_t n,
                  const AdamWScalars& s, CUstream_st* stream, std::uint16_t* p16) {
  if (n == 0) return;
  require(p && g && m && v, "adamw_update", "a pointer is null");
  adamw_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(p, g, m, v, p16, n, s);
  check_launch();
}

}  // namespace tttlab::kernels
