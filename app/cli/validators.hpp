// Checks of command-line values shared by the subcommands.
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>

#include "tttlab/io/limits.hpp"

namespace tttlab::cli {

// A number in [lo, hi]. CLI::Range alone lets "nan" through (every comparison with NaN is false),
// and a NaN temperature or learning rate would then reach the engine; this refuses NaN and ±inf.
inline CLI::Validator finite_range(double lo, double hi) {
  std::ostringstream desc;
  desc << "FLOAT in [" << lo << " - " << hi << "]";
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "value " + text + " is not a number";
        if (!std::isfinite(v)) return "value " + text + " is not a finite number";
        if (v < lo || v > hi) {
          std::ostringstream m;
          m << "value " << text << " is not in [" << lo << ", " << hi << "]";
          return m.str();
        }
        return {};
      },
      desc.str());
}

// A seed: a decimal integer in [0, 2^64 - 1]. CLI11 alone turns "-1" into 2^64 - 1 and a number
// above 2^64 - 1 into 2^64 - 1 without a word, so two different seeds would silently run the same.
inline CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::string bad = "seed " + clip(text, 40) + " is not a decimal integer in [0, 18446744073709551615]";
        if (text.empty() || text.size() > 20) return bad;
        for (const char c : text)
          if (c < '0' || c > '9') return bad;
        errno = 0;
        (void)std::strtoull(text.c_str(), nullptr, 10);
        if (errno == ERANGE) return bad;
        return {};
      },
      "UINT64");
}

// A file or directory name that must not be empty: an empty --checkpoint would otherwise mean "no
// checkpoint" (a random layer) and an empty --out the current directory.
inline CLI::Validator non_empty_path() {
  return CLI::Validator(
      [](std::string& text) -> std::string { return text.empty() ? "the path must not be empty" : std::string(); },
      "PATH");
}

}  // namespace tttlab::cli
