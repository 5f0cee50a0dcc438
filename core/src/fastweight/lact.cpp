// LaCT's inner loop: forward with an observer, and its manual backward (docs/MATH.md §11.10).
#include "tttlab/fastweight/lact.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace tttlab {

namespace {

// The reference's constants: the renormalisation's eps and Newton–Schulz's normalisation eps and
// coefficients (zeropower_via_newtonschulz5).
constexpr double kLactRenormEps = 1e-5;
constexpr double kLactNsEps = 1e-7;
constexpr std::array<std::array<double, 3>, 5> kLactNsCoeffs{{{4.0848, -6.8946, 2.9270},
                                                              {3.9505, -6.3029, 2.6377},
                                                              {3.7418, -5.5913, 2.3037},
                                                              {2.8769, -3.1427, 1.2046},
                                                              {2.8366, -3.0525, 1.2012}}};

template <class S>
S lact_sigmoid(S z) {
  return S(1) / (S(1) + std::exp(-z));
}

// silu(z) = z σ(z); silu'(z) = σ (1 + z (1 − σ)); silu''(z) = σ (1 − σ) (2 + z (1 − 2σ)).
template <class S>
Mat<S> lact_silu(const Mat<S>& z) {
  return z.unaryExpr([](S x) { return x * lact_sigmoid(x); });
}
template <class S>
Mat<S> lact_silu_d1(const Mat<S>& z) {
  return z.unaryExpr([](S x) {
    const S s = lact_sigmoid(x);
    return s * (S(1) + x * (S(1) - s));
  });
}
template <class S>
Mat<S> lact_silu_d2(const Mat<S>& z) {
  return z.unaryExpr([](S x) {
    const S s = lact_sigmoid(x);
    return s * (S(1) - s) * (S(2) + x * (S(1) - S(2) * s));
  });
}

template <class S>
void lact_validate(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v, const Vec<S>& lr0,
                   const Vec<S>& lr1, const Vec<S>& lr2, const Vec<S>& momentum,
                   const LactWeights<S>& W, int chunk, const char* who) {
  const std::string w(who);
  const Eigen::Index T = q.rows(), dk = q.cols(), dv = v.cols(), dh = W.w0.rows();
  if (k.rows() != T || v.rows() != T)
    throw std::invalid_argument(w + ": q, k, v must have the same number of rows (tokens)");
  if (k.cols() != dk) throw std::invalid_argument(w + ": q and k must both be [T, d_k]");
  if (dk < 1 || dv < 1 || dh < 1) throw std::invalid_argument(w + ": d_k, d_v, d_h must be ≥ 1");
  if (W.w0.cols() != dk || W.w2.rows() != dh || W.w2.cols() != dk || W.w1.rows() != dv ||
      W.w1.cols() != dh)
    throw std::invalid_argument(w + ": weights must be w0, w2 [d_h, d_k] and w1 [d_v, d_h]");
  if (lr0.size() != T || lr1.size() != T || lr2.size() != T)
    throw std::invalid_argument(w + ": lr0, lr1, lr2 must have T entries");
  if (momentum.size() != 0 && momentum.size() != T)
    throw std::invalid_argument(w + ": momentum must be empty or have T entries");
  if (chunk < 1) throw std::invalid_argument(w + ": chunk must be ≥ 1");
}

// The number of updates: the reference's range(0, T − C, C), i.e. every chunk but the last.
int lact_update_count(Eigen::Index T, int chunk) {
  return T > 0 ? static_cast<int>((T - 1) / chunk) : 0;
}

// Row norms of a weight (the renormalisation's targets).
template <class S>
Vec<S> lact_row_norms(const Mat<S>& w) {
  return w.rowwise().norm();
}

// Each row r of p scaled to n[r]: p_r / (‖p_r‖ + eps) · n_r.
template <class S>
Mat<S> lact_renorm(const Mat<S>& p, const Vec<S>& n) {
  Mat<S> out(p.rows(), p.cols());
  for (Eigen::Index r = 0; r < p.rows(); ++r)
    out.row(r) = p.row(r) / (p.row(r).norm() + S(kLactRenormEps)) * n(r);
  return out;
}

// Backward of lact_renorm: dP from dY; adds ∂L/∂n into dn.
template <class S>
Mat<S> lact_renorm_backward(const Mat<S>& p, const Vec<S>& n, const Mat<S>& dY, Vec<S>& dn) {
  Mat<S> dp(p.rows(), p.cols());
  for (Eigen::Index r = 0; r < p.rows(); ++r) {
    const S a = p.row(r).norm();
    const S d = a + S(kLactRenormEps);
    const S dot = dY.row(r).dot(p.row(r));
    dn(r) += dot / d;
    dp.row(r) = n(r) / d * dY.row(r);
    if (a > S(0)) dp.row(r) -= (n(r) * dot / (d * d * a)) * p.row(r);
  }
  return dp;
}

// The apply: o = (silu(Q W0ᵀ) ⊙ (Q W2ᵀ)) W1ᵀ.
template <class S>
Mat<S> lact_apply(const LactWeights<S>& W, const Mat<S>& Q) {
  const Mat<S> y0 = Q * W.w0.transpose();
  const Mat<S> y2 = Q * W.w2.transpose();
  const Mat<S> h = lact_silu(y0).cwiseProduct(y2);
  return h * W.w1.transpose();
}

// The chunk's step direction G_i = −Σ_t η_{i,t} ∇_{W_i} ℓ_t (the reference's dw0, dw1, dw2 before
// momentum), with the intermediates the backward needs.
template <class S>
struct LactGradCache {
  Mat<S> z0, z2, s, sp, h, dh, dz2, dg, dz0;  // [n, d_h]
};

template <class S>
LactWeights<S> lact_step_direction(const LactWeights<S>& W, const Mat<S>& K, const Mat<S>& V,
                                   const Vec<S>& l0, const Vec<S>& l1, const Vec<S>& l2,
                                   LactGradCache<S>* cache) {
  LactGradCache<S> c;
  c.z0 = K * W.w0.transpose();
  c.z2 = K * W.w2.transpose();
  c.s = lact_silu(c.z0);
  c.sp = lact_silu_d1(c.z0);
  c.h = c.s.cwiseProduct(c.z2);
  c.dh = V * W.w1;  // [n, d_v] [d_v, d_h]
  c.dz2 = c.dh.cwiseProduct(c.s);
  c.dg = c.dh.cwiseProduct(c.z2);
  c.dz0 = c.dg.cwiseProduct(c.sp);
  LactWeights<S> G;
  G.w1 = V.transpose() * (l1.asDiagonal() * c.h);    // [d_v, d_h]
  G.w0 = c.dz0.transpose() * (l0.asDiagonal() * K);  // [d_h, d_k]
  G.w2 = c.dz2.transpose() * (l2.asDiagonal() * K);  // [d_h, d_k]
  if (cache) *cache = std::move(c);
  return G;
}

template <class S>
LactWeights<S> lact_zeros_like(const LactWeights<S>& W) {
  return {Mat<S>::Zero(W.w0.rows(), W.w0.cols()), Mat<S>::Zero(W.w1.rows(), W.w1.cols()),
          Mat<S>::Zero(W.w2.rows(), W.w2.cols())};
}

// Everything one update of the forward produces, kept for the backward.
template <class S>
struct LactUpdateRecord {
  LactWeights<S> m_prev;  // the momentum before this chunk's step (zero at the first)
  LactWeights<S> m;       // the step before Newton–Schulz (G, or G + m̄ M_prev)
  LactWeights<S> p;       // W + U, before the renormalisation
  S mbar = 0;
};

// One chunk's update: from the weights W and momentum M (in/out), the new weights.
template <class S>
LactWeights<S> lact_update(const LactWeights<S>& W, LactWeights<S>& M, const Mat<S>& K,
                           const Mat<S>& V, const Vec<S>& l0, const Vec<S>& l1, const Vec<S>& l2,
                           bool use_momentum, S mbar, bool muon, const std::array<Vec<S>, 3>& norms,
                           LactUpdateRecord<S>* rec) {
  LactWeights<S> G =
      lact_step_direction(W, K, V, l0, l1, l2, static_cast<LactGradCache<S>*>(nullptr));
  if (rec) rec->m_prev = M;
  if (use_momentum) {
    G.w0 = G.w0 + M.w0 * mbar;
    G.w1 = G.w1 + M.w1 * mbar;
    G.w2 = G.w2 + M.w2 * mbar;
    M = G;
  }
  if (rec) {
    rec->m = G;
    rec->mbar = mbar;
  }
  LactWeights<S> U = G;
  if (muon) {
    U.w0 = lact_newton_schulz5(G.w0);
    U.w1 = lact_newton_schulz5(G.w1);
    U.w2 = lact_newton_schulz5(G.w2);
  }
  LactWeights<S> P{W.w0 + U.w0, W.w1 + U.w1, W.w2 + U.w2};
  LactWeights<S> out{lact_renorm(P.w0, norms[0]), lact_renorm(P.w1, norms[1]),
                     lact_renorm(P.w2, norms[2])};
  if (rec) rec->p = std::move(P);
  return out;
}

}  // namespace

