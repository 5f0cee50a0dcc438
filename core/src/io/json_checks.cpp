// The checks on top of nlohmann-json (see tttlab/io/json.hpp).
#include <cmath>
#include <limits>
#include <string>
#include <unordered_set>
#include <vector>

#include "tttlab/io/json.hpp"
#include "tttlab/io/limits.hpp"

namespace tttlab {

namespace {

// nlohmann's messages read "[json.exception.parse_error.101] parse error at line 1, column 2: <reason>";
// the reason is the part worth showing (the byte offset is given separately).
std::string reason_of(const nlohmann::json::exception& e) {
  std::string what = e.what();
  if (const auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
  if (what.rfind("parse error", 0) == 0)
    if (const auto p = what.find(": "); p != std::string::npos) what = what.substr(p + 2);
  // nlohmann quotes the last token read, which in hostile input can be a string of any length.
  return clip(what, 200);
}

}  // namespace

Json parse_json(std::string_view text, std::string_view source, const JsonParseOptions& options) {
  // One entry per open array or object: where it sits (its key in the parent, or "[i]"), the keys
  // seen so far (objects), and the number of elements so far (arrays).
  struct Level {
    bool object = false;
    std::string name;
    std::unordered_set<std::string> keys;
    std::string last_key;
    long elements = 0;
  };
  std::vector<Level> open;
  const std::string src(source);
  const auto child_name = [&]() -> std::string {
    if (open.empty()) return {};
    Level& parent = open.back();
    if (parent.object) return parent.last_key;
    std::string index = "[";  // appended: GCC 12 warns (-Wrestrict, a false positive) on "[" + s + "]"
    index += std::to_string(parent.elements++);
    index += ']';
    return index;
  };
  const Json::parser_callback_t check = [&](int, Json::parse_event_t event, Json& parsed) -> bool {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start: {
        if (static_cast<int>(open.size()) >= options.max_depth)
          throw JsonError(src + ": JSON nested deeper than " + std::to_string(options.max_depth) + " levels");
        Level level;
        level.object = event == Json::parse_event_t::object_start;
        level.name = child_name();
        open.push_back(std::move(level));
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!open.empty()) open.pop_back();
        break;
      case Json::parse_event_t::key: {
        Level& obj = open.back();
        obj.last_key = parsed.get<std::string>();
        if (options.reject_duplicate_keys && !obj.keys.insert(obj.last_key).second) {
          std::vector<std::string> path;
          std::string where;
          for (std::size_t i = 1; i < open.size(); ++i) {
            path.push_back(open[i].name);
            if (!where.empty()) where += '.';
            where += clip(open[i].name, 40);
          }
          std::string what = src + ": duplicate key '" + clip(obj.last_key) + "'";
          if (!where.empty()) {
            what += " in '";
            what += where;
            what += '\'';
          }
          throw JsonDuplicateKey(what, std::move(path), obj.last_key);
        }
        break;
      }
      case Json::parse_event_t::value:
        if (parsed.is_number_float() && !std::isfinite(parsed.get<double>()))
          throw JsonError(src + ": JSON number out of range");
        if (!open.empty() && !open.back().object) ++open.back().elements;
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), check, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::parse_error& e) {
    throw JsonError(src + ": JSON parse error at byte " + std::to_string(e.byte) + ": " + reason_of(e));
  } catch (const nlohmann::json::exception& e) {
    throw JsonError(src + ": invalid JSON: " + reason_of(e));
  }
}

std::string dump_json(const Json& j, int indent) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// ---- JsonFields ------------------------------------------------------------------------------------

namespace {

// The read of a field of one JSON type: absent, false; of another type (`holds` is false), the error
// "<requirement>"; else its value in `out`.
template <class T>
bool read_of_type(const JsonFields& fields, std::string_view key, bool (Json::*holds)() const noexcept,
                  std::string_view requirement, T& out) {
  const Json* v = fields.find(key);
  if (!v) return false;
  if (!(v->*holds)()) fields.fail(key, requirement);
  out = v->get<T>();
  return true;
}

}  // namespace

JsonFields::JsonFields(const Json& j, std::string source) : m_j(j), m_source(std::move(source)) {
  if (!j.is_object()) throw JsonError(m_source + ": expected a JSON object");
}

const Json* JsonFields::find(std::string_view key) const {
  const auto it = m_j.find(key);
  return it == m_j.end() ? nullptr : &*it;
}

void JsonFields::fail(std::string_view key, std::string_view what) const {
  throw JsonError(m_source + ": field '" + clip(key) + "' " + clip(what, 200));
}

bool JsonFields::read_integer(std::string_view key, long long lo, long long hi, long long& out) const {
  const Json* v = find(key);
  if (!v) return false;
  if (v->is_number_unsigned()) {
    const auto x = v->get<std::uint64_t>();
    if (x > static_cast<std::uint64_t>(hi)) fail(key, "is out of range");
    out = static_cast<long long>(x);
  } else if (v->is_number_integer()) {
    const auto x = v->get<std::int64_t>();
    if (x < lo || x > hi) fail(key, "is out of range");
    out = x;
  } else {
    fail(key, "must be an integer");
  }
  return true;
}

bool JsonFields::read(std::string_view key, int& out) const {
  long long x = 0;
  if (!read_integer(key, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), x)) return false;
  out = static_cast<int>(x);
  return true;
}

bool JsonFields::read(std::string_view key, long& out) const {
  long long x = 0;
  if (!read_integer(key, std::numeric_limits<long>::min(), std::numeric_limits<long>::max(), x)) return false;
  out = static_cast<long>(x);
  return true;
}

bool JsonFields::read(std::string_view key, long long& out) const {
  return read_integer(key, std::numeric_limits<long long>::min(), std::numeric_limits<long long>::max(), out);
}

bool JsonFields::read(std::string_view key, std::uint64_t& out) const {
  return read_of_type(*this, key, &Json::is_number_unsigned, "must be a non-negative integer", out);
}

bool JsonFields::read(std::string_view key, double& out) const {
  return read_of_type(*this, key, &Json::is_number, "must be a number", out);
}

bool JsonFields::read(std::string_view key, bool& out) const {
  return read_of_type(*this, key, &Json::is_boolean, "must be true or false", out);
}

bool JsonFields::read(std::string_view key, std::string& out) const {
  return read_of_type(*this, key, &Json::is_string, "must be a string", out);
}

}  // namespace tttlab
