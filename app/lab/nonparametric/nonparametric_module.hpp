// app/lab/nonparametric/nonparametric_module.hpp — the engine side of the Theorem 2 panel
// (nonparametric_types.hpp says what it computes).
//
// A NonparametricRun command starts a job (cancelling the previous one), split into work items:
// load the model and run the blocks before the chosen one and the layer itself; then one item per
// head (the Nadaraya–Watson estimator and the comparison, O(T²·d)); then the heat-map. So the engine
// stays responsive and a cancel lands between heads.
#pragma once

#include <memory>

#include "lab/engine/engine.hpp"
#include "lab/engine/job_module.hpp"
#include "lab/models/model_library.hpp"

namespace tttlab::lab {

class NonparametricModule final : public JobModule<NonparametricView, &Snapshot::nonparametric> {
 public:
  explicit NonparametricModule(std::shared_ptr<ModelLibrary> library = nullptr);
  ~NonparametricModule() override;
  const char* name() const override { return "nonparametric learner"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  void work(ModuleContext& ctx) override;

  static constexpr int kMaxTokens = 1024;
  // Throws std::invalid_argument with a one-line, user-facing message when `c` is unusable (whether
  // the model, block and head exist is checked when the model is at hand).
  static void validate(const NonparametricConfig& c);

  struct Job;  // the computation in flight (in the .cpp)

 private:
  std::shared_ptr<ModelLibrary> m_library;
  std::unique_ptr<Job> m_job;
};

}  // namespace tttlab::lab
