// One member of the fast-weight family, token by token, with a record per step (member_trace.hpp).
#include "tttlab/fastweight/member_trace.hpp"

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "tttlab/fastweight/matrix_rules.hpp"

namespace tttlab {
namespace {

// Which engine runs a member: the one table a new member (or Titans' and LaCT's own inner loops,
// fastweight/titans.hpp and lact.hpp, in place of DesignedMemory) is added to.
enum class MemberEngine { None, MatrixRule, Designed };

MemberEngine member_engine(const FastWeightPreset& p) {
  if (p.id == "ttt_linear" || p.id == "ttt_mlp") return MemberEngine::None;
  if (matrix_rule_for(p.rule)) return MemberEngine::MatrixRule;
  // Titans and LaCT: DesignedMemory at the preset's rule, until their own headers land.
  return MemberEngine::Designed;
}

Mat<double> mt_to_mat(const Eigen::MatrixXd& m) { return m; }

}  // namespace

bool member_traceable(const FastWeightPreset& member) {
  return member_engine(member) != MemberEngine::None;
}
bool member_is_matrix_rule(const FastWeightPreset& member) {
  return member_engine(member) == MemberEngine::MatrixRule;
}

struct MemberTracer::Impl {
  MemberInputs in;
  MemberEngine engine = MemberEngine::None;
  MatrixRule rule = MatrixRule::LinearAttention;
  std::optional<DesignedMemory> memory, start;  // the memory as it learns, and one never written
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
  if (m->engine == MemberEngine::MatrixRule) {
    m->rule = *matrix_rule_for(member.rule);
    Mat<double> S0 = Mat<double>::Zero(in.k.cols(), in.v.cols());
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
  } else {
    if (in.q.cols() != in.design.width || in.v.cols() != in.design.width)
      throw std::invalid_argument("member_trace: " + member.name + " needs q, k, v of width " +
                                  std::to_string(in.design.width) + " (design.width)");
    m->memory.emplace(member.rule, in.design);  // validates rule and parameters
    m->start.emplace(member.rule, in.design);
    for (const Eigen::MatrixXd& w : m->memory->weights()) m->initial.push_back(mt_to_mat(w));
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
  if (m->engine == MemberEngine::MatrixRule) {
    const MatrixRule rule = m->rule;
    const Vec<double> beta = uses_beta(rule) ? Vec<double>(in.beta.segment(t, 1)) : Vec<double>();
    const Vec<double> alpha =
        uses_alpha(rule) ? Vec<double>(in.alpha.segment(t, 1)) : Vec<double>();
    const Mat<double> before = m->state[0];
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
                                   in.v.middleRows(t, 1), beta, alpha, before, observer);
    RowVec<double> g;
    if (is_delta_rule(rule))
      g = k * (rec.alpha * before) - v;
    else
      g = -v;
    rec.key = {k};
    rec.grad = {g};
    rec.gradient = {k.transpose() * g};
    rec.loss_initial = matrix_rule_loss<double>(rule, m->initial[0], k, v);
    rec.delta = {out.state - before};
    m->state[0] = std::move(out.state);
  } else {
    DesignedMemory& mem = *m->memory;
    const std::vector<Mat<double>> before = m->state;
    for (const Eigen::MatrixXd& gm : mem.gradient(k, v)) rec.gradient.push_back(mt_to_mat(gm));
    const double kk = k.squaredNorm();
    if (kk > 0) {
      rec.key = {k};
      rec.grad = {k * rec.gradient[0] / kk};
    }
    rec.loss_initial = m->start->loss(k, v);
    mem.write(k, v);
    rec.beta = in.design.eta;
    rec.loss_before = mem.loss_before();
    rec.loss_after = mem.loss_after();
    rec.output = mem.read(q);
    const auto& w = mem.weights();
    for (std::size_t i = 0; i < w.size(); ++i) {
      m->state[i] = mt_to_mat(w[i]);
      rec.delta.push_back(m->state[i] - before[i]);
    }
  }
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
