// LaCT's inner loop (tttlab/fastweight/lact.hpp, docs/MATH.md §11.10): the manual backward against
// central finite differences in fp64 for GD, momentum, Muon and both, with a partial and an exact
// last chunk; Newton–Schulz's backward and its transpose branch; what the observer reports; the
// stream in pieces against the whole sequence; argument validation; the preset naming this header.
// The outputs themselves are pinned to the authors' code by test_lact_fixtures.cpp.
#include <gtest/gtest.h>

#include <Eigen/SVD>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tttlab/fastweight/lact.hpp"
#include "tttlab/fastweight/rule.hpp"

namespace tttlab {
namespace {

struct LactCase {
  Mat<double> q, k, v;
  Vec<double> lr0, lr1, lr2, momentum;
  LactWeights<double> W;
  Mat<double> dO;
  LactWeights<double> dWf;
};

Mat<double> lact_randn(std::mt19937& rng, int r, int c, double scale = 1.0) {
  std::normal_distribution<double> n(0.0, scale);
  Mat<double> m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = n(rng);
  return m;
}

Vec<double> lact_uniform(std::mt19937& rng, int T, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  Vec<double> v(T);
  for (int t = 0; t < T; ++t) v(t) = u(rng);
  return v;
}

LactCase lact_make_case(unsigned seed, int T, int dk, int dv, int dh, bool momentum) {
  std::mt19937 rng(seed);
  LactCase c;
  c.q = lact_randn(rng, T, dk, 0.6);
  c.k = lact_randn(rng, T, dk, 0.6);
  c.v = lact_randn(rng, T, dv);
  c.lr0 = lact_uniform(rng, T, 0.05, 0.4);
  c.lr1 = lact_uniform(rng, T, 0.05, 0.4);
  c.lr2 = lact_uniform(rng, T, 0.05, 0.4);
  if (momentum) c.momentum = lact_uniform(rng, T, 0.2, 0.9);
  c.W = {lact_randn(rng, dh, dk, 1.0 / std::sqrt(dk)), lact_randn(rng, dv, dh, 1.0 / std::sqrt(dh)),
         lact_randn(rng, dh, dk, 1.0 / std::sqrt(dk))};
  c.dO = lact_randn(rng, T, dv);
  c.dWf = {lact_randn(rng, dh, dk), lact_randn(rng, dv, dh), lact_randn(rng, dh, dk)};
  return c;
}

double lact_functional(const LactCase& c, int chunk, bool muon) {
  const LactOutput<double> out =
      lact_forward<double>(c.q, c.k, c.v, c.lr0, c.lr1, c.lr2, c.momentum, c.W, chunk, muon);
  return out.o.cwiseProduct(c.dO).sum() + out.weights.w0.cwiseProduct(c.dWf.w0).sum() +
         out.weights.w1.cwiseProduct(c.dWf.w1).sum() + out.weights.w2.cwiseProduct(c.dWf.w2).sum();
}

// max |fd − analytic| / max |analytic| over one input, by central differences on each entry.
double lact_fd_error(LactCase& c, int chunk, bool muon, double* data, Eigen::Index n,
                     const double* analytic) {
  const double h = 1e-6;
  double err = 0, scale = 0;
  for (Eigen::Index i = 0; i < n; ++i) {
    const double x = data[i];
    data[i] = x + h;
    const double lp = lact_functional(c, chunk, muon);
    data[i] = x - h;
    const double lm = lact_functional(c, chunk, muon);
    data[i] = x;
    err = std::max(err, std::abs((lp - lm) / (2 * h) - analytic[i]));
    scale = std::max(scale, std::abs(analytic[i]));
  }
  return scale > 0 ? err / scale : err;
}

struct LactFdParam {
  const char* name;
  int T, chunk;
  bool momentum, muon;
};

class LactBackward : public ::testing::TestWithParam<LactFdParam> {};

TEST_P(LactBackward, MatchesCentralFiniteDifferencesInFp64) {
  const LactFdParam p = GetParam();
  const unsigned seed = 5100u + static_cast<unsigned>(p.T * 7 + p.chunk + 2 * p.momentum + p.muon);
  LactCase c = lact_make_case(seed, p.T, 3, 2, 4, p.momentum);
  const LactGrads<double> g = lact_backward<double>(c.q, c.k, c.v, c.lr0, c.lr1, c.lr2, c.momentum,
                                                    c.W, p.chunk, p.muon, c.dO, c.dWf);
  struct Item {
    const char* name;
    double* x;
    Eigen::Index n;
    const double* an;
  };
  std::vector<Item> items{{"q", c.q.data(), c.q.size(), g.dq.data()},
                          {"k", c.k.data(), c.k.size(), g.dk.data()},
                          {"v", c.v.data(), c.v.size(), g.dv.data()},
                          {"lr0", c.lr0.data(), c.lr0.size(), g.dlr0.data()},
                          {"lr1", c.lr1.data(), c.lr1.size(), g.dlr1.data()},
                          {"lr2", c.lr2.data(), c.lr2.size(), g.dlr2.data()},
                          {"w0", c.W.w0.data(), c.W.w0.size(), g.dW.w0.data()},
                          {"w1", c.W.w1.data(), c.W.w1.size(), g.dW.w1.data()},
                          {"w2", c.W.w2.data(), c.W.w2.size(), g.dW.w2.data()}};
  if (p.momentum) {
    ASSERT_EQ(g.dmomentum.size(), p.T);
    items.push_back({"momentum", c.momentum.data(), c.momentum.size(), g.dmomentum.data()});
  } else {
    EXPECT_EQ(g.dmomentum.size(), 0);
  }
  std::printf("[lact fd] %s: T=%d C=%d momentum=%d muon=%d seed=%u:", p.name, p.T, p.chunk,
              p.momentum, p.muon, seed);
  for (const Item& it : items) {
    const double e = lact_fd_error(c, p.chunk, p.muon, it.x, it.n, it.an);
    std::printf(" %s %.1e", it.name, e);
    EXPECT_LE(e, 1e-6) << p.name << " grad." << it.name;
  }
  std::printf("\n");
}

INSTANTIATE_TEST_SUITE_P(Lact, LactBackward,
                         ::testing::Values(LactFdParam{"gd_partial", 11, 4, false, false},
                                           LactFdParam{"momentum_partial", 11, 4, true, false},
                                           LactFdParam{"muon_partial", 11, 4, false, true},
                                           LactFdParam{"momentum_muon_exact", 12, 4, true, true},
                                           LactFdParam{"one_chunk_only_read", 4, 4, true, true}),
                         [](const ::testing::TestParamInfo<LactFdParam>& p) {
                           return std::string(p.param.name);
                         });

TEST(LactNewtonSchulz, BackwardMatchesFiniteDifferencesAndTallIsTheTransposeOfWide) {
  std::mt19937 rng(5201);
  for (const auto& [r, cols] : std::vector<std::pair<int, int>>{{3, 5}, {5, 3}, {4, 4}}) {
    const Mat<double> G = lact_randn(rng, r, cols);
    const Mat<double> D = lact_randn(rng, r, cols);
    const Mat<double> an = lact_newton_schulz5_backward<double>(G, D);
    Mat<double> Gp = G;
    double err = 0, scale = an.cwiseAbs().maxCoeff();
    for (Eigen::Index i = 0; i < G.size(); ++i) {
      const double x = Gp.data()[i], h = 1e-6;
      Gp.data()[i] = x + h;
      const double lp = lact_newton_schulz5<double>(Gp).cwiseProduct(D).sum();
      Gp.data()[i] = x - h;
      const double lm = lact_newton_schulz5<double>(Gp).cwiseProduct(D).sum();
      Gp.data()[i] = x;
      err = std::max(err, std::abs((lp - lm) / (2 * h) - an.data()[i]));
    }
    EXPECT_LE(err / scale, 1e-7) << r << "x" << cols;
    // The reference transposes a tall matrix first: NS5(G) = NS5(Gᵀ)ᵀ exactly when G is not square
    // (a square G is iterated as it is, with X Xᵀ, so its transpose is a different computation).
    if (r != cols) {
      EXPECT_EQ(lact_newton_schulz5<double>(G),
                Mat<double>(lact_newton_schulz5<double>(Mat<double>(G.transpose())).transpose()));
    }
    // Five quintic steps leave the singular values near 1 (the coefficients aim at about 0.7–1.2).
    const Eigen::JacobiSVD<Mat<double>> svd(lact_newton_schulz5<double>(G));
    EXPECT_GT(svd.singularValues().minCoeff(), 0.5) << r << "x" << cols;
    EXPECT_LT(svd.singularValues().maxCoeff(), 1.5) << r << "x" << cols;
  }
}

TEST(LactForward, ObserverReportsEveryChunkAndTheRowNormsStay) {
  const int T = 23, chunk = 8;  // updates after tokens 0–7 and 8–15; 16–22 only read
  const LactCase c = lact_make_case(5301, T, 4, 3, 5, true);
  std::vector<LactChunkStep<double>> steps;
  std::vector<LactWeights<double>> before, after;
  const LactOutput<double> out =
      lact_forward<double>(c.q, c.k, c.v, c.lr0, c.lr1, c.lr2, c.momentum, c.W, chunk, true,
                           [&](const LactChunkStep<double>& s) {
                             steps.push_back(s);
                             before.push_back(*s.weights_before);
                             after.push_back(*s.weights_after);
                           });
  EXPECT_EQ(out.updates, 2);
  ASSERT_EQ(steps.size(), 3u);
  long next = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].chunk, static_cast<long>(i));
    EXPECT_EQ(steps[i].first_token, next);
    next += steps[i].tokens;
    EXPECT_EQ(steps[i].updated, i < 2);
    // The chunk is read with the weights from before it.
    const Mat<double> Q = c.q.middleRows(steps[i].first_token, steps[i].tokens);
    const LactWeights<double>& W = before[i];
    const Mat<double> y0 = Q * W.w0.transpose();
    const Mat<double> h = y0.unaryExpr([](double x) {
                              return x / (1 + std::exp(-x));
                            }).cwiseProduct(Q * W.w2.transpose());
    EXPECT_LE((h * W.w1.transpose() - out.o.middleRows(steps[i].first_token, steps[i].tokens))
                  .cwiseAbs()
                  .maxCoeff(),
              1e-12);
    EXPECT_NEAR(steps[i].loss_before,
                lact_chunk_loss<double>(W, c.k.middleRows(steps[i].first_token, steps[i].tokens),
                                        c.v.middleRows(steps[i].first_token, steps[i].tokens)),
                1e-12);
    if (i + 1 < steps.size()) {
      EXPECT_EQ(after[i].w1, before[i + 1].w1);
    }
    // Every row keeps its initial norm (up to the factor ‖p‖ / (‖p‖ + 1e-5)).
    const Vec<double> n0 = c.W.w1.rowwise().norm(), n1 = after[i].w1.rowwise().norm();
    EXPECT_LE(((n1 - n0).array() / n0.array()).abs().maxCoeff(), 1e-4);
  }
  EXPECT_EQ(next, T);
  EXPECT_NEAR(steps[0].momentum, c.momentum.head(8).mean(), 1e-15);
  EXPECT_EQ(steps[2].momentum, 0.0);
  EXPECT_EQ(steps[2].loss_after, steps[2].loss_before);
  EXPECT_EQ(out.weights.w0, after[1].w0);
  EXPECT_FALSE(after[0].w0.isApprox(c.W.w0, 1e-3)) << "an update must change the weights";
}

