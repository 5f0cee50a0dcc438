// fuzz/fuzz_check.hpp — what the fuzz targets share: turning input bytes into text, a check that
// stops the fuzzer on a broken invariant, a parse that may refuse with its documented error, and the
// round trip of a config.
//
// A target catches only the error types its parser documents (the "clear error" every caller shows);
// any other exception escapes, and libFuzzer reports it as a crash like a sanitizer finding. FUZZ_CHECK
// covers what no sanitizer sees: a parser that accepted an input must give back values that make sense
// (a config that validates, a round trip that reads back the same).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace tttlab::fuzz {

[[noreturn]] inline void check_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: fuzz invariant broken: %s\n", file, line, what);
  std::abort();
}

inline std::string as_text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace tttlab::fuzz

#define FUZZ_CHECK(cond) \
  ((cond) ? static_cast<void>(0) : ::tttlab::fuzz::check_failed(#cond, __FILE__, __LINE__))

namespace tttlab::fuzz {

// What `parse()` returns, or nothing when it refuses with `Refusal`, the error type its parser
// documents (what hostile bytes should get). Any other exception escapes: a finding.
template <class Refusal, class Parse>
auto parsed_or_refused(Parse parse) -> std::optional<decltype(parse())> {
  try {
    return parse();
  } catch (const Refusal&) {
    return std::nullopt;
  }
}

// A config that a reader accepted reads back the same: to_json, from_json again, the same JSON.
template <class Config>
void check_round_trip(const Config& config, const char* source) {
  const std::string json = config.to_json();
  FUZZ_CHECK(Config::from_json(json, source).to_json() == json);
}

}  // namespace tttlab::fuzz
