// The recall lab's memories (tttlab/analysis/recall.hpp, docs/MATH.md §9.4): each update against a
// plain hand-written reference, the episodes against the MQAR generator, and the outcomes the lesson
// teaches on fixed, printed seeds: softmax attention recalls (nearly) everything, linear attention is
// exact for few pairs and fails for many, TTT-Linear at η = 1 forgets its oldest pairs first, Mamba-2's
// decay keeps only its newest pairs, and the forgetting map's last row is the accuracy. The four
// designed members (DeltaNet, Gated DeltaNet, Titans, LaCT) against §11.2's matrix rules and against
// their updates written out here; the first five against the numbers the code gave before they came.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <vector>

#include "tttlab/analysis/recall.hpp"
#include "tttlab/fastweight/designed_memory.hpp"
#include "tttlab/fastweight/matrix_rules.hpp"
#include "tttlab/nn/activations.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab::recall {
namespace {

using Eigen::MatrixXd;
using Eigen::RowVectorXd;

constexpr std::uint64_t kSeed = 0;  // every outcome below is on this seed (printed by each test)

double accuracy(Memory m, int d, int pairs, int episodes, std::uint64_t seed, double eta_linear = 1.0) {
  const Embedding emb(d, seed);
  MemoryParams p;
  p.width = d;
  p.seed = seed;
  p.eta_linear = eta_linear;
  long right = 0;
  for (int s = 0; s < episodes; ++s)
    right += recall_correct(m, make_episode(pairs, seed, static_cast<std::uint64_t>(s)), emb, p);
  return static_cast<double>(right) / (static_cast<double>(episodes) * pairs);
}

RowVectorXd random_unit(Rng& rng, int d) {
  RowVectorXd v(d);
  for (int j = 0; j < d; ++j) v(j) = rng.normal();
  return v.normalized();
}

// Row j of the state, read through the memory's own interface: e_j W.
MatrixXd state_of(const AssociativeMemory& m, int d) {
  MatrixXd w(d, d);
  for (int j = 0; j < d; ++j) w.row(j) = m.read(RowVectorXd::Unit(d, j));
  return w;
}

TEST(Recall, EpisodeIsTheMqarRow) {
  const int P = 40;
  const Episode e = make_episode(P, 7, 3);
  const TokenBatch b = mqar_batch(episode_config(P), 1, 7, 3);
  ASSERT_EQ(e.keys.size(), static_cast<std::size_t>(P));
  for (int i = 0; i < P; ++i) {
    EXPECT_EQ(e.keys[static_cast<std::size_t>(i)], b.at(0, 2 * i));
    EXPECT_EQ(e.values[static_cast<std::size_t>(i)], b.at(0, 2 * i + 1));
    EXPECT_NE(key_alphabet().find(static_cast<char>(e.keys[static_cast<std::size_t>(i)])), std::string::npos);
    EXPECT_NE(value_alphabet().find(static_cast<char>(e.values[static_cast<std::size_t>(i)])), std::string::npos);
  }
  EXPECT_EQ(std::set<int>(e.keys.begin(), e.keys.end()).size(), static_cast<std::size_t>(P));  // distinct keys
  std::vector<int> q = e.queries;
  std::sort(q.begin(), q.end());
  for (int i = 0; i < P; ++i) EXPECT_EQ(q[static_cast<std::size_t>(i)], i);  // every pair asked once
  for (int j = 0; j < P; ++j) EXPECT_EQ(e.keys[static_cast<std::size_t>(e.queries[static_cast<std::size_t>(j)])],
                                        b.at(0, 2 * P + 1 + 2 * j));
  const Episode again = make_episode(P, 7, 3);
  EXPECT_EQ(again.keys, e.keys);
  EXPECT_EQ(again.values, e.values);
  EXPECT_NE(make_episode(P, 7, 4).keys, e.keys);
  EXPECT_EQ(max_pairs(), 160);
  EXPECT_THROW(episode_config(0), std::invalid_argument);
  EXPECT_THROW(episode_config(161), std::invalid_argument);
  EXPECT_NO_THROW(make_episode(160, 1, 0));
}

TEST(Recall, EmbeddingIsUnitFixedAndDecodesItsValues) {
  const Embedding a(16, 5), b(16, 5), c(16, 6);
  for (int byte = 0; byte < 256; ++byte) {
    EXPECT_NEAR(a.row(byte).norm(), 1.0, 1e-12);
    EXPECT_EQ(a.row(byte), b.row(byte));
  }
  EXPECT_GT((a.row(0x61) - c.row(0x61)).norm(), 0.1);  // another seed, other directions
  for (const char v : value_alphabet()) {
    const int byte = static_cast<unsigned char>(v);
    EXPECT_EQ(a.decode(a.row(byte)), byte);
    EXPECT_EQ(a.decode(0.3 * a.row(byte)), byte);  // a scaled read-out decodes the same
  }
  EXPECT_THROW(Embedding(2, 0), std::invalid_argument);
}

TEST(Recall, TttLinearIsOneGradientStepPerPair) {
  const int d = 8, n = 12;
  const double eta = 0.7;
  MemoryParams p;
  p.width = d;
  p.eta_linear = eta;
  auto mem = make_memory(Memory::TttLinear, p);
  std::vector<std::vector<double>> w(d, std::vector<double>(d, 0.0));  // the reference, in plain loops
  Rng rng(11);
  for (int t = 0; t < n; ++t) {
    const RowVectorXd k = random_unit(rng, d), v = random_unit(rng, d);
    std::vector<double> g(d, 0.0);  // kW − v
    for (int j = 0; j < d; ++j) {
      for (int i = 0; i < d; ++i) g[j] += k(i) * w[i][j];
      g[j] -= v(j);
    }
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) w[i][j] -= eta * k(i) * g[j];
    mem->write(k, v);
  }
  const MatrixXd got = state_of(*mem, d);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) EXPECT_NEAR(got(i, j), w[i][j], 1e-12) << i << "," << j;
  EXPECT_EQ(mem->state_size(), d * d);
  // η = 1 and a unit key: the step stores the pair exactly (the delta rule's projection).
  p.eta_linear = 1.0;
  auto exact = make_memory(Memory::TttLinear, p);
  for (int t = 0; t < n; ++t) {
    const RowVectorXd k = random_unit(rng, d), v = random_unit(rng, d);
    exact->write(k, v);
    EXPECT_LT((exact->read(k) - v).norm(), 1e-12);
  }
}

