// Titans' memory: step, primal, chunked and backward forms (docs/MATH.md §11.9).
#include "tttlab/fastweight/titans.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace tttlab {
namespace {

template <class S>
void titans_validate(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v, const RowVec<S>& w,
                     const RowVec<S>& b, const Vec<S>& theta, const Vec<S>& alpha,
                     const Vec<S>& eta, ConstMatRef<S> M0, const TitansInner& inner,
                     const char* who) {
  const std::string n(who);
  const Eigen::Index T = q.rows(), D = q.cols();
  if (D < 1) throw std::invalid_argument(n + ": D must be ≥ 1");
  if (k.rows() != T || v.rows() != T || k.cols() != D || v.cols() != D)
    throw std::invalid_argument(n + ": q, k, v must all be [T, D] (Titans' loss has a residual k)");
  if (w.size() != D || b.size() != D) throw std::invalid_argument(n + ": w and b must be [D]");
  if (theta.size() != T || alpha.size() != T || eta.size() != T)
    throw std::invalid_argument(n + ": theta, alpha and eta must be [T]");
  if (M0.rows() != D || M0.cols() != D) throw std::invalid_argument(n + ": M0 must be [D, D]");
  if (inner.mini_batch < 1) throw std::invalid_argument(n + ": mini_batch must be ≥ 1");
  if (!(inner.eps > 0)) throw std::invalid_argument(n + ": eps must be > 0");
}

template <class S>
void titans_validate_state(const TitansState<S>& st, const char* who) {
  const Eigen::Index D = st.memory.rows();
  if (st.memory.cols() != D || st.momentum.rows() != D || st.momentum.cols() != D ||
      st.start.rows() != D || st.start.cols() != D || st.tokens < 0)
    throw std::invalid_argument(std::string(who) +
                                ": the state's memory, momentum and start must be [D, D]");
}

// The normalised row ẑ = (z − mean z) / σ, σ = sqrt(var z + eps); returns σ.
template <class S>
S titans_ln(const RowVec<S>& z, double eps, RowVec<S>& zhat) {
  const S mu = z.mean();
  zhat = z.array() - mu;
  const S var = zhat.squaredNorm() / S(z.size());
  const S sigma = std::sqrt(var + S(eps));
  zhat /= sigma;
  return sigma;
}

// What one token writes, from the memory its gradient is taken at, with the intermediates the
// backward needs.
template <class S>
struct TitansWrite {
  RowVec<S> zhat, e, g, u;
  S sigma = 0, sg = 0, sgz = 0;
};

template <class S>
void titans_write(const Mat<S>& start, const RowVec<S>& k, const RowVec<S>& v, const RowVec<S>& w,
                  const RowVec<S>& b, double eps, TitansWrite<S>& o) {
  const S D = S(k.size());
  const RowVec<S> z = k * start;
  o.sigma = titans_ln<S>(z, eps, o.zhat);
  o.e = w.cwiseProduct(o.zhat) + b - v + k;
  o.g = o.e.cwiseProduct(w);
  o.sg = o.g.sum();
  o.sgz = o.g.dot(o.zhat);
  // D·g outside the division, as FLA's reference writes it (§11.9).
  const S c = S(1) / (o.sigma * D);
  o.u = D * o.g - c * (RowVec<S>::Constant(k.size(), o.sg) + o.sgz * o.zhat);
}

// o = y + w ⊙ LN(y) + b.
template <class S>
RowVec<S> titans_read(const RowVec<S>& y, const RowVec<S>& w, const RowVec<S>& b, double eps) {
  RowVec<S> yhat;
  titans_ln<S>(y, eps, yhat);
  return y + w.cwiseProduct(yhat) + b;
}

// ∂/∂x of LN for ŷ = (x − mean x)/σ given dŷ: (dŷ − mean dŷ − ŷ mean(dŷ ⊙ ŷ)) / σ.
template <class S>
RowVec<S> titans_ln_back(const RowVec<S>& dyhat, const RowVec<S>& yhat, S sigma) {
  const S n = S(yhat.size());
  const S m1 = dyhat.sum() / n, m2 = dyhat.dot(yhat) / n;
  return ((dyhat.array() - m1) - yhat.array() * m2).matrix() / sigma;
}

}  // namespace

