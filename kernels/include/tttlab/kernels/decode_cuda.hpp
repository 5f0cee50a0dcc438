// tttlab/kernels/decode_cuda.hpp — whole-model token decoding on the GPU (fp32; batch 1, or B
// sequences in lockstep).
//
// CudaDecoder is the TokenDecoder (tttlab/model/decoder.hpp) of TTT-Linear, TTT-MLP, linear-attention
// and softmax-attention (Transformer) models of both backbones and of Mamba-2, DeltaNet, Gated
// DeltaNet, Titans and LaCT models (Transformer backbone). It computes the function of the CPU engine's Model::forward fed one token at a time
// (docs/MATH.md §8; the primal inner step of §6): embedding, per block [pre-conv,] RMSNorm, the
// mixer, SwiGLU, final RMSNorm and the tied head. The mixer is the TTT layer (projections,
// [conv_q/conv_k,] RoPE at position t mod b, λ, the primal inner step of ttt_linear_decode_step /
// ttt_mlp_decode_step, post-norm, [gate,] o_proj), Mamba-2's recurrent form (§8.8: in_proj, the
// causal conv with its history, silu, softplus(dt), the per-head state S_h [P, N] in fp32, the gated
// RMSNorm, out_proj), DeltaNet's and Gated DeltaNet's primal form (§11.2, §11.8: q, k, v, β [, the
// decay's and the gate's projections] in one product, the three short convolutions with their
// history, silu, L2-normalised q̂ (with 1/√d) and k̂, β = sigmoid, α = exp(−exp(A_log)·softplus(·)),
// the per-head state S_h [d, d] in fp32 updated S ← αS − β k̂ᵀ(k̂ αS − v) and read o = q̂ S, the
// per-head RMSNorm [⊙ silu(gate)], o_proj), Titans' step (§11.9: titans_step of its memory, momentum
// and the mini-batch's start per head, in DeltaNet's block), linear attention (S ← S + kᵀv, z = q S
// per head, no RoPE), LaCT's stream (§11.10: the sliding-window
// attention over a ring of W cached rows, the SwiGLU fast weights read per token and updated from
// the held chunk every C tokens, no Muon) or softmax attention (tttlab/seq/attention_layers.hpp: q, k, v, RoPE at the
// GLOBAL position t, k and v appended to the block's KV cache, softmax(q·Kᵀ/√d)·V over the cache,
// o_proj). A prompt is prefilled through the same per-token step (exact; the prefix is never run
// again). docs/KERNELS.md ("Decoding on the GPU") has the design and its measured speed.
//
// KV CACHE: softmax-attention models keep, per block, K and V of every token fed, fp32, [H, cap, d]
// each (per sequence: [B, H, cap, d]), allocated at construction for cap =
// CudaDecoderOptions::max_context tokens (2·L·D·4 bytes per token and sequence: 72 KiB for the 125m
// preset). feed() refuses (std::length_error, nothing run) a feed that would pass cap; the CPU
// decoder grows its cache and has no such limit.
//
// BATCH: with CudaDecoderOptions::batch = B > 1 the decoder holds B independent sequences that step
// together: one step takes B tokens (one per sequence) and gives B logit rows (feed_batch), or B
// greedy next tokens chosen on the device (feed_greedy). Every state, history and KV cache has a
// leading sequence dimension and every product runs for the B rows at once, by one of two paths
// (CudaDecoderOptions::products): Cublas (the default) runs each as one fp32 cuBLAS GEMM [B, K]·[K, N]
// (no TF32: the math is the batch-1 decoder's fp32, only the order of the sums differs), so a
// sequence's logits agree with a batch-1 decoder's to fp32 rounding; Exact runs the batch-1 kernel's
// split-k product with each weight tile loaded once per 16 sequences, and sequence s's logits are
// bitwise those of a batch-1 decoder fed its tokens (the same sums in the same order). The
// TokenDecoder interface (feed) is batch 1 only.
//
// Results agree with the CPU engine to fp32 rounding (the sums run in another order), not bit for
// bit; tests/kernels/test_decode_cuda.cpp states the tolerances. Runs are deterministic: no atomics.
//
// OWNERSHIP: the constructor copies the model's parameters to the device (rearranged: concatenated
// projections, the transposed embedding for the head), so the decoder does not read the Model after
// construction; callers should still keep the Model alive as decoder.hpp asks. The decoder owns all
// its device memory, one CUDA stream and its CUDA graphs; everything is released by the destructor.
// THREADING: use one decoder from one thread at a time. It makes its device current (cudaSetDevice)
// on construction and in each call.
//
// This header includes neither CUDA nor Eigen headers.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tttlab/model/config.hpp"
#include "tttlab/model/decoder.hpp"

