// app/lab/latency/latency_settings.cpp — see latency_settings.hpp.
#include "lab/latency/latency_settings.hpp"

#include <stdexcept>

namespace tttlab::lab {

namespace {

const SettingsFields<LatencySettings>& latency_run_fields() {
  using R = LatencySettings;
  static const SettingsFields<R> fields =
      SettingsFields<R>()
          .string_list("layers", &R::layers, 5, 64)
          .choice("preset", &R::preset, {{"tiny", "tiny"}, {"small", "small"}})
          .integer("max_context", &R::max_context, 64, 16384)
          .integer("repeats", &R::repeats, 1, 50)
          .integer("decode_tokens", &R::decode_tokens, 1, 63)
          .uint64("seed", &R::seed)
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

LatencySettings latency_settings_from(const FieldReader& r, LatencySettings defaults) {
  return latency_run_fields().from(r, defaults);
}

nlohmann::json to_json(const LatencySettings& s) { return latency_run_fields().to_json(s); }

const SettingsFields<LatencyPanelSettings>& LatencyPanelSettings::fields() {
  using P = LatencyPanelSettings;
  static const SettingsFields<P> fields =
      SettingsFields<P>()
          .nested(&P::run, latency_run_fields())
          .object(
              "view",
              SettingsFields<P>().boolean("log_time", &P::log_time).boolean("spread", &P::spread));
  return fields;
}

}  // namespace tttlab::lab
