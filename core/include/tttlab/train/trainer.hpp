// tttlab/train/trainer.hpp — training and evaluating a byte-level model, on the CPU or a GPU.
//
// The Trainer owns the model (float), the optimiser (AdamW + warmup-cosine, tttlab/optim), the data
// and the batch sampler. step() runs one optimiser step on one batch of B random windows of T + 1
// bytes on its backend (backend.hpp). The default backend is the CPU engine: the B sequences are
// split over `threads` worker threads in fixed contiguous slices, each thread accumulates its gradient
// in its own model-shaped buffer, and the buffers are summed in thread order. Results are therefore
// deterministic for a given seed AND thread count (floating-point sums in another order round
// differently). A GPU backend (a TrainBackendFactory from kernels/, tttlab/kernels/train_cuda.hpp)
// keeps the parameters and the optimiser state on the device between steps; model() is then the host
// copy, made current by sync_to_host() (save() does it), and checkpoints are the same files.
//
// Checkpoints (save/resume) make a run directory (TrainingSession, session.hpp, adds metrics.jsonl):
//   RUN/train_config.json           the run's settings (TrainConfig::to_json)
//   RUN/latest                      the name of the newest complete checkpoint, e.g. "step-0000500"
//   RUN/step-0000500/config.json          model config (official TTTConfig keys)
//   RUN/step-0000500/model.safetensors    weights in the official PyTorch layout (checkpoint.hpp)
//   RUN/step-0000500/train_state.safetensors  AdamW moments and step, sampler state, configs
// Every file is written atomically and `latest` is updated last, so a crash at any moment leaves the
// previous checkpoint intact. Resuming restores the parameters, moments, step and sampler state bit for
// bit: the continued loss curve is identical to an uninterrupted run (with the same thread count).
//
// Threading: the Trainer itself is driven by one thread (the CLI's main thread or the GUI's engine
// thread); it starts its own workers inside step() and evaluate().
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/train/backend.hpp"

namespace tttlab {

inline constexpr int k_max_batch_size = 1 << 16;
inline constexpr int k_max_threads = 1 << 12;

// A run's settings apart from the model: what `tttlab train` reads from its flags and the Training panel
// from its state file; TrainConfig adds the model and what the run records about itself. The defaults
// are the command line's; the app sets its own where it makes its settings (lab/training).
struct RunSettings {
  // "brown": data/brown/{train,val}.txt; "mqar" / "copy": synthetic long-context tasks generated from
  // the seed (tttlab/data/synthetic.hpp; only the answers are scored); else a UTF-8 text file.
  std::string data = "brown";
  std::string data_dir = "data/brown";
  long steps = 1000;
  int batch_size = 16;             // B sequences per step
  int seq_len = 256;               // T; train_config() reads 0 as the model's max_position_embeddings
  double lr = 3e-3;                // peak learning rate
  double warmup_fraction = 0.1;    // linear warmup over this share of the steps
  double end_lr = 1e-5;            // cosine decay target
  double weight_decay = 0.1;
  double clip_norm = 1.0;
  std::uint64_t seed = 0;
  int threads = 0;                 // 0: the machine's hardware threads
  long checkpoint_every = 0;       // 0: only at the end
  long eval_every = 0;             // 0: only at the end
  int eval_windows = 64;           // validation windows of T tokens per evaluation (0: all)
  // Divergence (a non-finite loss or gradient; the policy is in session.hpp): after max_bad_steps
  // consecutive skipped steps, "rollback" restarts from the last checkpoint with the learning rate
  // times rollback_lr_factor (at most max_rollbacks times), "stop" stops the run with an error.
  int max_bad_steps = 5;
  std::string on_diverge = "rollback";
  int max_rollbacks = 3;
  double rollback_lr_factor = 0.5;

  bool operator==(const RunSettings&) const = default;
};

struct TrainConfig : RunSettings {
  ModelConfig model;
  // The SHA-256 of the training bytes (train then validation split), recorded when the run starts and
  // checked when it resumes, so that a resumed run trains on the same data or says why not. The
  // Trainer also makes `data` (a file) and `data_dir` absolute, so that resuming from another
  // working directory finds the same files. Empty: not recorded (the synthetic tasks, older runs).
  std::string data_sha256;
  // Multiplies the whole learning-rate schedule (lr and end_lr). 1 unless rollbacks lowered it; saved
  // with the run, so a resumed run keeps the lowered rate.
  double lr_scale = 1.0;

