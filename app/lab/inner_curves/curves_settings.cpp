// app/lab/inner_curves/curves_settings.cpp — see curves_settings.hpp.
#include "lab/inner_curves/curves_settings.hpp"

#include "lab/engine/data_source.hpp"
#include "lab/features.hpp"
#include "lab/models/model_library.hpp"
#include "lab/training/training_settings.hpp"

namespace tttlab::lab {

namespace {

const SettingsFields<CurvesSettings>& run_fields() {
  using C = CurvesSettings;
  static const SettingsFields<C> fields = SettingsFields<C>()
                                              .string("model_id", &C::model_id, 4096)
                                              .string("data", &C::data, 4096)
                                              .integer("seq_len", &C::seq_len, 8, 2048)
                                              .integer("sequences", &C::sequences, 1, 256)
                                              .string("member", &C::member, 64)
                                              .integer("toy_d", &C::toy_d, 2, 64)
                                              .integer("toy_seed", &C::toy_seed, 0, 1000000000)
                                              .integer("toy_heads", &C::toy_heads, 1, 16)
                                              .integer("toy_mini_batch", &C::toy_mini_batch, 1, 1024)
                                              .number("toy_eta_base", &C::toy_eta_base, 1e-6, 1000.0);
  return fields;
}

}  // namespace

CurvesPanelSettings CurvesPanelSettings::defaults() {
  CurvesPanelSettings s;
  s.run.data = default_data_source();
  return s;
}

std::vector<Command> CurvesPanelSettings::commands() const { return {CurvesRun{run}}; }

std::vector<Command> CurvesPanelSettings::scene(const FieldReader& entry,
                                                const FieldReader& panels) {
  const CurvesPanelSettings s = from(entry);
  if (s.run.model_id != kFollowTrainingId) return {CurvesRun{s.run}};
  // Only the run's settings are read: the rest of the Training panel's entry is the window's. The
  // curves come first: they answer the run themselves when they have followed it already.
  const TrainSettings t = train_settings_from(panels.object(kTrainingId).object("settings"),
                                              TrainingPanelSettings::defaults().train);
  TrainStart start{t, ""};
  start.lesson = true;
  return {CurvesRun{s.run, t}, start};
}

const SettingsFields<CurvesPanelSettings>& CurvesPanelSettings::fields() {
  using P = CurvesPanelSettings;
  static const SettingsFields<P> fields =
      SettingsFields<P>()
          .nested(&P::run, run_fields())
          .string("shipped_run", &P::shipped_run, 64)
          .object("view", SettingsFields<P>()
                              .number("smoothing", &P::smoothing, 0.0, 0.999)
                              .boolean("log_scale", &P::log_scale)
                              .boolean("shared_y", &P::shared_y));
  return fields;
}

}  // namespace tttlab::lab
