// app/lab/features.cpp — the features of the lab, in one explicit list (ImHex-style registration: no
// static initialisers that a static library could drop), in the order of the engine's modules. Each
// feature pairs with a panel in app/gui/panels/registry.cpp.
#include "lab/features.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>

#include "lab/engine/compute_device.hpp"
#include "lab/engine/compute_module.hpp"
#include "lab/engine/engine.hpp"
#include "lab/evaluation/evaluation_module.hpp"
#include "lab/evaluation/evaluation_settings.hpp"
#include "lab/evolution/evolution_module.hpp"
#include "lab/evolution/evolution_settings.hpp"
#include "lab/generation/generation_module.hpp"
#include "lab/generation/generation_settings.hpp"
#include "lab/inner_curves/curves_module.hpp"
#include "lab/inner_curves/curves_settings.hpp"
#include "lab/inner_stepper/stepper_module.hpp"
#include "lab/inner_stepper/stepper_settings.hpp"
#include "lab/latency/latency_module.hpp"
#include "lab/latency/latency_settings.hpp"
#include "lab/minibatch/minibatch_module.hpp"
#include "lab/minibatch/minibatch_settings.hpp"
#include "lab/models/library_module.hpp"
#include "lab/nonparametric/nonparametric_module.hpp"
#include "lab/nonparametric/nonparametric_settings.hpp"
#include "lab/primal_dual/primal_dual_module.hpp"
#include "lab/primal_dual/primal_dual_settings.hpp"
#include "lab/designer/designer_module.hpp"
#include "lab/designer/designer_settings.hpp"
#include "lab/recall/recall_module.hpp"
#include "lab/recall/recall_settings.hpp"
#include "lab/training/training_module.hpp"
#include "lab/training/training_settings.hpp"

