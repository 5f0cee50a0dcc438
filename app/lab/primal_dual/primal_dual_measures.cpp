// app/lab/primal_dual/primal_dual_measures.cpp — what lessons can measure on this feature's view
// (lab/measures.hpp), named in its entry of lab/features.cpp.
#include <algorithm>
#include <cmath>
#include <optional>

#include "lab/engine/snapshot.hpp"
#include "lab/measures.hpp"
#include "lab/primal_dual/primal_dual_types.hpp"

namespace tttlab::lab {
namespace {

const std::vector<MeasureInfo> kInfos = {
    {"max_rel_diff", "max |O_primal − O_dual| / max |O| over every layer and head", false},
    {"max_abs_diff", "max |O_primal − O_dual| over every layer and head", false},
    {"reduction_rel_err",
     "with the reduction to linear attention: max |O − tril(QKᵀ)V| / max |tril(QKᵀ)V|", false},
    {"dual_speedup",
     "primal time / dual time of the whole model, repeat by repeat (the forms alternate): the median "
     "of those ratios, with min and max",
     true},
    {"mini_batch", "b as run (the chunk size C for a member's chunked form)", false},
    {"chunked", "1 when a member's chunked form ran (primal vs parallel), 0 for TTT's dual form", false},
    {"tokens", "T, the tokens of the text", false},
};

std::optional<Measures> read(const Snapshot& s) {
  const auto* v = finished_view(s.primal_dual, "primal vs dual");
  if (!v || v->results_generation != v->generation) return std::nullopt;
  Measures m;
  m["max_abs_diff"] = plain(v->max_abs_diff);
  m["max_rel_diff"] =
      plain(v->max_abs_output > 0 ? v->max_abs_diff / v->max_abs_output : v->max_abs_diff);
  if (v->linear_attention)
    m["reduction_rel_err"] =
        plain(v->linear_attention_scale > 0 ? v->linear_attention_diff / v->linear_attention_scale
                                            : v->linear_attention_diff);
  if (v->speedup.repeats > 0)
    m["dual_speedup"] = Measurement{v->speedup.median, v->speedup.min, v->speedup.max, true};
  m["mini_batch"] = plain(v->mini_batch);
  m["chunked"] = plain(v->member_chunked ? 1.0 : 0.0);
  m["tokens"] = plain(static_cast<double>(v->T));
  return m;
}

}  // namespace

const MeasureSet& primal_dual_measures() {
  return measure_set<&Snapshot::primal_dual, &read>(kInfos);
}

}  // namespace tttlab::lab
