// The token embedding's forward (a row gather) and backward (a sum per token in a fixed order)
// (tttlab/kernels/nn_ops.hpp, nn/embedding.hpp on the CPU).
#include "ops/ops_common.cuh"

namespace tttlab::kernels {
namespace {

__global__ void embedding_forward_kernel(const float* __restrict__ E, int D, const int* __restrict__ tokens,
                                         std::size_t n, float* __restrict__ H) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = i / D, c = i % D;
    H[i] = E[std::size_t(tokens[r]) * D + c];
  }
}

// Block (v, column tile): dE[v, c] += Σ dH[rows_of[k], c] over the token's rows. Byte text gives
// one token (the space) a sixth of all rows, so that block's chain of loads is the kernel's time: it
// keeps kEmbLanes rows in flight, row k into accumulator k mod kEmbLanes, and adds the accumulators in
// order at the end (a fixed order: bitwise reproducible).
constexpr int kEmbLanes = 8;
__global__ void embedding_backward_kernel(const int* __restrict__ offsets, const int* __restrict__ rows_of, int D,
                                          const float* __restrict__ dH, float* __restrict__ dE) {
  const int v = blockIdx.x;
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= D) return;
  const int k0 = offsets[v], k1 = offsets[v + 1];
  if (k0 == k1) return;
  float acc[kEmbLanes] = {};
  int k = k0;
  for (; k + kEmbLanes <= k1; k += kEmbLanes) {
    int r[kEmbLanes];
#pragma unroll
    for (int j = 0; j < kEmbLanes; ++j) r[j] = rows_of[k + j];
#pragma unroll
    for (int j = 0; j < kEmbLanes; ++j) acc[j] += dH[std::size_t(r[j]) * D + c];
  }
#pragma unroll
  for (int j = 0; j < kEmbLanes - 1; ++j)
    if (k + j < k1) acc[j] += dH[std::size_t(rows_of[k + j]) * D + c];
  float total = 0.f;
#pragma unroll
  for (int j = 0; j < kEmbLanes; ++j) total += acc[j];
  dE[std::size_t(v) * D + c] += total;
}

}  // namespace

void embedding_forward(const float* E, int V, int D, const int* tokens, int R, float* H, CUstream_st* stream) {
  const char* fn = "embedding_forward";
  require(V >= 1 && D >= 1 && R >= 0, fn, "V, D must be >= 1 and R >= 0");
  if (R == 0) return;
  require(E && tokens && H, fn, "a pointer is null");
  const std::size_t n = std::size_t(R) * D;
  embedding_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(E, D, tokens, n, H);
  check_launch();
}

void embedding_backward(const int* offsets, const int* rows_of, int V, int D, const float* dH, float* dE,
                        CUstream_st* stream) {
  const char* fn = "embedding_backward";
  require(V >= 1 && D >= 1, fn, "V and D must be >= 1");
  require(offsets && rows_of && dH && dE, fn, "a pointer is null");
  embedding_backward_kernel<<<dim3(V, (D + 127) / 128), 128, 0, stream>>>(offsets, rows_of, D, dH, dE);
  check_launch();
}

}  // namespace tttlab::kernels
