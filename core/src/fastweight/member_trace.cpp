// One member of the fast-weight family, token by token, with a record per step (member_trace.hpp).
#include "tttlab/fastweight/member_trace.hpp"

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "tttlab/fastweight/lact.hpp"
#include "tttlab/fastweight/matrix_rules.hpp"
#include "tttlab/fastweight/titans.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {
namespace {

// Which engine runs a member: the one table a new member is added to.
enum class MemberEngine { None, MatrixRule, Titans, Lact };

MemberEngine member_engine(const FastWeightPreset& p) {
  if (p.id == "ttt_linear" || p.id == "ttt_mlp") return MemberEngine::None;
  if (p.id == "titans") return MemberEngine::Titans;
  if (p.id == "lact") return MemberEngine::Lact;
  if (matrix_rule_for(p.rule)) return MemberEngine::MatrixRule;
  return MemberEngine::None;
}

Mat<double> mt_gaussian(Rng& rng, long rows, long cols, double stddev) {
  Mat<double> m(rows, cols);
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < cols; ++j) m(i, j) = stddev * rng.normal();
  return m;
}

double mt_silu(double z) { return z / (1.0 + std::exp(-z)); }
double mt_silu_grad(double z) {
  const double s = 1.0 / (1.0 + std::exp(-z));
  return s * (1.0 + z * (1.0 - s));
}

// ∇ of ℓ = −⟨f_W(k), v⟩ with respect to W₀, W₁, W₂ (lact.hpp's layout, §11.10's G_i without the rate
// and the sign).
std::vector<Mat<double>> lact_token_gradient(const LactWeights<double>& W, const RowVec<double>& k,
                                             const RowVec<double>& v) {
  const RowVec<double> z0 = k * W.w0.transpose(), z2 = k * W.w2.transpose();
  const RowVec<double> delta = v * W.w1;
  RowVec<double> h(z0.size()), a0(z0.size()), a2(z0.size());
  for (Eigen::Index i = 0; i < z0.size(); ++i) {
    h(i) = mt_silu(z0(i)) * z2(i);
    a0(i) = delta(i) * z2(i) * mt_silu_grad(z0(i));
    a2(i) = delta(i) * mt_silu(z0(i));
  }
  return {-(a0.transpose() * k), -(v.transpose() * h), -(a2.transpose() * k)};
}

std::vector<Mat<double>> lact_list(const LactWeights<double>& W) { return {W.w0, W.w1, W.w2}; }

}  // namespace

bool member_traceable(const FastWeightPreset& member) {
  return member_engine(member) != MemberEngine::None;
}
bool member_is_matrix_rule(const FastWeightPreset& member) {
  return member_engine(member) == MemberEngine::MatrixRule;
}
std::vector<std::string> member_state_names(const FastWeightPreset& member) {
  switch (member_engine(member)) {
    case MemberEngine::MatrixRule: return {"S"};
    case MemberEngine::Titans: return {"M", "S"};
    case MemberEngine::Lact: return {"W₀", "W₁", "W₂"};
    case MemberEngine::None: break;
  }
  return {};
}

struct MemberTracer::Impl {
  MemberInputs in;
  MemberEngine engine = MemberEngine::None;
  MatrixRule rule = MatrixRule::LinearAttention;
  std::optional<TitansState<double>> titans;
  TitansInner titans_inner;
  RowVec<double> ln_w, ln_b;
  std::optional<LactStreamState<double>> lact;
  LactWeights<double> lact_w0;
  std::vector<Mat<double>> initial, state;
  long t = 0;
};

