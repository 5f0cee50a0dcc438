// tttlab/kernels/delta_rule_chunked.hpp — DeltaNet and Gated DeltaNet in the chunked (UT) form of
// docs/MATH.md §11.3 on the tensor cores: bf16 operands, fp32 accumulation and state. It computes
// what the recurrent kernels of matrix_rules.hpp compute for these two rules from S_0 = 0 (o_t = q_t S_t,
// read after the write), and is tested against the CPU's matrix_rule_primal in fp64.
//
// With chunks of C = 64 tokens, per chunk and head (g_i the chunk's cumulative log α, γ_i = e^{g_i},
// Γ_ij = e^{g_i − g_j}; γ = Γ = 1 for DeltaNet):
//   T̃ = (I + tril(diag(β)(K Kᵀ ⊙ Γ), −1))⁻¹ diag(β),   W = T̃ diag(γ) K,   Ũ = T̃ V
//   U = Ũ − W S_p,   O = diag(γ) Q S_p + ((Q Kᵀ) ⊙ Γ, lower incl.) U,
//   S_next = γ_L S_p + Kᵀ diag(γ_L / γ) U.
// Two kernels:
//   ut     one block per (chunk, head), all in parallel: A = the strictly lower diag(β)(K Kᵀ ⊙ Γ) on the
//          tensor cores, then the unit lower-triangular system for [W | Ũ] by forward substitution in
//          fp32, a column per thread; W and Ũ are written as bf16 (the operands the next kernel's
//          products take), g as fp32.
//   walk   one block per (head, 32 value columns) walks the head's chunks in order with its columns of
//          S in fp32 mma accumulators (no state leaves the chip), as the fused chunked linear
//          attention does (attention.hpp), with the extra product W S_p before the chunk's outputs.
// What is rounded to bf16: W, Ũ, U (and K·γ_L/γ) where they enter products, the state's copy that
// enters Q S_p and W S_p, the masked Q Kᵀ tile, and O on output; the running state never.
//
// CONVENTIONS. Every pointer is a DEVICE pointer, 16-byte aligned; R = B·T rows, sequence b's token t
// at row b·T + t:
//   Q, K, V, O    [B, T, H·d] bf16, head h at columns h·d … h·d + d − 1; K L2-normalised (not checked:
//                 device data), as the layers give it
//   beta          [R, H] fp32, β_t ∈ [0, 1]
//   log_alpha     [R, H] fp32, log α_t ≤ 0 and finite (Gated DeltaNet; null for DeltaNet)
// Head dims 64 and 128 (chunked_delta_rule_supported); any B, H and T ≥ 1 (T need not be a multiple of
// the chunk). Calls are asynchronous on `stream`, validate their arguments first
// (std::invalid_argument, one line, nothing launched) and throw std::runtime_error when a launch fails.
// Deterministic: no atomics.
//
// WORKSPACE (chunked_delta_rule_forward_workspace_bytes): W and Ũ ([R, H·d] bf16 each) and g
// ([B·H, ⌈T/64⌉·64] fp32).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tttlab/kernels/attention.hpp"

struct CUstream_st;

