// app/lab/features.hpp — the features of the lab, in one explicit list (features.cpp): for each, the
// id a state file and `--panel` name it by, what the UI calls it, its engine module, how a state
// file's entry for it becomes the commands that compute its view, and what lessons can measure on it.
//
// A feature lives in its own folder, app/lab/<feature>/ (its module, its types, its settings, its
// measures), and its drawing in app/gui/panels/panel_<feature>.cpp. Everything that needs every
// feature (the engine's module list, the headless lesson runner, the state-file fuzz target, the
// panel registry) walks this list instead of naming the features one by one.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/measures.hpp"

namespace tttlab::lab {

class ComputeChoice;
class EngineModule;
class FieldReader;
class ModelLibrary;
struct ComputeDevices;

// The ids, each written once: state files, `tttlab gui --panel` and lessons' scenes use them.
inline constexpr const char* kInnerStepperId = "inner_stepper";
inline constexpr const char* kEvolutionId = "evolution";
inline constexpr const char* kInnerCurvesId = "inner_curves";
inline constexpr const char* kMiniBatchId = "minibatch";
inline constexpr const char* kPrimalDualId = "primal_dual";
inline constexpr const char* kTrainingId = "training";
inline constexpr const char* kEvaluationId = "evaluation";
inline constexpr const char* kGenerationId = "generation";
inline constexpr const char* kNonparametricId = "nonparametric";
inline constexpr const char* kRecallId = "recall";
inline constexpr const char* kDesignerId = "designer";
inline constexpr const char* kLatencyId = "latency";

// What the engine modules share: one model library (a model is loaded once, and a checkpoint opened
// or trained in one panel is offered in all of them) and one device choice (the Compute menu).
struct ModuleWiring {
  std::shared_ptr<ModelLibrary> library;
  std::shared_ptr<ComputeChoice> compute;
  const ComputeDevices* devices = nullptr;
};

struct Feature {
  const char* id = "";
  const char* name = "";     // shown in the UI
  const char* summary = "";  // one line: sidebar tooltip and `--list-panels`
  // The engine module that computes the feature's view.
  std::unique_ptr<EngineModule> (*make_module)(const ModuleWiring& wiring) = nullptr;
  // A state file's entry for this feature (`entry`, under `panels`) read completely, view settings
  // included, into the commands that make a headless engine compute the view (what a lesson's scene
  // asks for). Throws StateError naming the field; a valid entry changes nothing until the commands
  // are posted.
  std::vector<Command> (*scene)(const FieldReader& entry, const FieldReader& panels) = nullptr;
  // What lessons can measure on the view; nullptr when nothing.
  const MeasureSet* measures = nullptr;
};

// Every feature, in the order of the engine's modules (features.cpp).
const std::vector<Feature>& features();
// The feature with this id, or nullptr.
const Feature* find_feature(std::string_view id);
// The feature with this id; the id must be one of the constants above (std::logic_error otherwise).
const Feature& feature(std::string_view id);

}  // namespace tttlab::lab
