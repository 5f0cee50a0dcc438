// app/lab/evolution/evolution_module.hpp — the engine side of the Hidden-state evolution panel
// (evolution_types.hpp): the head runs in the primal form over the text, 32 tokens per work item, and
// each token's W_t is kept with its norms and singular values. When the library holds newer weights of
// the head's model (a training run saved a checkpoint: ModelInfo::version rose), after_iteration
// computes the same head and text again with them.
#pragma once

#include <memory>
#include <optional>

#include "lab/engine/compute_device.hpp"
#include "lab/engine/engine.hpp"
#include "lab/engine/head_inputs.hpp"
#include "lab/models/model_library.hpp"

namespace tttlab::lab {

class EvolutionModule final : public EngineModule {
 public:
  // `compute`: the device choice (compute_device.hpp); null: the CPU only.
  explicit EvolutionModule(std::shared_ptr<ModelLibrary> library = nullptr,
                           std::shared_ptr<ComputeChoice> compute = nullptr);
  const char* name() const override { return "hidden-state evolution"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  bool has_work(Clock::time_point now) const override;
  void work(ModuleContext& ctx) override;
  void publish(Snapshot& snapshot) const override;
  void after_iteration(ModuleContext& ctx) override;

  static HeadLimits limits();

 private:
  void rebuild();  // the head from config_ with the model's current weights
  std::shared_ptr<ModelLibrary> library_;
  std::shared_ptr<ComputeChoice> compute_;
  std::string device_, device_note_;  // where the head's inputs were computed (EvolutionView)
  HeadConfig config_;
  bool configured_ = false;
  std::uint64_t generation_ = 0;
  std::string error_;
  std::optional<HeadInputs<double>> head_;
  std::optional<InnerState<double>> state_;
  std::shared_ptr<const EvolutionStep> w0_;
  std::vector<std::shared_ptr<const EvolutionStep>> steps_;
  std::uint64_t seen_library_ = 0;   // library generation last looked at
  std::uint64_t model_version_ = 0;  // ModelInfo::version of the weights the head was built from
  long model_step_ = -1;
  int reloads_ = 0;
};

// Singular values of m, descending (as floats: for display).
std::vector<float> singular_values(const Mat<double>& m);

}  // namespace tttlab::lab
