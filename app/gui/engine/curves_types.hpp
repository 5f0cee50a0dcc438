// app/gui/engine/curves_types.hpp — the inner losses over token position, averaged over a batch of
// sequences and the heads of each block (the paper's Fig. 5 and 17):
//   ℓ(W_0; x_t)       the initial state, no test-time learning
//   ℓ(W_{t−1}; x_t)   before the gradient step on x_t
//   ℓ(W_t; x_t)       after it
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gui/engine/primal_dual_types.hpp"  // JobOutcome

namespace tttlab::gui {

struct CurvesSettings {
  std::string model_id = "shipped";
  std::string data = "brown";
  int seq_len = 256;    // T
  int sequences = 12;   // validation windows averaged over
  bool operator==(const CurvesSettings&) const = default;
};

struct CurvesView {
  CurvesSettings settings;
  std::uint64_t generation = 0;
  JobOutcome outcome = JobOutcome::None;
  double progress = 0;
  std::string error;
  std::string model_label, data_description;
  int blocks = 0, heads = 0, mini_batch = 0;
  long T = 0;
  long sequences_done = 0;
  std::vector<std::vector<double>> l0, lb, la;  // [block][t] means over the sequences done and the heads
};

struct CurvesRun {
  CurvesSettings settings;
};

}  // namespace tttlab::gui
