// app/lab/engine/compute_module.hpp — the engine side of the Compute menu and the status bar's device
// line: takes SetComputeDevice, publishes the ComputeView (compute_device.hpp). The choice itself is
// the ComputeChoice every computing module shares; a new choice applies to the jobs started after it.
#pragma once

#include <memory>

#include "lab/engine/compute_device.hpp"
#include "lab/engine/engine.hpp"

namespace tttlab::lab {

class ComputeModule final : public EngineModule {
 public:
  explicit ComputeModule(std::shared_ptr<ComputeChoice> choice);
  const char* name() const override { return "compute device"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  bool has_work(Clock::time_point) const override { return !m_probed; }
  // The first work item finds the GPU (so the status bar names it without a job having run).
  void work(ModuleContext& ctx) override;
  void publish(Snapshot& snapshot) const override;

 private:
  std::shared_ptr<ComputeChoice> m_choice;
  std::shared_ptr<const ComputeView> m_view;
  bool m_probed = false;
};

}  // namespace tttlab::lab
