// The panels of the app, in one explicit list (menu order). Each panel lives in its own
// panel_<name>.cpp and exposes one factory here.
#include "gui/panels/panel.hpp"

namespace tttlab::gui {

std::unique_ptr<Panel> make_inner_stepper_panel();  // panel_inner_stepper.cpp
std::unique_ptr<Panel> make_primal_dual_panel();    // panel_primal_dual.cpp

std::vector<std::unique_ptr<Panel>> make_panels() {
  std::vector<std::unique_ptr<Panel>> p;
  p.push_back(make_inner_stepper_panel());
  p.push_back(make_primal_dual_panel());
  return p;
}

}  // namespace tttlab::gui
