// app/lab/nonparametric/nonparametric_measures.cpp — what lessons can measure on this feature's view
// (lab/measures.hpp), named in its entry of lab/features.cpp.
#include <algorithm>
#include <cmath>
#include <optional>

#include "lab/engine/snapshot.hpp"
#include "lab/measures.hpp"
#include "lab/nonparametric/nonparametric_types.hpp"

namespace tttlab::lab {
namespace {

const std::vector<MeasureInfo> kInfos = {
    {"nw_max_rel_diff",
     "max over the block's heads of max |ŷ − Z| / max |Z|: the Nadaraya–Watson estimator against "
     "the layer's own attention output",
     false},
    {"nw_max_abs_diff", "max |ŷ − Z| over the block's heads, tokens and features", false},
    {"weights_row_sum_err", "the head on show: maxₜ |Σᵢ wₜᵢ − 1| of the kernel weights", false},
    {"max_weight_last_row", "the head on show, last token: the largest kernel weight maxᵢ w_Tᵢ",
     false},
    {"effective_pairs",
     "the head on show, last token: 1 / Σᵢ w_Tᵢ², how many stored pairs the prediction effectively "
     "averages (T when the kernel is flat)",
     false},
    {"effective_fraction", "effective_pairs / T", false},
    {"effective_pairs_mean_heads", "effective_pairs at the last token, mean over the block's heads",
     false},
    {"state_numbers_nw",
     "the nonparametric learner's state after the last token: 2·T·d numbers (every key and value)",
     false},
    {"state_numbers_ttt", "TTT-Linear's state: d² numbers, whatever T", false},
    {"tokens", "T, the tokens of the text", false},
    {"head_dim", "d, the width of one head", false},
};

std::optional<Measures> read(const Snapshot& s) {
  const auto* v = finished_view(s.nonparametric, "Theorem 2");
  if (!v || v->results_generation != v->generation || !v->detail) return std::nullopt;
  const auto& d = *v->detail;
  Measures m;
  m["nw_max_rel_diff"] = plain(v->max_rel_diff);
  m["nw_max_abs_diff"] = plain(v->max_abs_diff);
  m["weights_row_sum_err"] = plain(d.row_sum_err);
  m["max_weight_last_row"] = plain(d.max_weight.empty() ? 0.0 : d.max_weight.back());
  const double eff = d.effective_pairs.empty() ? 0.0 : d.effective_pairs.back();
  m["effective_pairs"] = plain(eff);
  m["effective_fraction"] = plain(v->T > 0 ? eff / static_cast<double>(v->T) : 0.0);
  double mean = 0;
  for (const auto& h : v->head_summaries) mean += h.effective_pairs;
  m["effective_pairs_mean_heads"] =
      plain(v->head_summaries.empty() ? 0.0 : mean / static_cast<double>(v->head_summaries.size()));
  m["state_numbers_nw"] = plain(static_cast<double>(v->state_numbers_nw));
  m["state_numbers_ttt"] = plain(static_cast<double>(v->state_numbers_ttt));
  m["tokens"] = plain(static_cast<double>(v->T));
  m["head_dim"] = plain(v->d);
  return m;
}

}  // namespace

const MeasureSet& nonparametric_measures() {
  return measure_set<&Snapshot::nonparametric, &read>(kInfos);
}

}  // namespace tttlab::lab
