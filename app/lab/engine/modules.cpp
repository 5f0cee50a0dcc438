// The engine modules of the app, in one explicit list (ImHex-style registration: no static
// initialisers that a static library could drop). Each module pairs with a panel in
// app/gui/panels/registry.cpp. Every module that runs language models shares one ModelLibrary, so a
// model is loaded once and a checkpoint opened (or trained) in one panel is offered in all of them.
#include "lab/engine/compute_module.hpp"
#include "lab/inner_curves/curves_module.hpp"
#include "lab/engine/engine.hpp"
#include "lab/evaluation/evaluation_module.hpp"
#include "lab/evolution/evolution_module.hpp"
#include "lab/generation/generation_module.hpp"
#include "lab/models/library_module.hpp"
#include "lab/minibatch/minibatch_module.hpp"
#include "lab/nonparametric/nonparametric_module.hpp"
#include "lab/primal_dual/primal_dual_module.hpp"
#include "lab/recall/recall_module.hpp"
#include "lab/inner_stepper/stepper_module.hpp"
#include "lab/training/training_module.hpp"

namespace tttlab::lab {

std::vector<std::unique_ptr<EngineModule>> make_engine_modules() { return make_engine_modules(ComputeDevices{}); }

std::vector<std::unique_ptr<EngineModule>> make_engine_modules(const ComputeDevices& devices) {
  auto library = std::make_shared<ModelLibrary>();
  // One device choice for every panel that computes (the Compute menu).
  auto compute = std::make_shared<ComputeChoice>(devices);
  std::vector<std::unique_ptr<EngineModule>> m;
  m.push_back(std::make_unique<ComputeModule>(compute));
  m.push_back(std::make_unique<StepperModule>(library));
  m.push_back(std::make_unique<EvolutionModule>(library, compute));
  m.push_back(std::make_unique<CurvesModule>(library, compute));
  m.push_back(std::make_unique<MiniBatchModule>(library, compute));
  m.push_back(std::make_unique<PrimalDualModule>(library, compute));
  m.push_back(std::make_unique<TrainingModule>(library, devices.train));
  m.push_back(std::make_unique<EvaluationModule>(library, compute));
  m.push_back(std::make_unique<GenerationModule>(library, compute));
  m.push_back(std::make_unique<NonparametricModule>(library));
  m.push_back(std::make_unique<RecallModule>());
  // Last: it publishes the library after the other modules loaded models into it in the same pass.
  m.push_back(std::make_unique<LibraryModule>(library));
  return m;
}

}  // namespace tttlab::lab
