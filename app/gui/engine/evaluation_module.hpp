// app/gui/engine/evaluation_module.hpp — the engine side of the Evaluation panel
// (evaluation_types.hpp). A job walks (model, window) pairs, one Model::eval_sequence per work item,
// so the curves fill in live and a cancel lands within one window.
#pragma once

#include <memory>

#include "gui/engine/engine.hpp"
#include "gui/engine/model_library.hpp"

namespace tttlab::gui {

class EvaluationModule final : public EngineModule {
 public:
  explicit EvaluationModule(std::shared_ptr<ModelLibrary> library = nullptr);
  ~EvaluationModule() override;
  const char* name() const override { return "evaluation"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  bool has_work(Clock::time_point now) const override;
  void work(ModuleContext& ctx) override;
  void publish(Snapshot& snapshot) const override;

  struct Job;

 private:
  std::shared_ptr<ModelLibrary> library_;
  std::shared_ptr<const EvaluationView> view_;
  std::unique_ptr<Job> job_;
  JobId job_id_ = 0;
  std::uint64_t generation_ = 0;
};

}  // namespace tttlab::gui
