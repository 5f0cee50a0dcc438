// tttlab/fastweight/matrix_rules.hpp — the inner loops of the fast-weight members whose state is a
// matrix and which take one step per token, for ONE head of ONE sequence (docs/MATH.md §11.2–§11.4).
//
// Inputs (already projected; no convolution, normalisation or scale is applied here):
//   q, k   [T, d_k]   read and write keys (the delta rules expect L2-normalised k: §11.2)
//   v      [T, d_v]   values
//   beta   [T]        step size β_t (unused by linear attention: pass an empty Vec)
//   alpha  [T]        decay α_t ∈ (0, 1], 1 = no forgetting (used by the decayed Hebbian rule and
//                     Gated DeltaNet only: pass an empty Vec to the others)
//   S0     [d_k, d_v] the initial state
//   → o    [T, d_v],  final state [d_k, d_v]
//
// Row-vector convention, as everywhere in this project (tensor.hpp): the state maps a key row to a
// value row, read o_t = q_t S_t, like TTT's z = q W. This is also the layout of
// flash-linear-attention's naive recurrences (state [K, V], o_t = Σ_k q_t[k] S[k, :]); a column-vector
// paper (the Gated DeltaNet paper writes S [d_v, d_k] and o = S q) has our Sᵀ.
//
//   LinearAttention  S_t = S_{t−1} + k_tᵀ v_t
//   DecayedHebbian   S_t = α_t S_{t−1} + β_t k_tᵀ v_t                     (Mamba-2's recurrence)
//   DeltaNet         S_t = S_{t−1} − β_t k_tᵀ (k_t S_{t−1} − v_t)
//   GatedDeltaNet    S_t = α_t S_{t−1} − β_t k_tᵀ (α_t k_t S_{t−1} − v_t)  (decay, then delta step)
//   and every member reads AFTER its write: o_t = q_t S_t.
//
// Two forms compute the same function (agreement to rounding in fp64: tests/core/test_fastweight.cpp):
//   matrix_rule_primal   token by token; can report every step to an observer (the stepper view).
//   matrix_rule_chunked  chunks of C tokens (the last one shorter when C ∤ T): within a chunk the
//                        cumulative decays (SSD's form) and, for the delta rules, the UT transform
//                        T = (I + tril(diag(β)(K Kᵀ ⊙ Γ), −1))⁻¹ diag(β), W = T (γ ⊙ K), U = T V
//                        (§11.3); between chunks the state is passed sequentially.
// matrix_rule_backward is the manual backward of the primal form: the recurrence run in reverse with
// dS carried backward (§11.4).
//
// Ownership: callers own every argument; the functions write only their outputs. Arguments are
// validated first (std::invalid_argument). Instantiated for float and double.
#pragma once

#include <functional>
#include <optional>

#include "tttlab/fastweight/matrix_rule_kind.hpp"
#include "tttlab/fastweight/rule.hpp"
#include "tttlab/tensor.hpp"

namespace tttlab {

// MatrixRule, to_string, uses_beta, uses_alpha, is_delta_rule: tttlab/fastweight/matrix_rule_kind.hpp.

// The inner loop that computes a point of the template, where one here does: a matrix state, one GD
// step per token (granularity per_token or exact_chunk), a Hebbian or squared loss, no retention or a
// scalar decay. Hebbian with a fixed rate and no decay is linear attention; any other Hebbian rule is
// the decayed Hebbian rule (α = 1 without retention, β constant for a fixed rate); squared is DeltaNet
// without retention and Gated DeltaNet with a scalar decay. Empty for every other rule.
std::optional<MatrixRule> matrix_rule_for(const FastWeightRule& rule);

// The inner loss each member's step descends, for one token (§11.1): Hebbian −⟨k S, v⟩, squared
// ½‖k S − v‖². A step of the Hebbian loss's gradient −kᵀv with rate β is the Hebbian write.
template <class S>
S matrix_rule_loss(MatrixRule rule, const Mat<S>& state, const RowVec<S>& k, const RowVec<S>& v);

// What the primal form reports for token t. References are valid only during the callback.
template <class S>
struct MatrixRuleStep {
  long token = 0;
  S beta = 1;                            // β_t as applied (1 for linear attention)
  S alpha = 1;                           // α_t as applied (1 where the member has no decay)
  S loss_before = 0;                     // ℓ(S_{t−1}; k_t, v_t)
  S loss_after = 0;                      // ℓ(S_t; k_t, v_t)
  const Mat<S>* state_before = nullptr;  // S_{t−1} [d_k, d_v]
  const Mat<S>* state_after = nullptr;   // S_t
  const RowVec<S>* output = nullptr;     // o_t = q_t S_t [d_v]
};

template <class S>
using MatrixRuleObserver = std::function<void(const MatrixRuleStep<S>&)>;

// The result of a forward pass.
template <class S>
struct MatrixRuleOutput {
  Mat<S> o;      // [T, d_v]
  Mat<S> state;  // S_T [d_k, d_v]
};

// Primal form. The observer (if set) is called after every token; without one no loss is computed.
template <class S>
MatrixRuleOutput<S> matrix_rule_primal(MatrixRule rule, ConstMatRef<S> q, ConstMatRef<S> k,
                                       ConstMatRef<S> v, const Vec<S>& beta, const Vec<S>& alpha,
                                       ConstMatRef<S> S0,
                                       const MatrixRuleObserver<S>& observer = {});

// Chunked (parallel) form, chunk size C ≥ 1 (any T).
template <class S>
MatrixRuleOutput<S> matrix_rule_chunked(MatrixRule rule, ConstMatRef<S> q, ConstMatRef<S> k,
                                        ConstMatRef<S> v, const Vec<S>& beta, const Vec<S>& alpha,
                                        ConstMatRef<S> S0, int chunk);

// Gradients of a scalar loss L(o, S_T) with respect to every input. dbeta (dalpha) is empty for a
// member that does not use β (α).
template <class S>
struct MatrixRuleGrads {
  Mat<S> dq, dk, dv;  // [T, d_k], [T, d_k], [T, d_v]
  Vec<S> dbeta, dalpha;
  Mat<S> dS0;  // [d_k, d_v]
};

// Backward of the primal form, given dO = ∂L/∂o [T, d_v] and dS_T = ∂L/∂S_T [d_k, d_v]. Recomputes
// and keeps the T + 1 states (T·d_k·d_v numbers).
template <class S>
MatrixRuleGrads<S> matrix_rule_backward(MatrixRule rule, ConstMatRef<S> q, ConstMatRef<S> k,
                                        ConstMatRef<S> v, const Vec<S>& beta, const Vec<S>& alpha,
                                        ConstMatRef<S> S0, ConstMatRef<S> dO,
                                        ConstMatRef<S> dS_final);

}  // namespace tttlab
