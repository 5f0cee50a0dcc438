// bf16 scalars as 16-bit patterns, the storage type of the mixed-precision buffers (std::uint16_t):
// the rounding every bf16-writing kernel uses (to nearest, ties to even, as convert_to_bf16) and the
// exact widening back to fp32. Private to kernels/src.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tttlab::kernels::detail {

// A float as the bit pattern of its bf16 rounding (to nearest, ties to even).
__device__ __forceinline__ std::uint16_t bf16_bits(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// The fp32 value of a bf16 bit pattern (exact).
__device__ __forceinline__ float bf16_value(std::uint16_t b) {
  return __uint_as_float(std::uint32_t(b) << 16);
}

}  // namespace tttlab::kernels::detail