MemberTracer::MemberTracer(const FastWeightPreset& member, MemberInputs in)
    : m(std::make_unique<Impl>()) {
  m->engine = member_engine(member);
  const long T = in.q.rows();
  if (m->engine == MemberEngine::None)
    throw std::invalid_argument("member_trace: " + member.name +
                                " runs through tttlab/ttt/inner.hpp, not member_trace");
  if (in.k.rows() != T || in.v.rows() != T || in.k.cols() != in.q.cols())
    throw std::invalid_argument("member_trace: q and k must be [T, d_k] and v [T, d_v]");
  const long dk = in.k.cols(), dv = in.v.cols();
  if (m->engine == MemberEngine::MatrixRule) {
    m->rule = *matrix_rule_for(member.rule);
    Mat<double> S0 = Mat<double>::Zero(dk, dv);
    // Validated by the primal form itself, on the whole sequence, before any step.
    matrix_rule_primal<double>(m->rule, in.q.topRows(0), in.k.topRows(0), in.v.topRows(0),
                               uses_beta(m->rule) ? in.beta.head(0).eval() : Vec<double>(),
                               uses_alpha(m->rule) ? in.alpha.head(0).eval() : Vec<double>(), S0);
    if (uses_beta(m->rule) && in.beta.size() != T)
      throw std::invalid_argument("member_trace: " + member.name + " needs beta [T]");
    if (uses_alpha(m->rule)) {
      if (in.alpha.size() != T)
        throw std::invalid_argument("member_trace: " + member.name + " needs alpha [T]");
      for (long i = 0; i < T; ++i)
        if (!(in.alpha(i) > 0.0 && in.alpha(i) <= 1.0))
          throw std::invalid_argument("member_trace: alpha must lie in (0, 1]");
    }
    m->initial = {S0};
  } else if (m->engine == MemberEngine::Titans) {
    if (dk != dv || dk < 2)
      throw std::invalid_argument("member_trace: Titans needs q, k, v of one width D ≥ 2");
    if (in.beta.size() != T || in.alpha.size() != T || in.momentum.size() != T)
      throw std::invalid_argument(
          "member_trace: Titans needs beta (θ), alpha and momentum (η) [T]");
    for (long i = 0; i < T; ++i)
      if (!(in.beta(i) >= 0.0 && in.alpha(i) >= 0.0 && in.alpha(i) <= 1.0 &&
            in.momentum(i) >= 0.0 && in.momentum(i) < 1.0))
        throw std::invalid_argument(
            "member_trace: Titans needs θ ≥ 0, α in [0, 1] and η in [0, 1) at every token");
    if (in.design.chunk < 1)
      throw std::invalid_argument("member_trace: Titans' mini-batch b must be ≥ 1");
    m->titans_inner.mini_batch = in.design.chunk;
    m->ln_w = RowVec<double>::Ones(dk);
    m->ln_b = RowVec<double>::Zero(dk);
    const Mat<double> M0 = Mat<double>::Zero(dk, dk);
    m->titans = TitansState<double>::begin(M0);
    m->initial = {m->titans->memory, m->titans->momentum};
  } else {
    const bool momentum = member.rule.optimizer != FastWeightOptimizer::Gd;
    const bool muon = member.rule.optimizer == FastWeightOptimizer::Muon;
    if (in.beta.size() != T || (momentum && in.momentum.size() != T))
      throw std::invalid_argument("member_trace: LaCT needs beta (its rate) and momentum [T]");
    if (in.hidden < 0) throw std::invalid_argument("member_trace: LaCT's hidden width must be ≥ 0");
    const long dh = in.hidden > 0 ? in.hidden : 4 * dk;
    Rng rng(in.design.seed, kLactInitStream);
    LactWeights<double> W;
    W.w0 = mt_gaussian(rng, dh, dk, 1.0 / std::sqrt(static_cast<double>(dk)));
    W.w2 = mt_gaussian(rng, dh, dk, 1.0 / std::sqrt(static_cast<double>(dk)));
    W.w1 = mt_gaussian(rng, dv, dh, 1.0 / std::sqrt(static_cast<double>(dh)));
    m->lact = lact_stream_start<double>(W, in.design.chunk, muon, momentum);  // validates C
    if (!momentum) in.momentum = Vec<double>();
    m->lact_w0 = W;
    m->initial = lact_list(W);
  }
  m->state = m->initial;
  m->in = std::move(in);
}

MemberTracer::~MemberTracer() = default;
MemberTracer::MemberTracer(MemberTracer&&) noexcept = default;
MemberTracer& MemberTracer::operator=(MemberTracer&&) noexcept = default;

long MemberTracer::tokens() const { return m->in.q.rows(); }
long MemberTracer::computed() const { return m->t; }
const std::vector<Mat<double>>& MemberTracer::initial_state() const { return m->initial; }