template <class S>
TitansState<S> TitansState<S>::begin(ConstMatRef<S> m0) {
  TitansState st;
  st.memory = m0;
  st.momentum = Mat<S>::Zero(m0.rows(), m0.cols());
  st.start = m0;
  st.tokens = 0;
  return st;
}

template <class S>
RowVec<S> titans_step(TitansState<S>& st, const RowVec<S>& q, const RowVec<S>& k,
                      const RowVec<S>& v, const RowVec<S>& w, const RowVec<S>& b, S theta, S alpha,
                      S eta, const TitansInner& inner) {
  TitansWrite<S> wr;
  titans_write<S>(st.start, k, v, w, b, inner.eps, wr);
  st.momentum *= eta;
  st.momentum.noalias() -= (S(2) * theta * k).transpose() * wr.u;
  st.memory *= (S(1) - alpha);
  st.memory += st.momentum;
  ++st.tokens;
  if (st.tokens % inner.mini_batch == 0) st.start = st.memory;
  return titans_read<S>(q * st.memory, w, b, inner.eps);
}

template <class S>
S titans_loss(const Mat<S>& memory, const RowVec<S>& k, const RowVec<S>& v, const RowVec<S>& w,
              const RowVec<S>& b, double eps) {
  RowVec<S> zhat;
  titans_ln<S>(RowVec<S>(k * memory), eps, zhat);
  return (w.cwiseProduct(zhat) + b + k - v).squaredNorm();
}

template <class S>
TitansOutput<S> titans_primal(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                              const RowVec<S>& w, const RowVec<S>& b, const Vec<S>& theta,
                              const Vec<S>& alpha, const Vec<S>& eta, ConstMatRef<S> M0,
                              const TitansInner& inner, const TitansObserver<S>& observer) {
  titans_validate<S>(q, k, v, w, b, theta, alpha, eta, M0, inner, "titans_primal");
  return titans_primal<S>(q, k, v, w, b, theta, alpha, eta, TitansState<S>::begin(M0), inner,
                          observer);
}

template <class S>
TitansOutput<S> titans_primal(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                              const RowVec<S>& w, const RowVec<S>& b, const Vec<S>& theta,
                              const Vec<S>& alpha, const Vec<S>& eta, const TitansState<S>& from,
                              const TitansInner& inner, const TitansObserver<S>& observer) {
  titans_validate_state<S>(from, "titans_primal");
  titans_validate<S>(q, k, v, w, b, theta, alpha, eta, from.memory, inner, "titans_primal");
  const Eigen::Index T = q.rows();
  TitansOutput<S> out;
  out.o.resize(T, q.cols());
  out.state = from;
  Mat<S> before;
  for (Eigen::Index t = 0; t < T; ++t) {
    const RowVec<S> kt = k.row(t), vt = v.row(t);
    if (observer) before = out.state.memory;
    const RowVec<S> ot =
        titans_step<S>(out.state, q.row(t), kt, vt, w, b, theta(t), alpha(t), eta(t), inner);
    out.o.row(t) = ot;
    if (observer) {
      TitansStep<S> rec;
      rec.token = long(t);
      rec.theta = theta(t);
      rec.alpha = alpha(t);
      rec.eta = eta(t);
      rec.loss_before = titans_loss<S>(before, kt, vt, w, b, inner.eps);
      rec.loss_after = titans_loss<S>(out.state.memory, kt, vt, w, b, inner.eps);
      rec.memory_before = &before;
      rec.memory_after = &out.state.memory;
      rec.momentum = &out.state.momentum;
      rec.output = &ot;
      observer(rec);
    }
  }
  return out;
}

template <class S>
TitansOutput<S> titans_chunked(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                               const RowVec<S>& w, const RowVec<S>& b, const Vec<S>& theta,
                               const Vec<S>& alpha, const Vec<S>& eta, ConstMatRef<S> M0,
                               const TitansInner& inner) {
  titans_validate<S>(q, k, v, w, b, theta, alpha, eta, M0, inner, "titans_chunked");
  return titans_chunked<S>(q, k, v, w, b, theta, alpha, eta, TitansState<S>::begin(M0), inner);
}

