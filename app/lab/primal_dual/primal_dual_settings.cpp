// app/lab/primal_dual/primal_dual_settings.cpp — see primal_dual_settings.hpp.
#include "lab/primal_dual/primal_dual_settings.hpp"

#include <stdexcept>

#include "lab/primal_dual/primal_dual_module.hpp"
#include "lab/state/settings_checks.hpp"

namespace tttlab::lab {

PrimalDualConfig primal_dual_config_default() {
  PrimalDualConfig c;
  c.head.w0 = W0Init::Random;
  c.head.repeat = 1;
  return c;
}

namespace {

const SettingsFields<PrimalDualConfig>& config_fields() {
  using C = PrimalDualConfig;
  static const SettingsFields<C> fields =
      SettingsFields<C>()
          .custom([](const FieldReader& r, C& c) { c.head = head_config_from(r.object("head")); },
                  [](const C& c, nlohmann::json& j) { j["head"] = lab::to_json(c.head); })
          .choice("precision", &C::precision,
                  {{"double", Precision::Double}, {"float", Precision::Float}})
          .integer("timing_reps", &C::timing_reps, 1, 50)
          .boolean("linear_attention", &C::linear_attention)
          .integer("chunk", &C::chunk, 1, 2048)
          .choice("gpu_math", &C::gpu_math, {{"fp32", GpuMath::Fp32}, {"tf32", GpuMath::Tf32}})
          .check([](const FieldReader& r, const C& c) {
            try {
              validate(c.effective(), PrimalDualModule::limits());
            } catch (const std::invalid_argument& e) {
              throw StateError(r.path() + ".head: " + e.what());
            }
            if (!c.head.toy())
              check_block_and_head(c.head.model_id, c.head.block, r.path() + ".head.block",
                                   c.head.head, r.path() + ".head.head");
          });
  return fields;
}

}  // namespace

const SettingsFields<PrimalDualPanelSettings>& PrimalDualPanelSettings::fields() {
  using P = PrimalDualPanelSettings;
  static const SettingsFields<P> fields = SettingsFields<P>().nested(&P::run, config_fields());
  return fields;
}

}  // namespace tttlab::lab
