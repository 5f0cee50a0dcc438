// The matrix-state fast-weight rules: primal, chunked and backward (docs/MATH.md §11.2–§11.4).
#include "tttlab/fastweight/matrix_rules.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace tttlab {

const char* to_string(MatrixRule rule) {
  switch (rule) {
    case MatrixRule::LinearAttention: return "linear_attention";
    case MatrixRule::DecayedHebbian: return "decayed_hebbian";
    case MatrixRule::DeltaNet: return "deltanet";
    case MatrixRule::GatedDeltaNet: return "gated_deltanet";
  }
  return "?";
}

bool uses_beta(MatrixRule rule) { return rule != MatrixRule::LinearAttention; }
bool uses_alpha(MatrixRule rule) {
  return rule == MatrixRule::DecayedHebbian || rule == MatrixRule::GatedDeltaNet;
}
bool is_delta_rule(MatrixRule rule) {
  return rule == MatrixRule::DeltaNet || rule == MatrixRule::GatedDeltaNet;
}

std::optional<MatrixRule> matrix_rule_for(const FastWeightRule& r) {
  const bool one_step_per_token = r.granularity == FastWeightGranularity::PerToken ||
                                  r.granularity == FastWeightGranularity::ExactChunk;
  if (r.state != FastWeightState::Matrix || r.optimizer != FastWeightOptimizer::Gd ||
      !one_step_per_token)
    return std::nullopt;
  const bool decay = r.retention == FastWeightRetention::ScalarDecay;
  if (!decay && r.retention != FastWeightRetention::None) return std::nullopt;
  if (r.loss == FastWeightLoss::Hebbian) {
    if (!decay && r.rate == FastWeightRate::Fixed) return MatrixRule::LinearAttention;
    return MatrixRule::DecayedHebbian;
  }
  if (r.loss == FastWeightLoss::Squared)
    return decay ? MatrixRule::GatedDeltaNet : MatrixRule::DeltaNet;
  return std::nullopt;
}

namespace {

template <class S>
void validate(MatrixRule rule, ConstMatRef<S> q, ConstMatRef<S> k, ConstMatRef<S> v,
              const Vec<S>& beta, const Vec<S>& alpha, ConstMatRef<S> S0, const char* who) {
  const std::string w(who);
  const Eigen::Index T = q.rows();
  if (k.rows() != T || v.rows() != T)
    throw std::invalid_argument(w + ": q, k, v must have the same number of rows (tokens)");
  if (k.cols() != q.cols()) throw std::invalid_argument(w + ": q and k must both be [T, d_k]");
  if (q.cols() < 1 || v.cols() < 1) throw std::invalid_argument(w + ": d_k and d_v must be ≥ 1");
  if (S0.rows() != k.cols() || S0.cols() != v.cols())
    throw std::invalid_argument(w + ": S0 must be [d_k, d_v]");
  if (uses_beta(rule) && beta.size() != T)
    throw std::invalid_argument(w + ": " + to_string(rule) + " needs beta [T]");
  if (uses_alpha(rule)) {
    if (alpha.size() != T)
      throw std::invalid_argument(w + ": " + to_string(rule) + " needs alpha [T]");
    for (Eigen::Index t = 0; t < T; ++t)
      if (!(alpha(t) > S(0) && alpha(t) <= S(1)))
        throw std::invalid_argument(w + ": alpha must lie in (0, 1]");
  }
}

}  // namespace

template <class S>
S matrix_rule_loss(MatrixRule rule, const Mat<S>& state, const RowVec<S>& k, const RowVec<S>& v) {
  const RowVec<S> pred = k * state;
  if (is_delta_rule(rule)) return S(0.5) * (pred - v).squaredNorm();
  return -pred.dot(v);
}

template <class S>
MatrixRuleOutput<S> matrix_rule_primal(MatrixRule rule, ConstMatRef<S> q, ConstMatRef<S> k,
                                       ConstMatRef<S> v, const Vec<S>& beta, const Vec<S>& alpha,
                                       ConstMatRef<S> S0, const MatrixRuleObserver<S>& observer) {
  validate<S>(rule, q, k, v, beta, alpha, S0, "matrix_rule_primal");
  const Eigen::Index T = q.rows();
  const bool use_b = uses_beta(rule), use_a = uses_alpha(rule), delta = is_delta_rule(rule);
  MatrixRuleOutput<S> out;
  out.o.resize(T, v.cols());
  out.state = S0;
  Mat<S>& st = out.state;
  Mat<S> before;
  RowVec<S> kt, vt, r, ot;
  for (Eigen::Index t = 0; t < T; ++t) {
    const S b = use_b ? beta(t) : S(1);
    const S a = use_a ? alpha(t) : S(1);
    kt = k.row(t);
    vt = v.row(t);
    if (observer) before = st;
    // One code path for all four members: with α = 1 and β = 1 the extra factors are exact, so
    // Gated DeltaNet at α = 1 is DeltaNet and the decayed Hebbian rule at α = β = 1 is linear
    // attention bit for bit (tests pin this).
    if (use_a) st *= a;
    if (delta) {
      r.noalias() = kt * st;
      r -= vt;  // the squared loss's residual at the decayed state, k_t α_t S_{t−1} − v_t
      st.noalias() -= (b * kt).transpose() * r;
    } else {
      st.noalias() += (b * kt).transpose() * vt;
    }
    ot.noalias() = q.row(t) * st;
    out.o.row(t) = ot;
    if (observer) {
      MatrixRuleStep<S> rec;
      rec.token = long(t);
      rec.beta = b;
      rec.alpha = a;
      rec.loss_before = matrix_rule_loss<S>(rule, before, kt, vt);
      rec.loss_after = matrix_rule_loss<S>(rule, st, kt, vt);
      rec.state_before = &before;
      rec.state_after = &st;
      rec.output = &ot;
      observer(rec);
    }
  }
  return out;
}

