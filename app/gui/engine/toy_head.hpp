// app/gui/engine/toy_head.hpp — the inputs of one TTT head built from text and a seed (see
// head_config.hpp for the construction). Everything here is a plain value; building one takes
// O(T·d²) and is done on the engine thread.
#pragma once

#include <string>
#include <vector>

#include "gui/engine/head_config.hpp"
#include "tttlab/tensor.hpp"
#include "tttlab/ttt/inner.hpp"

namespace tttlab::gui {

template <class S>
struct ToyHead {
  std::vector<unsigned char> bytes;  // the T tokens
  Mat<S> X;                          // [T, d] embedded tokens
  Mat<S> Q, K, V;                    // [T, d] test, training and label views
  Vec<S> lambda;                     // [T]   λ_t
  InnerHeadParams<S> params;         // γ = 1, β = 0, τ [b]
  InnerOptions options;
  InnerWeights<S> w0;                // the initial inner weights W0

  long tokens() const { return static_cast<long>(bytes.size()); }
};

// Builds the head for `c` (which must pass validate()). Deterministic in (c.text, c.repeat, c.seed,
// c.d, c.model, c.w0): the same config gives bit-identical inputs.
template <class S>
ToyHead<S> make_toy_head(const HeadConfig& c);

// A printable label for token byte `b` ("a", "␣" for space, "\n", "0xC3" for non-ASCII).
std::string token_label(unsigned char b);

}  // namespace tttlab::gui
