// tttlab/nn/causal_conv.hpp — depthwise causal 1-D convolution over time (docs/MATH.md §2.1, §8.2).
//
//   y_t[c] = Σ_{j=0..K−1} w[c, j] · u_{t−K+1+j}[c] + bias[c],   u_s = 0 for s < 0 (zero left padding)
//
// Layouts: u, y [T, D]; w [D, K] (PyTorch's Conv1d weight [D, 1, K] without the middle axis, so tap
// j = K−1 multiplies the current token); bias [D].
//
// Streaming: `history` holds the K−1 inputs before u (oldest first, [K−1, D]); a fresh sequence passes
// zeros. causal_conv_forward leaves in `history` the last K−1 inputs of the combined stream, so calling
// it chunk after chunk gives the same result as one call over the whole sequence.
#pragma once

#include "tttlab/tensor.hpp"

namespace tttlab {

template <class S>
void causal_conv_forward(ConstMatRef<S> u, const Mat<S>& w, const RowVec<S>& bias,
                         Mat<S>& history, Mat<S>& y);

// Backward for a whole sequence from a zero history: given dy [T, D], accumulates into
// du [T, D] (resized and zeroed), dw [D, K] and dbias [D] (both ADDED to).
template <class S>
void causal_conv_backward(ConstMatRef<S> u, const Mat<S>& w, ConstMatRef<S> dy, Mat<S>& du,
                          Mat<S>& dw, RowVec<S>& dbias);

}  // namespace tttlab
