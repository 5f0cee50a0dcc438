// tttlab/data/tokenizer.hpp — the byte-level tokenizer (vocabulary 256) and the printable rendering
// of byte tokens for the GUI.
//
// A token IS a byte: encoding UTF-8 text gives its bytes (so "é" is two tokens, 0xC3 0xA9) and
// decoding concatenates bytes back. Every byte string round-trips exactly, valid UTF-8 or not. There
// are no special tokens; tasks that need separators use ordinary bytes (see synthetic.hpp).
//
// RENDERING for display (token strips, samples, data previews) makes every byte visible and never
// lets raw control or invalid bytes reach the screen:
//   - printable ASCII is shown as itself, except the backslash, shown as \\ so escapes are unambiguous;
//   - complete, valid UTF-8 sequences of printable characters are shown as themselves;
//   - control bytes: ByteRender::Escaped shows \n \t \r and \xNN for the others (pure ASCII output);
//     ByteRender::Symbols shows the Unicode control pictures U+2400..U+2421 (␀ ␉ ␊ ␍ … ␡), which need
//     those glyphs in the GUI font (DejaVu Sans has them); with keep_line_breaks, a real newline follows
//     the visible mark of LF so that long text stays readable;
//   - invalid UTF-8 bytes, and the bytes of a sequence cut short (a window that ends mid-character),
//     are shown as \xNN, one per byte;
//   - valid but invisible or text-direction characters (C1 controls U+0080..U+009F, zero-width and
//     bidirectional marks U+200B..U+200F, U+202A..U+202E, U+2066..U+2069, line/paragraph separators
//     U+2028/U+2029, U+FEFF) are shown as \u{XXXX}, so a sample cannot reorder or hide text.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tttlab {

using Token = std::int32_t;
inline constexpr int k_byte_vocab = 256;

struct ByteTokenizer {
  static constexpr int vocab_size = k_byte_vocab;
  static std::vector<Token> encode(std::string_view text);
  // Throws std::invalid_argument naming the first token outside [0, 255] and its position.
  static std::string decode(std::span<const Token> tokens);
};

enum class ByteRender { Escaped, Symbols };

struct RenderOptions {
  ByteRender style = ByteRender::Escaped;
  bool keep_line_breaks = false;  // follow the mark of each LF byte with a real newline
};

std::string render_printable(std::span<const std::uint8_t> bytes, const RenderOptions& options = {});
inline std::string render_printable(std::string_view text, const RenderOptions& options = {}) {
  return render_printable(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()),
                          options);
}
// Tokens outside [0, 255] throw std::invalid_argument.
std::string render_printable(std::span<const Token> tokens, const RenderOptions& options = {});

// One token on its own (a chip in a token strip): bytes 0x80..0xFF are never a whole character by
// themselves, so they are always \xNN here.
std::string render_token(Token token, ByteRender style = ByteRender::Escaped);

}  // namespace tttlab
