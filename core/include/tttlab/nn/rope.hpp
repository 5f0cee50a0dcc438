// tttlab/nn/rope.hpp — rotary position embedding, INTERLEAVED pairing (docs/MATH.md §2.2).
//
// For a head of width d (even), dims (2m, 2m+1) form complex pair m = 0..d/2−1 with frequency
// θ_m = rope_theta^(−2m/d). A row at position p is rotated by φ = p·θ_m:
//   (a, b) ↦ (a cos φ − b sin φ, a sin φ + b cos φ)
// The TTT layers pass p = t mod b (positions restart at every mini-batch); the Transformer baseline
// passes the global position t.
//
// Shapes: X [T, D] with H heads of width d = D/H as column blocks; positions [T].
#pragma once

#include <vector>

#include "tttlab/tensor.hpp"

namespace tttlab {

// Rotates every head of X in place.
template <class S>
void rope_apply(MatRef<S> X, int heads, const std::vector<long>& positions, double rope_theta);

// Backward of rope_apply: the rotation is orthogonal, so dX = R(−φ)·dY. Rotates dY in place.
template <class S>
void rope_backward(MatRef<S> dY, int heads, const std::vector<long>& positions, double rope_theta);

}  // namespace tttlab
