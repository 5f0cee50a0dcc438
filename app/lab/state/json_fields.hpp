// app/lab/state/json_fields.hpp — checked reads of settings from a .tttlab state file.
//
// A state file is user data: it may be hand-edited, truncated or from a newer version. Every read
// names the field by its path ("panels.inner_stepper.head.d") and says what was expected, so that a
// bad file produces one actionable line in the error popup instead of a crash or a silent default.
// A missing field takes the given default (files stay valid when new settings are added); a present
// field of the wrong type or out of range is an error.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tttlab::lab {

// Thrown for any invalid content of a state file (or of a settings object inside it).
class StateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Which keys the FieldReaders of this thread looked at while it lives, so that a state file's keys
// that no setting reads (a typo, a setting of another version) are reported instead of ignored in
// silence. Only objects a FieldReader was built on are judged: an object read some other way is
// skipped, never reported. Nests: an inner log sees only its own reads.
class KeyLog {
 public:
  KeyLog();
  ~KeyLog();
  KeyLog(const KeyLog&) = delete;
  KeyLog& operator=(const KeyLog&) = delete;

  // Marks `path` ("panels.x.y") as read although no FieldReader read it (keys read as raw JSON).
  void mark(const std::string& path) { m_seen.insert(path); }
  // The keys of `doc` that no reader looked at, as paths ("panels.inner_stepper.hed"), in file order.
  std::vector<std::string> unknown(const nlohmann::json& doc) const;
  // One note per unknown key: "FILE: unknown key "panels.x.y" (ignored)", file and key escaped.
  std::vector<std::string> notes(const nlohmann::json& doc, const std::string& file) const;

 private:
  friend class FieldReader;
  void walk(const nlohmann::json& j, const std::string& path, std::vector<std::string>& out) const;
  std::set<std::string> m_readers, m_seen;
  KeyLog* m_outer = nullptr;
};

// A JSON object being read, with its path for messages. `j` must outlive the reader.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& j, std::string path);  // throws StateError if j is not an object

  const std::string& path() const { return m_path; }
  bool has(std::string_view key) const;

  bool boolean(std::string_view key, bool fallback) const;
  long long integer(std::string_view key, long long lo, long long hi, long long fallback) const;
  std::uint64_t uint64(std::string_view key, std::uint64_t fallback) const;
  double number(std::string_view key, double lo, double hi, double fallback) const;
  std::string string(std::string_view key, std::size_t max_bytes, std::string fallback) const;
  // One of `choices` (exact, case-sensitive); returns its index.
  int choice(std::string_view key, std::initializer_list<std::string_view> choices,
             int fallback) const;
  int choice(std::string_view key, std::span<const std::string_view> choices, int fallback) const;
  // An array of at most `max_items` strings of at most `max_bytes` each (empty when absent).
  std::set<std::string> string_set(std::string_view key, std::size_t max_items, std::size_t max_bytes) const;
  std::vector<std::string> string_list(std::string_view key, std::size_t max_items, std::size_t max_bytes,
                                       std::vector<std::string> fallback) const;
  // An array of at most `max_items` integers, each in [lo, hi] (`fallback` when absent).
  std::vector<long long> integer_list(std::string_view key, std::size_t max_items, long long lo, long long hi,
                                      std::vector<long long> fallback) const;
  // The sub-object at `key` (an empty object when absent).
  FieldReader object(std::string_view key) const;

 private:
  const nlohmann::json* field(std::string_view key) const;  // nullptr when absent
  std::string where(std::string_view key) const;

  const nlohmann::json& j_;
  std::string m_path;
};

}  // namespace tttlab::lab
