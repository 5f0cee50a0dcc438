#include "lab/plot/scale.hpp"

#include <algorithm>
#include <cmath>

namespace tttlab::lab::plot {

bool AxisMap::drawable(double v) const {
  return std::isfinite(v) && (kind == ScaleKind::Linear || v > 0.0);
}

double AxisMap::forward(double v) const {
  if (kind == ScaleKind::Log10) {
    const double a = std::log10(lo), b = std::log10(hi);
    return b == a ? 0.5 : (std::log10(v) - a) / (b - a);
  }
  return hi == lo ? 0.5 : (v - lo) / (hi - lo);
}

double AxisMap::inverse(double u) const {
  if (kind == ScaleKind::Log10) {
    const double a = std::log10(lo), b = std::log10(hi);
    return std::pow(10.0, a + u * (b - a));
  }
  return lo + u * (hi - lo);
}

void RangeFitter::add(double v) {
  if (!std::isfinite(v) || (m_kind == ScaleKind::Log10 && v <= 0.0)) return;
  if (n_ == 0) {
    m_lo = m_hi = v;
  } else {
    m_lo = std::min(m_lo, v);
    m_hi = std::max(m_hi, v);
  }
  ++n_;
}

void RangeFitter::add(std::span<const double> values) {
  for (double v : values) add(v);
}

Range RangeFitter::range(double pad) const {
  if (m_kind == ScaleKind::Log10) {
    if (n_ == 0) return {1.0, 10.0};
    double a = std::log10(m_lo), b = std::log10(m_hi);
    if (b - a < 1e-9) {
      a -= 0.5;
      b += 0.5;
    }
    const double p = (b - a) * pad;
    return {std::pow(10.0, a - p), std::pow(10.0, b + p)};
  }
  if (n_ == 0) return {0.0, 1.0};
  double a = m_lo, b = m_hi;
  if (b - a <= 1e-12 * std::max(1.0, std::abs(a))) {
    const double w = a == 0.0 ? 1.0 : 0.1 * std::abs(a);
    a -= w;
    b += w;
  }
  const double p = (b - a) * pad;
  return {a - p, b + p};
}

}  // namespace tttlab::lab::plot
