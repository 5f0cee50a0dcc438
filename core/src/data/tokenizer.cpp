// Byte tokenizer and visible rendering (see tttlab/data/tokenizer.hpp).
#include "tttlab/data/tokenizer.hpp"

#include <stdexcept>

#include "tttlab/io/utf8.hpp"

namespace tttlab {
namespace {

void append_hex_byte(std::string& out, std::uint8_t b) {
  static const char* hex = "0123456789ABCDEF";
  out += "\\x";
  out.push_back(hex[b >> 4]);
  out.push_back(hex[b & 15]);
}

// A control byte (C0 or DEL) in the chosen style.
void append_control(std::string& out, std::uint8_t b, const RenderOptions& opt) {
  if (opt.style == ByteRender::Symbols) {
    append_utf8(out, b == 0x7F ? char32_t(0x2421) : char32_t(0x2400 + b));
  } else if (b == '\n') {
    out += "\\n";
  } else if (b == '\t') {
    out += "\\t";
  } else if (b == '\r') {
    out += "\\r";
  } else {
    append_hex_byte(out, b);
  }
  if (b == '\n' && opt.keep_line_breaks) out.push_back('\n');
}

bool invisible_code_point(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069) || cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF;
}

void append_ascii(std::string& out, std::uint8_t b, const RenderOptions& opt) {
  if (b == '\\') out += "\\\\";
  else if (b >= 0x20 && b < 0x7F) out.push_back(static_cast<char>(b));
  else append_control(out, b, opt);
}

std::vector<std::uint8_t> tokens_to_bytes(std::span<const Token> tokens) {
  std::vector<std::uint8_t> bytes(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= k_byte_vocab)
      throw std::invalid_argument("byte tokenizer: token " + std::to_string(tokens[i]) + " at position " +
                                  std::to_string(i) + " is outside the byte vocabulary [0, 255]");
    bytes[i] = static_cast<std::uint8_t>(tokens[i]);
  }
  return bytes;
}

}  // namespace

std::vector<Token> ByteTokenizer::encode(std::string_view text) {
  std::vector<Token> out(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

std::string ByteTokenizer::decode(std::span<const Token> tokens) {
  const auto bytes = tokens_to_bytes(tokens);
  return std::string(bytes.begin(), bytes.end());
}

std::string render_printable(std::span<const std::uint8_t> bytes, const RenderOptions& opt) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const std::uint8_t b = bytes[pos];
    if (b < 0x80) {
      append_ascii(out, b, opt);
      ++pos;
      continue;
    }
    const Utf8Decoded d = utf8_decode(bytes, pos);
    if (d.length == 0) {
      append_hex_byte(out, b);  // invalid, or the start of a sequence cut short
      ++pos;
      continue;
    }
    if (invisible_code_point(d.code_point)) {
      static const char* hex = "0123456789ABCDEF";
      out += "\\u{";
      bool started = false;
      for (int shift = 20; shift >= 0; shift -= 4) {
        const unsigned nib = (d.code_point >> shift) & 15u;
        if (nib || started || shift < 16) {  // at least 4 hex digits
          out.push_back(hex[nib]);
          started = true;
        }
      }
      out += "}";
    } else {
      out.append(reinterpret_cast<const char*>(bytes.data() + pos), static_cast<std::size_t>(d.length));
    }
    pos += static_cast<std::size_t>(d.length);
  }
  return out;
}

std::string render_printable(std::span<const Token> tokens, const RenderOptions& options) {
  return render_printable(std::span<const std::uint8_t>(tokens_to_bytes(tokens)), options);
}

std::string render_token(Token token, ByteRender style) {
  const Token one[1] = {token};
  const auto bytes = tokens_to_bytes(one);
  std::string out;
  if (bytes[0] < 0x80) append_ascii(out, bytes[0], RenderOptions{style, false});
  else append_hex_byte(out, bytes[0]);
  return out;
}

}  // namespace tttlab
