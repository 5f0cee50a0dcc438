// app/lab/evolution/evolution_settings.cpp — see evolution_settings.hpp.
#include "lab/evolution/evolution_settings.hpp"

#include "lab/evolution/evolution_module.hpp"
#include "lab/state/settings_checks.hpp"

namespace tttlab::lab {

EvolutionPanelSettings EvolutionPanelSettings::defaults() {
  EvolutionPanelSettings s;
  s.head.block = 1;
  s.head.head = 2;
  return s;
}

EvolutionPanelSettings EvolutionPanelSettings::from(const FieldReader& r) {
  EvolutionPanelSettings s = defaults();
  s.head = checked_head_from(r, EvolutionModule::limits());
  s.cursor = r.integer("cursor", -1, 1 << 20, s.cursor);
  const FieldReader v = r.object("view");
  s.layer = v.choice("layer", {"W1", "W2"}, 0);
  s.show_delta = v.choice("map", {"delta", "weights"}, 0) == 0;
  s.spectrum_of_delta = v.choice("spectrum", {"delta", "weights"}, 0) == 0;
  s.play_speed = v.number("play_speed", 1.0, 1000.0, s.play_speed);
  return s;
}

nlohmann::json EvolutionPanelSettings::to_json() const {
  return {{"head", lab::to_json(head)},
          {"cursor", cursor},
          {"view",
           {{"layer", layer == 0 ? "W1" : "W2"},
            {"map", show_delta ? "delta" : "weights"},
            {"spectrum", spectrum_of_delta ? "delta" : "weights"},
            {"play_speed", play_speed}}}};
}

std::vector<Command> EvolutionPanelSettings::commands() const { return {EvolutionConfigure{head}}; }

std::vector<Command> EvolutionPanelSettings::scene(const FieldReader& entry, const FieldReader&) {
  return from(entry).commands();
}

}  // namespace tttlab::lab
