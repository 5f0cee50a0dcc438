// tttlab/nn/embedding.hpp — token embedding and the LM head tied to it (docs/MATH.md §8.2,
// tie_word_embeddings = true).
//
//   embedding:  H[t] = E[token_t]            (a row lookup)
//   tied head:  logits = Hf·Eᵀ               (the same matrix E read as the output projection)
//
// Shapes (conventions of tttlab/nn/views.hpp):
//   E       [V, D]   one row per token id; V = 256 for the byte-level models (k_byte_vocab)
//   tokens  [T]      ids in [0, V)
//   H, Hf   [T, D]   embedded tokens / final-normed hidden states
//   logits  [T, V]
//
// Backward: both uses ADD into the same dE [V, D], so a training step calls embedding_backward and
// tied_head_backward on one buffer and gets the gradient of the tied matrix:
//   embedding_backward:  dE[token_t] += dH[t]   (a repeated token accumulates every occurrence)
//   tied_head_backward:  dE += dlogitsᵀ·Hf,   dHf = dlogits·E   (OVERWRITTEN)
// A token outside [0, V) is an std::invalid_argument naming its position and value.
#pragma once

#include <span>

#include "tttlab/nn/views.hpp"

namespace tttlab {

inline constexpr int k_byte_vocab = 256;

template <class S>
void embedding_forward(ConstMatRef<S> E, std::span<const int> tokens, Mat<S>& H);

template <class S>
void embedding_backward(std::span<const int> tokens, ConstMatRef<S> dH, MatRef<S> dE);

template <class S>
void tied_head_forward(ConstMatRef<S> Hf, ConstMatRef<S> E, Mat<S>& logits);

// dHf may be nullptr when only dE is wanted.
template <class S>
void tied_head_backward(ConstMatRef<S> Hf, ConstMatRef<S> E, ConstMatRef<S> dlogits, Mat<S>* dHf,
                        MatRef<S> dE);

}  // namespace tttlab
