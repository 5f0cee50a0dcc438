// app/lab/training/training_module.hpp — the engine side of the Training panel (training_types.hpp).
//
// Each run is a tttlab::TrainingSession (core/include/tttlab/train/session.hpp, the loop `tttlab train`
// runs too: same run directory, same metrics.jsonl records) driven by a worker thread that this module
// owns, so the interactive modules keep answering on the engine thread while a step (tens to hundreds
// of milliseconds) runs. The worker and the module talk through a small mailbox per run (requests in:
// pause, resume, stop, save, served by the session's between-steps hook; reports out: steps,
// evaluations, saved checkpoints, errors, from its report hooks), and the module turns reports into
// immutable RunViews: a step adds one StepPoint to an append-only Series (series.hpp), so publishing
// never copies the history, and the model itself is never copied to the UI.
//
// Saved checkpoints are loaded into the shared model library as "file:<run dir>", so the other panels
// (evaluation, generation, the stepper) can run a model minutes after it started training.
// Only one run trains at a time (the CPU is shared with the UI and the other panels).
#pragma once

#include <memory>
#include <vector>

#include "lab/engine/engine.hpp"
#include "lab/models/model_library.hpp"

namespace tttlab::lab {

class TrainingModule final : public EngineModule {
 public:
  explicit TrainingModule(std::shared_ptr<ModelLibrary> library = nullptr, TrainDevices devices = {});
  ~TrainingModule() override;  // stops every worker (each finishes its current step) and joins it
  const char* name() const override { return "training"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  bool has_work(Clock::time_point now) const override;
  std::optional<Clock::time_point> next_wakeup() const override;
  bool awaiting_more() const override { return false; }  // a run may train for hours
  void work(ModuleContext& ctx) override;
  void publish(Snapshot& snapshot) const override;

  struct Run;  // one run and its worker (in the .cpp)

 private:
  void refuse(const std::string& why);
  void rebuild_view();
  Run* find(int id);

  std::shared_ptr<ModelLibrary> m_library;
  TrainDevices m_devices;
  std::vector<std::unique_ptr<Run>> m_runs;
  int m_next_id = 1;
  std::shared_ptr<const TrainingView> m_view;
  std::uint64_t m_event = 0;
  std::string m_error;
};

}  // namespace tttlab::lab
