// app/lab/plot/ticks.hpp — where to put axis ticks and how to label them. Pure functions.
//
// Linear axes use "nice" steps 1·10ᵏ, 2·10ᵏ or 5·10ᵏ: the smallest such step that keeps the number of
// labelled ticks within a budget, so labels are short round numbers ("0.2 0.4 0.6", never
// "0.183 0.366"). Minor ticks subdivide a step into 5 (steps 1, 5) or 4 (step 2) parts.
// Log axes label decades (10ᵏ, every n-th decade when there are many) with minor ticks at 2..9·10ᵏ;
// a range of one or two decades labels 1, 2 and 5·10ᵏ, and a narrower one falls back to nice linear
// ticks, so a log axis is never left with a single label.
// Labels use the typographic minus sign (U+2212) and superscript exponents ("10⁻³"); CSV export
// uses plain ASCII instead (csv.hpp).
#pragma once

#include <string>
#include <vector>

#include "lab/plot/scale.hpp"

namespace tttlab::lab::plot {

struct Tick {
  double value = 0.0;
  bool major = true;   // major ticks carry a label and a grid line
  std::string label;   // empty for minor ticks
};

// The smallest step of the form {1, 2, 5}·10ᵏ that is ≥ raw (raw > 0).
double nice_step(double raw);

std::vector<Tick> linear_ticks(double lo, double hi, int max_major);
std::vector<Tick> log_ticks(double lo, double hi, int max_major);
std::vector<Tick> ticks_for(const AxisMap& axis, int max_major);

// A tick label for v on an axis with spacing `step`: as many decimals as the step needs, or
// scientific notation for very large/small magnitudes.
std::string format_tick(double v, double step);
// A read-out value with `digits` significant digits (hover tooltips, metric cards).
std::string format_value(double v, int digits = 4);
// "10⁻³" style power of ten.
std::string power_of_ten(int exponent);
// A duration for people: "42s", "3m 07s", "2h 05m"; "—" when unknown (negative or not finite).
std::string format_duration(double seconds);

}  // namespace tttlab::lab::plot