// The stream in uneven pieces (one token, pieces inside a chunk, pieces across chunk ends) equals
// the whole sequence: outputs and final weights, in fp64 to rounding.
TEST(LactStream, PiecesEqualTheWholeSequence) {
  const int T = 37, chunk = 8;
  const std::vector<int> pieces{1, 5, 8, 3, 1, 1, 12, 0, 6};  // sums to 37
  for (const auto& [momentum, muon] : std::vector<std::pair<bool, bool>>{
           {false, false}, {true, false}, {false, true}, {true, true}}) {
    const LactCase c = lact_make_case(5501, T, 4, 3, 6, momentum);
    const LactOutput<double> whole =
        lact_forward<double>(c.q, c.k, c.v, c.lr0, c.lr1, c.lr2, c.momentum, c.W, chunk, muon);
    LactStreamState<double> st = lact_stream_start<double>(c.W, chunk, muon, momentum);
    Mat<double> o(T, 3);
    int t = 0;
    for (int n : pieces) {
      const Vec<double> m = momentum ? Vec<double>(c.momentum.segment(t, n)) : Vec<double>();
      o.middleRows(t, n) =
          lact_stream<double>(st, c.q.middleRows(t, n), c.k.middleRows(t, n), c.v.middleRows(t, n),
                              c.lr0.segment(t, n), c.lr1.segment(t, n), c.lr2.segment(t, n), m);
      t += n;
    }
    ASSERT_EQ(t, T);
    const double eo = (o - whole.o).cwiseAbs().maxCoeff() / whole.o.cwiseAbs().maxCoeff();
    const double ew = std::max({(st.weights.w0 - whole.weights.w0).cwiseAbs().maxCoeff(),
                                (st.weights.w1 - whole.weights.w1).cwiseAbs().maxCoeff(),
                                (st.weights.w2 - whole.weights.w2).cwiseAbs().maxCoeff()});
    std::printf("[lact stream] momentum=%d muon=%d seed=5501: o %.1e, final weights %.1e\n",
                momentum, muon, eo, ew);
    EXPECT_LE(eo, 1e-12);
    EXPECT_LE(ew, 1e-12);
    EXPECT_EQ(st.updates, whole.updates);
    EXPECT_EQ(st.tokens, T);
  }
  LactStreamState<double> st =
      lact_stream_start<double>(lact_make_case(1, 2, 4, 3, 6, false).W, chunk, false, true);
  const LactCase c = lact_make_case(1, 2, 4, 3, 6, false);
  EXPECT_THROW(lact_stream<double>(st, c.q, c.k, c.v, c.lr0, c.lr1, c.lr2, Vec<double>()),
               std::invalid_argument);
}

