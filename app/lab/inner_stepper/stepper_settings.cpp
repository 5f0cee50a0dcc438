// app/lab/inner_stepper/stepper_settings.cpp — see stepper_settings.hpp.
#include "lab/inner_stepper/stepper_settings.hpp"

#include "lab/inner_stepper/stepper_module.hpp"
#include "lab/state/settings_checks.hpp"
#include "lab/state/text_file_field.hpp"

namespace tttlab::lab {

std::vector<Command> StepperPanelSettings::commands() const {
  return {StepperSetSpeed{speed, loop}, StepperConfigure{head, cursor}};
}

std::vector<Command> StepperPanelSettings::scene(const FieldReader& entry, const FieldReader&) {
  const HeadConfig h = from(entry).head;
  return {StepperConfigure{h, h.tokens() - 1}};
}

const SettingsFields<StepperPanelSettings>& StepperPanelSettings::fields() {
  using P = StepperPanelSettings;
  using C = StepperColourScale;
  static const SettingsFields<P> fields =
      head_fields(&P::head, &StepperModule::limits)
          .custom(read_text_file_field<P, &StepperModule::limits>, write_text_file_field<P>)
          .integer("cursor", &P::cursor, -1, 1 << 20)
          .number("speed", &P::speed, 0.25, 1000.0)
          .boolean("loop", &P::loop)
          .object("view", SettingsFields<P>()
                              .number("smoothing", &P::smoothing, 0.0, 0.999)
                              .boolean("log_losses", &P::log_losses)
                              .choice("colours", &P::colours,
                                      {{"shared", C::SharedPerToken},
                                       {"fixed", C::FixedOverRun},
                                       {"per_matrix", C::PerMatrix}})
                              .choice("layer", &P::layer, {{"W1", 0}, {"W2", 1}}));
  return fields;
}

}  // namespace tttlab::lab