  // Throws std::invalid_argument naming the field: the model's validate(), non-positive steps, batch or
  // rate, seq_len < 2, and sizes above the bounds (batch_size, seq_len ≤ k_max_positions, threads).
  void validate() const;
  std::string to_json() const;
  // `source` names the text in errors (a file, or the checkpoint that embeds it).
  static TrainConfig from_json(const std::string& text, const std::string& source = "train_config.json");
};

// The one way a front end turns its model choice and run settings into a run's configuration:
// seq_len 0 becomes the model's max_position_embeddings, the model's positions become seq_len, and
// the result is validated (std::invalid_argument naming the field, as TrainConfig::validate()).
TrainConfig train_config(const ModelConfig& model, const RunSettings& run);

struct StepReport {
  long step = 0;              // steps done after this one
  double loss = 0;            // mean training loss of the batch (nats per byte)
  double lr = 0;
  double grad_norm = 0;       // before clipping
  bool skipped = false;       // non-finite gradient: the update was skipped
  double seconds = 0;         // wall time of this step
  long tokens = 0;            // tokens in the batch
  std::vector<RankStepTiming> ranks;  // per GPU, for a data-parallel run (train/data_parallel.hpp); else empty
};

// The bytes a run trains and validates on.
struct TextData {
  std::vector<std::uint8_t> train, val;  // empty for the synthetic tasks
  std::string description;
  std::string synthetic;                  // "", "mqar" or "copy"
  // "brown" (data_dir/train.txt + val.txt), "mqar" / "copy", or a file: its first 95% train, the
  // last 5% validation.
  static TextData load(const TrainConfig& cfg);
};

class Trainer {
 public:
  // `backend` empty: the CPU engine. Otherwise it is called once, here, with the new model and
  // optimiser (a GPU backend uploads them).
  Trainer(TrainConfig cfg, TextData data, const TrainBackendFactory& backend = {});
  ~Trainer();
  // Reopens RUN at its latest checkpoint (the data is reloaded from the saved TrainConfig unless given),
  // on the given backend (empty: the CPU). Checkpoints do not record the device: a run saved by one
  // backend resumes on any other.
  // `adjust` (optional) changes the saved config before the trainer is built (a rollback lowers
  // lr_scale); the model, optimiser and sampler states are the checkpoint's.
  static std::unique_ptr<Trainer> resume(const std::filesystem::path& run_dir,
                                         const TrainBackendFactory& backend = {},
                                         const std::function<void(TrainConfig&)>& adjust = {});

  StepReport step();
  // Evaluation and saving run on the backend and only read the run's state; they are const although
  // a GPU backend uses its device buffers for them.
  EvalReport evaluate(int max_windows) const;  // 0: every validation window
  // The same over the windows of seq_len tokens of any text (not only the run's validation split),
  // on the backend. Throws std::runtime_error when the text is shorter than one window.
  EvalReport evaluate_text(std::span<const std::uint8_t> text, const EvalOptions& options) const;
  // Writes a checkpoint of the current step into run_dir (see above; run_dir.hpp says which directories
  // it accepts and what it never touches) and prunes older checkpoints of this run, keeping the `keep_newest`
  // newest (0: keep every checkpoint, e.g. to ship a run's checkpoints for replay).
  // Refuses (std::runtime_error, nothing written) when a parameter or optimiser moment is not finite,
  // or when the model's outputs are not (outputs_finite).
  void save(const std::filesystem::path& run_dir, std::size_t keep_newest = 2) const;
  // The host model's losses on the start of the validation data (a window of at most 256 bytes) and on
  // check_finite_forward's probe are all finite. Call sync_to_host() first with a GPU backend.
  bool outputs_finite() const;
  // The first parameter or optimiser moment holding a NaN or an infinity (or a negative second
  // moment), named; nothing when the whole state is finite.
  std::optional<std::string> non_finite_state() const;
  // Makes model() (and the host optimiser state) current. Needed only with a GPU backend, before
  // reading model() directly; a no-op on the CPU.
  void sync_to_host() const;
  // The reverse: after model() was changed directly (weights copied in from a checkpoint), makes the
  // backend compute with it. A no-op on the CPU.
  void sync_from_host();
  // The backend's device in words ("CPU (Eigen 3.4, 16 threads)", "CUDA: NVIDIA H100 ...").
  std::string device_description() const;
  // True when any process of a multi-process job passes true (the backend's any_rank; a collective:
  // every process calls it at the same point). One process: `flag`.
  bool any_rank(bool flag);
  DeviceKind device_kind() const;

  long steps_done() const;
  bool finished() const { return steps_done() >= m_cfg.steps; }
  const TrainConfig& config() const { return m_cfg; }
  Model<float>& model() { return *m_model; }
  const Model<float>& model() const { return *m_model; }
  const TextData& data() const { return m_data; }
  int threads() const { return m_threads; }
  // Model FLOPs of one training step (forward + backward ≈ 3 × forward), inner loop included.
  double step_flops() const;

 private:
  struct Impl;
  TrainConfig m_cfg;
  TextData m_data;
  int m_threads = 1;
  std::unique_ptr<Model<float>> m_model;
  std::unique_ptr<Impl> m_impl;
};
}  // namespace tttlab
