// tttlab/fastweight/member_trace.hpp — one member of the fast-weight family run token by token, with
// a record of every step: what the stepper, hidden-state evolution and inner-loss views draw for a
// member other than TTT (docs/MATH.md §11.1; TTT's own records are tttlab/ttt/inner.hpp's observer).
//
// Which inner loop computes a member (one entry per member, in member_trace.cpp's member_engine):
//   linear_attention, mamba2, deltanet, gated_deltanet   matrix_rule_primal (matrix_rules.hpp), one
//                    token per call continuing the state, so the records are its observer's, bit for
//                    bit (tested against one call over the whole sequence)
//   titans, lact     DesignedMemory (designed_memory.hpp) at the preset's rule; the real inner loops of
//                    fastweight/titans.hpp and lact.hpp replace it there when they land
//   ttt_linear, ttt_mlp   not here: inner.hpp's primal form with its observer (std::invalid_argument)
//
// Inputs (row vectors, already normalised as the member's layer does; nothing is applied here):
//   q, k [T, d_k], v [T, d_v]; beta [T] β_t (ignored by linear attention); alpha [T] α_t ∈ (0, 1]
//   (mamba2 and gated_deltanet only); the DesignedMemory members use design (width = d_k = d_v) and
//   neither beta nor alpha (their rate is design.eta, their retention design's).
//
// Each record, for token t (state = the list of weight matrices: {S} [d_k, d_v] for a matrix member,
// {W₁ [d, 4d], W₂ [4d, d]} for an MLP member):
//   state_after   the state reads see after token t (S_t)
//   delta         state_after − the state before token t, matrix by matrix
//   gradient      ∇ℓ_t, the gradient of token t's inner loss: for a matrix member at the state its step
//                 takes it at (α_t S_{t−1} for the decayed rules: Hebbian −k_tᵀv_t, squared
//                 k_tᵀ(k_t α_t S_{t−1} − v_t)), so S_t = α_t S_{t−1} − β_t ∇ℓ_t; for a DesignedMemory
//                 member at the state reads saw before token t (before its retention)
//   key, grad     row factors with gradient[i] = key[i]ᵀ grad[i] where they are known exactly: the
//                 matrix members (key = k_t; grad = −v_t or k_t α_t S_{t−1} − v_t) and an MLP's W₁
//                 (key = k_t, grad = k_t ∇W₁ / ‖k_t‖²); empty otherwise
//   loss_initial  ℓ_t at the initial state; loss_before / loss_after: ℓ_t on the state before and
//                 after token t's step (the matrix members: S_{t−1} and S_t, matrix_rule_loss;
//                 DesignedMemory: its loss_before / loss_after)
//   output        the read-out of q_t after the write
//
// Validation is in the constructor (std::invalid_argument, one line). Not thread-safe (one owner).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tttlab/fastweight/designed_memory.hpp"
#include "tttlab/fastweight/rule.hpp"
#include "tttlab/tensor.hpp"

namespace tttlab {

struct MemberInputs {
  Mat<double> q, k, v;
  Vec<double> beta, alpha;
  DesignParams design;
};

struct MemberStepRecord {
  long token = 0;
  double beta = 1, alpha = 1;  // as applied (matrix members); the MLP members: design.eta and 1
  double loss_initial = 0, loss_before = 0, loss_after = 0;
  std::vector<Mat<double>> state_after, delta, gradient;
  std::vector<RowVec<double>> key, grad;
  RowVec<double> output;
};

// Whether member_trace computes this member (all but TTT-Linear and TTT-MLP), and whether its state
// is a matrix run by matrix_rule_primal (which has the chunked form, matrix_rule_chunked).
bool member_traceable(const FastWeightPreset& member);
bool member_is_matrix_rule(const FastWeightPreset& member);

class MemberTracer {
 public:
  MemberTracer(const FastWeightPreset& member, MemberInputs in);
  ~MemberTracer();
  MemberTracer(MemberTracer&&) noexcept;
  MemberTracer& operator=(MemberTracer&&) noexcept;

  long tokens() const;
  long computed() const;
  // The state before any token: {S₀} or {W₁, W₂} at the start.
  const std::vector<Mat<double>>& initial_state() const;
  // Consumes the next token (computed() < tokens(), else std::logic_error) and returns its record.
  MemberStepRecord step();

  struct Impl;

 private:
  std::unique_ptr<Impl> m;
};

// Every token at once.
std::vector<MemberStepRecord> member_trace(const FastWeightPreset& member, MemberInputs in);

}  // namespace tttlab
