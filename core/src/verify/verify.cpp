// The equivalence suite behind `tttlab verify` (see tttlab/verify.hpp).
#include "tttlab/verify.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <type_traits>

#include "tttlab/nn/rope.hpp"
#include "tttlab/ttt/ln_l2.hpp"

namespace tttlab {

void ErrorStats::merge(const ErrorStats& o) {
  max_abs = std::max(max_abs, o.max_abs);
  max_rel = std::max(max_rel, o.max_rel);
}

ErrorStats compare(const Mat<double>& a, const Mat<double>& ref) {
  ErrorStats e;
  if (a.rows() != ref.rows() || a.cols() != ref.cols()) {
    e.max_abs = e.max_rel = std::numeric_limits<double>::infinity();
    return e;
  }
  if (a.size() == 0) return e;
  e.max_abs = (a - ref).cwiseAbs().maxCoeff();
  const double scale = ref.cwiseAbs().maxCoeff();
  e.max_rel = scale > 0 ? e.max_abs / scale : e.max_abs;
  if (!std::isfinite(e.max_abs)) e.max_abs = e.max_rel = std::numeric_limits<double>::infinity();
  return e;
}

namespace {

using Mt64 = std::mt19937_64;

double normal(Mt64& rng) { return std::normal_distribution<double>(0.0, 1.0)(rng); }

template <class S>
Mat<S> randn(Eigen::Index r, Eigen::Index c, double std, Mt64& rng) {
  Mat<S> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = S(std * normal(rng));
  return m;
}
template <class S>
RowVec<S> randn_row(Eigen::Index n, double std, Mt64& rng) {
  RowVec<S> v(n);
  for (Eigen::Index i = 0; i < n; ++i) v(i) = S(std * normal(rng));
  return v;
}

template <class S>
Mat<double> to_double(const Mat<S>& m) {
  return m.template cast<double>();
}
template <class S>
Mat<double> to_double(const RowVec<S>& v) {
  return Mat<double>(v.template cast<double>());
}

template <class S>
ErrorStats compare_weights(const InnerWeights<S>& a, const InnerWeights<double>& ref) {
  ErrorStats e = compare(to_double(a.W1), ref.W1);
  e.merge(compare(to_double(a.b1), Mat<double>(ref.b1)));
  e.merge(compare(to_double(a.W2), ref.W2));
  e.merge(compare(to_double(a.b2), Mat<double>(ref.b2)));
  return e;
}

// Compares two layer states through the weights in effect now (base − τ·acc) and the position.
template <class S>
ErrorStats compare_states(const TTTLayerState<S>& a, const TTTLayerState<double>& ref,
                          const Vec<S>& tau_a, const Vec<double>& tau_ref) {
  ErrorStats e;
  if (a.heads.size() != ref.heads.size()) {
    e.max_abs = e.max_rel = std::numeric_limits<double>::infinity();
    return e;
  }
  for (size_t h = 0; h < a.heads.size(); ++h) {
    if (a.heads[h].pos != ref.heads[h].pos) {
      e.max_abs = e.max_rel = std::numeric_limits<double>::infinity();
      return e;
    }
    e.merge(compare_weights(a.heads[h].current_weights(tau_a), ref.heads[h].current_weights(tau_ref)));
  }
  return e;
}

CheckResult make_result(std::string name, const ErrorStats& e, double threshold) {
  CheckResult r;
  r.name = std::move(name);
  r.max_abs_err = e.max_abs;
  r.max_rel_err = e.max_rel;
  r.threshold = threshold;
  r.passed = std::isfinite(e.max_abs) && e.max_abs <= threshold;
  return r;
}

template <class S>
Mat<S> random_input(Eigen::Index T, Eigen::Index D, Mt64& rng) {
  return randn<S>(T, D, 1.0, rng);
}

const char* model_name(InnerModel m) { return m == InnerModel::Linear ? "linear" : "mlp"; }

constexpr int k_seq_len = 50;  // not a multiple of 7 or 16: the last mini-batch is short

// -- primal vs dual, fp64 ---------------------------------------------------------------------------
CheckResult check_primal_vs_dual(InnerModel model, int d, int b, std::uint64_t seed) {
  const TTTLayerConfig cfg = mamba_layer_config(model, d, b);
  TTTLayer<double> layer(cfg, random_layer_params<double>(cfg, seed));
  Mt64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  const Mat<double> x = random_input<double>(k_seq_len, cfg.width, rng);
  auto sd = layer.start(), sp = layer.start();
  auto& st_dual = static_cast<TTTLayerState<double>&>(*sd);
  auto& st_primal = static_cast<TTTLayerState<double>&>(*sp);
  const Mat<double> yd = layer.forward(st_dual, x, TTTForm::Dual);
  const Mat<double> yp = layer.forward(st_primal, x, TTTForm::Primal);
  const Vec<double> tau = token_index_scale<double>(cfg.eta, layer.params().token_idx_offset);
  ErrorStats e = compare(yp, yd);
  e.merge(compare_states(st_primal, st_dual, tau, tau));
  return make_result(std::string("primal-vs-dual/") + model_name(model) + "/d" + std::to_string(d) +
                         "/b" + std::to_string(b) + "/fp64",
                     e, 1e-12);
}

// -- fp32 vs fp64 ----------------------------------------------------------------------------------
CheckResult check_fp32(InnerModel model, int d, int b, std::uint64_t seed) {
  const TTTLayerConfig cfg = mamba_layer_config(model, d, b);
  TTTLayer<double> l64(cfg, random_layer_params<double>(cfg, seed));
  TTTLayer<float> l32(cfg, random_layer_params<float>(cfg, seed));
  Mt64 rng(seed ^ 0x51ed2701ULL);
  const Mat<double> x = random_input<double>(k_seq_len, cfg.width, rng);
  const Mat<double> y64 = l64.forward(x);
  const Mat<float> y32 = l32.forward(Mat<float>(x.cast<float>()));
  // Outputs are O(1) (the o_proj of a LayerNorm'd signal); float rounding through ~50 tokens of
  // state updates stays far below 1e-4.
  return make_result(std::string("fp32-vs-fp64/") + model_name(model) + "/d" + std::to_string(d) +
                         "/b" + std::to_string(b),
                     compare(to_double(y32), y64), 1e-4);
}

// -- prefill / decode ---------------------------------------------------------------------------------
CheckResult check_prefill_decode(InnerModel model, int d, int b, std::uint64_t seed) {
  const TTTLayerConfig cfg = mamba_layer_config(model, d, b);
  TTTLayer<double> layer(cfg, random_layer_params<double>(cfg, seed));
  Mt64 rng(seed ^ 0x2545f4914f6cdd1dULL);
  const Eigen::Index T = k_seq_len;
  const Mat<double> x = random_input<double>(T, cfg.width, rng);
  const Vec<double> tau = token_index_scale<double>(cfg.eta, layer.params().token_idx_offset);

  // Reference: one dual pass.
  auto s_ref = layer.start();
  auto& ref = static_cast<TTTLayerState<double>&>(*s_ref);
  const Mat<double> y_ref = layer.forward(ref, x, TTTForm::Dual);

  // Split prefill at points that fall mid-mini-batch, then decode one token at a time.
  auto s_split = layer.start();
  auto& split = static_cast<TTTLayerState<double>&>(*s_split);
  Mat<double> y(T, cfg.width);
  const Eigen::Index a = 13, c = 37;
  y.topRows(a) = layer.forward(split, x.topRows(a), TTTForm::Dual);
  y.middleRows(a, c - a) = layer.forward(split, x.middleRows(a, c - a), TTTForm::Dual);
  for (Eigen::Index t = c; t < T; ++t)
    y.row(t) = layer.forward(split, x.row(t), TTTForm::Primal);
  ErrorStats e = compare(y, y_ref);
  e.merge(compare_states(split, ref, tau, tau));

  // States at every mini-batch boundary: primal decode from the start against dual chunks that
  // end exactly at the boundaries.
  auto s_dec = layer.start(), s_chunk = layer.start();
  auto& dec = static_cast<TTTLayerState<double>&>(*s_dec);
  auto& chunk = static_cast<TTTLayerState<double>&>(*s_chunk);
  for (Eigen::Index t0 = 0; t0 < T; t0 += b) {
    const Eigen::Index m = std::min<Eigen::Index>(b, T - t0);
    const Mat<double> yc = layer.forward(chunk, x.middleRows(t0, m), TTTForm::Dual);
    Mat<double> yd(m, cfg.width);
    for (Eigen::Index i = 0; i < m; ++i) yd.row(i) = layer.forward(dec, x.row(t0 + i), TTTForm::Primal);
    e.merge(compare(yd, y_ref.middleRows(t0, m)));
    e.merge(compare(yc, y_ref.middleRows(t0, m)));
    e.merge(compare_states(dec, chunk, tau, tau));
  }
  return make_result(std::string("prefill-decode/") + model_name(model) + "/d" + std::to_string(d) +
                         "/b" + std::to_string(b),
                     e, 1e-12);
}

// -- LN + L2 gradient vs finite differences ------------------------------------------------------------
CheckResult check_ln_l2_grad(int d, std::uint64_t seed) {
  Mt64 rng(seed ^ 0x1234567ULL);
  const int n = 4;
  const Mat<double> Z = randn<double>(n, d, 2.0, rng), R = randn<double>(n, d, 1.0, rng);
  const RowVec<double> gamma = randn_row<double>(d, 0.2, rng).array() + 1.0;
  const RowVec<double> beta = randn_row<double>(d, 0.2, rng);
  const double eps = InnerOptions{}.ln_eps;  // the engine's default inner LayerNorm ε
  Mat<double> G;
  ln_l2_grad<double>(Z, R, gamma, beta, eps, G);
  Mat<double> fd(n, d);
  const double h = 1e-6;  // central-difference step
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) {
      RowVec<double> zp = Z.row(i), zm = Z.row(i);
      zp(j) += h;
      zm(j) -= h;
      fd(i, j) = (ln_l2_loss<double>(zp, R.row(i), gamma, beta, eps, true) -
                  ln_l2_loss<double>(zm, R.row(i), gamma, beta, eps, true)) /
                 (2 * h);
    }
  // Central differences: truncation O(h²) plus rounding ≈ ε·ℓ/h, ℓ = O(d).
  return make_result("ln-l2-grad-vs-finite-diff/d" + std::to_string(d), compare(G, fd), 1e-7);
}

// -- Theorem 1: linear attention -----------------------------------------------------------------------
CheckResult check_linear_attention(int d, std::uint64_t seed) {
  const int H = 2, D = H * d, T = 40;
  TTTLayerConfig cfg = TTTLayerConfig::linear_attention_equivalent(D, H, T);
  TTTLayerParams<double> p = random_layer_params<double>(cfg, seed);
  for (auto& w : p.W0) w.set_zero();
  TTTLayer<double> layer(cfg, p);
  Mt64 rng(seed ^ 0xabcdefULL);
  const Mat<double> x = random_input<double>(T, D, rng);
  const Mat<double> y = layer.forward(x);
  const Mat<double> Q = x * p.wq, K = x * p.wk, V = x * p.wv;
  Mat<double> Z(T, D);
  for (int h = 0; h < H; ++h) {
    const Mat<double> A = (Q.middleCols(h * d, d) * K.middleCols(h * d, d).transpose())
                              .template triangularView<Eigen::Lower>();
    Z.middleCols(h * d, d) = A * V.middleCols(h * d, d);
  }
  return make_result("linear-attention-limit/d" + std::to_string(d), compare(y, Z * p.wo), 1e-12);
}

// -- Delta rule ---------------------------------------------------------------------------------------
CheckResult check_delta_rule(int d, std::uint64_t seed) {
  Mt64 rng(seed ^ 0xdeadbeefULL);
  const int T = 40;
  InnerOptions opt;
  opt.mini_batch = 1;
  opt.layer_norm = opt.residual = opt.bias = false;
  Mat<double> Q = randn<double>(T, d, 1.0, rng), K = randn<double>(T, d, 1.0, rng),
              V = randn<double>(T, d, 1.0, rng);
  K.rowwise().normalize();  // L2-normalised keys keep the recurrence stable, as in DeltaNet
  Vec<double> beta(T);
  for (int t = 0; t < T; ++t) beta(t) = std::uniform_real_distribution<double>(0.1, 0.9)(rng);
  InnerWeights<double> w0 = InnerWeights<double>::zeros(opt, d);
  w0.W1 = randn<double>(d, d, 0.3, rng);
  InnerHeadParams<double> hp;
  hp.ln_weight = RowVec<double>::Ones(d);
  hp.ln_bias = RowVec<double>::Zero(d);
  hp.tau = Vec<double>::Ones(1);
  InnerState<double> st = InnerState<double>::start(w0);
  Mat<double> out;
  inner_forward_dual<double>(opt, hp, Q, K, V, beta, st, out);
  // S_t = S_{t−1} + k_tᵀ (β_t (v_t − k_t S_{t−1})),  o_t = q_t S_t
  Mat<double> S = w0.W1, ref(T, d);
  for (int t = 0; t < T; ++t) {
    const RowVec<double> k = K.row(t);
    S += k.transpose() * (beta(t) * (V.row(t) - k * S));
    ref.row(t) = Q.row(t) * S;
  }
  return make_result("delta-rule-limit/d" + std::to_string(d), compare(out, ref), 1e-12);
}

// -- RoPE reset -------------------------------------------------------------------------------------
CheckResult check_rope(int d, std::uint64_t seed) {
  Mt64 rng(seed ^ 0x777ULL);
  const int b = 16, T = 3 * b, H = 2;
  Mat<double> X(T, H * d);
  const Mat<double> block = randn<double>(b, H * d, 1.0, rng);
  for (int m = 0; m < 3; ++m) X.middleRows(m * b, b) = block;  // raw rows repeat every b tokens
  std::vector<long> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = t % b;
  Mat<double> Y = X;
  rope_apply<double>(Y, H, pos, 1e4);
  ErrorStats e = compare(Y.middleRows(b, b), Y.topRows(b));
  e.merge(compare(Y.middleRows(2 * b, b), Y.topRows(b)));
  // Against the complex-multiply definition: (x_{2m} + i x_{2m+1}) · e^{i p θ_m}.
  Mat<double> ref(T, H * d);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h)
      for (int m = 0; m < d / 2; ++m) {
        const std::complex<double> z(X(t, h * d + 2 * m), X(t, h * d + 2 * m + 1));
        const double phi = double(pos[t]) * std::pow(1e4, -2.0 * m / d);
        const std::complex<double> r = z * std::polar(1.0, phi);
        ref(t, h * d + 2 * m) = r.real();
        ref(t, h * d + 2 * m + 1) = r.imag();
      }
  e.merge(compare(Y, ref));
  return make_result("rope-reset/d" + std::to_string(d), e, 1e-13);
}

}  // namespace