namespace tttlab::lab {

// Each in its feature's <feature>_measures.cpp.
const MeasureSet& stepper_measures();
const MeasureSet& evolution_measures();
const MeasureSet& curves_measures();
const MeasureSet& minibatch_measures();
const MeasureSet& primal_dual_measures();
const MeasureSet& evaluation_measures();
const MeasureSet& nonparametric_measures();
const MeasureSet& recall_measures();
const MeasureSet& designer_measures();
const MeasureSet& latency_measures();

namespace {

// A feature's engine module, given the parts of the wiring its constructor takes.
template <class Module>
std::unique_ptr<EngineModule> make(const ModuleWiring& w) {
  if constexpr (std::is_constructible_v<Module, std::shared_ptr<ModelLibrary>,
                                        std::shared_ptr<ComputeChoice>>)
    return std::make_unique<Module>(w.library, w.compute);
  else if constexpr (std::is_constructible_v<Module, std::shared_ptr<ModelLibrary>>)
    return std::make_unique<Module>(w.library);
  else
    return std::make_unique<Module>();
}

// Training runs on the devices of its own menu (TrainDevices), not on the panels' device choice.
std::unique_ptr<EngineModule> make_training(const ModuleWiring& w) {
  return std::make_unique<TrainingModule>(w.library, w.devices->train);
}

}  // namespace

const std::vector<Feature>& features() {
  static const std::vector<Feature> list = {
      {kInnerStepperId, "Inner-loop stepper",
       "Step one head of the trained model through a text token by token: k, ∇ℓ, their outer "
       "product, η, and W before/after, with the three inner losses.",
       &make<StepperModule>, &StepperPanelSettings::scene, &stepper_measures()},
      {kEvolutionId, "Hidden-state evolution",
       "Wₜ of any block and head over a whole sequence (TTT-Linear and TTT-MLP): a scrubber, the "
       "drift ‖Wₜ − W₀‖ and the singular values.",
       &make<EvolutionModule>, &EvolutionPanelSettings::scene, &evolution_measures()},
      {kInnerCurvesId, "Inner-loss curves",
       "ℓ(W₀; xₜ), ℓ(Wₜ₋₁; xₜ) and ℓ(Wₜ; xₜ) over token position, averaged over sequences and "
       "heads, per layer (the paper's Fig. 5 and 17).",
       &make<CurvesModule>, &CurvesPanelSettings::scene, &curves_measures()},
      {kMiniBatchId, "Mini-batch lab",
       "For b = 1, 2, 4, …, T: the loss of the same model and its measured forward time, as small "
       "multiples and a quality-versus-time plot (the paper's Fig. 8); the previous sweep stays as "
       "a ghost.",
       &make<MiniBatchModule>, &MiniBatchPanelSettings::scene, &minibatch_measures()},
      {kPrimalDualId, "Primal vs dual",
       "Every layer of the model through the primal (token by token) and dual (matrix) forms: "
       "their difference per layer, their cost, the dual's masked attention-like matrix, and the "
       "reduction to linear attention.",
       &make<PrimalDualModule>, &PrimalDualPanelSettings::scene, &primal_dual_measures()},
      {kTrainingId, "Training",
       "Train small language models on the CPU or the GPU: start, pause, resume, stop; live "
       "losses, tokens/s, learning rate, gradient norm, time left; several runs overlaid; "
       "checkpoints saved and loaded.",
       &make_training, &TrainingPanelSettings::scene, nullptr},
      {kEvaluationId, "Evaluation",
       "Loss by token position for several models on the same windows (the paper's Fig. 2, "
       "right), and bits per byte.",
       &make<EvaluationModule>, &EvaluationPanelSettings::scene, &evaluation_measures()},
      {kGenerationId, "Generation",
       "Prompt, temperature, top-k: bytes appear as they are decoded, each with its update of the "
       "TTT hidden states.",
       &make<GenerationModule>, &GenerationPanelSettings::scene, nullptr},
      {kNonparametricId, "Nonparametric learner",
       "Softmax attention as a nonparametric learner (Theorem 2): the Nadaraya–Watson estimator "
       "built from a layer's own keys and values against its attention output, the kernel "
       "weights, and the state that grows with the context.",
       &make<NonparametricModule>, &NonparametricPanelSettings::scene, &nonparametric_measures()},
      {kRecallId, "Recall lab",
       "How many key-value pairs a state of width d can recall: TTT-Linear, TTT-MLP, linear "
       "attention and softmax attention at equal width, accuracy against the number of pairs, and "
       "a forgetting map.",
       &make<RecallModule>, &RecallPanelSettings::scene, &recall_measures()},
      {kDesignerId, "Layer designer",
       "Build a fast-weight layer from six components (state, inner loss, forgetting, optimizer, "
       "step size, when it updates), see which named member it is or is nearest to, and race its "
       "recall and inner loss against a member's.",
       &make<DesignerModule>, &DesignerPanelSettings::scene, &designer_measures()},
      {kLatencyId, "Latency lab",
       "Time per token against the context length T, for prefill and for decode: TTT-Linear, "
       "TTT-MLP, softmax and linear attention and Mamba-2 at the same size, on the CPU and, where "
       "the panels compute on one, the GPU (the paper's Fig. 3).",
       &make<LatencyModule>, &LatencyPanelSettings::scene, &latency_measures()},
  };
  return list;
}

const Feature* find_feature(std::string_view id) {
  for (const Feature& f : features())
    if (id == f.id) return &f;
  return nullptr;
}

const Feature& feature(std::string_view id) {
  if (const Feature* f = find_feature(id)) return *f;
  throw std::logic_error("no feature \"" + std::string(id) + "\" in lab/features.cpp");
}

std::vector<std::unique_ptr<EngineModule>> make_engine_modules() {
  return make_engine_modules(ComputeDevices{});
}

std::vector<std::unique_ptr<EngineModule>> make_engine_modules(const ComputeDevices& devices) {
  // One model library for every module that runs language models, one device choice for every panel
  // that computes (the Compute menu).
  const ModuleWiring wiring{std::make_shared<ModelLibrary>(),
                            std::make_shared<ComputeChoice>(devices), &devices};
  std::vector<std::unique_ptr<EngineModule>> m;
  m.push_back(std::make_unique<ComputeModule>(wiring.compute));
  for (const Feature& f : features())
    if (f.make_module) m.push_back(f.make_module(wiring));
  // Last: it publishes the library after the other modules loaded models into it in the same pass.
  m.push_back(std::make_unique<LibraryModule>(wiring.library));
  return m;
}

}  // namespace tttlab::lab
