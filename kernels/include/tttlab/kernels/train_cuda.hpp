// tttlab/kernels/train_cuda.hpp — a whole training step of the byte-level model on one GPU.
//
// CudaTrainBackend implements core's TrainBackend (tttlab/train/backend.hpp) for every model kind
// (TTT-Linear, TTT-MLP, linear-attention, softmax-attention) of either backbone. It computes the
// function of Model<float>::train_sequence (model.hpp, layer.hpp, seq/attention_layers.hpp) for all B
// sequences of a batch at once and applies the AdamW update of optim/adamw.hpp on the device:
//
//   embedding → per block [pre-conv (Mamba backbone): RMSNorm, depthwise causal conv, residual;
//   RMSNorm + token mixer, residual; RMSNorm + SwiGLU, residual] → RMSNorm → tied head → softmax
//   cross-entropy, and the backward of all of it, in reverse. The mixer is a TTT layer (projections,
//   conv_q/conv_k or k_proj, RoPE at positions t mod b, η gate and token-index τ, the TTT-Linear or
//   TTT-MLP inner loop, post-norm LayerNorm, GELU gate, o_proj) or an attention baseline (q/k/v
//   projections, RoPE at global positions for softmax attention, causal attention, o_proj).
//
// Pieces: matrix products through cuBLAS (gemm.hpp; tf32, bf16 or fp32 products, fp32 accumulation), the
// element-wise and row kernels of nn_ops.hpp, and the TTT inner-loop kernels of ttt.hpp (dual-form
// forward with checkpoints every `scan_checkpoint_group_size` mini-batches, 1 when that is 0, and the
// second-order backward). Every activation the backward needs is kept on the device (about
// 16·B·T·D + 3·B·T·F floats per block plus the inner-loop checkpoints).
//
// PARAMETERS AND OPTIMISER STATE live on the device in one flat fp32 array each (parameters,
// gradients, first and second moments), with the tensors of Model::for_each_param at fixed offsets
// (the per-head initial states W1[h], b1[h] of a layer side by side, as the inner-loop kernels read
// them). The global gradient norm is summed in double on the device; the step's scalars (learning rate
// from the schedule, bias corrections, clipping scale) are computed on the host exactly as AdamW::step
// computes them, and a non-finite norm skips the update as there. pull_to_host() copies parameters,
// moments and the step count back into the Trainer's Model and AdamW, so checkpoints are the CPU's.
//
// DETERMINISM: no atomics anywhere; the same seed gives the same losses bit for bit on one GPU model.
// NUMERICS: fp32 storage throughout. With GemmPrecision::Fp32 every operation is fp32; with Tf32 (the
// default for training) the matrix products of the projections, the SwiGLU and the head round their
// operands to tf32 (~1e-3 relative per product), and so do the TTT-Linear inner loop's forward (the
// TttLinearForwardVersion::Tf32 and TttBackwardVersion::Tf32 kernels, where they support the
// shape) and the TTT-MLP inner loop (TttMlpForwardVersion::Tf32 where it supports the shape,
// TttMlpBackwardVersion::Tf32); elsewhere the inner loop stays 3xTF32. With Bf16 (mixed precision,
// `tttlab train --precision bf16`) every matrix product of the projections, the SwiGLU and the head
// takes bf16 operands with fp32 accumulation (gemm.hpp), the TTT inner loop runs as with Tf32, and
// everything else stays fp32: parameters (the master weights), gradients, AdamW moments, activations,
// norms, the loss and the inner states. Checkpoints are therefore the same fp32 files. Each operand
// is rounded to bf16 once, not once per product: a bf16 mirror of the parameters (rounded at the start
// of each forward) and bf16 copies of the activations that several products read (3·B·T·D + B·T·F
// values per block, kept from the forward to the backward) cost 2 bytes per parameter and about
// 8·B·T·D + 2·B·T·F bytes per block on top of the fp32 step.
// tests/kernels/test_train_cuda.cpp states the tolerances against the CPU engine.
//
// THREADING: one thread drives a backend (the Trainer's). It uses device `options.device` and its
// own CUDA stream.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tttlab/kernels/gemm.hpp"
#include "tttlab/train/data_parallel.hpp"

namespace tttlab {
struct ModelConfig;
}

