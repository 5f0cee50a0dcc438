// app/lab/inner_curves/curves_settings.cpp — see curves_settings.hpp.
#include "lab/inner_curves/curves_settings.hpp"

#include "lab/engine/data_source.hpp"
#include "lab/features.hpp"
#include "lab/models/model_library.hpp"
#include "lab/training/training_settings.hpp"

namespace tttlab::lab {

CurvesSettings curves_settings_from(const FieldReader& r, CurvesSettings s) {
  s.model_id = r.string("model_id", 4096, s.model_id);
  s.data = r.string("data", 4096, s.data);
  s.seq_len = static_cast<int>(r.integer("seq_len", 8, 2048, s.seq_len));
  s.sequences = static_cast<int>(r.integer("sequences", 1, 256, s.sequences));
  return s;
}

nlohmann::json to_json(const CurvesSettings& s) {
  return {{"model_id", s.model_id},
          {"data", s.data},
          {"seq_len", s.seq_len},
          {"sequences", s.sequences}};
}

CurvesPanelSettings CurvesPanelSettings::defaults() {
  CurvesPanelSettings s;
  s.run.data = default_data_source();
  return s;
}

CurvesPanelSettings CurvesPanelSettings::from(const FieldReader& r) {
  CurvesPanelSettings s = defaults();
  s.run = curves_settings_from(r, s.run);
  const FieldReader v = r.object("view");
  s.smoothing = v.number("smoothing", 0.0, 0.999, s.smoothing);
  s.log_scale = v.boolean("log_scale", s.log_scale);
  s.shared_y = v.boolean("shared_y", s.shared_y);
  return s;
}

nlohmann::json CurvesPanelSettings::to_json() const {
  nlohmann::json j = lab::to_json(run);
  j["view"] = {{"smoothing", smoothing}, {"log_scale", log_scale}, {"shared_y", shared_y}};
  return j;
}

std::vector<Command> CurvesPanelSettings::commands() const { return {CurvesRun{run}}; }

std::vector<Command> CurvesPanelSettings::scene(const FieldReader& entry,
                                                const FieldReader& panels) {
  const CurvesPanelSettings s = from(entry);
  std::vector<Command> out;
  if (s.run.model_id == kFollowTrainingId) {
    // Only the run's settings are read: the rest of the Training panel's entry is the window's.
    const TrainSettings t = train_settings_from(panels.object(kTrainingId).object("settings"),
                                                TrainingPanelSettings::defaults().train);
    out.push_back(TrainStart{t, ""});
  }
  out.push_back(CurvesRun{s.run});
  return out;
}

}  // namespace tttlab::lab
