// app/lab/designer/designer_types.hpp — the designer: a student picks each of the fast-weight
// template's six components (tttlab/fastweight/rule.hpp), sees where that puts the layer among the
// named members, and watches its state learn a recall task beside one member's
// (tttlab/fastweight/designed_memory.hpp; the maths in docs/MATH.md §11.7).
//
// Two memories of width d read the recall lab's episodes (analysis/recall.hpp): the design, with the
// student's η, α, λ, μ and chunk, and the compared member, at its preset with the defaults of
// member_params(). Results:
//   accuracy     for every P of the list, the fraction of the P pairs each memory answers right after
//                reading all of them, over `sequences` episodes
//   losses       on one episode of curve_pairs pairs: the inner loss of each pair on the state just
//                before its write and just after, for both memories
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lab/engine/job.hpp"
#include "lab/primal_dual/primal_dual_types.hpp"  // JobOutcome
#include "tttlab/fastweight/designed_memory.hpp"
#include "tttlab/fastweight/rule.hpp"

namespace tttlab::lab {

struct DesignerSettings {
  FastWeightRule design = fast_weight_preset("deltanet").rule;
  DesignParams params;                          // the design's η, α, λ, μ, chunk; width and seed
  std::string compare = "linear_attention";     // a preset id (fast_weight_presets())
  std::vector<int> pairs = {4, 8, 16, 32, 48, 64};  // P, increasing, each in [1, 160]
  int sequences = 16;                           // episodes per P
  int curve_pairs = 48;                         // P of the inner-loss episode, in [2, 160]
  bool operator==(const DesignerSettings&) const = default;
};

// The parameters a member runs with when it is compared: the design's width and seed, η = 1 for a
// matrix state and the recall lab's TTT-MLP step for an MLP state (analysis/recall.hpp), the other
// values DesignParams's defaults.
DesignParams member_params(const FastWeightPreset& member, const DesignParams& design);

struct DesignerView : JobView {
  DesignerSettings settings;
  // Where the design sits: the nearest member, how many components it shares (6: it is that member)
  // and which differ.
  std::string nearest_id, nearest_name;
  int common = 0;
  std::vector<std::string> differs;
  std::string compare_name;
  DesignParams compare_params;
  // accuracy[m][j], m = 0 the design, 1 the member: the fraction right at P = pairs[j] over the
  // episodes done (episodes_done[j] of settings.sequences).
  std::vector<std::vector<double>> accuracy;
  std::vector<int> episodes_done;
  // loss_before[m][t], loss_after[m][t]: the inner loss of pair t of the curve episode; the pairs
  // read so far (curve_done of curve_pairs).
  std::vector<std::vector<double>> loss_before, loss_after;
  int curve_done = 0;
  long state_size[2] = {0, 0};  // numbers held after the curve episode
  bool diverged[2] = {false, false};  // a loss went non-finite or past 1e12
  bool complete() const { return outcome == JobOutcome::Done; }
};

// Compute the designer for these settings (cancels the computation in progress).
struct DesignerRun {
  DesignerSettings settings;
};

}  // namespace tttlab::lab
