// The tf32 tensor-core causal softmax attention (flash_attention_tf32.cu), private to kernels/src:
// attention_forward / attention_backward (attention.cu) call it for AttentionPrecision::tf32 after
// checking their arguments, and the backward's δ = rowsum(dO ⊙ O) is attention.cu's kernel.
#pragma once

struct CUstream_st;

namespace tttlab::kernels::detail {

// Pointers are device fp32 in attention.hpp's layouts, 16-byte aligned; head_dim ∈ {32, 64, 128}.
struct FlashTf32Args {
  const float *Q = nullptr, *K = nullptr, *V = nullptr, *dO = nullptr;
  const float *lse_in = nullptr, *delta = nullptr;  // backward: the forward's lse and δ, [B, H, T]
  float *O = nullptr, *lse = nullptr;               // forward outputs (lse may be null)
  float *dQ = nullptr, *dK = nullptr, *dV = nullptr;  // backward outputs
  int B = 1, H = 1, T = 1, d = 64;
  CUstream_st* stream = nullptr;
};
void flash_tf32_forward(const FlashTf32Args& a);
void flash_tf32_backward(const FlashTf32Args& a);

}  // namespace tttlab::kernels::detail
