// Column sums in a fixed order (tttlab/kernels/nn_ops.hpp, "reductions"), and the second pass
// of every op whose weight gradient is a sum over rows.
#include "ops/ops_common.cuh"

namespace tttlab::kernels {
namespace {

// partial[chunk, c] = Σ of X[r, c] over the chunk's rows; block (32, 8), grid (⌈C/32⌉, chunks).
__global__ void colsum_partial_kernel(const float* __restrict__ X, int R, int C, float* __restrict__ partial) {
  __shared__ float s[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const int r0 = blockIdx.y * kChunkRows, r1 = min(R, r0 + kChunkRows);
  float acc = 0.f;
  if (c < C)
    for (int r = r0 + threadIdx.y; r < r1; r += 8) acc += X[std::size_t(r) * C + c];
  s[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float t = 0.f;
    for (int j = 0; j < 8; ++j) t += s[j][threadIdx.x];
    partial[std::size_t(blockIdx.y) * C + c] = t;
  }
}

// out[c] += Σ_k partial[k, c]: block (32, kPartialRows), grid ⌈C/32⌉.
__global__ void sum_partials_add_kernel(const float* __restrict__ partial, int n_chunks, int C,
                                        float* __restrict__ out) {
  const int c = blockIdx.x * 32 + threadIdx.x;
  const float sum = partials_column_sum(partial, n_chunks, C, c);
  if (threadIdx.y == 0 && c < C) out[c] += sum;
}

}  // namespace

namespace ops {

void sum_partials_add(const float* partial, int n_chunks, int C, float* out, cudaStream_t st) {
  sum_partials_add_kernel<<<(C + 31) / 32, dim3(32, kPartialRows), 0, st>>>(partial, n_chunks, C,
                                                                            out);
  check_launch();
}

void column_sum_launch(const float* X, int R, int C, float* out, float* ws, cudaStream_t st) {
  if (R <= 0 || C <= 0) return;
  const int n = chunks(R);
  colsum_partial_kernel<<<dim3((C + 31) / 32, n), dim3(32, 8), 0, st>>>(X, R, C, ws);
  check_launch();
  sum_partials_add(ws, n, C, out, st);
}

}  // namespace ops

std::size_t column_sum_workspace(int R, int C) {
  return R > 0 && C > 0 ? std::size_t(chunks(R)) * C : 0;
}

void column_sum_add(const float* X, int R, int C, float* out, float* workspace, CUstream_st* stream) {
  const char* fn = "column_sum_add";
  require(R >= 0 && C >= 1, fn, "R must be >= 0 and C >= 1");
  require(R == 0 || (X && out && workspace), fn, "a pointer is null");
  column_sum_launch(X, R, C, out, workspace, stream);
}

}  // namespace tttlab::kernels
