// Outer-loop backward through the TTT inner loop (see tttlab/ttt/inner_backward.hpp).
//
// One mini-batch (chunk of m ≤ b tokens starting at position 0), forward, TTT-Linear:
//   Z = K W + 1c,  R = V − K,  G = lnl2(Z, R),  C = QKᵀ + 11ᵀ,  E[i,j] = τ_i λ_j (j ≤ i),  M = E ⊙ C
//   Z̄ = Q W + 1c − M G,  O = Q + LN(Z̄)
//   commit (m = b only): W' = W − Kᵀ diag(e) G,  c' = c − eᵀ G,  e = τ_b λ
// TTT-MLP adds a layer: Z1 = K W1 + b1, X2 = gelu(Z1), Z2 = X2 W2 + b2, G2 = lnl2(Z2, R),
//   G1 = (G2 W2ᵀ) ⊙ gelu′(Z1);  Z̄1 = Q W1 + b1 − M1 G1 (C1 = QKᵀ + 1), X̄2 = gelu(Z̄1),
//   Z̄2 = X̄2 W2 + b2 − M2 G2 (C2 = X̄2 X2ᵀ + 1),  O = Q + LN(Z̄2);  commit W1' = W1 − Kᵀdiag(e)G1, ...
// The backward below reverses these lines one by one; the comments name the line being reversed.
// `carry` holds ∂L/∂(state after the chunk) on entry and ∂L/∂(state before the chunk) on exit.
#include "tttlab/ttt/inner_backward.hpp"

#include <stdexcept>

#include "tttlab/nn/activations.hpp"
#include "tttlab/ttt/ln_l2.hpp"
#include "inner_common.hpp"

