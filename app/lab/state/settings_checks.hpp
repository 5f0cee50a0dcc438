// app/lab/state/settings_checks.hpp — checks that several features' state-file settings share: a head
// against its module's limits, and a block and head that the model has.
#pragma once

#include <string>

#include "lab/engine/head_config.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/settings_fields.hpp"

namespace tttlab::lab {

// A block or head the model does not have is refused while the file loads, where the model's config
// can be read without loading it: accepted, the view would show the model's last block on its slider
// while the engine reported the block the file named. Throws StateError naming the field.
void check_block_and_head(const std::string& model_id, int block, const std::string& block_path,
                          int head, const std::string& head_path);

// The "head" object of `panel`, checked against `limits` (and, for a model's head, its block and head).
HeadConfig checked_head_from(const FieldReader& panel, const HeadLimits& limits);

// A panel's fields that start with its "head" object (`member`), read by checked_head_from against
// the module's `limits()`.
template <class Panel>
SettingsFields<Panel> head_fields(HeadConfig Panel::*member, HeadLimits (*limits)()) {
  return SettingsFields<Panel>().custom(
      [=](const FieldReader& r, Panel& s) { s.*member = checked_head_from(r, limits()); },
      [=](const Panel& s, nlohmann::json& j) { j["head"] = to_json(s.*member); });
}

}  // namespace tttlab::lab
