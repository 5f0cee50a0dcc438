// The vector-add kernel of vector_add.hpp.
#include <cuda_runtime.h>

#include <stdexcept>

#include "common/cuda_check.hpp"
#include "vector_add.hpp"

namespace tttlab::kernels::test {
namespace {

__global__ void vector_add_kernel(const float* a, const float* b, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

// Owns one device allocation, so that a failed copy or launch does not leak the others.
struct DeviceBuffer {
  float* ptr = nullptr;
  explicit DeviceBuffer(size_t n) { TTTLAB_CUDA_CHECK(cudaMalloc(&ptr, n * sizeof(float))); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace

std::vector<float> vector_add_on_gpu(const std::vector<float>& a, const std::vector<float>& b,
                                     int block) {
  if (a.size() != b.size())
    throw std::invalid_argument("vector_add_on_gpu: a and b differ in length");
  if (block < 1 || block > 1024)
    throw std::invalid_argument("vector_add_on_gpu: block size must be in 1..1024");
  const int n = static_cast<int>(a.size());
  std::vector<float> out(a.size());
  if (n == 0) return out;
  DeviceBuffer d_a(a.size()), d_b(b.size()), d_out(a.size());
  const size_t bytes = a.size() * sizeof(float);
  TTTLAB_CUDA_CHECK(cudaMemcpy(d_a.ptr, a.data(), bytes, cudaMemcpyHostToDevice));
  TTTLAB_CUDA_CHECK(cudaMemcpy(d_b.ptr, b.data(), bytes, cudaMemcpyHostToDevice));
  const int grid = (n + block - 1) / block;
  vector_add_kernel<<<grid, block>>>(d_a.ptr, d_b.ptr, d_out.ptr, n);
  TTTLAB_CUDA_CHECK(cudaGetLastError());
  TTTLAB_CUDA_CHECK(cudaDeviceSynchronize());
  TTTLAB_CUDA_CHECK(cudaMemcpy(out.data(), d_out.ptr, bytes, cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace tttlab::kernels::test
