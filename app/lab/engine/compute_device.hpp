// app/lab/engine/compute_device.hpp — which device the panels compute on, and the GPU services they use.
//
// The user picks the device once for the whole app (the Compute menu; `auto` by default):
//   auto  the GPU when the build has the CUDA kernels and one is present, else the CPU engine
//   cpu   the CPU engine (Eigen) everywhere
//   gpu   the GPU; where there is none, the panels say so and compute nothing on it
// Panels that compute (primal vs dual, the mini-batch lab, the latency lab, evaluation, generation,
// training) ask the shared ComputeChoice for the device when a job starts, and their views say which
// device computed what they show. Work the GPU kernels cannot do (a mini-batch b > 64, a model the GPU engine does not
// support) stays on the CPU, and the view says that too.
//
// app/gui/ never links the CUDA kernels itself. The composition root (`tttlab gui`, or a GPU test)
// hands make_engine_modules() a ComputeDevices whose `gpu` factory builds the GpuCompute of
// app/compute/cuda_compute.hpp; left empty (a build without CUDA), every panel computes on the CPU.
//
// THREADING: ComputeChoice and everything it hands out belong to the engine thread (modules hold a
// shared_ptr to it, as to the ModelLibrary). The GPU objects use their own CUDA stream.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lab/training/training_types.hpp"  // TrainDevices
#include "tttlab/device.hpp"
#include "tttlab/model/decoder.hpp"
#include "tttlab/train/backend.hpp"

namespace tttlab {
template <class S>
class Model;
struct ModelConfig;
struct TokenBatch;
}  // namespace tttlab

namespace tttlab::lab {

// ---- timings ---------------------------------------------------------------------------------------
// Every time a panel shows is the median of stated repetitions, with their spread; warm-up runs are
// excluded (and the panel says how many there were).
struct TimingSummary {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int repeats = 0;  // timed runs
  int warmup = 0;   // untimed runs before them
};
TimingSummary summarize_ms(const std::vector<double>& ms, int warmup);
// The CPU as the lab's views time it: they compute on the engine thread alone, and Eigen runs
// single-threaded there, so the line names 1 thread whatever the machine has: "CPU (Eigen 3.4, 1 thread)".
std::string engine_thread_cpu();
// "1.23 ms (1.20–1.31, median of 9)".
std::string format_timing(const TimingSummary& t);
// Wall milliseconds since t0 (the engine's CPU timings).
inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// ---- the GPU services ------------------------------------------------------------------------------

// The heads of one TTT layer over one sequence, in the CUDA kernels' layouts (tttlab/kernels/ttt.hpp)
// with B = 1, as host fp32 arrays.
struct GpuHeads {
  bool mlp = false;  // TTT-MLP (hidden width 4d) or TTT-Linear
  int heads = 1;     // H
  int T = 1;
  int d = 16;
  int mini_batch = 16;  // b
  bool layer_norm = true, residual = true, bias = true;
  float ln_eps = 1e-6f;
  std::vector<float> Q, K, V;             // [T, H·d]: token t, head h, feature c at t·H·d + h·d + c
  std::vector<float> lambda;              // [H, T]
  std::vector<float> tau;                 // [b]
  std::vector<float> ln_weight, ln_bias;  // [H, d]
  // The initial state. Linear: W1 [H, d, d], b1 [H, d]. MLP: W1 [H, d, 4d], b1 [H, 4d], W2 [H, 4d, d],
  // b2 [H, d]. Biases may be empty when `bias` is off.
  std::vector<float> W1, b1, W2, b2;
};

// The precision of the GPU's dual form: fp32 (3xTF32 tensor-core products, fp32-level accuracy), or
// tf32 (one tf32 product per term, ~1e-3 relative; TTT-Linear with b = 16 only).
enum class GpuMath { Fp32, Tf32 };
const char* to_string(GpuMath m);

// A kernel's output and its timed runs (CUDA events around each launch; the upload of the inputs and
// the download of the output are not timed).
struct GpuRun {
  std::vector<float> O;    // [T, H·d], the last run's output
  std::vector<double> ms;  // every timed run
  int warmup = 0;
  std::string kernel;      // what ran, in words ("TTT-Linear dual form, 3xTF32 tensor cores")
};

// What the inner loop of every TTT block reads for a batch of sequences, computed by the GPU's forward
// (the model's expensive part: embedding, every block before, projections, convolutions, RoPE, η).
// Per block: Q, K, V [B·T, H·d] (sequence n's token t at row n·T + t), lambda [B, H, T], tau [b].
struct GpuLayerInputs {
  std::vector<float> Q, K, V, lambda, tau;
};

// A language model uploaded to the GPU for evaluation (the GPU training engine's forward).
class GpuModel {
 public:
  virtual ~GpuModel() = default;
  // As TrainBackend::evaluate (loss, accuracy, loss by position, progress): windows of `seq_len`
  // tokens of `val`, up to the batch size given at load time per launch.
  virtual EvalReport evaluate(std::span<const std::uint8_t> val, int seq_len, const EvalOptions& options) = 0;
  // The forward over `batch` (no loss download), timed `repeats` times after `warmup` untimed runs.
  virtual std::vector<double> time_forward(const TokenBatch& batch, int warmup, int repeats) = 0;
  // Per block, what its inner loop reads for the sequences of `batch` (empty for attention models).
  virtual std::vector<GpuLayerInputs> layer_inputs(const TokenBatch& batch) = 0;
};

class GpuCompute {
 public:
  virtual ~GpuCompute() = default;
  // "NVIDIA H100 80GB HBM3" and the longer line of DeviceInfo::describe().
  virtual const DeviceInfo& device() const = 0;

