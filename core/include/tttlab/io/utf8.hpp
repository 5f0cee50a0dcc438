// tttlab/io/utf8.hpp — strict UTF-8 decoding (RFC 3629), shared by the JSON reader, the text-file
// checks and the byte-token rendering.
//
// "Valid" means exactly what RFC 3629 allows: the shortest encoding of a scalar value in
// U+0000..U+10FFFF, excluding the surrogates U+D800..U+DFFF. Overlong forms (C0 80), surrogates
// (ED A0 80), values above U+10FFFF (F4 90 80 80), stray continuation bytes (80..BF) and sequences
// cut short are all invalid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tttlab {

// One decoded position: `length` bytes (1..4) encoding `code_point`, or length 0 when the bytes at
// that position do not start a valid sequence (the caller usually treats one byte as invalid and
// moves on by one).
struct Utf8Decoded {
  int length = 0;
  char32_t code_point = 0;
};

// Decodes the sequence starting at bytes[pos]; never reads outside `bytes` (pos ≥ size gives length 0).
Utf8Decoded utf8_decode(std::span<const std::uint8_t> bytes, std::size_t pos);

inline std::span<const std::uint8_t> as_bytes_span(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

bool is_valid_utf8(std::span<const std::uint8_t> bytes);
inline bool is_valid_utf8(std::string_view s) { return is_valid_utf8(as_bytes_span(s)); }

// Appends the UTF-8 encoding of a scalar value; throws std::invalid_argument for surrogates or
// values above U+10FFFF.
void append_utf8(std::string& out, char32_t code_point);

}  // namespace tttlab
