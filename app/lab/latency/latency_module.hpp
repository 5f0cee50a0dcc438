// app/lab/latency/latency_module.hpp — the engine side of the Latency lab (latency_types.hpp).
// A work item is one CPU prefill forward, one chunk of a decoder's walk through the context, one
// decode window, or one GPU measurement of a point; the points are taken T by T, every layer at each
// T, so all the curves grow together and a cancel or a new request lands within one item.
#pragma once

#include <memory>

#include "lab/engine/engine.hpp"
#include "lab/engine/job_module.hpp"
#include "lab/engine/model_access.hpp"
#include "lab/latency/latency_types.hpp"

namespace tttlab::lab {

class LatencyModule final : public JobModule<LatencyView, &Snapshot::latency>, private ModelAccess {
 public:
  // Out of line, where Job is complete.
  explicit LatencyModule(std::shared_ptr<ModelLibrary> library = nullptr,
                         std::shared_ptr<ComputeChoice> compute = nullptr);
  ~LatencyModule() override;
  const char* name() const override { return "latency lab"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  void work(ModuleContext& ctx) override;

  struct Job;

 private:
  std::unique_ptr<Job> m_job;
  void finish(ModuleContext& ctx, JobOutcome outcome, const std::string& message);
};

}  // namespace tttlab::lab
