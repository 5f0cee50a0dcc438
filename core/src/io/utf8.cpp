// Strict UTF-8 decoding (see tttlab/io/utf8.hpp).
#include "tttlab/io/utf8.hpp"

#include <stdexcept>

namespace tttlab {

Utf8Decoded utf8_decode(std::span<const std::uint8_t> bytes, std::size_t pos) {
  if (pos >= bytes.size()) return {};
  const std::uint8_t b0 = bytes[pos];
  if (b0 < 0x80) return {1, b0};
  int len;
  char32_t cp;
  char32_t min_cp;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min_cp = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min_cp = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min_cp = 0x10000;
  } else {
    return {};  // a continuation byte or F8..FF
  }
  if (bytes.size() - pos < static_cast<std::size_t>(len)) return {};
  for (int i = 1; i < len; ++i) {
    const std::uint8_t b = bytes[pos + i];
    if ((b & 0xC0) != 0x80) return {};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {};
  return {len, cp};
}

bool is_valid_utf8(std::span<const std::uint8_t> bytes) {
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    if (bytes[pos] < 0x80) {  // ASCII fast path
      ++pos;
      continue;
    }
    const Utf8Decoded d = utf8_decode(bytes, pos);
    if (d.length == 0) return false;
    pos += static_cast<std::size_t>(d.length);
  }
  return true;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    throw std::invalid_argument("append_utf8: not a Unicode scalar value");
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace tttlab
