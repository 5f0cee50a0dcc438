// Row-wise LayerNorm and the fused LN + L2 inner-loss gradient (see tttlab/ttt/ln_l2.hpp).
#include "tttlab/ttt/ln_l2.hpp"

#include <cmath>

namespace tttlab {

template <class S>
void layer_norm_rows(ConstMatRef<S> Z, const RowVec<S>& gamma, const RowVec<S>& beta, S eps,
                     Mat<S>& Y) {
  const Eigen::Index n = Z.rows(), d = Z.cols();
  Y.resize(n, d);
  for (Eigen::Index i = 0; i < n; ++i) {
    const S mu = Z.row(i).mean();
    const S var = (Z.row(i).array() - mu).square().mean();
    const S inv_sigma = S(1) / std::sqrt(var + eps);
    Y.row(i) = ((Z.row(i).array() - mu) * inv_sigma * gamma.array() + beta.array()).matrix();
  }
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
    // g = (1/σ)(ĝ − mean(ĝ) − x̂·mean(ĝ⊙x̂)); the spec's boxed form divided through by d.
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

#define TTTLAB_INSTANTIATE(S)                                                                  \
  template void layer_norm_rows<S>(ConstMatRef<S>, const RowVec<S>&, const RowVec<S>&, S,      \
                                   Mat<S>&);                                                   \
  template void ln_l2_grad<S>(ConstMatRef<S>, ConstMatRef<S>, const RowVec<S>&,                \
                              const RowVec<S>&, S, Mat<S>&, Vec<S>*);                          \
  template S ln_l2_loss<S>(const RowVec<S>&, const RowVec<S>&, const RowVec<S>&,               \
                           const RowVec<S>&, S, bool);
TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab
