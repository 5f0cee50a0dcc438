// Strict JSON reader and writer (see tttlab/io/json.hpp).
#include "tttlab/io/json.hpp"

#include <charconv>
#include <cmath>
#include <unordered_set>

#include "tttlab/io/utf8.hpp"

namespace tttlab {

// ---------------------------------------------------------------------------------------------
// Parser: recursive descent over a bounded byte range. Every read goes through peek()/take(),
// which check the bounds, so a truncated or hostile document can only produce a JsonError.
class JsonParser {
 public:
  JsonParser(std::string_view text, const JsonParseOptions& opt) : m_text(text), m_opt(opt) {}

  Json parse_document() {
    skip_ws();
    Json v = parse_value(0);
    skip_ws();
    if (m_pos != m_text.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  std::string_view m_text;
  JsonParseOptions m_opt;
  std::size_t m_pos = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw JsonError("JSON: " + what + " at byte " + std::to_string(m_pos), m_pos);
  }
  bool at_end() const { return m_pos >= m_text.size(); }
  char peek() const { return at_end() ? '\0' : m_text[m_pos]; }
  void skip_ws() {
    while (!at_end()) {
      const char c = m_text[m_pos];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++m_pos;
    }
  }
  void expect(char c, const char* what) {
    if (at_end()) fail(std::string("unexpected end of text, expected ") + what);
    if (m_text[m_pos] != c) fail(std::string("expected ") + what);
    ++m_pos;
  }

  Json parse_value(int depth) {
    if (at_end()) fail("unexpected end of text, expected a value");
    switch (peek()) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return Json(parse_string());
      case 't': parse_literal("true"); return Json(true);
      case 'f': parse_literal("false"); return Json(false);
      case 'n': parse_literal("null"); return Json();
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        fail("unexpected character, expected a value");
    }
  }

  void parse_literal(std::string_view word) {
    if (m_text.substr(m_pos, word.size()) != word) fail("invalid literal");
    m_pos += word.size();
  }

  Json parse_object(int depth) {
    if (depth > m_opt.max_depth) fail("nesting deeper than " + std::to_string(m_opt.max_depth));
    ++m_pos;  // '{'
    Json::Object members;
    std::unordered_set<std::string> seen;  // keeps duplicate detection linear on huge objects
    skip_ws();
    if (peek() == '}') {
      ++m_pos;
      return Json(std::move(members));
    }
    for (;;) {
      skip_ws();
      if (peek() != '"') fail(at_end() ? "unexpected end of text in an object" : "expected a string key");
      const std::size_t key_pos = m_pos;
      std::string key = parse_string();
      if (!m_opt.allow_duplicate_keys && !seen.insert(key).second) {
        m_pos = key_pos;
        fail("duplicate key " + json_quote(key));
      }
      skip_ws();
      expect(':', "':' after an object key");
      skip_ws();
      Json v = parse_value(depth);
      members.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (at_end()) fail("unexpected end of text in an object");
      if (peek() == ',') {
        ++m_pos;
        continue;
      }
      expect('}', "',' or '}' in an object");
      return Json(std::move(members));
    }
  }

  Json parse_array(int depth) {
    if (depth > m_opt.max_depth) fail("nesting deeper than " + std::to_string(m_opt.max_depth));
    ++m_pos;  // '['
    Json::Array items;
    skip_ws();
    if (peek() == ']') {
      ++m_pos;
      return Json(std::move(items));
    }
    for (;;) {
      skip_ws();
      items.push_back(parse_value(depth));
      skip_ws();
      if (at_end()) fail("unexpected end of text in an array");
      if (peek() == ',') {
        ++m_pos;
        continue;
      }
      expect(']', "',' or ']' in an array");
      return Json(std::move(items));
    }
  }

  unsigned parse_hex4() {
    if (m_text.size() - m_pos < 4) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = m_text[m_pos++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f') v |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= unsigned(c - 'A' + 10);
      else fail("invalid hex digit in \\u escape");
    }
    return v;
  }

