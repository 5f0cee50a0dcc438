// Text statistics, the text rule (NUL, 1 % suspect bytes) and the loader's one-line errors.
#include <gtest/gtest.h>

#include <string>

#include "core/io/temp_dir.hpp"
#include "tttlab/data/text_file.hpp"
#include "tttlab/io/utf8.hpp"

namespace tttlab {
namespace {

using testing::TempDir;

TEST(TextStats, CountsBytesLinesCharactersAndSuspects) {
  const std::string text = "ab\ncd\xC3\xA9\n\xFF" "e\x01";  // 2 full lines + a final line without LF
  const TextStats s = compute_text_stats(as_bytes_span(text));
  EXPECT_EQ(s.bytes, 11u);
  EXPECT_EQ(s.lines, 3u);
  EXPECT_EQ(s.ascii_bytes, 8u);
  EXPECT_EQ(s.invalid_utf8_bytes, 1u);
  EXPECT_EQ(s.control_bytes, 1u);
  EXPECT_EQ(s.first_suspect, 8);
  EXPECT_EQ(s.utf8_chars, 9u);
  EXPECT_EQ(s.distinct_bytes, 10u);  // a b \n c d C3 A9 FF e 01
  EXPECT_EQ(s.histogram['\n'], 2u);
  EXPECT_DOUBLE_EQ(s.suspect_share(), 2.0 / 11.0);
  EXPECT_EQ(compute_text_stats(as_bytes_span("x\n")).lines, 1u);
  EXPECT_EQ(compute_text_stats({}).lines, 0u);
}

TEST(TextRule, ToleratesOnePercentAndNoMore) {
  std::string text(1000, 'a');
  text[10] = '\xFF';  // 0.1 %
  EXPECT_FALSE(text_problem(compute_text_stats(as_bytes_span(text)), "t.txt"));
  for (int i = 0; i < 10; ++i) text[100 + i] = '\x02';  // now 1.1 %
  const auto p = text_problem(compute_text_stats(as_bytes_span(text)), "t.txt");
  ASSERT_TRUE(p);
  EXPECT_NE(p->find("is not UTF-8 text: 1.1%"), std::string::npos) << *p;
  EXPECT_NE(p->find("first at offset 10"), std::string::npos) << *p;
  // Tab, LF, CR and form feed are text.
  EXPECT_FALSE(text_problem(compute_text_stats(as_bytes_span("a\tb\r\n\fc")), "t.txt"));
}

class TextFileLoad : public ::testing::Test {
 protected:
  TempDir dir;
  std::filesystem::path put(const std::string& name, const std::string& content) {
    const auto p = dir / name;
    write_file_atomic(p, std::string_view(content));
    return p;
  }
  std::string error_of(const std::filesystem::path& p, std::int64_t seq_len = 0) {
    try {
      load_text_file(p, {.seq_len = seq_len});
    } catch (const TextFileError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(p.filename().string()), std::string::npos) << "message does not name the file: " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      return msg;
    }
    ADD_FAILURE() << "loaded " << p;
    return {};
  }
};

TEST_F(TextFileLoad, LoadsTextAndDropsByteOrderMark) {
  const auto c = load_text_file(put("ok.txt", "\xEF\xBB\xBFhello world\n"), {.seq_len = 8});
  EXPECT_EQ(std::string(c.bytes.begin(), c.bytes.end()), "hello world\n");
  EXPECT_EQ(c.stats.bytes, 12u);
}

TEST_F(TextFileLoad, MissingFile) {
  EXPECT_NE(error_of(dir / "nope.txt").find("No such file or directory"), std::string::npos);
}

TEST_F(TextFileLoad, EmptyFile) {
  EXPECT_NE(error_of(put("empty.txt", "")).find("is empty"), std::string::npos);
}

TEST_F(TextFileLoad, BinaryWithNul) {
  EXPECT_NE(error_of(put("img.bin", std::string("GIF89a\0\0\1", 9))).find("binary file (NUL byte at offset 6)"),
            std::string::npos);
}

TEST_F(TextFileLoad, Latin1IsNotUtf8) {
  // "café crème brûlée" in Latin-1: 4 stray bytes out of 17 (24 %).
  const std::string msg = error_of(put("latin1.txt", "caf\xE9 cr\xE8me br\xFBl\xE9" "e"));
  EXPECT_NE(msg.find("not UTF-8 text"), std::string::npos) << msg;
  EXPECT_NE(msg.find("iconv"), std::string::npos) << msg;
}

TEST_F(TextFileLoad, TooShortForSequenceLength) {
  const std::string msg = error_of(put("short.txt", std::string(100, 'x')), 256);
  EXPECT_NE(msg.find("100 bytes, but sequence length 256 needs at least 257"), std::string::npos) << msg;
  EXPECT_NO_THROW(load_text_file(put("exact.txt", std::string(257, 'x')), {.seq_len = 256}));
}

TEST_F(TextFileLoad, DirectoryAndSizeLimit) {
  EXPECT_NE(error_of(dir.path()).find("directory"), std::string::npos);
  const auto p = put("big.txt", std::string(100, 'x'));
  EXPECT_THROW(load_text_file(p, {.seq_len = 0, .max_bytes = 50}), TextFileError);
}

}  // namespace
}  // namespace tttlab
