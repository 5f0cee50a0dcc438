// tttlab/model/model.hpp — a byte-level language model around a sequence layer (docs/MATH.md §8).
//
//   h = E[x]                                          embedding E [V, D]
//   for each block i:
//     if pre_conv (Mamba backbone):  h += conv_i(RMSNorm_conv(h))      depthwise causal, width K, bias
//     h += mixer_i(RMSNorm_seq(h))                    TTT-Linear / TTT-MLP / linear or softmax attention / Mamba-2
//     h += W_down( silu(RMSNorm_ffn(h)·W_gate) ⊙ RMSNorm_ffn(h)·W_up )  SwiGLU
//   logits = RMSNorm_f(h) · Eᵀ                        LM head tied to the embedding
//
// Parameters are visited by for_each_param with the names of the official ttt-lm-pytorch state_dict
// (model.embed_tokens.weight, model.layers.{i}.seq_norm.weight, ..., model.norm.weight); tensors are in
// our storage order ([in, out], tensor.hpp), so checkpoint code transposes nn.Linear weights.
//
// A Model is immutable while it computes: train_sequence, eval_sequence and forward are const and may
// run on several threads at once, each with its own gradient model / stream. Gradients are held in a
// Model of the same configuration made by zeros_like ("a gradient has the shape of the model").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "tttlab/model/config.hpp"
#include "tttlab/nn/cross_entropy.hpp"

namespace tttlab {

// Streaming state of one sequence through the model (generation).
struct ModelStream {
  virtual ~ModelStream() = default;
  long tokens = 0;
};

template <class S>
class Model {
 public:
  // Initialised as docs/MATH.md §8.5 from `seed` (deterministic).
  Model(const ModelConfig& cfg, std::uint64_t seed);
  // All-zero parameters of the same shapes (a gradient accumulator).
  std::unique_ptr<Model> zeros_like() const;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  ~Model();

  const ModelConfig& config() const { return m_cfg; }
  void for_each_param(const ParamVisitor<S>& f);
  long num_params();
  void set_zero();

  // ---- training and evaluation, one sequence ----
  // tokens [T + 1]: inputs tokens[0..T−1], targets tokens[1..T]. mask [T] (empty = every target
  // counts). ADDS ∂(loss_sum / denominator)/∂θ into `grads` (denominator > 0: the number of counted
  // targets of the whole batch) and returns this sequence's statistics (loss in nats).
  CrossEntropyStats train_sequence(std::span<const int> tokens, std::span<const std::uint8_t> mask,
                                   long denominator, Model& grads) const;
  // Loss only; position_losses [T] (optional) receives each target's loss (0 where not counted).
  CrossEntropyStats eval_sequence(std::span<const int> tokens, std::span<const std::uint8_t> mask,
                                  Vec<S>* position_losses = nullptr) const;

  // ---- streaming inference ----
  std::unique_ptr<ModelStream> start() const;
  // Feeds tokens (any number, ≥ 1) and returns their logits [n, V]. Never re-runs the prefix.
  Mat<S> forward(ModelStream& stream, std::span<const int> tokens) const;
  // The same, and every TTT block runs its inner loop in the primal form, reporting each (block, head,
  // token) step to `observer` (the per-token losses, the update, W_{t−1} and W_t; see inner.hpp). For
  // the GUI and `tttlab probe`; blocks of the attention baselines report nothing.
  using BlockObserver = std::function<void(int block, int head, const InnerStepRecord<S>&)>;
  Mat<S> forward(ModelStream& stream, std::span<const int> tokens, const BlockObserver& observer) const;

  // The input x [T, D] that block `block`'s sequence layer sees for these tokens (from the empty
  // prefix): embedding, the blocks before it, then its pre-conv and RMSNorm_seq.
  Mat<S> mixer_input(std::span<const int> tokens, int block) const;

  // Matrix-product FLOPs of one forward over T tokens (embedding lookups excluded, head included).
  double forward_flops(long T) const;

  // The sequence layer of block i (for probes: the GUI and `tttlab probe` look inside it).
  const SequenceLayer<S>& mixer(int block) const;

 private:
  struct Block;
  Model(const ModelConfig& cfg, bool zeros, std::uint64_t seed);
  ModelConfig m_cfg;
  Mat<S> m_embed;                       // [V, D]
  std::vector<std::unique_ptr<Block>> m_blocks;
  RowVec<S> m_final_norm;               // [D]
};

}  // namespace tttlab
