// LaCT as a sequence layer (see tttlab/seq/lact_layer.hpp; the block's equations and its backward
// are docs/MATH.md §11.10, "LaCT as a layer").
#include "tttlab/seq/lact_layer.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "short_conv_branch.hpp"
#include "tttlab/fastweight/lact.hpp"
#include "tttlab/nn/activation_arrays.hpp"
#include "tttlab/nn/attention.hpp"
#include "tttlab/nn/norms.hpp"
#include "tttlab/nn/rope.hpp"
#include "tttlab/seq/mamba2_layer.hpp"

namespace tttlab {
namespace {

using namespace seq_detail;

[[noreturn]] void bad_lact(const std::string& msg) {
  throw std::invalid_argument("lact layer: " + msg);
}

constexpr double k_lact_l2_eps = 1e-5;  // LaCT's l2_norm: u / (‖u‖ + 1e-5)

template <class S>
struct LactStream : SequenceState {
  std::vector<LactStreamState<S>> heads;  // per fast head
  KvCache<S> window;                      // the attention's last W − 1 keys (after RoPE), values
};

// What backward needs, all [T, ·] with the heads side by side in the columns.
template <class S>
struct LactCache : LayerCache {
  Mat<S> x;           // input [T, D]
  Mat<S> q, k, v;     // x W_qkv split [T, D] each
  Mat<S> qa, ka;      // RoPE(q), RoPE(k): the attention's queries and keys
  Mat<S> qt, kt;      // q̃, k̃: scaled and shifted
  Mat<S> qs, ks, vs;  // silu(q̃), silu(k̃), silu(v)
  Mat<S> qf, kf;      // the fast weights' queries and keys (L2, then RoPE)
  Mat<S> lr_z;        // x W_lr + b_lr + softplus⁻¹(base) [T, 3 H_f]
  Mat<S> lr;          // softplus(lr_z)
  Mat<S> mom;         // [T, H_f] (use_momentum)
  Mat<S> of;          // the fast weights' output [T, D]
  Mat<S> n;           // per-head RMSNorm(o_f) ⊙ w [T, D]
  Mat<S> sz;          // x W_s + b_s [T, H_f]
  Mat<S> o;           // o_a + y_f, o_proj's input [T, D]
};

std::vector<long> lact_positions(long start, Eigen::Index T) {
  std::vector<long> p(static_cast<size_t>(T));
  for (Eigen::Index t = 0; t < T; ++t) p[static_cast<size_t>(t)] = start + t;
  return p;
}

// u / (‖u‖ + ε) per fast head of d columns.
template <class S>
void lact_l2_heads(const Mat<S>& u, int d, Mat<S>& out) {
  const Eigen::Index H = u.cols() / d;
  out.resize(u.rows(), u.cols());
  for (Eigen::Index t = 0; t < u.rows(); ++t)
    for (Eigen::Index h = 0; h < H; ++h) {
      const auto s = u.row(t).segment(h * d, d);
      out.row(t).segment(h * d, d) = s / (s.norm() + S(k_lact_l2_eps));
    }
}

// Its backward: du = g/(n + ε) − u (u·g) / (n (n + ε)²), n = ‖u‖ (g/ε at u = 0).
template <class S>
void lact_l2_heads_backward(const Mat<S>& u, const Mat<S>& g, int d, Mat<S>& du) {
  const Eigen::Index H = u.cols() / d;
  du.resize(u.rows(), u.cols());
  const S eps = S(k_lact_l2_eps);
  for (Eigen::Index t = 0; t < u.rows(); ++t)
    for (Eigen::Index h = 0; h < H; ++h) {
      const auto us = u.row(t).segment(h * d, d);
      const auto gs = g.row(t).segment(h * d, d);
      const S n = us.norm(), ne = n + eps;
      if (n > S(0))
        du.row(t).segment(h * d, d) = gs / ne - us * (us.dot(gs) / (n * ne * ne));
      else
        du.row(t).segment(h * d, d) = gs / ne;
    }
}

// The front of the block, shared by both forms: everything up to the fast weights' and the
// attention's inputs, the rates and the momentum. Positions start at `pos0`.
template <class S>
void lact_front(const LactLayerConfig& cfg, const LactParams<S>& p, ConstMatRef<S> x, long pos0,
                LactCache<S>& c) {
  const int D = cfg.width, Ha = cfg.attn_heads, df = cfg.fw_head_dim();
  const Eigen::Index T = x.rows();
  const Mat<S> P = x * p.qkv;
  c.q = P.leftCols(D);
  c.k = P.middleCols(D, D);
  c.v = P.rightCols(D);
  const std::vector<long> pos = lact_positions(pos0, T);
  c.qa = c.q;
  c.ka = c.k;
  rope_apply<S>(c.qa, Ha, pos, cfg.rope_theta);
  rope_apply<S>(c.ka, Ha, pos, cfg.rope_theta);
  c.qt = (c.q.array().rowwise() * p.qk_scale.col(0).transpose().array()).rowwise() +
         p.qk_offset.col(0).transpose().array();
  c.kt = (c.k.array().rowwise() * p.qk_scale.col(1).transpose().array()).rowwise() +
         p.qk_offset.col(1).transpose().array();
  silu_array<S>(c.qt, c.qs);
  silu_array<S>(c.kt, c.ks);
  silu_array<S>(c.v, c.vs);
  lact_l2_heads<S>(c.qs, df, c.qf);
  lact_l2_heads<S>(c.ks, df, c.kf);
  rope_apply<S>(c.qf, Ha, pos, cfg.rope_theta);
  rope_apply<S>(c.kf, Ha, pos, cfg.rope_theta);
  const S base = S(std::log(std::expm1(cfg.base_lr)));  // softplus⁻¹(base_lr)
  c.lr_z.noalias() = x * p.lr_proj;
  c.lr_z.rowwise() += p.lr_bias;
  c.lr_z.array() += base;
  c.lr = c.lr_z.unaryExpr([](S z) { return S(mamba2_softplus(double(z))); });
  if (cfg.use_momentum) {
    c.mom.noalias() = x * p.momentum_proj;
    c.mom.rowwise() += p.momentum_bias;
    c.mom = c.mom.unaryExpr([](S z) { return seq_sigmoid(z); });
  }
  c.sz.noalias() = x * p.scale_proj;
  c.sz.rowwise() += p.scale_bias;
}

// The back of the block from c.of and the attention's output: the per-head RMSNorm, the output scale,
// the sum and o_proj. Fills c.n and c.o.
template <class S>
Mat<S> lact_back(const LactLayerConfig& cfg, const LactParams<S>& p, const Mat<S>& oa,
                 LactCache<S>& c) {
  const int Hf = cfg.lact_heads, df = cfg.fw_head_dim();
  const Eigen::Index T = c.of.rows();
  c.n.resize(T, cfg.width);
  Mat<S> nh, sc;
  silu_array<S>(c.sz, sc);
  c.o = oa;
  for (int h = 0; h < Hf; ++h) {
    rms_norm_forward<S>(c.of.middleCols(h * df, df), p.ttt_norm, nh, S(cfg.norm_eps));
    c.n.middleCols(h * df, df) = nh;
    c.o.middleCols(h * df, df) += (nh.array().colwise() * sc.col(h).array()).matrix();
  }
  return c.o * p.o_proj;
}

// The fast weights' per-head inputs, copied out of the cache.
template <class S>
struct LactHeadInputs {
  Mat<S> q, k, v;
  Vec<S> lr0, lr1, lr2, m;
  LactWeights<S> w;
};
template <class S>
LactHeadInputs<S> lact_head_inputs(const LactLayerConfig& cfg, const LactParams<S>& p,
                                   const LactCache<S>& c, int h) {
  const int df = cfg.fw_head_dim(), dh = cfg.fw_hidden();
  LactHeadInputs<S> in;
  in.q = c.qf.middleCols(h * df, df);
  in.k = c.kf.middleCols(h * df, df);
  in.v = c.vs.middleCols(h * df, df);
  in.lr0 = c.lr.col(3 * h);
  in.lr1 = c.lr.col(3 * h + 1);
  in.lr2 = c.lr.col(3 * h + 2);
  if (cfg.use_momentum) in.m = c.mom.col(h);
  in.w.w0 = p.w0.middleRows(h * dh, dh);
  in.w.w1 = p.w1.middleRows(h * df, df);
  in.w.w2 = p.w2.middleRows(h * dh, dh);
  return in;
}

template <class S>
void lact_check(const LactLayerConfig& cfg, const LactParams<S>& p) {
  cfg.validate();
  auto shape = [](const auto& m, Eigen::Index r, Eigen::Index c, const char* name) {
    require_param_shape("lact", m.rows(), m.cols(), r, c, name);
  };
  const int D = cfg.width, Hf = cfg.lact_heads, df = cfg.fw_head_dim(), dh = cfg.fw_hidden();
  const int mh = cfg.use_momentum ? Hf : 0, md = cfg.use_momentum ? D : 0;
  shape(p.qkv, D, 3 * D, "qkv.weight");
  shape(p.qk_scale, D, 2, "qk_scale");
  shape(p.qk_offset, D, 2, "qk_offset");
  shape(p.w0, Hf * dh, df, "w0");
  shape(p.w1, Hf * df, dh, "w1");
  shape(p.w2, Hf * dh, df, "w2");
  shape(p.lr_proj, D, 3 * Hf, "lr_proj.weight");
  shape(p.lr_bias, 1, 3 * Hf, "lr_proj.bias");
  shape(p.momentum_proj, md, mh, "momentum_proj.0.weight");
  shape(p.momentum_bias, 1, mh, "momentum_proj.0.bias");
  shape(p.scale_proj, D, Hf, "ttt_scale_proj.weight");
  shape(p.scale_bias, 1, Hf, "ttt_scale_proj.bias");
  shape(p.ttt_norm, 1, df, "ttt_norm.weight");
  shape(p.o_proj, D, D, "o_proj.weight");
}

}  // namespace

void LactLayerConfig::validate() const {
  auto positive = [](int v, const char* name) {
    if (v <= 0) bad_lact(std::string(name) + " must be positive, got " + std::to_string(v));
  };
  positive(width, "width");
  positive(attn_heads, "attn_heads");
  positive(lact_heads, "lact_heads");
  positive(inter_multi, "inter_multi");
  positive(chunk_size, "chunk_size");
  positive(window, "window");
  if (width % attn_heads != 0)
    bad_lact("attn_heads (" + std::to_string(attn_heads) + ") must divide width (" +
             std::to_string(width) + ")");
  if (width % lact_heads != 0)
    bad_lact("lact_heads (" + std::to_string(lact_heads) + ") must divide width (" +
             std::to_string(width) + ")");
  if (attn_head_dim() % 2 != 0)
    bad_lact("RoPE needs an even attention head dim, got " + std::to_string(attn_head_dim()));
  for (auto [v, name] :
       {std::pair{rope_theta, "rope_theta"}, {base_lr, "base_lr"}, {norm_eps, "norm_eps"}})
    if (!(v > 0) || !std::isfinite(v)) bad_lact(std::string(name) + " must be positive and finite");
}

template <class S>
LactParams<S> LactParams<S>::init(const LactLayerConfig& cfg, double std, Rng& rng) {
  cfg.validate();
  const int D = cfg.width, Hf = cfg.lact_heads, df = cfg.fw_head_dim(), dh = cfg.fw_hidden();
  LactParams p = zeros(cfg);
  p.qkv = seq_normal_mat<S>(D, 3 * D, std, rng);
  p.lr_proj = seq_normal_mat<S>(D, 3 * Hf, std, rng);
  if (cfg.use_momentum) p.momentum_proj = seq_normal_mat<S>(D, Hf, std, rng);
  p.scale_proj = seq_normal_mat<S>(D, Hf, std, rng);
  p.qk_scale.setOnes();
  p.w0 = seq_normal_mat<S>(Hf * dh, df, 1.0 / std::sqrt(double(df)), rng);
  p.w2 = seq_normal_mat<S>(Hf * dh, df, 1.0 / std::sqrt(double(df)), rng);
  p.w1 = seq_normal_mat<S>(Hf * df, dh, 1.0 / std::sqrt(double(dh)), rng);
  p.ttt_norm.setOnes();
  p.o_proj = seq_normal_mat<S>(D, D, std, rng);
  return p;
}

template <class S>
LactParams<S> LactParams<S>::zeros(const LactLayerConfig& cfg) {
  cfg.validate();
  const int D = cfg.width, Hf = cfg.lact_heads, df = cfg.fw_head_dim(), dh = cfg.fw_hidden();
  const int mh = cfg.use_momentum ? Hf : 0, md = cfg.use_momentum ? D : 0;
  LactParams p;
  p.qkv = Mat<S>::Zero(D, 3 * D);
  p.qk_scale = p.qk_offset = Mat<S>::Zero(D, 2);
  p.w0 = p.w2 = Mat<S>::Zero(Hf * dh, df);
  p.w1 = Mat<S>::Zero(Hf * df, dh);
  p.lr_proj = Mat<S>::Zero(D, 3 * Hf);
  p.lr_bias = RowVec<S>::Zero(3 * Hf);
  p.momentum_proj = Mat<S>::Zero(md, mh);
  p.momentum_bias = RowVec<S>::Zero(mh);
  p.scale_proj = Mat<S>::Zero(D, Hf);
  p.scale_bias = RowVec<S>::Zero(Hf);
  p.ttt_norm = RowVec<S>::Zero(df);
  p.o_proj = Mat<S>::Zero(D, D);
  return p;
}

template <class S>
LactLayer<S>::LactLayer(LactLayerConfig cfg, LactParams<S> params)
    : m_cfg(cfg), m_params(std::move(params)) {
  lact_check(m_cfg, m_params);
}

template <class S>
std::unique_ptr<SequenceState> LactLayer<S>::start() const {
  auto st = std::make_unique<LactStream<S>>();
  const int df = m_cfg.fw_head_dim(), dh = m_cfg.fw_hidden();
  for (int h = 0; h < m_cfg.lact_heads; ++h) {
    LactWeights<S> w;
    w.w0 = m_params.w0.middleRows(h * dh, dh);
    w.w1 = m_params.w1.middleRows(h * df, df);
    w.w2 = m_params.w2.middleRows(h * dh, dh);
    st->heads.push_back(
        lact_stream_start<S>(w, m_cfg.chunk_size, m_cfg.use_muon, m_cfg.use_momentum));
  }
  return st;
}

template <class S>
Mat<S> LactLayer<S>::forward(SequenceState& state, ConstMatRef<S> x) const {
  auto* st = dynamic_cast<LactStream<S>*>(&state);
  if (!st) bad_lact("forward() was given the state of another layer type");
  if (x.cols() != m_cfg.width)
    bad_lact("input width " + std::to_string(x.cols()) + " differs from the layer's " +
             std::to_string(m_cfg.width));
  const int df = m_cfg.fw_head_dim();
  LactCache<S> c;
  lact_front<S>(m_cfg, m_params, x, st->tokens, c);
  Mat<S> oa;
  windowed_attention_forward_cached<S>(c.qa, c.ka, c.v, m_cfg.attn_heads, m_cfg.window, st->window,
                                       oa);
  c.of.resize(x.rows(), m_cfg.width);
  for (int h = 0; h < m_cfg.lact_heads; ++h) {
    const LactHeadInputs<S> in = lact_head_inputs(m_cfg, m_params, c, h);
    c.of.middleCols(h * df, df) =
        lact_stream<S>(st->heads[h], in.q, in.k, in.v, in.lr0, in.lr1, in.lr2, in.m);
  }
  st->tokens += x.rows();
  return lact_back<S>(m_cfg, m_params, oa, c);
}

template <class S>
std::unique_ptr<LayerCache> LactLayer<S>::forward_train(ConstMatRef<S> x, Mat<S>& out) const {
  if (x.cols() != m_cfg.width)
    bad_lact("input width " + std::to_string(x.cols()) + " differs from the layer's " +
             std::to_string(m_cfg.width));
  const int df = m_cfg.fw_head_dim();
  auto c = std::make_unique<LactCache<S>>();
  c->x = x;
  lact_front<S>(m_cfg, m_params, x, 0, *c);
  Mat<S> oa;
  windowed_attention_forward<S>(c->qa, c->ka, c->v, m_cfg.attn_heads, m_cfg.window, oa);
  c->of.resize(x.rows(), m_cfg.width);
  for (int h = 0; h < m_cfg.lact_heads; ++h) {
    const LactHeadInputs<S> in = lact_head_inputs(m_cfg, m_params, *c, h);
    c->of.middleCols(h * df, df) = lact_forward<S>(in.q, in.k, in.v, in.lr0, in.lr1, in.lr2, in.m,
                                                   in.w, m_cfg.chunk_size, m_cfg.use_muon)
                                       .o;
  }
  out = lact_back<S>(m_cfg, m_params, oa, *c);
  return c;
}

template <class S>
void LactLayer<S>::backward(const LayerCache& cache, ConstMatRef<S> dOut, SequenceLayer<S>& grads,
                            Mat<S>& dx) const {
  auto* c = dynamic_cast<const LactCache<S>*>(&cache);
  auto* gl = dynamic_cast<LactLayer<S>*>(&grads);
  if (!c || !gl) bad_lact("backward() was given the cache or gradient of another layer type");
  LactParams<S>& g = gl->m_params;
  const LactParams<S>& p = m_params;
  const int D = m_cfg.width, Ha = m_cfg.attn_heads, Hf = m_cfg.lact_heads;
  const int df = m_cfg.fw_head_dim(), dh = m_cfg.fw_hidden();
  const Eigen::Index T = c->x.rows();
  const std::vector<long> pos = lact_positions(0, T);
  // out = o · o_proj,  o = o_a + y_f
  g.o_proj.noalias() += c->o.transpose() * dOut;
  const Mat<S> dout = dOut * p.o_proj.transpose();
  // The attention branch: o_a = SWA(RoPE(q), RoPE(k), v).
  Mat<S> dq, dk, dv;
  windowed_attention_backward<S>(c->qa, c->ka, c->v, Ha, m_cfg.window, dout, dq, dk, dv);
  rope_backward<S>(dq, Ha, pos, m_cfg.rope_theta);
  rope_backward<S>(dk, Ha, pos, m_cfg.rope_theta);
  // The fast branch, head by head: y_f,h = RMSNorm(o_f,h) ⊙ w · silu(sz_h).
  Mat<S> sc, dsc_act;
  silu_array<S>(c->sz, sc);
  silu_grad_array<S>(c->sz, dsc_act);
  Mat<S> dqf(T, D), dkf(T, D), dvs(T, D), dlr(T, 3 * Hf), dmom, dsz(T, Hf);
  if (m_cfg.use_momentum) dmom.resize(T, Hf);
  Mat<S> dof;
  for (int h = 0; h < Hf; ++h) {
    const auto dyh = dout.middleCols(h * df, df);
    const auto nh = c->n.middleCols(h * df, df);
    dsz.col(h) = (dyh.array() * nh.array()).rowwise().sum() * dsc_act.col(h).array();
    const Mat<S> dn = (dyh.array().colwise() * sc.col(h).array()).matrix();
    rms_norm_backward<S>(c->of.middleCols(h * df, df), p.ttt_norm, dn, dof, g.ttt_norm,
                         S(m_cfg.norm_eps));
    const LactHeadInputs<S> in = lact_head_inputs(m_cfg, p, *c, h);
    const LactGrads<S> gr =
        lact_backward<S>(in.q, in.k, in.v, in.lr0, in.lr1, in.lr2, in.m, in.w, m_cfg.chunk_size,
                         m_cfg.use_muon, dof, LactWeights<S>{});
    dqf.middleCols(h * df, df) = gr.dq;
    dkf.middleCols(h * df, df) = gr.dk;
    dvs.middleCols(h * df, df) = gr.dv;
    dlr.col(3 * h) = gr.dlr0;
    dlr.col(3 * h + 1) = gr.dlr1;
    dlr.col(3 * h + 2) = gr.dlr2;
    if (m_cfg.use_momentum) dmom.col(h) = gr.dmomentum;
    g.w0.middleRows(h * dh, dh) += gr.dW.w0;
    g.w1.middleRows(h * df, df) += gr.dW.w1;
    g.w2.middleRows(h * dh, dh) += gr.dW.w2;
  }
  // The projections of x: the output scale, the rates (softplus), the momentum (sigmoid).
  const Mat<S>& x = c->x;
  g.scale_proj.noalias() += x.transpose() * dsz;
  g.scale_bias += dsz.colwise().sum();
  dx.noalias() = dsz * p.scale_proj.transpose();
  const Mat<S> dlz =
      (dlr.array() *
       c->lr_z.unaryExpr([](S z) { return S(mamba2_softplus_grad(double(z))); }).array())
          .matrix();
  g.lr_proj.noalias() += x.transpose() * dlz;
  g.lr_bias += dlz.colwise().sum();
  dx.noalias() += dlz * p.lr_proj.transpose();
  if (m_cfg.use_momentum) {
    const Mat<S> dmz = (dmom.array() * c->mom.array() * (S(1) - c->mom.array())).matrix();
    g.momentum_proj.noalias() += x.transpose() * dmz;
    g.momentum_bias += dmz.colwise().sum();
    dx.noalias() += dmz * p.momentum_proj.transpose();
  }
  // q_f = RoPE(L2(silu(q̃))), k_f likewise; v_f = silu(v).
  rope_backward<S>(dqf, Ha, pos, m_cfg.rope_theta);
  rope_backward<S>(dkf, Ha, pos, m_cfg.rope_theta);
  Mat<S> dqs, dks, act;
  lact_l2_heads_backward<S>(c->qs, dqf, df, dqs);
  lact_l2_heads_backward<S>(c->ks, dkf, df, dks);
  silu_grad_array<S>(c->qt, act);
  const Mat<S> dqt = (dqs.array() * act.array()).matrix();
  silu_grad_array<S>(c->kt, act);
  const Mat<S> dkt = (dks.array() * act.array()).matrix();
  silu_grad_array<S>(c->v, act);
  dv.array() += dvs.array() * act.array();
  // q̃ = q ⊙ s_q + b_q,  k̃ = k ⊙ s_k + b_k
  g.qk_scale.col(0) += (dqt.array() * c->q.array()).colwise().sum().transpose().matrix();
  g.qk_scale.col(1) += (dkt.array() * c->k.array()).colwise().sum().transpose().matrix();
  g.qk_offset.col(0) += dqt.colwise().sum().transpose();
  g.qk_offset.col(1) += dkt.colwise().sum().transpose();
  dq.array() += (dqt.array().rowwise() * p.qk_scale.col(0).transpose().array());
  dk.array() += (dkt.array().rowwise() * p.qk_scale.col(1).transpose().array());
  // [q, k, v] = x W_qkv
  Mat<S> dP(T, 3 * D);
  dP << dq, dk, dv;
  g.qkv.noalias() += x.transpose() * dP;
  dx.noalias() += dP * p.qkv.transpose();
}

template <class S>
std::unique_ptr<SequenceLayer<S>> LactLayer<S>::zeros_like() const {
  return std::make_unique<LactLayer<S>>(m_cfg, LactParams<S>::zeros(m_cfg));
}

template <class S>
void LactLayer<S>::for_each_param(const ParamVisitor<S>& f) {
  auto mat = [&f](Mat<S>& m, const char* name) { visit_param<S>(f, m, name); };
  auto row = [&f](RowVec<S>& m, const char* name) { visit_param<S>(f, m, name); };
  // The initial fast weights per head, "w0[h]": the checkpoint stacks them as [H_f, rows, cols].
  auto per_head = [&f, this](Mat<S>& m, const char* name) {
    const Eigen::Index r = m.rows() / m_cfg.lact_heads;
    for (int h = 0; h < m_cfg.lact_heads; ++h)
      f(Eigen::Map<Mat<S>>(m.data() + h * r * m.cols(), r, m.cols()),
        std::string(name) + "[" + std::to_string(h) + "]");
  };
  LactParams<S>& p = m_params;
  mat(p.qkv, "qkv.weight");
  mat(p.qk_scale, "qk_scale");
  mat(p.qk_offset, "qk_offset");
  per_head(p.w0, "w0");
  per_head(p.w1, "w1");
  per_head(p.w2, "w2");
  mat(p.lr_proj, "lr_proj.weight");
  row(p.lr_bias, "lr_proj.bias");
  if (m_cfg.use_momentum) {
    mat(p.momentum_proj, "momentum_proj.0.weight");
    row(p.momentum_bias, "momentum_proj.0.bias");
  }
  mat(p.scale_proj, "ttt_scale_proj.weight");
  row(p.scale_bias, "ttt_scale_proj.bias");
  row(p.ttt_norm, "ttt_norm.weight");
  mat(p.o_proj, "o_proj.weight");
}

template <class S>
double LactLayer<S>::forward_flops(long T) const {
  const double D = m_cfg.width, Hf = m_cfg.lact_heads, df = m_cfg.fw_head_dim();
  const double dh = m_cfg.fw_hidden();
  const double W = std::min<double>(m_cfg.window, double(std::max(1L, T)));
  const double proj = 2 * D * (3 * D + 3 * Hf + Hf + Hf + D);
  const double attention = 2 * 2 * W * D;
  const double fast = Hf * 9 * 2 * df * dh;
  return double(T) * (proj + attention + fast);
}

template struct LactParams<float>;
template struct LactParams<double>;
template class LactLayer<float>;
template class LactLayer<double>;

}  // namespace tttlab
