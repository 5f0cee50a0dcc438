// The softmax cross-entropy of the logits (tttlab/kernels/nn_ops.hpp, nn/cross_entropy.hpp on the
// CPU): one warp per row.
#include <cmath>

#include "ops/ops_common.cuh"

namespace tttlab::kernels {
namespace {

__global__ void cross_entropy_kernel(const float* logits, const int* __restrict__ targets, int R, int V,
                                     float grad_scale, float* __restrict__ losses, float* dlogits) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= R) return;
  const std::size_t o = std::size_t(row) * V;
  const int y = targets[row];
  if (y < 0) {
    if (lane == 0) losses[row] = 0.f;
    if (dlogits)
      for (int j = lane; j < V; j += 32) dlogits[o + j] = 0.f;
    return;
  }
  const float ly = logits[o + y];
  float m = -INFINITY;
  for (int j = lane; j < V; j += 32) m = fmaxf(m, logits[o + j]);
  m = warp_max(m);
  float s = 0.f;
  for (int j = lane; j < V; j += 32) s += expf(logits[o + j] - m);
  s = warp_sum(s);  // every lane has read its logits before any lane writes below
  if (lane == 0) losses[row] = logf(s) + (m - ly);
  if (dlogits) {
    const float k = grad_scale / s;
    for (int j = lane; j < V; j += 32) {
      const float e = expf(logits[o + j] - m) * k;
      dlogits[o + j] = j == y ? e - grad_scale : e;
    }
  }
}

}  // namespace

void cross_entropy(const float* logits, const int* targets, int R, int V, float grad_scale, float* losses,
                   float* dlogits, CUstream_st* stream) {
  const char* fn = "cross_entropy";
  require(R >= 0 && V >= 1, fn, "R must be >= 0 and V >= 1");
  if (R == 0) return;
  require(logits && targets && losses, fn, "a pointer is null");
  cross_entropy_kernel<<<row_blocks(R), kThreads, 0, stream>>>(logits, targets, R, V, grad_scale, losses, dlogits);
  check_launch();
}

}  // namespace tttlab::kernels
