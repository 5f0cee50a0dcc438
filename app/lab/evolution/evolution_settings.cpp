// app/lab/evolution/evolution_settings.cpp — see evolution_settings.hpp.
#include "lab/evolution/evolution_settings.hpp"

#include "lab/evolution/evolution_module.hpp"
#include "lab/state/settings_checks.hpp"
#include "lab/state/text_file_field.hpp"

namespace tttlab::lab {

EvolutionPanelSettings EvolutionPanelSettings::defaults() {
  EvolutionPanelSettings s;
  s.head.block = 1;
  s.head.head = 2;
  return s;
}

const SettingsFields<EvolutionPanelSettings>& EvolutionPanelSettings::fields() {
  using P = EvolutionPanelSettings;
  static const SettingsFields<P> fields =
      head_fields(&P::head, &EvolutionModule::limits)
          .custom(read_text_file_field<P, &EvolutionModule::limits>, write_text_file_field<P>)
          .integer("cursor", &P::cursor, -1, 1 << 20)
          .object("view", SettingsFields<P>()
                              .choice("layer", &P::layer, {{"W1", 0}, {"W2", 1}})
                              .choice("map", &P::show_delta, {{"delta", true}, {"weights", false}})
                              .choice("spectrum", &P::spectrum_of_delta,
                                      {{"delta", true}, {"weights", false}})
                              .number("play_speed", &P::play_speed, 1.0, 1000.0));
  return fields;
}

}  // namespace tttlab::lab
