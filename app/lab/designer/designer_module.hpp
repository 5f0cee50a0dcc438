// app/lab/designer/designer_module.hpp — the engine side of the designer (designer_types.hpp).
// A work item runs episodes for about 10 ms: first the inner-loss episode pair by pair (so the curves
// draw at once), then one accuracy episode of each P in turn, both memories on each. A cancel or a
// new request lands within one item.
#pragma once

#include <memory>
#include <stdexcept>

#include "lab/designer/designer_types.hpp"
#include "lab/engine/engine.hpp"
#include "lab/engine/job_module.hpp"

namespace tttlab::lab {

// Throws std::invalid_argument naming the first setting out of range (the state-file reader and the
// module share it, so a scene the reader accepts always computes).
void validate(const DesignerSettings& s);

class DesignerModule final : public JobModule<DesignerView, &Snapshot::designer> {
 public:
  DesignerModule();
  ~DesignerModule() override;
  const char* name() const override { return "designer"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  void work(ModuleContext& ctx) override;

  struct Job;

 private:
  std::unique_ptr<Job> m_job;
  void finish(ModuleContext& ctx, JobOutcome outcome, const std::string& message);
};

}  // namespace tttlab::lab
