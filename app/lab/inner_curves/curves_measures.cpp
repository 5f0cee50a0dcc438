// app/lab/inner_curves/curves_measures.cpp — what lessons can measure on this feature's view
// (lab/measures.hpp), named in its entry of lab/features.cpp.
#include <algorithm>
#include <cmath>
#include <optional>

#include "lab/engine/snapshot.hpp"
#include "lab/inner_curves/curves_types.hpp"
#include "lab/measures.hpp"
#include "lab/training/training_types.hpp"

namespace tttlab::lab {
namespace {

const std::vector<MeasureInfo> kInfos = {
    {"gain_from_context",
     "mean over blocks and positions t ≥ 30 of ℓ(W₀; xₜ) − ℓ(Wₜ₋₁; xₜ) (the inner loss: ½ squared "
     "error over the head's d features)",
     false},
    {"gain_first_10", "the same over positions t < 10", false},
    {"step_gain", "mean over blocks and positions of ℓ(Wₜ₋₁; xₜ) − ℓ(Wₜ; xₜ) (inner-loss units)",
     false},
    {"fraction_learning", "fraction of (block, t ≥ 30) with ℓ(Wₜ₋₁; xₜ) < ℓ(W₀; xₜ)", false},
    {"relative_gain", "gain_from_context / mean ℓ(W₀; xₜ) over t ≥ 30", false},
    {"initial_loss",
     "mean over blocks and positions t ≥ 30 of ℓ(W₀; xₜ), the inner loss before any test-time "
     "learning",
     false},
    {"reloads",
     "following a training run (the model \"training\": the scene's Training-panel run, started "
     "with "
     "it): how many times the view computed again because the run saved newer weights",
     false},
    {"followed_step",
     "following a training run: the training step of the weights the view shows (read when the "
     "run has finished and the view shows its last checkpoint)",
     false},
    {"first_checkpoint_step",
     "following a training run: the step of the first checkpoint the view computed in full", false},
    {"relative_gain_first_checkpoint", "relative_gain with the weights of that first checkpoint",
     false},
    {"gain_from_context_first_checkpoint",
     "gain_from_context with the weights of that first checkpoint", false},
    {"initial_loss_first_checkpoint", "initial_loss with the weights of that first checkpoint",
     false},
    {"relative_gain_change",
     "relative_gain − relative_gain_first_checkpoint: how much the outer loop changed the "
     "share of ℓ(W₀) that the inner loop removes",
     false},
};

// The curves measures of one complete view.
Measures curve_measures(const CurvesView& v) {
  double gain = 0, first = 0, step = 0, base = 0, learning = 0, count = 0;
  const std::size_t blocks = v.l0.size();
  for (std::size_t bl = 0; bl < blocks; ++bl) {
    const auto &l0 = v.l0[bl], &lb = v.lb[bl], &la = v.la[bl];
    const std::size_t T = std::min({l0.size(), lb.size(), la.size()});
    std::vector<double> d0b(T), dba(T);
    for (std::size_t t = 0; t < T; ++t) {
      d0b[t] = l0[t] - lb[t];
      dba[t] = lb[t] - la[t];
      if (t >= 30) {
        learning += lb[t] < l0[t] ? 1.0 : 0.0;
        count += 1.0;
      }
    }
    gain += mean_range(d0b, 30, T);
    first += mean_range(d0b, 0, 10);
    step += mean_range(dba, 0, T);
    base += mean_range(l0, 30, T);
  }
  const double n = static_cast<double>(std::max<std::size_t>(blocks, 1));
  Measures m;
  m["gain_from_context"] = plain(gain / n);
  m["gain_first_10"] = plain(first / n);
  m["step_gain"] = plain(step / n);
  m["fraction_learning"] = plain(count > 0 ? learning / count : 0.0);
  m["relative_gain"] = plain(base > 0 ? gain / base : 0.0);
  m["initial_loss"] = plain(base / n);
  return m;
}

std::optional<Measures> read(const Snapshot& s) {
  const auto* v = s.curves.get();
  if (!v) return std::nullopt;
  if (v->outcome == JobOutcome::Failed)
    fail_if(v->error.empty() ? "unknown error" : v->error, "inner-loss curves");
  if (v->waiting && s.training)
    for (const auto& r : s.training->runs)
      if (r->state == RunState::Failed)
        fail_if("the training run failed: " + r->message, "inner-loss curves");
  if (v->waiting || v->replay_pending || v->outcome != JobOutcome::Done || v->l0.empty()) return std::nullopt;
  if (v->model_step >= 0 && s.training) {
    // Following a training run: measured once the run has ended and the view shows its last checkpoint.
    for (const auto& r : s.training->runs)
      if (r->model_id == v->model_id &&
          (r->live() || r->state == RunState::Starting || v->model_step < r->steps_done))
        return std::nullopt;
  }
  Measures m = curve_measures(*v);
  m["reloads"] = plain(v->reloads);
  if (v->model_step >= 0) m["followed_step"] = plain(static_cast<double>(v->model_step));
  if (v->first_followed && v->first_followed->model_step >= 0) {
    const Measures f = curve_measures(*v->first_followed);
    m["first_checkpoint_step"] = plain(static_cast<double>(v->first_followed->model_step));
    m["relative_gain_first_checkpoint"] = f.at("relative_gain");
    m["gain_from_context_first_checkpoint"] = f.at("gain_from_context");
    m["initial_loss_first_checkpoint"] = f.at("initial_loss");
    m["relative_gain_change"] = plain(m.at("relative_gain").value - f.at("relative_gain").value);
  }
  return m;
}

}  // namespace

const MeasureSet& curves_measures() { return measure_set<&Snapshot::curves, &read>(kInfos); }

}  // namespace tttlab::lab
