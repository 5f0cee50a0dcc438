// app/lab/nonparametric/nonparametric_settings.cpp — see nonparametric_settings.hpp.
#include "lab/nonparametric/nonparametric_settings.hpp"

#include <stdexcept>

#include "lab/nonparametric/nonparametric_module.hpp"
#include "lab/state/settings_checks.hpp"

namespace tttlab::lab {

NonparametricConfig nonparametric_config_from(const FieldReader& r) {
  NonparametricConfig c;
  c.model_id = r.string("model_id", 4096, c.model_id);
  c.block = static_cast<int>(r.integer("block", 0, 1024, c.block));
  c.head = static_cast<int>(r.integer("attention_head", 0, 1024, c.head));
  c.text = r.string("text", NonparametricModule::kMaxTokens, c.text);
  c.data = r.string("data", 4096, c.data);
  c.offset = static_cast<long>(r.integer("offset", 0, 1LL << 40, c.offset));
  c.tokens = static_cast<int>(r.integer("tokens", 2, NonparametricModule::kMaxTokens, c.tokens));
  c.precision =
      r.choice("precision", {"double", "float"}, 0) == 0 ? Precision::Double : Precision::Float;
  try {
    NonparametricModule::validate(c);
  } catch (const std::invalid_argument& e) {
    throw StateError(r.path() + ": " + e.what());
  }
  check_block_and_head(c.model_id, c.block, r.path() + ".block", c.head,
                       r.path() + ".attention_head");
  return c;
}

nlohmann::json to_json(const NonparametricConfig& c) {
  return {{"model_id", c.model_id},
          {"block", c.block},
          {"attention_head", c.head},
          {"text", c.text},
          {"data", c.data},
          {"offset", c.offset},
          {"tokens", c.tokens},
          {"precision", c.precision == Precision::Double ? "double" : "float"}};
}

NonparametricPanelSettings NonparametricPanelSettings::from(const FieldReader& r) {
  NonparametricPanelSettings s;
  s.run = nonparametric_config_from(r);
  s.position = static_cast<long>(
      r.object("view").integer("position", -1, NonparametricModule::kMaxTokens - 1, -1));
  return s;
}

nlohmann::json NonparametricPanelSettings::to_json() const {
  nlohmann::json j = lab::to_json(run);
  j["view"] = {{"position", position}};
  return j;
}

}  // namespace tttlab::lab
