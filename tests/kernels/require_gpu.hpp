// The GPU tests' one "is there a GPU" check: TTTLAB_REQUIRE_GPU() skips the running test, with the
// reason in the skip message ("no CUDA device: ..."), where no CUDA device is usable. Every test
// that launches a kernel starts with it (or its fixture's SetUp does), so that on a machine without
// a GPU the suite reports each of them Skipped and why, while the tests of the no-GPU path still run.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tttlab/kernels/cuda_device.hpp"

namespace tttlab::kernels::test {

// Why the GPU tests cannot run here ("no CUDA device: " and the device probe's message), or an empty
// string where a CUDA device is usable.
inline std::string gpu_missing_reason() {
  const CudaQuery q = query_cuda_devices();
  return q.status == CudaStatus::Ok ? std::string() : "no CUDA device: " + q.message;
}

}  // namespace tttlab::kernels::test

// GTEST_SKIP returns from the calling function, so this is a macro: use it in a TEST body or in a
// fixture's SetUp.
#define TTTLAB_REQUIRE_GPU()                                                                   \
  do {                                                                                         \
    if (const std::string why_ = ::tttlab::kernels::test::gpu_missing_reason(); !why_.empty()) \
      GTEST_SKIP() << why_;                                                                    \
  } while (0)
