// TTTLAB_CUDA_CHECK(call): run a CUDA runtime call and turn a failure into a std::runtime_error
// that names the call, the error and the place. For code that has already established that a
// device is present (the kernels and their tests); device discovery itself reports statuses
// instead (cuda_device.cpp). Private to kernels/ and tests/kernels/; includes the CUDA runtime
// header.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace tttlab::kernels::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file,
                                          int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call +
                           " failed: " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) +
                           ")");
}

}  // namespace tttlab::kernels::detail

#define TTTLAB_CUDA_CHECK(call)                                                                 \
  do {                                                                                          \
    const cudaError_t tttlab_cuda_err_ = (call);                                                \
    if (tttlab_cuda_err_ != cudaSuccess)                                                        \
      ::tttlab::kernels::detail::throw_cuda_error(tttlab_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)
