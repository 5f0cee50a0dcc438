#include "lab/state/json_fields.hpp"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tttlab/io/limits.hpp"

namespace tttlab::lab {
namespace {

thread_local KeyLog* t_key_log = nullptr;

std::string joined(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

const nlohmann::json& empty_object() {
  static const nlohmann::json e = nlohmann::json::object();
  return e;
}

std::string type_of(const nlohmann::json& v) { return v.type_name(); }

// A value quoted in a message: its JSON text, clipped, so that a megabyte string or a deep array in a
// state file gives a short line. Containers are described rather than printed (printing recurses).
std::string shown(const nlohmann::json& v) {
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " entries";
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " keys";
  if (v.is_string()) return clip(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 60);
  return clip(v.dump(), 60);
}

}  // namespace

KeyLog::KeyLog() : m_outer(t_key_log) { t_key_log = this; }
KeyLog::~KeyLog() { t_key_log = m_outer; }

void KeyLog::walk(const nlohmann::json& j, const std::string& path, std::vector<std::string>& out) const {
  if (!j.is_object()) return;
  const bool judged = m_readers.count(path) > 0;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string p = joined(path, it.key());
    if (judged && !m_seen.count(p))
      out.push_back(p);
    else
      walk(it.value(), p, out);
  }
}

std::vector<std::string> KeyLog::unknown(const nlohmann::json& doc) const {
  std::vector<std::string> out;
  walk(doc, "", out);
  return out;
}

std::vector<std::string> KeyLog::notes(const nlohmann::json& doc, const std::string& file) const {
  std::vector<std::string> out;
  for (const auto& k : unknown(doc))
    out.push_back(clip(file, 240) + ": unknown key \"" + clip(k) + "\" (ignored)");
  return out;
}

FieldReader::FieldReader(const nlohmann::json& j, std::string path) : j_(j), m_path(std::move(path)) {
  if (!j_.is_object())
    throw StateError(m_path + ": expected an object, got " + type_of(j_));
  if (t_key_log) t_key_log->m_readers.insert(m_path);
}

std::string FieldReader::where(std::string_view key) const {
  return m_path.empty() ? clip(key) : m_path + "." + clip(key);
}

const nlohmann::json* FieldReader::field(std::string_view key) const {
  if (t_key_log) t_key_log->m_seen.insert(joined(m_path, key));
  auto it = j_.find(key);
  return it == j_.end() ? nullptr : &*it;
}

bool FieldReader::has(std::string_view key) const { return field(key) != nullptr; }

bool FieldReader::boolean(std::string_view key, bool fallback) const {
  const auto* v = field(key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw StateError(where(key) + ": expected true or false, got " + type_of(*v));
  return v->get<bool>();
}

long long FieldReader::integer(std::string_view key, long long lo, long long hi,
                               long long fallback) const {
  const auto* v = field(key);
  if (!v) return fallback;
  const std::string range = " in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!v->is_number_integer())
    throw StateError(where(key) + ": expected an integer" + range + ", got " + shown(*v));
  long long x = 0;
  if (v->is_number_unsigned()) {
    const auto u = v->get<unsigned long long>();
    if (u > static_cast<unsigned long long>(hi))
      throw StateError(where(key) + ": expected an integer" + range + ", got " + shown(*v));
    x = static_cast<long long>(u);
  } else {
    x = v->get<long long>();
  }
  if (x < lo || x > hi)
    throw StateError(where(key) + ": expected an integer" + range + ", got " + std::to_string(x));
  return x;
}

std::uint64_t FieldReader::uint64(std::string_view key, std::uint64_t fallback) const {
  const auto* v = field(key);
  if (!v) return fallback;
  if (v->is_number_unsigned()) return v->get<std::uint64_t>();
  if (v->is_number_integer() && v->get<long long>() >= 0)
    return static_cast<std::uint64_t>(v->get<long long>());
  throw StateError(where(key) + ": expected a non-negative integer, got " + shown(*v));
}

double FieldReader::number(std::string_view key, double lo, double hi, double fallback) const {
  const auto* v = field(key);
  if (!v) return fallback;
  char range[96];
  std::snprintf(range, sizeof range, " in [%g, %g]", lo, hi);
  if (!v->is_number())
    throw StateError(where(key) + ": expected a number" + range + ", got " + shown(*v));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw StateError(where(key) + ": expected a number" + range + ", got " + shown(*v));
  return x;
}

std::string FieldReader::string(std::string_view key, std::size_t max_bytes,
                                std::string fallback) const {
  const auto* v = field(key);
  if (!v) return fallback;
  if (!v->is_string()) throw StateError(where(key) + ": expected a string, got " + type_of(*v));
  auto s = v->get<std::string>();
  if (s.size() > max_bytes)
    throw StateError(where(key) + ": text is " + std::to_string(s.size()) +
                     " bytes, at most " + std::to_string(max_bytes) + " are allowed");
  return s;
}

int FieldReader::choice(std::string_view key, std::initializer_list<std::string_view> choices,
                        int fallback) const {
  return choice(key, std::span<const std::string_view>(choices.begin(), choices.size()), fallback);
}

int FieldReader::choice(std::string_view key, std::span<const std::string_view> choices,
                        int fallback) const {
  const auto* v = field(key);
  if (!v) return fallback;
  std::string list;
  for (auto c : choices) list += (list.empty() ? "\"" : ", \"") + std::string(c) + "\"";
  if (v->is_string()) {
    const auto s = v->get<std::string>();
    int i = 0;
    for (auto c : choices) {
      if (s == c) return i;
      ++i;
    }
  }
  throw StateError(where(key) + ": expected one of " + list + ", got " + shown(*v));
}

std::vector<std::string> FieldReader::string_list(std::string_view key, std::size_t max_items, std::size_t max_bytes,
                                                  std::vector<std::string> fallback) const {
  const auto* v = field(key);
  if (!v) return fallback;
  if (!v->is_array()) throw StateError(where(key) + ": expected an array of strings, got " + type_of(*v));
  if (v->size() > max_items)
    throw StateError(where(key) + ": " + std::to_string(v->size()) + " entries, at most " +
                     std::to_string(max_items) + " are allowed");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const auto& e = (*v)[i];
    const std::string at = where(key) + "[" + std::to_string(i) + "]";
    if (!e.is_string()) throw StateError(at + ": expected a string, got " + shown(e));
    auto s = e.get<std::string>();
    if (s.size() > max_bytes)
      throw StateError(at + ": text is " + std::to_string(s.size()) + " bytes, at most " + std::to_string(max_bytes));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<long long> FieldReader::integer_list(std::string_view key, std::size_t max_items, long long lo,
                                                long long hi, std::vector<long long> fallback) const {
  const auto* v = field(key);
  if (!v) return fallback;
  const std::string range = " in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!v->is_array()) throw StateError(where(key) + ": expected an array of integers, got " + type_of(*v));
  if (v->size() > max_items)
    throw StateError(where(key) + ": " + std::to_string(v->size()) + " entries, at most " +
                     std::to_string(max_items) + " are allowed");
  std::vector<long long> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const auto& e = (*v)[i];
    const std::string at = where(key) + "[" + std::to_string(i) + "]";
    // Checked as unsigned first: a value above the range of long long must not wrap into it.
    const bool ok = e.is_number_integer() &&
                    (e.is_number_unsigned() ? e.get<unsigned long long>() <= static_cast<unsigned long long>(hi) &&
                                                  static_cast<long long>(e.get<unsigned long long>()) >= lo
                                            : e.get<long long>() >= lo && e.get<long long>() <= hi);
    if (!ok) throw StateError(at + ": expected an integer" + range + ", got " + shown(e));
    out.push_back(e.get<long long>());
  }
  return out;
}

std::set<std::string> FieldReader::string_set(std::string_view key, std::size_t max_items,
                                              std::size_t max_bytes) const {
  const auto l = string_list(key, max_items, max_bytes, {});
  return {l.begin(), l.end()};
}

FieldReader FieldReader::object(std::string_view key) const {
  const auto* v = field(key);
  return FieldReader(v ? *v : empty_object(), where(key));
}

}  // namespace tttlab::lab
