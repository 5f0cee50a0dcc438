// The engine modules of the app, in one explicit list (ImHex-style registration: no static
// initialisers that a static library could drop). Each module pairs with a panel in
// app/gui/panels/registry.cpp.
#include "gui/engine/engine.hpp"
#include "gui/engine/primal_dual_module.hpp"
#include "gui/engine/stepper_module.hpp"

namespace tttlab::gui {

std::vector<std::unique_ptr<EngineModule>> make_engine_modules() {
  std::vector<std::unique_ptr<EngineModule>> m;
  m.push_back(std::make_unique<StepperModule>());
  m.push_back(std::make_unique<PrimalDualModule>());
  return m;
}

}  // namespace tttlab::gui
