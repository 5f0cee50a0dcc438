// tttlab/io/json.hpp — the project's JSON: nlohmann-json, plus the few checks our files need on top.
//
// Every JSON file the engine reads or writes (config.json, train_config.json, metrics.jsonl,
// safetensors headers, data manifests, CLI --json output) goes through nlohmann::ordered_json: objects
// keep their members in document / insertion order, so written files read in the order they were
// built. Integers are exact up to 2^64 − 1 (unsigned) and down to −2^63; other numbers are doubles.
// nlohmann writes non-finite doubles as null.
//
// What this header adds:
//   parse_json   parses text with the source named in every error
//                  "config.json: JSON parse error at byte 123: syntax error while parsing object ..."
//                a nesting cap (default 64 levels, enforced while parsing, so hostile input fails
//                cleanly instead of exhausting memory or the stack), non-finite numbers (1e999)
//                refused, and duplicate keys refused (JsonDuplicateKey says where) unless allowed.
//   JsonFields   typed reads of an object's fields whose errors name the source and the field
//                  "config.json: field 'hidden_size' must be an integer"
//
// Errors are JsonError (a std::runtime_error) with one-line messages.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tttlab {

using Json = nlohmann::ordered_json;

class JsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A key repeated within one object. path(): the keys of the enclosing objects from the root
// (array elements appear as "[i]"); key(): the repeated key.
class JsonDuplicateKey : public JsonError {
 public:
  JsonDuplicateKey(const std::string& what, std::vector<std::string> path, std::string key)
      : JsonError(what), m_path(std::move(path)), m_key(std::move(key)) {}
  const std::vector<std::string>& path() const { return m_path; }
  const std::string& key() const { return m_key; }

 private:
  std::vector<std::string> m_path;
  std::string m_key;
};

struct JsonParseOptions {
  int max_depth = 64;                // nesting of arrays and objects; deeper input is a JsonError
  bool reject_duplicate_keys = true;  // false: a repeated key keeps the last value (nlohmann's rule)
};

// Parses `text` as one JSON document. `source` names it in errors (a file name, "the header").
Json parse_json(std::string_view text, std::string_view source, const JsonParseOptions& options = {});

// Serialises for files and logs: compact (indent < 0) or indented; invalid UTF-8 in strings is
// replaced by U+FFFD instead of throwing, so writing a record never fails on its content.
std::string dump_json(const Json& j, int indent = -1);

// Typed reads of one object's fields. Absent fields: `read` leaves `out` as it is and returns false
// (settings files stay valid when new fields are added); `require` throws. A present field of the
// wrong type or out of range is always an error:
//   "<source>: field '<key>' must be an integer" / "... must be a number" / "... must be true or false"
//   "<source>: field '<key>' must be a string" / "... must be a non-negative integer" / "... is out of range"
// `j` must outlive the reader.
class JsonFields {
 public:
  JsonFields(const Json& j, std::string source);  // JsonError when j is not an object

  const std::string& source() const { return m_source; }
  const Json* find(std::string_view key) const;  // nullptr when absent
  bool has(std::string_view key) const { return find(key) != nullptr; }

  bool read(std::string_view key, int& out) const;
  bool read(std::string_view key, long& out) const;
  bool read(std::string_view key, long long& out) const;
  bool read(std::string_view key, std::uint64_t& out) const;  // a non-negative integer
  bool read(std::string_view key, double& out) const;         // any number
  bool read(std::string_view key, bool& out) const;
  bool read(std::string_view key, std::string& out) const;

  template <class T>
  T require(std::string_view key) const {
    T out{};
    if (!read(key, out)) fail(key, "is missing");
    return out;
  }
  // A JsonError "<source>: field '<key>' <what>".
  [[noreturn]] void fail(std::string_view key, std::string_view what) const;

 private:
  bool read_integer(std::string_view key, long long lo, long long hi, long long& out) const;
  const Json& m_j;
  std::string m_source;
};

}  // namespace tttlab
