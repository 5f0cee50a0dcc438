// The attention baselines as sequence layers (see tttlab/seq/attention_layers.hpp). The maths lives
// in tttlab/nn/attention.hpp and tttlab/nn/linear_attention.hpp; this file adds the projections,
// RoPE, the stream states and the training caches.
#include "tttlab/seq/attention_layers.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include "tttlab/nn/attention.hpp"
#include "tttlab/nn/linear_attention.hpp"
#include "tttlab/nn/rope.hpp"

namespace tttlab {
namespace {

[[noreturn]] void bad_attention(const std::string& msg) { throw std::invalid_argument("attention layer: " + msg); }

template <class S>
Mat<S> normal_mat(Eigen::Index r, Eigen::Index c, double std, const std::function<double()>& normal) {
  Mat<S> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = S(std * normal());
  return m;
}

template <class S>
void check(const AttentionConfig& cfg, const AttentionParams<S>& p) {
  cfg.validate();
  for (const Mat<S>* m : {&p.wq, &p.wk, &p.wv, &p.wo})
    if (m->rows() != cfg.width || m->cols() != cfg.width)
      bad_attention("projections must be [" + std::to_string(cfg.width) + ", " + std::to_string(cfg.width) + "]");
}

template <class S>
void visit(AttentionParams<S>& p, const ParamVisitor<S>& f) {
  f(Eigen::Map<Mat<S>>(p.wq.data(), p.wq.rows(), p.wq.cols()), "q_proj.weight");
  f(Eigen::Map<Mat<S>>(p.wk.data(), p.wk.rows(), p.wk.cols()), "k_proj.weight");
  f(Eigen::Map<Mat<S>>(p.wv.data(), p.wv.rows(), p.wv.cols()), "v_proj.weight");
  f(Eigen::Map<Mat<S>>(p.wo.data(), p.wo.rows(), p.wo.cols()), "o_proj.weight");
}

// Gradients of the four projections given dQ, dK, dV (of the projected activations) and dZ (the
// input of o_proj); writes dx.
template <class S>
void projections_backward(const AttentionParams<S>& p, ConstMatRef<S> x, const Mat<S>& Z,
                          ConstMatRef<S> dY, const Mat<S>& dQ, const Mat<S>& dK, const Mat<S>& dV,
                          AttentionParams<S>& g, Mat<S>& dx) {
  g.wo.noalias() += Z.transpose() * dY;
  g.wq.noalias() += x.transpose() * dQ;
  g.wk.noalias() += x.transpose() * dK;
  g.wv.noalias() += x.transpose() * dV;
  dx.noalias() = dQ * p.wq.transpose();
  dx.noalias() += dK * p.wk.transpose();
  dx.noalias() += dV * p.wv.transpose();
}

template <class S>
struct LinearAttentionStreamT : SequenceState {
  LinearAttentionState<S> st;
};
template <class S>
struct SoftmaxAttentionStream : SequenceState {
  KvCache<S> kv;
};
template <class S>
struct AttentionCache : LayerCache {
  Mat<S> x, Q, K, V, Z;  // Q, K after RoPE (softmax); Z = input of o_proj
};

// A training cache holding x and its projections Q, K, V (before any RoPE).
template <class S>
std::unique_ptr<AttentionCache<S>> projected(const AttentionParams<S>& p, ConstMatRef<S> x) {
  auto c = std::make_unique<AttentionCache<S>>();
  c->x = x;
  c->Q = x * p.wq;
  c->K = x * p.wk;
  c->V = x * p.wv;
  return c;
}

// The cost of a forward of either layer over T tokens of width D: the four projections, and per head
// QKᵀ and A·V over the causal half, 2 · 2·(T²/2)·d = 2·T²·d, i.e. 2·T·D per token.
double attention_flops(long T, double D) { return double(T) * (4 * 2 * D * D + 2 * double(T) * D); }

std::vector<long> positions(long start, Eigen::Index T) {
  std::vector<long> pos(T);
  for (Eigen::Index t = 0; t < T; ++t) pos[t] = start + t;
  return pos;
}

}  // namespace

void AttentionConfig::validate() const {
  if (width <= 0 || heads <= 0) bad_attention("width and heads must be positive");
  if (width % heads != 0)
    bad_attention("heads (" + std::to_string(heads) + ") must divide the width (" + std::to_string(width) + ")");
  if (rope && (width / heads) % 2 != 0) bad_attention("RoPE needs an even head dim");
}

template <class S>
AttentionParams<S> AttentionParams<S>::init(const AttentionConfig& cfg,
                                            const std::function<double()>& normal) {
  cfg.validate();
  AttentionParams p;
  p.wq = normal_mat<S>(cfg.width, cfg.width, 0.02, normal);
  p.wk = normal_mat<S>(cfg.width, cfg.width, 0.02, normal);
  p.wv = normal_mat<S>(cfg.width, cfg.width, 0.02, normal);
  p.wo = normal_mat<S>(cfg.width, cfg.width, 0.02, normal);
  return p;
}

template <class S>
AttentionParams<S> AttentionParams<S>::zeros(const AttentionConfig& cfg) {
  return init(cfg, [] { return 0.0; });
}

// ---- Linear attention ------------------------------------------------------------------------------

template <class S>
LinearAttentionLayer<S>::LinearAttentionLayer(AttentionConfig cfg, AttentionParams<S> params)
    : m_cfg(cfg), m_params(std::move(params)) {
  m_cfg.rope = false;  // Theorem 1's configuration has no RoPE
  check(m_cfg, m_params);
}

template <class S>
std::unique_ptr<SequenceState> LinearAttentionLayer<S>::start() const {
  return std::make_unique<LinearAttentionStreamT<S>>();
}

template <class S>
Mat<S> LinearAttentionLayer<S>::forward(SequenceState& state, ConstMatRef<S> x) const {
  auto* st = dynamic_cast<LinearAttentionStreamT<S>*>(&state);
  if (!st) bad_attention("forward() was given the state of another layer type");
  const Mat<S> Q = x * m_params.wq, K = x * m_params.wk, V = x * m_params.wv;
  Mat<S> Z;
  linear_attention_chunk<S>(Q, K, V, m_cfg.heads, st->st, Z);
  st->tokens += x.rows();
  return Z * m_params.wo;
}

template <class S>
std::unique_ptr<LayerCache> LinearAttentionLayer<S>::forward_train(ConstMatRef<S> x, Mat<S>& y) const {
  auto c = projected<S>(m_params, x);
  linear_attention_forward<S>(c->Q, c->K, c->V, m_cfg.heads, c->Z);
  y = c->Z * m_params.wo;
  return c;
}

template <class S>
void LinearAttentionLayer<S>::backward(const LayerCache& cache, ConstMatRef<S> dY,
                                       SequenceLayer<S>& grads, Mat<S>& dx) const {
  auto* c = dynamic_cast<const AttentionCache<S>*>(&cache);
  auto* g = dynamic_cast<LinearAttentionLayer<S>*>(&grads);
  if (!c || !g) bad_attention("backward() was given the cache or gradient of another layer type");
  const Mat<S> dZ = dY * m_params.wo.transpose();
  Mat<S> dQ, dK, dV;
  linear_attention_backward<S>(c->Q, c->K, c->V, m_cfg.heads, dZ, dQ, dK, dV);
  projections_backward<S>(m_params, c->x, c->Z, dY, dQ, dK, dV, g->m_params, dx);
}

template <class S>
std::unique_ptr<SequenceLayer<S>> LinearAttentionLayer<S>::zeros_like() const {
  return std::make_unique<LinearAttentionLayer<S>>(m_cfg, AttentionParams<S>::zeros(m_cfg));
}

template <class S>
void LinearAttentionLayer<S>::for_each_param(const ParamVisitor<S>& f) {
  visit(m_params, f);
}

template <class S>
double LinearAttentionLayer<S>::forward_flops(long T) const {
  return attention_flops(T, m_cfg.width);
}

// ---- Softmax attention ---------------------------------------------------------------------------------

template <class S>
SoftmaxAttentionLayer<S>::SoftmaxAttentionLayer(AttentionConfig cfg, AttentionParams<S> params)
    : m_cfg(cfg), m_params(std::move(params)) {
  check(m_cfg, m_params);
}

template <class S>
std::unique_ptr<SequenceState> SoftmaxAttentionLayer<S>::start() const {
  return std::make_unique<SoftmaxAttentionStream<S>>();
}

template <class S>
Mat<S> SoftmaxAttentionLayer<S>::forward(SequenceState& state, ConstMatRef<S> x) const {
  auto* st = dynamic_cast<SoftmaxAttentionStream<S>*>(&state);
  if (!st) bad_attention("forward() was given the state of another layer type");
  Mat<S> Q = x * m_params.wq, K = x * m_params.wk;
  const Mat<S> V = x * m_params.wv;
  if (m_cfg.rope) {
    const auto pos = positions(st->tokens, x.rows());
    rope_apply<S>(Q, m_cfg.heads, pos, m_cfg.rope_theta);
    rope_apply<S>(K, m_cfg.heads, pos, m_cfg.rope_theta);
  }
  Mat<S> Z;
  causal_attention_forward_cached<S>(Q, K, V, m_cfg.heads, st->kv, Z);
  st->tokens += x.rows();
  return Z * m_params.wo;
}

template <class S>
std::unique_ptr<LayerCache> SoftmaxAttentionLayer<S>::forward_train(ConstMatRef<S> x, Mat<S>& y) const {
  auto c = projected<S>(m_params, x);
  if (m_cfg.rope) {
    const auto pos = positions(0, x.rows());
    rope_apply<S>(c->Q, m_cfg.heads, pos, m_cfg.rope_theta);
    rope_apply<S>(c->K, m_cfg.heads, pos, m_cfg.rope_theta);
  }
  causal_attention_forward<S>(c->Q, c->K, c->V, m_cfg.heads, c->Z);
  y = c->Z * m_params.wo;
  return c;
}

template <class S>
void SoftmaxAttentionLayer<S>::backward(const LayerCache& cache, ConstMatRef<S> dY,
                                        SequenceLayer<S>& grads, Mat<S>& dx) const {
  auto* c = dynamic_cast<const AttentionCache<S>*>(&cache);
  auto* g = dynamic_cast<SoftmaxAttentionLayer<S>*>(&grads);
  if (!c || !g) bad_attention("backward() was given the cache or gradient of another layer type");
  const Mat<S> dZ = dY * m_params.wo.transpose();
  Mat<S> dQ, dK, dV;
  causal_attention_backward<S>(c->Q, c->K, c->V, m_cfg.heads, dZ, dQ, dK, dV);
  if (m_cfg.rope) {
    const auto pos = positions(0, c->x.rows());
    rope_backward<S>(dQ, m_cfg.heads, pos, m_cfg.rope_theta);
    rope_backward<S>(dK, m_cfg.heads, pos, m_cfg.rope_theta);
  }
  projections_backward<S>(m_params, c->x, c->Z, dY, dQ, dK, dV, g->m_params, dx);
}

template <class S>
typename SoftmaxAttentionLayer<S>::Trace SoftmaxAttentionLayer<S>::trace(ConstMatRef<S> x) const {
  // Through forward_train itself, so a probe sees exactly what training and evaluation compute.
  Mat<S> y;
  const auto cache = forward_train(x, y);
  auto& c = static_cast<AttentionCache<S>&>(*cache);
  return Trace{std::move(c.Q), std::move(c.K), std::move(c.V), std::move(c.Z)};
}

template <class S>
std::unique_ptr<SequenceLayer<S>> SoftmaxAttentionLayer<S>::zeros_like() const {
  return std::make_unique<SoftmaxAttentionLayer<S>>(m_cfg, AttentionParams<S>::zeros(m_cfg));
}

template <class S>
void SoftmaxAttentionLayer<S>::for_each_param(const ParamVisitor<S>& f) {
  visit(m_params, f);
}

template <class S>
double SoftmaxAttentionLayer<S>::forward_flops(long T) const {
  return attention_flops(T, m_cfg.width);
}

template struct AttentionParams<float>;
template struct AttentionParams<double>;
template class LinearAttentionLayer<float>;
template class LinearAttentionLayer<double>;
template class SoftmaxAttentionLayer<float>;
template class SoftmaxAttentionLayer<double>;

}  // namespace tttlab
