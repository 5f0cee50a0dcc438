// Token embedding, the tied LM head and softmax cross-entropy: forward against the definitions,
// the tied gradient (both uses adding into one dE) and dlogits against central differences (fp64),
// masking, normalisation, numerical stability with huge logits, fp32 against fp64.
#include <cmath>
#include <vector>

#include "core/nn/grad_check.hpp"
#include "tttlab/nn/cross_entropy.hpp"
#include "tttlab/nn/embedding.hpp"

namespace tttlab {
namespace {

using test::check_gradient;
using test::dot;

// −log softmax(l)[y] straight from the definition (fine for moderate logits).
double naive_ce(const RowVec<double>& l, int y) {
  double z = 0;
  for (Eigen::Index j = 0; j < l.size(); ++j) z += std::exp(l(j));
  return -std::log(std::exp(l(y)) / z);
}

TEST(Embedding, LooksUpRowsAndRejectsOutOfRangeTokens) {
  std::mt19937_64 rng(41);
  const Mat<double> E = test::random_mat(k_byte_vocab, 8, rng);
  const std::vector<int> tokens{0, 255, 65, 65, 10};
  Mat<double> H;
  embedding_forward<double>(E, tokens, H);
  ASSERT_EQ(H.rows(), 5);
  for (int t = 0; t < 5; ++t) EXPECT_EQ(Mat<double>(H.row(t)), Mat<double>(E.row(tokens[t])));
  const std::vector<int> bad{3, 256};
  try {
    embedding_forward<double>(E, bad, H);
    ADD_FAILURE() << "token 256 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "embedding_forward: token 256 at position 1 is outside the vocabulary [0, 256)");
  }
  Mat<double> dE = Mat<double>::Zero(256, 8);
  const std::vector<int> negative{-1};
  EXPECT_THROW(embedding_backward<double>(negative, Mat<double>::Ones(1, 8), dE),
               std::invalid_argument);
}

// The whole tied path of a training step: H = E[tokens], Hf = H ⊙ s + P (a stand-in for the blocks,
// so that dHf → dH is non-trivial), logits = Hf·Eᵀ, loss = mean CE with one ignored position.
// dE must collect both uses; a repeated token collects both of its rows.
TEST(TiedEmbedding, GradientOfTiedMatrixMatchesFiniteDifferences) {
  std::mt19937_64 rng(42);
  const int V = 7, D = 4;
  Mat<double> E = test::random_mat(V, D, rng);
  const std::vector<int> tokens{3, 1, 3, 6, 0};
  const std::vector<int> targets{1, 3, k_ignore_target, 0, 3};
  const RowVec<double> s = test::random_row(D, rng);
  const Mat<double> P = test::random_mat(5, D, rng);
  auto hidden = [&](const Mat<double>& H) {
    Mat<double> Hf = H * s.asDiagonal();
    return Mat<double>(Hf + P);
  };
  auto loss = [&] {
    Mat<double> H, logits;
    embedding_forward<double>(E, tokens, H);
    tied_head_forward<double>(hidden(H), E, logits);
    return softmax_cross_entropy<double>(logits, targets).mean();
  };
  Mat<double> H, logits, dlogits, dHf;
  embedding_forward<double>(E, tokens, H);
  const Mat<double> Hf = hidden(H);
  tied_head_forward<double>(Hf, E, logits);
  softmax_cross_entropy<double>(logits, targets, &dlogits);
  Mat<double> dE = Mat<double>::Zero(V, D);
  tied_head_backward<double>(Hf, E, dlogits, &dHf, dE);
  embedding_backward<double>(tokens, Mat<double>(dHf * s.asDiagonal()), dE);
  EXPECT_TRUE(check_gradient("E (tied)", E, dE, loss));
  // The head alone, with respect to its input.
  Mat<double> Hf_var = Hf;
  auto head_loss = [&] {
    Mat<double> l;
    tied_head_forward<double>(Hf_var, E, l);
    return softmax_cross_entropy<double>(l, targets).mean();
  };
  EXPECT_TRUE(check_gradient("Hf", Hf_var, dHf, head_loss));
}

TEST(TiedEmbedding, HeadIsProductWithEmbeddingTranspose) {
  std::mt19937_64 rng(43);
  const Mat<double> E = test::random_mat(9, 5, rng), Hf = test::random_mat(4, 5, rng);
  Mat<double> logits;
  tied_head_forward<double>(Hf, E, logits);
  ASSERT_EQ(logits.rows(), 4);
  ASSERT_EQ(logits.cols(), 9);
  for (int t = 0; t < 4; ++t)
    for (int v = 0; v < 9; ++v) EXPECT_NEAR(logits(t, v), Hf.row(t).dot(E.row(v)), 1e-14);
  EXPECT_THROW(tied_head_forward<double>(Hf, E.leftCols(4), logits), std::invalid_argument);
}

TEST(CrossEntropy, LossesStatsAndGradientMatchDefinitionAndFiniteDifferences) {
  std::mt19937_64 rng(44);
  const int T = 6, V = 5;
  Mat<double> logits = test::random_mat(T, V, rng, 2.0);
  logits(4, 2) = 10.0;  // position 4 predicts 2 with certainty
  const std::vector<int> targets{0, k_ignore_target, 4, 1, 2, 3};
  Mat<double> dlogits;
  Vec<double> per;
  const CrossEntropyStats st = softmax_cross_entropy<double>(logits, targets, &dlogits, &per);
  EXPECT_EQ(st.counted, 5);
  double sum = 0;
  long correct = 0;
  for (int t = 0; t < T; ++t) {
    if (targets[t] == k_ignore_target) {
      EXPECT_EQ(per(t), 0.0);
      EXPECT_EQ(dlogits.row(t).squaredNorm(), 0.0);
      continue;
    }
    EXPECT_NEAR(per(t), naive_ce(logits.row(t), targets[t]), 1e-14);
    EXPECT_NEAR(dlogits.row(t).sum(), 0.0, 1e-16);  // softmax − onehot sums to zero
    sum += per(t);
    Eigen::Index arg;
    logits.row(t).maxCoeff(&arg);
    correct += arg == targets[t];
  }
  EXPECT_NEAR(st.loss_sum, sum, 1e-13);
  EXPECT_NEAR(st.mean(), sum / 5, 1e-14);
  EXPECT_EQ(st.correct, correct);
  EXPECT_GE(st.correct, 1);
  auto loss = [&] { return softmax_cross_entropy<double>(logits, targets).mean(); };
  EXPECT_TRUE(check_gradient("logits", logits, dlogits, loss));

  // An explicit denominator rescales the gradient: the gradient of loss_sum / 8.
  Mat<double> d8;
  softmax_cross_entropy<double>(logits, targets, &d8, nullptr, 8);
  EXPECT_TRUE(
      test::all_close("denominator 8", d8, Mat<double>(dlogits * (5.0 / 8.0)), {1e-15, 1e-16}));
}

TEST(CrossEntropy, BatchDenominatorGivesGradientOfBatchMean) {
  std::mt19937_64 rng(45);
  Mat<double> a = test::random_mat(3, 4, rng), b = test::random_mat(4, 4, rng);
  const std::vector<int> ta{1, k_ignore_target, 2}, tb{0, 3, 3, k_ignore_target};
  const long total = 2 + 3;
  auto batch_mean = [&] {
    return (softmax_cross_entropy<double>(a, ta).loss_sum +
            softmax_cross_entropy<double>(b, tb).loss_sum) /
           double(total);
  };
  Mat<double> da, db;
  softmax_cross_entropy<double>(a, ta, &da, nullptr, total);
  softmax_cross_entropy<double>(b, tb, &db, nullptr, total);
  EXPECT_TRUE(check_gradient("logits of sequence a", a, da, batch_mean));
  EXPECT_TRUE(check_gradient("logits of sequence b", b, db, batch_mean));
}

TEST(CrossEntropy, StableForHugeLogitsInBothPrecisions) {
  std::mt19937_64 rng(46);
  const Mat<double> base = test::random_mat(4, 6, rng);
  const std::vector<int> targets{0, 5, 2, 3};
  Mat<double> d0;
  Vec<double> l0;
  softmax_cross_entropy<double>(base, targets, &d0, &l0);
  for (double shift : {1e4, -1e4, 1e8}) {
    // A common shift changes nothing mathematically.
    const Mat<double> shifted = base.array() + shift;
    Mat<double> d;
    Vec<double> l;
    softmax_cross_entropy<double>(shifted, targets, &d, &l);
    // Rounding of base + shift in fp64: ≈ |shift|·1.1e-16 per logit.
    const double tol = 4 * std::abs(shift) * 1.2e-16 + 1e-15;
    EXPECT_TRUE(test::all_close("losses, shift " + std::to_string(shift), l, l0, {0, tol}));
    EXPECT_TRUE(test::all_close("dlogits, shift " + std::to_string(shift), d, d0, {0, tol}));
    Mat<float> df;
    Vec<float> lf;
    const Mat<float> shifted_f = shifted.cast<float>();
    softmax_cross_entropy<float>(shifted_f, targets, &df, &lf);
    EXPECT_TRUE(lf.allFinite() && df.allFinite()) << "shift " << shift;
    // In fp32 the shifted logits themselves carry an error of ½ulp(|shift|) = |shift|·6e-8, which
    // moves the losses by up to about twice that; at 1e8 that is O(1), so only finiteness is asked.
    if (std::abs(shift) <= 1e4) {
      const double tol32 = 4 * std::abs(shift) * 6e-8;
      EXPECT_TRUE(
          test::all_close("fp32 losses, shift " + std::to_string(shift), lf, l0, {0, tol32}));
    }
  }
  // Widely spread logits: exp(l − m) underflows to 0 for all but the max; the loss of the max
  // target is ≈ 0 and that of another target is ≈ the gap.
  Mat<float> wide(1, 3);
  wide << 100.0f, -100.0f, 0.0f;
  Vec<float> lw;
  Mat<float> dw;
  softmax_cross_entropy<float>(wide, std::vector<int>{1}, &dw, &lw);
  EXPECT_NEAR(lw(0), 200.0f, 1e-4f);
  EXPECT_NEAR(dw(0, 0), 1.0f, 1e-6f);
  EXPECT_NEAR(dw(0, 1), -1.0f, 1e-6f);
}

TEST(CrossEntropy, Fp32AgreesWithFp64) {
  std::mt19937_64 rng(47);
  const int T = 32, V = 256;
  const Mat<double> logits = test::random_mat(T, V, rng, 3.0);
  std::vector<int> targets(T);
  std::uniform_int_distribution<int> pick(0, V - 1);
  for (int& y : targets) y = pick(rng);
  targets[7] = k_ignore_target;
  Mat<double> d64;
  Vec<double> l64;
  const CrossEntropyStats s64 = softmax_cross_entropy<double>(logits, targets, &d64, &l64);
  Mat<float> d32;
  Vec<float> l32;
  const Mat<float> logits_f = logits.cast<float>();
  const CrossEntropyStats s32 = softmax_cross_entropy<float>(logits_f, targets, &d32, &l32);
  // Σ of 256 exps in fp32 (≈ 256·6e-8 relative at worst) and a log: ≲ 1e-5 on losses of O(10);
  // dlogits are ≤ 1/31 in size.
  EXPECT_TRUE(test::all_close("losses", l32, l64, {2e-6, 1e-5}));
  EXPECT_TRUE(test::all_close("dlogits", d32, d64, {1e-5, 1e-8}));
  EXPECT_NEAR(s32.mean(), s64.mean(), 1e-5);
  EXPECT_EQ(s32.counted, 31);
}

TEST(CrossEntropy, AllIgnoredAndBadInput) {
  const Mat<double> logits = Mat<double>::Ones(2, 3);
  Mat<double> d = Mat<double>::Constant(1, 1, 7.0);
  const CrossEntropyStats st = softmax_cross_entropy<double>(
      logits, std::vector<int>{k_ignore_target, k_ignore_target}, &d);
  EXPECT_EQ(st.counted, 0);
  EXPECT_EQ(st.mean(), 0.0);
  EXPECT_EQ(d.rows(), 2);
  EXPECT_EQ(d.squaredNorm(), 0.0);
  EXPECT_THROW(softmax_cross_entropy<double>(logits, std::vector<int>{0}), std::invalid_argument);
  EXPECT_THROW(softmax_cross_entropy<double>(logits, std::vector<int>{0, 3}),
               std::invalid_argument);
  EXPECT_THROW(softmax_cross_entropy<double>(logits, std::vector<int>{0, -2}),
               std::invalid_argument);
  EXPECT_THROW(softmax_cross_entropy<double>(logits, std::vector<int>{0, 1}, nullptr, nullptr, -1),
               std::invalid_argument);
}

}  // namespace
}  // namespace tttlab