namespace tttlab {
namespace {

using inner_detail::affine;
using inner_detail::gelu;
using inner_detail::loss_grad;
using inner_detail::mlp_forward;
using inner_detail::target;

template <class S>
Mat<S> eta_matrix(const Vec<S>& tau_c, const Vec<S>& lam) {
  const Eigen::Index m = lam.size();
  Mat<S> E = Mat<S>::Zero(m, m);
  for (Eigen::Index i = 0; i < m; ++i)
    for (Eigen::Index j = 0; j <= i; ++j) E(i, j) = tau_c(i) * lam(j);
  return E;
}

template <class S>
Mat<S> lower(const Mat<S>& A) {
  return A.template triangularView<Eigen::Lower>();
}

template <class S>
Mat<S> gelu_d2(const Mat<S>& Z) {
  return Z.unaryExpr([](S x) { return gelu_tanh_grad2(x); });
}

// Reverses G = lnl2(Z, R) (or G = Z − R without the LN).
template <class S>
void loss_grad_backward(const InnerOptions& opt, const InnerHeadParams<S>& p, const Mat<S>& Z,
                        const Mat<S>& R, const Mat<S>& dG, Mat<S>& dZ, Mat<S>& dR, InnerGrads<S>& g) {
  if (opt.layer_norm) {
    ln_l2_grad_backward<S>(Z, R, p.ln_weight, p.ln_bias, S(opt.ln_eps), dG, dZ, dR, g.dln_weight,
                           g.dln_bias);
  } else {
    dZ = dG;
    dR = -dG;
  }
}

// Reverses O = [Q +] LN(Z̄): returns dZ̄, adds the residual's share to dQ.
template <class S>
Mat<S> output_backward(const InnerOptions& opt, const InnerHeadParams<S>& p, const Mat<S>& Zbar,
                       ConstMatRef<S> dO, MatRef<S> dQ, InnerGrads<S>& g) {
  if (opt.residual) dQ += dO;
  if (!opt.layer_norm) return dO;
  Mat<S> dZbar;
  layer_norm_rows_backward<S>(Zbar, p.ln_weight, S(opt.ln_eps), dO, dZbar, g.dln_weight, g.dln_bias);
  return dZbar;
}

// Advances the state through one FULL mini-batch (the commit only, no read-out).
template <class S>
void advance_state(const InnerOptions& opt, const InnerHeadParams<S>& p, ConstMatRef<S> K,
                   ConstMatRef<S> V, const Vec<S>& lam, InnerWeights<S>& w) {
  const S tau_last = p.tau(p.tau.size() - 1);
  const Mat<S> R = target<S>(opt, K, V);
  if (opt.model == InnerModel::Linear) {
    const Mat<S> Z = affine<S>(opt, K, w.W1, w.b1);
    Mat<S> G;
    loss_grad(opt, p, Z, R, G);
    w.W1.noalias() -= tau_last * (K.transpose() * (lam.asDiagonal() * G));
    if (opt.bias) w.b1.noalias() -= tau_last * (lam.transpose() * G);
  } else {
    const auto [Z1, X2, Z2] = mlp_forward<S>(opt, K, w);
    Mat<S> G2;
    loss_grad(opt, p, Z2, R, G2);
    const Mat<S> G1 = (G2 * w.W2.transpose()).cwiseProduct(inner_detail::gelu_grad(Z1));
    w.W1.noalias() -= tau_last * (K.transpose() * (lam.asDiagonal() * G1));
    w.W2.noalias() -= tau_last * (X2.transpose() * (lam.asDiagonal() * G2));
    if (opt.bias) {
      w.b1.noalias() -= tau_last * (lam.transpose() * G1);
      w.b2.noalias() -= tau_last * (lam.transpose() * G2);
    }
  }
}

// Reverses the η lines: E[i,j] = τ_i λ_j on the lower triangle (dE given), and e = τ_b λ (de given).
template <class S>
void eta_backward(const Mat<S>& dE, const Vec<S>& tau_c, const Vec<S>& lam, const Vec<S>* de,
                  S tau_last, Eigen::Ref<Vec<S>> dlam, Vec<S>& dtau) {
  const Eigen::Index m = lam.size();
  const Mat<S> dEl = lower(dE);
  dtau.head(m) += dEl * lam;
  dlam += dEl.transpose() * tau_c;
  if (de) {
    dlam += tau_last * *de;
    dtau(dtau.size() - 1) += de->dot(lam);
  }
}

template <class S>
void chunk_backward_linear(const InnerOptions& opt, const InnerHeadParams<S>& p, ConstMatRef<S> Q,
                           ConstMatRef<S> K, ConstMatRef<S> V, const Vec<S>& lam,
                           const InnerWeights<S>& w, ConstMatRef<S> dO, bool full,
                           InnerWeights<S>& carry, MatRef<S> dQ, MatRef<S> dK, MatRef<S> dV,
                           Eigen::Ref<Vec<S>> dlam, InnerGrads<S>& g) {
  const Eigen::Index m = Q.rows();
  const Vec<S> tau_c = p.tau.head(m);
  const S tau_last = p.tau(p.tau.size() - 1);
  const S one = opt.bias ? S(1) : S(0);

  // Recompute the chunk's forward.
  const Mat<S> Z = affine<S>(opt, K, w.W1, w.b1);
  const Mat<S> R = target<S>(opt, K, V);
  Mat<S> G;
  loss_grad(opt, p, Z, R, G);
  const Mat<S> C = (Q * K.transpose()).array() + one;
  const Mat<S> E = eta_matrix<S>(tau_c, lam);
  const Mat<S> M = E.cwiseProduct(C);
  Mat<S> Zbar = Q * w.W1 - M * G;
  if (opt.bias) Zbar.rowwise() += w.b1;

  dQ.setZero();
  dK.setZero();
  // O = Q + LN(Z̄)
  const Mat<S> dZbar = output_backward<S>(opt, p, Zbar, dO, dQ, g);
  // Z̄ = Q W + 1c − M G
  dQ.noalias() += dZbar * w.W1.transpose();
  InnerWeights<S> dw = carry;  // the state passes through unchanged into the next chunk's start
  if (!full) dw.set_zero();    // a short last chunk is not committed: nothing flows back from later
  dw.W1.noalias() += Q.transpose() * dZbar;
  if (opt.bias) dw.b1 += dZbar.colwise().sum();
  const Mat<S> dM = -dZbar * G.transpose();
  Mat<S> dG = -M.transpose() * dZbar;
  // W' = W − Kᵀ diag(e) G,  c' = c − eᵀ G
  Vec<S> de;
  if (full) {
    const Vec<S> e = tau_last * lam;
    const Mat<S> KdW = K * carry.W1;
    dK.noalias() -= e.asDiagonal() * (G * carry.W1.transpose());
    dG.noalias() -= e.asDiagonal() * KdW;
    de = -(KdW.cwiseProduct(G)).rowwise().sum();
    if (opt.bias) {
      dG.noalias() -= e * carry.b1;
      de.noalias() -= G * carry.b1.transpose();
    }
  }
  // M = E ⊙ C,  C = QKᵀ + 1
  const Mat<S> dC = lower<S>(dM.cwiseProduct(E));
  dQ.noalias() += dC * K;
  dK.noalias() += dC.transpose() * Q;
  eta_backward<S>(dM.cwiseProduct(C), tau_c, lam, full ? &de : nullptr, tau_last, dlam, g.dtau);
  // G = lnl2(Z, R)
  Mat<S> dZ, dR;
  loss_grad_backward<S>(opt, p, Z, R, dG, dZ, dR, g);
  // R = V − K
  dV = dR;
  if (opt.residual) dK -= dR;
  // Z = K W + 1c
  dK.noalias() += dZ * w.W1.transpose();
  dw.W1.noalias() += K.transpose() * dZ;
  if (opt.bias) dw.b1 += dZ.colwise().sum();
  carry = std::move(dw);
}

template <class S>
void chunk_backward_mlp(const InnerOptions& opt, const InnerHeadParams<S>& p, ConstMatRef<S> Q,
                        ConstMatRef<S> K, ConstMatRef<S> V, const Vec<S>& lam,
                        const InnerWeights<S>& w, ConstMatRef<S> dO, bool full,
                        InnerWeights<S>& carry, MatRef<S> dQ, MatRef<S> dK, MatRef<S> dV,
                        Eigen::Ref<Vec<S>> dlam, InnerGrads<S>& g) {
  const Eigen::Index m = Q.rows();
  const Vec<S> tau_c = p.tau.head(m);
  const S tau_last = p.tau(p.tau.size() - 1);
  const S one = opt.bias ? S(1) : S(0);

  // Recompute the chunk's forward.
  const auto [Z1, X2, Z2] = mlp_forward<S>(opt, K, w);
  const Mat<S> R = target<S>(opt, K, V);
  Mat<S> G2;
  loss_grad(opt, p, Z2, R, G2);
  const Mat<S> P1 = G2 * w.W2.transpose();
  const Mat<S> D1 = inner_detail::gelu_grad(Z1);
  const Mat<S> G1 = P1.cwiseProduct(D1);
  const Mat<S> E = eta_matrix<S>(tau_c, lam);
  const Mat<S> C1 = (Q * K.transpose()).array() + one;
  const Mat<S> M1 = E.cwiseProduct(C1);
  Mat<S> Zbar1 = Q * w.W1 - M1 * G1;
  if (opt.bias) Zbar1.rowwise() += w.b1;
  const Mat<S> Xbar2 = gelu(Zbar1);
  const Mat<S> C2 = (Xbar2 * X2.transpose()).array() + one;
  const Mat<S> M2 = E.cwiseProduct(C2);
  Mat<S> Zbar2 = Xbar2 * w.W2 - M2 * G2;
  if (opt.bias) Zbar2.rowwise() += w.b2;

  dQ.setZero();
  dK.setZero();
  InnerWeights<S> dw = carry;
  if (!full) dw.set_zero();
  // O = Q + LN(Z̄2)
  const Mat<S> dZbar2 = output_backward<S>(opt, p, Zbar2, dO, dQ, g);
  // Z̄2 = X̄2 W2 + b2 − M2 G2
  Mat<S> dXbar2 = dZbar2 * w.W2.transpose();
  dw.W2.noalias() += Xbar2.transpose() * dZbar2;
  if (opt.bias) dw.b2 += dZbar2.colwise().sum();
  const Mat<S> dM2 = -dZbar2 * G2.transpose();
  Mat<S> dG2 = -M2.transpose() * dZbar2;
  // M2 = E ⊙ C2,  C2 = X̄2 X2ᵀ + 1
  Mat<S> dE = dM2.cwiseProduct(C2);
  const Mat<S> dC2 = lower<S>(dM2.cwiseProduct(E));
  dXbar2.noalias() += dC2 * X2;
  Mat<S> dX2 = dC2.transpose() * Xbar2;
  // X̄2 = gelu(Z̄1)
  const Mat<S> dZbar1 = dXbar2.cwiseProduct(inner_detail::gelu_grad(Zbar1));
  // Z̄1 = Q W1 + b1 − M1 G1
  dQ.noalias() += dZbar1 * w.W1.transpose();
  dw.W1.noalias() += Q.transpose() * dZbar1;
  if (opt.bias) dw.b1 += dZbar1.colwise().sum();
  const Mat<S> dM1 = -dZbar1 * G1.transpose();
  Mat<S> dG1 = -M1.transpose() * dZbar1;
  // M1 = E ⊙ C1,  C1 = QKᵀ + 1
  dE += dM1.cwiseProduct(C1);
  const Mat<S> dC1 = lower<S>(dM1.cwiseProduct(E));
  dQ.noalias() += dC1 * K;
  dK.noalias() += dC1.transpose() * Q;
  // Commit: W1' = W1 − Kᵀ diag(e) G1, b1' = b1 − eᵀG1, W2' = W2 − X2ᵀ diag(e) G2, b2' = b2 − eᵀG2
  Vec<S> de;
  if (full) {
    const Vec<S> e = tau_last * lam;
    const Mat<S> KdW1 = K * carry.W1;
    const Mat<S> X2dW2 = X2 * carry.W2;
    dK.noalias() -= e.asDiagonal() * (G1 * carry.W1.transpose());
    dG1.noalias() -= e.asDiagonal() * KdW1;
    dX2.noalias() -= e.asDiagonal() * (G2 * carry.W2.transpose());
    dG2.noalias() -= e.asDiagonal() * X2dW2;
    de = -(KdW1.cwiseProduct(G1)).rowwise().sum() - (X2dW2.cwiseProduct(G2)).rowwise().sum();
    if (opt.bias) {
      dG1.noalias() -= e * carry.b1;
      dG2.noalias() -= e * carry.b2;
      de.noalias() -= G1 * carry.b1.transpose();
      de.noalias() -= G2 * carry.b2.transpose();
    }
  }
  eta_backward<S>(dE, tau_c, lam, full ? &de : nullptr, tau_last, dlam, g.dtau);
  // G1 = P1 ⊙ gelu′(Z1),  P1 = G2 W2ᵀ
  const Mat<S> dP1 = dG1.cwiseProduct(D1);
  Mat<S> dZ1 = dG1.cwiseProduct(P1).cwiseProduct(gelu_d2(Z1));
  dG2.noalias() += dP1 * w.W2;
  dw.W2.noalias() += dP1.transpose() * G2;
  // G2 = lnl2(Z2, R)
  Mat<S> dZ2, dR;
  loss_grad_backward<S>(opt, p, Z2, R, dG2, dZ2, dR, g);
  // Z2 = X2 W2 + b2
  dX2.noalias() += dZ2 * w.W2.transpose();
  dw.W2.noalias() += X2.transpose() * dZ2;
  if (opt.bias) dw.b2 += dZ2.colwise().sum();
  // X2 = gelu(Z1)
  dZ1 += dX2.cwiseProduct(D1);
  // R = V − K
  dV = dR;
  if (opt.residual) dK -= dR;
  // Z1 = K W1 + b1
  dK.noalias() += dZ1 * w.W1.transpose();
  dw.W1.noalias() += K.transpose() * dZ1;
  if (opt.bias) dw.b1 += dZ1.colwise().sum();
  carry = std::move(dw);
}

}  // namespace

template <class S>
void inner_backward(const InnerOptions& opt, const InnerHeadParams<S>& p, ConstMatRef<S> Q,
                    ConstMatRef<S> K, ConstMatRef<S> V, const Vec<S>& lambda,
                    const InnerWeights<S>& W0, ConstMatRef<S> dO, InnerGrads<S>& g,
                    int checkpoint_group) {
  const Eigen::Index T = Q.rows(), d = Q.cols();
  const int b = opt.mini_batch;
  if (K.rows() != T || V.rows() != T || dO.rows() != T || dO.cols() != d || lambda.size() != T)
    throw std::invalid_argument("inner_backward: Q, K, V, dO must be [T, d] and lambda [T]");
  if (p.tau.size() != b) throw std::invalid_argument("inner_backward: tau must have mini_batch entries");
  if (checkpoint_group < 0) throw std::invalid_argument("inner_backward: checkpoint_group must be >= 0");

  g.dQ.resize(T, d);
  g.dK.resize(T, d);
  g.dV.resize(T, d);
  g.dlambda = Vec<S>::Zero(T);
  g.dtau = Vec<S>::Zero(b);
  g.dln_weight = RowVec<S>::Zero(d);
  g.dln_bias = RowVec<S>::Zero(d);

  const Eigen::Index n = (T + b - 1) / b;  // mini-batches, the last one possibly short
  const Eigen::Index group = checkpoint_group > 0 ? checkpoint_group : n;
  auto rows = [&](Eigen::Index k) { return std::min<Eigen::Index>(b, T - k * b); };
  auto advance = [&](Eigen::Index k, InnerWeights<S>& w) {
    advance_state<S>(opt, p, K.middleRows(k * b, b), V.middleRows(k * b, b),
                     lambda.segment(k * b, b), w);
  };

  // Forward sweep: keep the state at the start of every group.
  std::vector<InnerWeights<S>> checkpoints;
  InnerWeights<S> w = W0;
  for (Eigen::Index k = 0; k < n; ++k) {
    if (k % group == 0) checkpoints.push_back(w);
    if (k + 1 < n) advance(k, w);  // the state after the last mini-batch is never needed
  }

  InnerWeights<S> carry = InnerWeights<S>::zeros(opt, static_cast<int>(d));
  for (Eigen::Index grp = static_cast<Eigen::Index>(checkpoints.size()) - 1; grp >= 0; --grp) {
    // Recompute the states inside this group from its checkpoint.
    const Eigen::Index k0 = grp * group, k1 = std::min(n, k0 + group);
    std::vector<InnerWeights<S>> states{checkpoints[grp]};
    for (Eigen::Index k = k0; k + 1 < k1; ++k) {
      states.push_back(states.back());
      advance(k, states.back());
    }
    for (Eigen::Index k = k1 - 1; k >= k0; --k) {
      const Eigen::Index t0 = k * b, m = rows(k);
      const Vec<S> lam = lambda.segment(t0, m);
      auto fn = opt.model == InnerModel::Linear ? chunk_backward_linear<S> : chunk_backward_mlp<S>;
      fn(opt, p, Q.middleRows(t0, m), K.middleRows(t0, m), V.middleRows(t0, m), lam,
         states[k - k0], dO.middleRows(t0, m), m == b, carry, g.dQ.middleRows(t0, m),
         g.dK.middleRows(t0, m), g.dV.middleRows(t0, m), g.dlambda.segment(t0, m), g);
    }
  }
  if (!opt.bias) {
    carry.b1.setZero();
    carry.b2.setZero();
  }
  g.dW0 = std::move(carry);
}

template struct InnerGrads<float>;
template struct InnerGrads<double>;
template void inner_backward<float>(const InnerOptions&, const InnerHeadParams<float>&,
                                    ConstMatRef<float>, ConstMatRef<float>, ConstMatRef<float>,
                                    const Vec<float>&, const InnerWeights<float>&, ConstMatRef<float>,
                                    InnerGrads<float>&, int);
template void inner_backward<double>(const InnerOptions&, const InnerHeadParams<double>&,
                                     ConstMatRef<double>, ConstMatRef<double>, ConstMatRef<double>,
                                     const Vec<double>&, const InnerWeights<double>&,
                                     ConstMatRef<double>, InnerGrads<double>&, int);

}  // namespace tttlab