  // Empty when ttt_forward can run these heads, else why not in one line (b > 64, d out of range, …).
  virtual std::string ttt_forward_unsupported(const GpuHeads& heads) const = 0;
  // The dual-form forward of every head at once. With Tf32 where the tf32 kernel cannot run the shape,
  // the fp32 kernel runs and GpuRun::kernel says so.
  virtual GpuRun ttt_forward(const GpuHeads& heads, GpuMath math, int warmup, int repeats) = 0;
  // Causal linear attention O = tril(QKᵀ)V of H heads (Q, K, V [T, H·d] as in GpuHeads): Theorem 1's
  // other side, for reductions whose single mini-batch (b = T) is longer than the TTT kernels allow.
  virtual GpuRun linear_attention(const std::vector<float>& Q, const std::vector<float>& K,
                                  const std::vector<float>& V, int heads, int T, int d, int warmup,
                                  int repeats) = 0;

  // Empty when load_model can run this model, else why not in one line.
  virtual std::string model_unsupported(const ModelConfig& config) const = 0;
  // Uploads `model` for batches of up to `batch` sequences of `seq_len` tokens. The model is read
  // during the call only. Throws std::runtime_error when the device lacks memory.
  virtual std::unique_ptr<GpuModel> load_model(const Model<float>& model, int batch, int seq_len) = 0;

  // Empty when decoder() can decode with this model (TTT-Linear and TTT-MLP), else why not.
  virtual std::string decode_unsupported(const ModelConfig& config) const = 0;
  // A batch-1 streaming decoder on the GPU (tttlab/model/decoder.hpp). Its hidden states stay on the
  // device. `model` must outlive it.
  virtual std::unique_ptr<TokenDecoder> decoder(const Model<float>& model) = 0;
};

// What the composition root provides (see the top of this file).
struct ComputeDevices {
  TrainDevices train;  // where training runs compute (training_types.hpp)
  // Builds the GPU services on the first GPU, or returns null and says why in `why_not`.
  std::function<std::shared_ptr<GpuCompute>(std::string& why_not)> gpu;
};

// ---- the user's choice -----------------------------------------------------------------------------

enum class ComputeRequest { Auto, CPU, GPU };
const char* to_string(ComputeRequest r);  // "auto" / "cpu" / "gpu"
// "auto" | "cpu" | "gpu" (also "cuda"); std::invalid_argument otherwise.
ComputeRequest parse_compute_request(const std::string& text);

// Where a job computes: gpu is null for the CPU.
struct ComputeTarget {
  std::shared_ptr<GpuCompute> gpu;
  std::string label;  // "GPU: NVIDIA H100 80GB HBM3" / "CPU (Eigen 3.4, 2 threads)"
  std::string note;   // why the CPU although the GPU was asked for ("" otherwise, also under auto)
};

// The status bar's view of it.
struct ComputeView {
  ComputeRequest request = ComputeRequest::Auto;
  bool gpu_build = false;     // the build has the CUDA kernels
  bool gpu_available = false; // and a GPU was found (known once it was first asked for)
  std::string active;         // ComputeTarget::label of the current choice
  std::string note;           // why there is no GPU ("" when there is one)
  std::string cpu;            // the CPU, in words
};

struct SetComputeDevice {
  ComputeRequest request = ComputeRequest::Auto;
};

class ComputeChoice {
 public:
  explicit ComputeChoice(ComputeDevices devices = {});
  void set_request(ComputeRequest r) { m_request = r; }
  ComputeRequest request() const { return m_request; }
  const ComputeDevices& devices() const { return m_devices; }
  // The device for a job started now. The first call that may use the GPU initialises it (up to a
  // few hundred ms with a driver); the result is kept for the process.
  ComputeTarget target();
  ComputeView view();

 private:
  std::shared_ptr<GpuCompute> gpu(std::string& why_not);
  ComputeDevices m_devices;
  ComputeRequest m_request = ComputeRequest::Auto;
  bool m_probed = false;
  std::shared_ptr<GpuCompute> m_gpu;
  std::string m_why_not;
};

}  // namespace tttlab::lab
