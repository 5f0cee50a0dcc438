// Atomic writes: content lands complete, replaces the old file, leaves no temporary behind, and an
// abandoned writer leaves the old file untouched. Reads fail with messages that name the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/io/temp_dir.hpp"
#include "tttlab/io/atomic_file.hpp"

namespace tttlab {
namespace {

using testing::TempDir;

std::size_t count_entries(const std::filesystem::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

TEST(AtomicFile, WritesReplacesAndLeavesNoTemporary) {
  TempDir dir;
  const auto path = dir / "config.json";
  write_file_atomic(path, std::string_view("first"));
  EXPECT_EQ(read_file_text(path), "first");
  write_file_atomic(path, std::string_view("second, longer"));
  EXPECT_EQ(read_file_text(path), "second, longer");
  const std::vector<std::uint8_t> bytes = {0, 1, 2, 255};
  write_file_atomic(path, bytes);
  EXPECT_EQ(read_file_bytes(path), bytes);
  EXPECT_EQ(count_entries(dir.path()), 1u);
}

TEST(AtomicFile, AbandonedWriterKeepsTheOldFile) {
  TempDir dir;
  const auto path = dir / "model.safetensors";
  write_file_atomic(path, std::string_view("old"));
  {
    AtomicFileWriter w(path);
    w.write(std::string_view("new but never committed"));
    EXPECT_TRUE(std::filesystem::exists(w.temp_path()));
    EXPECT_EQ(w.temp_path().parent_path(), path.parent_path());  // same directory: rename is atomic
  }
  EXPECT_EQ(read_file_text(path), "old");
  EXPECT_EQ(count_entries(dir.path()), 1u);
}

TEST(AtomicFile, StreamingWriterAndMove) {
  TempDir dir;
  const auto path = dir / "big.bin";
  AtomicFileWriter w(path);
  for (int i = 0; i < 1000; ++i) w.write(std::string_view("0123456789"));
  AtomicFileWriter moved(std::move(w));
  moved.commit();
  EXPECT_EQ(std::filesystem::file_size(path), 10000u);
  EXPECT_EQ(count_entries(dir.path()), 1u);
}

TEST(AtomicFile, ClearErrors) {
  TempDir dir;
  try {
    read_file_bytes(dir / "missing.txt");
    FAIL();
  } catch (const FileError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("missing.txt"), std::string::npos);
    EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
  }
  try {
    read_file_bytes(dir.path());
    FAIL();
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("directory"), std::string::npos) << e.what();
  }
  write_file_atomic(dir / "ten.txt", std::string_view("0123456789"));
  EXPECT_THROW(read_file_bytes(dir / "ten.txt", 9), FileError);
  EXPECT_NO_THROW(read_file_bytes(dir / "ten.txt", 10));
  try {
    write_file_atomic(dir / "no_such_dir" / "x.json", std::string_view("{}"));
    FAIL();
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tttlab
