// app/lab/plot/scale.hpp — axis scales: mapping data values to the unit interval and back, and
// fitting a range to data. Pure functions; no drawing.
#pragma once

#include <span>

namespace tttlab::lab::plot {

enum class ScaleKind { Linear, Log10 };

struct Range {
  double lo = 0.0, hi = 1.0;
};

// A data range under a scale. forward() maps lo → 0 and hi → 1 (linearly in the value, or in
// log10 of it); inverse() undoes it. On a log scale only positive finite values are drawable.
struct AxisMap {
  ScaleKind kind = ScaleKind::Linear;
  double lo = 0.0, hi = 1.0;

  bool drawable(double v) const;
  double forward(double v) const;
  double inverse(double u) const;
};

// Collects the drawable extent of data and turns it into a padded axis range.
class RangeFitter {
 public:
  explicit RangeFitter(ScaleKind kind) : m_kind(kind) {}
  void add(double v);
  void add(std::span<const double> values);
  bool empty() const { return n_ == 0; }
  // The extent padded by `pad` of its width on both sides (in log10 units on a log scale).
  // Degenerate extents are widened (by 10 % of the value, or half a decade); an empty fitter gives
  // [0, 1] (linear) or [1, 10] (log).
  Range range(double pad = 0.05) const;

 private:
  ScaleKind m_kind;
  double m_lo = 0.0, m_hi = 0.0;
  long n_ = 0;
};

}  // namespace tttlab::lab::plot
