// app/lab/evaluation/evaluation_module.hpp — the engine side of the Evaluation panel
// (evaluation_types.hpp). A job walks (model, window) pairs, one Model::eval_sequence per work item,
// so the curves fill in live and a cancel lands within one window. On a GPU (compute_device.hpp) a
// model's windows are evaluated in one work item instead: a few launches of up to 16 windows each
// (the aim: the 125m preset's 64 windows of T = 2048 in under 2 s on an H100).
#pragma once

#include <memory>

#include "lab/engine/engine.hpp"
#include "lab/engine/job_module.hpp"
#include "lab/engine/model_access.hpp"

namespace tttlab::lab {

class EvaluationModule final : public JobModule<EvaluationView, &Snapshot::evaluation>,
                               private ModelAccess {
 public:
  // Out of line, where Job is complete (the constructor destroys m_job if it throws).
  explicit EvaluationModule(std::shared_ptr<ModelLibrary> library = nullptr,
                            std::shared_ptr<ComputeChoice> compute = nullptr);
  ~EvaluationModule() override;
  const char* name() const override { return "evaluation"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  void work(ModuleContext& ctx) override;

  struct Job;

 private:
  std::unique_ptr<Job> m_job;
};

}  // namespace tttlab::lab
