// tttlab/optim/schedule.hpp — the learning-rate schedule of the official TTT training (docs/MATH.md
// §8.5): linear warmup, then cosine decay, as optax.warmup_cosine_decay_schedule defines it.
//
// For an update count c (0, 1, 2, …), with W = warmup_steps, D = decay_steps (the TOTAL number of
// steps, warmup included), lr0 = init_value, peak = peak_value, end = end_value:
//
//   c < W :   lr(c) = lr0 + (peak − lr0) · c / W                          (linear warmup)
//   c ≥ W :   k = min(c − W, D − W),  cosine = ½ (1 + cos(π k / (D − W)))
//             lr(c) = peak · ((1 − α) · cosine + α),  α = end / peak       (= end + (peak − end)·cosine)
//
// so lr(0) = lr0, lr(W) = peak, lr((W + D) / 2) = (peak + end) / 2, and lr(c) = end for every c ≥ D.
// W = 0 starts at the peak. This is optax's join_schedules of linear_schedule(lr0, peak, W) and
// cosine_decay_schedule(peak, D − W, α) at boundary W (exponent 1; α = 0 when peak = 0).
//
// WHICH COUNT: optax evaluates the schedule at the number of updates already applied, so the n-th
// update (n = 1, 2, …) uses lr(n − 1); with the official init_value 0 the very first update has
// learning rate 0 (moments are still updated). AdamW (adamw.hpp) follows this. The official config
// uses W = 10 % of the run, D = the run's total steps, end = 1e-5.
#pragma once

#include <cstdint>

namespace tttlab {

struct WarmupCosineSchedule {
  double init_value = 0.0;
  double peak_value = 1e-3;
  std::int64_t warmup_steps = 0;
  std::int64_t decay_steps = 1;  // total steps D, must exceed warmup_steps
  double end_value = 1e-5;

  // Throws std::invalid_argument with a one-line message for W < 0, D ≤ W, or negative rates.
  void validate() const;
  // Counts below 0 are treated as 0.
  double operator()(std::int64_t count) const;

  // The official schedule for a run of `total_steps`: warmup over 10 % of the steps from 0 to
  // `peak`, cosine down to 1e-5 at the end.
  static WarmupCosineSchedule official(double peak, std::int64_t total_steps);
};

}  // namespace tttlab
