// Text statistics, the text rule and the training-text loader (see tttlab/data/text_file.hpp).
#include "tttlab/data/text_file.hpp"

#include <cstdio>

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
  s += name;
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

TextCorpus load_text_file(const std::filesystem::path& path, const TextLoadOptions& options) {
  TextCorpus c;
  c.path = path;
  try {
    c.bytes = read_file_bytes(path, options.max_bytes);
  } catch (const FileError& e) {
    throw TextFileError(e.what());
  }
  if (c.bytes.size() >= 3 && c.bytes[0] == 0xEF && c.bytes[1] == 0xBB && c.bytes[2] == 0xBF)
    c.bytes.erase(c.bytes.begin(), c.bytes.begin() + 3);
  c.stats = compute_text_stats(c.bytes);
  if (auto problem = text_problem(c.stats, path.string(), 1, options.seq_len)) throw TextFileError(*problem);
  return c;
}

}  // namespace tttlab
