// tttlab/io/json.hpp — a small, strict JSON value for the engine's own files (safetensors headers,
// data manifests, configs).
//
// Why our own and not a library: core/ links Eigen and the standard library only, and the
// safetensors reader needs what general-purpose parsers do not give: duplicate keys reported (not
// silently overwritten), integers kept exact up to 2^64 − 1 (byte offsets), a nesting limit, and
// errors that carry the byte offset, all without ever reading out of bounds on hostile input.
//
// Grammar: RFC 8259 exactly. No comments, no trailing commas, no NaN/Infinity, strings must be valid
// UTF-8 with control characters escaped, \u escapes must pair surrogates correctly. Leading and
// trailing whitespace (space, tab, CR, LF) is allowed.
//
// Numbers: a literal without fraction or exponent that fits in uint64 (or, when negative, int64)
// is stored as an exact integer; every other number is a double (std::from_chars, locale-free).
// as_u64()/as_i64() accept only exact integers; as_double() accepts both.
//
// Objects keep their members in document (or insertion) order; keys are unique unless the parse
// option allows duplicates (then all are kept, in order, for the caller to report).
//
// Output (dump): compact, or indented by `indent` spaces; integers exactly, doubles in the shortest
// form that reads back to the same value. Non-finite doubles and invalid UTF-8 throw JsonError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tttlab {

// Parse errors carry the byte offset in the text where the problem was found; type errors
// (as_u64 on a string, ...) carry offset npos.
class JsonError : public std::runtime_error {
 public:
  JsonError(const std::string& what, std::size_t offset = npos) : std::runtime_error(what), m_offset(offset) {}
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  std::size_t offset() const { return m_offset; }

 private:
  std::size_t m_offset;
};

struct JsonParseOptions {
  int max_depth = 64;                 // nesting of arrays/objects
  bool allow_duplicate_keys = false;  // false: a repeated key is a JsonError
};

class Json {
 public:
  enum class Type { Null, Bool, Integer, Double, String, Array, Object };
  using Array = std::vector<Json>;
  using Member = std::pair<std::string, Json>;
  using Object = std::vector<Member>;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : m_value(b) {}
  Json(int v) : m_value(Int{v < 0, static_cast<std::uint64_t>(static_cast<std::int64_t>(v))}) {}
  Json(long v) : Json(static_cast<long long>(v)) {}
  Json(long long v) : m_value(Int{v < 0, static_cast<std::uint64_t>(v)}) {}
  Json(unsigned v) : m_value(Int{false, v}) {}
  Json(unsigned long v) : m_value(Int{false, v}) {}
  Json(unsigned long long v) : m_value(Int{false, v}) {}
  Json(double v) : m_value(v) {}
  Json(std::string s) : m_value(std::move(s)) {}
  Json(std::string_view s) : m_value(std::string(s)) {}
  Json(const char* s) : m_value(std::string(s)) {}
  Json(Array a) : m_value(std::move(a)) {}
  Json(Object o) : m_value(std::move(o)) {}

  static Json array() { return Json(Array{}); }
  static Json object() { return Json(Object{}); }
  static Json parse(std::string_view text, const JsonParseOptions& options = {});

  Type type() const;
  bool is_null() const { return type() == Type::Null; }
  bool is_bool() const { return type() == Type::Bool; }
  bool is_integer() const { return type() == Type::Integer; }
  bool is_u64() const;  // an exact integer ≥ 0 (as_u64 will succeed)
  bool is_number() const { return type() == Type::Integer || type() == Type::Double; }
  bool is_string() const { return type() == Type::String; }
  bool is_array() const { return type() == Type::Array; }
  bool is_object() const { return type() == Type::Object; }

  bool as_bool() const;
  std::uint64_t as_u64() const;  // exact non-negative integer
  std::int64_t as_i64() const;   // exact integer in int64 range
  double as_double() const;      // any number
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Object access. find returns nullptr when the key is absent (or this is not an object).
  const Json* find(std::string_view key) const;
  // Returns the member, appending a null member first if absent; turns a null value into an object.
  Json& operator[](std::string_view key);
  // Appends to an array; turns a null value into an array.
  void push_back(Json value);

  // indent < 0: compact; otherwise newline + indent spaces per level.
  std::string dump(int indent = -1) const;

  friend bool operator==(const Json& a, const Json& b) { return a.m_value == b.m_value; }

 private:
  struct Int {
    bool negative;        // value is the int64 reinterpretation of bits when negative
    std::uint64_t bits;
    friend bool operator==(const Int&, const Int&) = default;
  };
  std::variant<std::monostate, bool, Int, double, std::string, Array, Object> m_value;

  friend class JsonParser;
  void dump_to(std::string& out, int indent, int level) const;
};

// A JSON string literal (with quotes) for `s`; throws JsonError when s is not valid UTF-8.
std::string json_quote(std::string_view s);

}  // namespace tttlab
