// app/gui/engine/curves_module.hpp — the engine side of the Inner-loss curves panel (curves_types.hpp).
// Each validation window streams through the model in the primal form (Model::forward with a block
// observer), 64 tokens per work item; the observer adds every (block, head, token)'s three inner
// losses into per-block sums, so the averaged curves sharpen live as windows are done.
#pragma once

#include <memory>

#include "gui/engine/engine.hpp"
#include "gui/engine/model_library.hpp"

namespace tttlab::gui {

class CurvesModule final : public EngineModule {
 public:
  explicit CurvesModule(std::shared_ptr<ModelLibrary> library = nullptr);
  ~CurvesModule() override;
  const char* name() const override { return "inner-loss curves"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  bool has_work(Clock::time_point now) const override;
  void work(ModuleContext& ctx) override;
  void publish(Snapshot& snapshot) const override;

  struct Job;

 private:
  std::shared_ptr<ModelLibrary> library_;
  std::shared_ptr<const CurvesView> view_;
  std::unique_ptr<Job> job_;
  JobId job_id_ = 0;
  std::uint64_t generation_ = 0;
};

}  // namespace tttlab::gui
