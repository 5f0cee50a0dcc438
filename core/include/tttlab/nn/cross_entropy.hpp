// tttlab/nn/cross_entropy.hpp — softmax cross-entropy of next-token logits (docs/MATH.md §7.1: mean
// token cross-entropy, logits in fp32).
//
// For each position t with a target y_t:
//   ℓ_t = logsumexp(logits_t) − logits_t[y_t]           (nats; bits = nats / ln 2)
//   ∂ℓ_t/∂logits_t = softmax(logits_t) − onehot(y_t)
// logsumexp is taken as m + log Σ exp(l − m) with m the row maximum, so no exp overflows whatever the
// logits' size. Each row is computed in S (fp32 rows in fp32); the sum over rows is in double.
//
// Shapes: logits [T, V]; targets [T] with values in [0, V) or k_ignore_target (no target at this
// position: padding, or the last token of a sequence without a successor). Ignored positions add
// nothing to the loss, get zero dlogits rows and a zero per-position loss.
//
// Normalisation: the loss is the MEAN over counted positions. dlogits (OVERWRITTEN, [T, V]) is the
// gradient of loss_sum / denominator, where denominator = counted by default. For a batch of
// sequences processed one call at a time, pass the batch's total number of counted positions as
// `denominator`: the per-sequence dlogits then add up to the gradient of the batch mean, also when
// the sequences have different numbers of targets.
#pragma once

#include <span>

#include "tttlab/nn/views.hpp"

namespace tttlab {

inline constexpr int k_ignore_target = -1;

struct CrossEntropyStats {
  double loss_sum = 0;  // Σ_t ℓ_t over counted positions (nats)
  long counted = 0;     // positions with a target
  long correct = 0;     // counted positions whose largest logit is the target (first index on ties)
  double mean() const { return counted > 0 ? loss_sum / double(counted) : 0.0; }
};

// dlogits and position_losses ([T], resized) are optional outputs (nullptr: not computed).
// denominator: 0 means `counted` of this call; otherwise it must be > 0.
template <class S>
CrossEntropyStats softmax_cross_entropy(ConstMatRef<S> logits, std::span<const int> targets,
                                        Mat<S>* dlogits = nullptr,
                                        Vec<S>* position_losses = nullptr, long denominator = 0);

}  // namespace tttlab
