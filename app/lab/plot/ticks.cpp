#include "lab/plot/ticks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tttlab::lab::plot {
namespace {

constexpr const char* kMinus = "\xE2\x88\x92";  // U+2212 MINUS SIGN

// Replaces the ASCII '-' of a printf result by U+2212 and tidies exponents ("1.5e-05" → "1.5e−5").
std::string typographic(const char* s) {
  std::string out;
  for (const char* p = s; *p; ++p) {
    if (*p == '-') {
      out += kMinus;
    } else if (*p == 'e' && (p[1] == '+' || p[1] == '-')) {
      out += 'e';
      if (p[1] == '-') out += kMinus;
      p += 2;
      while (*p == '0' && p[1] >= '0' && p[1] <= '9') ++p;  // drop leading zeros of the exponent
      out += *p;
    } else {
      out += *p;
    }
  }
  return out;
}

int decimals_for(double step) {
  return std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
}

}  // namespace

double nice_step(double raw) {
  if (!(raw > 0.0) || !std::isfinite(raw)) return 1.0;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw * (1.0 - 1e-12)) return m * p;
  return 10.0 * p;
}

std::string format_tick(double v, double step) {
  char buf[64];
  const double mag = std::max(std::abs(v), step);
  if (std::abs(v) < step * 1e-6) v = 0.0;  // no "−0.000"
  if (mag >= 1e5 || step < 1e-4) {
    // Enough significant digits to tell neighbouring ticks apart.
    const int sig = std::clamp(static_cast<int>(std::floor(std::log10(mag)) -
                                                 std::floor(std::log10(step) + 1e-9)) + 1,
                               1, 8);
    std::snprintf(buf, sizeof buf, "%.*e", sig - 1, v);
    return typographic(buf);
  }
  std::snprintf(buf, sizeof buf, "%.*f", decimals_for(step), v);
  return typographic(buf);
}

std::string format_value(double v, int digits) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "\xE2\x88\x9E" : std::string(kMinus) + "\xE2\x88\x9E";
  char buf[64];
  const double a = std::abs(v);
  if (a != 0.0 && (a < 1e-3 || a >= 1e6))
    std::snprintf(buf, sizeof buf, "%.*e", std::max(0, digits - 1), v);
  else
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return typographic(buf);
}

std::string power_of_ten(int e) {
  static const char* const kSup[] = {"\xE2\x81\xB0", "\xC2\xB9", "\xC2\xB2", "\xC2\xB3",
                                     "\xE2\x81\xB4", "\xE2\x81\xB5", "\xE2\x81\xB6", "\xE2\x81\xB7",
                                     "\xE2\x81\xB8", "\xE2\x81\xB9"};
  std::string s = "10";
  if (e < 0) s += "\xE2\x81\xBB";  // superscript minus
  const std::string digits = std::to_string(std::abs(e));
  for (char c : digits) s += kSup[c - '0'];
  return s;
}

std::vector<Tick> linear_ticks(double lo, double hi, int max_major) {
  std::vector<Tick> ticks;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return ticks;
  max_major = std::max(2, max_major);
  const double step = nice_step((hi - lo) / max_major);
  const double mant = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  const int minor_div = std::abs(mant - 2.0) < 1e-6 ? 4 : 5;
  const double minor = step / minor_div;
  const long k0 = static_cast<long>(std::ceil(lo / minor - 1e-9));
  const long k1 = static_cast<long>(std::floor(hi / minor + 1e-9));
  if (k1 - k0 > 10000) return ticks;  // cannot happen with a sane budget; guard anyway
  for (long k = k0; k <= k1; ++k) {
    const double v = k * minor;
    const bool major = k % minor_div == 0;
    ticks.push_back({v, major, major ? format_tick(v, step) : std::string()});
  }
  return ticks;
}

std::vector<Tick> log_ticks(double lo, double hi, int max_major) {
  std::vector<Tick> ticks;
  if (!(lo > 0.0) || !(hi > lo) || !std::isfinite(hi)) return ticks;
  max_major = std::max(2, max_major);
  const int e0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  const int e1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  int majors_inside = 0;
  for (int e = e0; e <= e1; ++e) {
    const double v = std::pow(10.0, e);
    if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ++majors_inside;
  }
  if (majors_inside < 3) {
    // One or two decades: label 1, 2 and 5 times powers of ten; narrower still: linear labels.
    std::vector<Tick> t;
    for (int e = e0; e <= e1; ++e)
      for (int m = 1; m <= 9; ++m) {
        const double v = m * std::pow(10.0, e);
        if (v < lo * (1 - 1e-9) || v > hi * (1 + 1e-9)) continue;
        const bool major = m == 1 || m == 2 || m == 5;
        std::string label;
        if (major) {
          if (e >= -2 && e <= 3) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%g", v);
            label = buf;
          } else {
            label = (m == 1 ? std::string() : std::to_string(m) + "\xC3\x97") + power_of_ten(e);  // "2×10⁻¹⁵"
          }
        }
        t.push_back({v, major, label});
      }
    int labelled = 0;
    for (const auto& k : t) labelled += k.major;
    if (labelled >= 2) return t;
    return linear_ticks(lo, hi, std::max(2, max_major / 2));
  }
  const int stride = std::max(1, (e1 - e0 + max_major - 1) / max_major);
  for (int e = e0; e <= e1; ++e) {
    const double base = std::pow(10.0, e);
    if (base >= lo * (1 - 1e-9) && base <= hi * (1 + 1e-9)) {
      const bool major = ((e % stride) + stride) % stride == 0;
      std::string label;
      if (major) {
        if (e >= 0 && e <= 3)
          label = std::to_string(static_cast<long>(std::llround(base)));
        else if (e == -1 || e == -2)
          label = e == -1 ? "0.1" : "0.01";
        else
          label = power_of_ten(e);
      }
      ticks.push_back({base, major, label});
    }
    if (stride == 1 && e1 - e0 <= 8)
      for (int m = 2; m <= 9; ++m) {
        const double v = m * base;
        if (v >= lo && v <= hi) ticks.push_back({v, false, {}});
      }
  }
  std::sort(ticks.begin(), ticks.end(), [](const Tick& a, const Tick& b) { return a.value < b.value; });
  return ticks;
}

std::vector<Tick> ticks_for(const AxisMap& axis, int max_major) {
  return axis.kind == ScaleKind::Log10 ? log_ticks(axis.lo, axis.hi, max_major)
                                       : linear_ticks(axis.lo, axis.hi, max_major);
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "\xE2\x80\x94";  // an em dash
  const long t = std::lround(seconds);
  char b[32];
  if (t >= 3600)
    std::snprintf(b, sizeof b, "%ldh %02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60)
    std::snprintf(b, sizeof b, "%ldm %02lds", t / 60, t % 60);
  else
    std::snprintf(b, sizeof b, "%lds", t);
  return b;
}

}  // namespace tttlab::lab::plot
