// tttlab/train/session.hpp — one training run in its run directory: the loop that `tttlab train` and
// the desktop app's Training panel both drive.
//
// A TrainingSession owns a Trainer (trainer.hpp) and the run directory:
//   RUN/train_config.json                 the run's settings (TrainConfig::to_json), written at creation
//                                         and with every checkpoint
//   RUN/metrics.jsonl                     one JSON record per line: steps, evaluations, events; the
//                                         schema, and how it is written, are in metrics.hpp
//   RUN/latest                            the name of the newest complete checkpoint, "step-0000500"
//   RUN/step-0000500/config.json, model.safetensors, train_state.safetensors
//                                         a checkpoint (Trainer::save; the two newest are kept)
// Checkpoint files and `latest` are written atomically, `latest` last, so a crash at any moment
// leaves the previous checkpoint whole. Before each checkpoint, metrics.jsonl is synced to disk, so
// the records up to a checkpoint's step are durable once `latest` names it.
//
// Resuming reopens RUN at its latest checkpoint (step N) and atomically rewrites metrics.jsonl to
// the complete records of steps <= N (the records after N belong to steps that will be computed
// again, identically; a torn last line from a crash is dropped), then appends.
//
// The loop (run()): before each optimiser step it asks hooks.between_steps whether to go on, so a
// run stops only between steps, never inside one; each step appends a step record; every
// eval_every steps an evaluation record, every checkpoint_every steps a checkpoint (neither at the
// last step, which always gets both). When the run ends:
//   finished (steps done)   final evaluation (with the loss by position), checkpoint
//   stopped (hook or stop)  checkpoint only; resume() continues the same loss curve exactly
// An exception (data, disk, backend) leaves the run directory as the last checkpoint wrote it; the
// error names the file when a file is the cause (e.g. "cannot append to 'RUN/metrics.jsonl': ...").
//
// DIVERGENCE. A step whose loss or gradient is not finite changes nothing (the update is skipped)
// and is recorded as an event {"event": "skipped_step"}. After TrainConfig::max_bad_steps such
// steps in a row the run has diverged, and TrainConfig::on_diverge decides:
//   "rollback" (the default)  reopen the last checkpoint (or, before the first one, start again from
//                             step 0) with the learning rate times rollback_lr_factor (lr_scale,
//                             saved with the run), record {"event": "rollback"}, and go on; after
//                             max_rollbacks rollbacks the run stops as below
//   "stop"                    record {"event": "diverged"} and throw TrainingDiverged, naming the step
// A diverged state is never saved (Trainer::save refuses non-finite values), so `latest` always
// names a checkpoint that loads.
//
// A run directory with train_config.json but no checkpoint yet (killed before or during its first
// save) resumes from step 0: the same config and seed give the same run.
//
// Threading: a session is driven by ONE thread (the CLI's main thread, or the GUI run's worker);
// the hooks run on that thread, between steps or right after them, and may block (a paused GUI
// run waits inside between_steps). request_stop() may be called from any thread.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "tttlab/train/metrics.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab {

enum class SessionControl { Continue, Stop };

// All optional. Called on the session's thread.
struct SessionHooks {
  // Before every optimiser step. May block; may call TrainingSession::checkpoint().
  std::function<SessionControl()> between_steps;
  // After every step, with its record's numbers (tokens/s of this step, seconds since the session began).
  std::function<void(const StepReport&, double tokens_per_s, double elapsed_s)> on_step;
  // After every evaluation; `final`: the one at the end of the run.
  std::function<void(const EvalReport&, bool final)> on_eval;
  // After every checkpoint, with its folder (RUN/step-…).
  std::function<void(long step, const std::filesystem::path& checkpoint)> on_checkpoint;
  // After every event record (a skipped step, a rollback), with its kind and message.
  std::function<void(long step, const std::string& kind, const std::string& message)> on_event;
};

// The run diverged and its policy stopped it (see DIVERGENCE above). The message names the step.
class TrainingDiverged : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SessionOptions {
  // Seconds on a monotonic clock; the default is std::chrono::steady_clock. Tests pass a fake one
  // so that the records of two runs are byte for byte the same.
  std::function<double()> clock;
  // false for every process but the first of a multi-process data-parallel job
  // (train/data_parallel.hpp): the session computes, evaluates and stops exactly as the first one
  // does, and reads the run directory (resume, rollback), but writes nothing into it: train_config,
  // metrics and checkpoints are the first process's.
  bool writes_files = true;
  // Checkpoints kept in the run directory, the newest (0: every one; Trainer::save).
  std::size_t keep_checkpoints = 2;
};

class TrainingSession {
 public:
  enum class Outcome { Finished, Stopped };

  // A new run in `run_dir` (created when absent). Refuses (std::runtime_error) a directory that
  // already holds a run (a `latest` file). Writes train_config.json and starts metrics.jsonl afresh.
  static std::unique_ptr<TrainingSession> create(const std::filesystem::path& run_dir, TrainConfig cfg, TextData data,
                                                 const TrainBackendFactory& backend = {}, SessionOptions options = {});
  // The run in `run_dir`, at its latest checkpoint (Trainer::resume), metrics truncated to it; a run
  // that never saved a checkpoint starts again from step 0 with its train_config.json.
  static std::unique_ptr<TrainingSession> resume(const std::filesystem::path& run_dir,
                                                 const TrainBackendFactory& backend = {}, SessionOptions options = {});
  ~TrainingSession();

  // Trains until the run is finished or stopped (see above). Throws on any failure, TrainingDiverged
  // when the divergence policy gives up.
  Outcome run(const SessionHooks& hooks = {});
  // Writes a checkpoint of the current step (after syncing metrics.jsonl), unless the newest one
  // is of this step already. Returns its folder.
  std::filesystem::path checkpoint(const SessionHooks& hooks = {});
  // Makes run() stop before its next step (with a checkpoint). Any thread.
  void request_stop() { m_stop.store(true); }

  Trainer& trainer() { return *m_trainer; }
  const Trainer& trainer() const { return *m_trainer; }
  const std::filesystem::path& run_dir() const { return m_dir; }
  std::filesystem::path metrics_path() const { return m_dir / "metrics.jsonl"; }
  // The step of the newest checkpoint this session wrote or resumed from (-1: none yet).
  long checkpoint_step() const { return m_saved_step; }

 private:
  TrainingSession(std::filesystem::path dir, std::unique_ptr<Trainer> trainer, MetricsLog::Mode mode,
                  TrainBackendFactory backend, SessionOptions options);
  void evaluate(bool final, const SessionHooks& hooks);
  void event(const std::string& kind, const std::string& message, const SessionHooks& hooks);
  // The policy after max_bad_steps bad steps in a row: a rollback, or TrainingDiverged.
  void on_diverged(long bad_steps, const SessionHooks& hooks);
  double now() const;

  std::filesystem::path m_dir;
  std::unique_ptr<Trainer> m_trainer;
  std::unique_ptr<MetricsLog> m_metrics;  // reopened when a rollback rewrites the file
  TrainBackendFactory m_backend;
  int m_rollbacks = 0;
  SessionOptions m_options;
  double m_start = 0;
  long m_saved_step = -1;
  std::atomic<bool> m_stop{false};
};

// Removes the temporaries an atomic write killed midway left in `run_dir` (".<name>.tmp-<pid>-<n>",
// see io/atomic_file.hpp) and in its checkpoint folders. Returns how many it removed. Only for a
// run directory that no other process is writing.
int remove_stale_temporaries(const std::filesystem::path& run_dir);

}  // namespace tttlab
