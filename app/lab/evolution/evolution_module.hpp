// app/lab/evolution/evolution_module.hpp — the engine side of the Hidden-state evolution panel
// (evolution_types.hpp): the head runs in the primal form over the text, 32 tokens per work item, and
// each token's W_t is kept with its norms and singular values. When the library holds newer weights of
// the head's model (a training run saved a checkpoint: ModelInfo::version rose), after_iteration
// computes the same head and text again with them.
#pragma once

#include <memory>
#include <optional>

#include "lab/engine/engine.hpp"
#include "lab/engine/head_inputs.hpp"
#include "lab/engine/model_access.hpp"

namespace tttlab::lab {

class EvolutionModule final : public EngineModule, private ModelAccess {
 public:
  using ModelAccess::ModelAccess;
  const char* name() const override { return "hidden-state evolution"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  bool has_work(Clock::time_point now) const override;
  void work(ModuleContext& ctx) override;
  void publish(Snapshot& snapshot) const override;
  void after_iteration(ModuleContext& ctx) override;

  static HeadLimits limits();

 private:
  void rebuild();                       // the head from m_config with the model's current weights
  std::string m_device, m_device_note;  // where the head's inputs were computed (EvolutionView)
  HeadConfig m_config;
  bool m_configured = false;
  std::uint64_t m_generation = 0;
  std::string m_error = "waiting for settings";
  std::optional<HeadInputs<double>> m_head;
  std::optional<InnerState<double>> m_state;
  // A member other than TTT (toy head): its tracer (tttlab/fastweight/member_trace.hpp) in place of
  // m_state; W1 holds S or W₁, W2 the MLP's W₂.
  std::optional<MemberTracer> m_tracer;
  std::shared_ptr<const EvolutionStep> m_w0;
  std::vector<std::shared_ptr<const EvolutionStep>> m_steps;
  std::uint64_t m_seen_library = 0;   // library generation last looked at
  std::uint64_t m_model_version = 0;  // ModelInfo::version of the weights the head was built from
  long m_model_step = -1;
  int m_reloads = 0;
};

// Singular values of m, descending (as floats: for display).
std::vector<float> singular_values(const Mat<double>& m);

}  // namespace tttlab::lab
