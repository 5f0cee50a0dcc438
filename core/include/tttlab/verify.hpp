// tttlab/verify.hpp — the built-in equivalence suite behind `tttlab verify`.
//
// On fresh random inputs (seeded), it checks that the fast paths compute the same function as the
// references, and that the layers reduce to their known special cases:
//   primal-vs-dual    full TTT layers (Mamba form: convs, RoPE, gate; random τ, data-dependent λ,
//                     random W0, γ, β), both inner models, head dims 16/32/64, b ∈ {1, 7, 16, T}
//                     (7 and 16 do not divide T = 50): outputs and every head's final state, fp64.
//   fp32-vs-fp64      the dual form in float against the same layer in double.
//   prefill-decode    dual prefill split at arbitrary points, then primal decode token by token,
//                     against one dual pass over the whole sequence (states included).
//   ln-l2-grad        the fused LN + L2 gradient against central finite differences.
//   linear-attention  the Theorem 1 configuration against tril(QKᵀ)V.
//   delta-rule        b = 1, no LN/bias/residual against the delta-rule recurrence.
//   rope-reset        positions restart every mini-batch.
// Each check reports its maximum absolute error, its maximum relative error (max |a − b| / max |ref|)
// and passes when the absolute error is within its threshold.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tttlab/ttt/layer.hpp"

namespace tttlab {

struct CheckResult {
  std::string name;
  double max_abs_err = 0;
  double max_rel_err = 0;
  double threshold = 0;
  bool passed = false;
};

struct VerifyOptions {
  std::uint64_t seed = 0;
  // Called after each check (for progress output); may be empty.
  std::function<void(const CheckResult&)> on_check;
};

std::vector<CheckResult> run_verify_suite(const VerifyOptions& opt);

// The layer configuration the suite (and the oracle tests) exercise: the paper's Mamba-backbone form
// with every feature on (Q/K shared, gate), `heads` heads of width d, mini-batches of b tokens and
// the official inner learning rate (1.0 for TTT-Linear, 0.1 for TTT-MLP).
TTTLayerConfig mamba_layer_config(InnerModel model, int d, int b, int heads = 2);

// Random parameters for tests and demos: init() plus perturbations so that no special structure hides
// a bug (random δ so τ ≠ 1/i, non-zero β_lr and larger θ_lr so λ varies per token, random γ, β, inner
// biases and projections of unit scale). Deterministic in `seed`; the same seed gives the same values
// in float and double (drawn in double, then rounded).
template <class S>
TTTLayerParams<S> random_layer_params(const TTTLayerConfig& cfg, std::uint64_t seed);

// Max |a − b| and max |a − b| / max |b| over equally shaped matrices.
struct ErrorStats {
  double max_abs = 0;
  double max_rel = 0;
  void merge(const ErrorStats& o);
};
ErrorStats compare(const Mat<double>& a, const Mat<double>& ref);

}  // namespace tttlab
