// app/lab/nonparametric/nonparametric_settings.cpp — see nonparametric_settings.hpp.
#include "lab/nonparametric/nonparametric_settings.hpp"

#include <stdexcept>

#include "lab/nonparametric/nonparametric_module.hpp"
#include "lab/state/settings_checks.hpp"

namespace tttlab::lab {

namespace {

const SettingsFields<NonparametricConfig>& run_fields() {
  using C = NonparametricConfig;
  constexpr int kMaxTokens = NonparametricModule::kMaxTokens;
  static const SettingsFields<C> fields =
      SettingsFields<C>()
          .string("model_id", &C::model_id, 4096)
          .integer("block", &C::block, 0, 1024)
          .integer("attention_head", &C::head, 0, 1024)
          .string("text", &C::text, kMaxTokens)
          .string("data", &C::data, 4096)
          .integer("offset", &C::offset, 0, 1LL << 40)
          .integer("tokens", &C::tokens, 2, kMaxTokens)
          .choice("precision", &C::precision,
                  {{"double", Precision::Double}, {"float", Precision::Float}})
          .check([](const FieldReader& r, const C& c) {
            try {
              NonparametricModule::validate(c);
            } catch (const std::invalid_argument& e) {
              throw StateError(r.path() + ": " + e.what());
            }
            check_block_and_head(c.model_id, c.block, r.path() + ".block", c.head,
                                 r.path() + ".attention_head");
          });
  return fields;
}

}  // namespace

const SettingsFields<NonparametricPanelSettings>& NonparametricPanelSettings::fields() {
  using P = NonparametricPanelSettings;
  static const SettingsFields<P> fields =
      SettingsFields<P>()
          .nested(&P::run, run_fields())
          .object("view", SettingsFields<P>().integer("position", &P::position, -1,
                                                      NonparametricModule::kMaxTokens - 1));
  return fields;
}

}  // namespace tttlab::lab