template <class S>
Mat<S> lact_newton_schulz5(const Mat<S>& G) {
  const bool tall = G.rows() > G.cols();
  Mat<S> X = tall ? Mat<S>(G.transpose()) : G;
  X /= X.norm() + S(kLactNsEps);
  for (const auto& abc : kLactNsCoeffs) {
    const Mat<S> A = X * X.transpose();
    const Mat<S> B = S(abc[1]) * A + S(abc[2]) * (A * A);
    X = S(abc[0]) * X + B * X;
  }
  return tall ? Mat<S>(X.transpose()) : X;
}

template <class S>
Mat<S> lact_newton_schulz5_backward(const Mat<S>& G, const Mat<S>& dOut) {
  const bool tall = G.rows() > G.cols();
  const Mat<S> X0 = tall ? Mat<S>(G.transpose()) : G;
  const S nrm = X0.norm();
  const S den = nrm + S(kLactNsEps);
  std::vector<Mat<S>> xs{X0 / den};
  for (std::size_t i = 0; i < kLactNsCoeffs.size(); ++i) {
    const auto& abc = kLactNsCoeffs[i];
    const Mat<S>& X = xs.back();
    const Mat<S> A = X * X.transpose();
    xs.push_back(S(abc[0]) * X + (S(abc[1]) * A + S(abc[2]) * (A * A)) * X);
  }
  Mat<S> dX = tall ? Mat<S>(dOut.transpose()) : dOut;
  for (std::size_t i = kLactNsCoeffs.size(); i-- > 0;) {
    const auto& abc = kLactNsCoeffs[i];
    const Mat<S>& X = xs[i];
    const Mat<S> A = X * X.transpose();
    const Mat<S> B = S(abc[1]) * A + S(abc[2]) * (A * A);
    const Mat<S> dB = dX * X.transpose();
    const Mat<S> dA = S(abc[1]) * dB + S(abc[2]) * (dB * A + A * dB);
    Mat<S> dXi = S(abc[0]) * dX + B.transpose() * dX;
    dXi += (dA + dA.transpose()) * X;
    dX = std::move(dXi);
  }
  Mat<S> dX0 = dX / den;
  if (nrm > S(0)) dX0 -= (dX.cwiseProduct(X0).sum() / (den * den * nrm)) * X0;
  return tall ? Mat<S>(dX0.transpose()) : dX0;
}

