// app/lab/designer/designer_settings.cpp — see designer_settings.hpp.
#include "lab/designer/designer_settings.hpp"

#include <stdexcept>

#include "lab/designer/designer_module.hpp"

namespace tttlab::lab {

namespace {

// The choices of one component: every value with its spelling (rule.hpp's to_string).
template <class E>
std::vector<std::pair<std::string_view, E>> designer_spellings(std::initializer_list<E> values) {
  std::vector<std::pair<std::string_view, E>> out;
  for (E v : values) out.emplace_back(to_string(v), v);
  return out;
}

SettingsFields<FastWeightRule> designer_rule_fields() {
  using R = FastWeightRule;
  using St = FastWeightState;
  using L = FastWeightLoss;
  using Re = FastWeightRetention;
  using O = FastWeightOptimizer;
  using Ra = FastWeightRate;
  using G = FastWeightGranularity;
  return SettingsFields<R>()
      .choice("state", &R::state, designer_spellings({St::Matrix, St::Mlp}))
      .choice("loss", &R::loss, designer_spellings({L::Hebbian, L::Squared, L::TttLnResidual, L::DotProduct}))
      .choice("retention", &R::retention,
              designer_spellings({Re::None, Re::ScalarDecay, Re::ChannelDecay, Re::WeightDecay}))
      .choice("optimizer", &R::optimizer, designer_spellings({O::Gd, O::Momentum, O::Muon}))
      .choice("rate", &R::rate, designer_spellings({Ra::Fixed, Ra::PerToken, Ra::PerPosition}))
      .choice("granularity", &R::granularity,
              designer_spellings({G::PerToken, G::MiniBatch, G::ExactChunk, G::LargeChunk}));
}

SettingsFields<DesignParams> designer_param_fields() {
  using P = DesignParams;
  return SettingsFields<P>()
      .integer("width", &P::width, recall::kMinWidth, recall::kMaxWidth)
      .uint64("seed", &P::seed)
      .number("eta", &P::eta, 1e-6, 100.0)
      .number("decay", &P::decay, 1e-6, 1.0)
      .number("weight_decay", &P::weight_decay, 0.0, 100.0)
      .number("momentum", &P::momentum, 0.0, 0.999)
      .integer("chunk", &P::chunk, 1, 4096);
}

const SettingsFields<DesignerSettings>& designer_run_fields() {
  using D = DesignerSettings;
  static const SettingsFields<D> fields = SettingsFields<D>()
                                              .nested(&D::design, designer_rule_fields())
                                              .nested(&D::params, designer_param_fields())
                                              .string("compare", &D::compare, 64)
                                              .integer_list("pairs", &D::pairs, 12, 1, 160)
                                              .integer("sequences", &D::sequences, 1, 256)
                                              .integer("curve_pairs", &D::curve_pairs, 2, 160)
                                              .check([](const FieldReader& r, const D& s) {
                                                try {
                                                  validate(s);
                                                } catch (const std::invalid_argument& e) {
                                                  throw StateError(r.path() + ": " + e.what());
                                                }
                                              });
  return fields;
}

}  // namespace

DesignerSettings designer_settings_from(const FieldReader& r, DesignerSettings defaults) {
  return designer_run_fields().from(r, defaults);
}

nlohmann::json to_json(const DesignerSettings& s) { return designer_run_fields().to_json(s); }

const SettingsFields<DesignerPanelSettings>& DesignerPanelSettings::fields() {
  using P = DesignerPanelSettings;
  static const SettingsFields<P> fields =
      SettingsFields<P>()
          .nested(&P::run, designer_run_fields())
          .object("view", SettingsFields<P>().boolean("log_x", &P::log_x));
  return fields;
}

}  // namespace tttlab::lab