TEST(Recall, LinearAttentionIsTheSumOfOuterProducts) {
  const int d = 6, n = 9;
  MemoryParams p;
  p.width = d;
  auto mem = make_memory(Memory::LinearAttention, p);
  std::vector<RowVectorXd> ks, vs;
  Rng rng(12);
  for (int t = 0; t < n; ++t) {
    ks.push_back(random_unit(rng, d));
    vs.push_back(random_unit(rng, d));
    mem->write(ks.back(), vs.back());
  }
  const RowVectorXd q = random_unit(rng, d);
  RowVectorXd want = RowVectorXd::Zero(d);  // Σᵢ (q·kᵢ) vᵢ
  for (int t = 0; t < n; ++t) want += q.dot(ks[static_cast<std::size_t>(t)]) * vs[static_cast<std::size_t>(t)];
  EXPECT_LT((mem->read(q) - want).norm(), 1e-12);
}

TEST(Recall, Mamba2IsADecayedSumOfOuterProducts) {
  const int d = 6, n = 9;
  const double a = 0.8;
  MemoryParams p;
  p.width = d;
  p.mamba_decay = a;
  auto mem = make_memory(Memory::Mamba2, p);
  std::vector<RowVectorXd> ks, vs;
  Rng rng(13);
  for (int t = 0; t < n; ++t) {
    ks.push_back(random_unit(rng, d));
    vs.push_back(random_unit(rng, d));
    mem->write(ks.back(), vs.back());
  }
  const RowVectorXd q = random_unit(rng, d);
  RowVectorXd want = RowVectorXd::Zero(d);  // Σᵢ a^(n−1−i) (q·kᵢ) vᵢ
  for (int t = 0; t < n; ++t)
    want += std::pow(a, n - 1 - t) * q.dot(ks[static_cast<std::size_t>(t)]) * vs[static_cast<std::size_t>(t)];
  EXPECT_LT((mem->read(q) - want).norm(), 1e-12);
  EXPECT_EQ(mem->state_size(), d * d);
  // a = 1 is linear attention exactly.
  p.mamba_decay = 1.0;
  auto m1 = make_memory(Memory::Mamba2, p);
  auto la = make_memory(Memory::LinearAttention, p);
  for (int t = 0; t < n; ++t) {
    m1->write(ks[static_cast<std::size_t>(t)], vs[static_cast<std::size_t>(t)]);
    la->write(ks[static_cast<std::size_t>(t)], vs[static_cast<std::size_t>(t)]);
  }
  EXPECT_EQ(m1->read(q), la->read(q));
  for (const double bad : {0.0, -0.5, 1.5, std::nan("")}) {
    p.mamba_decay = bad;
    EXPECT_THROW(make_memory(Memory::Mamba2, p), std::invalid_argument) << bad;
  }
}

