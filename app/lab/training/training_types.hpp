// app/lab/training/training_types.hpp — training runs driven from the Training panel.
//
// A run is a tttlab::Trainer (core/include/tttlab/train/trainer.hpp) stepping on its own worker
// thread, owned by the training module; the worker checks for pause, stop and save requests between
// optimiser steps (a step is never cut in half). A run directory has the layout `tttlab train`
// writes (metrics.jsonl, checkpoints, `latest`), so runs move freely between the app and the CLI:
// a GUI run can be resumed with `tttlab train --resume`, and a CLI run opened in the app.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lab/engine/series.hpp"
#include "tttlab/device.hpp"
#include "tttlab/train/backend.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab::lab {

// The next run's settings: the run settings `tttlab train` takes too (tttlab/train/trainer.hpp) with
// the app's defaults, and the app's own choices beside them: a model by preset, layer and backbone,
// where it computes, and where its directory goes.
struct TrainSettings : RunSettings {
  TrainSettings();  // the app's defaults: a short run a student can watch (training_settings.cpp)

  std::string layer = "ttt-linear";  // ttt-linear, ttt-mlp, linear-attention, softmax-attention
  bool mamba = true;                 // backbone m (true) or t
  std::string preset = "tiny";       // tiny, small, 125m
  int mini_batch = 16;               // b
  double base_lr = 0.0;              // η_base; 0: the official default (default_ttt_base_lr)
  DeviceRequest device = DeviceRequest::Auto;  // TrainDevices below
  int gpus = 1;                      // GPUs of this machine for one run: 1 = one device as `device` says;
                                     // N > 1 = data-parallel over N GPUs (device auto or cuda; 1 … 1024)
  std::string runs_dir = "runs";     // run directories go here: <runs_dir>/<name>

  // Where the run asks to compute: the GPU's products in tf32, as `tttlab train`'s default.
  TrainDeviceRequest device_request() const;

  bool operator==(const TrainSettings&) const = default;
};

// Where runs compute. `tttlab gui` fills `choose` in a build with the CUDA kernels
// (app/cli/train_device.hpp), so this library never links them itself; left empty, every run trains
// on the CPU engine and a run that asks for "cuda" or for several GPUs fails with a message.
//   choose(request, note): the request of TrainSettings::device_request() (gpus 0: one device; N > 1:
//   a data-parallel backend over N GPUs, train/data_parallel.hpp; never with the CPU).
//   Returns the Trainer's backend factory (empty: the CPU) and writes to `note` why the CPU was chosen
//   under "auto", if it was. `note` must outlive the Trainer's construction. Throws with an actionable
//   message when "cuda" or the GPUs cannot be had.
// Called on the run's worker thread.
struct TrainDevices {
  std::function<TrainBackendFactory(const TrainDeviceRequest& request, std::string& note)> choose;
};

enum class RunState { Starting, Running, Paused, Stopping, Stopped, Finished, Failed, Loaded };
const char* to_string(RunState s);

struct StepPoint {
  long step = 0;
  double loss = 0;        // nats per byte
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  double elapsed_s = 0;   // wall time since the run (or its resumption) started
  bool skipped = false;
};

struct EvalPoint {
  long step = 0;
  double loss = 0;  // nats per byte
  double bpb = 0;
};

struct RunView {
  int id = 0;
  std::string name;
  std::string dir;
  TrainSettings settings;
  RunState state = RunState::Starting;
  std::string message;            // failure, or what just happened ("checkpoint saved at step 300")
  long steps_done = 0, steps_total = 0;
  double tokens_per_s = 0;        // over the last few steps
  // A data-parallel run (settings.gpus > 1): each GPU's own tokens/s, by rank (GPU 0, 1, …): the
  // tokens of its share of the batch over the wall time of its forward + backward + all-reduce +
  // update (StepReport::ranks), summed over the last few steps. Empty for a single-device run and
  // before the first step.
  std::vector<double> gpu_tokens_per_s;
  double seconds_left = 0;        // estimate
  long params = 0;
  std::string model_summary;
  std::string data_description;
  std::string device;             // where it computes: "CPU (Eigen 3.4, 2 threads)", "CUDA: NVIDIA …"
  std::string checkpoint;         // the newest saved checkpoint folder
  std::string model_id;           // its id in the model library ("" before the first save)
  std::shared_ptr<const Series<StepPoint>> steps;
  std::vector<EvalPoint> evals;
  bool active() const { return state == RunState::Starting || state == RunState::Running || state == RunState::Stopping; }
  bool live() const { return active() || state == RunState::Paused; }
};

struct TrainingView {
  std::vector<std::shared_ptr<const RunView>> runs;
  std::uint64_t event = 0;  // increases with every refused command
  std::string error;        // why the last command was refused
};

struct TrainStart {
  TrainSettings settings;
  std::string name;  // empty: a name from the settings ("ttt-linear-m-b16-1")
  // Posted by a lesson's scene right after the CurvesRun that follows it (curves_types.hpp): when the
  // inner-loss curves have already followed a run of exactly these settings to its last checkpoint,
  // their module answers this command (it comes before the training module in the engine), so a
  // lesson whose predictions all read that run trains it once. Otherwise it starts a run as usual.
  bool lesson = false;
};

enum class TrainOp { Pause, Resume, Stop, Save, Remove };
struct TrainControl {
  int run = 0;
  TrainOp op = TrainOp::Pause;
};

// Open a run directory: its metrics join the plots; with `resume`, training continues from its
// latest checkpoint (paused until resumed).
struct TrainOpen {
  std::string dir;
  bool resume = false;
};

}  // namespace tttlab::lab
