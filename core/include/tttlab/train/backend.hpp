// tttlab/train/backend.hpp — where a training step runs: the CPU engine or a GPU.
//
// The Trainer (trainer.hpp) owns the host copy of the model (Model<float>), the optimiser (AdamW with
// its schedule and state), the data and the sampler. A TrainBackend computes on them:
//
//   step(batch)     forward + backward over the B sequences of the batch (the gradient of the batch's
//                   mean loss) and one AdamW update (optim/adamw.hpp semantics: global-norm clipping,
//                   bias correction, decoupled decay, a non-finite gradient skips the update).
//   evaluate(...)   the validation loss of the current parameters over fixed windows.
//   pull_to_host()  makes the host model and the host optimiser state current (a GPU backend keeps
//                   both on the device between steps and copies them back here; the CPU backend
//                   works on the host objects directly and does nothing).
//   push_from_host() the reverse, after the host copies were changed (a resumed checkpoint).
//
// The CPU backend (make_cpu_train_backend) is the engine of core/: data-parallel worker threads, one
// gradient buffer per thread, summed in thread order, so results depend only on the seed and the
// thread count. The CUDA backend lives in kernels/ (tttlab/kernels/train_cuda.hpp); core/ knows it
// only through this interface, and the program's composition root (app/cli/cmd_train.cpp) hands the
// Trainer a TrainBackendFactory for it. Both produce the same checkpoints (the Trainer writes them
// from the host copies after pull_to_host()), so a run started on one device resumes on the other.
//
// OWNERSHIP: the backend keeps references to the Trainer's model and optimiser, which outlive it.
// THREADING: driven by the Trainer's one thread; a backend may start its own workers inside a call.
//
// This header includes neither Eigen nor CUDA headers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tttlab/data/batches.hpp"
#include "tttlab/device.hpp"
#include "tttlab/optim/adamw.hpp"

namespace tttlab {

template <class S>
class Model;
struct TrainConfig;

struct EvalReport {
  long step = 0;
  double loss = 0;            // nats per byte
  double bpb = 0;             // bits per byte = loss / ln 2
  long targets = 0;           // scored bytes
  double accuracy = 0;        // next-byte accuracy: share of scored targets whose most likely byte is right
  bool accuracy_measured = false;  // false: the backend did not compute `accuracy`
  std::vector<double> loss_by_position;  // [T] mean loss at each position in the window
};

// How to evaluate: how many windows, progress, and optionally every target's own loss.
struct EvalOptions {
  int max_windows = 0;  // the first N windows; 0: all
  // Called as windows are scored (done, total), from the calling thread or a worker thread, never
  // from two at once.
  std::function<void(std::int64_t done, std::int64_t total)> progress;
  // When set: resized to windows × seq_len, and filled with every target's loss (nats) in window
  // order, target t of window w at w·seq_len + t.
  std::vector<float>* target_losses = nullptr;
};

// What one rank (a GPU of a data-parallel run, train/data_parallel.hpp) did in the last step, for
// per-GPU throughput. A single-device backend reports none.
struct RankStepTiming {
  int rank = 0;            // global rank
  long tokens = 0;         // input tokens of its share of the batch
  double seconds = 0;      // its forward + backward + gradient all-reduce + update, wall time
};

// What one training step on a backend produced.
struct BackendStep {
  double loss_sum = 0;  // Σ of the per-target losses over the counted targets (nats)
  AdamWReport optim;    // the update, as AdamW::step reports it
};

class TrainBackend {
 public:
  virtual ~TrainBackend() = default;

  virtual DeviceKind kind() const = 0;
  // One line for people: "CPU (Eigen 3.4, 16 threads)", "CUDA: NVIDIA H100 ..., cuBLAS tf32 GEMMs".
  virtual std::string describe() const = 0;

  // Forward + backward over every row of `batch` and one optimiser update. The loss is normalised by
  // batch.counted_targets() (the batch mean). Throws std::invalid_argument for tokens outside the
  // vocabulary, std::runtime_error for device failures.
  virtual BackendStep step(const TokenBatch& batch) = 0;
  // Updates applied so far (the optimiser's step count; skipped updates do not count).
  virtual std::int64_t step_count() const = 0;

  // The loss and next-byte accuracy of the current parameters over the windows of `val`
  // (SequentialWindows of seq_len tokens, the first options.max_windows of them). EvalReport::step is
  // left 0.
  virtual EvalReport evaluate(std::span<const std::uint8_t> val, int seq_len, const EvalOptions& options) = 0;

  virtual void pull_to_host() = 0;
  virtual void push_from_host() = 0;

  // Per-rank timings of the last step() (data-parallel backends); empty for one device.
  virtual std::vector<RankStepTiming> rank_timings() const { return {}; }
  // Whether any process of the job passes true (a data-parallel job of several processes agrees on
  // stopping with it; every process must call it at the same point). One device: `flag`.
  virtual bool any_rank(bool flag) { return flag; }
};

// What a backend is built from: the run's settings and the Trainer's host objects.
struct TrainBackendContext {
  const TrainConfig* config = nullptr;
  Model<float>* model = nullptr;
  AdamW<float>* optim = nullptr;
  int threads = 1;  // CPU worker threads (the CPU backend; others may ignore it)
};

using TrainBackendFactory = std::function<std::unique_ptr<TrainBackend>(const TrainBackendContext&)>;

// The CPU engine (see above).
std::unique_ptr<TrainBackend> make_cpu_train_backend(const TrainBackendContext& ctx);

// The CPU engine's forward + backward over rows [first, last) of `batch`, one after the other on the
// calling thread: adds (1/denominator)·∇(Σ of their counted per-target losses) into `grad` (a model of
// zeros_like shape) and returns that Σ (nats). The CPU backend's threads and the CPU replica of a
// data-parallel run (data_parallel.hpp) both train their rows with it.
double cpu_train_rows(const Model<float>& model, const TokenBatch& batch, int first, int last, long denominator,
                      Model<float>& grad);

}  // namespace tttlab