TEST(Recall, TttMlpIsOneGradientStepOnBothLayers) {
  const int d = 4, h = 4 * d;
  MemoryParams p;
  p.width = d;
  p.seed = 3;
  p.eta_mlp = 0.2;
  auto mem = make_memory(Memory::TttMlp, p);
  EXPECT_EQ(mem->state_size(), 8 * d * d);
  // W₁ as documented: N(0, 1/d) from Rng(seed, kMlpStream), row by row; W₂ = 0.
  std::vector<std::vector<double>> w1(d, std::vector<double>(h)), w2(h, std::vector<double>(d, 0.0));
  Rng init(3, kMlpStream);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < h; ++j) w1[i][j] = init.normal() / std::sqrt(static_cast<double>(d));
  auto forward = [&](const RowVectorXd& x, std::vector<double>& z1, std::vector<double>& x2) {
    std::vector<double> out(d, 0.0);
    z1.assign(h, 0.0);
    x2.assign(h, 0.0);
    for (int j = 0; j < h; ++j) {
      for (int i = 0; i < d; ++i) z1[j] += x(i) * w1[i][j];
      x2[j] = gelu_tanh(z1[j]);
    }
    for (int o = 0; o < d; ++o)
      for (int j = 0; j < h; ++j) out[o] += x2[j] * w2[j][o];
    return out;
  };
  Rng rng(13);
  for (int t = 0; t < 5; ++t) {
    const RowVectorXd k = random_unit(rng, d), v = random_unit(rng, d);
    std::vector<double> z1, x2;
    const std::vector<double> y = forward(k, z1, x2);
    std::vector<double> g2(d), g1(h, 0.0);
    double loss_before = 0;
    for (int o = 0; o < d; ++o) {
      g2[o] = y[o] - v(o);
      loss_before += 0.5 * g2[o] * g2[o];
    }
    for (int j = 0; j < h; ++j) {
      for (int o = 0; o < d; ++o) g1[j] += g2[o] * w2[j][o];
      g1[j] *= gelu_tanh_grad(z1[j]);
    }
    for (int j = 0; j < h; ++j)
      for (int o = 0; o < d; ++o) w2[j][o] -= 0.2 * x2[j] * g2[o];
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < h; ++j) w1[i][j] -= 0.2 * k(i) * g1[j];
    mem->write(k, v);
    const RowVectorXd q = random_unit(rng, d);
    const std::vector<double> want = forward(q, z1, x2);
    const RowVectorXd got = mem->read(q);
    for (int o = 0; o < d; ++o) EXPECT_NEAR(got(o), want[static_cast<std::size_t>(o)], 1e-12);
    const double loss_after = 0.5 * (mem->read(k) - v).squaredNorm();
    EXPECT_LT(loss_after, loss_before) << "a small step must lower the loss on its own pair";
  }
}

TEST(Recall, DefaultMlpStepFromTheGeluSecondMoment) {
  // Monte Carlo with 400 000 draws: an independent estimate of E[gelu(a)²] (sd of the mean ≈ 0.002).
  Rng rng(21);
  double s = 0;
  const int n = 400000;
  for (int i = 0; i < n; ++i) {
    const double g = gelu_tanh(rng.normal());
    s += g * g;
  }
  EXPECT_NEAR(gelu_second_moment(), s / n, 0.01);
  EXPECT_NEAR(gelu_second_moment(), 0.4252, 5e-4);
  EXPECT_NEAR(default_eta_mlp(32), 1.0 / (128.0 * gelu_second_moment()), 1e-15);
}

