// tttlab/fastweight/member_trace.hpp — one member of the fast-weight family run token by token, with
// a record of every step: what the stepper, hidden-state evolution and inner-loss views draw for a
// member other than TTT (docs/MATH.md §11.1; TTT's own records are tttlab/ttt/inner.hpp's observer).
//
// Which inner loop computes a member (one entry per member, in member_trace.cpp's member_engine):
//   linear_attention, mamba2, deltanet, gated_deltanet   matrix_rule_primal (matrix_rules.hpp), one
//                    token per call continuing the state, so the records are its observer's, bit for
//                    bit (tested against one call over the whole sequence)
//   titans           titans_primal (titans.hpp: FLA's linear memory, §11.9), one token per call
//                    from the carried TitansState, so the records are its observer's
//   lact             lact_stream (lact.hpp, §11.10), one token per call: the weights change only when
//                    a token arrives after a full chunk of C (the stream then learns from that chunk
//                    before reading the token; the last chunk is only read), and are constant between
//   ttt_linear, ttt_mlp   not here: inner.hpp's primal form with its observer (std::invalid_argument)
//
// Inputs (row vectors, already normalised and gated as the member's layer does; nothing is applied
// here):
//   q, k [T, d_k], v [T, d_v]
//   matrix members  beta [T] β_t (ignored by linear attention); alpha [T] α_t ∈ (0, 1] (mamba2 and
//                   gated_deltanet only); S₀ = 0
//   titans          d_k = d_v = D; beta [T] θ_t > 0 (the write's rate); alpha [T] α_t ∈ [0, 1] (the
//                   forgetting: the memory keeps 1 − α_t); momentum [T] η_t ∈ [0, 1); design.chunk the
//                   mini-batch b; the LayerNorm's w = 1, b = 0, ε = 1e−6; M₀ = 0, S₀ = 0
//   lact            beta [T] the rate of all three weights (lr0 = lr1 = lr2); momentum [T] m_t when
//                   the preset's optimizer is momentum or Muon (Muon: orthogonalised), else unused;
//                   design.chunk the chunk C; hidden d_h (0: 4·d_k); the initial weights W₀, W₂
//                   [d_h, d_k] ~ N(0, 1/d_k), W₁ [d_v, d_h] ~ N(0, 1/d_h) from Rng(design.seed,
//                   kLactInitStream)
//
// Each record, for token t (state = the list of matrices the loop holds: {S} [d_k, d_v] for a
// matrix member; Titans {M [D, D], S [D, D]} (memory, momentum); LaCT {W₀, W₁, W₂} in lact.hpp's
// layout):
//   state_after   the state after token t
//   delta         state_after − the state before token t, matrix by matrix (LaCT: zero but at the
//                 first token after each full chunk)
//   gradient      the gradient term the step takes, one matrix per weight it writes:
//                 matrix members ∇ℓ_t at the state the step takes it at (α_t S_{t−1} for the decayed
//                 rules: Hebbian −k_tᵀv_t, squared k_tᵀ(k_t α_t S_{t−1} − v_t)), so
//                 S_t = α_t S_{t−1} − β_t ∇ℓ_t;
//                 titans {k_tᵀu_t}, FLA's u_t at the mini-batch's start memory (titans.hpp; not the
//                 exact gradient of its loss, §11.9), recovered from the momentum as
//                 (η_t S_{t−1} − S_t)/(2θ_t), so S_t = η_t S_{t−1} − 2θ_t k_tᵀu_t;
//                 lact {∇_{W₀}ℓ_t, ∇_{W₁}ℓ_t, ∇_{W₂}ℓ_t} of ℓ_t = −⟨f_W(k_t), v_t⟩ at the weights
//                 token t is read with (its chunk's): the chunk's update steps along −Σ η_t of them
//                 (with momentum or Muon as set) when the next chunk starts
//   key, grad     row factors with gradient[0] = key[0]ᵀ grad[0]: the matrix members (key = k_t;
//                 grad = −v_t or k_t α_t S_{t−1} − v_t) and Titans (k_t, u_t); empty for LaCT
//   loss_initial  ℓ_t at the initial state; loss_before / loss_after: ℓ_t on the state before and
//                 after token t's step (matrix members: S_{t−1}, S_t, matrix_rule_loss; Titans:
//                 titans_loss, ‖w ⊙ LN(k_t M) + b + k_t − v_t‖² without a ½, M_{t−1} and M_t; LaCT:
//                 −⟨f_W(k_t), v_t⟩ on the weights before and after the token's arrival)
//   chunk_*       LaCT only, at a token whose arrival made an update: the chunk learnt from
//                 ([chunk_first, chunk_first + chunk_tokens)) and lact_chunk_loss on it before and
//                 after the update (chunk_tokens = 0 elsewhere)
//   output        the read-out of q_t (matrix members and Titans after the write; LaCT with the
//                 weights of its chunk, apply-then-update)
//
// Validation is in the constructor (std::invalid_argument, one line). Not thread-safe (one owner).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tttlab/fastweight/designed_memory.hpp"  // DesignParams
#include "tttlab/fastweight/rule.hpp"
#include "tttlab/tensor.hpp"

namespace tttlab {

struct MemberInputs {
  Mat<double> q, k, v;
  Vec<double> beta, alpha;
  Vec<double> momentum;  // Titans' η_t, LaCT's m_t
  int hidden = 0;        // LaCT's d_h (0: 4·d_k)
  DesignParams design;   // seed (LaCT's initial weights) and chunk (Titans' b, LaCT's C)
};

// The stream of Rng(design.seed, ·) LaCT's initial weights are drawn from.
inline constexpr std::uint64_t kLactInitStream = 0x6c616374ULL;  // "lact"

struct MemberStepRecord {
  long token = 0;
  // As applied: β_t and α_t (matrix members); Titans θ_t, α_t (forgetting), η_t; LaCT its rate and m_t.
  double beta = 1, alpha = 1, momentum = 0;
  double loss_initial = 0, loss_before = 0, loss_after = 0;
  long chunk_first = 0, chunk_tokens = 0;  // LaCT: the chunk learnt from at this token (0: none)
  double chunk_loss_before = 0, chunk_loss_after = 0;
  std::vector<Mat<double>> state_after, delta, gradient;
  std::vector<RowVec<double>> key, grad;
  RowVec<double> output;
};

// Whether member_trace computes this member (all but TTT-Linear and TTT-MLP), and whether its state
// is a matrix run by matrix_rule_primal (which has the chunked form, matrix_rule_chunked).
bool member_traceable(const FastWeightPreset& member);
bool member_is_matrix_rule(const FastWeightPreset& member);
// The names of the matrices of its state, in the records' order: {"S"}; Titans {"M", "S"}; LaCT
// {"W₀", "W₁", "W₂"}; empty for TTT.
std::vector<std::string> member_state_names(const FastWeightPreset& member);

class MemberTracer {
 public:
  MemberTracer(const FastWeightPreset& member, MemberInputs in);
  ~MemberTracer();
  MemberTracer(MemberTracer&&) noexcept;
  MemberTracer& operator=(MemberTracer&&) noexcept;

  long tokens() const;
  long computed() const;
  // The state before any token, as the records list it.
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
