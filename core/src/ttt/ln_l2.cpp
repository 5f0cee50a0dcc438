// Row-wise LayerNorm and the fused LN + L2 inner-loss gradient (see tttlab/ttt/ln_l2.hpp).
#include "tttlab/ttt/ln_l2.hpp"

#include "tttlab/nn/norms.hpp"

#include <cmath>

namespace tttlab {

template <class S>
void layer_norm_rows(ConstMatRef<S> Z, const RowVec<S>& gamma, const RowVec<S>& beta, S eps,
                     Mat<S>& Y) {
  layer_norm_forward<S>(Z, gamma, beta, Y, eps);
}

template <class S>
void ln_l2_grad(ConstMatRef<S> Z, ConstMatRef<S> R, const RowVec<S>& gamma, const RowVec<S>& beta,
                S eps, Mat<S>& G, Vec<S>* losses) {
  const Eigen::Index n = Z.rows(), d = Z.cols();
  G.resize(n, d);
  if (losses) losses->resize(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const S mu = Z.row(i).mean();
    const S var = (Z.row(i).array() - mu).square().mean();
    const S sigma = std::sqrt(var + eps);
    const Eigen::Array<S, 1, Eigen::Dynamic> xhat = (Z.row(i).array() - mu) / sigma;
    const Eigen::Array<S, 1, Eigen::Dynamic> resid =
        gamma.array() * xhat + beta.array() - R.row(i).array();  // y − r
    const Eigen::Array<S, 1, Eigen::Dynamic> ghat = gamma.array() * resid;
    // g = (1/σ)(ĝ − mean(ĝ) − x̂·mean(ĝ⊙x̂)); docs/MATH.md §3.2's first form divided through by d.
    G.row(i) = ((ghat - ghat.mean() - xhat * (ghat * xhat).mean()) / sigma).matrix();
    if (losses) (*losses)(i) = S(0.5) * resid.square().sum();
  }
  (void)d;
}

template <class S>
S ln_l2_loss(const RowVec<S>& z, const RowVec<S>& r, const RowVec<S>& gamma,
             const RowVec<S>& beta, S eps, bool use_ln) {
  if (!use_ln) return S(0.5) * (z - r).squaredNorm();
  const S mu = z.mean();
  const S sigma = std::sqrt((z.array() - mu).square().mean() + eps);
  const auto y = (z.array() - mu) / sigma * gamma.array() + beta.array();
  return S(0.5) * (y - r.array()).square().sum();
}

template <class S>
void layer_norm_rows_backward(ConstMatRef<S> Z, const RowVec<S>& gamma, S eps, ConstMatRef<S> dY,
                              Mat<S>& dZ, RowVec<S>& dgamma, RowVec<S>& dbeta) {
  layer_norm_backward<S>(Z, gamma, dY, dZ, dgamma, dbeta, eps);
}

template <class S>
void ln_l2_grad_backward(ConstMatRef<S> Z, ConstMatRef<S> R, const RowVec<S>& gamma,
                         const RowVec<S>& beta, S eps, ConstMatRef<S> dG, Mat<S>& dZ, Mat<S>& dR,
                         RowVec<S>& dgamma, RowVec<S>& dbeta) {
  using Row = Eigen::Array<S, 1, Eigen::Dynamic>;
  const Eigen::Index n = Z.rows(), d = Z.cols();
  dZ.resize(n, d);
  dR.resize(n, d);
  const Row gam = gamma.array();
  for (Eigen::Index i = 0; i < n; ++i) {
    const S mu = Z.row(i).mean();
    const S sigma = std::sqrt((Z.row(i).array() - mu).square().mean() + eps);
    const Row xhat = (Z.row(i).array() - mu) / sigma;
    const Row resid = gam * xhat + beta.array() - R.row(i).array();  // y − r
    const Row ghat = gam * resid;
    const Row g = (ghat - ghat.mean() - xhat * (ghat * xhat).mean()) / sigma;
    const Row delta = dG.row(i).array();
    // g = (1/σ) P(ĝ) with P symmetric, so ∂L/∂ĝ = (1/σ) P(δ).
    const Row a = (delta - delta.mean() - xhat * (delta * xhat).mean()) / sigma;
    dR.row(i) = (-gam * a).matrix();
    dbeta.array() += gam * a;
    dgamma.array() += a * (S(2) * gam * xhat + beta.array() - R.row(i).array());
    // x̂ enters through ĝ (γ²⊙a) and through P itself; σ through the 1/σ in front of P.
    const Row dxhat = gam * gam * a - (delta * (xhat * ghat).mean() + ghat * (xhat * delta).mean()) / sigma;
    const S dsigma = -(delta * g).sum() / sigma;
    dZ.row(i) = ((dxhat - dxhat.mean() - xhat * (dxhat * xhat).mean()) / sigma + dsigma * xhat / S(d)).matrix();
  }
}

#define TTTLAB_INSTANTIATE(S)                                                                  \
  template void layer_norm_rows<S>(ConstMatRef<S>, const RowVec<S>&, const RowVec<S>&, S,      \
                                   Mat<S>&);                                                   \
  template void ln_l2_grad<S>(ConstMatRef<S>, ConstMatRef<S>, const RowVec<S>&,                \
                              const RowVec<S>&, S, Mat<S>&, Vec<S>*);                          \
  template S ln_l2_loss<S>(const RowVec<S>&, const RowVec<S>&, const RowVec<S>&,               \
                           const RowVec<S>&, S, bool);                                     \
  template void layer_norm_rows_backward<S>(ConstMatRef<S>, const RowVec<S>&, S, ConstMatRef<S>, \
                                            Mat<S>&, RowVec<S>&, RowVec<S>&);                     \
  template void ln_l2_grad_backward<S>(ConstMatRef<S>, ConstMatRef<S>, const RowVec<S>&,         \
                                       const RowVec<S>&, S, ConstMatRef<S>, Mat<S>&, Mat<S>&,    \
                                       RowVec<S>&, RowVec<S>&);
TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab
