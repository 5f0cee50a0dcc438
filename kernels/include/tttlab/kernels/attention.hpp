// tttlab/kernels/attention.hpp — causal multi-head attention on the GPU, the token mixers of the two
// baselines of the TTT paper (softmax attention: the Transformer; linear attention: Theorem 1).
//
// The kernels compute exactly the functions of the CPU engine on projected (and, for softmax, already
// rotated) Q, K, V, for all B·H heads of a batch at once:
//   Softmax  core/include/tttlab/nn/attention.hpp          causal_attention_forward / _backward
//            O_h = softmax_causal(Q_h K_hᵀ/√d) V_h, each row's maximum subtracted before exp
//   Linear   core/include/tttlab/nn/linear_attention.hpp   linear_attention_forward / _backward
//            O_h = tril(Q_h K_hᵀ) V_h (tril keeps the diagonal; no scale, no normalisation)
// The tests (tests/kernels/test_attention.cpp) compare every output with those functions in fp64.
//
// SLIDING WINDOW (softmax, fp32 CUDA-core kernels only; LaCT's local attention, flash-attn's
// window_size = (W − 1, 0)): with `window` W ≥ 1, query t sees only the keys t − W + 1 .. t:
// windowed_attention_forward / _backward of core/include/tttlab/nn/attention.hpp. The kernels skip
// the key tiles wholly outside the band, so a head costs O(T·W·d) instead of O(T²·d). window ≤ 0
// (the default) is no limit, and so is any W ≥ T: both run the causal kernels' arithmetic on the
// same tiles in the same order and give their bits. Linear attention, AttentionPrecision::tf32 and
// the bf16 kernels below have no window: asking for one with them is refused (the bf16 arguments
// have no window field: they are causal).
//
// DESIGN (docs/KERNELS.md, "Attention baselines"): FlashAttention-2 style, fp32 storage (and, for
// AttentionPrecision::tf32, the same structure on the tf32 tensor cores: see AttentionPrecision); the tile
// products on the CUDA cores (fp32 FMAs, float4 shared-memory reads; a 3xTF32 tensor-core version was
// no faster and is retired, docs/KERNELS.md). A block owns a tile of 64 queries of one head, streams
// the 64-key tiles at or below the diagonal (with a window, only those that meet its band) through
// shared memory and keeps the softmax online (running row maximum and sum), so no [T, T] matrix is
// ever stored. The forward saves each row's log-sum-exp; the backward recomputes P tile by
// tile from it, in two kernels: one owns a query tile and writes dQ, the other owns a key tile and
// writes dK and dV. No atomics: every result is the same bit for bit from run to run.
//
// CONVENTIONS. This header includes neither CUDA nor Eigen headers. Every pointer is a DEVICE pointer
// (cudaMalloc), fp32, contiguous; the caller owns all memory. Calls are asynchronous on `stream`
// (nullptr: the legacy default stream), validate their arguments first (std::invalid_argument, one
// line, nothing launched) and throw std::runtime_error naming the CUDA call when a launch fails.
// THREADING: no global state (each launch sets its kernel's shared-memory limit on the current
// device); calls may come from any thread.
//
// LAYOUTS (row-major, as in tttlab/tensor.hpp and ttt.hpp: a token is a row, heads are column blocks):
//   Q, K, V, O, dO, dQ, dK, dV   [B, T, H·d]   element (n, t, h, c) at (n·T + t)·H·d + h·d + c
//   lse, workspace rows          [B, H, T]     row t of head h of sequence n at (n·H + h)·T + t
// SHAPES: any B, H, T ≥ 1 (T need not be a multiple of the tile), 1 ≤ d ≤ 128.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;  // = cudaStream_t, without the CUDA headers

namespace tttlab::kernels {

enum class AttentionKind {
  Softmax,  // causal softmax(Q Kᵀ/√d) V
  Linear,   // tril(Q Kᵀ) V
};

// Which arithmetic the fp32 kernels below use for softmax attention (AttentionKind::Softmax):
//   fp32  the CUDA-core kernels: exact fp32 products and sums (the default).
//   tf32  the tensor cores, mma.sync m16n8k8 .tf32 with fp32 accumulation (compute capability 8.0+):
//         Q, K, V, dO and the softmax's P, Pᵀ, dS, dSᵀ are rounded to tf32 (10-bit mantissa,
//         cvt.rna: relative 2⁻¹¹) where they enter a product; the softmax (maxima, exponentials, sums,
//         the lse) and every accumulation stay fp32. What GemmPrecision::Tf32 asks of a training step.
//         Same tensors, layouts, workspace and determinism as fp32; head_dim 32, 64 or 128 only
//         (attention_tf32_supported) and every pointer 16-byte aligned (cudaMalloc gives 256).
//         Tiles: 128 queries (8 warps) against 64-key tiles in the forward, 64 rows against 64-row
//         tiles in the backward, the streamed tiles halved to 32 rows at d = 128 (fp32 tiles take
//         twice the shared memory of bf16 ones; kernels/src/ops/flash_attention_tf32.cu).
//         Linear attention has no tf32 path: asking for one is refused.
enum class AttentionPrecision { fp32, tf32 };

struct AttentionDims {
  int batch = 1;      // B
  int heads = 1;      // H
  int seq_len = 1;    // T
  int head_dim = 64;  // d
};

// ---- forward --------------------------------------------------------------------------------------
struct AttentionForwardArgs {
  AttentionDims dims;
  AttentionKind kind = AttentionKind::Softmax;
  const float* Q = nullptr;  // [B, T, H·d]
  const float* K = nullptr;  // [B, T, H·d]
  const float* V = nullptr;  // [B, T, H·d]
  float* O = nullptr;        // [B, T, H·d], OVERWRITTEN; must not overlap Q, K, V
  // Softmax only, optional (null: not written, e.g. for evaluation): [B, H, T], OVERWRITTEN with the
  // natural log of Σ_{s ≤ t} exp(q_t·k_s/√d) of every row, which the backward needs. Ignored (may be
  // null) for Linear.
  float* lse = nullptr;
  CUstream_st* stream = nullptr;
  AttentionPrecision precision = AttentionPrecision::fp32;
  // Softmax, fp32 only: the sliding window W (see SLIDING WINDOW above); ≤ 0: plain causal. With
  // W ≥ 1 the lse is that of the row's W keys (or fewer at the start), as the backward needs.
  int window = 0;
};
void attention_forward(const AttentionForwardArgs& args);
// Whether AttentionPrecision::tf32 can run these dims: head_dim ∈ {32, 64, 128}.
bool attention_tf32_supported(const AttentionDims& dims);

// ---- backward -------------------------------------------------------------------------------------
// Bytes of device workspace attention_backward needs (softmax: one float per row, [B, H, T], for
// δ_t = dO_t·O_t; linear: 0).
std::size_t attention_backward_workspace_bytes(const AttentionDims& dims, AttentionKind kind);

struct AttentionBackwardArgs {
  AttentionDims dims;
  AttentionKind kind = AttentionKind::Softmax;
  const float* Q = nullptr;    // [B, T, H·d], as given to the forward
  const float* K = nullptr;    // [B, T, H·d]
  const float* V = nullptr;    // [B, T, H·d]
  const float* O = nullptr;    // softmax: the forward's output [B, T, H·d]; linear: not read
  const float* lse = nullptr;  // softmax: the forward's [B, H, T]; linear: not read
  const float* dO = nullptr;   // ∂L/∂O [B, T, H·d]
  // ∂L/∂Q, ∂L/∂K, ∂L/∂V [B, T, H·d], OVERWRITTEN (attention has no parameters; the CPU functions
  // overwrite too). Pairwise disjoint and disjoint from every input.
  float* dQ = nullptr;
  float* dK = nullptr;
  float* dV = nullptr;
  void* workspace = nullptr;  // attention_backward_workspace_bytes(dims, kind) bytes (null if 0)
  std::size_t workspace_bytes = 0;
  CUstream_st* stream = nullptr;
  AttentionPrecision precision = AttentionPrecision::fp32;  // as the forward's (see above)
  int window = 0;  // as the forward's: the lse must come from a forward with the same window
};
void attention_backward(const AttentionBackwardArgs& args);

// ---- tensor-core softmax attention (bf16) ----------------------------------------------------------
// The causal softmax attention above with bf16 operands on the tensor cores (mma.sync m16n8k16, fp32
// accumulation): the function FlashAttention-2 computes, and what a mixed-precision training step
// runs. Q, K, V, O and dO are bf16 (16-bit patterns, as gemm.hpp's convert_to_bf16 writes them) in the
// layout above; the row statistics (lse, the workspace) and the gradients dQ, dK, dV are fp32. The
// softmax's exponentials are rounded to bf16 where they enter P·V (as FlashAttention does); the row
// sums, the maxima and every accumulation stay fp32. Same checks, stream and threading rules as
// above; pointers must also be 16-byte aligned. Head dims 32, 64 and 128 only
// (flash_attention_supported); any B, H and T ≥ 1. Deterministic: no atomics.
//
// Forward: a block of 8 warps owns 128 queries, Q in registers, 64-key tiles of K and V streamed
// through a cp.async double buffer, the softmax online. Backward: FlashAttention-2's, without atomics:
// δ = rowsum(dO ⊙ O), then one kernel per 64-key tile writing dK, dV and one per 64-query tile
// writing dQ (each recomputes P from Q, K and the lse). On compute capability 9.0 at d = 64 and 128
// the same kernels exist on Hopper's warpgroup products (wgmma) with tiles brought by the tensor
// memory accelerator: one warpgroup per 64 rows, the forward software-pipelined. They compute the
// same functions with the same rounding points; `automatic` picks them where they can run.
bool flash_attention_supported(const AttentionDims& dims);  // head_dim ∈ {32, 64, 128}
// Whether the wgmma kernels can run here: a device of compute capability 9.0, head_dim 64 or 128,
// and a build that compiled them (CMAKE_CUDA_ARCHITECTURES with 90).
bool flash_attention_wgmma_available(const AttentionDims& dims);
// Which kernels run: `automatic` takes wgmma where flash_attention_wgmma_available, else mma.sync;
// asking for wgmma where it is not available is refused.
enum class FlashPath { automatic, mma_sync, wgmma };

struct FlashAttentionForwardArgs {
  AttentionDims dims;
  const std::uint16_t* Q = nullptr;  // [B, T, H·d] bf16
  const std::uint16_t* K = nullptr;
  const std::uint16_t* V = nullptr;
  std::uint16_t* O = nullptr;  // [B, T, H·d] bf16, OVERWRITTEN; must not overlap Q, K, V
  float* lse = nullptr;        // optional [B, H, T], natural log, for the backward
  CUstream_st* stream = nullptr;
  FlashPath path = FlashPath::automatic;
};
void flash_attention_forward(const FlashAttentionForwardArgs& args);

// Bytes of workspace flash_attention_backward needs: δ, one float per row ([B, H, T]).
std::size_t flash_attention_backward_workspace_bytes(const AttentionDims& dims);

struct FlashAttentionBackwardArgs {
  AttentionDims dims;
  const std::uint16_t* Q = nullptr;   // [B, T, H·d] bf16, as given to the forward
  const std::uint16_t* K = nullptr;
  const std::uint16_t* V = nullptr;
  const std::uint16_t* O = nullptr;   // the forward's output
  const std::uint16_t* dO = nullptr;  // ∂L/∂O, bf16
  const float* lse = nullptr;         // the forward's [B, H, T]
  float* dQ = nullptr;                // [B, T, H·d] fp32, OVERWRITTEN; disjoint from everything else
  float* dK = nullptr;
  float* dV = nullptr;
  void* workspace = nullptr;  // flash_attention_backward_workspace_bytes(dims) bytes
  std::size_t workspace_bytes = 0;
  CUstream_st* stream = nullptr;
  FlashPath path = FlashPath::automatic;
};
void flash_attention_backward(const FlashAttentionBackwardArgs& args);

// ---- chunked linear attention on the tensor cores (bf16) ------------------------------------------
// The causal linear attention above (O = tril(Q Kᵀ) V) in the chunk form, with bf16 operands on the
// tensor cores (mma.sync m16n8k16, fp32 accumulation): what flash-linear-attention's
// chunk_linear_attn computes (scale 1, no normaliser), and what a mixed-precision training step
// runs. Q, K, V, O and dO are bf16 (16-bit patterns, as gemm.hpp's convert_to_bf16 writes them) in
// the layout above; dQ, dK, dV are fp32. Same checks, stream and threading rules as above; every
// pointer 16-byte aligned. Head dims 32, 64 and 128 only (chunked_linear_attention_supported); any
// B, H and T ≥ 1 (T need not be a multiple of the chunk). Deterministic: no atomics.
//
// Chunks of C = 64 tokens; S_c = Σ_{chunks before c} K_c'ᵀ V_c' and G_c = Σ_{chunks after c}
// Q_c'ᵀ dO_c' ([d, d] per head):
//   O_c  = Q_c S_c + tril(Q_c K_cᵀ) V_c
//   dQ_c = dO_c S_cᵀ + tril(dO_c V_cᵀ) K_c,  dK_c = V_c G_cᵀ + tril(dO_c V_cᵀ)ᵀ Q_c,
//   dV_c = K_c G_c + tril(Q_c K_cᵀ)ᵀ dO_c.
// Forward, d = 64 and 128: one block per (head, 32 columns of V) walks the head's chunks in order
// with its slice of S in fp32 registers and writes O chunk by chunk (no state leaves the chip).
// Forward at d = 32, and backward: a state kernel walks the chunks of a head in order (S; in reverse
// for G) with the running sum in fp32 and writes every chunk's prefix state, rounded to bf16 (the
// operand the chunk products need), to the workspace; then one block per chunk computes O (or dQ,
// dK, dV) from its tiles and its states. The backward recomputes S rather than keeping the
// forward's. What is rounded: the states where they enter a product and the masked Q Kᵀ, dO Vᵀ tiles
// to bf16 (relative 2⁻⁹), O to bf16 on output; the running sums never.
//
// WORKSPACE: [B·H, ⌈T/64⌉, d, d] bf16 states, once for the forward, twice (S and G) for the backward;
// the forward's contents are not needed afterwards (the backward's workspace may be the same memory).
// The forward at d = 64, 128 leaves its workspace untouched; it is still required (one contract for
// every d).
bool chunked_linear_attention_supported(const AttentionDims& dims);  // head_dim ∈ {32, 64, 128}

std::size_t chunked_linear_attention_forward_workspace_bytes(const AttentionDims& dims);
std::size_t chunked_linear_attention_backward_workspace_bytes(const AttentionDims& dims);

struct ChunkedLinearAttentionForwardArgs {
  AttentionDims dims;
  const std::uint16_t* Q = nullptr;  // [B, T, H·d] bf16
  const std::uint16_t* K = nullptr;
  const std::uint16_t* V = nullptr;
  std::uint16_t* O = nullptr;  // [B, T, H·d] bf16, OVERWRITTEN; must not overlap Q, K, V
  void* workspace = nullptr;   // chunked_linear_attention_forward_workspace_bytes(dims) bytes
  std::size_t workspace_bytes = 0;
  CUstream_st* stream = nullptr;
};
void chunked_linear_attention_forward(const ChunkedLinearAttentionForwardArgs& args);

struct ChunkedLinearAttentionBackwardArgs {
  AttentionDims dims;
  const std::uint16_t* Q = nullptr;   // [B, T, H·d] bf16, as given to the forward
  const std::uint16_t* K = nullptr;
  const std::uint16_t* V = nullptr;
  const std::uint16_t* dO = nullptr;  // ∂L/∂O, bf16
  float* dQ = nullptr;  // [B, T, H·d] fp32, OVERWRITTEN; disjoint from everything else
  float* dK = nullptr;
  float* dV = nullptr;
  void* workspace = nullptr;  // chunked_linear_attention_backward_workspace_bytes(dims) bytes
  std::size_t workspace_bytes = 0;
  CUstream_st* stream = nullptr;
};
void chunked_linear_attention_backward(const ChunkedLinearAttentionBackwardArgs& args);

}  // namespace tttlab::kernels
