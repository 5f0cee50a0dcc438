// app/lab/evaluation/evaluation_measures.cpp — what lessons can measure on this feature's view
// (lab/measures.hpp), named in its entry of lab/features.cpp.
#include <algorithm>
#include <cmath>
#include <optional>

#include "lab/engine/snapshot.hpp"
#include "lab/evaluation/evaluation_types.hpp"
#include "lab/measures.hpp"
#include "tttlab/model/checkpoint.hpp"

namespace tttlab::lab {
namespace {

const std::vector<MeasureInfo> kInfos = {
    {"bpb_<i>", "bits per byte of the scene's model i (0, 1, …)", false},
    {"context_gain_<i>",
     "model i: mean loss over positions 0–15 minus the mean over the last quarter, nats", false},
    {"long_gain_<i>",
     "model i: mean loss over positions T/16 … T/4 − 1 minus the mean over the last quarter, nats "
     "(at T = 2048: positions 128–511 against 1536–2047; > 0 while the model still gains from "
     "context far back)",
     false},
    {"late_loss_<i>", "model i: mean loss over the last quarter of the positions, nats", false},
    {"bpb_gap_<i>",
     "bpb_<i> − bpb_0 for i ≥ 1: how much worse (> 0) or better (< 0) model i is than model 0, "
     "on the same windows",
     false},
};

std::optional<Measures> read(const Snapshot& s) {
  const auto* v = finished_view(s.evaluation, "evaluation");
  if (!v) return std::nullopt;
  Measures m;
  for (std::size_t i = 0; i < v->curves.size(); ++i) {
    const auto& c = v->curves[i];
    fail_if(c.error, "evaluation");
    bool finite = std::isfinite(c.bpb);
    for (const double x : c.loss_by_position) finite = finite && std::isfinite(x);
    if (!finite)
      fail_if(non_finite_model_message(c.label.empty() ? c.model_id : c.label), "evaluation");
    const auto& l = c.loss_by_position;
    m["bpb_" + std::to_string(i)] = plain(c.bpb);
    m["context_gain_" + std::to_string(i)] =
        plain(mean_range(l, 0, 16) - mean_range(l, l.size() * 3 / 4, l.size()));
    m["long_gain_" + std::to_string(i)] = plain(mean_range(l, l.size() / 16, l.size() / 4) -
                                                mean_range(l, l.size() * 3 / 4, l.size()));
    m["late_loss_" + std::to_string(i)] = plain(mean_range(l, l.size() * 3 / 4, l.size()));
    if (i > 0) m["bpb_gap_" + std::to_string(i)] = plain(c.bpb - v->curves[0].bpb);
  }
  return m;
}

}  // namespace

const MeasureSet& evaluation_measures() {
  return measure_set<&Snapshot::evaluation, &read>(kInfos);
}

}  // namespace tttlab::lab
