// The outer-loop backward of the TTT inner loop against central finite differences in fp64
// (docs/MATH.md §10, oracles 6, 7 and 9), for both inner models and with the options toggled.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <tuple>

#include "core/nn/grad_check.hpp"
#include "tttlab/ttt/eta.hpp"
#include "tttlab/ttt/inner.hpp"
#include "tttlab/ttt/inner_backward.hpp"
#include "tttlab/ttt/ln_l2.hpp"

namespace tttlab {
namespace {

using Mt64 = std::mt19937_64;

Mat<double> tb_randn(Eigen::Index r, Eigen::Index c, Mt64& rng, double std = 1.0) {
  std::normal_distribution<double> n(0.0, std);
  Mat<double> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m(i / c, i % c) = n(rng);
  return m;
}

// Central difference of f with respect to every entry of x, compared with the analytic gradient g.
// Returns the max abs error relative to max(1, |g|max).
double fd_error(double* x, Eigen::Index n, const double* g, const std::function<double()>& f,
                const char* what) {
  double max_err = 0, scale = 1;
  for (Eigen::Index i = 0; i < n; ++i) scale = std::max(scale, std::abs(g[i]));
  for (Eigen::Index i = 0; i < n; ++i) {
    const double fd = test::central_difference(x[i], f);
    const double err = std::abs(fd - g[i]);
    if (err / scale > 1e-6)
      ADD_FAILURE() << what << "[" << i << "]: analytic " << g[i] << " vs finite difference " << fd;
    max_err = std::max(max_err, err / scale);
  }
  return max_err;
}

// ---- Oracle 6: the second-order kernel (backward of the LN + L2 gradient) -----------------------------

TEST(LnL2GradBackward, MatchesFiniteDifferences) {
  Mt64 rng(1);
  const int n = 3, d = 8;
  Mat<double> Z = tb_randn(n, d, rng, 2.0), R = tb_randn(n, d, rng), W = tb_randn(n, d, rng);
  RowVec<double> gamma = tb_randn(1, d, rng, 0.3).array() + 1.0, beta = tb_randn(1, d, rng, 0.3);
  // L = Σ W ⊙ G(Z, R; γ, β)
  auto loss = [&] {
    Mat<double> G;
    ln_l2_grad<double>(Z, R, gamma, beta, 1e-6, G);
    return (G.array() * W.array()).sum();
  };
  Mat<double> dZ, dR;
  RowVec<double> dgamma = RowVec<double>::Zero(d), dbeta = RowVec<double>::Zero(d);
  ln_l2_grad_backward<double>(Z, R, gamma, beta, 1e-6, W, dZ, dR, dgamma, dbeta);
  // docs/MATH.md §10, oracle 6 (the backward of §7.2).
  EXPECT_LT(fd_error(Z.data(), Z.size(), dZ.data(), loss, "dZ"), 1e-7);
  EXPECT_LT(fd_error(R.data(), R.size(), dR.data(), loss, "dR"), 1e-7);
  EXPECT_LT(fd_error(gamma.data(), d, dgamma.data(), loss, "dgamma"), 1e-7);
  EXPECT_LT(fd_error(beta.data(), d, dbeta.data(), loss, "dbeta"), 1e-7);
}

TEST(LayerNormRowsBackward, MatchesFiniteDifferences) {
  Mt64 rng(2);
  const int n = 3, d = 8;
  Mat<double> Z = tb_randn(n, d, rng, 2.0), W = tb_randn(n, d, rng);
  RowVec<double> gamma = tb_randn(1, d, rng, 0.3).array() + 1.0, beta = tb_randn(1, d, rng, 0.3);
  auto loss = [&] {
    Mat<double> Y;
    layer_norm_rows<double>(Z, gamma, beta, 1e-6, Y);
    return (Y.array() * W.array()).sum();
  };
  Mat<double> dZ;
  RowVec<double> dgamma = RowVec<double>::Zero(d), dbeta = RowVec<double>::Zero(d);
  layer_norm_rows_backward<double>(Z, gamma, 1e-6, W, dZ, dgamma, dbeta);
  EXPECT_LT(fd_error(Z.data(), Z.size(), dZ.data(), loss, "dZ"), 1e-7);
  EXPECT_LT(fd_error(gamma.data(), d, dgamma.data(), loss, "dgamma"), 1e-7);
  EXPECT_LT(fd_error(beta.data(), d, dbeta.data(), loss, "dbeta"), 1e-7);
}

// ---- Oracle 7 (and its TTT-MLP extension): the whole inner loop --------------------------------------

struct Case {
  InnerModel model;
  bool layer_norm, residual, bias;
  int T, b;
};

class InnerBackward : public ::testing::TestWithParam<Case> {};

TEST_P(InnerBackward, EveryInputMatchesFiniteDifferences) {
  const Case c = GetParam();
  Mt64 rng(3 + c.T + c.b);
  const int d = 4;
  InnerOptions opt;
  opt.model = c.model;
  opt.mini_batch = c.b;
  opt.mlp_expansion = 2;  // keeps the MLP's finite-difference sweep small
  opt.layer_norm = c.layer_norm;
  opt.residual = c.residual;
  opt.bias = c.bias;
  Mat<double> Q = tb_randn(c.T, d, rng), K = tb_randn(c.T, d, rng), V = tb_randn(c.T, d, rng);
  Vec<double> lam = (tb_randn(c.T, 1, rng, 0.05).array().abs() + 0.05).matrix();
  InnerHeadParams<double> p;
  p.ln_weight = tb_randn(1, d, rng, 0.3).array() + 1.0;
  p.ln_bias = tb_randn(1, d, rng, 0.3);
  p.tau = (tb_randn(c.b, 1, rng, 0.2).array() + 1.0).matrix();
  InnerWeights<double> W0 = InnerWeights<double>::zeros(opt, d);
  W0.W1 = tb_randn(W0.W1.rows(), W0.W1.cols(), rng, 0.5);
  W0.b1 = tb_randn(1, W0.b1.size(), rng, 0.2);
  if (c.model == InnerModel::MLP) {
    W0.W2 = tb_randn(W0.W2.rows(), W0.W2.cols(), rng, 0.5);
    W0.b2 = tb_randn(1, W0.b2.size(), rng, 0.2);
  }
  if (!c.bias) {
    W0.b1.setZero();
    W0.b2.setZero();
  }
  const Mat<double> Wl = tb_randn(c.T, d, rng);  // L = Σ Wl ⊙ O
  auto loss = [&] {
    InnerState<double> st = InnerState<double>::start(W0);
    Mat<double> O;
    inner_forward_dual<double>(opt, p, Q, K, V, lam, st, O);
    return (O.array() * Wl.array()).sum();
  };
  InnerGrads<double> g;
  inner_backward<double>(opt, p, Q, K, V, lam, W0, Wl, g);
  // docs/MATH.md §10, oracle 7 (TTT-Linear's per-mini-batch backward of §7.3).
  const double tol = 1e-7;
  EXPECT_LT(fd_error(Q.data(), Q.size(), g.dQ.data(), loss, "dQ"), tol);
  EXPECT_LT(fd_error(K.data(), K.size(), g.dK.data(), loss, "dK"), tol);
  EXPECT_LT(fd_error(V.data(), V.size(), g.dV.data(), loss, "dV"), tol);
  EXPECT_LT(fd_error(lam.data(), lam.size(), g.dlambda.data(), loss, "dlambda"), tol);
  EXPECT_LT(fd_error(p.tau.data(), p.tau.size(), g.dtau.data(), loss, "dtau"), tol);
  if (c.layer_norm) {
    EXPECT_LT(fd_error(p.ln_weight.data(), d, g.dln_weight.data(), loss, "dgamma"), tol);
    EXPECT_LT(fd_error(p.ln_bias.data(), d, g.dln_bias.data(), loss, "dbeta"), tol);
  }
  EXPECT_LT(fd_error(W0.W1.data(), W0.W1.size(), g.dW0.W1.data(), loss, "dW1"), tol);
  if (c.bias) {
    EXPECT_LT(fd_error(W0.b1.data(), W0.b1.size(), g.dW0.b1.data(), loss, "db1"), tol);
  }
  if (c.model == InnerModel::MLP) {
    EXPECT_LT(fd_error(W0.W2.data(), W0.W2.size(), g.dW0.W2.data(), loss, "dW2"), tol);
    if (c.bias) {
      EXPECT_LT(fd_error(W0.b2.data(), W0.b2.size(), g.dW0.b2.data(), loss, "db2"), tol);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Options, InnerBackward,
    ::testing::Values(
        // official options; T = 11 with b = 4 leaves a short last mini-batch
        Case{InnerModel::Linear, true, true, true, 11, 4}, Case{InnerModel::MLP, true, true, true, 11, 4},
        // online GD and batch GD
        Case{InnerModel::Linear, true, true, true, 5, 1}, Case{InnerModel::MLP, true, true, true, 7, 7},
        // options off, one at a time and all together
        Case{InnerModel::Linear, false, true, true, 9, 3}, Case{InnerModel::Linear, true, false, true, 9, 3},
        Case{InnerModel::Linear, true, true, false, 9, 3}, Case{InnerModel::Linear, false, false, false, 9, 3},
        Case{InnerModel::MLP, false, true, true, 9, 3}, Case{InnerModel::MLP, true, false, false, 9, 3}));

// ---- Oracle 9: gradient checkpointing through time changes nothing -------------------------------------

TEST(InnerBackward, CheckpointGroupsGiveIdenticalGradients) {
  for (InnerModel model : {InnerModel::Linear, InnerModel::MLP}) {
    Mt64 rng(5);
    const int d = 8, b = 4, T = 37;  // 10 mini-batches, the last one short
    InnerOptions opt;
    opt.model = model;
    opt.mini_batch = b;
    const Mat<double> Q = tb_randn(T, d, rng), K = tb_randn(T, d, rng), V = tb_randn(T, d, rng),
                      dO = tb_randn(T, d, rng);
    const Vec<double> lam = Vec<double>::Constant(T, 0.05);
    InnerHeadParams<double> p{RowVec<double>::Ones(d), RowVec<double>::Zero(d),
                              token_index_scale<double>(EtaOptions{}, RowVec<double>::Zero(b))};
    InnerWeights<double> W0 = InnerWeights<double>::zeros(opt, d);
    W0.W1 = tb_randn(W0.W1.rows(), W0.W1.cols(), rng, 0.3);
    if (model == InnerModel::MLP) W0.W2 = tb_randn(W0.W2.rows(), W0.W2.cols(), rng, 0.3);
    InnerGrads<double> ref;
    inner_backward<double>(opt, p, Q, K, V, lam, W0, dO, ref, 0);
    for (int group : {1, 2, 3, 4, 100}) {
      InnerGrads<double> g;
      inner_backward<double>(opt, p, Q, K, V, lam, W0, dO, g, group);
      EXPECT_EQ((g.dQ - ref.dQ).cwiseAbs().maxCoeff(), 0.0) << "group " << group;
      EXPECT_EQ((g.dK - ref.dK).cwiseAbs().maxCoeff(), 0.0) << "group " << group;
      EXPECT_EQ((g.dlambda - ref.dlambda).cwiseAbs().maxCoeff(), 0.0) << "group " << group;
      EXPECT_EQ((g.dW0.W1 - ref.dW0.W1).cwiseAbs().maxCoeff(), 0.0) << "group " << group;
    }
  }
}

TEST(InnerBackward, Fp32AgreesWithFp64) {
  Mt64 rng(6);
  const int d = 16, b = 8, T = 40;
  InnerOptions opt;
  opt.mini_batch = b;
  const Mat<double> Q = tb_randn(T, d, rng), K = tb_randn(T, d, rng), V = tb_randn(T, d, rng), dO = tb_randn(T, d, rng);
  const Vec<double> lam = Vec<double>::Constant(T, 0.5 / d);
  InnerHeadParams<double> p{RowVec<double>::Ones(d), RowVec<double>::Zero(d),
                            token_index_scale<double>(EtaOptions{}, RowVec<double>::Zero(b))};
  InnerWeights<double> W0 = InnerWeights<double>::zeros(opt, d);
  W0.W1 = tb_randn(d, d, rng, 0.3);
  InnerGrads<double> g64;
  inner_backward<double>(opt, p, Q, K, V, lam, W0, dO, g64);
  InnerHeadParams<float> pf{p.ln_weight.cast<float>(), p.ln_bias.cast<float>(), p.tau.cast<float>()};
  InnerWeights<float> W0f{W0.W1.cast<float>(), W0.b1.cast<float>(), W0.W2.cast<float>(), W0.b2.cast<float>()};
  InnerGrads<float> g32;
  inner_backward<float>(opt, pf, Q.cast<float>(), K.cast<float>(), V.cast<float>(), lam.cast<float>(),
                        W0f, dO.cast<float>(), g32);
  // Relative to the largest gradient entry: float rounding through 5 mini-batches of second-order terms.
  auto rel = [](const Mat<double>& a, const Mat<double>& r) {
    return (a - r).cwiseAbs().maxCoeff() / r.cwiseAbs().maxCoeff();
  };
  EXPECT_LT(rel(g32.dQ.cast<double>(), g64.dQ), 1e-4);
  EXPECT_LT(rel(g32.dK.cast<double>(), g64.dK), 1e-4);
  EXPECT_LT(rel(g32.dW0.W1.cast<double>(), g64.dW0.W1), 1e-4);
}

}  // namespace
}  // namespace tttlab
