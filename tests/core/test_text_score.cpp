// Scoring every byte of a text (tttlab/train/text_score.hpp): each target exactly once, the tail in
// one overlapping window, against the model's own eval_sequence window by window; and the next-byte
// accuracy the evaluation now reports on text.
#include <gtest/gtest.h>

#include <cmath>

#include "core/io/temp_dir.hpp"
#include "core/tiny_run.hpp"
#include "core/word_corpus.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/train/text_score.hpp"

namespace tttlab {
namespace {

TrainConfig score_config(const std::string& corpus) {
  return testing::tiny_train_config(corpus, {.steps = 10, .batch = 4, .seq_len = 32, .seed = 3, .threads = 2},
                                    testing::kSmallModel);
}

// The reference: each target's loss from eval_sequence on the window that scores it (the same
// windows as text_score.hpp describes), and how many argmax hits.
struct ScoreReference {
  std::vector<double> loss;
  long correct = 0;
};
ScoreReference reference(const Model<float>& m, std::span<const std::uint8_t> text, long T) {
  ScoreReference r;
  const long N = static_cast<long>(text.size()), targets = N - 1, full = targets / T, tail = targets - full * T;
  for (long w = 0; w < full; ++w) {
    const std::vector<int> tok(text.begin() + w * T, text.begin() + w * T + T + 1);
    Vec<float> pos;
    r.correct += m.eval_sequence(tok, {}, &pos).correct;
    for (long t = 0; t < T; ++t) r.loss.push_back(pos(t));
  }
  if (tail > 0) {
    const long window = std::min(T, targets);
    const std::vector<int> tok(text.end() - window - 1, text.end());
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(window), 0);
    for (long i = window - tail; i < window; ++i) mask[static_cast<std::size_t>(i)] = 1;
    Vec<float> pos;
    r.correct += m.eval_sequence(tok, mask, &pos).correct;
    for (long i = window - tail; i < window; ++i) r.loss.push_back(pos(i));
  }
  return r;
}

TEST(TextScore, EveryByteIsScoredOnceAndMatchesTheModelWindowByWindow) {
  testing::TempDir dir;
  const TrainConfig cfg = score_config(testing::write_word_corpus(dir.path(), 3000).string());
  Trainer t(cfg, TextData::load(cfg));
  for (int i = 0; i < 5; ++i) t.step();  // a model that predicts something
  const std::span<const std::uint8_t> all(t.data().train);
  // 3 full windows and a tail of 10 targets; exactly 3 windows; shorter than one window (one
  // window of its own length, on the host model).
  for (long n : {32L * 3 + 1 + 10, 32L * 3 + 1, 20L}) {
    const auto text = all.first(static_cast<std::size_t>(n));
    TextScoreOptions o;
    o.per_byte = true;
    std::int64_t last_done = 0, last_total = 0;
    o.progress = [&](std::int64_t d, std::int64_t tot) {
      EXPECT_GE(d, last_done);
      last_done = d;
      last_total = tot;
    };
    const TextScore s = score_text(t, text, o);
    const ScoreReference ref = reference(t.model(), text, 32);
    ASSERT_EQ(s.targets, n - 1) << "n = " << n;
    ASSERT_EQ(s.per_byte.size(), ref.loss.size());
    double sum = 0;
    for (std::size_t i = 0; i < ref.loss.size(); ++i) {
      EXPECT_NEAR(s.per_byte[i], ref.loss[i], 1e-5) << "byte " << i + 1 << " of " << n;
      sum += ref.loss[i];
    }
    EXPECT_NEAR(s.loss, sum / double(n - 1), 1e-6);
    EXPECT_NEAR(s.accuracy, double(ref.correct) / double(n - 1), 1e-12);
    EXPECT_EQ(last_done, last_total) << "progress reaches the end";
    EXPECT_EQ(s.tail_targets, (n - 1) % 32);
  }
  // The first windows only.
  TextScoreOptions first;
  first.max_windows = 2;
  const TextScore s2 = score_text(t, all.first(32 * 3 + 11), first);
  EXPECT_EQ(s2.targets, 64);
  EXPECT_EQ(s2.tail_targets, 0);
  EXPECT_THROW(score_text(t, all.first(1)), std::invalid_argument);
}

TEST(TextScore, EvaluationReportsNextByteAccuracyOnText) {
  testing::TempDir dir;
  TrainConfig cfg = score_config(testing::write_word_corpus(dir.path(), 3000).string());
  Trainer t(cfg, TextData::load(cfg));
  const EvalReport before = t.evaluate(4);
  while (!t.finished()) t.step();
  const EvalReport after = t.evaluate(4);
  ASSERT_TRUE(before.accuracy_measured && after.accuracy_measured);
  EXPECT_GE(before.accuracy, 0.0);
  EXPECT_LE(after.accuracy, 1.0);
  // Ten steps on a nine-word text already guess many next bytes (spaces, common letters).
  EXPECT_GT(after.accuracy, before.accuracy + 0.05) << "before " << before.accuracy << ", after " << after.accuracy;
}

TEST(TextScore, AShortTextIsOneWindowOfItsOwnLengthAndOneByteIsRefused) {
  TrainConfig cfg;
  cfg.seq_len = 64;
  EXPECT_EQ(fit_window_to_text(cfg, 65, "the text"), "");  // exactly one window of 64 targets
  EXPECT_EQ(cfg.seq_len, 64);
  const std::string note = fit_window_to_text(cfg, 20, "the text");
  EXPECT_EQ(cfg.seq_len, 19);
  EXPECT_EQ(note, "the text is shorter than one window of 64 bytes: scored as one window of 19");
  try {
    fit_window_to_text(cfg, 1, "'f.txt'");
    ADD_FAILURE() << "a 1-byte text was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "'f.txt' has fewer than 2 bytes: nothing to score");
  }
}

}  // namespace
}  // namespace tttlab
