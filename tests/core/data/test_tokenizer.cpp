// Byte tokenizer round trips and the visible rendering of every kind of byte.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tttlab/data/tokenizer.hpp"

namespace tttlab {
namespace {

TEST(ByteTokenizer, EncodesUtf8BytesAndRoundTripsAnyBytes) {
  const std::string text = "h\xC3\xA9!";  // "hé!"
  EXPECT_EQ(ByteTokenizer::encode(text), (std::vector<Token>{'h', 0xC3, 0xA9, '!'}));
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(ByteTokenizer::decode(ByteTokenizer::encode(all)), all);
  EXPECT_EQ(ByteTokenizer::vocab_size, 256);
}

TEST(ByteTokenizer, DecodeRejectsOutOfVocabularyTokens) {
  const std::vector<Token> bad = {65, 256};
  try {
    ByteTokenizer::decode(bad);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("token 256 at position 1"), std::string::npos) << e.what();
  }
  const std::vector<Token> neg = {-1};
  EXPECT_THROW(ByteTokenizer::decode(neg), std::invalid_argument);
}

TEST(RenderPrintable, EscapedStyle) {
  EXPECT_EQ(render_printable(std::string_view("a b\\c")), "a b\\\\c");
  EXPECT_EQ(render_printable(std::string_view("x\ny\tz\r")), "x\\ny\\tz\\r");
  EXPECT_EQ(render_printable(std::string_view("\x01\x7F", 2)), "\\x01\\x7F");
  EXPECT_EQ(render_printable(std::string_view("\0", 1)), "\\x00");
  EXPECT_EQ(render_printable(std::string_view("caf\xC3\xA9")), "caf\xC3\xA9");         // valid: kept
  EXPECT_EQ(render_printable(std::string_view("\xE2\x82")), "\\xE2\\x82");             // cut short
  EXPECT_EQ(render_printable(std::string_view("\xFF" "a")), "\\xFFa");                 // invalid byte
  EXPECT_EQ(render_printable(std::string_view("\xC0\x80")), "\\xC0\\x80");             // overlong NUL
  EXPECT_EQ(render_printable(std::string_view("\xC2\x85")), "\\u{0085}");              // C1 control
  EXPECT_EQ(render_printable(std::string_view("a\xE2\x80\xAE" "b")), "a\\u{202E}b");  // bidi override
  EXPECT_EQ(render_printable(std::string_view("a\nb"), {ByteRender::Escaped, true}), "a\\n\nb");
}

TEST(RenderPrintable, SymbolsStyle) {
  const RenderOptions sym{ByteRender::Symbols, false};
  EXPECT_EQ(render_printable(std::string_view("a\nb"), sym), "a\xE2\x90\x8A" "b");  // U+240A ␊
  EXPECT_EQ(render_printable(std::string_view("\t"), sym), "\xE2\x90\x89");         // U+2409 ␉
  EXPECT_EQ(render_printable(std::string_view("\x7F"), sym), "\xE2\x90\xA1");       // U+2421 ␡
  EXPECT_EQ(render_printable(std::string_view("\0", 1), sym), "\xE2\x90\x80");      // U+2400 ␀
  EXPECT_EQ(render_printable(std::string_view("\n"), {ByteRender::Symbols, true}), "\xE2\x90\x8A\n");
  EXPECT_EQ(render_printable(std::string_view("\xFF"), sym), "\\xFF");
}

TEST(RenderPrintable, TokensAndSingleTokens) {
  const std::vector<Token> toks = {'h', 0xC3, 0xA9};
  EXPECT_EQ(render_printable(std::span<const Token>(toks)), "h\xC3\xA9");
  EXPECT_EQ(render_token('a'), "a");
  EXPECT_EQ(render_token(' '), " ");
  EXPECT_EQ(render_token('\\'), "\\\\");
  EXPECT_EQ(render_token('\n'), "\\n");
  EXPECT_EQ(render_token('\n', ByteRender::Symbols), "\xE2\x90\x8A");
  EXPECT_EQ(render_token(0xC3), "\\xC3");  // half of a character on its own
  EXPECT_THROW(render_token(300), std::invalid_argument);
  // Every byte renders to valid UTF-8 with no raw control characters, in both styles.
  for (int b = 0; b < 256; ++b)
    for (auto style : {ByteRender::Escaped, ByteRender::Symbols}) {
      const std::string r = render_token(b, style);
      for (unsigned char c : r) EXPECT_TRUE(c >= 0x20 && c != 0x7F) << "byte " << b;
    }
}

}  // namespace
}  // namespace tttlab