TEST(Recall, SoftmaxAttentionRecallsNearlyEverything) {
  for (const int P : {16, 64, 128}) {
    const double a = accuracy(Memory::SoftmaxAttention, 32, P, 8, kSeed);
    std::printf("[recall] seed %llu, d = 32, P = %d: softmax attention %.4f\n",
                static_cast<unsigned long long>(kSeed), P, a);
    EXPECT_GE(a, 0.99) << "P = " << P;
  }
  EXPECT_EQ(state_size(Memory::SoftmaxAttention, 32, 128), 2 * 32 * 128);
}

TEST(Recall, LinearAttentionIsExactForFewPairsAndFailsForMany) {
  const double small = accuracy(Memory::LinearAttention, 32, 4, 16, kSeed);
  const double at_d = accuracy(Memory::LinearAttention, 32, 32, 16, kSeed);
  const double large = accuracy(Memory::LinearAttention, 32, 128, 16, kSeed);
  std::printf("[recall] seed %llu, d = 32: linear attention P = 4: %.4f, P = 32: %.4f, P = 128: %.4f\n",
              static_cast<unsigned long long>(kSeed), small, at_d, large);
  EXPECT_GE(small, 0.95);
  EXPECT_LE(large, 0.7);
  EXPECT_GT(small - large, 0.3);
  // The same for TTT-Linear: its d × d state cannot hold 4d pairs either.
  const double ttt_small = accuracy(Memory::TttLinear, 32, 4, 16, kSeed);
  const double ttt_large = accuracy(Memory::TttLinear, 32, 128, 16, kSeed);
  std::printf("[recall] seed %llu, d = 32: TTT-Linear (η = 1) P = 4: %.4f, P = 128: %.4f\n",
              static_cast<unsigned long long>(kSeed), ttt_small, ttt_large);
  EXPECT_GE(ttt_small, 0.95);
  EXPECT_LE(ttt_large, 0.5);
}

TEST(Recall, ForgettingMapMatchesTheAccuracyAndShowsRecency) {
  const int d = 32, P = 64, episodes = 8;
  const Embedding emb(d, kSeed);
  MemoryParams p;
  p.width = d;
  p.seed = kSeed;
  std::vector<double> last(P, 0.0);
  for (int m = 0; m < kMemories; ++m) {
    for (int s = 0; s < episodes; ++s) {
      const Episode e = make_episode(P, kSeed, static_cast<std::uint64_t>(s));
      const auto map = forgetting_rows(static_cast<Memory>(m), e, emb, p);
      ASSERT_EQ(map.size(), static_cast<std::size_t>(P * P));
      int row_sum = 0;
      for (int i = 0; i < P; ++i) row_sum += map[static_cast<std::size_t>((P - 1) * P + i)];
      EXPECT_EQ(row_sum, recall_correct(static_cast<Memory>(m), e, emb, p)) << memory_name(static_cast<Memory>(m));
      for (int t = 0; t < P; ++t)
        for (int i = t + 1; i < P; ++i) ASSERT_EQ(map[static_cast<std::size_t>(t * P + i)], 0);
      if (static_cast<Memory>(m) == Memory::TttLinear)
        for (int i = 0; i < P; ++i) last[static_cast<std::size_t>(i)] += map[static_cast<std::size_t>((P - 1) * P + i)];
      // The freshest pair: always recalled by TTT-Linear at η = 1 (its step stores it exactly).
      if (static_cast<Memory>(m) == Memory::TttLinear) {
        for (int t = 0; t < P; ++t) EXPECT_EQ(map[static_cast<std::size_t>(t * P + t)], 1);
      }
    }
  }
  double oldest = 0, newest = 0;
  for (int i = 0; i < P / 4; ++i) {
    oldest += last[static_cast<std::size_t>(i)];
    newest += last[static_cast<std::size_t>(P - 1 - i)];
  }
  oldest /= episodes * (P / 4);
  newest /= episodes * (P / 4);
  std::printf("[recall] seed %llu, d = 32, P = 64: TTT-Linear recalls %.3f of the oldest quarter, %.3f of the newest\n",
              static_cast<unsigned long long>(kSeed), oldest, newest);
  EXPECT_GT(newest - oldest, 0.5);
}