MemberStepRecord MemberTracer::step() {
  if (m->t >= tokens()) throw std::logic_error("MemberTracer::step: every token is consumed");
  const long t = m->t;
  const MemberInputs& in = m->in;
  MemberStepRecord rec;
  rec.token = t;
  const RowVec<double> k = in.k.row(t), v = in.v.row(t), q = in.q.row(t);
  const std::vector<Mat<double>> before = m->state;
  if (m->engine == MemberEngine::MatrixRule) {
    const MatrixRule rule = m->rule;
    const Vec<double> beta = uses_beta(rule) ? Vec<double>(in.beta.segment(t, 1)) : Vec<double>();
    const Vec<double> alpha =
        uses_alpha(rule) ? Vec<double>(in.alpha.segment(t, 1)) : Vec<double>();
    // One token per call, continuing the state: the same arithmetic as one call over the sequence.
    const MatrixRuleObserver<double> observer = [&](const MatrixRuleStep<double>& s) {
      rec.beta = s.beta;
      rec.alpha = s.alpha;
      rec.loss_before = s.loss_before;
      rec.loss_after = s.loss_after;
      rec.output = *s.output;
    };
    MatrixRuleOutput<double> out =
        matrix_rule_primal<double>(rule, in.q.middleRows(t, 1), in.k.middleRows(t, 1),
                                   in.v.middleRows(t, 1), beta, alpha, before[0], observer);
    RowVec<double> g;
    if (is_delta_rule(rule))
      g = k * (rec.alpha * before[0]) - v;
    else
      g = -v;
    rec.key = {k};
    rec.grad = {g};
    rec.gradient = {k.transpose() * g};
    rec.loss_initial = matrix_rule_loss<double>(rule, m->initial[0], k, v);
    m->state[0] = std::move(out.state);
  } else if (m->engine == MemberEngine::Titans) {
    // One token per call from the carried state: titans_primal's own step and observer.
    const TitansObserver<double> observer = [&](const TitansStep<double>& s) {
      rec.beta = s.theta;
      rec.alpha = s.alpha;
      rec.momentum = s.eta;
      rec.loss_before = s.loss_before;
      rec.loss_after = s.loss_after;
      rec.output = *s.output;
    };
    TitansOutput<double> out =
        titans_primal<double>(in.q.middleRows(t, 1), in.k.middleRows(t, 1), in.v.middleRows(t, 1),
                              m->ln_w, m->ln_b, in.beta.segment(t, 1), in.alpha.segment(t, 1),
                              in.momentum.segment(t, 1), *m->titans, m->titans_inner, observer);
    m->titans = std::move(out.state);
    m->state = {m->titans->memory, m->titans->momentum};
    // S_t = η_t S_{t−1} − 2θ_t k_tᵀu_t, so the write's term is recovered from the momentum.
    if (rec.beta > 0) {
      const Mat<double> term = (rec.momentum * before[1] - m->state[1]) / (2.0 * rec.beta);
      rec.gradient = {term};
      const double kk = k.squaredNorm();
      if (kk > 0) {
        rec.key = {k};
        rec.grad = {k * term / kk};
      }
    } else {
      rec.gradient = {Mat<double>::Zero(k.size(), k.size())};
    }
    rec.loss_initial =
        titans_loss<double>(m->initial[0], k, v, m->ln_w, m->ln_b, m->titans_inner.eps);
  } else {
    LactStreamState<double>& st = *m->lact;
    const LactWeights<double> w_before = st.weights;
    const int updates = st.updates;
    // The chunk the stream learns from when this token arrives (if it does: a full buffer).
    const Mat<double> chunk_k = st.k, chunk_v = st.v;
    const long first = st.tokens - st.k.rows();
    const Vec<double> m_t =
        st.use_momentum ? Vec<double>(in.momentum.segment(t, 1)) : Vec<double>();
    const Vec<double> lr = in.beta.segment(t, 1);
    const Mat<double> o = lact_stream<double>(st, in.q.middleRows(t, 1), in.k.middleRows(t, 1),
                                              in.v.middleRows(t, 1), lr, lr, lr, m_t);
    rec.output = o.row(0);
    rec.beta = lr(0);
    rec.alpha = 1.0;
    rec.momentum = st.use_momentum ? m_t(0) : 0.0;
    if (st.updates != updates) {
      rec.chunk_first = first;
      rec.chunk_tokens = chunk_k.rows();
      rec.chunk_loss_before = lact_chunk_loss<double>(w_before, chunk_k, chunk_v);
      rec.chunk_loss_after = lact_chunk_loss<double>(st.weights, chunk_k, chunk_v);
    }
    rec.loss_initial = lact_chunk_loss<double>(m->lact_w0, k, v);
    rec.loss_before = lact_chunk_loss<double>(w_before, k, v);
    rec.loss_after = lact_chunk_loss<double>(st.weights, k, v);
    rec.gradient = lact_token_gradient(st.weights, k, v);
    m->state = lact_list(st.weights);
  }
  for (std::size_t i = 0; i < m->state.size(); ++i) rec.delta.push_back(m->state[i] - before[i]);
  rec.state_after = m->state;
  ++m->t;
  return rec;
}

std::vector<MemberStepRecord> member_trace(const FastWeightPreset& member, MemberInputs in) {
  MemberTracer tracer(member, std::move(in));
  std::vector<MemberStepRecord> out;
  out.reserve(static_cast<std::size_t>(tracer.tokens()));
  while (tracer.computed() < tracer.tokens()) out.push_back(tracer.step());
  return out;
}

}  // namespace tttlab