template <class S>
MatrixRuleOutput<S> matrix_rule_chunked(MatrixRule rule, ConstMatRef<S> q, ConstMatRef<S> k,
                                        ConstMatRef<S> v, const Vec<S>& beta, const Vec<S>& alpha,
                                        ConstMatRef<S> S0, int chunk) {
  validate<S>(rule, q, k, v, beta, alpha, S0, "matrix_rule_chunked");
  if (chunk < 1) throw std::invalid_argument("matrix_rule_chunked: chunk must be ≥ 1");
  const Eigen::Index T = q.rows(), dv = v.cols();
  const bool use_b = uses_beta(rule), use_a = uses_alpha(rule), delta = is_delta_rule(rule);
  MatrixRuleOutput<S> out;
  out.o.resize(T, dv);
  out.state = S0;
  Mat<S>& sp = out.state;  // the state entering the current chunk
  for (Eigen::Index c0 = 0; c0 < T; c0 += chunk) {
    const Eigen::Index L = std::min<Eigen::Index>(chunk, T - c0);
    const auto Kc = k.middleRows(c0, L);
    const auto Qc = q.middleRows(c0, L);
    const auto Vc = v.middleRows(c0, L);
    const Vec<S> bc = use_b ? Vec<S>(beta.segment(c0, L)) : Vec<S>(Vec<S>::Ones(L));
    // Cumulative log decays g_i = Σ_{j≤i} log α_j inside the chunk; γ_i = exp(g_i) and the pair
    // ratios Γ_ij = γ_i/γ_j = exp(g_i − g_j) (i ≥ j) are formed from differences of g, so no ratio
    // of two small products is ever taken. Every exponent is ≤ 0.
    Vec<S> g(L);
    S acc = 0;
    for (Eigen::Index i = 0; i < L; ++i) {
      if (use_a) acc += std::log(alpha(c0 + i));
      g(i) = acc;
    }
    const Vec<S> gamma = g.array().exp().matrix();
    Mat<S> Gam = Mat<S>::Zero(L, L);  // lower triangle including the diagonal
    for (Eigen::Index i = 0; i < L; ++i)
      for (Eigen::Index j = 0; j <= i; ++j) Gam(i, j) = use_a ? std::exp(g(i) - g(j)) : S(1);
    // u [L, d_v]: what each token writes, S_i = γ_i S_p + Σ_{j≤i} Γ_ij k_jᵀ u_j (§11.3).
    Mat<S> u;
    if (delta) {
      // The UT transform: M = I + tril(diag(β)(K Kᵀ ⊙ Γ), −1) is unit lower triangular;
      // T = M⁻¹ diag(β), W = T (γ ⊙ K), U = T V, and u = U − W S_p.
      Mat<S> M = (Kc * Kc.transpose()).cwiseProduct(Gam);
      M = bc.asDiagonal() * M;
      M.diagonal().setOnes();
      const Mat<S> Tm = M.template triangularView<Eigen::UnitLower>().solve(
          Mat<S>(bc.asDiagonal() * Mat<S>::Identity(L, L)));
      const Mat<S> W = Tm * (gamma.asDiagonal() * Kc);
      const Mat<S> U = Tm * Vc;
      u = U - W * sp;
    } else {
      u = bc.asDiagonal() * Vc;
    }
    const Mat<S> P = (Qc * Kc.transpose()).cwiseProduct(Gam);
    out.o.middleRows(c0, L).noalias() = gamma.asDiagonal() * (Qc * sp);
    out.o.middleRows(c0, L).noalias() += P * u;
    const S gL = gamma(L - 1);
    const Vec<S> tail = (g.array() * S(-1) + g(L - 1)).exp().matrix();  // γ_L / γ_j
    const Mat<S> Kw = tail.asDiagonal() * Kc;
    sp *= gL;
    sp.noalias() += Kw.transpose() * u;
  }
  return out;
}

template <class S>
MatrixRuleGrads<S> matrix_rule_backward(MatrixRule rule, ConstMatRef<S> q, ConstMatRef<S> k,
                                        ConstMatRef<S> v, const Vec<S>& beta, const Vec<S>& alpha,
                                        ConstMatRef<S> S0, ConstMatRef<S> dO,
                                        ConstMatRef<S> dS_final) {
  validate<S>(rule, q, k, v, beta, alpha, S0, "matrix_rule_backward");
  const Eigen::Index T = q.rows(), dk = k.cols(), dv = v.cols();
  if (dO.rows() != T || dO.cols() != dv)
    throw std::invalid_argument("matrix_rule_backward: dO must be [T, d_v]");
  if (dS_final.rows() != dk || dS_final.cols() != dv)
    throw std::invalid_argument("matrix_rule_backward: dS_final must be [d_k, d_v]");
  const bool use_b = uses_beta(rule), use_a = uses_alpha(rule), delta = is_delta_rule(rule);
  // The states S_0..S_T, recomputed exactly as the primal form computes them.
  std::vector<Mat<S>> states;
  states.reserve(std::size_t(T) + 1);
  states.emplace_back(S0);
  {
    Mat<S> st = S0;
    RowVec<S> r;
    for (Eigen::Index t = 0; t < T; ++t) {
      const S b = use_b ? beta(t) : S(1);
      if (use_a) st *= alpha(t);
      if (delta) {
        r.noalias() = k.row(t) * st;
        r -= v.row(t);
        st.noalias() -= (b * k.row(t)).transpose() * r;
      } else {
        st.noalias() += (b * k.row(t)).transpose() * v.row(t);
      }
      states.push_back(st);
    }
  }
  MatrixRuleGrads<S> gr;
  gr.dq.resize(T, dk);
  gr.dk.resize(T, dk);
  gr.dv.resize(T, dv);
  if (use_b) gr.dbeta.resize(T);
  if (use_a) gr.dalpha.resize(T);
  Mat<S> G = dS_final;  // ∂L/∂S_t, carried backward
  Mat<S> A, dA;
  RowVec<S> kG, r;
  for (Eigen::Index t = T - 1; t >= 0; --t) {
    const S b = use_b ? beta(t) : S(1);
    const S a = use_a ? alpha(t) : S(1);
    const auto kt = k.row(t);
    const auto vt = v.row(t);
    // o_t = q_t S_t
    G.noalias() += q.row(t).transpose() * dO.row(t);
    gr.dq.row(t).noalias() = dO.row(t) * states[std::size_t(t) + 1].transpose();
    A = states[std::size_t(t)];
    if (use_a) A *= a;  // the decayed state the step starts from
    kG.noalias() = kt * G;
    if (delta) {
      // S_t = A − β kᵀ r,  r = k A − v
      r.noalias() = kt * A;
      r -= vt;
      if (use_b) gr.dbeta(t) = -kG.dot(r);
      gr.dv.row(t) = b * kG;
      gr.dk.row(t).noalias() = r * G.transpose();
      gr.dk.row(t).noalias() += kG * A.transpose();
      gr.dk.row(t) *= -b;
      dA = G;
      dA.noalias() -= (b * kt).transpose() * kG;
    } else {
      // S_t = A + β kᵀ v
      if (use_b) gr.dbeta(t) = kG.dot(vt);
      gr.dv.row(t) = b * kG;
      gr.dk.row(t).noalias() = b * (vt * G.transpose());
      dA = G;
    }
    if (use_a) gr.dalpha(t) = dA.cwiseProduct(states[std::size_t(t)]).sum();
    G = use_a ? Mat<S>(a * dA) : dA;
  }
  gr.dS0 = G;
  return gr;
}

#define TTTLAB_INSTANTIATE(S)                                                                     \
  template S matrix_rule_loss<S>(MatrixRule, const Mat<S>&, const RowVec<S>&, const RowVec<S>&);  \
  template MatrixRuleOutput<S> matrix_rule_primal<S>(                                             \
      MatrixRule, ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, const Vec<S>&, const Vec<S>&,   \
      ConstMatRef<S>, const MatrixRuleObserver<S>&);                                              \
  template MatrixRuleOutput<S> matrix_rule_chunked<S>(MatrixRule, ConstMatRef<S>, ConstMatRef<S>, \
                                                      ConstMatRef<S>, const Vec<S>&,              \
                                                      const Vec<S>&, ConstMatRef<S>, int);        \
  template MatrixRuleGrads<S> matrix_rule_backward<S>(                                            \
      MatrixRule, ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>, const Vec<S>&, const Vec<S>&,   \
      ConstMatRef<S>, ConstMatRef<S>, ConstMatRef<S>);

TTTLAB_INSTANTIATE(float)
TTTLAB_INSTANTIATE(double)
#undef TTTLAB_INSTANTIATE

}  // namespace tttlab