// Mamba-2's decay keeps the newest pairs clear of the older ones' crosstalk, whatever P: with a = 0.95
// the crosstalk has variance about 1/(d(1 − a²)), so at d = 32 the last few pairs come back at any P
// and the oldest are gone; linear attention (a = 1) treats every pair alike.
TEST(Recall, Mamba2RecallsItsNewestPairsAndForgetsTheOldest) {
  const int d = 32, P = 128, episodes = 8;
  const Embedding emb(d, kSeed);
  MemoryParams p;
  p.width = d;
  p.seed = kSeed;
  double newest = 0, oldest = 0;
  std::vector<double> by_age(P, 0.0);  // by_age[n]: recalled after n later writes, over the episodes
  for (int s = 0; s < episodes; ++s) {
    const Episode e = make_episode(P, kSeed, static_cast<std::uint64_t>(s));
    const auto map = forgetting_rows(Memory::Mamba2, e, emb, p);
    for (int i = 0; i < 8; ++i) {
      newest += map[static_cast<std::size_t>((P - 1) * P + P - 1 - i)];
      oldest += map[static_cast<std::size_t>((P - 1) * P + i)];
    }
    for (int n = 0; n < P; ++n) by_age[static_cast<std::size_t>(n)] += map[static_cast<std::size_t>((P - 1) * P + P - 1 - n)];
  }
  int band = 0;  // the pairs recalled in at least half the episodes, counted from the newest
  while (band < P && by_age[static_cast<std::size_t>(band)] >= 0.5 * episodes) ++band;
  newest /= episodes * 8;
  oldest /= episodes * 8;
  const double la = accuracy(Memory::LinearAttention, d, P, episodes, kSeed);
  const double mamba = accuracy(Memory::Mamba2, d, P, episodes, kSeed);
  std::printf("[recall] seed %llu, d = 32, P = 128, a = %.2f: Mamba-2 recalls %.3f of the newest 8 pairs, "
              "%.3f of the oldest 8, the newest %d in at least half the episodes; accuracy %.4f (linear "
              "attention %.4f)\n",
              static_cast<unsigned long long>(kSeed), kMambaDecay, newest, oldest, band, mamba, la);
  EXPECT_GE(newest, 0.9);
  EXPECT_LE(oldest, 0.1);
  // The band's width depends on a and d, not on P (docs/MATH.md §9.4): a pair is lost once its aⁿ is
  // small against the crosstalk of the pairs written after it. Measured on this seed: 21 pairs, about
  // 1/(1 − a) = 20.
  EXPECT_GE(band, 12);
  EXPECT_LE(band, 30);
  EXPECT_GE(accuracy(Memory::Mamba2, d, 4, 16, kSeed), 0.95);  // few pairs: as exact as linear attention
}

// The first five memories give the numbers they gave before the designed members were added (computed
// by the recall lab of commit 32de089, seed 3, d = 32): right answers over episodes 0–2 at P = 8, 32,
// 96, and the ones of the forgetting map of episode 1 at P = 48.
TEST(Recall, FirstFiveMemoriesUnchanged) {
  const int d = 32;
  const std::uint64_t seed = 3;
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  const Embedding emb(d, seed);
  MemoryParams p;
  p.width = d;
  p.seed = seed;
  const long expected[kFirstMemories][4] = {
      {24, 73, 92, 880},    // TTT-Linear
      {24, 88, 163, 1068},  // TTT-MLP
      {24, 94, 180, 1093},  // linear attention
      {24, 96, 288, 1176},  // softmax attention
      {23, 75, 83, 892},    // Mamba-2
  };
  for (int m = 0; m < kFirstMemories; ++m) {
    const Memory mem = static_cast<Memory>(m);
    const int pairs[3] = {8, 32, 96};
    for (int j = 0; j < 3; ++j) {
      long right = 0;
      for (int s = 0; s < 3; ++s)
        right += recall_correct(mem, make_episode(pairs[j], seed, static_cast<std::uint64_t>(s)), emb, p);
      EXPECT_EQ(right, expected[m][j]) << memory_name(mem) << " P = " << pairs[j];
    }
    const auto map = forgetting_rows(mem, make_episode(48, seed, 1), emb, p);
    long ones = 0;
    for (const std::uint8_t x : map) ones += x;
    EXPECT_EQ(ones, expected[m][3]) << memory_name(mem) << " map";
  }
}

