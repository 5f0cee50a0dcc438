// The designer's memory (tttlab/fastweight/designed_memory.hpp, docs/MATH.md §11.7): at the presets
// the recall lab has it is those memories; its per-token steps are §11.2's inner loops; each
// granularity, retention and optimizer does what §11.7 says, checked against the formula written out
// here; its gradient against central differences for every loss and state.
#include <gtest/gtest.h>

#include <Eigen/SVD>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <vector>

#include "tttlab/analysis/recall.hpp"
#include "tttlab/fastweight/designed_memory.hpp"
#include "tttlab/fastweight/matrix_rules.hpp"

namespace tttlab {
namespace {

using Eigen::MatrixXd;
using Eigen::RowVectorXd;

std::uint64_t dm_announce(std::uint64_t seed) {
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

RowVectorXd dm_unit(int d, std::mt19937_64& rng) {
  std::normal_distribution<double> n(0.0, 1.0);
  RowVectorXd x(d);
  for (int i = 0; i < d; ++i) x(i) = n(rng);
  return x.normalized();
}

FastWeightRule dm_rule(FastWeightState st, FastWeightLoss l, FastWeightRetention r,
                       FastWeightOptimizer o, FastWeightRate rate, FastWeightGranularity g) {
  FastWeightRule x;
  x.state = st;
  x.loss = l;
  x.retention = r;
  x.optimizer = o;
  x.rate = rate;
  x.granularity = g;
  return x;
}

FastWeightRule dm_matrix(FastWeightLoss l, FastWeightRetention r = FastWeightRetention::None,
                         FastWeightOptimizer o = FastWeightOptimizer::Gd,
                         FastWeightGranularity g = FastWeightGranularity::PerToken) {
  return dm_rule(FastWeightState::Matrix, l, r, o, FastWeightRate::Fixed, g);
}

double dm_rel(const RowVectorXd& a, const RowVectorXd& b) {
  return (a - b).cwiseAbs().maxCoeff() / std::max(1e-300, b.cwiseAbs().maxCoeff());
}

// Writes the same pairs into both memories and compares the read-outs of every key after every write.
double dm_max_diff(recall::AssociativeMemory& a, recall::AssociativeMemory& b, int d, int pairs,
                   std::uint64_t seed) {
  std::mt19937_64 rng(dm_announce(seed));
  std::vector<RowVectorXd> keys;
  double worst = 0;
  for (int t = 0; t < pairs; ++t) {
    const RowVectorXd k = dm_unit(d, rng), v = dm_unit(d, rng);
    keys.push_back(k);
    a.write(k, v);
    b.write(k, v);
    for (const RowVectorXd& q : keys) worst = std::max(worst, dm_rel(a.read(q), b.read(q)));
  }
  return worst;
}

TEST(DesignedMemory, IsTheRecallLabsMemoriesAtTheirPresets) {
  const int d = 12;
  recall::MemoryParams rp;
  rp.width = d;
  rp.seed = 5;
  DesignParams p;
  p.width = d;
  p.seed = 5;
  {
    DesignedMemory a(dm_matrix(FastWeightLoss::Hebbian), p);
    auto b = recall::make_memory(recall::Memory::LinearAttention, rp);
    EXPECT_LE(dm_max_diff(a, *b, d, 30, 101), 1e-14) << "linear attention";
  }
  {
    p.decay = rp.mamba_decay = 0.9;
    DesignedMemory a(dm_matrix(FastWeightLoss::Hebbian, FastWeightRetention::ScalarDecay), p);
    auto b = recall::make_memory(recall::Memory::Mamba2, rp);
    EXPECT_LE(dm_max_diff(a, *b, d, 30, 102), 1e-14) << "Mamba-2";
  }
  {
    DesignedMemory a(dm_matrix(FastWeightLoss::Squared), p);
    auto b = recall::make_memory(recall::Memory::TttLinear, rp);
    EXPECT_LE(dm_max_diff(a, *b, d, 30, 103), 1e-13) << "TTT-Linear (the delta rule)";
  }
  {
    p.eta = recall::default_eta_mlp(d);
    DesignedMemory a(dm_rule(FastWeightState::Mlp, FastWeightLoss::Squared,
                             FastWeightRetention::None, FastWeightOptimizer::Gd,
                             FastWeightRate::Fixed, FastWeightGranularity::PerToken),
                     p);
    auto b = recall::make_memory(recall::Memory::TttMlp, rp);
    EXPECT_LE(dm_max_diff(a, *b, d, 30, 104), 1e-13) << "TTT-MLP";
  }
}

// Per-token steps are §11.2's recurrences: Gated DeltaNet decays, then takes the delta step at the
// decayed state; DeltaNet and the decayed Hebbian rule likewise, with constant β and α.
TEST(DesignedMemory, PerTokenStepsAreTheMatrixRules) {
  const int d = 9, T = 40;
  std::mt19937_64 rng(dm_announce(7));
  Mat<double> q(T, d), k(T, d), v(T, d);
  for (int t = 0; t < T; ++t) {
    q.row(t) = dm_unit(d, rng);
    k.row(t) = dm_unit(d, rng);
    v.row(t) = dm_unit(d, rng);
  }
  const double eta = 0.7, alpha = 0.85;
  struct Case {
    MatrixRule rule;
    FastWeightRule design;
  };
  const Case cases[] = {
      {MatrixRule::DeltaNet, dm_matrix(FastWeightLoss::Squared)},
      {MatrixRule::GatedDeltaNet,
       dm_matrix(FastWeightLoss::Squared, FastWeightRetention::ScalarDecay)},
      {MatrixRule::DecayedHebbian,
       dm_matrix(FastWeightLoss::Hebbian, FastWeightRetention::ScalarDecay)},
  };
  for (const Case& c : cases) {
    Vec<double> beta = Vec<double>::Constant(T, eta);
    Vec<double> al = Vec<double>::Constant(T, uses_alpha(c.rule) ? alpha : 1.0);
    if (!uses_alpha(c.rule)) al.resize(0);
    const auto ref =
        matrix_rule_primal<double>(c.rule, q, k, v, beta, al, Mat<double>::Zero(d, d));
    DesignParams p;
    p.width = d;
    p.eta = eta;
    p.decay = alpha;
    DesignedMemory mem(c.design, p);
    double worst = 0;
    for (int t = 0; t < T; ++t) {
      mem.write(k.row(t), v.row(t));
      worst = std::max(worst, dm_rel(mem.read(q.row(t)), ref.o.row(t)));
    }
    EXPECT_LE(worst, 1e-13) << to_string(c.rule);
  }
}

TEST(DesignedMemory, GranularitiesDoWhatTheyName) {
  const int d = 8, b = 5;
  DesignParams p;
  p.width = d;
  p.eta = 0.6;
  p.chunk = b;
  std::mt19937_64 rng(dm_announce(11));
  std::vector<RowVectorXd> ks, vs;
  for (int t = 0; t < 13; ++t) {
    ks.push_back(dm_unit(d, rng));
    vs.push_back(dm_unit(d, rng));
  }
  // exact_chunk and mini_batch with b = 1 are per_token, bit for bit.
  {
    DesignParams p1 = p;
    p1.chunk = 1;
    DesignedMemory a(dm_matrix(FastWeightLoss::Squared), p);
    DesignedMemory e(dm_matrix(FastWeightLoss::Squared, FastWeightRetention::None,
                               FastWeightOptimizer::Gd, FastWeightGranularity::ExactChunk),
                     p);
    DesignedMemory m(dm_matrix(FastWeightLoss::Squared, FastWeightRetention::None,
                               FastWeightOptimizer::Gd, FastWeightGranularity::MiniBatch),
                     p1);
    for (std::size_t t = 0; t < ks.size(); ++t) {
      a.write(ks[t], vs[t]);
      e.write(ks[t], vs[t]);
      m.write(ks[t], vs[t]);
    }
    EXPECT_EQ(a.weights()[0], e.weights()[0]);
    EXPECT_EQ(a.weights()[0], m.weights()[0]);
  }
  // mini_batch: W_t = W_start − η Σ_{s ≤ t in the batch} k_sᵀ(k_s W_start − v_s).
  {
    DesignedMemory m(dm_matrix(FastWeightLoss::Squared, FastWeightRetention::None,
                               FastWeightOptimizer::Gd, FastWeightGranularity::MiniBatch),
                     p);
    MatrixXd start = MatrixXd::Zero(d, d), w = start;
    double worst = 0;
    for (std::size_t t = 0; t < ks.size(); ++t) {
      if (t % b == 0) start = w;
      w -= p.eta * ks[t].transpose() * (ks[t] * start - vs[t]);
      m.write(ks[t], vs[t]);
      worst = std::max(worst, (m.weights()[0] - w).cwiseAbs().maxCoeff());
    }
    EXPECT_LE(worst, 1e-14);
  }
  // large_chunk: reads do not see a pending chunk; a full chunk is one step from its start state.
  {
    DesignedMemory m(dm_matrix(FastWeightLoss::Squared, FastWeightRetention::None,
                               FastWeightOptimizer::Gd, FastWeightGranularity::LargeChunk),
                     p);
    MatrixXd w = MatrixXd::Zero(d, d);
    double worst = 0;
    for (std::size_t t = 0; t < ks.size(); ++t) {
      m.write(ks[t], vs[t]);
      if (t % b == b - 1) {
        MatrixXd g = MatrixXd::Zero(d, d);
        for (std::size_t s = t + 1 - b; s <= t; ++s) g += ks[s].transpose() * (ks[s] * w - vs[s]);
        w -= p.eta * g;
      }
      worst = std::max(worst, (m.weights()[0] - w).cwiseAbs().maxCoeff());
    }
    EXPECT_LE(worst, 1e-14);
    EXPECT_EQ(m.state_size(), d * d + 2L * d * (13 % b));  // three pairs pending
  }
}

TEST(DesignedMemory, RetentionAndOptimizers) {
  const int d = 6;
  DesignParams p;
  p.width = d;
  p.eta = 0.5;
  p.weight_decay = 0.2;
  p.decay = 0.8;
  p.momentum = 0.7;
  std::mt19937_64 rng(dm_announce(13));
  std::vector<RowVectorXd> ks, vs;
  for (int t = 0; t < 9; ++t) {
    ks.push_back(dm_unit(d, rng));
    vs.push_back(dm_unit(d, rng));
  }
  // Weight decay on the Hebbian rule: S ← (1 − ηλ) S + η kᵀv.
  {
    DesignedMemory m(dm_matrix(FastWeightLoss::Hebbian, FastWeightRetention::WeightDecay), p);
    MatrixXd s = MatrixXd::Zero(d, d);
    for (std::size_t t = 0; t < ks.size(); ++t) {
      s = (1 - p.eta * p.weight_decay) * s + p.eta * ks[t].transpose() * vs[t];
      m.write(ks[t], vs[t]);
    }
    EXPECT_LE((m.weights()[0] - s).cwiseAbs().maxCoeff(), 1e-14);
  }
  // Channel decay: row c of S shrinks by its own a_c ∈ [α^1.5, α^0.5], not all equal.
  {
    DesignedMemory m(dm_matrix(FastWeightLoss::Hebbian, FastWeightRetention::ChannelDecay), p);
    m.set_weights({MatrixXd::Ones(d, d)});
    m.write(RowVectorXd::Zero(d), RowVectorXd::Zero(d));
    const Eigen::VectorXd a = m.weights()[0].col(0);
    EXPECT_GE(a.minCoeff(), std::pow(p.decay, 1.5) - 1e-15);
    EXPECT_LE(a.maxCoeff(), std::pow(p.decay, 0.5) + 1e-15);
    EXPECT_GT(a.maxCoeff() - a.minCoeff(), 1e-3);
  }
  // Momentum with μ = 0 is GD bit for bit; with μ > 0, M ← μM + G, S ← S − ηM.
  {
    DesignParams p0 = p;
    p0.momentum = 0;
    DesignedMemory gd(dm_matrix(FastWeightLoss::Squared), p0);
    DesignedMemory m0(dm_matrix(FastWeightLoss::Squared, FastWeightRetention::None,
                                FastWeightOptimizer::Momentum),
                      p0);
    DesignedMemory m(dm_matrix(FastWeightLoss::Squared, FastWeightRetention::None,
                               FastWeightOptimizer::Momentum),
                     p);
    MatrixXd s = MatrixXd::Zero(d, d), vel = s;
    for (std::size_t t = 0; t < ks.size(); ++t) {
      vel = p.momentum * vel + ks[t].transpose() * (ks[t] * s - vs[t]);
      s -= p.eta * vel;
      gd.write(ks[t], vs[t]);
      m0.write(ks[t], vs[t]);
      m.write(ks[t], vs[t]);
    }
    EXPECT_EQ(gd.weights()[0], m0.weights()[0]);
    EXPECT_LE((m.weights()[0] - s).cwiseAbs().maxCoeff(), 1e-14);
  }
  // Muon: the first step from S = 0 on the rank-one Hebbian gradient −kᵀv moves S by η times a
  // rank-one matrix whose singular value the Newton–Schulz steps have brought near 1.
  {
    DesignedMemory m(dm_matrix(FastWeightLoss::Hebbian, FastWeightRetention::None,
                               FastWeightOptimizer::Muon),
                     p);
    m.write(ks[0] * 3.0, vs[0] * 2.0);
    const Eigen::JacobiSVD<MatrixXd> svd(m.weights()[0] / p.eta);
    const auto sv = svd.singularValues();
    std::printf("[   INFO   ] Muon's first step: singular values %.4f, %.2e\n", sv(0), sv(1));
    EXPECT_GT(sv(0), 0.6);
    EXPECT_LT(sv(0), 1.3);
    EXPECT_LT(sv(1), 1e-12);
    // Along the write: k S points along v.
    const RowVectorXd r = ks[0] * m.weights()[0];
    EXPECT_GT(r.normalized().dot(vs[0]), 1 - 1e-12);
  }
}

// A per-token rate runs as the fixed one (the gate is the outer loop's to learn), bit for bit.
TEST(DesignedMemory, PerTokenRateIsFixedWithoutAnOuterLoop) {
  const int d = 10;
  DesignParams p;
  p.width = d;
  p.eta = 0.8;
  FastWeightRule r = dm_matrix(FastWeightLoss::Squared);
  DesignedMemory fixed(r, p);
  r.rate = FastWeightRate::PerToken;
  DesignedMemory gated(r, p);
  std::mt19937_64 rng(dm_announce(19));
  for (int t = 0; t < 20; ++t) {
    const RowVectorXd k = dm_unit(d, rng), v = dm_unit(d, rng);
    fixed.write(k, v);
    gated.write(k, v);
  }
  EXPECT_EQ(fixed.weights()[0], gated.weights()[0]);
}

// ∇ℓ against central differences of ℓ for every loss and both states, at a random state.
TEST(DesignedMemory, GradientMatchesFiniteDifferences) {
  const int d = 5;
  std::mt19937_64 rng(dm_announce(17));
  std::normal_distribution<double> n(0.0, 0.4);
  for (const FastWeightState st : {FastWeightState::Matrix, FastWeightState::Mlp})
    for (const FastWeightLoss l : {FastWeightLoss::Hebbian, FastWeightLoss::Squared,
                                   FastWeightLoss::TttLnResidual, FastWeightLoss::DotProduct}) {
      DesignParams p;
      p.width = d;
      DesignedMemory m(dm_rule(st, l, FastWeightRetention::None, FastWeightOptimizer::Gd,
                               FastWeightRate::Fixed, FastWeightGranularity::PerToken),
                       p);
      std::vector<MatrixXd> w = m.weights();
      for (MatrixXd& x : w)
        for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = n(rng);
      m.set_weights(w);
      const RowVectorXd k = dm_unit(d, rng), v = dm_unit(d, rng);
      const std::vector<MatrixXd> g = m.gradient(k, v);
      double worst = 0, scale = 0;
      const double h = 1e-6;
      for (std::size_t j = 0; j < w.size(); ++j)
        for (Eigen::Index i = 0; i < w[j].size(); ++i) {
          std::vector<MatrixXd> wp = w, wm = w;
          wp[j].data()[i] += h;
          wm[j].data()[i] -= h;
          m.set_weights(wp);
          const double lp = m.loss(k, v);
          m.set_weights(wm);
          const double lm = m.loss(k, v);
          const double fd = (lp - lm) / (2 * h);
          worst = std::max(worst, std::abs(fd - g[j].data()[i]));
          scale = std::max(scale, std::abs(g[j].data()[i]));
        }
      EXPECT_LE(worst / scale, 1e-7) << to_string(st) << " " << to_string(l);
    }
}

TEST(DesignedMemory, RecallOfAnEpisode) {
  // The recall lab's episode and answer: at P ≤ d/2 the delta rule recalls everything, and a large
  // chunk longer than the episode recalls nothing (no pair was ever applied).
  const int d = 32, P = 12;
  const std::uint64_t seed = dm_announce(3);
  const recall::Embedding emb(d, seed);
  const recall::Episode e = recall::make_episode(P, seed, 0);
  DesignParams p;
  p.width = d;
  EXPECT_EQ(designed_recall_correct(dm_matrix(FastWeightLoss::Squared), p, e, emb), P);
  p.chunk = 64;
  const int late = designed_recall_correct(
      dm_matrix(FastWeightLoss::Squared, FastWeightRetention::None, FastWeightOptimizer::Gd,
                FastWeightGranularity::LargeChunk),
      p, e, emb);
  EXPECT_LE(late, 1);  // the zero state's answer is one fixed value: right only by chance
}

TEST(DesignedMemory, RejectsBadParameters) {
  const FastWeightRule r = dm_matrix(FastWeightLoss::Squared);
  DesignParams p;
  const auto bad = [&](auto change) {
    DesignParams q = p;
    change(q);
    EXPECT_THROW(DesignedMemory(r, q), std::invalid_argument);
  };
  bad([](DesignParams& q) { q.width = 2; });
  bad([](DesignParams& q) { q.width = 1000; });
  bad([](DesignParams& q) { q.eta = 0; });
  bad([](DesignParams& q) { q.eta = std::nan(""); });
  bad([](DesignParams& q) { q.decay = 0; });
  bad([](DesignParams& q) { q.decay = 1.5; });
  bad([](DesignParams& q) { q.momentum = 1; });
  bad([](DesignParams& q) { q.chunk = 0; });
  bad([](DesignParams& q) { q.weight_decay = -1; });
  {
    // η·λ ≥ 1 is refused only where weight decay is the retention.
    DesignParams q = p;
    q.weight_decay = 2;
    EXPECT_NO_THROW(DesignedMemory(r, q));
    FastWeightRule w = r;
    w.retention = FastWeightRetention::WeightDecay;
    EXPECT_THROW(DesignedMemory(w, q), std::invalid_argument);
  }
  DesignedMemory m(r, p);
  EXPECT_THROW(m.write(RowVectorXd::Zero(3), RowVectorXd::Zero(p.width)), std::invalid_argument);
  EXPECT_THROW(m.set_weights({MatrixXd::Zero(2, 2)}), std::invalid_argument);
}

}  // namespace
}  // namespace tttlab
