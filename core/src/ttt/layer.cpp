// The full TTT layer (see tttlab/ttt/layer.hpp).
#include "tttlab/ttt/layer.hpp"

#include <stdexcept>
#include <string>

#include "tttlab/nn/activations.hpp"
#include "tttlab/nn/causal_conv.hpp"
#include "tttlab/nn/rope.hpp"
#include "tttlab/ttt/ln_l2.hpp"

namespace tttlab {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument("TTT layer: " + msg); }

template <class S>
void expect_shape(const Mat<S>& m, Eigen::Index r, Eigen::Index c, const char* name) {
  if (m.rows() != r || m.cols() != c)
    bad(std::string(name) + " must be [" + std::to_string(r) + ", " + std::to_string(c) + "], got [" +
        std::to_string(m.rows()) + ", " + std::to_string(m.cols()) + "]");
}
template <class S>
void expect_size(const RowVec<S>& v, Eigen::Index n, const char* name) {
  if (v.size() != n)
    bad(std::string(name) + " must have " + std::to_string(n) + " entries, got " + std::to_string(v.size()));
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
  if (width <= 0) bad("width must be positive, got " + std::to_string(width));
  if (heads <= 0) bad("heads must be positive, got " + std::to_string(heads));
  if (width % heads != 0)
    bad("heads (" + std::to_string(heads) + ") must divide the width (" + std::to_string(width) + ")");
  if (inner.mini_batch <= 0) bad("mini-batch size b must be >= 1, got " + std::to_string(inner.mini_batch));
  if (inner.mlp_expansion <= 0) bad("mlp_expansion must be >= 1");
  if (rope && head_dim() % 2 != 0) bad("RoPE needs an even head dim, got " + std::to_string(head_dim()));
  if (share_qk && conv_kernel < 1) bad("conv_kernel must be >= 1");
  if (!(inner.ln_eps > 0)) bad("ln_eps must be positive");
  if (!(eta.base_lr >= 0)) bad("ttt_base_lr must be >= 0");
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
  if (static_cast<int>(W0.size()) != H) bad("W0 must hold one initial state per head");
  const InnerWeights<S> ref = InnerWeights<S>::zeros(cfg.inner, d);
  for (const auto& w : W0) {
    expect_shape(w.W1, ref.W1.rows(), ref.W1.cols(), "W1");
    expect_size(w.b1, ref.b1.size(), "b1");
    expect_shape(w.W2, ref.W2.rows(), ref.W2.cols(), "W2");
    expect_size(w.b2, ref.b2.size(), "b2");
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
    bad("input width " + std::to_string(x.cols()) + " does not match the layer width " +
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
  if (!st) bad("forward() was given the state of another layer type");
  return forward(*st, x, TTTForm::Dual);
}

template <class S>
Mat<S> TTTLayer<S>::forward(TTTLayerState<S>& state, ConstMatRef<S> x, TTTForm form,
                            const TTTLayerObserver<S>& observer) const {
  const auto& c = m_cfg;
  const auto& p = m_params;
  if (static_cast<int>(state.heads.size()) != c.heads) bad("state does not belong to this layer");
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
    layer_norm_rows<S>(O, p.post_norm_w, p.post_norm_b, S(1e-6), Y);
  else
    Y = std::move(O);
  if (c.use_gate) {
    const Mat<S> gate = (x * p.wg).unaryExpr([](S v) { return gelu_tanh(v); });
    Y = Y.cwiseProduct(gate);
  }
  return Y * p.wo;
}

template struct TTTLayerParams<float>;
template struct TTTLayerParams<double>;
template class TTTLayer<float>;
template class TTTLayer<double>;

}  // namespace tttlab
