// app/lab/nonparametric/nonparametric_types.hpp — the Theorem 2 view (softmax attention as a nonparametric
// learner, docs/MATH.md §9.2) and how it is requested.
//
// One block of a softmax-attention language model reads a text. For every head of that block the
// job takes the layer's own queries, keys (after RoPE), values and attention output (one forward of
// the layer's code, in the chosen precision) and builds the Nadaraya–Watson estimator explicitly
// (tttlab/analysis/nonparametric.hpp): at token t the "training set" is every pair (kᵢ, vᵢ), i ≤ t,
// the kernel κ(q, k) = exp(q·k/√d), the prediction ŷₜ = Σᵢ κ(qₜ, kᵢ) vᵢ / Σⱼ κ(qₜ, kⱼ). The view
// holds, per head, how far ŷ is from the layer's output, and for the head on show the kernel weights
// [T, T], both outputs [T, d] and how concentrated each row of weights is.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lab/engine/job.hpp"
#include "lab/primal_dual/primal_dual_types.hpp"  // Precision, JobOutcome
#include "lab/plot/pooling.hpp"
#include "tttlab/tensor.hpp"

namespace tttlab::lab {

struct NonparametricConfig {
  std::string model_id = "random:softmax-attention:t:0";  // any softmax-attention model of the library
  int block = 0;
  int head = 0;                  // the head whose weights and outputs are shown (all heads are compared)
  std::string text = default_text();  // the tokens when `data` is empty
  std::string data;              // "": the text above; else a data source (data_source.hpp) …
  long offset = 0;               // … whose validation part is read from this byte …
  int tokens = 256;              // … for this many bytes
  Precision precision = Precision::Double;  // the layer's forward; the estimator is always double

  bool operator==(const NonparametricConfig&) const = default;
  static std::string default_text();
};

struct NonparametricRun {
  NonparametricConfig config;
};

// One head of the block: how far the estimator is from the layer's own output.
struct NonparametricHeadSummary {
  int head = 0;
  double max_abs_diff = 0;     // max |ŷ − Z|
  double max_abs_output = 0;   // max |Z|
  double effective_pairs = 0;  // at the last token: 1 / Σᵢ wᵢ²
  double max_weight = 0;       // at the last token: maxᵢ wᵢ
};

// The head on show, computed once and shared by every later view (large: T² weights).
struct NonparametricDetail {
  Mat<double> weights;         // [T, T] lower triangular, row t: the kernel weights wₜᵢ
  plot::PooledMatrix weights_map;  // the same pooled to ≤ 512² for the heat-map
  Mat<double> nw_output;       // [T, d] ŷ
  Mat<double> attention_output;// [T, d] the layer's Z for this head
  std::vector<double> token_diff;       // [T] maxⱼ |ŷ − Z|[t, j]
  std::vector<double> effective_pairs;  // [T] 1 / Σᵢ wₜᵢ²
  std::vector<double> max_weight;       // [T] maxᵢ wₜᵢ
  std::vector<double> entropy;          // [T] −Σᵢ wₜᵢ ln wₜᵢ (nats)
  double row_sum_err = 0;               // maxₜ |Σᵢ wₜᵢ − 1|
};

struct NonparametricView : JobView {
  NonparametricConfig config;       // as requested

  // The results below belong to request `results_generation` (0: none yet). While a new request
  // runs they still show the previous one.
  std::uint64_t results_generation = 0;
  std::string description;          // "untrained softmax attention · block 0 of 4"
  std::string text_description;     // "typed text" / "Brown corpus, validation bytes 0 … 255"
  std::vector<unsigned char> bytes; // the T tokens
  long T = 0;
  int d = 0;
  int blocks = 0, heads = 0;
  int shown_block = 0, shown_head = 0;
  std::vector<NonparametricHeadSummary> head_summaries;  // every head of the block
  double max_abs_diff = 0;          // over every head of the block
  double max_rel_diff = 0;          // over every head: max |ŷ − Z| / max |Z| of that head
  std::shared_ptr<const NonparametricDetail> detail;  // the head on show
  long state_numbers_nw = 0;        // 2·T·d: the stored pairs after the last token
  long state_numbers_ttt = 0;       // d²: TTT-Linear's W, whatever T
};

}  // namespace tttlab::lab
