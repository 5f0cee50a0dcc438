// app/lab/evaluation/evaluation_types.hpp — loss by token position for several models (the paper's
// Fig. 2, right) and bits per byte, on the same validation windows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lab/engine/job.hpp"
#include "lab/engine/compute_device.hpp"
#include "lab/primal_dual/primal_dual_types.hpp"  // JobOutcome

namespace tttlab::lab {

struct EvalSettings {
  std::vector<std::string> models = {"shipped", "random:ttt-linear:m:0"};
  std::string data = "brown";
  int seq_len = 256;  // T
  int windows = 16;   // validation windows (the first ones: the same for every model)
  bool operator==(const EvalSettings&) const = default;
};

struct EvalCurve {
  std::string model_id;
  std::string label;
  std::string error;                     // this model could not be evaluated
  std::vector<double> loss_by_position;  // [T] mean nats over the windows done
  double loss = 0;                       // mean nats per byte
  double bpb = 0;                        // bits per byte
  long windows_done = 0;
  double ms_per_window = 0;              // CPU: window_time.median_ms; GPU: eval_ms / windows
  TimingSummary window_time;             // CPU: the forward time of each window, median and min–max
  std::string device;                    // where this curve was computed, in words
  std::string note;                      // why the CPU although a GPU was in use, or ""
  // GPU: the whole evaluation of this model (all windows in launches of several windows, losses and
  // logits downloaded) and, apart, the upload of its weights. One run each: no repetition.
  double load_ms = 0, eval_ms = 0;
};

struct EvaluationView : JobView {
  EvalSettings settings;
  std::string data_description;
  long windows_total = 0;
  std::vector<EvalCurve> curves;
};

struct EvaluationRun {
  EvalSettings settings;
};

}  // namespace tttlab::lab
