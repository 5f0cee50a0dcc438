// app/lab/plot/smoothing.hpp — exponential moving average for noisy curves.
//
// s_0 = 0, s_i = w·s_{i−1} + (1 − w)·y_i, shown as s_i / (1 − w^n) with n the number of finite
// values so far. Dividing by (1 − wⁿ) removes the pull towards the zero start (the same debiasing
// as Adam's moment estimates, and what TensorBoard's smoothing slider does), so the first smoothed
// point equals the first value. Non-finite values are passed through unchanged and skipped by the
// average; w = 0 returns the input.
#pragma once

#include <span>
#include <vector>

namespace tttlab::lab::plot {

// weight w in [0, 0.999] (clamped).
std::vector<double> ema_smooth(std::span<const double> y, double weight);

}  // namespace tttlab::lab::plot
