// Construction of τ and λ (see tttlab/ttt/eta.hpp).
#include "tttlab/ttt/eta.hpp"

#include <algorithm>

#include "tttlab/nn/activations.hpp"

namespace tttlab {

template <class S>
Vec<S> token_index_scale(const EtaOptions& opt, const RowVec<S>& delta) {
  const Eigen::Index b = delta.size();
  Vec<S> tau(b);
  for (Eigen::Index i = 0; i < b; ++i)
    tau(i) = opt.token_index ? std::max(S(1) / S(i + 1) + delta(i), S(0)) : S(1);
  return tau;
}

template <class S>
Vec<S> per_token_lr(const EtaOptions& opt, ConstMatRef<S> x, const RowVec<S>& theta, S bias, int d) {
  const S scale = S(opt.base_lr) / S(d);
  if (opt.gate == EtaGate::Fixed) return Vec<S>::Constant(x.rows(), scale);
  const Vec<S> u = x * theta.transpose();
  return u.unaryExpr([&](S v) { return scale * sigmoid(v + bias); });
}

#define TTTLAB_INSTANTIATE(S)                                                             \
  template Vec<S> token_index_scale<S>(const EtaOptions&, const RowVec<S>&);              \
  template Vec<S> per_token_lr<S>(const EtaOptions&, ConstMatRef<S>, const RowVec<S>&, S, int);
TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab
