// Text statistics, the text rule and the training-text loader (see tttlab/data/text_file.hpp).
#include "tttlab/data/text_file.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "tttlab/io/limits.hpp"
#include "tttlab/io/utf8.hpp"

namespace tttlab {
namespace {

bool suspect_control(std::uint8_t b) {
  if (b == 0x7F) return true;
  if (b >= 0x20 || b == 0) return false;
  return b != '\t' && b != '\n' && b != '\r' && b != '\f';
}

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * share);
  return buf;
}

std::string quoted(std::string_view name) {
  std::string s;
  s += '\'';
  s += clip(name, 240);
  s += '\'';
  return s;
}

}  // namespace

TextStats compute_text_stats(std::span<const std::uint8_t> bytes) {
  TextStats s;
  s.bytes = bytes.size();
  auto mark_suspect = [&](std::size_t pos) {
    if (s.first_suspect < 0) s.first_suspect = static_cast<std::int64_t>(pos);
  };
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const std::uint8_t b = bytes[pos];
    if (b < 0x80) {
      ++s.ascii_bytes;
      ++s.utf8_chars;
      if (b == '\n') ++s.lines;
      if (b == 0) {
        ++s.nul_bytes;
        if (s.first_nul < 0) s.first_nul = static_cast<std::int64_t>(pos);
      } else if (suspect_control(b)) {
        ++s.control_bytes;
        mark_suspect(pos);
      }
      ++pos;
      continue;
    }
    const Utf8Decoded d = utf8_decode(bytes, pos);
    if (d.length == 0) {
      ++s.invalid_utf8_bytes;
      mark_suspect(pos);
      ++pos;
    } else {
      ++s.utf8_chars;
      pos += static_cast<std::size_t>(d.length);
    }
  }
  if (!bytes.empty() && bytes.back() != '\n') ++s.lines;
  for (const std::uint8_t b : bytes) ++s.histogram[b];
  for (const auto c : s.histogram) s.distinct_bytes += c > 0;
  return s;
}

std::optional<std::string> text_problem(const TextStats& s, std::string_view name, std::uint64_t min_bytes,
                                        std::int64_t seq_len) {
  if (min_bytes < 1) min_bytes = 1;
  if (seq_len > 0 && static_cast<std::uint64_t>(seq_len) + 1 > min_bytes) min_bytes = static_cast<std::uint64_t>(seq_len) + 1;
  if (s.bytes == 0) return quoted(name) + " is empty: a training text needs at least " + std::to_string(min_bytes) + " bytes";
  if (s.nul_bytes > 0)
    return quoted(name) + " looks like a binary file (NUL byte at offset " + std::to_string(s.first_nul) +
           "), not UTF-8 text; choose a plain-text file";
  if (s.suspect_share() > k_max_suspect_share)
    return quoted(name) + " is not UTF-8 text: " + percent(s.suspect_share()) +
           " of its bytes are invalid UTF-8 or control bytes (limit " + percent(k_max_suspect_share) +
           ", first at offset " + std::to_string(s.first_suspect) +
           "); convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8)";
  if (s.bytes < min_bytes) {
    if (seq_len > 0)
      return quoted(name) + " is too short: " + std::to_string(s.bytes) + " bytes, but sequence length " +
             std::to_string(seq_len) + " needs at least " + std::to_string(min_bytes) +
             " (T + 1); use a longer text or a shorter sequence length";
    return quoted(name) + " is too short: " + std::to_string(s.bytes) + " bytes, at least " +
           std::to_string(min_bytes) + " are needed";
  }
  return std::nullopt;
}

TextRead read_text_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
  TextRead r;
  try {
    r.file_bytes = regular_file_size(path);
  } catch (const FileError& e) {
    throw TextFileError(e.what());
  }
  if (r.file_bytes > max_bytes)
    throw TextFileError("cannot read '" + clip(path.string(), 240) + "': " + std::to_string(r.file_bytes) +
                        " bytes is more than the limit of " + std::to_string(max_bytes) + " bytes");
  check_memory(r.file_bytes, "reading '" + clip(path.string(), 240) + "'");
  // The whole size is reserved only once the first chunk has passed the rule: a file refused there
  // costs a chunk of memory, not its size (a 3 GiB sparse file would otherwise map 3 GiB).
  r.bytes.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(r.file_bytes, k_text_chunk_bytes)));
  // Running counts of the rule's measures over what was read (the full statistics are computed once,
  // on the whole text). Each chunk is scanned on its own: a UTF-8 character cut by a chunk boundary
  // counts as invalid bytes here, at most 3 bytes in a chunk of a MiB, far below the 1 % limit.
  TextStats seen;
  std::uint64_t offset = 0;  // in the file
  while (offset < r.file_bytes) {
    const std::uint64_t n = std::min<std::uint64_t>(k_text_chunk_bytes, r.file_bytes - offset);
    std::vector<std::uint8_t> chunk;
    try {
      chunk = read_file_range(path, offset, n);
    } catch (const FileError& e) {
      throw TextFileError(e.what());
    }
    std::size_t skip = 0;
    if (offset == 0 && chunk.size() >= 3 && chunk[0] == 0xEF && chunk[1] == 0xBB && chunk[2] == 0xBF) {
      r.bom = true;
      skip = 3;
    }
    offset += n;
    const std::size_t base = r.bytes.size();
    r.bytes.insert(r.bytes.end(), chunk.begin() + static_cast<std::ptrdiff_t>(skip), chunk.end());
    const std::span<const std::uint8_t> fresh(r.bytes.data() + base, r.bytes.size() - base);
    if (const void* nul = std::memchr(fresh.data(), 0, fresh.size())) {
      seen.bytes = r.bytes.size();
      seen.nul_bytes = 1;
      seen.first_nul = static_cast<std::int64_t>(base + (static_cast<const std::uint8_t*>(nul) - fresh.data()));
      r.problem = text_problem(seen, path.string());
      return r;
    }
    const TextStats part = compute_text_stats(fresh);
    seen.bytes = r.bytes.size();
    seen.control_bytes += part.control_bytes;
    seen.invalid_utf8_bytes += part.invalid_utf8_bytes;
    if (seen.first_suspect < 0 && part.first_suspect >= 0)
      seen.first_suspect = static_cast<std::int64_t>(base) + part.first_suspect;
    if (offset < r.file_bytes && seen.bytes >= k_text_chunk_bytes && seen.suspect_share() > k_max_suspect_share) {
      r.problem = text_problem(seen, path.string());
      return r;
    }
    if (base == 0) r.bytes.reserve(static_cast<std::size_t>(r.file_bytes));
  }
  return r;
}

TextCorpus load_text_file(const std::filesystem::path& path, const TextLoadOptions& options) {
  TextCorpus c;
  c.path = path;
  TextRead r = read_text_file(path, options.max_bytes);
  if (r.problem) throw TextFileError(*r.problem);
  c.bytes = std::move(r.bytes);
  c.stats = compute_text_stats(c.bytes);
  if (auto problem = text_problem(c.stats, path.string(), 1, options.seq_len)) throw TextFileError(*problem);
  return c;
}

}  // namespace tttlab
