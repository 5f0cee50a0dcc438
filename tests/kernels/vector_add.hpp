// A tiny CUDA kernel for the GPU tests: out[i] = a[i] + b[i]. It checks the whole path a real
// kernel takes (allocation, copies, a launch with a partial last block, error checks) against a sum
// the host computes exactly the same way (one IEEE float addition per element).
#pragma once

#include <vector>

namespace tttlab::kernels::test {

// Copies a and b (same length) to the device, launches ceil(n / block) blocks of `block` threads,
// copies the sum back. Throws std::runtime_error (naming the failed CUDA call) on any CUDA error
// and std::invalid_argument for mismatched lengths or a block size outside 1..1024.
std::vector<float> vector_add_on_gpu(const std::vector<float>& a, const std::vector<float>& b,
                                     int block);

}  // namespace tttlab::kernels::test
