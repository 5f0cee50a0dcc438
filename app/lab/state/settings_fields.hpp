// app/lab/state/settings_fields.hpp — a settings struct's state-file fields, stated once.
//
// A feature lists its struct's fields in a SettingsFields table: key, member, and the range, size
// or choices the file may hold. The one table both reads the fields (through FieldReader, so absent
// keys keep the struct's values and bad ones throw StateError naming the field) and writes them back
// as the JSON object of the state file. A check() entry runs the feature's own check at its place in
// the order, so a file with several errors still reports the same first one.
//
//   static const SettingsFields<CurvesSettings> kFields = SettingsFields<CurvesSettings>()
//       .string("model_id", &CurvesSettings::model_id, 4096)
//       .integer("seq_len", &CurvesSettings::seq_len, 8, 2048);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/state/json_fields.hpp"

namespace tttlab::lab {

template <class S>
class SettingsFields {
 public:
  using Read = std::function<void(const FieldReader& r, S& s)>;
  using Write = std::function<void(const S& s, nlohmann::json& j)>;

  // An integral member (int, long) in [lo, hi].
  template <class M>
  SettingsFields& integer(const char* key, M S::*member, long long lo, long long hi) {
    return as_is(key, member, [=](const FieldReader& r, M v) { return r.integer(key, lo, hi, v); });
  }
  SettingsFields& uint64(const char* key, std::uint64_t S::*member) {
    return as_is(key, member,
                 [=](const FieldReader& r, std::uint64_t v) { return r.uint64(key, v); });
  }
  SettingsFields& number(const char* key, double S::*member, double lo, double hi) {
    return as_is(key, member,
                 [=](const FieldReader& r, double v) { return r.number(key, lo, hi, v); });
  }
  SettingsFields& boolean(const char* key, bool S::*member) {
    return as_is(key, member, [=](const FieldReader& r, bool v) { return r.boolean(key, v); });
  }
  SettingsFields& string(const char* key, std::string S::*member, std::size_t max_bytes) {
    return as_is(key, member, [=](const FieldReader& r, const std::string& v) {
      return r.string(key, max_bytes, v);
    });
  }
  SettingsFields& string_list(const char* key, std::vector<std::string> S::*member,
                              std::size_t max_items, std::size_t max_bytes) {
    return as_is(key, member, [=](const FieldReader& r, const std::vector<std::string>& v) {
      return r.string_list(key, max_items, max_bytes, v);
    });
  }
  // A list of integers (int, long), each in [lo, hi].
  template <class M>
  SettingsFields& integer_list(const char* key, std::vector<M> S::*member, std::size_t max_items,
                               long long lo, long long hi) {
    return as_is(key, member, [=](const FieldReader& r, const std::vector<M>& v) {
      const std::vector<long long> read =
          r.integer_list(key, max_items, lo, hi, {v.begin(), v.end()});
      return std::vector<M>(read.begin(), read.end());
    });
  }
  // One of `options`' names in the file, its value in the member. A member holding none of the
  // values reads and writes as the first option.
  template <class M>
  SettingsFields& choice(const char* key, M S::*member,
                         std::vector<std::pair<std::string_view, M>> options) {
    std::vector<std::string_view> names;
    for (const auto& o : options) names.push_back(o.first);
    const auto index = [=](const S& s) {
      for (std::size_t i = 0; i < options.size(); ++i)
        if (options[i].second == s.*member) return static_cast<int>(i);
      return 0;
    };
    return add(
        [=](const FieldReader& r, S& s) {
          s.*member = options[static_cast<std::size_t>(r.choice(key, names, index(s)))].second;
        },
        [=](const S& s, nlohmann::json& j) { j[key] = names[static_cast<std::size_t>(index(s))]; });
  }
  // The sub-object at `key`, with fields of its own ("view").
  SettingsFields& object(const char* key, SettingsFields inner) {
    return add([=](const FieldReader& r, S& s) { inner.read(r.object(key), s); },
               [=](const S& s, nlohmann::json& j) { j[key] = inner.to_json(s); });
  }
  // A member struct whose fields stand beside this struct's own (the run settings inside a panel's).
  template <class M>
  SettingsFields& nested(M S::*member, SettingsFields<M> inner) {
    return add([=](const FieldReader& r, S& s) { inner.read(r, s.*member); },
               [=](const S& s, nlohmann::json& j) { j.update(inner.to_json(s.*member)); });
  }
  // A check of what was read so far, at its place in the order (it writes nothing).
  SettingsFields& check(std::function<void(const FieldReader& r, const S& s)> check) {
    return add([check = std::move(check)](const FieldReader& r, S& s) { check(r, s); },
               [](const S&, nlohmann::json&) {});
  }
  // A field read and written by the feature's own functions (a head with its module's limits).
  SettingsFields& custom(Read read, Write write) { return add(std::move(read), std::move(write)); }

  // Reads every field in the table's order into `s`: absent keys keep its values.
  void read(const FieldReader& r, S& s) const {
    for (const Field& f : m_fields) f.read(r, s);
  }
  // `defaults` with the fields of `r` read over them.
  S from(const FieldReader& r, S defaults) const {
    read(r, defaults);
    return defaults;
  }
  nlohmann::json to_json(const S& s) const {
    nlohmann::json j = nlohmann::json::object();
    for (const Field& f : m_fields) f.write(s, j);
    return j;
  }

 private:
  struct Field {
    Read read;
    Write write;
  };
  // A member the file holds as it is, read by `get(reader, the member's value)`.
  template <class M, class Get>
  SettingsFields& as_is(const char* key, M S::*member, Get get) {
    return add([=](const FieldReader& r, S& s) { s.*member = static_cast<M>(get(r, s.*member)); },
               [=](const S& s, nlohmann::json& j) { j[key] = s.*member; });
  }
  SettingsFields& add(Read read, Write write) {
    m_fields.push_back({std::move(read), std::move(write)});
    return *this;
  }

  std::vector<Field> m_fields;
};

// What every panel's settings do with a state file, from the panel's table of fields
// (`static const SettingsFields<Panel>& fields()`) and its commands to the engine
// (`std::vector<Command> commands() const`). A panel whose defaults are not its members' initial
// values, or whose lesson scene is not its commands, declares its own defaults() or scene().
template <class Panel>
struct PanelSettings {
  static Panel defaults() { return {}; }
  // Absent keys keep the defaults; throws StateError naming the field.
  static Panel from(const FieldReader& r) { return Panel::fields().from(r, Panel::defaults()); }
  nlohmann::json to_json() const {
    return Panel::fields().to_json(static_cast<const Panel&>(*this));
  }
  // A lesson's scene: the panel's entry `entry` (under `panels`) read into the commands that make a
  // headless engine compute the view.
  static std::vector<Command> scene(const FieldReader& entry, const FieldReader& /*panels*/) {
    return Panel::from(entry).commands();
  }
};

}  // namespace tttlab::lab
