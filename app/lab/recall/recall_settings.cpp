// app/lab/recall/recall_settings.cpp — see recall_settings.hpp.
#include "lab/recall/recall_settings.hpp"

#include <stdexcept>

#include "lab/recall/recall_module.hpp"

namespace tttlab::lab {

namespace {

const SettingsFields<RecallSettings>& run_fields() {
  using R = RecallSettings;
  static const SettingsFields<R> fields = SettingsFields<R>()
                                              .integer("width", &R::width, 4, 128)
                                              .integer_list("pairs", &R::pairs, 12, 1, 160)
                                              .integer("sequences", &R::sequences, 1, 256)
                                              .uint64("seed", &R::seed)
                                              .string("map_memory", &R::map_memory, 64)
                                              .integer("map_pairs", &R::map_pairs, 2, 160)
                                              .number("eta_linear", &R::eta_linear, 0.0, 2.0)
                                              .number("mamba_decay", &R::mamba_decay, 0.0, 1.0)
                                              .check([](const FieldReader& r, const R& s) {
                                                try {
                                                  validate(s);
                                                } catch (const std::invalid_argument& e) {
                                                  throw StateError(r.path() + ": " + e.what());
                                                }
                                              });
  return fields;
}

}  // namespace

RecallSettings recall_settings_from(const FieldReader& r, RecallSettings defaults) {
  return run_fields().from(r, defaults);
}

nlohmann::json to_json(const RecallSettings& s) { return run_fields().to_json(s); }

const SettingsFields<RecallPanelSettings>& RecallPanelSettings::fields() {
  using P = RecallPanelSettings;
  static const SettingsFields<P> fields =
      SettingsFields<P>()
          .nested(&P::run, run_fields())
          .object("view", SettingsFields<P>().boolean("log_x", &P::log_x));
  return fields;
}

}  // namespace tttlab::lab