  std::string parse_string() {
    ++m_pos;  // opening quote
    std::string out;
    const auto bytes = as_bytes_span(m_text);
    for (;;) {
      if (at_end()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(m_text[m_pos]);
      if (c == '"') {
        ++m_pos;
        return out;
      }
      if (c < 0x20) fail("unescaped control character in a string");
      if (c == '\\') {
        ++m_pos;
        if (at_end()) fail("unterminated escape");
        const char e = m_text[m_pos++];
        switch (e) {
          case '"': out.push_back('"'); break;
          case '\\': out.push_back('\\'); break;
          case '/': out.push_back('/'); break;
          case 'b': out.push_back('\b'); break;
          case 'f': out.push_back('\f'); break;
          case 'n': out.push_back('\n'); break;
          case 'r': out.push_back('\r'); break;
          case 't': out.push_back('\t'); break;
          case 'u': {
            char32_t cp = parse_hex4();
            if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate in \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (m_text.substr(m_pos, 2) != "\\u") fail("high surrogate not followed by a low surrogate");
              m_pos += 2;
              const char32_t lo = parse_hex4();
              if (lo < 0xDC00 || lo > 0xDFFF) fail("high surrogate not followed by a low surrogate");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            append_utf8(out, cp);
            break;
          }
          default: --m_pos; fail("invalid escape");
        }
        continue;
      }
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
        ++m_pos;
        continue;
      }
      const Utf8Decoded d = utf8_decode(bytes, m_pos);
      if (d.length == 0) fail("invalid UTF-8 in a string");
      out.append(m_text.substr(m_pos, static_cast<std::size_t>(d.length)));
      m_pos += static_cast<std::size_t>(d.length);
    }
  }

