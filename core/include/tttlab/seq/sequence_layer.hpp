// tttlab/seq/sequence_layer.hpp — the interface every sequence-mixing layer implements.
//
// A sequence layer maps a sequence x [T, D] to y [T, D], causally: y_t depends on x_1..x_t only.
// Layers are STREAMS: start() makes the state of an empty prefix, and forward(state, x) continues it
// with T more tokens, leaving the state after the last one. Feeding a sequence in any chunks (down to
// one token at a time, which is how generation decodes) gives the same outputs as one call over the
// whole sequence. The layer object itself is immutable during forward: one layer may serve many states
// on many threads; one state must not be used by two threads at once.
//
// Implementations: TTTLayer (tttlab/ttt/layer.hpp; TTT-Linear and TTT-MLP), and the baselines
// LinearAttentionLayer and SoftmaxAttentionLayer (tttlab/seq/attention_layers.hpp).
#pragma once

#include <memory>
#include <string>

#include "tttlab/tensor.hpp"

namespace tttlab {

// The per-sequence state of a layer (conv buffers, TTT hidden state, KV cache, ...).
struct SequenceState {
  virtual ~SequenceState() = default;
  long tokens = 0;  // tokens consumed so far
};

template <class S>
class SequenceLayer {
 public:
  virtual ~SequenceLayer() = default;
  virtual std::string name() const = 0;
  virtual int width() const = 0;
  virtual std::unique_ptr<SequenceState> start() const = 0;
  // Continues `state` with x [T, D]; returns y [T, D].
  virtual Mat<S> forward(SequenceState& state, ConstMatRef<S> x) const = 0;

  // Convenience: a whole sequence from the empty prefix.
  Mat<S> forward(ConstMatRef<S> x) const {
    auto st = start();
    return forward(*st, x);
  }
};

}  // namespace tttlab