template <class S>
TTTLayerParams<S> random_layer_params(const TTTLayerConfig& cfg, std::uint64_t seed) {
  Mt64 rng(seed);
  const int D = cfg.width, H = cfg.heads, d = cfg.head_dim();
  auto draw = [&rng] { return normal(rng); };
  // Start from the official initialisation in double (so float and double see the same numbers) ...
  TTTLayerParams<double> p = TTTLayerParams<double>::init(cfg, draw);
  // ... then scale up and perturb everything that init leaves at a special value.
  const double proj = 1.0 / std::sqrt(double(D));
  p.wq = randn<double>(D, D, proj, rng);
  if (!cfg.share_qk) p.wk = randn<double>(D, D, proj, rng);
  p.wv = randn<double>(D, D, proj, rng);
  p.wo = randn<double>(D, D, proj, rng);
  if (cfg.use_gate) p.wg = randn<double>(D, D, proj, rng);
  if (cfg.share_qk) {
    p.conv_q_b = randn_row<double>(D, 0.1, rng);
    p.conv_k_b = randn_row<double>(D, 0.1, rng);
  }
  p.lr_w = randn<double>(H, D, proj, rng);
  p.lr_b = randn_row<double>(H, 0.5, rng);
  for (Eigen::Index i = 0; i < p.token_idx_offset.size(); ++i)
    p.token_idx_offset(i) = 0.3 * normal(rng) / double(i + 1);
  p.ttt_norm_w = Mat<double>::Ones(H, d) + randn<double>(H, d, 0.2, rng);
  p.ttt_norm_b = randn<double>(H, d, 0.2, rng);
  p.post_norm_w = RowVec<double>::Ones(D) + randn_row<double>(D, 0.2, rng);
  p.post_norm_b = randn_row<double>(D, 0.2, rng);
  for (auto& w : p.W0) {
    w.W1 = randn<double>(w.W1.rows(), w.W1.cols(), 1.0 / std::sqrt(double(w.W1.rows())), rng);
    w.b1 = randn_row<double>(w.b1.size(), 0.1, rng);
    if (w.W2.size()) {
      w.W2 = randn<double>(w.W2.rows(), w.W2.cols(), 1.0 / std::sqrt(double(w.W2.rows())), rng);
      w.b2 = randn_row<double>(w.b2.size(), 0.1, rng);
    }
  }
  if constexpr (std::is_same_v<S, double>) {
    return p;
  } else {
    TTTLayerParams<S> q;
    q.wq = p.wq.cast<S>();
    q.wk = p.wk.cast<S>();
    q.wv = p.wv.cast<S>();
    q.wo = p.wo.cast<S>();
    q.wg = p.wg.cast<S>();
    q.conv_q_w = p.conv_q_w.cast<S>();
    q.conv_k_w = p.conv_k_w.cast<S>();
    q.conv_q_b = p.conv_q_b.cast<S>();
    q.conv_k_b = p.conv_k_b.cast<S>();
    q.lr_w = p.lr_w.cast<S>();
    q.lr_b = p.lr_b.cast<S>();
    q.token_idx_offset = p.token_idx_offset.cast<S>();
    q.ttt_norm_w = p.ttt_norm_w.cast<S>();
    q.ttt_norm_b = p.ttt_norm_b.cast<S>();
    q.post_norm_w = p.post_norm_w.cast<S>();
    q.post_norm_b = p.post_norm_b.cast<S>();
    for (const auto& w : p.W0) {
      InnerWeights<S> v;
      v.W1 = w.W1.cast<S>();
      v.b1 = w.b1.cast<S>();
      v.W2 = w.W2.cast<S>();
      v.b2 = w.b2.cast<S>();
      q.W0.push_back(std::move(v));
    }
    return q;
  }
}