TEST(Recall, IdsNamesAndTheTable) {
  EXPECT_EQ(memory_ids(), "ttt_linear, ttt_mlp, linear_attention, softmax_attention, mamba2, deltanet, "
                          "gated_deltanet, titans, lact");
  for (int m = 0; m < kMemories; ++m) {
    const Memory mem = static_cast<Memory>(m);
    EXPECT_EQ(memory_from_id(memory_id(mem)), mem);
    EXPECT_STRNE(memory_name(mem), "?");
    // A designed member's id is its fast-weight preset's.
    if (is_designed(mem)) {
      EXPECT_NO_THROW(fast_weight_preset(memory_id(mem))) << memory_id(mem);
    }
  }
  EXPECT_FALSE(memory_from_id("gated-deltanet"));
  EXPECT_FALSE(memory_from_id(""));
  EXPECT_EQ(is_designed(Memory::Mamba2), false);
  EXPECT_EQ(is_designed(Memory::Lact), true);
}

// DeltaNet and Gated DeltaNet on one episode: the recall lab's memory against matrix_rule_primal
// (§11.2) with constant β and α, read after every write with the keys read so far.
TEST(Recall, DeltaNetsAreTheMatrixRules) {
  const int d = 16, P = 40;
  const std::uint64_t seed = 11;
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  const Embedding emb(d, seed);
  const Episode e = make_episode(P, seed, 0);
  Mat<double> k(P, d), v(P, d);
  for (int t = 0; t < P; ++t) {
    k.row(t) = emb.row(e.keys[static_cast<std::size_t>(t)]);
    v.row(t) = emb.row(e.values[static_cast<std::size_t>(t)]);
  }
  MemoryParams p;
  p.width = d;
  p.seed = seed;
  for (const Memory m : {Memory::DeltaNet, Memory::GatedDeltaNet}) {
    const MatrixRule rule = m == Memory::DeltaNet ? MatrixRule::DeltaNet : MatrixRule::GatedDeltaNet;
    const Vec<double> beta = Vec<double>::Constant(P, kDeltaBeta);
    const Vec<double> alpha = m == Memory::DeltaNet ? Vec<double>() : Vec<double>::Constant(P, kMambaDecay);
    // q = k: o_t = k_t S_t, the read of the pair just written.
    const auto ref = matrix_rule_primal<double>(rule, k, k, v, beta, alpha, Mat<double>::Zero(d, d));
    auto mem = make_memory(m, p);
    double worst = 0;
    for (int t = 0; t < P; ++t) {
      mem->write(k.row(t), v.row(t));
      const RowVectorXd o = mem->read(k.row(t));
      worst = std::max(worst, (o - RowVectorXd(ref.o.row(t))).cwiseAbs().maxCoeff());
    }
    const MatrixXd S = state_of(*mem, d);
    const double scale = ref.state.cwiseAbs().maxCoeff();
    worst = std::max(worst, (S - MatrixXd(ref.state)).cwiseAbs().maxCoeff()) / scale;
    std::printf("[recall] %s vs matrix_rule_primal: max relative difference %.3g\n", memory_name(m), worst);
    EXPECT_LE(worst, 1e-12) << memory_name(m);
    EXPECT_EQ(mem->state_size(), state_size(m, p, P));
  }
}

// The MLP members' start, written out: W₁ entries N(0, 1/d) from Rng(seed, kMlpStream), W₂ = 0.
struct RecallMlpRef {
  MatrixXd w1, w2, m1, m2;  // weights and momentum
  RecallMlpRef(int d, std::uint64_t seed) : w1(d, 4 * d), w2(MatrixXd::Zero(4 * d, d)) {
    Rng rng(seed, kMlpStream);
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < 4 * d; ++j) w1(i, j) = rng.normal() / std::sqrt(static_cast<double>(d));
    m1 = MatrixXd::Zero(d, 4 * d);
    m2 = MatrixXd::Zero(4 * d, d);
  }
  RowVectorXd read(const RowVectorXd& q) const {
    return (q * w1).unaryExpr([](double a) { return gelu_tanh(a); }) * w2;
  }
  // ∇ of the loss whose gradient at the output is dz(output), at (W₁, W₂) = (a, b).
  template <class Dz>
  static std::pair<MatrixXd, MatrixXd> grad(const MatrixXd& a, const MatrixXd& b, const RowVectorXd& k, Dz dz_of) {
    const RowVectorXd pre = k * a;
    const RowVectorXd h = pre.unaryExpr([](double x) { return gelu_tanh(x); });
    const RowVectorXd dz = dz_of(RowVectorXd(h * b));
    const RowVectorXd da = (dz * b.transpose()).cwiseProduct(pre.unaryExpr([](double x) { return gelu_tanh_grad(x); }));
    return {k.transpose() * da, h.transpose() * dz};
  }
};

MatrixXd recall_orthogonalise(const MatrixXd& m) {  // Muon's quintic Newton–Schulz, five steps
  const bool tall = m.rows() > m.cols();
  MatrixXd x = tall ? MatrixXd(m.transpose()) : m;
  x /= x.norm() + 1e-7;
  for (int i = 0; i < 5; ++i) {
    const MatrixXd a = x * x.transpose();
    x = 3.4445 * x + (-4.7750 * a + 2.0315 * a * a) * x;
  }
  return tall ? MatrixXd(x.transpose()) : x;
}

// Titans: at the start of each mini-batch of b pairs W ← (1 − ηλ)W and the gradients of the batch are
// taken there; every pair then steps M ← μM + G, W ← W − ηM (½‖f(k) − v‖²). LaCT: a chunk of C pairs
// is invisible until full; then G = Σ −∇⟨f(k), v⟩ at the chunk's start, M ← μM + G, W ← W − η NS(M).
TEST(Recall, TitansAndLactAreTheirUpdatesWrittenOut) {
  const int d = 12, P = 37;
  const std::uint64_t seed = 13;
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  const Embedding emb(d, seed);
  const Episode e = make_episode(P, seed, 2);
  MemoryParams p;
  p.width = d;
  p.seed = seed;
  p.titans_chunk = 5;
  p.lact_chunk = 6;
  const double eta = default_eta_mlp(d), mu = kMomentum, lambda = kWeightDecay;
  auto titans = make_memory(Memory::Titans, p);
  auto lact = make_memory(Memory::Lact, p);
  RecallMlpRef rt(d, seed), rl(d, seed);
  MatrixXd s1, s2;  // Titans' mini-batch start
  std::vector<int> pending;
  double worst_t = 0, worst_l = 0;
  for (int t = 0; t < P; ++t) {
    const RowVectorXd k = emb.row(e.keys[static_cast<std::size_t>(t)]);
    const RowVectorXd v = emb.row(e.values[static_cast<std::size_t>(t)]);
    if (t % p.titans_chunk == 0) {
      rt.w1 *= 1.0 - eta * lambda;
      rt.w2 *= 1.0 - eta * lambda;
      s1 = rt.w1;
      s2 = rt.w2;
    }
    const auto g = RecallMlpRef::grad(s1, s2, k, [&](const RowVectorXd& z) { return RowVectorXd(z - v); });
    rt.m1 = mu * rt.m1 + g.first;
    rt.m2 = mu * rt.m2 + g.second;
    rt.w1 -= eta * rt.m1;
    rt.w2 -= eta * rt.m2;
    titans->write(k, v);
    pending.push_back(t);
    if (static_cast<int>(pending.size()) == p.lact_chunk) {
      MatrixXd g1 = MatrixXd::Zero(d, 4 * d), g2 = MatrixXd::Zero(4 * d, d);
      for (const int i : pending) {
        const RowVectorXd vi = emb.row(e.values[static_cast<std::size_t>(i)]);
        const auto gi = RecallMlpRef::grad(rl.w1, rl.w2, emb.row(e.keys[static_cast<std::size_t>(i)]),
                                           [&](const RowVectorXd&) { return RowVectorXd(-vi); });
        g1 += gi.first;
        g2 += gi.second;
      }
      rl.m1 = mu * rl.m1 + g1;
      rl.m2 = mu * rl.m2 + g2;
      rl.w1 -= eta * recall_orthogonalise(rl.m1);
      rl.w2 -= eta * recall_orthogonalise(rl.m2);
      pending.clear();
    }
    lact->write(k, v);
    for (int i = 0; i <= t; ++i) {
      const RowVectorXd q = emb.row(e.keys[static_cast<std::size_t>(i)]);
      const RowVectorXd a = titans->read(q), b = lact->read(q);
      worst_t = std::max(worst_t, (a - rt.read(q)).cwiseAbs().maxCoeff() / std::max(1e-300, a.cwiseAbs().maxCoeff()));
      if (t >= p.lact_chunk - 1)
        worst_l = std::max(worst_l, (b - rl.read(q)).cwiseAbs().maxCoeff() / std::max(1e-300, b.cwiseAbs().maxCoeff()));
      else
        EXPECT_EQ(b.cwiseAbs().maxCoeff(), 0.0) << "LaCT stores nothing before its first chunk is full";
    }
  }
  std::printf("[recall] written out vs the memory: Titans %.3g, LaCT %.3g (max relative difference)\n", worst_t,
              worst_l);
  EXPECT_LE(worst_t, 1e-12);
  EXPECT_LE(worst_l, 1e-12);
  // Weights, momentum, the mini-batch's start; LaCT's P mod C pending pairs of 2d numbers each.
  EXPECT_EQ(titans->state_size(), 24L * d * d);
  EXPECT_EQ(state_size(Memory::Titans, p, P), 24L * d * d);
  EXPECT_EQ(lact->state_size(), 16L * d * d + 2L * d * (P % p.lact_chunk));
  EXPECT_EQ(state_size(Memory::Lact, p, P), lact->state_size());
  EXPECT_EQ(weight_size(Memory::Lact, d, P), 8L * d * d);
}