template <class S>
S lact_chunk_loss(const LactWeights<S>& W, ConstMatRef<S> k, ConstMatRef<S> v) {
  if (k.rows() == 0) return S(0);
  const Mat<S> f = lact_apply(W, Mat<S>(k));
  return -f.cwiseProduct(v).sum() / static_cast<S>(k.rows());
}

template <class S>
LactOutput<S> lact_forward(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v, const Vec<S>& lr0,
                           const Vec<S>& lr1, const Vec<S>& lr2, const Vec<S>& momentum,
                           const LactWeights<S>& W0, int chunk, bool muon,
                           const LactObserver<S>& observer) {
  lact_validate<S>(q, k, v, lr0, lr1, lr2, momentum, W0, chunk, "lact_forward");
  const Eigen::Index T = q.rows();
  const bool use_momentum = momentum.size() != 0;
  const std::array<Vec<S>, 3> norms{lact_row_norms(W0.w0), lact_row_norms(W0.w1),
                                    lact_row_norms(W0.w2)};
  LactOutput<S> out;
  out.o.resize(T, v.cols());
  out.updates = lact_update_count(T, chunk);
  LactWeights<S> W = W0;
  LactWeights<S> M = lact_zeros_like(W0);
  for (int c = 0; c <= out.updates; ++c) {
    const Eigen::Index s = static_cast<Eigen::Index>(c) * chunk;
    const Eigen::Index n = c < out.updates ? chunk : T - s;
    if (n <= 0) break;  // T = 0
    out.o.middleRows(s, n) = lact_apply(W, Mat<S>(q.middleRows(s, n)));
    LactChunkStep<S> step;
    step.chunk = c;
    step.first_token = s;
    step.tokens = n;
    if (observer) step.loss_before = lact_chunk_loss<S>(W, k.middleRows(s, n), v.middleRows(s, n));
    if (c == out.updates) {  // the last chunk is only read
      if (observer) {
        step.loss_after = step.loss_before;
        step.weights_before = step.weights_after = &W;
        observer(step);
      }
      break;
    }
    const S mbar = use_momentum ? momentum.segment(s, n).mean() : S(0);
    LactWeights<S> next =
        lact_update(W, M, Mat<S>(k.middleRows(s, n)), Mat<S>(v.middleRows(s, n)),
                    Vec<S>(lr0.segment(s, n)), Vec<S>(lr1.segment(s, n)), Vec<S>(lr2.segment(s, n)),
                    use_momentum, mbar, muon, norms, static_cast<LactUpdateRecord<S>*>(nullptr));
    if (observer) {
      step.updated = true;
      step.momentum = mbar;
      step.loss_after = lact_chunk_loss<S>(next, k.middleRows(s, n), v.middleRows(s, n));
      step.weights_before = &W;
      step.weights_after = &next;
      observer(step);
    }
    W = std::move(next);
  }
  out.weights = std::move(W);
  return out;
}

