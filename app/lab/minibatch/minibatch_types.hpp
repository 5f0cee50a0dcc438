// app/lab/minibatch/minibatch_types.hpp — the mini-batch lab: the same model with inner mini-batch size
// b ∈ {1, 2, 4, …, T}, its loss and its measured forward time (the paper's Fig. 8).
//
// Two modes:
//   Evaluate  the chosen model's weights run with each b (model_library.hpp derive_model): what b does
//             to a model at test time. Fast.
//   Train     for each b, a small model trained from the same seed on the same batches, then
//             evaluated: the paper's experiment, at toy scale. Slow (cancellable).
// CPU forward times are single-threaded wall times of Model::eval_sequence (dual form) of one window,
// summarised over the evaluation windows (median, min–max). When the panels compute on a GPU, each b
// is also run there: the loss over the same windows (all at once) and the forward time of one window
// (CUDA events, median and min–max of 20 runs after 3 warm-up runs), so both curves can be drawn.
// The GPU kernels take b ≤ 64: larger b stay on the CPU, and the point says so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lab/engine/job.hpp"
#include "lab/engine/compute_device.hpp"
#include "lab/primal_dual/primal_dual_types.hpp"  // JobOutcome

namespace tttlab::lab {

enum class SweepMode { Evaluate, Train };

struct SweepSettings {
  SweepMode mode = SweepMode::Evaluate;
  std::string model_id = "shipped";  // Evaluate
  std::string layer = "ttt-linear";  // Train: the layer of the small models
  std::string data = "brown";
  int seq_len = 128;   // T; b runs over 1, 2, 4, …, T
  int windows = 8;     // evaluation windows per b
  int train_steps = 60;  // Train: optimiser steps per b
  std::uint64_t seed = 0;
  bool operator==(const SweepSettings&) const = default;
};

struct SweepPoint {
  int b = 0;
  double loss = 0, bpb = 0;            // mean over the windows done (on the GPU where gpu_loss)
  double ms_per_forward = 0;           // CPU: the median over the windows (cpu_time.median_ms)
  TimingSummary cpu_time;              // CPU forward of one window, over the windows
  bool gpu = false;                    // this b also ran on the GPU
  bool gpu_loss = false;               // loss, bpb and loss_by_position are the GPU's
  double cpu_loss = 0;                 // the CPU's loss over the same windows (agreement check)
  TimingSummary gpu_time;              // GPU forward of one window
  std::string gpu_note;                // why this b did not run on the GPU (a GPU was in use)
  std::vector<double> loss_by_position;  // [T] nats
  long windows_done = 0;
  std::vector<double> train_loss;      // Train mode: the loss of every step
};

struct SweepResult {
  SweepSettings settings;
  std::string label;                   // what was swept, for the legend
  std::string cpu_device;              // the CPU, in words
  std::string gpu_device;              // the GPU that also ran the sweep, or "" (CPU only)
  std::string gpu_note;                // why no GPU, when one was asked for
  std::vector<SweepPoint> points;      // in order of b; the last one may be in progress
  bool complete = false;
};

struct MiniBatchView : JobView {
  SweepSettings settings;
  std::string data_description;
  std::shared_ptr<const SweepResult> current;
  std::shared_ptr<const SweepResult> previous;  // the sweep before: drawn as a ghost
};

struct SweepRun {
  SweepSettings settings;
  // false: cancel the sweep in progress and start this one. true: start this one after it (a state
  // file restores its ghost this way: the ghost's sweep first, then the current one).
  bool after_current = false;
};

}  // namespace tttlab::lab
