// Titans as a sequence layer (see tttlab/seq/titans_layer.hpp; the block's equations and its backward
// are docs/MATH.md §11.9).
#include "tttlab/seq/titans_layer.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "short_conv_branch.hpp"
#include "tttlab/fastweight/titans.hpp"
#include "tttlab/nn/activation_arrays.hpp"
#include "tttlab/nn/causal_conv.hpp"
#include "tttlab/nn/norms.hpp"

namespace tttlab {
namespace {

using namespace seq_detail;

[[noreturn]] void bad_titans(const std::string& msg) {
  throw std::invalid_argument("titans layer: " + msg);
}

template <class S>
struct TitansStream : SequenceState {
  ShortConvHistory<S> hist;            // the convolutions' last inputs
  std::vector<TitansState<S>> memory;  // per head
};

// What backward needs, all [T, ·] with the heads side by side in the columns.
template <class S>
struct TitansCache : LayerCache {
  Mat<S> x;                       // input [T, D]
  ShortConvBranch<S> bq, bk, bv;  // projections, convolutions, silu [T, D] each
  Mat<S> qn, kn;                  // q̂ and k̂ [T, D]
  Mat<S> theta, alpha, eta;       // [T, H]
  Mat<S> o;                       // the memory's output [T, D]
  Mat<S> n;                       // per-head RMSNorm(o) ⊙ w [T, D]
  Mat<S> gate;                    // x W_g [T, D]
  Mat<S> y;                       // o_proj's input [T, D]
};

// The front of the block, shared by both forms: projections, convolutions (continuing the
// histories), silu, L2 normalisation, θ, α, η.
template <class S>
void titans_front(const TitansLayerConfig& cfg, const TitansParams<S>& p, ConstMatRef<S> x,
                  ShortConvHistory<S>& hist, TitansCache<S>& c) {
  const int d = cfg.head_dim();
  short_conv_branch_forward<S>(x, p.q_proj, p.q_conv, hist.q, c.bq);
  short_conv_branch_forward<S>(x, p.k_proj, p.k_conv, hist.k, c.bk);
  short_conv_branch_forward<S>(x, p.v_proj, p.v_conv, hist.v, c.bv);
  const S eps = S(cfg.l2_eps);
  l2_normalize_heads<S>(c.bq.a, d, S(1), eps, c.qn);
  l2_normalize_heads<S>(c.bk.a, d, S(1), eps, c.kn);
  auto gate = [&](const Mat<S>& W, const RowVec<S>& bias, S scale, Mat<S>& out) {
    out.noalias() = x * W;
    out.rowwise() += bias;
    out = out.unaryExpr([scale](S z) { return scale * seq_sigmoid(z); });
  };
  gate(p.theta_proj, p.theta_bias, S(1) / S(d), c.theta);
  gate(p.alpha_proj, p.alpha_bias, S(1), c.alpha);
  gate(p.eta_proj, p.eta_bias, S(1), c.eta);
}

// The back of the block: the per-head RMSNorm, the gate and o_proj. Fills c.n, c.gate, c.y from c.o.
template <class S>
Mat<S> titans_back(const TitansLayerConfig& cfg, const TitansParams<S>& p, ConstMatRef<S> x,
                   TitansCache<S>& c) {
  const int H = cfg.heads, d = cfg.head_dim();
  const Eigen::Index T = c.o.rows();
  c.n.resize(T, cfg.width);
  Mat<S> nh;
  for (int h = 0; h < H; ++h) {
    rms_norm_forward<S>(c.o.middleCols(h * d, d), p.o_norm, nh, S(cfg.norm_eps));
    c.n.middleCols(h * d, d) = nh;
  }
  c.gate.noalias() = x * p.g_proj;
  Mat<S> sg;
  silu_array<S>(c.gate, sg);
  c.y = (c.n.array() * sg.array()).matrix();
  return c.y * p.o_proj;
}

// The memory's per-head inputs, copied out of the cache.
template <class S>
struct TitansHeadInputs {
  Mat<S> q, k, v;
  RowVec<S> w, b;
  Vec<S> theta, alpha, eta;
};
template <class S>
TitansHeadInputs<S> titans_head_inputs(const TitansLayerConfig& cfg, const TitansParams<S>& p,
                                       const TitansCache<S>& c, int h) {
  const int d = cfg.head_dim();
  TitansHeadInputs<S> in;
  in.q = c.qn.middleCols(h * d, d);
  in.k = c.kn.middleCols(h * d, d);
  in.v = c.bv.a.middleCols(h * d, d);
  in.w = p.ln_weight.row(h);
  in.b = p.ln_bias.row(h);
  in.theta = c.theta.col(h);
  in.alpha = c.alpha.col(h);
  in.eta = c.eta.col(h);
  return in;
}

TitansInner titans_inner_of(const TitansLayerConfig& cfg) {
  return TitansInner{cfg.mini_batch, cfg.ln_eps};
}

double titans_logit(double p) { return std::log(p / (1 - p)); }

template <class S>
void titans_check(const TitansLayerConfig& cfg, const TitansParams<S>& p) {
  cfg.validate();
  auto shape = [](const auto& m, Eigen::Index r, Eigen::Index c, const char* name) {
    require_param_shape("titans", m.rows(), m.cols(), r, c, name);
  };
  const int D = cfg.width, H = cfg.heads, K = cfg.conv_kernel, d = cfg.head_dim();
  shape(p.q_proj, D, D, "q_proj.weight");
  shape(p.k_proj, D, D, "k_proj.weight");
  shape(p.v_proj, D, D, "v_proj.weight");
  shape(p.q_conv, D, K, "q_conv1d.weight");
  shape(p.k_conv, D, K, "k_conv1d.weight");
  shape(p.v_conv, D, K, "v_conv1d.weight");
  shape(p.theta_proj, D, H, "theta_proj.weight");
  shape(p.alpha_proj, D, H, "alpha_proj.weight");
  shape(p.eta_proj, D, H, "eta_proj.weight");
  shape(p.theta_bias, 1, H, "theta_proj.bias");
  shape(p.alpha_bias, 1, H, "alpha_proj.bias");
  shape(p.eta_bias, 1, H, "eta_proj.bias");
  shape(p.ln_weight, H, d, "ttt_norm.weight");
  shape(p.ln_bias, H, d, "ttt_norm.bias");
  shape(p.o_norm, 1, d, "o_norm.weight");
  shape(p.g_proj, D, D, "g_proj.weight");
  shape(p.o_proj, D, D, "o_proj.weight");
}

}  // namespace

void TitansLayerConfig::validate() const {
  auto positive = [](int v, const char* name) {
    if (v <= 0) bad_titans(std::string(name) + " must be positive, got " + std::to_string(v));
  };
  positive(width, "width");
  positive(heads, "heads");
  positive(conv_kernel, "conv_kernel");
  positive(mini_batch, "mini_batch");
  if (width % heads != 0)
    bad_titans("heads (" + std::to_string(heads) + ") must divide width (" + std::to_string(width) +
               ")");
  for (auto [v, name] : {std::pair{ln_eps, "ln_eps"}, {norm_eps, "norm_eps"}, {l2_eps, "l2_eps"}})
    if (!(v > 0) || !std::isfinite(v))
      bad_titans(std::string(name) + " must be positive and finite");
}

template <class S>
TitansParams<S> TitansParams<S>::init(const TitansLayerConfig& cfg, double std, Rng& rng) {
  cfg.validate();
  const int D = cfg.width, H = cfg.heads, K = cfg.conv_kernel;
  TitansParams p = zeros(cfg);
  p.q_proj = seq_normal_mat<S>(D, D, std, rng);
  p.k_proj = seq_normal_mat<S>(D, D, std, rng);
  p.v_proj = seq_normal_mat<S>(D, D, std, rng);
  p.q_conv = seq_conv_init<S>(D, K, rng);
  p.k_conv = seq_conv_init<S>(D, K, rng);
  p.v_conv = seq_conv_init<S>(D, K, rng);
  p.theta_proj = seq_normal_mat<S>(D, H, std, rng);
  p.alpha_proj = seq_normal_mat<S>(D, H, std, rng);
  p.eta_proj = seq_normal_mat<S>(D, H, std, rng);
  p.theta_bias = RowVec<S>::Constant(H, S(titans_logit(0.1)));
  p.alpha_bias = RowVec<S>::Constant(H, S(titans_logit(0.01)));
  p.eta_bias = RowVec<S>::Constant(H, S(titans_logit(0.9)));
  p.ln_weight.setOnes();
  p.o_norm.setOnes();
  p.g_proj = seq_normal_mat<S>(D, D, std, rng);
  p.o_proj = seq_normal_mat<S>(D, D, std, rng);
  return p;
}

template <class S>
TitansParams<S> TitansParams<S>::zeros(const TitansLayerConfig& cfg) {
  cfg.validate();
  const int D = cfg.width, H = cfg.heads, K = cfg.conv_kernel, d = cfg.head_dim();
  TitansParams p;
  p.q_proj = p.k_proj = p.v_proj = p.g_proj = p.o_proj = Mat<S>::Zero(D, D);
  p.q_conv = p.k_conv = p.v_conv = Mat<S>::Zero(D, K);
  p.theta_proj = p.alpha_proj = p.eta_proj = Mat<S>::Zero(D, H);
  p.theta_bias = p.alpha_bias = p.eta_bias = RowVec<S>::Zero(H);
  p.ln_weight = p.ln_bias = Mat<S>::Zero(H, d);
  p.o_norm = RowVec<S>::Zero(d);
  return p;
}

template <class S>
TitansLayer<S>::TitansLayer(TitansLayerConfig cfg, TitansParams<S> params)
    : m_cfg(cfg), m_params(std::move(params)) {
  titans_check(m_cfg, m_params);
}

template <class S>
std::unique_ptr<SequenceState> TitansLayer<S>::start() const {
  auto st = std::make_unique<TitansStream<S>>();
  st->hist = ShortConvHistory<S>::zeros(m_cfg.conv_kernel, m_cfg.width);
  const int d = m_cfg.head_dim();
  st->memory.assign(m_cfg.heads, TitansState<S>::begin(Mat<S>::Zero(d, d)));
  return st;
}

template <class S>
Mat<S> TitansLayer<S>::forward(SequenceState& state, ConstMatRef<S> x) const {
  return forward(state, x, x.rows() == 1 ? TitansForm::Primal : TitansForm::Chunked);
}

template <class S>
Mat<S> TitansLayer<S>::forward(SequenceState& state, ConstMatRef<S> x, TitansForm form) const {
  auto* st = dynamic_cast<TitansStream<S>*>(&state);
  if (!st) bad_titans("forward() was given the state of another layer type");
  if (x.cols() != m_cfg.width)
    bad_titans("input width " + std::to_string(x.cols()) + " differs from the layer's " +
               std::to_string(m_cfg.width));
  const int d = m_cfg.head_dim();
  TitansCache<S> c;
  titans_front<S>(m_cfg, m_params, x, st->hist, c);
  c.o.resize(x.rows(), m_cfg.width);
  const TitansInner inner = titans_inner_of(m_cfg);
  for (int h = 0; h < m_cfg.heads; ++h) {
    const TitansHeadInputs<S> in = titans_head_inputs(m_cfg, m_params, c, h);
    TitansOutput<S> out = form == TitansForm::Primal
                              ? titans_primal<S>(in.q, in.k, in.v, in.w, in.b, in.theta, in.alpha,
                                                 in.eta, st->memory[h], inner)
                              : titans_chunked<S>(in.q, in.k, in.v, in.w, in.b, in.theta, in.alpha,
                                                  in.eta, st->memory[h], inner);
    c.o.middleCols(h * d, d) = out.o;
    st->memory[h] = std::move(out.state);
  }
  st->tokens += x.rows();
  return titans_back<S>(m_cfg, m_params, x, c);
}

template <class S>
std::unique_ptr<LayerCache> TitansLayer<S>::forward_train(ConstMatRef<S> x, Mat<S>& out) const {
  if (x.cols() != m_cfg.width)
    bad_titans("input width " + std::to_string(x.cols()) + " differs from the layer's " +
               std::to_string(m_cfg.width));
  const int d = m_cfg.head_dim();
  auto c = std::make_unique<TitansCache<S>>();
  c->x = x;
  ShortConvHistory<S> hist = ShortConvHistory<S>::zeros(m_cfg.conv_kernel, m_cfg.width);
  titans_front<S>(m_cfg, m_params, x, hist, *c);
  c->o.resize(x.rows(), m_cfg.width);
  const Mat<S> M0 = Mat<S>::Zero(d, d);
  const TitansInner inner = titans_inner_of(m_cfg);
  for (int h = 0; h < m_cfg.heads; ++h) {
    const TitansHeadInputs<S> in = titans_head_inputs(m_cfg, m_params, *c, h);
    c->o.middleCols(h * d, d) =
        titans_chunked<S>(in.q, in.k, in.v, in.w, in.b, in.theta, in.alpha, in.eta, M0, inner).o;
  }
  out = titans_back<S>(m_cfg, m_params, x, *c);
  return c;
}

template <class S>
void TitansLayer<S>::backward(const LayerCache& cache, ConstMatRef<S> dOut, SequenceLayer<S>& grads,
                              Mat<S>& dx) const {
  auto* c = dynamic_cast<const TitansCache<S>*>(&cache);
  auto* gl = dynamic_cast<TitansLayer<S>*>(&grads);
  if (!c || !gl) bad_titans("backward() was given the cache or gradient of another layer type");
  TitansParams<S>& g = gl->m_params;
  const TitansParams<S>& p = m_params;
  const int D = m_cfg.width, H = m_cfg.heads, d = m_cfg.head_dim();
  const Eigen::Index T = c->x.rows();
  const S eps = S(m_cfg.l2_eps);
  // out = y · o_proj
  g.o_proj.noalias() += c->y.transpose() * dOut;
  const Mat<S> dy = dOut * p.o_proj.transpose();
  // y = n ⊙ silu(gate)
  Mat<S> sg, dsg;
  silu_array<S>(c->gate, sg);
  silu_grad_array<S>(c->gate, dsg);
  const Mat<S> dn = (dy.array() * sg.array()).matrix();
  const Mat<S> dgate = (dy.array() * c->n.array() * dsg.array()).matrix();
  g.g_proj.noalias() += c->x.transpose() * dgate;
  dx.noalias() = dgate * p.g_proj.transpose();
  // n_h = RMSNorm(o_h) ⊙ w, then the memory, head by head.
  Mat<S> dqn(T, D), dkn(T, D), dv(T, D), dtheta(T, H), dalpha(T, H), deta(T, H);
  const Mat<S> M0 = Mat<S>::Zero(d, d), dMf = Mat<S>::Zero(d, d);
  const TitansInner inner = titans_inner_of(m_cfg);
  Mat<S> doh;
  for (int h = 0; h < H; ++h) {
    rms_norm_backward<S>(c->o.middleCols(h * d, d), p.o_norm, dn.middleCols(h * d, d), doh,
                         g.o_norm, S(m_cfg.norm_eps));
    const TitansHeadInputs<S> in = titans_head_inputs(m_cfg, p, *c, h);
    const TitansGrads<S> gr = titans_backward_chunked<S>(in.q, in.k, in.v, in.w, in.b, in.theta,
                                                         in.alpha, in.eta, M0, inner, doh, dMf);
    dqn.middleCols(h * d, d) = gr.dq;
    dkn.middleCols(h * d, d) = gr.dk;
    dv.middleCols(h * d, d) = gr.dv;
    g.ln_weight.row(h) += gr.dw;
    g.ln_bias.row(h) += gr.db;
    dtheta.col(h) = gr.dtheta;
    dalpha.col(h) = gr.dalpha;
    deta.col(h) = gr.deta;
  }
  // θ = σ(z)/d, α = σ(z), η = σ(z): dz = d(out) · out · (1 − σ(z)). The lambdas below take the
  // layer input by reference, not the cache: a capture of the cache's file-local type makes GCC warn
  // (-Wsubobject-linkage) when this file is compiled inside a unity batch.
  const Mat<S>& x_in = c->x;
  auto through_gate = [&](const Mat<S>& dval, const Mat<S>& val, S scale, const Mat<S>& W,
                          Mat<S>& gW, RowVec<S>& gb) {
    const Mat<S> dz = (dval.array() * val.array() * (S(1) - val.array() / scale)).matrix();
    gW.noalias() += x_in.transpose() * dz;
    gb += dz.colwise().sum();
    dx.noalias() += dz * W.transpose();
  };
  through_gate(dtheta, c->theta, S(1) / S(d), p.theta_proj, g.theta_proj, g.theta_bias);
  through_gate(dalpha, c->alpha, S(1), p.alpha_proj, g.alpha_proj, g.alpha_bias);
  through_gate(deta, c->eta, S(1), p.eta_proj, g.eta_proj, g.eta_bias);
  // q̂ = q / sqrt(‖q‖² + ε),  k̂ = k / sqrt(‖k‖² + ε) per head
  Mat<S> dq, dk;
  l2_normalize_heads_backward<S>(c->bq.a, dqn, d, S(1), eps, dq);
  l2_normalize_heads_backward<S>(c->bk.a, dkn, d, S(1), eps, dk);
  // silu, the convolutions and the projections.
  short_conv_branch_backward<S>(x_in, p.q_proj, p.q_conv, c->bq, dq, g.q_proj, g.q_conv, dx);
  short_conv_branch_backward<S>(x_in, p.k_proj, p.k_conv, c->bk, dk, g.k_proj, g.k_conv, dx);
  short_conv_branch_backward<S>(x_in, p.v_proj, p.v_conv, c->bv, dv, g.v_proj, g.v_conv, dx);
}

template <class S>
std::unique_ptr<SequenceLayer<S>> TitansLayer<S>::zeros_like() const {
  return std::make_unique<TitansLayer<S>>(m_cfg, TitansParams<S>::zeros(m_cfg));
}

template <class S>
void TitansLayer<S>::for_each_param(const ParamVisitor<S>& f) {
  auto mat = [&f](Mat<S>& m, const char* name) { visit_param<S>(f, m, name); };
  auto row = [&f](RowVec<S>& m, const char* name) { visit_param<S>(f, m, name); };
  TitansParams<S>& p = m_params;
  mat(p.q_proj, "q_proj.weight");
  mat(p.k_proj, "k_proj.weight");
  mat(p.v_proj, "v_proj.weight");
  mat(p.q_conv, "q_conv1d.weight");
  mat(p.k_conv, "k_conv1d.weight");
  mat(p.v_conv, "v_conv1d.weight");
  mat(p.theta_proj, "theta_proj.weight");
  row(p.theta_bias, "theta_proj.bias");
  mat(p.alpha_proj, "alpha_proj.weight");
  row(p.alpha_bias, "alpha_proj.bias");
  mat(p.eta_proj, "eta_proj.weight");
  row(p.eta_bias, "eta_proj.bias");
  mat(p.ln_weight, "ttt_norm.weight");
  mat(p.ln_bias, "ttt_norm.bias");
  row(p.o_norm, "o_norm.weight");
  mat(p.g_proj, "g_proj.weight");
  mat(p.o_proj, "o_proj.weight");
}

template <class S>
double TitansLayer<S>::forward_flops(long T) const {
  const double D = m_cfg.width, H = m_cfg.heads, K = m_cfg.conv_kernel, d = m_cfg.head_dim();
  const double b = std::min<double>(m_cfg.mini_batch, double(std::max(1L, T)));
  const double proj = 2 * D * (5 * D + 3 * H);
  const double per_head = 2 * d * d + 2 * (2 * b * d) + 5 * 2 * d * d;
  return double(T) * (proj + 2 * 3 * D * K + H * per_head);
}

template struct TitansParams<float>;
template struct TitansParams<double>;
template class TitansLayer<float>;
template class TitansLayer<double>;

}  // namespace tttlab
