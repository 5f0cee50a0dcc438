// The plain element-wise passes: the residual add (nn_ops.hpp) and the bf16 rounding of mixed
// precision (convert_to_bf16, gemm.hpp).
#include "ops/ops_common.cuh"

namespace tttlab::kernels {
namespace {

__global__ void add_kernel(const float* a, const float* b, float* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}

// convert_to_bf16 (gemm.hpp): one thread per group of 4 columns of a row, a 16-byte load and an 8-byte
// store where the rows' alignment allows it (ld_src and ld_dst multiples of 4), element by element
// otherwise and at a row's ragged end; 6 bytes of traffic per element.
__global__ void convert_to_bf16_kernel(const float* __restrict__ src, int rows, int cols, long long ld_src,
                                       std::uint16_t* __restrict__ dst, long long ld_dst, bool vector_rows) {
  const long long groups_per_row = (cols + 3) / 4;
  const long long total = groups_per_row * rows;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / groups_per_row;
    const int c = int(i - r * groups_per_row) * 4;
    const float* s = src + r * ld_src + c;
    std::uint16_t* d = dst + r * ld_dst + c;
    if (vector_rows && c + 4 <= cols) {
      const float4 v = *reinterpret_cast<const float4*>(s);
      store_bf16x4(d, v.x, v.y, v.z, v.w);
    } else {
      for (int k = 0; k < 4 && c + k < cols; ++k) d[k] = bf16_bits(s[k]);
    }
  }
}

}  // namespace

void add(const float* a, const float* b, float* out, std::size_t n, CUstream_st* stream) {
  if (n == 0) return;
  require(a && b && out, "add", "a pointer is null");
  add_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(a, b, out, n);
  check_launch();
}

void convert_to_bf16(const float* src, int rows, int cols, int ld_src, std::uint16_t* dst, int ld_dst,
                     CUstream_st* stream) {
  const char* fn = "convert_to_bf16";
  require(rows >= 0 && cols >= 0 && ld_src >= cols && ld_dst >= cols, fn,
          "need rows, cols >= 0 and leading dimensions >= cols (rows " + std::to_string(rows) + ", cols " +
              std::to_string(cols) + ", ld_src " + std::to_string(ld_src) + ", ld_dst " + std::to_string(ld_dst) + ")");
  if (rows == 0 || cols == 0) return;
  require(src && dst, fn, "a pointer is null");
  const bool vector_rows = ld_src % 4 == 0 && ld_dst % 4 == 0 && aligned16({src}) && aligned8(dst);
  const std::size_t groups = std::size_t(rows) * ((cols + 3) / 4);
  convert_to_bf16_kernel<<<blocks_for(groups, kThreads), kThreads, 0, stream>>>(src, rows, cols, ld_src, dst, ld_dst,
                                                                                 vector_rows);
  check_launch();
}

}  // namespace tttlab::kernels
