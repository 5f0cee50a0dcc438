// The panels of the app, in one explicit list (menu order). Each panel lives in its own
// panel_<name>.cpp and exposes one factory here.
#include "gui/panels/panel.hpp"

namespace tttlab::gui {

std::unique_ptr<Panel> make_inner_stepper_panel();  // panel_inner_stepper.cpp
std::unique_ptr<Panel> make_evolution_panel();      // panel_evolution.cpp
std::unique_ptr<Panel> make_inner_curves_panel();   // panel_inner_curves.cpp
std::unique_ptr<Panel> make_minibatch_panel();      // panel_minibatch.cpp
std::unique_ptr<Panel> make_primal_dual_panel();    // panel_primal_dual.cpp
std::unique_ptr<Panel> make_nonparametric_panel();  // panel_nonparametric.cpp
std::unique_ptr<Panel> make_recall_panel();         // panel_recall.cpp
std::unique_ptr<Panel> make_designer_panel();       // panel_designer.cpp
std::unique_ptr<Panel> make_latency_panel();        // panel_latency.cpp
std::unique_ptr<Panel> make_training_panel();       // panel_training.cpp
std::unique_ptr<Panel> make_evaluation_panel();     // panel_evaluation.cpp
std::unique_ptr<Panel> make_generation_panel();     // panel_generation.cpp
std::unique_ptr<Panel> make_lessons_panel();        // panel_lessons.cpp

std::vector<std::unique_ptr<Panel>> make_panels() {
  std::vector<std::unique_ptr<Panel>> p;
  p.push_back(make_inner_stepper_panel());
  p.push_back(make_evolution_panel());
  p.push_back(make_inner_curves_panel());
  p.push_back(make_minibatch_panel());
  p.push_back(make_primal_dual_panel());
  p.push_back(make_nonparametric_panel());
  p.push_back(make_recall_panel());
  p.push_back(make_designer_panel());
  p.push_back(make_latency_panel());
  p.push_back(make_training_panel());
  p.push_back(make_evaluation_panel());
  p.push_back(make_generation_panel());
  p.push_back(make_lessons_panel());
  return p;
}

}  // namespace tttlab::gui
