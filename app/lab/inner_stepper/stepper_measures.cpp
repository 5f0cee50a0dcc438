// app/lab/inner_stepper/stepper_measures.cpp — what lessons can measure on this feature's view
// (lab/measures.hpp), named in its entry of lab/features.cpp.
#include <algorithm>
#include <cmath>
#include <optional>

#include "lab/engine/snapshot.hpp"
#include "lab/inner_stepper/stepper_types.hpp"
#include "lab/measures.hpp"

namespace tttlab::lab {
namespace {

const std::vector<MeasureInfo> kInfos = {
    {"lambda_mean", "mean of λₜ over the text", false},
    {"lambda_min", "smallest λₜ", false},
    {"lambda_max", "largest λₜ", false},
    {"tau_first", "τ₁, the token-index scale of the first token of a mini-batch", false},
    {"tau_last", "τ_b, the scale of its last token (the one that commits the state)", false},
    {"loss_drop_fraction", "fraction of tokens with ℓ(Wₜ; xₜ) < ℓ(Wₜ₋₁; xₜ)", false},
    {"tokens", "T", false},
    {"mini_batch", "b", false},
    {"loss_after_mean", "mean of ℓ(Wₜ; xₜ), the inner loss after each token's step (the member's own loss)",
     false},
    {"state_norm_last", "‖W_T‖_F (‖S_T‖_F for a matrix member; W₁ for an MLP), the state after the last token",
     false},
    {"alpha_mean", "mean decay αₜ of a member with one (Mamba-2, Gated DeltaNet); 1 for the others", false},
};

std::optional<Measures> read(const Snapshot& s) {
  const auto* v = s.stepper.get();
  if (!v || v->generation == 0) return std::nullopt;  // not configured yet ("waiting for settings")
  fail_if(v->error, "inner-loop stepper");
  if (v->tokens() == 0 || v->computed() < v->tokens()) return std::nullopt;
  // A model whose forward overflows: a measure such as loss_drop_fraction stays finite on NaN losses
  // (NaN < NaN is false), so the claim would be judged on numbers that mean nothing. (A toy head that
  // diverges is a lesson of its own: its measures stand.)
  if (!v->config.toy()) fail_if(v->warning, "inner-loop stepper");
  double lsum = 0, lmin = INFINITY, lmax = -INFINITY, drops = 0, tau_first = 0, tau_last = 0, after = 0, alpha = 0;
  for (const auto& r : v->records) {
    after += r->loss_after;
    alpha += r->alpha;
    lsum += r->lambda;
    lmin = std::min(lmin, r->lambda);
    lmax = std::max(lmax, r->lambda);
    drops += r->loss_after < r->loss_before ? 1.0 : 0.0;
    if (r->pos == 0) tau_first = r->tau;
    if (r->pos == v->mini_batch() - 1) tau_last = r->tau;
  }
  const double n = static_cast<double>(v->records.size());
  Measures m;
  m["lambda_mean"] = plain(lsum / n);
  m["lambda_min"] = plain(lmin);
  m["lambda_max"] = plain(lmax);
  m["tau_first"] = plain(tau_first);
  m["tau_last"] = plain(tau_last);
  m["loss_drop_fraction"] = plain(drops / n);
  m["tokens"] = plain(n);
  m["mini_batch"] = plain(v->mini_batch());
  m["loss_after_mean"] = plain(after / n);
  m["state_norm_last"] = plain(v->records.back()->w_norm);
  m["alpha_mean"] = plain(alpha / n);
  return m;
}

}  // namespace

const MeasureSet& stepper_measures() { return measure_set<&Snapshot::stepper, &read>(kInfos); }

}  // namespace tttlab::lab
