// app/lab/evaluation/evaluation_settings.cpp — see evaluation_settings.hpp.
#include "lab/evaluation/evaluation_settings.hpp"

#include "lab/engine/data_source.hpp"

namespace tttlab::lab {

EvalSettings eval_settings_from(const FieldReader& r, EvalSettings s) {
  s.models = r.string_list("models", 8, 4096, s.models);
  if (s.models.empty()) throw StateError(r.path() + ".models: choose at least one model");
  s.data = r.string("data", 4096, s.data);
  s.seq_len = static_cast<int>(r.integer("seq_len", 8, 4096, s.seq_len));
  s.windows = static_cast<int>(r.integer("windows", 1, 1024, s.windows));
  return s;
}

nlohmann::json to_json(const EvalSettings& s) {
  return {{"models", s.models}, {"data", s.data}, {"seq_len", s.seq_len}, {"windows", s.windows}};
}

EvaluationPanelSettings EvaluationPanelSettings::defaults() {
  EvaluationPanelSettings s;
  s.eval.data = default_data_source();
  s.eval.models = {"shipped", "random:ttt-linear:m:0"};
  return s;
}

EvaluationPanelSettings EvaluationPanelSettings::from(const FieldReader& r) {
  EvaluationPanelSettings s = defaults();
  s.eval = eval_settings_from(r, s.eval);
  const FieldReader v = r.object("view");
  s.smoothing = v.number("smoothing", 0.0, 0.999, s.smoothing);
  s.log_x = v.boolean("log_x", s.log_x);
  return s;
}

nlohmann::json EvaluationPanelSettings::to_json() const {
  nlohmann::json j = lab::to_json(eval);
  j["view"] = {{"smoothing", smoothing}, {"log_x", log_x}};
  return j;
}

}  // namespace tttlab::lab