template <class S>
LactGrads<S> lact_backward(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v, const Vec<S>& lr0,
                           const Vec<S>& lr1, const Vec<S>& lr2, const Vec<S>& momentum,
                           const LactWeights<S>& W0, int chunk, bool muon, ConstMatRef<S> dO,
                           const LactWeights<S>& dW_final) {
  lact_validate<S>(q, k, v, lr0, lr1, lr2, momentum, W0, chunk, "lact_backward");
  const Eigen::Index T = q.rows();
  if (dO.rows() != T || dO.cols() != v.cols())
    throw std::invalid_argument("lact_backward: dO must be [T, d_v]");
  const auto empty_or = [](const Mat<S>& d, const Mat<S>& w) {
    return d.size() == 0 || (d.rows() == w.rows() && d.cols() == w.cols());
  };
  if (!empty_or(dW_final.w0, W0.w0) || !empty_or(dW_final.w1, W0.w1) ||
      !empty_or(dW_final.w2, W0.w2))
    throw std::invalid_argument(
        "lact_backward: each of dW_final must be empty or its weight's shape");
  const bool use_momentum = momentum.size() != 0;
  const std::array<Vec<S>, 3> norms{lact_row_norms(W0.w0), lact_row_norms(W0.w1),
                                    lact_row_norms(W0.w2)};
  const int updates = lact_update_count(T, chunk);

  // Forward, keeping the weights before every chunk and every update's record.
  std::vector<LactWeights<S>> Ws{W0};
  std::vector<LactUpdateRecord<S>> recs(static_cast<std::size_t>(updates));
  LactWeights<S> M = lact_zeros_like(W0);
  for (int c = 0; c < updates; ++c) {
    const Eigen::Index s = static_cast<Eigen::Index>(c) * chunk;
    const S mbar = use_momentum ? momentum.segment(s, chunk).mean() : S(0);
    Ws.push_back(lact_update(Ws.back(), M, Mat<S>(k.middleRows(s, chunk)),
                             Mat<S>(v.middleRows(s, chunk)), Vec<S>(lr0.segment(s, chunk)),
                             Vec<S>(lr1.segment(s, chunk)), Vec<S>(lr2.segment(s, chunk)),
                             use_momentum, mbar, muon, norms, &recs[static_cast<std::size_t>(c)]));
  }

  LactGrads<S> g;
  g.dq = Mat<S>::Zero(T, q.cols());
  g.dk = Mat<S>::Zero(T, k.cols());
  g.dv = Mat<S>::Zero(T, v.cols());
  g.dlr0 = Vec<S>::Zero(T);
  g.dlr1 = Vec<S>::Zero(T);
  g.dlr2 = Vec<S>::Zero(T);
  if (use_momentum) g.dmomentum = Vec<S>::Zero(T);
  LactWeights<S> dW = lact_zeros_like(W0);  // ∂L/∂(the weights before the chunk being undone)
  if (dW_final.w0.size()) dW.w0 = dW_final.w0;
  if (dW_final.w1.size()) dW.w1 = dW_final.w1;
  if (dW_final.w2.size()) dW.w2 = dW_final.w2;
  LactWeights<S> dM_carry = lact_zeros_like(W0);  // m̄_{c+1} ∂L/∂M_{c+1}
  std::array<Vec<S>, 3> dn{Vec<S>::Zero(norms[0].size()), Vec<S>::Zero(norms[1].size()),
                           Vec<S>::Zero(norms[2].size())};

  for (int c = updates; c >= 0; --c) {
    const Eigen::Index s = static_cast<Eigen::Index>(c) * chunk;
    const Eigen::Index n = c < updates ? chunk : T - s;
    if (n <= 0) continue;
    const LactWeights<S>& W = Ws[static_cast<std::size_t>(c)];
    if (c < updates) {
      // W_{c+1} = renorm(W_c + U_c): dW is ∂L/∂W_{c+1} on entry.
      const LactUpdateRecord<S>& rec = recs[static_cast<std::size_t>(c)];
      LactWeights<S> dP{lact_renorm_backward(rec.p.w0, norms[0], dW.w0, dn[0]),
                        lact_renorm_backward(rec.p.w1, norms[1], dW.w1, dn[1]),
                        lact_renorm_backward(rec.p.w2, norms[2], dW.w2, dn[2])};
      LactWeights<S> dG = dP;  // ∂L/∂(the step before Newton–Schulz)
      if (muon) {
        dG.w0 = lact_newton_schulz5_backward(rec.m.w0, dP.w0);
        dG.w1 = lact_newton_schulz5_backward(rec.m.w1, dP.w1);
        dG.w2 = lact_newton_schulz5_backward(rec.m.w2, dP.w2);
      }
      if (use_momentum) {
        // M_c = G_c + m̄_c M_{c−1}; M_c also reaches L through M_{c+1} (dM_carry).
        dG.w0 += dM_carry.w0;
        dG.w1 += dM_carry.w1;
        dG.w2 += dM_carry.w2;
        const S dmbar = dG.w0.cwiseProduct(rec.m_prev.w0).sum() +
                        dG.w1.cwiseProduct(rec.m_prev.w1).sum() +
                        dG.w2.cwiseProduct(rec.m_prev.w2).sum();
        g.dmomentum.segment(s, n).setConstant(dmbar / static_cast<S>(n));
        dM_carry = {dG.w0 * rec.mbar, dG.w1 * rec.mbar, dG.w2 * rec.mbar};
      }
      // The step direction's backward (G from W, K, V and the rates).
      const Mat<S> K = k.middleRows(s, n), V = v.middleRows(s, n);
      const Vec<S> l0 = lr0.segment(s, n), l1 = lr1.segment(s, n), l2 = lr2.segment(s, n);
      LactGradCache<S> cc;
      lact_step_direction(W, K, V, l0, l1, l2, &cc);
      // G1 = Vᵀ (l1 ⊙ H)
      const Mat<S> a1 = V * dG.w1;  // [n, d_h]
      g.dv.middleRows(s, n) += (l1.asDiagonal() * cc.h) * dG.w1.transpose();
      g.dlr1.segment(s, n) = a1.cwiseProduct(cc.h).rowwise().sum();
      const Mat<S> dH = l1.asDiagonal() * a1;
      // G0 = DZ0ᵀ (l0 ⊙ K), G2 = DZ2ᵀ (l2 ⊙ K)
      const Mat<S> dDZ0 = (l0.asDiagonal() * K) * dG.w0.transpose();  // [n, d_h]
      const Mat<S> a0 = cc.dz0 * dG.w0;                               // [n, d_k]
      g.dlr0.segment(s, n) = a0.cwiseProduct(K).rowwise().sum();
      const Mat<S> dDZ2 = (l2.asDiagonal() * K) * dG.w2.transpose();
      const Mat<S> a2 = cc.dz2 * dG.w2;
      g.dlr2.segment(s, n) = a2.cwiseProduct(K).rowwise().sum();
      Mat<S> dK = l0.asDiagonal() * a0;
      dK += l2.asDiagonal() * a2;
      // DZ0 = DG ⊙ silu'(Z0), DG = DH ⊙ Z2, DZ2 = DH ⊙ s, H = s ⊙ Z2, s = silu(Z0), DH = V W1
      const Mat<S> dDG = dDZ0.cwiseProduct(cc.sp);
      Mat<S> dZ0 = dDZ0.cwiseProduct(cc.dg).cwiseProduct(lact_silu_d2(cc.z0));
      const Mat<S> dDH = dDG.cwiseProduct(cc.z2) + dDZ2.cwiseProduct(cc.s);
      const Mat<S> dZ2 = dDG.cwiseProduct(cc.dh) + dH.cwiseProduct(cc.s);
      const Mat<S> ds = dDZ2.cwiseProduct(cc.dh) + dH.cwiseProduct(cc.z2);
      dZ0 += ds.cwiseProduct(cc.sp);
      g.dv.middleRows(s, n) += dDH * W.w1.transpose();
      dK += dZ0 * W.w0 + dZ2 * W.w2;
      g.dk.middleRows(s, n) += dK;
      // ∂L/∂W_c: through W + U (identity), and through G.
      dW.w0 = dP.w0 + dZ0.transpose() * K;
      dW.w1 = dP.w1 + V.transpose() * dDH;
      dW.w2 = dP.w2 + dZ2.transpose() * K;
    }
    // The apply of chunk c with W_c.
    const Mat<S> Q = q.middleRows(s, n);
    const Mat<S> dOc = dO.middleRows(s, n);
    const Mat<S> y0 = Q * W.w0.transpose();
    const Mat<S> y2 = Q * W.w2.transpose();
    const Mat<S> sy = lact_silu(y0);
    const Mat<S> hq = sy.cwiseProduct(y2);
    const Mat<S> dHq = dOc * W.w1;  // [n, d_h]
    dW.w1 += dOc.transpose() * hq;
    const Mat<S> dY0 = dHq.cwiseProduct(y2).cwiseProduct(lact_silu_d1(y0));
    const Mat<S> dY2 = dHq.cwiseProduct(sy);
    g.dq.middleRows(s, n) = dY0 * W.w0 + dY2 * W.w2;
    dW.w0 += dY0.transpose() * Q;
    dW.w2 += dY2.transpose() * Q;
  }
  // The renormalisation's targets are the initial weights' row norms.
  const std::array<const Mat<S>*, 3> w0s{&W0.w0, &W0.w1, &W0.w2};
  const std::array<Mat<S>*, 3> dws{&dW.w0, &dW.w1, &dW.w2};
  for (int i = 0; i < 3; ++i)
    for (Eigen::Index r = 0; r < w0s[i]->rows(); ++r)
      if (norms[i](r) > S(0)) dws[i]->row(r) += dn[i](r) / norms[i](r) * w0s[i]->row(r);
  g.dW = std::move(dW);
  return g;
}

