// tttlab/fastweight/designed_memory.hpp — any point of the fast-weight template (rule.hpp) as an
// associative memory of width d, the engine of the designer view (docs/MATH.md §11.7).
//
// The recall lab's memories (analysis/recall.hpp) are five fixed members; this one is built from the
// six components, so a student can move one component at a time and watch what it does to recall.
// It reads pairs (k, v) of unit row vectors one at a time, as recall::AssociativeMemory does, and
// answers a query q with the state's read-out. Everything is in double, from W₀ = 0 (matrix) or the
// recall lab's TTT-MLP start (MLP: W₁ with entries N(0, 1/d) from Rng(seed, recall::kMlpStream),
// W₂ = 0), so that the members the recall lab has are this memory at their presets (tested).
//
// ONE WRITE, in the order §11.7 gives:
//   state        matrix: f(x) = x S, S [d, d];  mlp: f(x) = gelu(x W₁) W₂, W₁ [d, 4d], W₂ [4d, d]
//   loss         hebbian and dot_product: ℓ = −⟨f(k), v⟩;  squared: ℓ = ½‖f(k) − v‖²;
//                ttt_ln_residual: ℓ = ½‖LN(f(k)) + k − v‖² (LN without scale or shift, ε = 1e−6,
//                §3.1), and the read-out is then LN(f(q)) + q as well
//   retention    applied to every weight matrix before the gradient is taken (Gated DeltaNet's
//                order, §11.2): scalar_decay W ← α W; channel_decay W ← diag(a) W (row c of each
//                matrix by a_c = α^{u_c}, u_c ~ U(0.5, 1.5) from the seed); weight_decay
//                W ← (1 − η_t λ) W; none
//   rate         η_t: fixed η; per_token η as well: a per-token gate β_t is learned by the outer loop,
//                which this memory does not have (an untrained gate is noise, and made the delta
//                rule recall worse than linear attention; a layer trained with `tttlab train` has a
//                real one); per_position η / i
//                for the i-th token of its mini-batch or chunk (i = 1 with one step per token)
//   optimizer    on the gradient G: gd W ← W − η G; momentum M ← μM + G, W ← W − η M; muon the same
//                momentum, stepped along its orthogonalised direction (five Newton–Schulz steps)
//   granularity  per_token and exact_chunk: one step per pair, gradient at the retained state (the
//                two are the same function; exact_chunk only says how a layer computes it);
//                mini_batch (b = chunk): every pair's gradient at the state the mini-batch started
//                from, the steps applied pair by pair, so a read after pair i of the batch sees the
//                first i steps (TTT's dual form, §4); large_chunk (C = chunk): a pair joins a pending
//                chunk that reads cannot see; when C pairs are pending, one retention and one step
//                with G = Σ (η_t/η) ∇ℓ_t at the chunk's start (LaCT: apply, then update)
//
// Validation is before allocation (std::invalid_argument, one line). Not thread-safe (one owner).
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <memory>
#include <vector>

#include "tttlab/analysis/recall.hpp"
#include "tttlab/fastweight/rule.hpp"

namespace tttlab {

struct DesignParams {
  int width = 32;              // d, in [recall::kMinWidth, recall::kMaxWidth]
  std::uint64_t seed = 0;      // the MLP's W₁ and the channel decays
  double eta = 1.0;            // η > 0
  double decay = 0.95;         // α ∈ (0, 1]: scalar_decay, and the centre of channel_decay
  double weight_decay = 0.05;  // λ ∈ [0, 100], below 1/η with weight_decay: (1 − η_t λ) > 0
  double momentum = 0.9;       // μ ∈ [0, 1)
  int chunk = 16;              // b (mini_batch) or C (large_chunk), in [1, 4096]
  bool operator==(const DesignParams&) const = default;
};

// Throws std::invalid_argument naming the first parameter out of range (or ttt_ln_residual with a
// width below 2, where LN is undefined).
void validate(const FastWeightRule& rule, const DesignParams& p);

class DesignedMemory final : public recall::AssociativeMemory {
 public:
  DesignedMemory(const FastWeightRule& rule, const DesignParams& p);
  ~DesignedMemory() override;

  void write(const Eigen::RowVectorXd& k, const Eigen::RowVectorXd& v) override;
  Eigen::RowVectorXd read(const Eigen::RowVectorXd& q) const override;
  // Weights, optimizer buffers, the mini-batch's start state and the pending chunk, in numbers.
  long state_size() const override;

  // The inner loss of the last pair written, on the state reads saw just before its write (after
  // the retention of that write, where one applies) and on the state they see just after it.
  double loss_before() const { return m_loss_before; }
  double loss_after() const { return m_loss_after; }
  // The inner loss of (k, v) on the state reads see now, and its gradient with respect to each weight
  // matrix there.
  double loss(const Eigen::RowVectorXd& k, const Eigen::RowVectorXd& v) const;
  std::vector<Eigen::MatrixXd> gradient(const Eigen::RowVectorXd& k,
                                        const Eigen::RowVectorXd& v) const;
  // The weights reads see: {S} [d, d], or {W₁ [d, 4d], W₂ [4d, d]}. set_weights replaces them (same
  // shapes, else std::invalid_argument) and leaves the optimizer's buffers and any pending pairs.
  const std::vector<Eigen::MatrixXd>& weights() const;
  void set_weights(std::vector<Eigen::MatrixXd> w);

  struct Impl;

 private:
  std::unique_ptr<Impl> m;
  double m_loss_before = 0, m_loss_after = 0;
};

// The number of pairs answered right out of the episode's P, as recall::recall_correct does for the
// fixed memories.
int designed_recall_correct(const FastWeightRule& rule, const DesignParams& p,
                            const recall::Episode& e, const recall::Embedding& emb);

}  // namespace tttlab