template <class S>
TitansOutput<S> titans_chunked(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                               const RowVec<S>& w, const RowVec<S>& b, const Vec<S>& theta,
                               const Vec<S>& alpha, const Vec<S>& eta, const TitansState<S>& from,
                               const TitansInner& inner) {
  titans_validate_state<S>(from, "titans_chunked");
  titans_validate<S>(q, k, v, w, b, theta, alpha, eta, from.memory, inner, "titans_chunked");
  const Eigen::Index T = q.rows(), D = q.cols(), C = inner.mini_batch;
  TitansOutput<S> out;
  out.o.resize(T, D);
  out.state = from;
  Mat<S>& Mp = out.state.memory;    // the memory entering the chunk
  Mat<S>& Sp = out.state.momentum;  // the momentum entering it
  TitansWrite<S> wr;
  // Chunks end where mini-batches end: the first completes a mini-batch the carried state is inside.
  Eigen::Index L = 0;
  for (Eigen::Index c0 = 0; c0 < T; c0 += L) {
    L = std::min<Eigen::Index>(C - Eigen::Index(out.state.tokens % C), T - c0);
    const auto Kc = k.middleRows(c0, L);
    const auto Qc = q.middleRows(c0, L);
    // Every u of the chunk from its mini-batch's start memory at once.
    Mat<S> U(L, D);
    for (Eigen::Index i = 0; i < L; ++i) {
      titans_write<S>(out.state.start, k.row(c0 + i), v.row(c0 + i), w, b, inner.eps, wr);
      U.row(i) = wr.u;
    }
    // The coefficients, by forward recursions of products (no ratio of products is formed):
    //   β_i = Π_{l≤i} a_l (a = 1 − α),  m_i = Π_{l≤i} η_l,  f_i = a_i f_{i−1} + m_i,
    //   n_ij = θ_j Π_{j<l≤i} η_l,  G_ij = a_i G_{i−1,j} + n_ij (G_jj = θ_j), so that
    //   S_i = m_i S_p − 2 Σ_{j≤i} n_ij k_jᵀ u_j and M_i = β_i M_p + f_i S_p − 2 Σ_{j≤i} G_ij k_jᵀ u_j.
    Vec<S> beta(L), m(L), f(L);
    Mat<S> n = Mat<S>::Zero(L, L), G = Mat<S>::Zero(L, L);
    for (Eigen::Index i = 0; i < L; ++i) {
      const S a = S(1) - alpha(c0 + i), e = eta(c0 + i);
      beta(i) = i == 0 ? a : a * beta(i - 1);
      m(i) = i == 0 ? e : e * m(i - 1);
      f(i) = i == 0 ? m(i) : a * f(i - 1) + m(i);
      for (Eigen::Index j = 0; j < i; ++j) {
        n(i, j) = e * n(i - 1, j);
        G(i, j) = a * G(i - 1, j) + n(i, j);
      }
      n(i, i) = G(i, i) = theta(c0 + i);
    }
    Mat<S> Y = beta.asDiagonal() * (Qc * Mp);
    Y.noalias() += f.asDiagonal() * (Qc * Sp);
    Y.noalias() -= S(2) * (Qc * Kc.transpose()).cwiseProduct(G) * U;
    for (Eigen::Index i = 0; i < L; ++i)
      out.o.row(c0 + i) = titans_read<S>(RowVec<S>(Y.row(i)), w, b, inner.eps);
    const Mat<S> Kg = G.row(L - 1).transpose().asDiagonal() * Kc;
    const Mat<S> Kn = n.row(L - 1).transpose().asDiagonal() * Kc;
    const Mat<S> Snew = m(L - 1) * Sp - S(2) * Kn.transpose() * U;
    Mp = beta(L - 1) * Mp + f(L - 1) * Sp - S(2) * Kg.transpose() * U;
    Sp = Snew;
    out.state.tokens += long(L);
    if (out.state.tokens % C == 0) out.state.start = Mp;
  }
  return out;
}

template <class S>
TitansGrads<S> titans_backward(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                               const RowVec<S>& w, const RowVec<S>& b, const Vec<S>& theta,
                               const Vec<S>& alpha, const Vec<S>& eta, ConstMatRef<S> M0,
                               const TitansInner& inner, ConstMatRef<S> dO,
                               ConstMatRef<S> dM_final) {
  titans_validate<S>(q, k, v, w, b, theta, alpha, eta, M0, inner, "titans_backward");
  const Eigen::Index T = q.rows(), D = q.cols(), C = inner.mini_batch;
  if (dO.rows() != T || dO.cols() != D)
    throw std::invalid_argument("titans_backward: dO must be [T, D]");
  if (dM_final.rows() != D || dM_final.cols() != D)
    throw std::invalid_argument("titans_backward: dM_final must be [D, D]");
  // The memories and momenta after 0..T tokens, exactly as the primal form computes them.
  std::vector<Mat<S>> Ms, Ss;
  Ms.reserve(std::size_t(T) + 1);
  Ss.reserve(std::size_t(T) + 1);
  {
    TitansState<S> st = TitansState<S>::begin(M0);
    Ms.push_back(st.memory);
    Ss.push_back(st.momentum);
    for (Eigen::Index t = 0; t < T; ++t) {
      titans_step<S>(st, q.row(t), k.row(t), v.row(t), w, b, theta(t), alpha(t), eta(t), inner);
      Ms.push_back(st.memory);
      Ss.push_back(st.momentum);
    }
  }
  TitansGrads<S> gr;
  gr.dq.resize(T, D);
  gr.dk.resize(T, D);
  gr.dv.resize(T, D);
  gr.dw = RowVec<S>::Zero(D);
  gr.db = RowVec<S>::Zero(D);
  gr.dtheta.resize(T);
  gr.dalpha.resize(T);
  gr.deta.resize(T);
  Mat<S> GM = dM_final;            // ∂L/∂M_t
  Mat<S> GS = Mat<S>::Zero(D, D);  // ∂L/∂S_t
  Mat<S> Gstart =
      Mat<S>::Zero(D, D);  // ∂L/∂(the mini-batch's start memory), summed over its tokens
  TitansWrite<S> wr;
  RowVec<S> yhat;
  const S Dn = S(D);
  for (Eigen::Index t = T - 1; t >= 0; --t) {
    const std::size_t ti = std::size_t(t);
    const Mat<S>& Mstart = Ms[std::size_t((t / C) * C)];
    const RowVec<S> kt = k.row(t), vt = v.row(t), dot = dO.row(t);
    // o_t = y + w ⊙ ŷ + b,  y = q_t M_t
    const RowVec<S> y = q.row(t) * Ms[ti + 1];
    const S sy = titans_ln<S>(y, inner.eps, yhat);
    gr.dw += dot.cwiseProduct(yhat);
    gr.db += dot;
    const RowVec<S> dy = dot + titans_ln_back<S>(RowVec<S>(dot.cwiseProduct(w)), yhat, sy);
    gr.dq.row(t).noalias() = dy * Ms[ti + 1].transpose();
    GM.noalias() += q.row(t).transpose() * dy;
    // M_t = (1 − α_t) M_{t−1} + S_t
    GS += GM;
    gr.dalpha(t) = -GM.cwiseProduct(Ms[ti]).sum();
    // S_t = η_t S_{t−1} − 2 θ_t k_tᵀ u_t
    gr.deta(t) = GS.cwiseProduct(Ss[ti]).sum();
    titans_write<S>(Mstart, kt, vt, w, b, inner.eps, wr);
    const RowVec<S> kGS = kt * GS;
    gr.dtheta(t) = S(-2) * kGS.dot(wr.u);
    const RowVec<S> du = S(-2) * theta(t) * kGS;
    RowVec<S> dk = S(-2) * theta(t) * (wr.u * GS.transpose());
    // u = D g − c (Σg + ẑ Σ(g ⊙ ẑ)),  c = 1 / (σ D)
    const S c = S(1) / (wr.sigma * Dn);
    const S s1 = du.sum(), s2 = du.dot(wr.zhat);
    const RowVec<S> dg = Dn * du - c * (RowVec<S>::Constant(D, s1) + s2 * wr.zhat);
    RowVec<S> dzhat = -c * (wr.sgz * du + s2 * wr.g);
    const S dsigma = c * (wr.sg * s1 + wr.sgz * s2) / wr.sigma;
    // g = e ⊙ w,  e = w ⊙ ẑ + b − v + k
    const RowVec<S> de = dg.cwiseProduct(w);
    gr.dw += dg.cwiseProduct(wr.e) + de.cwiseProduct(wr.zhat);
    gr.db += de;
    gr.dv.row(t) = -de;
    dk += de;
    dzhat += de.cwiseProduct(w);
    // ẑ = (z − mean z) / σ, with σ's own gradient dsigma from u
    const S dsig_total = dsigma - dzhat.dot(wr.zhat) / wr.sigma;
    RowVec<S> dd = dzhat / wr.sigma + (dsig_total / Dn) * wr.zhat;
    dd.array() -= dd.mean();
    // z = k_t M_start
    dk.noalias() += dd * Mstart.transpose();
    Gstart.noalias() += kt.transpose() * dd;
    gr.dk.row(t) = dk;
    GM *= (S(1) - alpha(t));
    GS *= eta(t);
    if (t % C == 0) {  // M_{t−1} is this mini-batch's start memory
      GM += Gstart;
      Gstart.setZero();
    }
  }
  gr.dM0 = GM;
  return gr;
}

// The chunk coefficients of one mini-batch of L tokens from c0 (the recursions titans_chunked
// states): β_i = Π_{l≤i} a_l (a = 1 − α), m_i = Π_{l≤i} η_l, f_i = a_i f_{i−1} + m_i,
// n_ij = θ_j Π_{j<l≤i} η_l, G_ij = a_i G_{i−1,j} + n_ij (G_jj = n_jj = θ_j).
template <class S>
struct TitansCoefficients {
  Vec<S> beta, m, f;
  Mat<S> n, G;
};

template <class S>
TitansCoefficients<S> titans_coefficients(const Vec<S>& theta, const Vec<S>& alpha,
                                          const Vec<S>& eta, Eigen::Index c0, Eigen::Index L) {
  TitansCoefficients<S> k;
  k.beta.resize(L);
  k.m.resize(L);
  k.f.resize(L);
  k.n = Mat<S>::Zero(L, L);
  k.G = Mat<S>::Zero(L, L);
  for (Eigen::Index i = 0; i < L; ++i) {
    const S a = S(1) - alpha(c0 + i), e = eta(c0 + i);
    k.beta(i) = i == 0 ? a : a * k.beta(i - 1);
    k.m(i) = i == 0 ? e : e * k.m(i - 1);
    k.f(i) = i == 0 ? k.m(i) : a * k.f(i - 1) + k.m(i);
    for (Eigen::Index j = 0; j < i; ++j) {
      k.n(i, j) = e * k.n(i - 1, j);
      k.G(i, j) = a * k.G(i - 1, j) + k.n(i, j);
    }
    k.n(i, i) = k.G(i, i) = theta(c0 + i);
  }
  return k;
}

