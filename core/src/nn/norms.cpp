// RMSNorm and LayerNorm (see tttlab/nn/norms.hpp).
#include "tttlab/nn/norms.hpp"

#include "checks.hpp"

namespace tttlab {
namespace {

using nn_detail::require_distinct;
using nn_detail::require_shape;

// r_t = 1/sqrt(mean(x_t²) + ε), one per row.
template <class S>
Vec<S> inverse_rms(ConstMatRef<S> X, S eps) {
  return ((X.rowwise().squaredNorm().array() / S(X.cols())) + eps).rsqrt().matrix();
}

// x̂ = (X − μ)/σ row-wise; returns 1/σ per row.
template <class S>
Vec<S> standardize(ConstMatRef<S> X, S eps, Mat<S>& Xhat) {
  const Vec<S> mu = X.rowwise().mean();
  Xhat = X.colwise() - mu;
  const Vec<S> inv_sigma =
      ((Xhat.rowwise().squaredNorm().array() / S(X.cols())) + eps).rsqrt().matrix();
  Xhat = inv_sigma.asDiagonal() * Xhat;
  return inv_sigma;
}

}  // namespace

template <class S>
void rms_norm_forward(ConstMatRef<S> X, ConstRowRef<S> w, Mat<S>& Y, S eps) {
  const char* op = "rms_norm_forward";
  require_shape(op, "w", w, 1, X.cols(), "one weight per feature of X");
  require_distinct(op, "Y", Y, "X", X);
  const Vec<S> r = inverse_rms<S>(X, eps);
  Y.resize(X.rows(), X.cols());
  Y = r.asDiagonal() * X * w.asDiagonal();
}

template <class S>
void rms_norm_backward(ConstMatRef<S> X, ConstRowRef<S> w, ConstMatRef<S> dY, Mat<S>& dX,
                       RowRef<S> dw, S eps) {
  const char* op = "rms_norm_backward";
  require_shape(op, "w", w, 1, X.cols(), "one weight per feature of X");
  require_shape(op, "dY", dY, X.rows(), X.cols(), "same as X");
  require_shape(op, "dw", dw, 1, X.cols(), "same as w");
  require_distinct(op, "dX", dX, "X", X);
  require_distinct(op, "dX", dX, "dY", dY);
  const Vec<S> r = inverse_rms<S>(X, eps);
  const Mat<S> Xn = r.asDiagonal() * X;  // x·r, the normalised input before the weight
  dw += dY.cwiseProduct(Xn).colwise().sum();
  const Mat<S> G = dY * w.asDiagonal();
  // Per row: coefficient of x in dX is r³·(g·x)/D = r·(g·xn)/D.
  const Vec<S> c = (G.cwiseProduct(Xn).rowwise().sum().array() * r.array() / S(X.cols())).matrix();
  dX.resize(X.rows(), X.cols());
  dX = r.asDiagonal() * G - c.asDiagonal() * Xn;
}

template <class S>
void layer_norm_forward(ConstMatRef<S> X, ConstRowRef<S> gamma, ConstRowRef<S> beta, Mat<S>& Y,
                        S eps) {
  const char* op = "layer_norm_forward";
  require_shape(op, "gamma", gamma, 1, X.cols(), "one weight per feature of X");
  require_shape(op, "beta", beta, 1, X.cols(), "one bias per feature of X");
  require_distinct(op, "Y", Y, "X", X);
  Mat<S> Xhat;
  standardize<S>(X, eps, Xhat);
  Y.resize(X.rows(), X.cols());
  Y = Xhat * gamma.asDiagonal();
  Y.rowwise() += beta;
}

template <class S>
void layer_norm_backward(ConstMatRef<S> X, ConstRowRef<S> gamma, ConstMatRef<S> dY, Mat<S>& dX,
                         RowRef<S> dgamma, RowRef<S> dbeta, S eps) {
  const char* op = "layer_norm_backward";
  require_shape(op, "gamma", gamma, 1, X.cols(), "one weight per feature of X");
  require_shape(op, "dY", dY, X.rows(), X.cols(), "same as X");
  require_shape(op, "dgamma", dgamma, 1, X.cols(), "same as gamma");
  require_shape(op, "dbeta", dbeta, 1, X.cols(), "same as beta");
  require_distinct(op, "dX", dX, "X", X);
  require_distinct(op, "dX", dX, "dY", dY);
  Mat<S> Xhat;
  const Vec<S> inv_sigma = standardize<S>(X, eps, Xhat);
  dgamma += dY.cwiseProduct(Xhat).colwise().sum();
  dbeta += dY.colwise().sum();
  Mat<S> G = dY * gamma.asDiagonal();
  const S inv_d = S(1) / S(X.cols());
  const Vec<S> mean_g = G.rowwise().sum() * inv_d;
  const Vec<S> mean_gx = G.cwiseProduct(Xhat).rowwise().sum() * inv_d;
  G.colwise() -= mean_g;
  G -= mean_gx.asDiagonal() * Xhat;
  dX.resize(X.rows(), X.cols());
  dX = inv_sigma.asDiagonal() * G;
}

#define TTTLAB_INSTANTIATE(S)                                                                    \
  template void rms_norm_forward<S>(ConstMatRef<S>, ConstRowRef<S>, Mat<S>&, S);                \
  template void rms_norm_backward<S>(ConstMatRef<S>, ConstRowRef<S>, ConstMatRef<S>, Mat<S>&,   \
                                     RowRef<S>, S);                                             \
  template void layer_norm_forward<S>(ConstMatRef<S>, ConstRowRef<S>, ConstRowRef<S>, Mat<S>&,  \
                                      S);                                                       \
  template void layer_norm_backward<S>(ConstMatRef<S>, ConstRowRef<S>, ConstMatRef<S>, Mat<S>&, \
                                       RowRef<S>, RowRef<S>, S);
TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab
