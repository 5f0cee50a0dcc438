// The full TTT layer (see tttlab/ttt/layer.hpp).
#include "tttlab/ttt/layer.hpp"

#include <stdexcept>
#include <string>

#include "tttlab/nn/activations.hpp"
#include "tttlab/nn/causal_conv.hpp"
#include "tttlab/nn/gelu_gate.hpp"
#include "tttlab/nn/rope.hpp"
#include "tttlab/ttt/inner_backward.hpp"
#include "tttlab/ttt/ln_l2.hpp"

namespace tttlab {
namespace {

[[noreturn]] void bad_layer(const std::string& msg) { throw std::invalid_argument("TTT layer: " + msg); }

template <class S>
void expect_shape(const Mat<S>& m, Eigen::Index r, Eigen::Index c, const char* name) {
  if (m.rows() != r || m.cols() != c)
    bad_layer(std::string(name) + " must be [" + std::to_string(r) + ", " + std::to_string(c) + "], got [" +
        std::to_string(m.rows()) + ", " + std::to_string(m.cols()) + "]");
}
template <class S>
void expect_size(const RowVec<S>& v, Eigen::Index n, const char* name) {
  if (v.size() != n)
    bad_layer(std::string(name) + " must have " + std::to_string(n) + " entries, got " + std::to_string(v.size()));
}

template <class S>
Mat<S> normal_mat(Eigen::Index r, Eigen::Index c, double std, const std::function<double()>& normal) {
  Mat<S> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = S(std * normal());
  return m;
}

}  // namespace

// ---- Config -----------------------------------------------------------------------------------------

void TTTLayerConfig::validate() const {
  if (width <= 0) bad_layer("width must be positive, got " + std::to_string(width));
  if (heads <= 0) bad_layer("heads must be positive, got " + std::to_string(heads));
  if (width % heads != 0)
    bad_layer("heads (" + std::to_string(heads) + ") must divide the width (" + std::to_string(width) + ")");
  if (inner.mini_batch <= 0) bad_layer("mini-batch size b must be >= 1, got " + std::to_string(inner.mini_batch));
  if (inner.mlp_expansion <= 0) bad_layer("mlp_expansion must be >= 1");
  if (rope && head_dim() % 2 != 0) bad_layer("RoPE needs an even head dim, got " + std::to_string(head_dim()));
  if (share_qk && conv_kernel < 1) bad_layer("conv_kernel must be >= 1");
  if (checkpoint_group < 0) bad_layer("checkpoint_group must be >= 0");
  if (!(inner.ln_eps > 0)) bad_layer("ln_eps must be positive");
  if (!(post_norm_eps > 0)) bad_layer("post_norm_eps must be positive");
  if (!(eta.base_lr >= 0)) bad_layer("ttt_base_lr must be >= 0");
}

TTTLayerConfig TTTLayerConfig::linear_attention_equivalent(int width, int heads, int seq_len) {
  TTTLayerConfig c;
  c.width = width;
  c.heads = heads;
  c.inner.model = InnerModel::Linear;
  c.inner.mini_batch = seq_len;
  c.inner.layer_norm = false;
  c.inner.residual = false;
  c.inner.bias = false;
  c.eta.gate = EtaGate::Fixed;
  c.eta.token_index = false;
  c.eta.base_lr = c.head_dim();  // λ = η_base / d = 1 (the ½-loss convention: η = 1)
  c.rope = false;
  c.post_norm = false;
  c.use_gate = false;
  c.share_qk = false;
  return c;
}

// ---- Params -----------------------------------------------------------------------------------------

template <class S>
TTTLayerParams<S> TTTLayerParams<S>::init(const TTTLayerConfig& cfg,
                                          const std::function<double()>& normal) {
  cfg.validate();
  const int D = cfg.width, H = cfg.heads, d = cfg.head_dim(), K = cfg.conv_kernel;
  const int b = cfg.inner.mini_batch;
  const double s = 0.02;
  TTTLayerParams p;
  p.wq = normal_mat<S>(D, D, s, normal);
  p.wk = cfg.share_qk ? Mat<S>() : normal_mat<S>(D, D, s, normal);
  p.wv = normal_mat<S>(D, D, s, normal);
  p.wo = normal_mat<S>(D, D, s, normal);
  p.wg = cfg.use_gate ? normal_mat<S>(D, D, s, normal) : Mat<S>();
  if (cfg.share_qk) {
    const double conv_std = 1.0 / std::sqrt(double(K));
    p.conv_q_w = normal_mat<S>(D, K, conv_std, normal);
    p.conv_k_w = normal_mat<S>(D, K, conv_std, normal);
    p.conv_q_b = RowVec<S>::Zero(D);
    p.conv_k_b = RowVec<S>::Zero(D);
  }
  p.lr_w = normal_mat<S>(H, D, s, normal);
  p.lr_b = RowVec<S>::Zero(H);
  p.token_idx_offset = RowVec<S>::Zero(b);
  p.ttt_norm_w = Mat<S>::Ones(H, d);
  p.ttt_norm_b = Mat<S>::Zero(H, d);
  p.post_norm_w = RowVec<S>::Ones(D);
  p.post_norm_b = RowVec<S>::Zero(D);
  p.W0.resize(H);
  for (int h = 0; h < H; ++h) {
    InnerWeights<S> w = InnerWeights<S>::zeros(cfg.inner, d);
    w.W1 = normal_mat<S>(w.W1.rows(), w.W1.cols(), s, normal);
    if (cfg.inner.model == InnerModel::MLP) w.W2 = normal_mat<S>(w.W2.rows(), w.W2.cols(), s, normal);
    p.W0[h] = std::move(w);
  }
  return p;
}

template <class S>
void TTTLayerParams<S>::check_shapes(const TTTLayerConfig& cfg) const {
  cfg.validate();
  const int D = cfg.width, H = cfg.heads, d = cfg.head_dim(), K = cfg.conv_kernel;
  expect_shape(wq, D, D, "q_proj");
  if (!cfg.share_qk) expect_shape(wk, D, D, "k_proj");
  expect_shape(wv, D, D, "v_proj");
  expect_shape(wo, D, D, "o_proj");
  if (cfg.use_gate) expect_shape(wg, D, D, "g_proj");
  if (cfg.share_qk) {
    expect_shape(conv_q_w, D, K, "conv_q.weight");
    expect_shape(conv_k_w, D, K, "conv_k.weight");
    expect_size(conv_q_b, D, "conv_q.bias");
    expect_size(conv_k_b, D, "conv_k.bias");
  }
  expect_shape(lr_w, H, D, "learnable_ttt_lr_weight");
  expect_size(lr_b, H, "learnable_ttt_lr_bias");
  expect_size(token_idx_offset, cfg.inner.mini_batch, "learnable_token_idx");
  expect_shape(ttt_norm_w, H, d, "ttt_norm_weight");
  expect_shape(ttt_norm_b, H, d, "ttt_norm_bias");
  expect_size(post_norm_w, D, "post_norm.weight");
  expect_size(post_norm_b, D, "post_norm.bias");
  if (static_cast<int>(W0.size()) != H) bad_layer("W0 must hold one initial state per head");
  const InnerWeights<S> ref = InnerWeights<S>::zeros(cfg.inner, d);
  for (const auto& w : W0) {
    expect_shape(w.W1, ref.W1.rows(), ref.W1.cols(), "W1");
    expect_size(w.b1, ref.b1.size(), "b1");
    expect_shape(w.W2, ref.W2.rows(), ref.W2.cols(), "W2");
    expect_size(w.b2, ref.b2.size(), "b2");
  }
}

template <class S>
TTTLayerParams<S> TTTLayerParams<S>::zeros(const TTTLayerConfig& cfg) {
  TTTLayerParams p = init(cfg, [] { return 0.0; });
  p.for_each(cfg, [](Eigen::Map<Mat<S>> m, const std::string&) { m.setZero(); });
  return p;
}

template <class S>
void TTTLayerParams<S>::for_each(const TTTLayerConfig& cfg,
                                 const std::function<void(Eigen::Map<Mat<S>>, const std::string&)>& f) {
  auto visit = [&f](auto& m, const std::string& name) {
    if (m.size() == 0) return;
    f(Eigen::Map<Mat<S>>(m.data(), m.rows(), m.cols()), name);
  };
  visit(wq, "q_proj.weight");
  if (!cfg.share_qk) visit(wk, "k_proj.weight");
  visit(wv, "v_proj.weight");
  visit(wo, "o_proj.weight");
  if (cfg.use_gate) visit(wg, "g_proj.weight");
  if (cfg.share_qk) {
    visit(conv_q_w, "conv_q.weight");
    visit(conv_q_b, "conv_q.bias");
    visit(conv_k_w, "conv_k.weight");
    visit(conv_k_b, "conv_k.bias");
  }
  visit(lr_w, "learnable_ttt_lr_weight");
  visit(lr_b, "learnable_ttt_lr_bias");
  visit(token_idx_offset, "learnable_token_idx");
  visit(ttt_norm_w, "ttt_norm_weight");
  visit(ttt_norm_b, "ttt_norm_bias");
  visit(post_norm_w, "post_norm.weight");
  visit(post_norm_b, "post_norm.bias");
  for (size_t h = 0; h < W0.size(); ++h) {
    // Appended rather than `"[" + std::to_string(h)`: GCC 12 warns falsely (-Wrestrict) on that form.
    std::string idx = "[";
    idx += std::to_string(h);
    idx += ']';
    visit(W0[h].W1, "W1" + idx);
    if (cfg.inner.bias) visit(W0[h].b1, "b1" + idx);
    visit(W0[h].W2, "W2" + idx);
    if (cfg.inner.bias) visit(W0[h].b2, "b2" + idx);
  }
}

// ---- Layer ------------------------------------------------------------------------------------------

template <class S>
TTTLayer<S>::TTTLayer(TTTLayerConfig cfg, TTTLayerParams<S> params)
    : m_cfg(std::move(cfg)), m_params(std::move(params)) {
  m_params.check_shapes(m_cfg);
}

template <class S>
std::string TTTLayer<S>::name() const {
  return m_cfg.inner.model == InnerModel::Linear ? "ttt-linear" : "ttt-mlp";
}

template <class S>
std::unique_ptr<SequenceState> TTTLayer<S>::start() const {
  auto st = std::make_unique<TTTLayerState<S>>();
  if (m_cfg.share_qk) st->conv_history = Mat<S>::Zero(m_cfg.conv_kernel - 1, m_cfg.width);
  for (const auto& w0 : m_params.W0) st->heads.push_back(InnerState<S>::start(w0));
  return st;
}

template <class S>
TTTLayerInputs<S> TTTLayer<S>::inputs(TTTLayerState<S>& state, ConstMatRef<S> x) const {
  const auto& c = m_cfg;
  const auto& p = m_params;
  if (x.cols() != c.width)
    bad_layer("input width " + std::to_string(x.cols()) + " does not match the layer width " +
        std::to_string(c.width));
  const Eigen::Index T = x.rows();
  const int d = c.head_dim(), b = c.inner.mini_batch;
  TTTLayerInputs<S> in;
  if (c.share_qk) {
    const Mat<S> u = x * p.wq;
    Mat<S> hist_k = state.conv_history;  // both convs read the same u stream
    causal_conv_forward<S>(u, p.conv_q_w, p.conv_q_b, state.conv_history, in.XQ);
    causal_conv_forward<S>(u, p.conv_k_w, p.conv_k_b, hist_k, in.XK);
  } else {
    in.XQ = x * p.wq;
    in.XK = x * p.wk;
  }
  in.XV = x * p.wv;
  if (c.rope) {
    std::vector<long> pos(T);
    for (Eigen::Index t = 0; t < T; ++t) pos[t] = (state.tokens + t) % b;
    rope_apply<S>(in.XQ, c.heads, pos, c.rope_theta);
    rope_apply<S>(in.XK, c.heads, pos, c.rope_theta);
  }
  in.tau = token_index_scale<S>(c.eta, p.token_idx_offset);
  in.lambda.resize(c.heads);
  for (int h = 0; h < c.heads; ++h)
    in.lambda[h] = per_token_lr<S>(c.eta, x, p.lr_w.row(h), p.lr_b(h), d);
  return in;
}

template <class S>
Mat<S> TTTLayer<S>::forward(SequenceState& state, ConstMatRef<S> x) const {
  auto* st = dynamic_cast<TTTLayerState<S>*>(&state);
  if (!st) bad_layer("forward() was given the state of another layer type");
  // One token (decoding) takes the primal step: no b×b products, and the state is exactly the
  // decoder's (base, accumulators, position). Longer chunks take the dual form. Both compute the
  // same function (tests/core/test_ttt_inner.cpp).
  return forward(*st, x, x.rows() == 1 ? TTTForm::Primal : TTTForm::Dual);
}

template <class S>
Mat<S> TTTLayer<S>::forward(TTTLayerState<S>& state, ConstMatRef<S> x, TTTForm form,
                            const TTTLayerObserver<S>& observer) const {
  const auto& c = m_cfg;
  const auto& p = m_params;
  if (static_cast<int>(state.heads.size()) != c.heads) bad_layer("state does not belong to this layer");
  const Eigen::Index T = x.rows();
  const int d = c.head_dim();
  const TTTLayerInputs<S> in = inputs(state, x);

  Mat<S> O(T, c.width);
  for (int h = 0; h < c.heads; ++h) {
    InnerHeadParams<S> hp;
    hp.ln_weight = p.ttt_norm_w.row(h);
    hp.ln_bias = p.ttt_norm_b.row(h);
    hp.tau = in.tau;
    Mat<S> Oh;
    const auto Q = in.XQ.middleCols(h * d, d);
    const auto K = in.XK.middleCols(h * d, d);
    const auto V = in.XV.middleCols(h * d, d);
    if (form == TTTForm::Dual) {
      inner_forward_dual<S>(c.inner, hp, Q, K, V, in.lambda[h], state.heads[h], Oh);
    } else {
      InnerObserver<S> obs;
      if (observer) obs = [&observer, h](const InnerStepRecord<S>& r) { observer(h, r); };
      inner_forward_primal<S>(c.inner, hp, Q, K, V, in.lambda[h], state.heads[h], Oh, obs, &p.W0[h]);
    }
    O.middleCols(h * d, d) = Oh;
  }
  state.tokens += T;

  // Output path: post-norm, gate, o_proj.
  Mat<S> Y;
  if (c.post_norm)
    layer_norm_rows<S>(O, p.post_norm_w, p.post_norm_b, S(c.post_norm_eps), Y);
  else
    Y = std::move(O);
  if (c.use_gate) {
    GeluGateCache<S> gc;
    Mat<S> gated;
    gelu_gate_forward<S>(x, p.wg, Y, gated, gc);
    return gated * p.wo;
  }
  return Y * p.wo;
}

template <class S>
Mat<S> TTTLayer<S>::forward_train(ConstMatRef<S> x, TTTLayerCache<S>& cache) const {
  const auto& c = m_cfg;
  const auto& p = m_params;
  auto st_ptr = start();
  auto& st = static_cast<TTTLayerState<S>&>(*st_ptr);
  cache.x = x;
  if (c.share_qk) cache.u = x * p.wq;
  cache.in = inputs(st, x);
  const int d = c.head_dim();
  cache.O.resize(x.rows(), c.width);
  for (int h = 0; h < c.heads; ++h) {
    InnerHeadParams<S> hp{p.ttt_norm_w.row(h), p.ttt_norm_b.row(h), cache.in.tau};
    Mat<S> Oh;
    inner_forward_dual<S>(c.inner, hp, cache.in.XQ.middleCols(h * d, d), cache.in.XK.middleCols(h * d, d),
                          cache.in.XV.middleCols(h * d, d), cache.in.lambda[h], st.heads[h], Oh);
    cache.O.middleCols(h * d, d) = Oh;
  }
  if (c.post_norm)
    layer_norm_rows<S>(cache.O, p.post_norm_w, p.post_norm_b, S(c.post_norm_eps), cache.Y);
  else
    cache.Y = cache.O;
  if (c.use_gate) {
    Mat<S> gated;
    gelu_gate_forward<S>(x, p.wg, cache.Y, gated, cache.gate);
    return gated * p.wo;
  }
  return cache.Y * p.wo;
}

template <class S>
std::unique_ptr<LayerCache> TTTLayer<S>::forward_train(ConstMatRef<S> x, Mat<S>& y) const {
  auto cache = std::make_unique<TTTLayerCache<S>>();
  y = forward_train(x, *cache);
  return cache;
}

template <class S>
void TTTLayer<S>::backward(const LayerCache& cache, ConstMatRef<S> dY, SequenceLayer<S>& grads,
                           Mat<S>& dx) const {
  auto* c = dynamic_cast<const TTTLayerCache<S>*>(&cache);
  auto* g = dynamic_cast<TTTLayer<S>*>(&grads);
  if (!c || !g) bad_layer("backward() was given the cache or gradient of another layer type");
  backward(*c, dY, g->m_params, dx);
}

template <class S>
std::unique_ptr<SequenceLayer<S>> TTTLayer<S>::zeros_like() const {
  return std::make_unique<TTTLayer<S>>(m_cfg, TTTLayerParams<S>::zeros(m_cfg));
}

template <class S>
double TTTLayer<S>::forward_flops(long T) const {
  const double D = m_cfg.width, d = m_cfg.head_dim(), b = m_cfg.inner.mini_batch;
  const double projections = (m_cfg.share_qk ? 3 : 4) + (m_cfg.use_gate ? 1 : 0);
  double inner;
  if (m_cfg.inner.model == InnerModel::Linear) {
    inner = 6 * d * d + 4 * b * d;
  } else {
    const double h = m_cfg.inner.mlp_expansion * d;
    inner = 14 * d * h + 4 * b * d + 4 * b * h;
  }
  return double(T) * (projections * 2 * D * D + m_cfg.heads * inner);
}

template <class S>
void TTTLayer<S>::backward(const TTTLayerCache<S>& cache, ConstMatRef<S> dY, TTTLayerParams<S>& g,
                           Mat<S>& dx) const {
  const int checkpoint_group = m_cfg.checkpoint_group;
  const auto& c = m_cfg;
  const auto& p = m_params;
  const Mat<S>& x = cache.x;
  const Eigen::Index T = x.rows();
  const int d = c.head_dim(), b = c.inner.mini_batch;
  dx = Mat<S>::Zero(T, c.width);

  // y = Yg·Wo, Yg = gelu(x·Wg) ⊙ Y (the gate) or Y
  if (c.use_gate)
    g.wo.noalias() += (cache.gate.act.cwiseProduct(cache.Y)).transpose() * dY;
  else
    g.wo.noalias() += cache.Y.transpose() * dY;
  const Mat<S> dYg = dY * p.wo.transpose();
  Mat<S> dYpn;
  if (c.use_gate) {
    Mat<S> dx_gate;
    gelu_gate_backward<S>(x, p.wg, cache.Y, cache.gate, dYg, dx_gate, g.wg, dYpn);
    dx += dx_gate;
  } else {
    dYpn = dYg;
  }
  // Y = post_norm(O)
  Mat<S> dO;
  if (c.post_norm)
    layer_norm_rows_backward<S>(cache.O, p.post_norm_w, S(c.post_norm_eps), dYpn, dO, g.post_norm_w, g.post_norm_b);
  else
    dO = dYpn;

  // The inner loop of every head.
  Mat<S> dXQ(T, c.width), dXK(T, c.width), dXV(T, c.width);
  Vec<S> dtau = Vec<S>::Zero(b);
  for (int h = 0; h < c.heads; ++h) {
    InnerHeadParams<S> hp{p.ttt_norm_w.row(h), p.ttt_norm_b.row(h), cache.in.tau};
    InnerGrads<S> ig;
    inner_backward<S>(c.inner, hp, cache.in.XQ.middleCols(h * d, d), cache.in.XK.middleCols(h * d, d),
                      cache.in.XV.middleCols(h * d, d), cache.in.lambda[h], p.W0[h],
                      dO.middleCols(h * d, d), ig, checkpoint_group);
    dXQ.middleCols(h * d, d) = ig.dQ;
    dXK.middleCols(h * d, d) = ig.dK;
    dXV.middleCols(h * d, d) = ig.dV;
    dtau += ig.dtau;
    g.ttt_norm_w.row(h) += ig.dln_weight;
    g.ttt_norm_b.row(h) += ig.dln_bias;
    g.W0[h].W1 += ig.dW0.W1;
    g.W0[h].W2 += ig.dW0.W2;
    if (c.inner.bias) {
      g.W0[h].b1 += ig.dW0.b1;
      g.W0[h].b2 += ig.dW0.b2;
    }
    // λ = (η_base/d)·σ(x·θ_h + β_h):  dλ/du = λ·(1 − σ)
    if (c.eta.gate == EtaGate::Learned) {
      const Vec<S> lam = cache.in.lambda[h];
      const S scale = S(c.eta.base_lr) / S(d);
      const Vec<S> du = ig.dlambda.cwiseProduct(lam).cwiseProduct(
          (Vec<S>::Ones(T) - lam / (scale > 0 ? scale : S(1))));
      g.lr_w.row(h).noalias() += du.transpose() * x;
      g.lr_b(h) += du.sum();
      dx.noalias() += du * p.lr_w.row(h);
    }
  }
  // τ_i = max(1/i + δ_i, 0): the gradient passes where the clamp is inactive. With δ frozen
  // (token_index_learnable off) δ gets no gradient at all, so the optimiser never moves it.
  if (c.eta.token_index && c.eta.token_index_learnable)
    for (int i = 0; i < b; ++i)
      if (S(1) / S(i + 1) + p.token_idx_offset(i) > S(0)) g.token_idx_offset(i) += dtau(i);

  // RoPE, convs and projections.
  if (c.rope) {
    std::vector<long> pos(T);
    for (Eigen::Index t = 0; t < T; ++t) pos[t] = t % b;
    rope_backward<S>(dXQ, c.heads, pos, c.rope_theta);
    rope_backward<S>(dXK, c.heads, pos, c.rope_theta);
  }
  if (c.share_qk) {
    Mat<S> du_q, du_k;
    causal_conv_backward<S>(cache.u, p.conv_q_w, dXQ, du_q, g.conv_q_w, g.conv_q_b);
    causal_conv_backward<S>(cache.u, p.conv_k_w, dXK, du_k, g.conv_k_w, g.conv_k_b);
    const Mat<S> du = du_q + du_k;
    g.wq.noalias() += x.transpose() * du;
    dx.noalias() += du * p.wq.transpose();
  } else {
    g.wq.noalias() += x.transpose() * dXQ;
    g.wk.noalias() += x.transpose() * dXK;
    dx.noalias() += dXQ * p.wq.transpose() + dXK * p.wk.transpose();
  }
  g.wv.noalias() += x.transpose() * dXV;
  dx.noalias() += dXV * p.wv.transpose();
}

template struct TTTLayerParams<float>;
template struct TTTLayerParams<double>;
template class TTTLayer<float>;
template class TTTLayer<double>;

}  // namespace tttlab
