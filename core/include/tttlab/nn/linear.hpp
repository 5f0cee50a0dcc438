// tttlab/nn/linear.hpp — a dense layer  Y = X·W (+ b)  and its backward.
//
// Shapes (one sequence; conventions of tttlab/nn/views.hpp):
//   X  [T, in]     input tokens, one per row
//   W  [in, out]   stored [in, out] as in tensor.hpp (PyTorch's nn.Linear weight transposed)
//   b  [out]       optional bias (the model's projections have none: docs/MATH.md §2.1, §8)
//   Y  [T, out]    output, resized and overwritten
//
// Backward, given dY [T, out]:
//   dX  = dY·Wᵀ        [T, in]   activation gradient: resized and OVERWRITTEN (skipped if null)
//   dW += Xᵀ·dY        [in, out] parameter gradient: ADDED to
//   db += Σ_t dY_t     [out]     parameter gradient: ADDED to
// All three are single matrix products (Eigen GEMM), so this is also the fast path.
#pragma once

#include "tttlab/nn/views.hpp"

namespace tttlab {

template <class S>
void linear_forward(ConstMatRef<S> X, ConstMatRef<S> W, Mat<S>& Y);

template <class S>
void linear_forward(ConstMatRef<S> X, ConstMatRef<S> W, ConstRowRef<S> b, Mat<S>& Y);

// Without bias. dX may be nullptr when the input's gradient is not needed (e.g. the first layer).
template <class S>
void linear_backward(ConstMatRef<S> X, ConstMatRef<S> W, ConstMatRef<S> dY, Mat<S>* dX,
                     MatRef<S> dW);

// With bias.
template <class S>
void linear_backward(ConstMatRef<S> X, ConstMatRef<S> W, ConstMatRef<S> dY, Mat<S>* dX,
                     MatRef<S> dW, RowRef<S> db);

}  // namespace tttlab
