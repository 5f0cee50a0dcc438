// app/lab/minibatch/minibatch_module.hpp — the engine side of the Mini-batch lab (minibatch_types.hpp).
// A sweep walks b = 1, 2, 4, …, T; a work item is one evaluation window (or, in Train mode, one
// optimiser step) of one b, so the small multiples fill in live and a cancel lands quickly. On a GPU
// the last window's item of each b also runs that b on the GPU (one launch for the loss, 23 short
// ones for the timing).
#pragma once

#include <memory>
#include <vector>

#include "lab/engine/engine.hpp"
#include "lab/engine/job_module.hpp"
#include "lab/engine/model_access.hpp"
#include "lab/minibatch/minibatch_types.hpp"

namespace tttlab::lab {

// 1, 2, 4, …, and T itself when it is not a power of two.
std::vector<int> sweep_mini_batches(int T);

class MiniBatchModule final : public JobModule<MiniBatchView, &Snapshot::minibatch>,
                              private ModelAccess {
 public:
  // Out of line, where Job is complete (the constructor destroys m_job if it throws).
  explicit MiniBatchModule(std::shared_ptr<ModelLibrary> library = nullptr,
                           std::shared_ptr<ComputeChoice> compute = nullptr);
  ~MiniBatchModule() override;
  const char* name() const override { return "mini-batch lab"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  bool has_work(Clock::time_point now) const override;
  void work(ModuleContext& ctx) override;

  struct Job;

 private:
  std::unique_ptr<Job> m_job;
  std::vector<SweepSettings> m_queued;  // SweepRun{after_current = true} waiting for the running sweep
  void start(const SweepSettings& s, ModuleContext& ctx);
  void run_gpu(Job& j, const Model<float>& m, SweepPoint& p);
};

}  // namespace tttlab::lab
