// app/lab/minibatch/minibatch_settings.cpp — see minibatch_settings.hpp.
#include "lab/minibatch/minibatch_settings.hpp"

#include "lab/engine/data_source.hpp"

namespace tttlab::lab {

namespace {

const SettingsFields<SweepSettings>& sweep_fields() {
  using W = SweepSettings;
  static const SettingsFields<W> fields =
      SettingsFields<W>()
          .choice("mode", &W::mode,
                  {{"evaluate", SweepMode::Evaluate}, {"train", SweepMode::Train}})
          .string("model_id", &W::model_id, 4096)
          .choice("layer", &W::layer, {{"ttt-linear", "ttt-linear"}, {"ttt-mlp", "ttt-mlp"}})
          .string("data", &W::data, 4096)
          .integer("seq_len", &W::seq_len, 2, 1024)
          .integer("windows", &W::windows, 1, 256)
          .integer("train_steps", &W::train_steps, 1, 100000)
          .uint64("seed", &W::seed);
  return fields;
}

}  // namespace

MiniBatchPanelSettings MiniBatchPanelSettings::defaults() {
  MiniBatchPanelSettings s;
  s.sweep.data = default_data_source();
  return s;
}

std::vector<Command> MiniBatchPanelSettings::commands() const {
  if (ghost) return {SweepRun{*ghost, false}, SweepRun{sweep, true}};
  return {SweepRun{sweep, false}};
}

std::vector<Command> MiniBatchPanelSettings::scene(const FieldReader& entry, const FieldReader&) {
  return {SweepRun{from(entry).sweep}};
}

const SettingsFields<MiniBatchPanelSettings>& MiniBatchPanelSettings::fields() {
  using P = MiniBatchPanelSettings;
  static const SettingsFields<P> fields =
      SettingsFields<P>()
          .nested(&P::sweep, sweep_fields())
          .custom(
              [](const FieldReader& r, P& s) {
                // Its absent keys are the sweep's values, not the defaults.
                if (r.has("ghost")) s.ghost = sweep_fields().from(r.object("ghost"), s.sweep);
              },
              [](const P& s, nlohmann::json& j) {
                if (s.ghost) j["ghost"] = sweep_fields().to_json(*s.ghost);
              })
          .object("view", SettingsFields<P>()
                              .number("smoothing", &P::smoothing, 0.0, 0.999)
                              .boolean("log_time", &P::log_time));
  return fields;
}

}  // namespace tttlab::lab
