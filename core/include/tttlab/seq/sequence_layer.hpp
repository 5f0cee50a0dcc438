// tttlab/seq/sequence_layer.hpp — the interface every sequence-mixing layer implements.
//
// A sequence layer maps a sequence x [T, D] to y [T, D], causally: y_t depends on x_1..x_t only.
//
// Inference: layers are STREAMS. start() makes the state of an empty prefix, and forward(state, x)
// continues it with T more tokens, leaving the state after the last one. Feeding a sequence in any
// chunks (down to one token at a time, which is how generation decodes) gives the same outputs as one
// call over the whole sequence.
//
// Training: forward_train(x, y) runs a whole sequence from the empty prefix and returns a cache of what
// backward needs; backward(cache, dY, grads, dx) ADDS the parameter gradients into `grads`, a layer of
// the same type and shapes made by zeros_like() (a gradient has the shape of the layer), and OVERWRITES
// dx. for_each_param() visits every trainable tensor in a fixed order with a stable name, so that the
// optimiser can walk a layer and its gradient side by side.
//
// Threading: forward/forward_train/backward are const and may run concurrently on distinct states,
// caches and gradient layers. Implementations: TTTLayer (tttlab/ttt/layer.hpp), LinearAttentionLayer
// and SoftmaxAttentionLayer (tttlab/seq/attention_layers.hpp), Mamba2Layer (tttlab/seq/mamba2_layer.hpp).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "tttlab/tensor.hpp"

namespace tttlab {

// The per-sequence state of a layer (conv buffers, TTT hidden state, KV cache, ...).
struct SequenceState {
  virtual ~SequenceState() = default;
  long tokens = 0;  // tokens consumed so far
};

// What forward_train keeps for backward.
struct LayerCache {
  virtual ~LayerCache() = default;
};

template <class S>
using ParamVisitor = std::function<void(Eigen::Map<Mat<S>>, const std::string&)>;

template <class S>
class SequenceLayer {
 public:
  virtual ~SequenceLayer() = default;
  virtual std::string name() const = 0;
  virtual int width() const = 0;

  // ---- inference (streams)
  virtual std::unique_ptr<SequenceState> start() const = 0;
  // Continues `state` with x [T, D]; returns y [T, D].
  virtual Mat<S> forward(SequenceState& state, ConstMatRef<S> x) const = 0;
  // Convenience: a whole sequence from the empty prefix.
  Mat<S> forward(ConstMatRef<S> x) const {
    auto st = start();
    return forward(*st, x);
  }

  // ---- training
  virtual std::unique_ptr<LayerCache> forward_train(ConstMatRef<S> x, Mat<S>& y) const = 0;
  virtual void backward(const LayerCache& cache, ConstMatRef<S> dY, SequenceLayer& grads,
                        Mat<S>& dx) const = 0;
  virtual std::unique_ptr<SequenceLayer> zeros_like() const = 0;
  virtual void for_each_param(const ParamVisitor<S>& f) = 0;
  // Matrix-product FLOPs of one forward over T tokens (for throughput and MFU reports).
  virtual double forward_flops(long T) const = 0;
};

}  // namespace tttlab
