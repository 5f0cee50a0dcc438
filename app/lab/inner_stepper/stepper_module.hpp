// app/lab/inner_stepper/stepper_module.hpp — the engine side of the inner-loop stepper (see stepper_types.hpp).
//
// State: the head's inputs (head_inputs.hpp), the streaming InnerState after `computed` tokens, and one TokenRecord per
// computed token. A work item consumes ONE token with inner_forward_primal (a 1-row call that
// continues the state, exactly like a decoder), so playback, seeking and config changes are all
// interleaved with the UI's commands at token granularity. Tokens already computed are never
// recomputed when the cursor moves back: scrubbing backwards is free.
//
// A member of the fast-weight family other than TTT (HeadConfig::member, toy source) runs through
// MemberTracer instead, one token per work item as well; its records fill the same TokenRecord (state S
// or {W₁, W₂} as W1/W2 with zero biases, β_t as λ_t with τ = 1, the gradient's row factors as k and
// grad_z where known).
//
// Following a training run: when the library holds newer weights of the head's model (a run saved a
// checkpoint: ModelInfo::version rose), after_iteration rebuilds the head with them and computes up to
// the same cursor again (same block, head, text; playback goes on).
#pragma once

#include <memory>
#include <optional>

#include "lab/engine/engine.hpp"
#include "lab/engine/head_inputs.hpp"
#include "lab/models/model_library.hpp"

namespace tttlab::lab {

class StepperModule final : public EngineModule {
 public:
  // `library` is shared with the other modules (a private one when null).
  explicit StepperModule(std::shared_ptr<ModelLibrary> library = nullptr);
  const char* name() const override { return "inner-loop stepper"; }
  bool handle(const Command& command, ModuleContext& ctx) override;
  bool has_work(Clock::time_point now) const override;
  std::optional<Clock::time_point> next_wakeup() const override;
  bool awaiting_more() const override { return m_playing && !m_loop; }  // looping playback never ends
  void work(ModuleContext& ctx) override;
  void publish(Snapshot& snapshot) const override;
  void after_iteration(ModuleContext& ctx) override;

  static HeadLimits limits();

 private:
  void configure(const StepperConfigure& c);
  bool rebuild();  // builds the head from m_config with the model's current weights; false on error
  void transport(const StepperTransport& t);
  void set_cursor_target(long token);
  void compute_next_token();
  void start_member();
  void compute_member_token();
  static InnerWeights<double> member_weights(const std::vector<Mat<double>>& w);

  std::shared_ptr<ModelLibrary> m_library;
  HeadConfig m_config;
  std::uint64_t m_generation = 0;
  std::string m_error;
  std::string m_warning;
  // The warning for values that are not finite: non_finite_model_message for a model's head; for a
  // toy head (whose divergence at a large learning rate is a lesson) words of its own.
  std::string m_non_finite;
  std::optional<HeadInputs<double>> m_head;
  std::shared_ptr<const InnerWeights<double>> m_w0;
  std::shared_ptr<const std::vector<double>> m_eta;
  std::optional<InnerState<double>> m_state;
  // A member other than TTT: its tracer (tttlab/fastweight/member_trace.hpp) in place of m_state.
  std::optional<MemberTracer> m_tracer;
  std::vector<double> m_member_rate;  // β_t (matrix members; 1 for linear attention) or η per token
  std::vector<std::shared_ptr<const TokenRecord>> m_records;
  long m_cursor = -1;
  long m_target = -1;  // the cursor moves here, computing tokens as needed
  bool m_playing = false;
  double m_speed = 8.0;
  bool m_loop = false;
  Clock::time_point m_next_tick{};
  double m_compute_us_total = 0;
  std::uint64_t m_seen_library = 0;  // library generation last looked at
  std::uint64_t m_model_version = 0;  // ModelInfo::version of the weights the head was built from
  long m_model_step = -1;
  int m_reloads = 0;
};

}  // namespace tttlab::lab