template <class S>
LactStreamState<S> lact_stream_start(const LactWeights<S>& W, int chunk, bool muon,
                                     bool use_momentum) {
  const Eigen::Index dh = W.w0.rows(), dk = W.w0.cols(), dv = W.w1.rows();
  if (chunk < 1) throw std::invalid_argument("lact_stream_start: chunk must be ≥ 1");
  if (dh < 1 || dk < 1 || dv < 1 || W.w2.rows() != dh || W.w2.cols() != dk || W.w1.cols() != dh)
    throw std::invalid_argument(
        "lact_stream_start: weights must be w0, w2 [d_h, d_k] and w1 [d_v, d_h]");
  LactStreamState<S> st;
  st.weights = W;
  st.momentum = lact_zeros_like(W);
  st.row_norms = {lact_row_norms(W.w0), lact_row_norms(W.w1), lact_row_norms(W.w2)};
  st.k.resize(0, dk);
  st.v.resize(0, dv);
  st.chunk = chunk;
  st.muon = muon;
  st.use_momentum = use_momentum;
  return st;
}

template <class S>
Mat<S> lact_stream(LactStreamState<S>& st, ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                   const Vec<S>& lr0, const Vec<S>& lr1, const Vec<S>& lr2,
                   const Vec<S>& momentum) {
  // With momentum it has T entries (none for an empty piece); without, none.
  if (momentum.size() != (st.use_momentum ? q.rows() : 0))
    throw std::invalid_argument(
        "lact_stream: momentum must have T entries exactly when the stream was started with it");
  lact_validate<S>(q, k, v, lr0, lr1, lr2, momentum, st.weights, st.chunk, "lact_stream");
  const Eigen::Index T = q.rows();
  const auto append = [](auto& buf, const auto& rows) {
    const Eigen::Index n0 = buf.rows();
    buf.conservativeResize(n0 + rows.rows(), Eigen::NoChange);
    buf.bottomRows(rows.rows()) = rows;
  };
  Mat<S> o(T, v.cols());
  for (Eigen::Index t = 0; t < T;) {
    if (st.k.rows() == st.chunk) {  // a token after a full chunk: learn from the chunk first
      const S mbar = st.use_momentum ? st.m.mean() : S(0);
      st.weights =
          lact_update(st.weights, st.momentum, st.k, st.v, st.lr0, st.lr1, st.lr2, st.use_momentum,
                      mbar, st.muon, st.row_norms, static_cast<LactUpdateRecord<S>*>(nullptr));
      st.k.resize(0, st.k.cols());
      st.v.resize(0, st.v.cols());
      st.lr0.resize(0);
      st.lr1.resize(0);
      st.lr2.resize(0);
      st.m.resize(0);
      ++st.updates;
    }
    const Eigen::Index n = std::min<Eigen::Index>(T - t, st.chunk - st.k.rows());
    o.middleRows(t, n) = lact_apply(st.weights, Mat<S>(q.middleRows(t, n)));
    append(st.k, k.middleRows(t, n));
    append(st.v, v.middleRows(t, n));
    append(st.lr0, lr0.segment(t, n));
    append(st.lr1, lr1.segment(t, n));
    append(st.lr2, lr2.segment(t, n));
    if (st.use_momentum) append(st.m, momentum.segment(t, n));
    t += n;
  }
  st.tokens += T;
  return o;
}

