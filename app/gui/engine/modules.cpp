// The engine modules of the app, in one explicit list (ImHex-style registration: no static
// initialisers that a static library could drop). Each module pairs with a panel in
// app/gui/panels/registry.cpp. Every module that runs language models shares one ModelLibrary, so a
// model is loaded once and a checkpoint opened (or trained) in one panel is offered in all of them.
#include "gui/engine/curves_module.hpp"
#include "gui/engine/engine.hpp"
#include "gui/engine/evaluation_module.hpp"
#include "gui/engine/evolution_module.hpp"
#include "gui/engine/generation_module.hpp"
#include "gui/engine/library_module.hpp"
#include "gui/engine/minibatch_module.hpp"
#include "gui/engine/nonparametric_module.hpp"
#include "gui/engine/primal_dual_module.hpp"
#include "gui/engine/recall_module.hpp"
#include "gui/engine/stepper_module.hpp"
#include "gui/engine/training_module.hpp"

namespace tttlab::gui {

std::vector<std::unique_ptr<EngineModule>> make_engine_modules(const TrainDevices& devices) {
  auto library = std::make_shared<ModelLibrary>();
  std::vector<std::unique_ptr<EngineModule>> m;
  m.push_back(std::make_unique<StepperModule>(library));
  m.push_back(std::make_unique<EvolutionModule>(library));
  m.push_back(std::make_unique<CurvesModule>(library));
  m.push_back(std::make_unique<MiniBatchModule>(library));
  m.push_back(std::make_unique<PrimalDualModule>(library));
  m.push_back(std::make_unique<TrainingModule>(library, devices));
  m.push_back(std::make_unique<EvaluationModule>(library));
  m.push_back(std::make_unique<GenerationModule>(library));
  m.push_back(std::make_unique<NonparametricModule>(library));
  m.push_back(std::make_unique<RecallModule>());
  // Last: it publishes the library after the other modules loaded models into it in the same pass.
  m.push_back(std::make_unique<LibraryModule>(library));
  return m;
}

}  // namespace tttlab::gui
