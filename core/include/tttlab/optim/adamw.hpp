// tttlab/optim/adamw.hpp — AdamW with global-norm clipping and the warmup-cosine schedule, as the
// official TTT training runs it (docs/MATH.md §8.5: optax.chain(clip_by_global_norm(1.0),
// optax.adamw(schedule, b1 = 0.9, b2 = 0.95, eps = 1e-8, weight_decay = 0.1)), decay on ALL parameters).
//
// ONE UPDATE, number n = step_count() + 1, over every parameter tensor p with gradient g:
//
//   N     = √(Σ over all tensors and elements of g²)        global norm, accumulated in double
//   s     = clip / N if N > clip else 1                       (clip ≤ 0 disables clipping)
//   g'    = s · g
//   m     = β1 m + (1 − β1) g'                                first moment
//   v     = β2 v + (1 − β2) g'²                               second moment
//   m̂     = m / (1 − β1ⁿ),  v̂ = v / (1 − β2ⁿ)                 bias correction
//   p     = p − lr · ( m̂ / (√v̂ + ε) + wd · p )                decoupled weight decay (optax adamw)
//   lr    = schedule(n − 1)                                   see schedule.hpp: optax counts from 0
//
// m and v start at zero. Element arithmetic runs in the parameter type S (float or double); the norm,
// the clip scale, the bias corrections and lr are computed in double.
//
// NON-FINITE GRADIENTS: when N is NaN or infinite the update is skipped entirely (parameters,
// moments and the step count stay as they were) and the report says so; one bad batch must not
// poison the moments for the rest of the run. (optax would propagate the NaN.)
//
// PARAMETERS are passed to every step() as a list of named views (the caller owns the memory). The
// first step (or load_state) fixes the list: later steps must pass the same names with the same
// sizes in the same order, else std::invalid_argument. The layout of each tensor is the caller's
// business: the optimizer treats it as a flat array.
//
// STATE (AdamWState): the step count and m, v for every parameter. It converts to and from a
// safetensors file (tensors "<prefix>m.<name>" and "<prefix>v.<name>", flat, in S's dtype so the
// round trip is bit-exact; metadata "<prefix>step" and "<prefix>type" = "adamw"), and continuing from
// a restored state is bit-identical to never having stopped.
//
// Threading: one AdamW per model; step() is not re-entrant.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tttlab/optim/schedule.hpp"

namespace tttlab {

class SafetensorsWriter;
class SafetensorsFile;

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double clip_norm = 1.0;  // ≤ 0: no clipping

  void validate() const;  // std::invalid_argument for β outside [0, 1), ε or decay < 0
};

template <class S>
struct NamedParam {
  std::string name;
  std::span<S> value;       // updated in place
  std::span<const S> grad;  // same size
};

struct AdamWReport {
  std::int64_t step = 0;   // updates applied after this call
  double lr = 0;           // learning rate used (0 when skipped)
  double grad_norm = 0;    // global norm BEFORE clipping (NaN/inf when skipped)
  double clip_scale = 1;   // s above
  bool skipped = false;    // non-finite gradient: nothing changed
};

template <class S>
struct AdamWState {
  std::int64_t step = 0;
  std::vector<std::string> names;
  std::vector<std::vector<S>> m, v;

  // Writes the state into `w` (see the header comment); prefix e.g. "optim.".
  void save(SafetensorsWriter& w, std::string_view prefix = "optim.") const;
  // Reads a state written by save(); throws SafetensorsError naming what is missing or inconsistent
  // (wrong dtype, m/v size mismatch, bad step).
  static AdamWState load(const SafetensorsFile& f, std::string_view prefix = "optim.");
};

template <class S>
class AdamW {
 public:
  AdamW(const AdamWConfig& config, const WarmupCosineSchedule& schedule);

  AdamWReport step(std::span<const NamedParam<S>> params);
  std::int64_t step_count() const { return m_state.step; }
  // The learning rate the next step will use.
  double next_lr() const { return m_schedule(m_state.step); }

  const AdamWState<S>& state() const { return m_state; }
  // Replaces the state (for resumption). Sizes are checked against the parameters at the next step.
  void load_state(AdamWState<S> state);

  const AdamWConfig& config() const { return m_config; }
  const WarmupCosineSchedule& schedule() const { return m_schedule; }

 private:
  AdamWConfig m_config;
  WarmupCosineSchedule m_schedule;
  AdamWState<S> m_state;
};

// Global L2 norm of a list of gradients, accumulated in double.
template <class S>
double global_grad_norm(std::span<const NamedParam<S>> params);

}  // namespace tttlab
