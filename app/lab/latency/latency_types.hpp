// app/lab/latency/latency_types.hpp — the latency lab: time per token against the context length T,
// for prefill and for decode, one curve per sequence layer (the paper's Fig. 3, at the lab's size).
//
// Every layer runs in a model of the chosen preset ("tiny" by default) with random weights from a
// fixed seed: the time per token does not depend on the weights' values. The TTT layers sit in the
// Mamba-style backbone (the lab's default for TTT), softmax attention, linear attention and Mamba-2 in
// the Transformer block, as `tttlab bench --latency` places them. For T = 64, 128, 256, … up to
// max_context (and max_context itself when it is not on that ladder), each point measures:
//
//   prefill  Model::eval_sequence over one window of T random tokens on the engine thread (Eigen,
//            1 thread, wall time): per-token time = forward time / T, the median, quartiles and
//            min–max over `repeats` forwards;
//   decode   the CPU streaming decoder (make_cpu_decoder, what `tttlab generate` runs) after a context
//            of T tokens: `decode_tokens` tokens fed one at a time, each timed; per-token time = the
//            median, quartiles and min–max of those steps. One decoder per layer walks the
//            context from one T to the next, so the context is never run twice.
//
// When the panels compute on a GPU (the Compute menu), each point is also measured there: prefill by
// GpuModel::time_forward over a batch of kGpuPrefillBatch sequences of T tokens (CUDA events, the
// median, quartiles and min–max of kGpuRepeats forwards after kGpuWarmup untimed ones; per-token time = forward
// time / (B·T)), decode by the GPU's streaming decoder (GpuCompute::decoder) as on the CPU. A layer
// the GPU cannot run keeps the CPU's numbers only, and its curve says why.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lab/engine/compute_device.hpp"
#include "lab/engine/job.hpp"

namespace tttlab::lab {

inline constexpr int kLatencyMinContext = 64;  // the first T of every run
inline constexpr int kGpuPrefillBatch = 16;    // the paper's prefill batch
inline constexpr int kGpuWarmup = 3, kGpuRepeats = 20;

struct LatencySettings {
  // Which layers, as `--layer` spells them; each at most once.
  std::vector<std::string> layers = {"ttt-linear", "ttt-mlp", "softmax-attention",
                                     "linear-attention", "mamba2"};
  std::string preset = "tiny";  // "tiny" or "small" (ModelConfig::preset)
  int max_context = 2048;       // T runs 64, 128, … up to this, in [64, 16384]
  int repeats = 3;              // CPU prefill forwards per point, in [1, 50]
  int decode_tokens = 16;       // CPU and GPU decode steps timed per point, in [1, 63]
  std::uint64_t seed = 0;       // the weights and the tokens
  bool operator==(const LatencySettings&) const = default;
};

// Throws std::invalid_argument naming the first setting out of range (the state-file reader and the
// module share it, so a scene the reader accepts always computes).
void validate(const LatencySettings& s);
// 64, 128, 256, …, and max_context itself when it is not a power of two times 64.
std::vector<int> latency_contexts(int max_context);

// Per-token times of one measurement, in microseconds. samples = 0: not measured.
struct PerTokenTime {
  double median_us = 0, min_us = 0, max_us = 0;
  double q1_us = 0, q3_us = 0;  // the quartiles: the view draws them around the median
  int samples = 0;              // timed runs (prefill) or timed steps (decode)
  int warmup = 0;               // untimed runs before them
  bool measured() const { return samples > 0; }
};
// The per-token times of runs that each took `ms` milliseconds for `tokens` tokens.
PerTokenTime per_token(const std::vector<double>& ms, double tokens, int warmup);

struct LatencyPoint {
  int T = 0;
  PerTokenTime prefill, decode;  // CPU
  // At the largest T only (what the growth measures read): the same layer at T = 64, each run
  // alternating with one of this point's. For prefill the same T tokens read as T/64 windows of 64
  // (per token: divided by T), for decode a step of a fresh decoder after 64 tokens. A change of load
  // on the machine during the run slows a point and its reference alike, so the growth ratios divide
  // by these rather than by the first point's times, measured seconds or minutes before. Not
  // measured at the other T; when the largest T is 64, the point's own times.
  PerTokenTime prefill_ref, decode_ref;
  PerTokenTime gpu_prefill, gpu_decode;  // GPU (not measured without one)
};

struct LatencyCurve {
  std::string layer;                              // "ttt-linear", as in the settings
  std::string label;                              // "TTT-Linear"
  long params = 0;                                // of its model
  std::vector<LatencyPoint> points;               // in order of T; the last one may be in progress
  std::string gpu_prefill_note, gpu_decode_note;  // why this layer did not run on the GPU
};

struct LatencyView : JobView {
  LatencySettings settings;
  std::vector<int> contexts;         // the T of the run
  std::vector<LatencyCurve> curves;  // in the settings' order of layers
  std::string model;                 // "tiny preset (D = 128, 4 blocks, 4 heads), random weights"
  std::string cpu_device;            // the CPU, in words
  std::string gpu_device;            // the GPU that also ran the points, or "" (CPU only)
  std::string gpu_note;              // why no GPU, when one was asked for
  bool complete() const { return outcome == JobOutcome::Done; }
};

// Measure for these settings (cancels the run in progress).
struct LatencyRun {
  LatencySettings settings;
};

// "TTT-Linear", "Transformer (softmax attention)", … for a layer's id.
std::string latency_layer_label(const std::string& layer);

}  // namespace tttlab::lab
