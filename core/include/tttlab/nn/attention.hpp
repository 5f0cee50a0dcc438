// tttlab/nn/attention.hpp — causal multi-head softmax attention, the Transformer baseline's token
// mixer, on Q, K, V that the caller has already projected and rotated (RoPE with global positions).
//
// Per head h (columns h·d .. (h+1)·d − 1 of every [T, D] matrix, d = D / heads):
//   S = (1/√d)·Q_h·K_hᵀ,   P[t, s] = exp(S[t, s]) / Σ_{s' ≤ t} exp(S[t, s'])  for s ≤ t, 0 for s > t
//   O_h = P·V_h
// Each softmax row subtracts its maximum before exp, so no logit size overflows.
//
// Shapes (conventions of tttlab/nn/views.hpp): Q, K, V, O, dO, dQ, dK, dV [T, D]; heads ≥ 1 divides
// D. There are no parameters, so the backward only OVERWRITES dQ, dK, dV:
//   dV_h = Pᵀ·dO_h,  dP = dO_h·V_hᵀ,  dS = P ⊙ (dP − rowsum(P ⊙ dP)),
//   dQ_h = (1/√d)·dS·K_h,  dK_h = (1/√d)·dSᵀ·Q_h
// The backward recomputes P head by head from Q and K instead of storing the H [T, T] matrices of
// the forward: one extra Q·Kᵀ per head, and memory O(T²) for one head at a time. Products run on
// the lower triangle only (Eigen triangular views), as causality leaves the rest zero.
//
// Streaming (decode): a KvCache holds the keys and values of the tokens seen so far. Each call of
// causal_attention_forward_cached appends the chunk's K and V and lets query i of the chunk attend to
// every cached token up to and including its own position. Feeding a sequence in any chunks (one
// token at a time for sampling) gives the same O as causal_attention_forward over the whole sequence.
//
// Sliding window (LaCT's local attention; flash-attn's window_size = (W − 1, 0)): with window W ≥ 1,
// query t sees only the keys s with t − W < s ≤ t, the last W tokens including its own; the softmax,
// the backward and the scale are as above over those keys. window ≤ 0 is no limit: the windowed
// functions then ARE the causal ones above (they call them). The windowed forward and backward work
// row by row on the band, O(T·W·d) per head; the cached form keeps only the last W − 1 tokens.
#pragma once

#include "tttlab/nn/views.hpp"

namespace tttlab {

template <class S>
void causal_attention_forward(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                              Mat<S>& O);

template <class S>
void causal_attention_backward(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                               ConstMatRef<S> dO, Mat<S>& dQ, Mat<S>& dK, Mat<S>& dV);

// The keys and values of one layer for one sequence. Rows [0, length) of keys/values are the cached
// tokens in order; rows beyond are spare capacity (grown by doubling). A default-constructed cache
// is empty and takes its width D from the first append. Owned by the caller; one cache per layer
// and sequence; not thread-safe.
template <class S>
struct KvCache {
  Mat<S> keys;    // [capacity, D]
  Mat<S> values;  // [capacity, D]
  Eigen::Index length = 0;

  void clear() { length = 0; }  // keeps the memory for the next sequence
  // Makes room for `tokens` tokens of width D without reallocating later (drops the content if the
  // width changes).
  void reserve(Eigen::Index tokens, Eigen::Index width);
  // Appends rows of K and V (each [n, D]).
  void append(ConstMatRef<S> K, ConstMatRef<S> V);
};

// Q, K, V [n, D]: the chunk's next n tokens (n ≥ 0). Appends K, V to the cache, then
// O [n, D] (OVERWRITTEN) = attention of each query over the cache up to its own position.
template <class S>
void causal_attention_forward_cached(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V,
                                     int heads, KvCache<S>& cache, Mat<S>& O);

// Sliding-window causal attention over a whole sequence (window W above; ≤ 0: no limit).
template <class S>
void windowed_attention_forward(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                                int window, Mat<S>& O);

// Its backward (OVERWRITES dQ, dK, dV), recomputing each row's probabilities.
template <class S>
void windowed_attention_backward(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V, int heads,
                                 int window, ConstMatRef<S> dO, Mat<S>& dQ, Mat<S>& dK, Mat<S>& dV);

// Streaming: `cache` holds the keys and values of the tokens before Q (at most the last W − 1 of
// them; empty at the start). Appends K, V, writes O [n, D] (OVERWRITTEN), then keeps only the last
// W − 1 tokens. Chunks of any size give windowed_attention_forward's O. window ≤ 0: exactly
// causal_attention_forward_cached (the cache keeps every token).
template <class S>
void windowed_attention_forward_cached(ConstMatRef<S> Q, ConstMatRef<S> K, ConstMatRef<S> V,
                                       int heads, int window, KvCache<S>& cache, Mat<S>& O);

}  // namespace tttlab
