// Warmup + cosine learning-rate schedule (see tttlab/optim/schedule.hpp).
#include "tttlab/optim/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace tttlab {

void WarmupCosineSchedule::validate() const {
  if (warmup_steps < 0) throw std::invalid_argument("learning-rate schedule: warmup steps must be >= 0");
  if (decay_steps <= warmup_steps)
    throw std::invalid_argument("learning-rate schedule: total steps (" + std::to_string(decay_steps) +
                                ") must exceed the warmup steps (" + std::to_string(warmup_steps) + ")");
  if (!(init_value >= 0) || !(peak_value >= 0) || !(end_value >= 0))
    throw std::invalid_argument("learning-rate schedule: learning rates must be finite and >= 0");
}

double WarmupCosineSchedule::operator()(std::int64_t count) const {
  count = std::max<std::int64_t>(count, 0);
  if (count < warmup_steps)
    return init_value + (peak_value - init_value) * static_cast<double>(count) / static_cast<double>(warmup_steps);
  const std::int64_t span = decay_steps - warmup_steps;
  const std::int64_t k = std::min(count - warmup_steps, span);
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * static_cast<double>(k) / static_cast<double>(span)));
  const double alpha = peak_value == 0.0 ? 0.0 : end_value / peak_value;
  return peak_value * ((1.0 - alpha) * cosine + alpha);
}

WarmupCosineSchedule WarmupCosineSchedule::official(double peak, std::int64_t total_steps) {
  WarmupCosineSchedule s;
  s.init_value = 0.0;
  s.peak_value = peak;
  s.warmup_steps = total_steps / 10;
  s.decay_steps = total_steps;
  s.end_value = 1e-5;
  return s;
}

}  // namespace tttlab