#define TTTLAB_LACT_INSTANTIATE(S)                                                                 \
  template Mat<S> lact_newton_schulz5<S>(const Mat<S>&);                                           \
  template Mat<S> lact_newton_schulz5_backward<S>(const Mat<S>&, const Mat<S>&);                   \
  template S lact_chunk_loss<S>(const LactWeights<S>&, ConstMatRef<S>, ConstMatRef<S>);            \
  template LactOutput<S> lact_forward<S>(                                                          \
      ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, const Vec<S>&, const Vec<S>&, const Vec<S>&, \
      const Vec<S>&, const LactWeights<S>&, int, bool, const LactObserver<S>&);                    \
  template LactGrads<S> lact_backward<S>(                                                          \
      ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, const Vec<S>&, const Vec<S>&, const Vec<S>&, \
      const Vec<S>&, const LactWeights<S>&, int, bool, ConstMatRef<S>, const LactWeights<S>&);     \
  template LactStreamState<S> lact_stream_start<S>(const LactWeights<S>&, int, bool, bool);        \
  template Mat<S> lact_stream<S>(LactStreamState<S>&, ConstMatRef<S>, ConstMatRef<S>,              \
                                 ConstMatRef<S>, const Vec<S>&, const Vec<S>&, const Vec<S>&,      \
                                 const Vec<S>&);

TTTLAB_LACT_INSTANTIATE(float)
TTTLAB_LACT_INSTANTIATE(double)
#undef TTTLAB_LACT_INSTANTIATE

}  // namespace tttlab
