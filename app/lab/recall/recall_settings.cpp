// app/lab/recall/recall_settings.cpp — see recall_settings.hpp.
#include "lab/recall/recall_settings.hpp"

#include <algorithm>
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

std::vector<std::string> recall_default_members() {
  std::vector<std::string> ids;
  for (int m = 0; m < recall::kFirstMemories; ++m) ids.emplace_back(recall::memory_id(static_cast<recall::Memory>(m)));
  return ids;
}

void validate_recall_members(const std::vector<std::string>& members) {
  if (members.empty() || members.size() > static_cast<std::size_t>(recall::kMemories))
    throw std::invalid_argument("give 1 to " + std::to_string(recall::kMemories) + " members to plot");
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (!recall::memory_from_id(members[i]))
      throw std::invalid_argument("unknown member '" + members[i] + "' (expected one of " + recall::memory_ids() +
                                  ")");
    if (std::find(members.begin(), members.begin() + static_cast<std::ptrdiff_t>(i), members[i]) !=
        members.begin() + static_cast<std::ptrdiff_t>(i))
      throw std::invalid_argument("member '" + members[i] + "' is named twice");
  }
}

RecallSettings recall_settings_from(const FieldReader& r, RecallSettings defaults) {
  return run_fields().from(r, defaults);
}

nlohmann::json to_json(const RecallSettings& s) { return run_fields().to_json(s); }

const SettingsFields<RecallPanelSettings>& RecallPanelSettings::fields() {
  using P = RecallPanelSettings;
  static const SettingsFields<P> fields =
      SettingsFields<P>()
          .nested(&P::run, run_fields())
          .object("view", SettingsFields<P>()
                              .boolean("log_x", &P::log_x)
                              .string_list("members", &P::members, recall::kMemories, 64)
                              .check([](const FieldReader& r, const P& s) {
                                try {
                                  validate_recall_members(s.members);
                                } catch (const std::invalid_argument& e) {
                                  throw StateError(r.path() + ".members: " + e.what());
                                }
                              }));
  return fields;
}

}  // namespace tttlab::lab
