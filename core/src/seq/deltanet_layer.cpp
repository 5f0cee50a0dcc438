// DeltaNet and Gated DeltaNet as sequence layers (see tttlab/seq/deltanet_layer.hpp; the block's
// equations and its backward are docs/MATH.md §11.8, the inner loop's §11.2–§11.4).
#include "tttlab/seq/deltanet_layer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "short_conv_branch.hpp"
#include "tttlab/fastweight/matrix_rules.hpp"
#include "tttlab/nn/activation_arrays.hpp"
#include "tttlab/nn/causal_conv.hpp"
#include "tttlab/nn/norms.hpp"
#include "tttlab/seq/mamba2_layer.hpp"

namespace tttlab {
namespace {

using namespace seq_detail;

[[noreturn]] void bad_deltanet(const std::string& msg) {
  throw std::invalid_argument("deltanet layer: " + msg);
}

template <class S>
struct DeltaNetStream : SequenceState {
  ShortConvHistory<S> hist;   // the convolutions' last inputs
  std::vector<Mat<S>> state;  // per head, S_h [d, d]
};

// What backward needs, all [T, ·] with the heads side by side in the columns.
template <class S>
struct DeltaNetCache : LayerCache {
  Mat<S> x;                       // input [T, D]
  ShortConvBranch<S> bq, bk, bv;  // projections, convolutions, silu [T, D] each
  Mat<S> qn, kn;                  // q̂ (with 1/√d) and k̂ [T, D]
  Mat<S> beta;                    // [T, H]
  Mat<S> r;                       // x W_a + dt_bias [T, H] (gated)
  Mat<S> alpha;                   // [T, H] (gated)
  Mat<S> o;                       // the inner loop's output [T, D]
  Mat<S> n;                       // per-head RMSNorm(o) ⊙ w [T, D]
  Mat<S> gate;                    // x W_g [T, D] (gated)
  Mat<S> y;                       // o_proj's input [T, D]
};

// The front of the block, shared by both forms: projections, convolutions (continuing the
// histories), silu, L2 normalisation, β and α. Fills everything in `c` up to qn, kn, beta, r, alpha.
template <class S>
void dn_front(const DeltaNetConfig& cfg, const DeltaNetParams<S>& p, ConstMatRef<S> x,
              ShortConvHistory<S>& hist, DeltaNetCache<S>& c) {
  const int H = cfg.heads, d = cfg.head_dim();
  const Eigen::Index T = x.rows();
  short_conv_branch_forward<S>(x, p.q_proj, p.q_conv, hist.q, c.bq);
  short_conv_branch_forward<S>(x, p.k_proj, p.k_conv, hist.k, c.bk);
  short_conv_branch_forward<S>(x, p.v_proj, p.v_conv, hist.v, c.bv);
  const S eps = S(cfg.l2_eps), scale = S(1) / std::sqrt(S(d));
  l2_normalize_heads<S>(c.bq.a, d, scale, eps, c.qn);
  l2_normalize_heads<S>(c.bk.a, d, S(1), eps, c.kn);
  c.beta.noalias() = x * p.b_proj;
  c.beta = c.beta.unaryExpr([](S z) { return seq_sigmoid(z); });
  if (cfg.gated) {
    c.r.noalias() = x * p.a_proj;
    c.r.rowwise() += p.dt_bias;
    c.alpha.resize(T, H);
    // α = exp(−exp(A_log)·softplus(r)); floored at the smallest normal number so that the inner loop's
    // α ∈ (0, 1] holds even where the decay underflows (the state is then forgotten either way).
    for (Eigen::Index t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) {
        const S g = -std::exp(p.A_log(h)) * S(mamba2_softplus(double(c.r(t, h))));
        c.alpha(t, h) = std::max(std::exp(g), std::numeric_limits<S>::min());
      }
  }
}

// The back of the block: the per-head RMSNorm, the gate and o_proj. Fills c.n, c.gate, c.y from c.o.
template <class S>
Mat<S> dn_back(const DeltaNetConfig& cfg, const DeltaNetParams<S>& p, ConstMatRef<S> x,
               DeltaNetCache<S>& c) {
  const int H = cfg.heads, d = cfg.head_dim();
  const Eigen::Index T = c.o.rows();
  c.n.resize(T, cfg.width);
  Mat<S> nh;
  for (int h = 0; h < H; ++h) {
    rms_norm_forward<S>(c.o.middleCols(h * d, d), p.o_norm, nh, S(cfg.norm_eps));
    c.n.middleCols(h * d, d) = nh;
  }
  if (cfg.gated) {
    c.gate.noalias() = x * p.g_proj;
    Mat<S> sg;
    silu_array<S>(c.gate, sg);
    c.y = (c.n.array() * sg.array()).matrix();
  } else {
    c.y = c.n;
  }
  return c.y * p.o_proj;
}

// The inner loop's per-head inputs, copied out of the cache.
template <class S>
struct DnHeadInputs {
  Mat<S> q, k, v;
  Vec<S> beta, alpha;
};
template <class S>
DnHeadInputs<S> dn_head_inputs(const DeltaNetConfig& cfg, const DeltaNetCache<S>& c, int h) {
  const int d = cfg.head_dim();
  DnHeadInputs<S> in;
  in.q = c.qn.middleCols(h * d, d);
  in.k = c.kn.middleCols(h * d, d);
  in.v = c.bv.a.middleCols(h * d, d);
  in.beta = c.beta.col(h);
  if (cfg.gated) in.alpha = c.alpha.col(h);
  return in;
}

MatrixRule dn_rule_of(const DeltaNetConfig& cfg) {
  return cfg.gated ? MatrixRule::GatedDeltaNet : MatrixRule::DeltaNet;
}

template <class S>
void dn_check(const DeltaNetConfig& cfg, const DeltaNetParams<S>& p) {
  cfg.validate();
  auto shape = [](const auto& m, Eigen::Index r, Eigen::Index c, const char* name) {
    require_param_shape("deltanet", m.rows(), m.cols(), r, c, name);
  };
  const int D = cfg.width, H = cfg.heads, K = cfg.conv_kernel, d = cfg.head_dim();
  shape(p.q_proj, D, D, "q_proj.weight");
  shape(p.k_proj, D, D, "k_proj.weight");
  shape(p.v_proj, D, D, "v_proj.weight");
  shape(p.b_proj, D, H, "b_proj.weight");
  shape(p.q_conv, D, K, "q_conv1d.weight");
  shape(p.k_conv, D, K, "k_conv1d.weight");
  shape(p.v_conv, D, K, "v_conv1d.weight");
  const int gd = cfg.gated ? D : 0, gh = cfg.gated ? H : 0;
  shape(p.a_proj, gd, gh, "a_proj.weight");
  shape(p.A_log, 1, gh, "A_log");
  shape(p.dt_bias, 1, gh, "dt_bias");
  shape(p.g_proj, gd, gd, "g_proj.weight");
  shape(p.o_norm, 1, d, "o_norm.weight");
  shape(p.o_proj, D, D, "o_proj.weight");
}

}  // namespace

void DeltaNetConfig::validate() const {
  auto positive = [](int v, const char* name) {
    if (v <= 0) bad_deltanet(std::string(name) + " must be positive, got " + std::to_string(v));
  };
  positive(width, "width");
  positive(heads, "heads");
  positive(conv_kernel, "conv_kernel");
  positive(chunk_size, "chunk_size");
  if (width % heads != 0)
    bad_deltanet("heads (" + std::to_string(heads) + ") must divide width (" +
                 std::to_string(width) + ")");
  if (!(norm_eps > 0) || !std::isfinite(norm_eps))
    bad_deltanet("norm_eps must be positive and finite");
  if (!(l2_eps > 0) || !std::isfinite(l2_eps)) bad_deltanet("l2_eps must be positive and finite");
}

template <class S>
DeltaNetParams<S> DeltaNetParams<S>::init(const DeltaNetConfig& cfg, double std, Rng& rng) {
  cfg.validate();
  const int D = cfg.width, H = cfg.heads, K = cfg.conv_kernel;
  DeltaNetParams p = zeros(cfg);
  p.q_proj = seq_normal_mat<S>(D, D, std, rng);
  p.k_proj = seq_normal_mat<S>(D, D, std, rng);
  p.v_proj = seq_normal_mat<S>(D, D, std, rng);
  p.b_proj = seq_normal_mat<S>(D, H, std, rng);
  p.q_conv = seq_conv_init<S>(D, K, rng);
  p.k_conv = seq_conv_init<S>(D, K, rng);
  p.v_conv = seq_conv_init<S>(D, K, rng);
  if (cfg.gated) {
    p.a_proj = seq_normal_mat<S>(D, H, std, rng);
    for (int h = 0; h < H; ++h) p.A_log(h) = S(mamba2_init_A_log(rng));
    for (int h = 0; h < H; ++h) p.dt_bias(h) = S(mamba2_init_dt_bias(rng));
    p.g_proj = seq_normal_mat<S>(D, D, std, rng);
  }
  p.o_norm = RowVec<S>::Ones(cfg.head_dim());
  p.o_proj = seq_normal_mat<S>(D, D, std, rng);
  return p;
}

template <class S>
DeltaNetParams<S> DeltaNetParams<S>::zeros(const DeltaNetConfig& cfg) {
  cfg.validate();
  const int D = cfg.width, H = cfg.heads, K = cfg.conv_kernel;
  const int gd = cfg.gated ? D : 0, gh = cfg.gated ? H : 0;
  DeltaNetParams p;
  p.q_proj = p.k_proj = p.v_proj = p.o_proj = Mat<S>::Zero(D, D);
  p.b_proj = Mat<S>::Zero(D, H);
  p.q_conv = p.k_conv = p.v_conv = Mat<S>::Zero(D, K);
  p.a_proj = Mat<S>::Zero(gd, gh);
  p.A_log = p.dt_bias = RowVec<S>::Zero(gh);
  p.g_proj = Mat<S>::Zero(gd, gd);
  p.o_norm = RowVec<S>::Zero(cfg.head_dim());
  return p;
}

template <class S>
DeltaNetLayer<S>::DeltaNetLayer(DeltaNetConfig cfg, DeltaNetParams<S> params)
    : m_cfg(cfg), m_params(std::move(params)) {
  dn_check(m_cfg, m_params);
}

template <class S>
std::unique_ptr<SequenceState> DeltaNetLayer<S>::start() const {
  auto st = std::make_unique<DeltaNetStream<S>>();
  st->hist = ShortConvHistory<S>::zeros(m_cfg.conv_kernel, m_cfg.width);
  const int d = m_cfg.head_dim();
  st->state.assign(m_cfg.heads, Mat<S>::Zero(d, d));
  return st;
}

template <class S>
Mat<S> DeltaNetLayer<S>::forward(SequenceState& state, ConstMatRef<S> x) const {
  return forward(state, x, x.rows() == 1 ? DeltaNetForm::Primal : DeltaNetForm::Chunked);
}

template <class S>
Mat<S> DeltaNetLayer<S>::forward(SequenceState& state, ConstMatRef<S> x, DeltaNetForm form) const {
  auto* st = dynamic_cast<DeltaNetStream<S>*>(&state);
  if (!st) bad_deltanet("forward() was given the state of another layer type");
  if (x.cols() != m_cfg.width)
    bad_deltanet("input width " + std::to_string(x.cols()) + " differs from the layer's " +
                 std::to_string(m_cfg.width));
  const int d = m_cfg.head_dim();
  DeltaNetCache<S> c;
  dn_front<S>(m_cfg, m_params, x, st->hist, c);
  c.o.resize(x.rows(), m_cfg.width);
  for (int h = 0; h < m_cfg.heads; ++h) {
    const DnHeadInputs<S> in = dn_head_inputs(m_cfg, c, h);
    MatrixRuleOutput<S> out =
        form == DeltaNetForm::Primal
            ? matrix_rule_primal<S>(dn_rule_of(m_cfg), in.q, in.k, in.v, in.beta, in.alpha,
                                    st->state[h])
            : matrix_rule_chunked<S>(dn_rule_of(m_cfg), in.q, in.k, in.v, in.beta, in.alpha,
                                     st->state[h], m_cfg.chunk_size);
    c.o.middleCols(h * d, d) = out.o;
    st->state[h] = std::move(out.state);
  }
  st->tokens += x.rows();
  return dn_back<S>(m_cfg, m_params, x, c);
}

template <class S>
std::unique_ptr<LayerCache> DeltaNetLayer<S>::forward_train(ConstMatRef<S> x, Mat<S>& out) const {
  if (x.cols() != m_cfg.width)
    bad_deltanet("input width " + std::to_string(x.cols()) + " differs from the layer's " +
                 std::to_string(m_cfg.width));
  const int d = m_cfg.head_dim();
  auto c = std::make_unique<DeltaNetCache<S>>();
  c->x = x;
  ShortConvHistory<S> hist = ShortConvHistory<S>::zeros(m_cfg.conv_kernel, m_cfg.width);
  dn_front<S>(m_cfg, m_params, x, hist, *c);
  c->o.resize(x.rows(), m_cfg.width);
  const Mat<S> S0 = Mat<S>::Zero(d, d);
  for (int h = 0; h < m_cfg.heads; ++h) {
    const DnHeadInputs<S> in = dn_head_inputs(m_cfg, *c, h);
    c->o.middleCols(h * d, d) = matrix_rule_chunked<S>(dn_rule_of(m_cfg), in.q, in.k, in.v, in.beta,
                                                       in.alpha, S0, m_cfg.chunk_size)
                                    .o;
  }
  out = dn_back<S>(m_cfg, m_params, x, *c);
  return c;
}

template <class S>
void DeltaNetLayer<S>::backward(const LayerCache& cache, ConstMatRef<S> dOut,
                                SequenceLayer<S>& grads, Mat<S>& dx) const {
  auto* c = dynamic_cast<const DeltaNetCache<S>*>(&cache);
  auto* gl = dynamic_cast<DeltaNetLayer<S>*>(&grads);
  if (!c || !gl) bad_deltanet("backward() was given the cache or gradient of another layer type");
  DeltaNetParams<S>& g = gl->m_params;
  const DeltaNetParams<S>& p = m_params;
  const int D = m_cfg.width, H = m_cfg.heads, d = m_cfg.head_dim();
  const Eigen::Index T = c->x.rows();
  const S eps = S(m_cfg.l2_eps), scale = S(1) / std::sqrt(S(d));
  // out = y · o_proj
  g.o_proj.noalias() += c->y.transpose() * dOut;
  const Mat<S> dy = dOut * p.o_proj.transpose();
  // y = n ⊙ silu(gate) (gated) or n
  Mat<S> dn;
  if (m_cfg.gated) {
    Mat<S> sg, dsg;
    silu_array<S>(c->gate, sg);
    silu_grad_array<S>(c->gate, dsg);
    dn = (dy.array() * sg.array()).matrix();
    const Mat<S> dgate = (dy.array() * c->n.array() * dsg.array()).matrix();
    g.g_proj.noalias() += c->x.transpose() * dgate;
    dx.noalias() = dgate * p.g_proj.transpose();
  } else {
    dn = dy;
    dx = Mat<S>::Zero(T, D);
  }
  // n_h = RMSNorm(o_h) ⊙ w, then the inner loop, head by head.
  Mat<S> dqn(T, D), dkn(T, D), dv(T, D), dbeta(T, H), dalpha;
  if (m_cfg.gated) dalpha.resize(T, H);
  const Mat<S> S0 = Mat<S>::Zero(d, d), dSf = Mat<S>::Zero(d, d);
  Mat<S> doh;
  for (int h = 0; h < H; ++h) {
    rms_norm_backward<S>(c->o.middleCols(h * d, d), p.o_norm, dn.middleCols(h * d, d), doh,
                         g.o_norm, S(m_cfg.norm_eps));
    const DnHeadInputs<S> in = dn_head_inputs(m_cfg, *c, h);
    const MatrixRuleGrads<S> gr = matrix_rule_backward<S>(dn_rule_of(m_cfg), in.q, in.k, in.v,
                                                          in.beta, in.alpha, S0, doh, dSf);
    dqn.middleCols(h * d, d) = gr.dq;
    dkn.middleCols(h * d, d) = gr.dk;
    dv.middleCols(h * d, d) = gr.dv;
    dbeta.col(h) = gr.dbeta;
    if (m_cfg.gated) dalpha.col(h) = gr.dalpha;
  }
  // β = sigmoid(x W_β)
  const Mat<S> dzb = (dbeta.array() * c->beta.array() * (S(1) - c->beta.array())).matrix();
  g.b_proj.noalias() += c->x.transpose() * dzb;
  dx.noalias() += dzb * p.b_proj.transpose();
  // α = exp(g), g = −exp(A_log)·softplus(r), r = x W_a + dt_bias
  if (m_cfg.gated) {
    Mat<S> dr(T, H);
    for (int h = 0; h < H; ++h) {
      const S A = std::exp(p.A_log(h));
      for (Eigen::Index t = 0; t < T; ++t) {
        const S dg = dalpha(t, h) * c->alpha(t, h);
        const double r = double(c->r(t, h));
        g.A_log(h) += dg * (-A * S(mamba2_softplus(r)));  // ∂g/∂A_log = g
        dr(t, h) = dg * (-A) * S(mamba2_softplus_grad(r));
      }
    }
    g.dt_bias += dr.colwise().sum();
    g.a_proj.noalias() += c->x.transpose() * dr;
    dx.noalias() += dr * p.a_proj.transpose();
  }
  // q̂ = q / sqrt(‖q‖² + ε) / √d,  k̂ = k / sqrt(‖k‖² + ε) per head
  Mat<S> dq, dk;
  l2_normalize_heads_backward<S>(c->bq.a, dqn, d, scale, eps, dq);
  l2_normalize_heads_backward<S>(c->bk.a, dkn, d, S(1), eps, dk);
  // silu, the convolutions and the projections.
  short_conv_branch_backward<S>(c->x, p.q_proj, p.q_conv, c->bq, dq, g.q_proj, g.q_conv, dx);
  short_conv_branch_backward<S>(c->x, p.k_proj, p.k_conv, c->bk, dk, g.k_proj, g.k_conv, dx);
  short_conv_branch_backward<S>(c->x, p.v_proj, p.v_conv, c->bv, dv, g.v_proj, g.v_conv, dx);
}

template <class S>
std::unique_ptr<SequenceLayer<S>> DeltaNetLayer<S>::zeros_like() const {
  return std::make_unique<DeltaNetLayer<S>>(m_cfg, DeltaNetParams<S>::zeros(m_cfg));
}

template <class S>
void DeltaNetLayer<S>::for_each_param(const ParamVisitor<S>& f) {
  auto mat = [&f](Mat<S>& m, const char* name) { visit_param<S>(f, m, name); };
  auto row = [&f](RowVec<S>& m, const char* name) { visit_param<S>(f, m, name); };
  DeltaNetParams<S>& p = m_params;
  mat(p.q_proj, "q_proj.weight");
  mat(p.k_proj, "k_proj.weight");
  mat(p.v_proj, "v_proj.weight");
  mat(p.b_proj, "b_proj.weight");
  mat(p.q_conv, "q_conv1d.weight");
  mat(p.k_conv, "k_conv1d.weight");
  mat(p.v_conv, "v_conv1d.weight");
  if (m_cfg.gated) {
    mat(p.a_proj, "a_proj.weight");
    row(p.A_log, "A_log");
    row(p.dt_bias, "dt_bias");
    mat(p.g_proj, "g_proj.weight");
  }
  row(p.o_norm, "o_norm.weight");
  mat(p.o_proj, "o_proj.weight");
}

template <class S>
double DeltaNetLayer<S>::forward_flops(long T) const {
  const double D = m_cfg.width, H = m_cfg.heads, K = m_cfg.conv_kernel, d = m_cfg.head_dim();
  const double C = std::min<double>(m_cfg.chunk_size, double(std::max(1L, T)));
  const double proj = 2 * D * (4 * D + H) + (m_cfg.gated ? 2 * D * (D + H) : 0.0);
  const double per_head = 2 * (2 * C * d) + C * C / 2 + 2 * (2 * C * d) + 3 * 2 * d * d;
  return double(T) * (proj + 2 * 3 * D * K + H * per_head);
}

template struct DeltaNetParams<float>;
template struct DeltaNetParams<double>;
template class DeltaNetLayer<float>;
template class DeltaNetLayer<double>;

}  // namespace tttlab
