// app/lab/evaluation/evaluation_settings.cpp — see evaluation_settings.hpp.
#include "lab/evaluation/evaluation_settings.hpp"

#include "lab/engine/data_source.hpp"

namespace tttlab::lab {

namespace {

const SettingsFields<EvalSettings>& eval_fields() {
  using E = EvalSettings;
  static const SettingsFields<E> fields =
      SettingsFields<E>()
          .string_list("models", &E::models, 8, 4096)
          .check([](const FieldReader& r, const E& s) {
            if (s.models.empty()) throw StateError(r.path() + ".models: choose at least one model");
          })
          .string("data", &E::data, 4096)
          .integer("seq_len", &E::seq_len, 8, 4096)
          .integer("windows", &E::windows, 1, 1024);
  return fields;
}

}  // namespace

EvaluationPanelSettings EvaluationPanelSettings::defaults() {
  EvaluationPanelSettings s;
  s.eval.data = default_data_source();
  s.eval.models = {"shipped", "random:ttt-linear:m:0"};
  return s;
}

const SettingsFields<EvaluationPanelSettings>& EvaluationPanelSettings::fields() {
  using P = EvaluationPanelSettings;
  static const SettingsFields<P> fields =
      SettingsFields<P>()
          .nested(&P::eval, eval_fields())
          .object("view", SettingsFields<P>()
                              .number("smoothing", &P::smoothing, 0.0, 0.999)
                              .boolean("log_x", &P::log_x));
  return fields;
}

}  // namespace tttlab::lab