namespace tttlab::kernels {

struct CudaTrainOptions {
  int device = 0;                                // CUDA device ordinal
  GemmPrecision gemm = GemmPrecision::Tf32;      // precision of the matrix products
  GemmEngine engine = GemmEngine::Cublas;        // Builtin: our fp32 kernel instead of cuBLAS
  // Forward only (prefill timings, evaluation of long windows): the forward runs exactly as in a step,
  // but the activations of two blocks are allocated and the others take them in turn (block i uses
  // block i mod 2's), since no backward will read them. A batch of B·T tokens then needs about 2/L of
  // the activation memory of a training backend. step(), forward_backward(), forward_backward_shard(),
  // apply_update(), profile_step() and mixer_inputs() throw std::logic_error; time_forward() and
  // evaluate() run as usual.
  bool forward_only = false;
};

// Empty when the backend can train this model; otherwise one line saying what it cannot do (e.g.
// "the GPU's TTT kernels need a mini-batch b <= 64, got 128; use --device cpu").
std::string cuda_train_unsupported(const ModelConfig& model);

// Where one step's device time goes (CUDA events around each phase, read after the step).
struct CudaStepProfile {
  double total_ms = 0;           // forward + backward + optimiser, first launch to last
  double gemm_ms = 0;            // every matrix product (projections, SwiGLU, head, η gate)
  double inner_forward_ms = 0;   // the mixer kernel, forward: the TTT inner loop, or attention
  double inner_backward_ms = 0;  // the mixer kernel, backward (incl. the TTT batch sums)
  double other_ms = 0;           // the rest: norms, convs, RoPE, activations, loss, AdamW, copies, gaps
};

// A Replica (train/data_parallel.hpp) too: forward_backward_shard, gradient_buffer (the flat device
// gradient G) and apply_update are the pieces of step() that a data-parallel step runs with an
// all-reduce between them (kernels/multi_gpu.hpp). Every public call first selects options.device on
// the calling thread, so any thread may drive it (one at a time).
class CudaTrainBackend final : public Replica {
 public:
  // Allocates everything for batches of up to config.batch_size sequences of config.seq_len tokens
  // and uploads the model and the optimiser state. Throws std::invalid_argument when the model is
  // not supported (cuda_train_unsupported), std::runtime_error when the device fails or lacks memory.
  CudaTrainBackend(const TrainBackendContext& ctx, const CudaTrainOptions& options);
  ~CudaTrainBackend() override;

  DeviceKind kind() const override { return DeviceKind::CUDA; }
  std::string describe() const override;
  BackendStep step(const TokenBatch& batch) override;
  std::int64_t step_count() const override;
  EvalReport evaluate(std::span<const std::uint8_t> val, int seq_len, const EvalOptions& options) override;
  void pull_to_host() override;
  void push_from_host() override;

  // Replica: step() is forward_backward_shard(batch, counted targets) + apply_update().
  double forward_backward_shard(const TokenBatch& shard, std::int64_t denominator) override;
  std::span<float> gradient_buffer() override;
  AdamWReport apply_update() override;
  void bind_thread() override;
  // The CUDA stream every launch of this backend goes to (a cudaStream_t), for a communicator to
  // enqueue its collectives behind them.
  void* cuda_stream() const;
  int device() const;

  // For tests and benchmarks: forward + backward only (no update). Returns Σ of the per-target
  // losses; the gradient of loss_sum / counted_targets stays on the device until
  // download_gradients(), which returns it tensor by tensor in Model::for_each_param order (each
  // tensor row-major, as the Map the visitor gets).
  double forward_backward(const TokenBatch& batch);
  std::vector<std::vector<float>> download_gradients() const;
  // For the app's timings (the mini-batch lab): the forward of `batch` without the loss read back,
  // run `warmup` times untimed and then `repeats` times, each timed with CUDA events (ms, device time).
  std::vector<double> time_forward(const TokenBatch& batch, int warmup, int repeats);
  // For the app's hidden-state views on the GPU: what the inner loop of each TTT block reads for the
  // sequences of `batch` (its forward in evaluation mode, the inputs copied back). Per block:
  //   Q, K, V [B·T, H·d] (after the convolutions and RoPE), lambda [B, H, T], tau [b].
  // Empty for the attention baselines.
  struct MixerInputs {
    std::vector<float> Q, K, V, lambda, tau;
  };
  std::vector<MixerInputs> mixer_inputs(const TokenBatch& batch);
  // Bytes of device memory the backend holds: every array it allocates (with bf16 products also the
  // parameters' bf16 mirror, the activations' bf16 shadows and the rounded gradients). Not counted:
  // the scratch the matrix products grow on first use (gemm.cpp) and cuBLAS's own workspace.
  std::size_t device_bytes() const;
  // step() with a timing of its phases. The events between launches cost a little time themselves;
  // use it to see proportions, and plain step() for throughput.
  BackendStep profile_step(const TokenBatch& batch, CudaStepProfile& profile);

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// A factory for Trainer (core's TrainBackendFactory): builds a CudaTrainBackend with `options`.
TrainBackendFactory cuda_train_backend_factory(const CudaTrainOptions& options = {});

}  // namespace tttlab::kernels
