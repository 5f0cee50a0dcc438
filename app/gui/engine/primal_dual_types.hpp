// app/gui/engine/primal_dual_types.hpp — the primal-vs-dual comparison and how it is requested.
//
// The same toy head goes through inner_forward_primal and inner_forward_dual; the job reports the
// largest difference of the outputs, the time of each form, and the dual form's masked
// attention-like matrix M (per mini-batch, M[i, j] = τ_i λ_j (q_i·k_j + 1) for j ≤ i; the "+1" is
// the bias update and is absent with the bias off; across mini-batches tokens interact only through
// the committed state W, so M is block lower-triangular).
//
// With `linear_attention` set, the head is reduced to linear attention (ttt-spec.md §9.2): one
// mini-batch b = T, W0 = 0, no LayerNorm, no residual, no bias, fixed gate with η_base = d and no
// token-index scale, so E ≡ 1 and the output is exactly tril(QKᵀ)V, which the job also computes
// directly and compares.
#pragma once

#include <string>
#include <vector>

#include "gui/engine/head_config.hpp"
#include "gui/plot/pooling.hpp"

namespace tttlab::gui {

enum class Precision { Float, Double };

struct PrimalDualConfig {
  HeadConfig head;
  Precision precision = Precision::Double;
  int timing_reps = 5;            // each form runs this many times; the median time is reported
  bool linear_attention = false;

  bool operator==(const PrimalDualConfig&) const = default;
  // The head actually run (the linear-attention reduction applied when requested).
  HeadConfig effective() const;
};

enum class JobOutcome { None, Running, Done, Cancelled, Failed };

struct PrimalDualView {
  PrimalDualConfig config;          // as requested
  HeadConfig effective;             // as run
  std::uint64_t generation = 0;     // increments with every new request
  JobOutcome outcome = JobOutcome::None;
  double progress = 0;              // 0..1 while running
  std::string error;                // Failed: why

  // The results below belong to request `results_generation` (0: none yet). While a new request
  // runs they still show the previous one.
  std::uint64_t results_generation = 0;

  std::vector<unsigned char> bytes;
  long T = 0;
  int d = 0;
  double max_abs_diff = 0;          // max |O_primal − O_dual|
  double max_abs_output = 0;        // max |O| (scale for the difference)
  std::vector<double> token_diff;   // [T] max_j |O_primal − O_dual|[t, j]
  std::vector<double> primal_ms, dual_ms;  // every repetition
  double primal_ms_median = 0, dual_ms_median = 0;
  plot::PooledMatrix attention;     // M, [T, T] pooled to ≤ 512²
  plot::PooledMatrix diff_map;      // |O_primal − O_dual| transposed, [d, T], pooled to ≤ 512 columns
  bool linear_attention = false;
  double linear_attention_diff = 0; // max |O − tril(QKᵀ)V| (only with linear_attention)
  double linear_attention_scale = 0;// max |tril(QKᵀ)V|
};

struct PrimalDualRun {
  PrimalDualConfig config;
};

}  // namespace tttlab::gui
