// app/lab/inner_stepper/stepper_settings.cpp — see stepper_settings.hpp.
#include "lab/inner_stepper/stepper_settings.hpp"

#include "lab/inner_stepper/stepper_module.hpp"
#include "lab/state/settings_checks.hpp"

namespace tttlab::lab {

StepperPanelSettings StepperPanelSettings::from(const FieldReader& r) {
  StepperPanelSettings s = defaults();
  s.head = checked_head_from(r, StepperModule::limits());
  s.cursor = r.integer("cursor", -1, 1 << 20, s.cursor);
  s.speed = r.number("speed", 0.25, 1000.0, s.speed);
  s.loop = r.boolean("loop", s.loop);
  const FieldReader v = r.object("view");
  s.smoothing = v.number("smoothing", 0.0, 0.999, s.smoothing);
  s.log_losses = v.boolean("log_losses", s.log_losses);
  s.colours =
      static_cast<StepperColourScale>(v.choice("colours", {"shared", "fixed", "per_matrix"}, 0));
  s.layer = v.choice("layer", {"W1", "W2"}, 0);
  return s;
}

nlohmann::json StepperPanelSettings::to_json() const {
  return {{"head", lab::to_json(head)},
          {"cursor", cursor},
          {"speed", speed},
          {"loop", loop},
          {"view",
           {{"smoothing", smoothing},
            {"log_losses", log_losses},
            {"colours", colours == StepperColourScale::SharedPerToken ? "shared"
                        : colours == StepperColourScale::FixedOverRun ? "fixed"
                                                                      : "per_matrix"},
            {"layer", layer == 0 ? "W1" : "W2"}}}};
}

std::vector<Command> StepperPanelSettings::commands() const {
  return {StepperSetSpeed{speed, loop}, StepperConfigure{head, cursor}};
}

std::vector<Command> StepperPanelSettings::scene(const FieldReader& entry, const FieldReader&) {
  const HeadConfig h = from(entry).head;
  return {StepperConfigure{h, h.tokens() - 1}};
}

}  // namespace tttlab::lab