template <class S>
TitansGrads<S> titans_backward_chunked(ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
                                       const RowVec<S>& w, const RowVec<S>& b, const Vec<S>& theta,
                                       const Vec<S>& alpha, const Vec<S>& eta, ConstMatRef<S> M0,
                                       const TitansInner& inner, ConstMatRef<S> dO,
                                       ConstMatRef<S> dM_final) {
  titans_validate<S>(q, k, v, w, b, theta, alpha, eta, M0, inner, "titans_backward_chunked");
  const Eigen::Index T = q.rows(), D = q.cols(), C = inner.mini_batch;
  if (dO.rows() != T || dO.cols() != D)
    throw std::invalid_argument("titans_backward_chunked: dO must be [T, D]");
  if (dM_final.rows() != D || dM_final.cols() != D)
    throw std::invalid_argument("titans_backward_chunked: dM_final must be [D, D]");
  const Eigen::Index chunks = (T + C - 1) / C;
  // The memory and momentum entering every mini-batch, by titans_chunked's update (from M_0 each
  // chunk is one whole mini-batch, the last possibly shorter).
  std::vector<Mat<S>> Ms, Ss;
  Ms.reserve(std::size_t(chunks));
  Ss.reserve(std::size_t(chunks));
  TitansWrite<S> wr;
  const auto chunk_writes = [&](const Mat<S>& Mp, Eigen::Index c0, Eigen::Index L,
                                std::vector<TitansWrite<S>>* keep) {
    Mat<S> U(L, D);
    for (Eigen::Index i = 0; i < L; ++i) {
      titans_write<S>(Mp, k.row(c0 + i), v.row(c0 + i), w, b, inner.eps, wr);
      U.row(i) = wr.u;
      if (keep) (*keep)[std::size_t(i)] = wr;
    }
    return U;
  };
  {
    Mat<S> Mp = M0, Sp = Mat<S>::Zero(D, D);
    for (Eigen::Index c0 = 0; c0 < T; c0 += C) {
      const Eigen::Index L = std::min(C, T - c0);
      Ms.push_back(Mp);
      Ss.push_back(Sp);
      const Mat<S> U = chunk_writes(Mp, c0, L, nullptr);
      const TitansCoefficients<S> co = titans_coefficients<S>(theta, alpha, eta, c0, L);
      const auto Kc = k.middleRows(c0, L);
      const Mat<S> Kg = co.G.row(L - 1).transpose().asDiagonal() * Kc;
      const Mat<S> Kn = co.n.row(L - 1).transpose().asDiagonal() * Kc;
      const Mat<S> Snew = co.m(L - 1) * Sp - S(2) * Kn.transpose() * U;
      Mp = co.beta(L - 1) * Mp + co.f(L - 1) * Sp - S(2) * Kg.transpose() * U;
      Sp = Snew;
    }
  }
  TitansGrads<S> gr;
  gr.dq.resize(T, D);
  gr.dk.resize(T, D);
  gr.dv.resize(T, D);
  gr.dw = RowVec<S>::Zero(D);
  gr.db = RowVec<S>::Zero(D);
  gr.dtheta.resize(T);
  gr.dalpha.resize(T);
  gr.deta.resize(T);
  Mat<S> GM = dM_final;            // ∂L/∂(the memory leaving the chunk)
  Mat<S> GS = Mat<S>::Zero(D, D);  // ∂L/∂(the momentum leaving it)
  const S Dn = S(D);
  std::vector<TitansWrite<S>> wrs(static_cast<std::size_t>(C));
  RowVec<S> yhat;
  for (Eigen::Index ci = chunks - 1; ci >= 0; --ci) {
    const Eigen::Index c0 = ci * C, L = std::min(C, T - c0);
    const Mat<S>& Mp = Ms[std::size_t(ci)];
    const Mat<S>& Sp = Ss[std::size_t(ci)];
    const auto Qc = q.middleRows(c0, L);
    const auto Kc = k.middleRows(c0, L);
    const Mat<S> U = chunk_writes(Mp, c0, L, &wrs);
    const TitansCoefficients<S> co = titans_coefficients<S>(theta, alpha, eta, c0, L);
    // The forward's read: Y = diag(β) Q M_p + diag(f) Q S_p − 2 (QKᵀ ⊙ G) U, o = Y + w ⊙ LN(Y) + b.
    const Mat<S> QM = Qc * Mp, QS = Qc * Sp, QK = Qc * Kc.transpose();
    const Mat<S> A = QK.cwiseProduct(co.G);
    Mat<S> Y = co.beta.asDiagonal() * QM;
    Y.noalias() += co.f.asDiagonal() * QS;
    Y.noalias() -= S(2) * A * U;
    Mat<S> dY(L, D);
    for (Eigen::Index i = 0; i < L; ++i) {
      const RowVec<S> y = Y.row(i), doi = dO.row(c0 + i);
      const S sy = titans_ln<S>(y, inner.eps, yhat);
      gr.dw += doi.cwiseProduct(yhat);
      gr.db += doi;
      dY.row(i) = doi + titans_ln_back<S>(RowVec<S>(doi.cwiseProduct(w)), yhat, sy);
    }
    // The coefficients' adjoints from Y and from the state leaving the chunk
    // (M_L = β_L M_p + f_L S_p − 2 Kᵀ diag(G_L·) U,  S_L = m_L S_p − 2 Kᵀ diag(n_L·) U).
    Vec<S> dbeta = (dY.cwiseProduct(QM)).rowwise().sum();
    Vec<S> df = (dY.cwiseProduct(QS)).rowwise().sum();
    Vec<S> dm = Vec<S>::Zero(L);
    dbeta(L - 1) += GM.cwiseProduct(Mp).sum();
    df(L - 1) += GM.cwiseProduct(Sp).sum();
    dm(L - 1) += GS.cwiseProduct(Sp).sum();
    const Mat<S> dYU = dY * U.transpose();  // (i, j): dY_i · u_j
    Mat<S> dG =
        S(-2) * QK.cwiseProduct(dYU).template triangularView<Eigen::Lower>().toDenseMatrix();
    Mat<S> dn = Mat<S>::Zero(L, L);
    const Mat<S> KGM = Kc * GM, KGS = Kc * GS;  // rows k_j GM, k_j GS
    dG.row(L - 1) -= S(2) * KGM.cwiseProduct(U).rowwise().sum().transpose();
    dn.row(L - 1) -= S(2) * KGS.cwiseProduct(U).rowwise().sum().transpose();
    // Q: through QM, QS and QKᵀ.  K: through QKᵀ and through the state leaving the chunk.
    const Mat<S> dQK = S(-2) * dYU.cwiseProduct(co.G);
    gr.dq.middleRows(c0, L).noalias() = co.beta.asDiagonal() * (dY * Mp.transpose());
    gr.dq.middleRows(c0, L).noalias() += co.f.asDiagonal() * (dY * Sp.transpose());
    gr.dq.middleRows(c0, L).noalias() += dQK * Kc;
    Mat<S> dK = dQK.transpose() * Qc;
    const Vec<S> gL = co.G.row(L - 1).transpose(), nL = co.n.row(L - 1).transpose();
    dK.noalias() -= S(2) * gL.asDiagonal() * (U * GM.transpose());
    dK.noalias() -= S(2) * nL.asDiagonal() * (U * GS.transpose());
    // U: through Y and the state leaving the chunk.
    Mat<S> dU = S(-2) * A.transpose() * dY;
    dU.noalias() -= S(2) * gL.asDiagonal() * KGM;
    dU.noalias() -= S(2) * nL.asDiagonal() * KGS;
    // The state entering the chunk, directly.
    Mat<S> GMp = co.beta(L - 1) * GM;
    GMp.noalias() += Qc.transpose() * co.beta.asDiagonal() * dY;
    Mat<S> GSp = co.f(L - 1) * GM + co.m(L - 1) * GS;
    GSp.noalias() += Qc.transpose() * co.f.asDiagonal() * dY;
    // Each u's backward (titans_backward's, per token), from the start memory M_p.
    for (Eigen::Index i = 0; i < L; ++i) {
      const TitansWrite<S>& x = wrs[std::size_t(i)];
      const RowVec<S> du = dU.row(i);
      const S c = S(1) / (x.sigma * Dn);
      const S s1 = du.sum(), s2 = du.dot(x.zhat);
      const RowVec<S> dg = Dn * du - c * (RowVec<S>::Constant(D, s1) + s2 * x.zhat);
      RowVec<S> dzhat = -c * (x.sgz * du + s2 * x.g);
      const S dsigma = c * (x.sg * s1 + x.sgz * s2) / x.sigma;
      const RowVec<S> de = dg.cwiseProduct(w);
      gr.dw += dg.cwiseProduct(x.e) + de.cwiseProduct(x.zhat);
      gr.db += de;
      gr.dv.row(c0 + i) = -de;
      dK.row(i) += de;
      dzhat += de.cwiseProduct(w);
      const S dsig_total = dsigma - dzhat.dot(x.zhat) / x.sigma;
      RowVec<S> dd = dzhat / x.sigma + (dsig_total / Dn) * x.zhat;
      dd.array() -= dd.mean();
      dK.row(i).noalias() += dd * Mp.transpose();
      GMp.noalias() += Kc.row(i).transpose() * dd;
    }
    gr.dk.middleRows(c0, L) = dK;
    // θ, α, η through the coefficients' recursions, in reverse (rows i = L−1 .. 0).
    for (Eigen::Index i = L - 1; i >= 0; --i) {
      const S a = S(1) - alpha(c0 + i), e = eta(c0 + i);
      S da = 0, de = 0;
      for (Eigen::Index j = 0; j < i; ++j) {  // G_ij = a_i G_{i−1,j} + n_ij,  n_ij = η_i n_{i−1,j}
        da += dG(i, j) * co.G(i - 1, j);
        dG(i - 1, j) += a * dG(i, j);
        dn(i, j) += dG(i, j);
        de += dn(i, j) * co.n(i - 1, j);
        dn(i - 1, j) += e * dn(i, j);
      }
      gr.dtheta(c0 + i) = dG(i, i) + dn(i, i);
      dm(i) += df(i);  // f_i = a_i f_{i−1} + m_i
      if (i > 0) {
        da += df(i) * co.f(i - 1) + dbeta(i) * co.beta(i - 1);
        df(i - 1) += a * df(i);
        dbeta(i - 1) += a * dbeta(i);  // β_i = a_i β_{i−1}
        de += dm(i) * co.m(i - 1);     // m_i = η_i m_{i−1}
        dm(i - 1) += e * dm(i);
      } else {
        da += dbeta(i);
        de += dm(i);
      }
      gr.dalpha(c0 + i) = -da;
      gr.deta(c0 + i) = de;
    }
    GM = GMp;
    GS = GSp;
  }
  gr.dM0 = GM;
  return gr;
}