namespace tttlab::kernels {

bool chunked_delta_rule_supported(const AttentionDims& dims);  // head_dim ∈ {64, 128}

std::size_t chunked_delta_rule_forward_workspace_bytes(const AttentionDims& dims);

struct ChunkedDeltaRuleForwardArgs {
  AttentionDims dims;
  const std::uint16_t* Q = nullptr;  // [B, T, H·d] bf16
  const std::uint16_t* K = nullptr;  // L2-normalised rows per head
  const std::uint16_t* V = nullptr;
  const float* beta = nullptr;       // [R, H]
  const float* log_alpha = nullptr;  // [R, H]: Gated DeltaNet; null: DeltaNet
  std::uint16_t* O = nullptr;        // [B, T, H·d] bf16, OVERWRITTEN; must not overlap the inputs
  void* workspace = nullptr;         // chunked_delta_rule_forward_workspace_bytes(dims) bytes
  std::size_t workspace_bytes = 0;   // (unused when keep is given)
  void* keep = nullptr;              // optional, head_dim 64: chunked_delta_rule_keep_bytes(dims) bytes
  std::size_t keep_bytes = 0;        // OVERWRITTEN with what the backward reads (KEEPING, below)
  CUstream_st* stream = nullptr;
};
void chunked_delta_rule_forward(const ChunkedDeltaRuleForwardArgs& args);

// BACKWARD (head_dim 64): the gradients of a loss L(O) with respect to Q, K, V, β and (Gated DeltaNet)
// log α, given dO = ∂L/∂O. It recomputes the forward's W, Ũ, U and the states before each chunk (or reads
// them from what the forward kept: KEEPING, below), then walks the
// chunks in reverse for G = ∂L/∂S after each chunk, and finally one block per chunk forms dQ, dK, dV
// and dβ (through the UT transform: T̃ = N diag(β), N = (I + A)⁻¹, formed in fp32 by 16 × 16 blocks,
// W and Ũ then taken from it on the tensor cores with N's scaled copies split into two bf16 parts).
// What is rounded to bf16: the forward's as above, dU, G and N and the intermediates dW, dN, Nᵀ dN and
// E = diag(β) dA where they enter products; the sums are fp32.
// WORKSPACE (chunked_delta_rule_backward_workspace_bytes): W, Ũ, U, dU ([R, H·d] bf16 each), the
// states and their gradients ([B·H, ⌈T/64⌉, d, d] bf16 each), N ([B·H, ⌈T/64⌉, 64, 64] bf16), g.
//
// KEEPING (head_dim 64). The backward's first two kernels recompute what the forward computed. A training
// step that can hold it passes the forward `keep`: the forward then runs those two kernels itself (the
// ut kernel's backward instance, [W | Ũ] from N on the tensor cores rather than by substitution, so O
// differs from the plain forward's in its last bits, within the same bounds) and leaves W, Ũ, U, the
// states before each chunk, N and g there. The backward given that memory as `kept` reads them and
// skips its first two kernels; its results are bit-identical to the recomputing backward's. It costs
// chunked_delta_rule_keep_bytes(dims), about 6d + 2d²/64 + 132 bytes per token and head (644 at
// d = 64), held from the forward to the backward, against FLA's choice of keeping only A and
// recomputing the rest. The kept memory must come from a forward on the same inputs and dims: it is
// device data and is not checked.
bool chunked_delta_rule_backward_supported(const AttentionDims& dims);  // head_dim == 64

std::size_t chunked_delta_rule_keep_bytes(const AttentionDims& dims);  // head_dim 64
// With kept = true the workspace holds dU and the state gradients only.
std::size_t chunked_delta_rule_backward_workspace_bytes(const AttentionDims& dims,
                                                        bool kept = false);

struct ChunkedDeltaRuleBackwardArgs {
  AttentionDims dims;
  const std::uint16_t* Q = nullptr;  // [B, T, H·d] bf16, as given to the forward
  const std::uint16_t* K = nullptr;
  const std::uint16_t* V = nullptr;
  const float* beta = nullptr;       // [R, H]
  const float* log_alpha = nullptr;  // [R, H]: Gated DeltaNet; null: DeltaNet
  const std::uint16_t* dO = nullptr;  // ∂L/∂O [B, T, H·d] bf16
  float* dQ = nullptr;               // [B, T, H·d] fp32, OVERWRITTEN; disjoint from everything else
  float* dK = nullptr;
  float* dV = nullptr;
  float* dbeta = nullptr;            // [R, H] fp32, OVERWRITTEN
  float* dlog_alpha = nullptr;       // [R, H] fp32, OVERWRITTEN; given exactly with log_alpha
  void* workspace = nullptr;  // chunked_delta_rule_backward_workspace_bytes(dims, kept != null) bytes
  std::size_t workspace_bytes = 0;
  const void* kept = nullptr;  // optional: a forward's `keep` on the same inputs (KEEPING, above)
  std::size_t kept_bytes = 0;
  CUstream_st* stream = nullptr;
};
void chunked_delta_rule_backward(const ChunkedDeltaRuleBackwardArgs& args);

}  // namespace tttlab::kernels
