// app/lab/recall/recall_settings.cpp — see recall_settings.hpp.
#include "lab/recall/recall_settings.hpp"

#include <stdexcept>

#include "lab/recall/recall_module.hpp"

namespace tttlab::lab {

RecallSettings recall_settings_from(const FieldReader& r, RecallSettings s) {
  s.width = static_cast<int>(r.integer("width", 4, 128, s.width));
  const std::vector<long long> pairs =
      r.integer_list("pairs", 12, 1, 160, {s.pairs.begin(), s.pairs.end()});
  s.pairs.assign(pairs.begin(), pairs.end());
  s.sequences = static_cast<int>(r.integer("sequences", 1, 256, s.sequences));
  s.seed = r.uint64("seed", s.seed);
  s.map_memory = r.string("map_memory", 64, s.map_memory);
  s.map_pairs = static_cast<int>(r.integer("map_pairs", 2, 160, s.map_pairs));
  s.eta_linear = r.number("eta_linear", 0.0, 2.0, s.eta_linear);
  try {
    validate(s);
  } catch (const std::invalid_argument& e) {
    throw StateError(r.path() + ": " + e.what());
  }
  return s;
}

nlohmann::json to_json(const RecallSettings& s) {
  return {{"width", s.width},           {"pairs", s.pairs},
          {"sequences", s.sequences},   {"seed", s.seed},
          {"map_memory", s.map_memory}, {"map_pairs", s.map_pairs},
          {"eta_linear", s.eta_linear}};
}

RecallPanelSettings RecallPanelSettings::from(const FieldReader& r) {
  RecallPanelSettings s;
  s.run = recall_settings_from(r, s.run);
  s.log_x = r.object("view").boolean("log_x", s.log_x);
  return s;
}

nlohmann::json RecallPanelSettings::to_json() const {
  nlohmann::json j = lab::to_json(run);
  j["view"] = {{"log_x", log_x}};
  return j;
}

}  // namespace tttlab::lab
