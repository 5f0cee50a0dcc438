// Bounded message text and the memory budget (see tttlab/io/limits.hpp).
#include "tttlab/io/limits.hpp"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>

namespace tttlab {

std::string printable(std::string_view text) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  const auto escape = [&](unsigned char b, const char* prefix) {
    out += prefix;
    out += hex[b >> 4];
    out += hex[b & 15];
  };
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (c < 0x20 || c == 0x7f) escape(c, "\\x");
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlong forms, no surrogates) is kept whole; anything else is
    // escaped one byte at a time.
    int len = 0;
    std::uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    bool ok = len > 0 && i + static_cast<std::size_t>(len) <= text.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    ok = ok && !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) &&
         !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      escape(c, "\\x");
      ++i;
    } else if (cp >= 0x80 && cp <= 0x9F) {  // C1 controls: some terminals act on them
      escape(static_cast<unsigned char>(cp), "\\u00");
      i += 2;
    } else {
      out.append(text.substr(i, static_cast<std::size_t>(len)));
      i += static_cast<std::size_t>(len);
    }
  }
  return out;
}

std::string clip(std::string_view text, std::size_t max) {
  if (text.size() <= max) return printable(text);
  std::size_t cut = max;
  // Back up over UTF-8 continuation bytes so that the cut never splits a character.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  std::string out = printable(text.substr(0, cut));
  out += "… (";
  out += std::to_string(text.size());
  out += " bytes)";
  return out;
}

std::string format_bytes(std::uint64_t bytes) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::uint64_t parse_memory_size(std::string_view text) {
  const auto bad = [&]() -> std::uint64_t {
    throw MemoryLimitError("TTTLAB_MAX_MEMORY='" + clip(text, 40) +
                           "' is not a size (write bytes, or a number with K, M, G or T, e.g. 2G)");
  };
  std::size_t i = 0;
  std::uint64_t n = 0;
  while (i < text.size() && text[i] == ' ') ++i;
  const std::size_t digits = i;
  double value = 0;
  bool fraction = false;
  double scale = 1;
  for (; i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'); ++i) {
    if (text[i] == '.') {
      if (fraction) bad();
      fraction = true;
      continue;
    }
    if (fraction) scale /= 10;
    value = fraction ? value + (text[i] - '0') * scale : value * 10 + (text[i] - '0');
    if (value > 1e20) bad();
  }
  if (i == digits) bad();
  std::string unit;
  for (; i < text.size(); ++i)
    if (text[i] != ' ') unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
  double mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") mult = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TIB") mult = 1024.0 * 1024 * 1024 * 1024;
  else bad();
  const double bytes = value * mult;
  if (!(bytes >= 1) || bytes > 1.8e19) bad();
  n = static_cast<std::uint64_t>(bytes);
  return n;
}

namespace {

// MemAvailable in bytes, 0 when /proc/meminfo is missing or lacks it.
std::uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

}  // namespace

MemoryBudget memory_budget() {
  MemoryBudget b;
  if (const std::uint64_t avail = mem_available()) {
    b.bytes = avail;
    b.source = "the memory available on this machine (MemAvailable; set TTTLAB_MAX_MEMORY to change the cap)";
  } else {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    b.bytes = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                                    : std::numeric_limits<std::uint64_t>::max();
    b.source = "the physical memory of this machine";
  }
  if (const char* cap = std::getenv("TTTLAB_MAX_MEMORY"); cap && *cap) {
    const std::uint64_t c = parse_memory_size(cap);
    if (c < b.bytes) {
      b.bytes = c;
      b.source = "TTTLAB_MAX_MEMORY=" + clip(cap, 40);
    }
  }
  return b;
}

void check_memory(std::uint64_t estimate, const std::string& what) {
  const MemoryBudget b = memory_budget();
  if (estimate > b.bytes)
    throw MemoryLimitError(what + " would need about " + format_bytes(estimate) + " of memory, more than the " +
                           format_bytes(b.bytes) + " allowed by " + b.source);
}

}  // namespace tttlab
