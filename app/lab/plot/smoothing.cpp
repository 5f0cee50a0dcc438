#include "lab/plot/smoothing.hpp"

#include <algorithm>
#include <cmath>

namespace tttlab::lab::plot {

std::vector<double> ema_smooth(std::span<const double> y, double weight) {
  const double w = std::clamp(weight, 0.0, 0.999);
  std::vector<double> out(y.begin(), y.end());
  if (w == 0.0) return out;
  double acc = 0.0, wn = 1.0;  // wn = w^n
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) continue;
    acc = w * acc + (1.0 - w) * y[i];
    wn *= w;
    out[i] = acc / (1.0 - wn);
  }
  return out;
}

}  // namespace tttlab::lab::plot
