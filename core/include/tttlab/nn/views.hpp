// tttlab/nn/views.hpp — the argument conventions shared by every op in tttlab/nn/.
//
// One call processes ONE sequence. Storage follows tensor.hpp: row-major, a token is a row, a linear
// map is [in, out] applied as y = x·W, head h of a [T, D] activation is columns h·d .. (h+1)·d − 1.
//
// Argument kinds, the same in every op header:
//   inputs          ConstMatRef<S> / ConstRowRef<S>: any row-major matrix, block or Map, no copy.
//   outputs         Mat<S>&: resized by the op and OVERWRITTEN. This includes the gradients of
//                   activations (dX, dQ, dlogits, ...): an activation used twice (e.g. the residual
//                   stream) gets its two gradients summed by the caller.
//   parameter grads MatRef<S> / RowRef<S> with exactly the parameter's shape: ADDED to (+=), never
//                   cleared, so that one buffer accumulates over the sequences of a batch and over
//                   tied uses (the embedding matrix). A wrong shape is an exception, not a resize.
//                   Because these are Refs, a gradient may be a Map into one flat buffer.
// Outputs must not share memory with inputs (checked: the op throws std::invalid_argument).
//
// Errors: a shape that does not fit throws std::invalid_argument whose one-line message names the
// op, the argument, its shape and the shape it must have.
//
// Threading: the ops keep no global state and are reentrant. Calls on distinct outputs may run on
// distinct threads; calls that ADD into one gradient buffer must not run concurrently (give each
// thread its own accumulator and sum them).
#pragma once

#include "tttlab/tensor.hpp"

namespace tttlab {

// A row of parameters (bias, norm weight) given by view: a RowVec, a row of a row-major matrix, or a
// Map of contiguous memory.
template <class S>
using ConstRowRef = Eigen::Ref<const RowVec<S>>;
template <class S>
using RowRef = Eigen::Ref<RowVec<S>>;

// ε of RMSNorm and LayerNorm in the model (docs/MATH.md §8.2, §8.3: rms_norm_eps = 1e-6; PostLN 1e-6).
inline constexpr double k_norm_eps = 1e-6;

}  // namespace tttlab
