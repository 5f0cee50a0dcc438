// tttlab/io/limits.hpp — limits that hostile or broken files must not get past: bounded text in
// error messages, and the memory a command may take.
//
// MESSAGES. Every error message that quotes something read from a file (a tensor name, a JSON value,
// a string field) goes through clip(): at most `max` bytes, cut on a UTF-8 boundary and marked
// "… (N bytes)", so that a 100 MB string in a file never becomes a 100 MB message.
//
// MEMORY. Loaders estimate what a model or a run will take (tttlab/model/memory.hpp says how) and call
// check_memory() BEFORE allocating it. The budget is the smaller of
//   - what the machine has: MemAvailable from /proc/meminfo (free memory plus what the kernel can
//     reclaim), or physical pages × page size from sysconf where /proc is missing; and
//   - a cap set by the user: the environment variable TTTLAB_MAX_MEMORY, in bytes or with a suffix
//     K, M, G, T (powers of 1024; "KiB", "MB", ... read the same), e.g. TTTLAB_MAX_MEMORY=2G.
// An estimate above the budget is a MemoryLimitError with one line naming what was estimated, the
// estimate, the budget and where the budget came from. A malformed TTTLAB_MAX_MEMORY is an error too
// (silently ignoring a safety cap would be worse).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tttlab {

class MemoryLimitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `text` made safe to print on a terminal: control bytes (C0 and DEL, newlines and tabs included), the
// C1 controls U+0080..U+009F and bytes that are not valid UTF-8 are written as escapes (\n, \r, \t,
// \xNN, \u00NN), so that text read from a file can neither retitle nor clear the user's terminal nor
// break a one-line message. Valid printable UTF-8 is kept as it is.
std::string printable(std::string_view text);
// printable(text), cut to at most `max` bytes of the input (on a UTF-8 character boundary) with
// "… (N bytes)" appended when cut. Every message that quotes a file's content or a path goes through it.
std::string clip(std::string_view text, std::size_t max = 80);

// "1.5 GiB", "300 MiB", "12 KiB", "512 bytes".
std::string format_bytes(std::uint64_t bytes);

struct MemoryBudget {
  std::uint64_t bytes = 0;
  std::string source;  // "available memory (MemAvailable)" or "TTTLAB_MAX_MEMORY=2G"
};
// The budget described above; re-read on every call (the environment or the machine may change).
MemoryBudget memory_budget();
// Parses a TTTLAB_MAX_MEMORY value; throws MemoryLimitError naming the variable when malformed.
std::uint64_t parse_memory_size(std::string_view text);
// Throws MemoryLimitError when `estimate` exceeds memory_budget():
//   "<what> would need about 12.0 GiB of memory, more than the 2.0 GiB allowed (TTTLAB_MAX_MEMORY=2G)"
void check_memory(std::uint64_t estimate, const std::string& what);

}  // namespace tttlab
