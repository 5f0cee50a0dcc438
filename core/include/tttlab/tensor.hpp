// tttlab/tensor.hpp — the storage conventions of the whole engine, stated once.
//
// STORAGE ORDER: every matrix is ROW-MAJOR, and a token is a ROW.
//   A sequence of T tokens of width D is a Mat<S> of shape [T, D]; row t is token t.
//   A linear map is stored [in, out] and applied as  y = x · W  (x a row vector). This is the
//   official code's row-vector convention (Z = X W + b); checkpoint code transposes to PyTorch's
//   nn.Linear [out, in] layout at the file boundary, nowhere else.
//   Heads are column blocks: head h of a [T, D] activation is columns h·d .. (h+1)·d − 1, d = D / H.
//   Per-head parameters with a leading head axis (γ, β of the inner LayerNorm: [H, d]; θ_lr: [H, D])
//   are matrices whose row h belongs to head h.
//
// SCALARS: the engine is templated on S and instantiated for float and double. Tests check the
// maths in double (fp64) and the fast paths in float.
#pragma once

#include <Eigen/Core>

namespace tttlab {

template <class S>
using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class S>
using RowVec = Eigen::Matrix<S, 1, Eigen::Dynamic>;  // one token, or one row of parameters
template <class S>
using Vec = Eigen::Matrix<S, Eigen::Dynamic, 1>;     // a per-token scalar series (e.g. λ over T)

// Views that accept both whole matrices and blocks (e.g. one head's columns) without a copy.
template <class S>
using MatRef = Eigen::Ref<Mat<S>, 0, Eigen::OuterStride<>>;
template <class S>
using ConstMatRef = Eigen::Ref<const Mat<S>, 0, Eigen::OuterStride<>>;

}  // namespace tttlab