// At d = 32 every designed member recalls a few pairs (LaCT once its chunk is full) and loses pairs
// once P is well past d; Gated DeltaNet's decay makes it forget its oldest pairs, as Mamba-2's does.
TEST(Recall, DesignedMembersRecallFewPairsAndForgetTheOldest) {
  const int d = 32;
  for (const Memory m : {Memory::DeltaNet, Memory::GatedDeltaNet, Memory::Titans}) {
    const double small = accuracy(m, d, 8, 8, kSeed), large = accuracy(m, d, 128, 4, kSeed);
    std::printf("[recall] seed %llu, d = 32: %s P = 8: %.4f, P = 128: %.4f\n", static_cast<unsigned long long>(kSeed),
                memory_name(m), small, large);
    EXPECT_GE(small, 0.85) << memory_name(m);
    EXPECT_LE(large, 0.7) << memory_name(m);
  }
  EXPECT_LE(accuracy(Memory::Lact, d, 8, 8, kSeed), 0.1);  // C = 16: nothing stored yet
  EXPECT_GE(accuracy(Memory::Lact, d, 16, 8, kSeed), 0.9);
  const int P = 96;
  const Embedding emb(d, kSeed);
  MemoryParams p;
  p.width = d;
  p.seed = kSeed;
  double oldest = 0, newest = 0;
  for (int s = 0; s < 4; ++s) {
    const auto map = forgetting_rows(Memory::GatedDeltaNet, make_episode(P, kSeed, static_cast<std::uint64_t>(s)), emb, p);
    for (int i = 0; i < 8; ++i) {
      oldest += map[static_cast<std::size_t>((P - 1) * P + i)];
      newest += map[static_cast<std::size_t>((P - 1) * P + P - 1 - i)];
    }
  }
  std::printf("[recall] Gated DeltaNet, P = 96: newest 8 %.3f, oldest 8 %.3f\n", newest / 32, oldest / 32);
  EXPECT_GE(newest / 32, 0.9);
  EXPECT_LE(oldest / 32, 0.2);
}

TEST(Recall, DesignedMembersRejectBadParameters) {
  MemoryParams p;
  p.width = 8;
  p.lact_chunk = 0;
  EXPECT_THROW(make_memory(Memory::Lact, p), std::invalid_argument);
  p.lact_chunk = 16;
  p.momentum = 1.0;
  EXPECT_THROW(make_memory(Memory::Titans, p), std::invalid_argument);
  p.momentum = kMomentum;
  p.delta_beta = 0;
  EXPECT_THROW(make_memory(Memory::DeltaNet, p), std::invalid_argument);
  EXPECT_THROW(make_memory(static_cast<Memory>(kMemories), MemoryParams{}), std::invalid_argument);
}

}  // namespace
}  // namespace tttlab::recall
