// app/lab/minibatch/minibatch_measures.cpp — what lessons can measure on this feature's view
// (lab/measures.hpp), named in its entry of lab/features.cpp.
#include <algorithm>
#include <cmath>
#include <optional>

#include "lab/engine/snapshot.hpp"
#include "lab/measures.hpp"
#include "lab/minibatch/minibatch_types.hpp"

namespace tttlab::lab {
namespace {

const std::vector<MeasureInfo> kInfos = {
    {"loss_b<N>",
     "validation loss (nats per byte) with mini-batch size N, for every b of the sweep", false},
    {"best_b", "the b with the lowest loss", false},
    {"loss_T_minus_best", "loss at b = T minus the lowest loss", false},
    {"loss_1_minus_best", "loss at b = 1 minus the lowest loss", false},
    {"bpb_b<N>",
     "validation loss in bits per byte (the unit of the view's plots) with mini-batch size N, for "
     "every b of the sweep",
     false},
    {"bpb_T_minus_best", "bits per byte at b = T minus the lowest, in bits per byte", false},
    {"bpb_1_minus_best", "bits per byte at b = 1 minus the lowest, in bits per byte", false},
    {"time_ratio_1_T", "forward time at b = 1 over forward time at b = T", true},
};

std::optional<Measures> read(const Snapshot& s) {
  const auto* v = finished_view(s.minibatch, "mini-batch");
  if (!v || !v->current || !v->current->complete || v->current->points.empty()) return std::nullopt;
  Measures m;
  const auto& pts = v->current->points;
  const SweepPoint* best = &pts.front();
  for (const auto& p : pts) {
    m["loss_b" + std::to_string(p.b)] = plain(p.loss);
    m["bpb_b" + std::to_string(p.b)] = plain(p.bpb);
    if (p.loss < best->loss) best = &p;
  }
  m["best_b"] = plain(best->b);
  m["loss_T_minus_best"] = plain(pts.back().loss - best->loss);
  m["loss_1_minus_best"] = plain(pts.front().loss - best->loss);
  m["bpb_T_minus_best"] = plain(pts.back().bpb - best->bpb);
  m["bpb_1_minus_best"] = plain(pts.front().bpb - best->bpb);
  if (pts.back().ms_per_forward > 0)
    m["time_ratio_1_T"] = Measurement{pts.front().ms_per_forward / pts.back().ms_per_forward,
                                      std::nullopt, std::nullopt, true};
  return m;
}

}  // namespace

const MeasureSet& minibatch_measures() { return measure_set<&Snapshot::minibatch, &read>(kInfos); }

}  // namespace tttlab::lab
