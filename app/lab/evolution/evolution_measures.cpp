// app/lab/evolution/evolution_measures.cpp — what lessons can measure on this feature's view
// (lab/measures.hpp), named in its entry of lab/features.cpp.
#include <algorithm>
#include <cmath>
#include <optional>

#include "lab/engine/snapshot.hpp"
#include "lab/evolution/evolution_types.hpp"
#include "lab/measures.hpp"

namespace tttlab::lab {
namespace {

const std::vector<MeasureInfo> kInfos = {
    {"rank_excess",
     "max over tokens t of rank(Wₜ − W₀) − (t + 1): ≤ 0 when each token adds at most rank one",
     false},
    {"final_rank", "numerical rank of W_T − W₀", false},
    {"drift_final", "‖W_T − W₀‖_F", false},
    {"loss_drop_fraction", "fraction of tokens with ℓ(Wₜ; xₜ) < ℓ(Wₜ₋₁; xₜ)", false},
};

// Numerical rank: singular values above rel · the largest (descending input).
int numerical_rank(const std::vector<float>& sv, double rel = 1e-4) {
  if (sv.empty() || !(sv.front() > 0)) return 0;
  int r = 0;
  for (float s : sv)
    if (s > rel * sv.front()) ++r;
  return r;
}

std::optional<Measures> read(const Snapshot& s) {
  const auto* v = s.evolution.get();
  if (!v || v->generation == 0) return std::nullopt;  // not configured yet ("waiting for settings")
  fail_if(v->error, "hidden-state evolution");
  if (!v->done || v->steps.empty()) return std::nullopt;
  int excess = -1 << 30;
  double drops = 0;
  for (std::size_t t = 0; t < v->steps.size(); ++t) {
    const auto& st = *v->steps[t];
    excess = std::max(excess, numerical_rank(st.dsv1) - static_cast<int>(t + 1));
    drops += st.loss_after < st.loss_before ? 1.0 : 0.0;
  }
  Measures m;
  m["rank_excess"] = plain(excess);
  m["final_rank"] = plain(numerical_rank(v->steps.back()->dsv1));
  m["drift_final"] = plain(v->steps.back()->drift1);
  m["loss_drop_fraction"] = plain(drops / static_cast<double>(v->steps.size()));
  return m;
}

}  // namespace

const MeasureSet& evolution_measures() { return measure_set<&Snapshot::evolution, &read>(kInfos); }

}  // namespace tttlab::lab