TEST(LactForward, ValidatesArguments) {
  const LactCase c = lact_make_case(5401, 6, 3, 2, 4, false);
  auto call = [&](const Mat<double>& q, const Vec<double>& lr0, const Vec<double>& m,
                  const LactWeights<double>& W, int chunk) {
    lact_forward<double>(q, c.k, c.v, lr0, c.lr1, c.lr2, m, W, chunk, false);
  };
  EXPECT_NO_THROW(call(c.q, c.lr0, Vec<double>(), c.W, 2));
  EXPECT_THROW(call(c.q.topRows(5), c.lr0, Vec<double>(), c.W, 2), std::invalid_argument);
  EXPECT_THROW(call(c.q, c.lr0.head(5), Vec<double>(), c.W, 2), std::invalid_argument);
  EXPECT_THROW(call(c.q, c.lr0, Vec<double>::Ones(5), c.W, 2), std::invalid_argument);
  EXPECT_THROW(call(c.q, c.lr0, Vec<double>(), c.W, 0), std::invalid_argument);
  LactWeights<double> bad = c.W;
  bad.w1 = Mat<double>::Zero(2, 3);
  EXPECT_THROW(call(c.q, c.lr0, Vec<double>(), bad, 2), std::invalid_argument);
  EXPECT_THROW(lact_backward<double>(c.q, c.k, c.v, c.lr0, c.lr1, c.lr2, Vec<double>(), c.W, 2,
                                     false, Mat<double>::Zero(6, 3), LactWeights<double>{}),
               std::invalid_argument);
}

TEST(LactPreset, NamesThisInnerLoop) {
  const FastWeightPreset& p = fast_weight_preset("lact");
  EXPECT_EQ(p.inner_loop, "tttlab/fastweight/lact.hpp");
  EXPECT_EQ(p.rule.state, FastWeightState::Mlp);
  EXPECT_EQ(p.rule.loss, FastWeightLoss::DotProduct);
  EXPECT_EQ(p.rule.optimizer, FastWeightOptimizer::Muon);
  EXPECT_EQ(p.rule.rate, FastWeightRate::PerToken);
  EXPECT_EQ(p.rule.granularity, FastWeightGranularity::LargeChunk);
}

}  // namespace
}  // namespace tttlab
