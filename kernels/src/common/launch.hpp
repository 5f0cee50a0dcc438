// The opt-in every kernel with a large shared-memory tile needs before its launch. Private to
// kernels/src; includes the CUDA runtime header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/cuda_check.hpp"

namespace tttlab::kernels::detail {

// Lets `kernel` launch with `smem` bytes of dynamic shared memory (CUDA wants the opt-in above
// 48 KiB) and asks for all of L1 as shared memory, so that the blocks per SM are set by the
// registers and the tiles, not by the carveout.
template <class Kernel>
void allow_shared_memory(Kernel kernel, std::size_t smem) {
  const void* fn = reinterpret_cast<const void*>(kernel);
  TTTLAB_CUDA_CHECK(
      cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  TTTLAB_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout,
                                         int(cudaSharedmemCarveoutMaxShared)));
}

}  // namespace tttlab::kernels::detail
