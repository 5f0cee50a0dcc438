// app/lab/primal_dual/primal_dual_module.hpp — the engine side of the primal-vs-dual panel.
//
// A PrimalDualRun command starts a job (cancelling the previous one). The job is split into work
// items — build the inputs of every block; each timed repetition of the primal form over all blocks
// and heads; the same for the dual form; when the panels compute on a GPU, the CUDA dual form of one
// block (all its heads, every repetition) per item; compare and build the matrices — so the engine
// stays responsive and a cancel lands between repetitions.
#pragma once

#include <memory>
#include <optional>

#include "lab/engine/engine.hpp"
#include "lab/engine/job_module.hpp"
#include "lab/engine/model_access.hpp"

namespace tttlab::lab {

class PrimalDualModule final : public JobModule<PrimalDualView, &Snapshot::primal_dual>,
                               private ModelAccess {
 public:
  // Out of line, where Job is complete (the constructor destroys m_job if it throws).
  explicit PrimalDualModule(std::shared_ptr<ModelLibrary> library = nullptr,
                            std::shared_ptr<ComputeChoice> compute = nullptr);
  ~PrimalDualModule() override;
  const char* name() const override { return "primal vs dual"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  void work(ModuleContext& ctx) override;

  static HeadLimits limits();

  struct Job;  // the computation in flight (precision-specific, in the .cpp)

 private:
  std::unique_ptr<Job> m_job;
};

}  // namespace tttlab::lab
