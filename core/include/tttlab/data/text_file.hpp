// tttlab/data/text_file.hpp — loading a UTF-8 text file for byte-level training, with statistics
// and a verdict on whether the file is usable.
//
// THE TEXT RULE (what "binary" means here). A file is refused as training text when
//   (1) it contains a NUL byte (0x00): text files never do; binary formats almost always do; or
//   (2) more than 1 % of its bytes are "suspect": bytes that are not part of valid UTF-8
//       (RFC 3629, see io/utf8.hpp) plus control bytes other than TAB, LF, CR and FF (form feed,
//       kept because old plain-text files use it as a page break), i.e. 0x01..0x08, 0x0B, 0x0E..0x1F
//       and DEL 0x7F.
// The 1 % tolerance lets through an otherwise clean UTF-8 file with a few stray bytes (a Latin-1
// "é" pasted in); a Latin-1 or UTF-16 file, an image or an archive fails it by a wide margin.
// A leading UTF-8 byte-order mark (EF BB BF) is an encoding marker, not text: load_text_file drops it.
//
// READING. A file is read in chunks of k_text_chunk_bytes, and refused as soon as it breaks the rule:
// at the first NUL byte, and, once k_text_chunk_bytes have been read, as soon as the suspect share of
// what was read so far is over the limit. Its size is checked against the limit and the memory budget
// (tttlab/io/limits.hpp) before anything is read, so a multi-gigabyte binary file costs a second and a
// megabyte, not its size. (An early refusal quotes the share of the part read.)
//
// ERRORS are TextFileError (a FileError) with one line naming the file and saying what to do:
//   cannot read 'x.txt': No such file or directory
//   'x.txt' is empty: a training text needs at least 257 bytes
//   'x.bin' looks like a binary file (NUL byte at offset 12), not UTF-8 text; choose a plain-text file
//   'x.txt' is not UTF-8 text: 37.5% of its bytes are invalid UTF-8 or control bytes (limit 1%, first
//       at offset 3); convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8)
//   'x.txt' is too short: 100 bytes, but sequence length 256 needs at least 257 (T + 1); use a longer
//       text or a shorter sequence length
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tttlab/io/atomic_file.hpp"

namespace tttlab {

class TextFileError : public FileError {
 public:
  using FileError::FileError;
};

inline constexpr double k_max_suspect_share = 0.01;

struct TextStats {
  std::uint64_t bytes = 0;
  std::uint64_t lines = 0;               // LF count, plus one for a final line without LF
  std::uint64_t distinct_bytes = 0;      // how many of the 256 byte values occur
  std::uint64_t ascii_bytes = 0;         // bytes < 0x80
  std::uint64_t nul_bytes = 0;
  std::uint64_t control_bytes = 0;       // suspect control bytes (see the rule above; NUL not included)
  std::uint64_t invalid_utf8_bytes = 0;  // bytes not part of a valid UTF-8 sequence
  std::uint64_t utf8_chars = 0;          // valid characters (ASCII included)
  std::int64_t first_nul = -1;           // byte offsets, −1 when none
  std::int64_t first_suspect = -1;
  std::array<std::uint64_t, 256> histogram{};

  double ascii_share() const { return bytes ? double(ascii_bytes) / double(bytes) : 0.0; }
  double suspect_share() const { return bytes ? double(control_bytes + invalid_utf8_bytes) / double(bytes) : 0.0; }
};

TextStats compute_text_stats(std::span<const std::uint8_t> bytes);

// Why `stats` cannot be used as training text (one line naming `name`), or nothing when it can.
// min_bytes ≥ 1; the "too short" message speaks of a sequence length when seq_len > 0.
std::optional<std::string> text_problem(const TextStats& stats, std::string_view name, std::uint64_t min_bytes = 1,
                                        std::int64_t seq_len = 0);

inline constexpr std::size_t k_text_chunk_bytes = 1 << 20;

// What read_text_file read: the whole file, or the part up to the point where it broke the rule.
struct TextRead {
  std::vector<std::uint8_t> bytes;     // without a leading UTF-8 BOM
  std::uint64_t file_bytes = 0;        // the file's size, BOM included
  bool bom = false;                    // a BOM was dropped
  std::optional<std::string> problem;  // set when reading stopped early: why (a text_problem message)
};

// Reads `path` as described above. Throws TextFileError when the file is missing, not a regular file
// or larger than max_bytes, and MemoryLimitError when its size is above the memory budget.
TextRead read_text_file(const std::filesystem::path& path, std::uint64_t max_bytes = 4ull << 30);

struct TextLoadOptions {
  std::int64_t seq_len = 0;                     // > 0: require at least seq_len + 1 bytes
  std::uint64_t max_bytes = 4ull << 30;         // refuse larger files (4 GiB)
};

struct TextCorpus {
  std::filesystem::path path;
  std::vector<std::uint8_t> bytes;  // the file's bytes, without a leading UTF-8 BOM
  TextStats stats;                  // of `bytes`
};

TextCorpus load_text_file(const std::filesystem::path& path, const TextLoadOptions& options = {});

}  // namespace tttlab
