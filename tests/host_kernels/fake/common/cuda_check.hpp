// The host stand-in of kernels/src/common/cuda_check.hpp (see fake/cuda_runtime_api.h).
#pragma once
#include <cuda_runtime_api.h>
#include <stdexcept>
#define TTTLAB_CUDA_CHECK(call)                                      \
  do {                                                               \
    if ((call) != cudaSuccess) throw std::runtime_error(#call);      \
  } while (0)
