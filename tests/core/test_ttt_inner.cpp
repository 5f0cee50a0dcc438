// The TTT engine against the oracles of docs/MATH.md §10 (2, 3, 4, 5, 10, 11, 15), in fp64
// with the thresholds stated there and in fp32 with looser, stated ones.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>

#include "tttlab/nn/rope.hpp"
#include "tttlab/ttt/eta.hpp"
#include "tttlab/ttt/inner.hpp"
#include "tttlab/ttt/layer.hpp"
#include "tttlab/verify.hpp"

namespace tttlab {
namespace {

template <class S>
Mat<S> randn(Eigen::Index r, Eigen::Index c, std::mt19937_64& rng, double std = 1.0) {
  std::normal_distribution<double> n(0.0, std);
  Mat<S> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = S(n(rng));
  return m;
}

template <class S>
TTTLayerState<S>& as_state(std::unique_ptr<SequenceState>& s) {
  return static_cast<TTTLayerState<S>&>(*s);
}

// ---- Oracle 2: dual == primal ------------------------------------------------------------------------

using DualPrimalParam = std::tuple<InnerModel, int /*d*/, int /*b*/, bool /*transformer form*/>;
class DualPrimal : public ::testing::TestWithParam<DualPrimalParam> {};

TEST_P(DualPrimal, OutputsAndStatesAgreeFp64) {
  const auto [model, d, b, transformer] = GetParam();
  TTTLayerConfig cfg = mamba_layer_config(model, d, b);
  if (transformer) cfg.share_qk = cfg.use_gate = false;
  TTTLayer<double> layer(cfg, random_layer_params<double>(cfg, 100 + d + b));
  std::mt19937_64 rng(7);
  const Mat<double> x = randn<double>(4 * 16 + 3, cfg.width, rng);  // ≥ 4 mini-batches, short tail
  auto sd = layer.start(), sp = layer.start();
  const Mat<double> yd = layer.forward(as_state<double>(sd), x, TTTForm::Dual);
  const Mat<double> yp = layer.forward(as_state<double>(sp), x, TTTForm::Primal);
  EXPECT_LT(compare(yp, yd).max_abs, 1e-13);
  const Vec<double> tau = token_index_scale<double>(cfg.eta, layer.params().token_idx_offset);
  for (int h = 0; h < cfg.heads; ++h) {
    const auto& a = as_state<double>(sp).heads[h];
    const auto& r = as_state<double>(sd).heads[h];
    ASSERT_EQ(a.pos, r.pos);
    EXPECT_LT(compare(a.base.W1, r.base.W1).max_abs, 1e-13);
    EXPECT_LT(compare(a.current_weights(tau).W1, r.current_weights(tau).W1).max_abs, 1e-13);
    EXPECT_LT(compare(Mat<double>(a.base.b1), Mat<double>(r.base.b1)).max_abs, 1e-13);
    if (model == InnerModel::MLP) {
      EXPECT_LT(compare(a.base.W2, r.base.W2).max_abs, 1e-13);
    }
  }
}

TEST_P(DualPrimal, OutputsAgreeFp32) {
  const auto [model, d, b, transformer] = GetParam();
  TTTLayerConfig cfg = mamba_layer_config(model, d, b);
  if (transformer) cfg.share_qk = cfg.use_gate = false;
  TTTLayer<float> layer(cfg, random_layer_params<float>(cfg, 200 + d + b));
  std::mt19937_64 rng(8);
  const Mat<float> x = randn<float>(67, cfg.width, rng);
  auto sd = layer.start(), sp = layer.start();
  const Mat<float> yd = layer.forward(as_state<float>(sd), x, TTTForm::Dual);
  const Mat<float> yp = layer.forward(as_state<float>(sp), x, TTTForm::Primal);
  // Both forms round differently (matrix products vs accumulators); outputs are O(1) and the
  // difference stays within a few hundred float ulps.
  EXPECT_LT(compare(yp.cast<double>(), yd.cast<double>()).max_abs, 2e-5);
}

INSTANTIATE_TEST_SUITE_P(
    AllShapes, DualPrimal,
    ::testing::Combine(::testing::Values(InnerModel::Linear, InnerModel::MLP),
                       ::testing::Values(16, 32, 64), ::testing::Values(1, 5, 16, 67),
                       ::testing::Bool()));

// The comparison must be able to fail: a dual form run with a different τ than the primal form
// is caught by a wide margin.
TEST(DualPrimalSensitivity, DetectsAWrongTokenIndexScale) {
  TTTLayerConfig cfg = mamba_layer_config(InnerModel::Linear, 16, 16);
  TTTLayerParams<double> p = random_layer_params<double>(cfg, 5);
  TTTLayer<double> good(cfg, p);
  p.token_idx_offset(3) += 0.05;
  TTTLayer<double> bad(cfg, p);
  std::mt19937_64 rng(9);
  const Mat<double> x = randn<double>(48, cfg.width, rng);
  auto s1 = good.start(), s2 = bad.start();
  const double err = compare(bad.forward(as_state<double>(s2), x, TTTForm::Dual),
                             good.forward(as_state<double>(s1), x, TTTForm::Primal))
                         .max_abs;
  EXPECT_GT(err, 1e-6);
}

// ---- Oracle 3: prefill / decode consistency ------------------------------------------------------------

class PrefillDecode : public ::testing::TestWithParam<std::tuple<InnerModel, int>> {};

TEST_P(PrefillDecode, AnySplitMatchesOneDualPass) {
  const auto [model, b] = GetParam();
  const TTTLayerConfig cfg = mamba_layer_config(model, 16, b);
  TTTLayer<double> layer(cfg, random_layer_params<double>(cfg, 31 + b));
  std::mt19937_64 rng(11);
  const int T = 45;
  const Mat<double> x = randn<double>(T, cfg.width, rng);
  auto s_ref = layer.start();
  const Mat<double> y_ref = layer.forward(as_state<double>(s_ref), x, TTTForm::Dual);
  const Vec<double> tau = token_index_scale<double>(cfg.eta, layer.params().token_idx_offset);

  // Several split schedules, starting offsets t mod b ≠ 0 included; the tail decodes token by token.
  for (const std::vector<int>& cuts : {std::vector<int>{1, 2, 3}, {5, 17, 30}, {b - 1, b + 1, 2 * b + 3},
                                       {0, 44}, {20, 21, 22}}) {
    auto s = layer.start();
    Mat<double> y(T, cfg.width);
    int t = 0;
    for (int c : cuts) {
      if (c <= t) continue;
      y.middleRows(t, c - t) = layer.forward(as_state<double>(s), x.middleRows(t, c - t), TTTForm::Dual);
      t = c;
    }
    for (; t < T; ++t) y.row(t) = layer.forward(as_state<double>(s), x.row(t), TTTForm::Primal);
    EXPECT_LT(compare(y, y_ref).max_abs, 1e-13) << "cuts at " << cuts[0] << "," << cuts[1];
    for (int h = 0; h < cfg.heads; ++h) {
      const auto& a = as_state<double>(s).heads[h];
      const auto& r = as_state<double>(s_ref).heads[h];
      EXPECT_EQ(a.pos, r.pos);
      EXPECT_LT(compare(a.current_weights(tau).W1, r.current_weights(tau).W1).max_abs, 1e-13);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PrefillDecode,
                         ::testing::Combine(::testing::Values(InnerModel::Linear, InnerModel::MLP),
                                            ::testing::Values(4, 7, 16)));

TEST(PrefillDecode, StatesMatchAtEveryMiniBatchBoundary) {
  for (InnerModel model : {InnerModel::Linear, InnerModel::MLP}) {
    const int b = 8, T = 40;
    const TTTLayerConfig cfg = mamba_layer_config(model, 16, b);
    TTTLayer<double> layer(cfg, random_layer_params<double>(cfg, 77));
    std::mt19937_64 rng(12);
    const Mat<double> x = randn<double>(T, cfg.width, rng);
    auto s_dual = layer.start(), s_dec = layer.start();
    for (int t0 = 0; t0 < T; t0 += b) {
      layer.forward(as_state<double>(s_dual), x.middleRows(t0, b), TTTForm::Dual);
      for (int i = 0; i < b; ++i) layer.forward(as_state<double>(s_dec), x.row(t0 + i), TTTForm::Primal);
      for (int h = 0; h < cfg.heads; ++h) {
        const auto& a = as_state<double>(s_dec).heads[h];
        const auto& r = as_state<double>(s_dual).heads[h];
        ASSERT_EQ(a.pos, 0);
        ASSERT_EQ(r.pos, 0);
        EXPECT_LT(compare(a.base.W1, r.base.W1).max_abs, 1e-13);
        EXPECT_LT(compare(Mat<double>(a.base.b1), Mat<double>(r.base.b1)).max_abs, 1e-13);
        if (model == InnerModel::MLP) {
          EXPECT_LT(compare(a.base.W2, r.base.W2).max_abs, 1e-13);
          EXPECT_LT(compare(Mat<double>(a.base.b2), Mat<double>(r.base.b2)).max_abs, 1e-13);
        }
      }
    }
  }
}

// ---- Oracle 4: linear-attention limit (Theorem 1) -------------------------------------------------------

TEST(LinearAttentionLimit, InnerLoopEqualsTrilQKtV) {
  std::mt19937_64 rng(13);
  const int T = 32, d = 16;
  InnerOptions opt;
  opt.mini_batch = T;
  opt.layer_norm = opt.residual = opt.bias = false;
  const Mat<double> Q = randn<double>(T, d, rng), K = randn<double>(T, d, rng), V = randn<double>(T, d, rng);
  InnerHeadParams<double> hp{RowVec<double>::Ones(d), RowVec<double>::Zero(d), Vec<double>::Ones(T)};
  for (TTTForm form : {TTTForm::Dual, TTTForm::Primal}) {
    InnerState<double> st = InnerState<double>::start(InnerWeights<double>::zeros(opt, d));
    Mat<double> out;
    if (form == TTTForm::Dual)
      inner_forward_dual<double>(opt, hp, Q, K, V, Vec<double>::Ones(T), st, out);
    else
      inner_forward_primal<double>(opt, hp, Q, K, V, Vec<double>::Ones(T), st, out);
    const Mat<double> Z = Mat<double>((Q * K.transpose()).triangularView<Eigen::Lower>()) * V;
    EXPECT_LT(compare(out, Z).max_abs, 1e-12);
  }
  // The paper's convention (loss ‖·‖², no ½) states η = 1/2: with λ = 1/2 the output is half.
  InnerState<double> st = InnerState<double>::start(InnerWeights<double>::zeros(opt, d));
  Mat<double> half;
  inner_forward_dual<double>(opt, hp, Q, K, V, Vec<double>::Constant(T, 0.5), st, half);
  const Mat<double> Z = Mat<double>((Q * K.transpose()).triangularView<Eigen::Lower>()) * V;
  EXPECT_LT(compare(2.0 * half, Z).max_abs, 1e-12);
}

TEST(LinearAttentionLimit, Theorem1LayerConfig) {
  const int d = 16, H = 2, T = 24;
  const TTTLayerConfig cfg = TTTLayerConfig::linear_attention_equivalent(H * d, H, T);
  TTTLayerParams<double> p = random_layer_params<double>(cfg, 3);
  for (auto& w : p.W0) w.set_zero();
  TTTLayer<double> layer(cfg, p);
  std::mt19937_64 rng(14);
  const Mat<double> x = randn<double>(T, H * d, rng);
  const Mat<double> Q = x * p.wq, K = x * p.wk, V = x * p.wv;
  Mat<double> Z(T, H * d);
  for (int h = 0; h < H; ++h)
    Z.middleCols(h * d, d) =
        Mat<double>((Q.middleCols(h * d, d) * K.middleCols(h * d, d).transpose()).triangularView<Eigen::Lower>()) *
        V.middleCols(h * d, d);
  EXPECT_LT(compare(layer.forward(x), Z * p.wo).max_abs, 1e-12);
  // With W0 ≠ 0 the layer is no longer linear attention: the check is not vacuous.
  TTTLayerParams<double> p2 = random_layer_params<double>(cfg, 3);
  TTTLayer<double> layer2(cfg, p2);
  EXPECT_GT(compare(layer2.forward(x), Z * p.wo).max_abs, 1e-3);
}

// ---- Oracle 5: delta-rule limit --------------------------------------------------------------------------

template <class S>
double delta_rule_error(int d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int T = 64;
  InnerOptions opt;
  opt.mini_batch = 1;
  opt.layer_norm = opt.residual = opt.bias = false;
  Mat<S> Q = randn<S>(T, d, rng), K = randn<S>(T, d, rng), V = randn<S>(T, d, rng);
  K.rowwise().normalize();
  Vec<S> beta(T);
  for (int t = 0; t < T; ++t) beta(t) = S(std::uniform_real_distribution<double>(0.05, 0.95)(rng));
  InnerWeights<S> w0 = InnerWeights<S>::zeros(opt, d);
  w0.W1 = randn<S>(d, d, rng, 0.2);
  InnerHeadParams<S> hp{RowVec<S>::Ones(d), RowVec<S>::Zero(d), Vec<S>::Ones(1)};
  InnerState<S> st = InnerState<S>::start(w0);
  Mat<S> out;
  inner_forward_dual<S>(opt, hp, Q, K, V, beta, st, out);
  // DeltaNet's recurrence, written independently: S_t = (I − β_t k_tᵀ k_t) S_{t−1} + β_t k_tᵀ v_t.
  Mat<double> Sm = w0.W1.template cast<double>(), ref(T, d);
  const Mat<double> I = Mat<double>::Identity(d, d);
  for (int t = 0; t < T; ++t) {
    const RowVec<double> k = K.row(t).template cast<double>();
    Sm = (I - double(beta(t)) * k.transpose() * k) * Sm +
         double(beta(t)) * k.transpose() * V.row(t).template cast<double>();
    ref.row(t) = Q.row(t).template cast<double>() * Sm;
  }
  return compare(out.template cast<double>(), ref).max_abs;
}

TEST(DeltaRuleLimit, OnlineGdEqualsDeltaRule) {
  EXPECT_LT(delta_rule_error<double>(16, 1), 1e-13);
  EXPECT_LT(delta_rule_error<double>(64, 2), 1e-13);
  EXPECT_LT(delta_rule_error<float>(16, 3), 1e-5);
}

// ---- Oracle 10: RoPE reset --------------------------------------------------------------------------------

TEST(Rope, LayerPositionsRestartEveryMiniBatch) {
  const int b = 8, d = 16;
  TTTLayerConfig cfg = mamba_layer_config(InnerModel::Linear, d, b);
  cfg.share_qk = false;  // so that Q, K of a token depend on that token alone
  TTTLayer<double> layer(cfg, random_layer_params<double>(cfg, 4));
  std::mt19937_64 rng(15);
  const Mat<double> block = randn<double>(b, cfg.width, rng);
  Mat<double> x(3 * b, cfg.width);
  for (int m = 0; m < 3; ++m) x.middleRows(m * b, b) = block;
  auto s = layer.start();
  const TTTLayerInputs<double> in = layer.inputs(as_state<double>(s), x);
  EXPECT_EQ(compare(in.XQ.middleRows(b, b), in.XQ.topRows(b)).max_abs, 0.0);
  EXPECT_EQ(compare(in.XK.middleRows(2 * b, b), in.XK.topRows(b)).max_abs, 0.0);
  // ...while within a mini-batch the rotation does depend on the position.
  EXPECT_GT(compare(in.XQ.row(1), Mat<double>(x.row(1) * layer.params().wq)).max_abs, 1e-6);
  // Streaming continues the positions: a second call starting at token 3 rotates by 3 mod b.
  auto s2 = layer.start();
  layer.inputs(as_state<double>(s2), x.topRows(3));  // inputs() does not advance the token count
  as_state<double>(s2).tokens = 3;
  const TTTLayerInputs<double> in2 = layer.inputs(as_state<double>(s2), x.middleRows(3, 5));
  EXPECT_LT(compare(in2.XQ, in.XQ.middleRows(3, 5)).max_abs, 1e-15);
}

// ---- Oracle 11: η construction -----------------------------------------------------------------------

TEST(Eta, InitialisationGivesEtaBaseOver2dI) {
  const int D = 64, d = 16, b = 16;
  const double eta_base = 1.0;
  EtaOptions opt;
  opt.base_lr = eta_base;
  const Vec<double> tau = token_index_scale<double>(opt, RowVec<double>::Zero(b));
  std::mt19937_64 rng(16);
  const Mat<double> x = randn<double>(b, D, rng);
  const Vec<double> lam = per_token_lr<double>(opt, x, RowVec<double>::Zero(D), 0.0, d);
  for (int i = 0; i < b; ++i)
    for (int j = 0; j <= i; ++j) EXPECT_NEAR(tau(i) * lam(j), eta_base / (2.0 * d * (i + 1)), 1e-17);
}

TEST(Eta, ClampAndVariants) {
  EtaOptions opt;
  RowVec<double> delta(4);
  delta << 0.0, -0.6, -0.2, 0.5;  // τ_2 = max(1/2 − 0.6, 0) = 0
  Vec<double> tau = token_index_scale<double>(opt, delta);
  EXPECT_DOUBLE_EQ(tau(0), 1.0);
  EXPECT_DOUBLE_EQ(tau(1), 0.0);
  EXPECT_NEAR(tau(2), 1.0 / 3.0 - 0.2, 1e-16);
  EXPECT_DOUBLE_EQ(tau(3), 0.75);
  opt.token_index = false;
  tau = token_index_scale<double>(opt, delta);
  EXPECT_TRUE((tau.array() == 1.0).all());
  // Fixed gate: λ = η_base / d for every token, whatever x is.
  opt.gate = EtaGate::Fixed;
  opt.base_lr = 0.1;
  std::mt19937_64 rng(17);
  const Vec<double> lam = per_token_lr<double>(opt, randn<double>(5, 8, rng), RowVec<double>::Ones(8), 3.0, 4);
  EXPECT_TRUE(((lam.array() - 0.025).abs() < 1e-18).all());
  // Learned gate: data dependent, between 0 and η_base/d.
  opt.gate = EtaGate::Learned;
  const Vec<double> lam2 = per_token_lr<double>(opt, randn<double>(5, 8, rng), RowVec<double>::Ones(8), 0.0, 4);
  EXPECT_GT(lam2.maxCoeff() - lam2.minCoeff(), 1e-4);
  EXPECT_TRUE((lam2.array() > 0).all() && (lam2.array() < 0.025).all());
}

// ---- Oracle 15: inner-loss sanity, and the observer API -------------------------------------------------

TEST(InnerLoss, LearningAtTestTimeLowersTheLoss) {
  // A task the inner model can learn: v = k + k·A (so the target v − k = k·A is linear in k).
  std::mt19937_64 rng(18);
  const int d = 16, b = 8, T = 16 * b;
  for (InnerModel model : {InnerModel::Linear, InnerModel::MLP}) {
    InnerOptions opt;
    opt.model = model;
    opt.mini_batch = b;
    const Mat<double> A = randn<double>(d, d, rng, 1.0 / std::sqrt(d));
    const Mat<double> K = randn<double>(T, d, rng);
    const Mat<double> V = K + K * A;
    const Mat<double> Q = randn<double>(T, d, rng);
    InnerWeights<double> w0 = InnerWeights<double>::zeros(opt, d);
    // TTT-MLP needs a W0 away from zero: with both layers near 0 every gradient is near 0 (a saddle).
    const double s1 = model == InnerModel::Linear ? 0.02 : 1.0 / std::sqrt(double(w0.W1.rows()));
    w0.W1 = randn<double>(w0.W1.rows(), w0.W1.cols(), rng, s1);
    if (model == InnerModel::MLP)
      w0.W2 = randn<double>(w0.W2.rows(), w0.W2.cols(), rng, 1.0 / std::sqrt(double(w0.W2.rows())));
    InnerHeadParams<double> hp{RowVec<double>::Ones(d), RowVec<double>::Zero(d),
                               token_index_scale<double>(EtaOptions{}, RowVec<double>::Zero(b))};
    const double eta = model == InnerModel::Linear ? 0.5 : 2.0;  // small steps on ½‖·‖² summed over d
    InnerState<double> st = InnerState<double>::start(w0);
    Mat<double> out;
    double l0 = 0, lb = 0, la = 0;
    int n = 0, after_below_before = 0;
    inner_forward_primal<double>(
        opt, hp, Q, K, V, Vec<double>::Constant(T, eta / d), st, out,
        [&](const InnerStepRecord<double>& r) {
          if (r.pos != b - 1 || r.token < 4 * b) return;  // last token of a mini-batch, after warm-up
          l0 += r.loss_initial;
          lb += r.loss_before;
          la += r.loss_after;
          ++n;
          after_below_before += r.loss_after < r.loss_before;
        },
        &w0);
    ASSERT_GT(n, 0);
    EXPECT_LT(la, lb) << "model " << int(model);
    EXPECT_LT(lb, 0.8 * l0) << "model " << int(model);
    EXPECT_EQ(after_below_before, n);
  }
}

TEST(InnerObserver, RecordsAreConsistentWithTheOutput) {
  std::mt19937_64 rng(19);
  const int d = 8, b = 4, T = 10;
  InnerOptions opt;
  opt.mini_batch = b;
  const Mat<double> Q = randn<double>(T, d, rng), K = randn<double>(T, d, rng), V = randn<double>(T, d, rng);
  InnerWeights<double> w0 = InnerWeights<double>::zeros(opt, d);
  w0.W1 = randn<double>(d, d, rng, 0.3);
  InnerHeadParams<double> hp{RowVec<double>::Ones(d), RowVec<double>::Zero(d),
                             token_index_scale<double>(EtaOptions{}, RowVec<double>::Zero(b))};
  const Vec<double> lam = Vec<double>::Constant(T, 0.05);
  InnerState<double> st = InnerState<double>::start(w0);
  Mat<double> out;
  InnerWeights<double> prev_after = w0;
  int calls = 0;
  inner_forward_primal<double>(
      opt, hp, Q, K, V, lam, st, out,
      [&](const InnerStepRecord<double>& r) {
        ++calls;
        EXPECT_EQ(r.pos, r.token % b);
        EXPECT_EQ(compare(Mat<double>(*r.k), Mat<double>(K.row(r.token))).max_abs, 0.0);
        // W_{t−1} of this token is W_t of the previous one.
        EXPECT_LT(compare(r.w_before->W1, prev_after.W1).max_abs, 1e-15);
        // The output is q_t + LN(q_t W_t + c_t) with the materialised W_t.
        const RowVec<double> q = Q.row(r.token);
        const RowVec<double> z = inner_apply<double>(opt, *r.w_after, q);
        const double mu = z.mean();
        const double sd = std::sqrt((z.array() - mu).square().mean() + 1e-6);
        const RowVec<double> o = q.array() + (z.array() - mu) / sd;
        EXPECT_LT(compare(Mat<double>(o), Mat<double>(*r.output)).max_abs, 1e-14);
        // At the first token of a mini-batch the update is exactly τ_1 λ k_tᵀ g_t.
        if (r.pos == 0) {
          const Mat<double> dW = r.w_before->W1 - r.w_after->W1;
          EXPECT_LT(compare(dW, r.tau * r.lambda * r.k->transpose() * *r.grad_z).max_abs, 1e-15);
        }
        prev_after = *r.w_after;
      },
      &w0);
  EXPECT_EQ(calls, T);
  EXPECT_EQ(st.pos, T % b);
}

// ---- Bad input --------------------------------------------------------------------------------------------

TEST(LayerConfig, RejectsBadValuesWithAMessage) {
  TTTLayerConfig c;
  c.width = 64;
  c.heads = 5;
  try {
    c.validate();
    FAIL() << "heads not dividing the width must be rejected";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("divide"), std::string::npos) << e.what();
  }
  c.heads = 4;
  c.inner.mini_batch = 0;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c.inner.mini_batch = 16;
  EXPECT_NO_THROW(c.validate());
  // Parameters of the wrong shape are refused by the layer.
  TTTLayerParams<double> p = random_layer_params<double>(c, 1);
  p.wv.resize(3, 3);
  EXPECT_THROW(TTTLayer<double>(c, p), std::invalid_argument);
}

TEST(Verify, SuitePassesForSeveralSeeds) {
  for (std::uint64_t seed : {1ULL, 2ULL, 12345ULL}) {
    VerifyOptions opt;
    opt.seed = seed;
    const auto results = run_verify_suite(opt);
    EXPECT_GE(results.size(), 40u);
    for (const auto& r : results) EXPECT_TRUE(r.passed) << r.name << " err " << r.max_abs_err;
  }
}

}  // namespace
}  // namespace tttlab