namespace tttlab {
template <class S>
class Model;
}

namespace tttlab::kernels {

// How a decoder of batch B > 1 runs its matrix products (batch 1 always runs the exact split-k
// matrix-vector product). docs/KERNELS.md ("Batched decoding") has both and their speed.
enum class DecodeProducts {
  Cublas,  // fp32 cuBLAS GEMMs (CUBLAS_COMPUTE_32F): the GPU's fp32 rate; rounding-level agreement
  Exact,   // the batched split-k product: each sequence bitwise its batch-1 decoder, ~4-6 TFLOP/s
};
// "cublas" / "exact".
const char* to_string(DecodeProducts p);

struct CudaDecoderOptions {
  int device = 0;           // CUDA device ordinal
  // One token's step is ~9 kernels per block (Mamba-2: 8, DeltaNet: 7, attention: 9); at batch 1
  // they are short, so launching them one by one costs more than running them. With cuda_graphs the
  // step is captured once per mini-batch position (b graphs for TTT; one for Mamba-2, DeltaNet and
  // attention, which reads the token's position from device memory; made on first use) and replayed with one launch. Off:
  // plain launches (for debugging and for the bench's comparison).
  bool cuda_graphs = true;
  // Softmax-attention models: the KV cache's capacity in tokens (prompt and generated tokens
  // together), at most k_max_positions. 0: max(32768, max_position_embeddings), or fewer (a
  // multiple of 256, at least 256) where that would take more than half of the device's free memory.
  // A value given is checked against the free memory before allocating (std::runtime_error saying
  // how much it needs). Other models ignore it.
  long max_context = 0;
  // Softmax-attention models: the blocks the context is split over per head (flash-decoding;
  // docs/KERNELS.md). 0: about four blocks per SM at a full cache, at most one per 64 cached tokens.
  // Tests set it to exercise many rows per split.
  int attention_splits = 0;
  // Sequences decoded in lockstep, 1..k_decode_max_batch. Everything that grows with it (states,
  // histories, the KV cache, the products' scratch) is checked against the free device memory before
  // allocating (std::runtime_error with the GiB needed).
  int batch = 1;
  // The products' path at batch > 1 (ignored at batch 1). Cublas falls back to a built-in fp32
  // kernel where libcublas cannot be loaded (describe() says which ran).
  DecodeProducts products = DecodeProducts::Cublas;
};

inline constexpr int k_decode_max_batch = 4096;

// Device memory of a CudaDecoder for `batch` sequences and a KV cache of `context` tokens (softmax
// attention; others ignore it) on `device`, as its constructor counts it: the weights (each
// parameter once, and the transposed, padded embedding of the head) and what grows with the batch.
// A decoder also needs ~256 MiB besides (the CUDA context's and graphs' share). The count is the
// exact products'; the cuBLAS products' (the default at batch > 1) take less: no split-k partials,
// the SwiGLU's hidden vectors [B, F] and a 32 MiB cuBLAS workspace (inside the 256 MiB). Throws
// std::invalid_argument for an unsupported model or a batch or context below 1.
struct CudaDecodeMemory {
  double weight_bytes = 0, batch_bytes = 0;
};
CudaDecodeMemory cuda_decode_memory(const ModelConfig& config, int batch, long context,
                                    int device = 0);

// Why the GPU decoder cannot run this model, in one line ("" when it can): linear attention with a
// head dim above 128, LaCT with Muon or an attention head dim other than 8, 16, 32, 64 or 128 or with 2 d_f + 2 d_h over
// kLactDecodeMaxSmemFloats, Mamba-2 on the Mamba-style backbone, softmax attention with a head dim other than 8, 16, 32, 64 or
// 128, DeltaNet, Gated DeltaNet and Titans with a head dim above 128, and for TTT layers
// mini_batch_size > 64, a head dim outside 16..128 or odd, conv_kernel > 16.
std::string cuda_decode_unsupported(const ModelConfig& config);

class CudaDecoder final : public TokenDecoder {
 public:
  // Uploads the model. Throws std::invalid_argument (one line) for an unsupported model
  // (cuda_decode_unsupported) or a batch outside 1..k_decode_max_batch, and std::runtime_error
  // naming the CUDA call when the device fails or the GiB needed when the memory does not suffice.
  explicit CudaDecoder(const Model<float>& model, const CudaDecoderOptions& options = {});
  ~CudaDecoder() override;
  CudaDecoder(const CudaDecoder&) = delete;
  CudaDecoder& operator=(const CudaDecoder&) = delete;

  DeviceKind kind() const override { return DeviceKind::CUDA; }
  // "CUDA: NVIDIA H100 80GB HBM3, sm_90 (decode: CUDA graphs)"; a batch above 1 adds ", batch 16"
  // and its products (", exact products" or ", cuBLAS 13.1.0, fp32 GEMMs"), attention models
  // ", KV cache 32768 tokens" inside the brackets.
  std::string describe() const override;
  // The KV cache's capacity in tokens (softmax attention), −1 for models without a cache.
  long context_capacity() const;
  // Runs the per-token step for each token on the decoder's stream; only the last token's logits
  // [vocab_size] come back to the host (the call returns when they are there). Throws
  // std::length_error, before running anything, when the tokens do not fit in the KV cache.
  // Batch 1 only (std::invalid_argument otherwise).
  void feed(std::span<const int> tokens, std::vector<float>& logits) override;
  // Every sequence's step position (the tokens fed to each).
  long position() const override;

  // The batch B (CudaDecoderOptions::batch).
  int batch() const;
  // n = tokens.size() / B steps, step i's token for sequence s at tokens[i·B + s]; the last step's
  // logits come back, [B, vocab_size] row-major. Throws std::invalid_argument for a size that is no
  // positive multiple of B or a token outside the vocabulary, std::length_error when the steps do
  // not fit in the KV cache (nothing run in either case). At B = 1 it is feed().
  void feed_batch(std::span<const int> tokens, std::vector<float>& logits);
  // The same steps; only each sequence's greedy next token (the argmax of its last logits, the
  // first of equal maxima, as std::max_element) comes back, chosen on the device: [B].
  void feed_greedy(std::span<const int> tokens, std::vector<int>& next);
  // BENCHMARKS ONLY: moves every sequence to `position` (≥ position(), ≤ the KV cache's capacity)
  // without running the steps in between. The states stay as they are and the skipped cache rows
  // hold zeros (cleared at construction), so the decoder no longer computes the model's function of
  // its tokens; a step's work and memory traffic are what they would be after `position` real
  // tokens (attention reads rows 0..t whatever they hold; TTT's, Mamba-2's and DeltaNet's step does
  // not depend on t beyond t mod b). docs/KERNELS.md ("Decoding on the GPU") says how the bench uses it.
  void skip_for_bench(long position);

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// A DecoderFactory making CudaDecoders on `device` (tttlab/model/decoder.hpp); max_context as
// CudaDecoderOptions's.
DecoderFactory cuda_decoder_factory(int device = 0, bool cuda_graphs = true, long max_context = 0);

}  // namespace tttlab::kernels