  Json parse_number() {
    const std::size_t start = m_pos;
    auto digit = [&] { return !at_end() && m_text[m_pos] >= '0' && m_text[m_pos] <= '9'; };
    bool negative = false, integral = true;
    if (peek() == '-') {
      negative = true;
      ++m_pos;
    }
    if (!digit()) fail("invalid number");
    if (m_text[m_pos] == '0') {
      ++m_pos;
      if (digit()) fail("leading zeros are not allowed in numbers");
    } else {
      while (digit()) ++m_pos;
    }
    if (peek() == '.') {
      integral = false;
      ++m_pos;
      if (!digit()) fail("digits expected after the decimal point");
      while (digit()) ++m_pos;
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++m_pos;
      if (peek() == '+' || peek() == '-') ++m_pos;
      if (!digit()) fail("digits expected in the exponent");
      while (digit()) ++m_pos;
    }
    const char* first = m_text.data() + start;
    const char* last = m_text.data() + m_pos;
    if (integral) {
      if (negative) {
        std::int64_t v = 0;
        const auto r = std::from_chars(first, last, v);
        if (r.ec == std::errc() && r.ptr == last) return Json(static_cast<long long>(v));
      } else {
        std::uint64_t v = 0;
        const auto r = std::from_chars(first, last, v);
        if (r.ec == std::errc() && r.ptr == last) return Json(static_cast<unsigned long long>(v));
      }
      // Too large for an exact integer: fall through to a double, as other parsers do.
    }
    double d = 0;
    const auto r = std::from_chars(first, last, d);
    if (r.ec == std::errc::result_out_of_range) {
      m_pos = start;
      fail("number out of the range of a double");
    }
    if (r.ec != std::errc() || r.ptr != last) {
      m_pos = start;
      fail("invalid number");
    }
    return Json(d);
  }
};

Json Json::parse(std::string_view text, const JsonParseOptions& options) {
  return JsonParser(text, options).parse_document();
}

// ---------------------------------------------------------------------------------------------
// Access.

Json::Type Json::type() const {
  switch (m_value.index()) {
    case 0: return Type::Null;
    case 1: return Type::Bool;
    case 2: return Type::Integer;
    case 3: return Type::Double;
    case 4: return Type::String;
    case 5: return Type::Array;
    default: return Type::Object;
  }
}

namespace {
const char* type_name(Json::Type t) {
  switch (t) {
    case Json::Type::Null: return "null";
    case Json::Type::Bool: return "a boolean";
    case Json::Type::Integer: return "an integer";
    case Json::Type::Double: return "a number";
    case Json::Type::String: return "a string";
    case Json::Type::Array: return "an array";
    default: return "an object";
  }
}
[[noreturn]] void type_fail(const char* wanted, Json::Type got) {
  throw JsonError(std::string("JSON: expected ") + wanted + ", found " + type_name(got));
}
}  // namespace

bool Json::as_bool() const {
  if (auto* b = std::get_if<bool>(&m_value)) return *b;
  type_fail("a boolean", type());
}

bool Json::is_u64() const {
  const Int* i = std::get_if<Int>(&m_value);
  return i && !i->negative;
}

std::uint64_t Json::as_u64() const {
  if (auto* i = std::get_if<Int>(&m_value); i && !i->negative) return i->bits;
  type_fail("a non-negative integer", type());
}

std::int64_t Json::as_i64() const {
  if (auto* i = std::get_if<Int>(&m_value)) {
    if (i->negative || i->bits <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(i->bits);
    throw JsonError("JSON: integer " + std::to_string(i->bits) + " does not fit in int64");
  }
  type_fail("an integer", type());
}

double Json::as_double() const {
  if (auto* d = std::get_if<double>(&m_value)) return *d;
  if (auto* i = std::get_if<Int>(&m_value))
    return i->negative ? static_cast<double>(static_cast<std::int64_t>(i->bits)) : static_cast<double>(i->bits);
  type_fail("a number", type());
}

const std::string& Json::as_string() const {
  if (auto* s = std::get_if<std::string>(&m_value)) return *s;
  type_fail("a string", type());
}

const Json::Array& Json::as_array() const {
  if (auto* a = std::get_if<Array>(&m_value)) return *a;
  type_fail("an array", type());
}
Json::Array& Json::as_array() {
  if (auto* a = std::get_if<Array>(&m_value)) return *a;
  type_fail("an array", type());
}
const Json::Object& Json::as_object() const {
  if (auto* o = std::get_if<Object>(&m_value)) return *o;
  type_fail("an object", type());
}
Json::Object& Json::as_object() {
  if (auto* o = std::get_if<Object>(&m_value)) return *o;
  type_fail("an object", type());
}

const Json* Json::find(std::string_view key) const {
  if (auto* o = std::get_if<Object>(&m_value))
    for (const auto& m : *o)
      if (m.first == key) return &m.second;
  return nullptr;
}

Json& Json::operator[](std::string_view key) {
  if (is_null()) m_value = Object{};
  Object& o = as_object();
  for (auto& m : o)
    if (m.first == key) return m.second;
  o.emplace_back(std::string(key), Json());
  return o.back().second;
}

void Json::push_back(Json value) {
  if (is_null()) m_value = Array{};
  as_array().push_back(std::move(value));
}

// ---------------------------------------------------------------------------------------------
// Writer.

std::string json_quote(std::string_view s) {
  if (!is_valid_utf8(s)) throw JsonError("JSON: cannot write a string that is not valid UTF-8");
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out.push_back(hex[c >> 4]);
          out.push_back(hex[c & 15]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

void Json::dump_to(std::string& out, int indent, int level) const {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out.push_back('\n');
    out.append(static_cast<std::size_t>(indent * lvl), ' ');
  };
  switch (type()) {
    case Type::Null: out += "null"; break;
    case Type::Bool: out += std::get<bool>(m_value) ? "true" : "false"; break;
    case Type::Integer: {
      const Int& i = std::get<Int>(m_value);
      out += i.negative ? std::to_string(static_cast<std::int64_t>(i.bits)) : std::to_string(i.bits);
      break;
    }
    case Type::Double: {
      const double d = std::get<double>(m_value);
      if (!std::isfinite(d)) throw JsonError("JSON: cannot write a non-finite number (NaN or infinity)");
      char buf[64];
      const auto r = std::to_chars(buf, buf + sizeof buf, d);
      std::string_view txt(buf, static_cast<std::size_t>(r.ptr - buf));
      out += txt;
      // Keep the value a double when read back: "2" would come back as an exact integer.
      if (txt.find_first_of(".eE") == std::string_view::npos) out += ".0";
      break;
    }
    case Type::String: out += json_quote(std::get<std::string>(m_value)); break;
    case Type::Array: {
      const Array& a = std::get<Array>(m_value);
      out.push_back('[');
      for (std::size_t k = 0; k < a.size(); ++k) {
        if (k) out.push_back(',');
        newline(level + 1);
        a[k].dump_to(out, indent, level + 1);
      }
      if (!a.empty()) newline(level);
      out.push_back(']');
      break;
    }
    case Type::Object: {
      const Object& o = std::get<Object>(m_value);
      out.push_back('{');
      for (std::size_t k = 0; k < o.size(); ++k) {
        if (k) out.push_back(',');
        newline(level + 1);
        out += json_quote(o[k].first);
        out += indent < 0 ? ":" : ": ";
        o[k].second.dump_to(out, indent, level + 1);
      }
      if (!o.empty()) newline(level);
      out.push_back('}');
      break;
    }
  }
}

}  // namespace tttlab
