// The training-text loader reads in chunks and refuses a binary or non-UTF-8 file at the first sign of
// it: a multi-gigabyte file costs a chunk, not its size (tttlab/data/text_file.hpp, READING).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/io/temp_dir.hpp"
#include "tttlab/data/text_file.hpp"
#include "tttlab/io/limits.hpp"

namespace tttlab {
namespace {

namespace fs = std::filesystem;

std::string load_error(const fs::path& p) {
  try {
    (void)load_text_file(p);
  } catch (const TextFileError& e) {
    return e.what();
  }
  return "";
}

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

// A 3 GiB sparse file is all NUL bytes: refused at offset 0 after one chunk, having read and held one
// chunk, not the file's size. (What is asserted is the bytes read and held, not the time taken, which
// depends on the machine's load.)
TEST(LosesNothing, F06_loader_refuses_sparse_binary_at_first_chunk) {
  testing::TempDir dir;
  const fs::path p = dir / "big.bin";
  write(p, "");
  fs::resize_file(p, 3ull << 30);
  const std::string e = load_error(p);
  EXPECT_NE(e.find("looks like a binary file (NUL byte at offset 0)"), std::string::npos) << e;
  const TextRead r = read_text_file(p);
  ASSERT_TRUE(r.problem);
  EXPECT_EQ(r.file_bytes, 3ull << 30);
  EXPECT_EQ(r.bytes.size(), k_text_chunk_bytes);      // one chunk read, no more
  EXPECT_LE(r.bytes.capacity(), k_text_chunk_bytes);  // and no room taken for the rest
}

// 2 MiB that are not UTF-8, then 3 GiB of NUL: refused as not UTF-8 after the first MiB, the NUL
// bytes never reached.
TEST(LosesNothing, F06_loader_refuses_non_utf8_after_first_chunk) {
  testing::TempDir dir;
  const fs::path p = dir / "latin1.txt";
  write(p, std::string(2 << 20, '\xff'));
  fs::resize_file(p, 3ull << 30);
  const std::string e = load_error(p);
  EXPECT_NE(e.find("is not UTF-8 text: 100.0% of its bytes are invalid UTF-8 or control bytes (limit 1.0%, first at "
                   "offset 0)"),
            std::string::npos)
      << e;
  const TextRead r = read_text_file(p);
  ASSERT_TRUE(r.problem);
  EXPECT_EQ(r.bytes.size(), k_text_chunk_bytes);  // the first MiB decided it
  EXPECT_LE(r.bytes.capacity(), k_text_chunk_bytes);
}

// The NUL message names the same offset as before, also past the first chunk and after a BOM.
TEST(LosesNothing, F06_loader_nul_offset_past_first_chunk) {
  testing::TempDir dir;
  const fs::path p = dir / "late-nul.txt";
  std::string text = "\xEF\xBB\xBF" + std::string((1 << 20) + 100, 'a');
  text[3 + (1 << 20) + 7] = '\0';
  write(p, text);
  const std::string e = load_error(p);
  EXPECT_NE(e.find("NUL byte at offset " + std::to_string((1 << 20) + 7) + ")"), std::string::npos) << e;
}

// A few stray bytes in a large clean file stay under the limit: the file loads whole, BOM dropped.
TEST(LosesNothing, F06_loader_reads_clean_multi_chunk_text_whole) {
  testing::TempDir dir;
  const fs::path p = dir / "clean.txt";
  std::string text = "\xEF\xBB\xBF";
  while (text.size() < (5u << 20) / 2) text += "The cat sat on the mat. ";
  text[1000] = '\x01';
  write(p, text);
  const TextCorpus c = load_text_file(p);
  EXPECT_EQ(c.bytes.size(), text.size() - 3);
  EXPECT_EQ(c.stats.control_bytes, 1u);
}

// Size against max_bytes and the memory budget, before reading.
TEST(LosesNothing, F06_loader_checks_size_and_memory_before_reading) {
  testing::TempDir dir;
  const fs::path p = dir / "big.txt";
  write(p, "");
  fs::resize_file(p, 64ull << 20);
  TextLoadOptions small;
  small.max_bytes = 1 << 20;
  try {
    (void)load_text_file(p, small);
    FAIL() << "no error";
  } catch (const TextFileError& e) {
    EXPECT_NE(std::string(e.what()).find("is more than the limit of 1048576 bytes"), std::string::npos) << e.what();
  }
  const char* old = std::getenv("TTTLAB_MAX_MEMORY");
  const std::string saved = old ? old : "";
  ::setenv("TTTLAB_MAX_MEMORY", "16M", 1);
  EXPECT_THROW((void)load_text_file(p), MemoryLimitError);
  if (old) ::setenv("TTTLAB_MAX_MEMORY", saved.c_str(), 1);
  else ::unsetenv("TTTLAB_MAX_MEMORY");
}

// A byte-order mark alone is an empty text.
TEST(LosesNothing, F17_bom_only_file_is_empty) {
  testing::TempDir dir;
  const fs::path p = dir / "bom.txt";
  write(p, "\xEF\xBB\xBF");
  const TextRead r = read_text_file(p);
  EXPECT_TRUE(r.bom);
  EXPECT_TRUE(r.bytes.empty());
  EXPECT_NE(load_error(p).find("is empty"), std::string::npos);
}

}  // namespace
}  // namespace tttlab