template TTTLayerParams<float> random_layer_params<float>(const TTTLayerConfig&, std::uint64_t);
template TTTLayerParams<double> random_layer_params<double>(const TTTLayerConfig&, std::uint64_t);

std::vector<CheckResult> run_verify_suite(const VerifyOptions& opt) {
  std::vector<CheckResult> out;
  std::uint64_t stream = opt.seed;
  auto next_seed = [&stream] {
    // splitmix64: distinct, well-mixed seeds for every check from one user seed.
    std::uint64_t z = (stream += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  auto add = [&](CheckResult r) {
    if (opt.on_check) opt.on_check(r);
    out.push_back(std::move(r));
  };
  for (InnerModel model : {InnerModel::Linear, InnerModel::MLP})
    for (int d : {16, 32, 64})
      for (int b : {1, 7, 16, k_seq_len}) add(check_primal_vs_dual(model, d, b, next_seed()));
  for (InnerModel model : {InnerModel::Linear, InnerModel::MLP})
    for (int d : {16, 64})
      for (int b : {1, 16}) add(check_fp32(model, d, b, next_seed()));
  for (InnerModel model : {InnerModel::Linear, InnerModel::MLP})
    for (int b : {7, 16}) add(check_prefill_decode(model, 16, b, next_seed()));
  for (int d : {16, 64}) add(check_ln_l2_grad(d, next_seed()));
  for (int d : {16, 64}) add(check_linear_attention(d, next_seed()));
  add(check_delta_rule(16, next_seed()));
  add(check_rope(16, next_seed()));
  return out;
}

TTTLayerConfig mamba_layer_config(InnerModel model, int d, int b, int heads) {
  TTTLayerConfig c;
  c.heads = heads;
  c.width = heads * d;
  c.inner.model = model;
  c.inner.mini_batch = b;
  c.eta.base_lr = model == InnerModel::Linear ? 1.0 : 0.1;
  c.share_qk = true;
  c.use_gate = true;
  return c;
}

}  // namespace tttlab
