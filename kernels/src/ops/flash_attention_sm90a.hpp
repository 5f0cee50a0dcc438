// The Hopper (sm_90a, wgmma) forward and backward of the tensor-core softmax attention, private to kernels/src:
// flash_attention.cu dispatches to it (tttlab/kernels/attention.hpp, FlashForwardPath). Compiled
// only where the build targets compute capability 9.0 (kernels/CMakeLists.txt); elsewhere
// flash_attention.cu answers "not available" itself.
#pragma once

#include <cstdint>

struct CUstream_st;

namespace tttlab::kernels::detail {

struct FlashSm90Forward {
  const std::uint16_t *Q, *K, *V;  // [B, T, H·d] bf16
  std::uint16_t* O;
  float* lse;  // optional [B, H, T], natural log
  int B, H, T, d;
  float scale_l2;  // log2(e)/√d
  CUstream_st* stream;
};

// ∂L/∂Q, ∂L/∂K, ∂L/∂V (fp32, overwritten) from the forward's inputs, its lse and δ = rowsum(dO ⊙ O).
struct FlashSm90Backward {
  const std::uint16_t *Q, *K, *V, *dO;  // [B, T, H·d] bf16
  const float *lse, *delta;             // [B, H, T]
  float *dQ, *dK, *dV;                  // [B, T, H·d]
  int B, H, T, d;
  float scale, scale_l2;  // 1/√d, log2(e)/√d
  CUstream_st* stream;
};

// Whether the current device runs these kernels at head dim d: compute capability 9.0, d 64 or 128,
// and their sm_90a images in this executable.
bool flash_sm90_available(int d);
void flash_forward_sm90(const FlashSm90Forward& a);
void flash_backward_sm90(const FlashSm90Backward& a);

}  // namespace tttlab::kernels::detail
