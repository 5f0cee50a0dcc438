// fp32 → bf16 rounding of a strided matrix (convert_to_bf16 of tttlab/kernels/gemm.hpp).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "tttlab/kernels/gemm.hpp"

namespace tttlab::kernels {
namespace {

// One thread per group of 4 columns of a row: a 16-byte load and an 8-byte store where the row's
// alignment allows it (the common case: ld_src a multiple of 4, ld_dst of 8), element by element
// otherwise and at a row's ragged end. The operands of one matrix product are read once, so the
// kernel runs at memory bandwidth: 6 bytes per element.
__global__ void convert_to_bf16_kernel(const float* __restrict__ src, int rows, int cols, long long ld_src,
                                       __nv_bfloat16* __restrict__ dst, long long ld_dst, bool vector_rows) {
  const long long groups_per_row = (cols + 3) / 4;
  const long long total = groups_per_row * rows;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / groups_per_row;
    const int c = int(i - r * groups_per_row) * 4;
    const float* s = src + r * ld_src + c;
    __nv_bfloat16* d = dst + r * ld_dst + c;
    if (vector_rows && c + 4 <= cols) {
      const float4 v = *reinterpret_cast<const float4*>(s);
      __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y);
      __nv_bfloat162 hi = __floats2bfloat162_rn(v.z, v.w);
      uint2 packed;
      packed.x = *reinterpret_cast<unsigned*>(&lo);
      packed.y = *reinterpret_cast<unsigned*>(&hi);
      *reinterpret_cast<uint2*>(d) = packed;
    } else {
      for (int k = 0; k < 4 && c + k < cols; ++k) d[k] = __float2bfloat16_rn(s[k]);
    }
  }
}

}  // namespace

void convert_to_bf16(const float* src, int rows, int cols, int ld_src, std::uint16_t* dst, int ld_dst,
                     CUstream_st* stream) {
  if (rows < 0 || cols < 0 || ld_src < cols || ld_dst < cols)
    throw std::invalid_argument("convert_to_bf16: need rows, cols >= 0 and leading dimensions >= cols (rows " +
                                std::to_string(rows) + ", cols " + std::to_string(cols) + ", ld_src " +
                                std::to_string(ld_src) + ", ld_dst " + std::to_string(ld_dst) + ")");
  if (rows == 0 || cols == 0) return;
  if (!src || !dst) throw std::invalid_argument("convert_to_bf16: a null pointer");
  const bool vector_rows = ld_src % 4 == 0 && ld_dst % 4 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0 &&
                           reinterpret_cast<std::uintptr_t>(dst) % 8 == 0;
  const long long groups = (long long)rows * ((cols + 3) / 4);
  const int threads = 256;
  const long long blocks = (groups + threads - 1) / threads;
  const int grid = int(blocks < 132LL * 16 ? blocks : 132LL * 16);  // grid-stride beyond 16 blocks per H100 SM
  convert_to_bf16_kernel<<<grid, threads, 0, stream>>>(src, rows, cols, ld_src, reinterpret_cast<__nv_bfloat16*>(dst),
                                                        ld_dst, vector_rows);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tttlab::kernels