#define TTTLAB_INSTANTIATE(S)                                                                      \
  template struct TitansState<S>;                                                                  \
  template RowVec<S> titans_step<S>(TitansState<S>&, const RowVec<S>&, const RowVec<S>&,           \
                                    const RowVec<S>&, const RowVec<S>&, const RowVec<S>&, S, S, S, \
                                    const TitansInner&);                                           \
  template S titans_loss<S>(const Mat<S>&, const RowVec<S>&, const RowVec<S>&, const RowVec<S>&,   \
                            const RowVec<S>&, double);                                             \
  template TitansOutput<S> titans_primal<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>,        \
                                            const RowVec<S>&, const RowVec<S>&, const Vec<S>&,     \
                                            const Vec<S>&, const Vec<S>&, ConstMatRef<S>,          \
                                            const TitansInner&, const TitansObserver<S>&);         \
  template TitansOutput<S> titans_chunked<S>(                                                      \
      ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, const RowVec<S>&, const RowVec<S>&,          \
      const Vec<S>&, const Vec<S>&, const Vec<S>&, ConstMatRef<S>, const TitansInner&);            \
  template TitansOutput<S> titans_primal<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>,        \
                                            const RowVec<S>&, const RowVec<S>&, const Vec<S>&,     \
                                            const Vec<S>&, const Vec<S>&, const TitansState<S>&,   \
                                            const TitansInner&, const TitansObserver<S>&);         \
  template TitansOutput<S> titans_chunked<S>(                                                      \
      ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, const RowVec<S>&, const RowVec<S>&,          \
      const Vec<S>&, const Vec<S>&, const Vec<S>&, const TitansState<S>&, const TitansInner&);     \
  template TitansGrads<S> titans_backward<S>(ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>,       \
                                             const RowVec<S>&, const RowVec<S>&, const Vec<S>&,    \
                                             const Vec<S>&, const Vec<S>&, ConstMatRef<S>,         \
                                             const TitansInner&, ConstMatRef<S>, ConstMatRef<S>);  \
  template TitansGrads<S> titans_backward_chunked<S>(                                              \
      ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, const RowVec<S>&, const RowVec<S>&,          \
      const Vec<S>&, const Vec<S>&, const Vec<S>&, ConstMatRef<S>, const TitansInner&,             \
      ConstMatRef<S>, ConstMatRef<S>);

TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab
