// tttlab/kernels/decode_cuda.hpp — whole-model token decoding on the GPU (batch 1, fp32).
//
// CudaDecoder is the TokenDecoder (tttlab/model/decoder.hpp) of TTT-Linear and TTT-MLP models of both
// backbones and of Mamba-2 models (Transformer backbone). It computes the function of the CPU
// engine's Model::forward fed one token at a time (docs/MATH.md §8; the primal inner step of §6):
// embedding, per block [pre-conv,] RMSNorm, the mixer, SwiGLU, final RMSNorm and the tied head. The
// mixer is either the TTT layer (projections, [conv_q/conv_k,] RoPE at position t mod b, λ, the
// primal inner step of ttt_linear_decode_step / ttt_mlp_decode_step, post-norm, [gate,] o_proj) or
// Mamba-2's recurrent form (§8.8: in_proj, the causal conv with its history, silu, softplus(dt), the
// per-head state S_h [P, N] in fp32, the gated RMSNorm, out_proj). A prompt is prefilled through the
// same per-token step (exact; the prefix is never run again). docs/KERNELS.md ("Decoding on the
// GPU") has the design and its measured speed.
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

struct CudaDecoderOptions {
  int device = 0;           // CUDA device ordinal
  // One token's step is ~9 kernels per block (Mamba-2: 8); at batch 1 they are short, so launching
  // them one by one costs more than running them. With cuda_graphs the step is captured once per
  // mini-batch position (b graphs for TTT, one for Mamba-2, made on first use) and replayed with one
  // launch. Off: plain launches (for debugging and for the bench's comparison).
  bool cuda_graphs = true;
};

// Why the GPU decoder cannot run this model, in one line ("" when it can): attention baselines,
// Mamba-2 on the Mamba-style backbone, and for TTT layers mini_batch_size > 64, a head dim outside
// 16..128 or odd, conv_kernel > 16.
std::string cuda_decode_unsupported(const ModelConfig& config);

class CudaDecoder final : public TokenDecoder {
 public:
  // Uploads the model. Throws std::invalid_argument (one line) for an unsupported model
  // (cuda_decode_unsupported) and std::runtime_error naming the CUDA call when the device fails.
  explicit CudaDecoder(const Model<float>& model, const CudaDecoderOptions& options = {});
  ~CudaDecoder() override;
  CudaDecoder(const CudaDecoder&) = delete;
  CudaDecoder& operator=(const CudaDecoder&) = delete;

  DeviceKind kind() const override { return DeviceKind::CUDA; }
  // "CUDA: NVIDIA H100 80GB HBM3, sm_90 (decode: CUDA graphs)".
  std::string describe() const override;
  // Runs the per-token step for each token on the decoder's stream; only the last token's logits
  // [vocab_size] come back to the host (the call returns when they are there).
  void feed(std::span<const int> tokens, std::vector<float>& logits) override;
  long position() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// A DecoderFactory making CudaDecoders on `device` (tttlab/model/decoder.hpp).
DecoderFactory cuda_decoder_factory(int device = 0, bool cuda_graphs = true);

}  // namespace tttlab::kernels
