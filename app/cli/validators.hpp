// Checks of command-line values shared by the subcommands.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <sstream>
#include <string>

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

}  // namespace tttlab::cli
