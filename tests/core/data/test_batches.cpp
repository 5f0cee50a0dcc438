// Training windows (determinism, range, exact resumption from the saved state) and validation
// windows (every target scored exactly once, fixed layout, short last batch, position state).
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "tttlab/data/batches.hpp"

namespace tttlab {
namespace {

std::vector<std::uint8_t> ramp(std::size_t n) {
  std::vector<std::uint8_t> d(n);
  for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<std::uint8_t>(i % 251);
  return d;
}

TEST(RandomWindowSampler, RowsAreContiguousWindowsInRange) {
  const auto data = ramp(1000);
  RandomWindowSampler s(data, 4, 16, 123);
  std::set<std::int64_t> starts;
  for (int k = 0; k < 200; ++k) {
    const TokenBatch b = s.next();
    ASSERT_EQ(b.batch, 4);
    ASSERT_EQ(b.seq_len, 16);
    ASSERT_EQ(b.tokens.size(), 4u * 17u);
    EXPECT_TRUE(b.mask.empty());
    EXPECT_EQ(b.counted_targets(), 64);
    for (int r = 0; r < 4; ++r) {
      const std::int64_t st = b.starts[r];
      ASSERT_GE(st, 0);
      ASSERT_LE(st, 1000 - 17);
      starts.insert(st);
      for (int t = 0; t <= 16; ++t) ASSERT_EQ(b.at(r, t), data[st + t]);
      EXPECT_EQ(b.target(r, 3), b.input(r, 4));
    }
  }
  EXPECT_GT(starts.size(), 500u);  // 800 draws over 984 starts cover most of them
}

TEST(RandomWindowSampler, EveryStartIsReachableIncludingTheLast) {
  const auto data = ramp(12);
  RandomWindowSampler s(data, 8, 10, 5);  // starts 0 and 1 only
  std::set<std::int64_t> starts;
  for (int k = 0; k < 20; ++k)
    for (auto st : s.next().starts) starts.insert(st);
  EXPECT_EQ(starts, (std::set<std::int64_t>{0, 1}));
  EXPECT_EQ(s.valid_starts(), 2u);
}

TEST(RandomWindowSampler, DeterministicAndResumesExactly) {
  const auto data = ramp(5000);
  RandomWindowSampler a(data, 3, 32, 99);
  for (int k = 0; k < 7; ++k) a.next();
  const auto words = a.state().to_words();
  std::vector<std::vector<Token>> expected;
  for (int k = 0; k < 5; ++k) expected.push_back(a.next().tokens);

  RandomWindowSampler b(data, 3, 32, 0);  // seed comes from the restored state
  b.set_state(SamplerState::from_words(words));
  for (int k = 0; k < 5; ++k) EXPECT_EQ(b.next().tokens, expected[k]) << "batch " << 7 + k;
  EXPECT_EQ(a.state(), b.state());
  EXPECT_EQ(a.batch_at(8).tokens, expected[1]);

  RandomWindowSampler other_seed(data, 3, 32, 100);
  EXPECT_NE(other_seed.batch_at(7).tokens, expected[0]);
}

TEST(RandomWindowSampler, RejectsBadShapes) {
  const auto data = ramp(10);
  EXPECT_THROW(RandomWindowSampler(data, 0, 4, 1), std::invalid_argument);
  EXPECT_THROW(RandomWindowSampler(data, 1, 0, 1), std::invalid_argument);
  EXPECT_THROW(RandomWindowSampler(data, 1, 10, 1), std::invalid_argument);  // needs 11 tokens
  EXPECT_NO_THROW(RandomWindowSampler(data, 1, 9, 1));
}

TEST(SequentialWindows, ScoresEveryTargetExactlyOnce) {
  const auto data = ramp(103);
  SequentialWindows v(data, 4, 10);
  EXPECT_EQ(v.windows(), 10);  // (103 − 1) / 10
  EXPECT_EQ(v.batches(), 3);
  EXPECT_EQ(v.scored_targets(), 100);
  std::vector<int> scored(data.size(), 0);
  TokenBatch b;
  int batches = 0;
  while (v.next(b)) {
    ++batches;
    for (int r = 0; r < b.batch; ++r) {
      const std::int64_t st = b.starts[r];
      EXPECT_EQ(st % 10, 0);
      for (int t = 0; t < 10; ++t) {
        ASSERT_EQ(b.input(r, t), data[st + t]);
        ++scored[st + t + 1];
      }
    }
  }
  EXPECT_EQ(batches, 3);
  EXPECT_EQ(b.batch, 2);  // the last batch holds windows 8 and 9
  for (std::size_t i = 1; i <= 100; ++i) EXPECT_EQ(scored[i], 1) << i;
  EXPECT_EQ(scored[0], 0);
  EXPECT_EQ(scored[101] + scored[102], 0);  // the tail shorter than T is not scored
  EXPECT_FALSE(v.next(b));
}

TEST(SequentialWindows, PositionStateAndWindowCap) {
  const auto data = ramp(1000);
  SequentialWindows v(data, 5, 16, 12);
  EXPECT_EQ(v.windows(), 12);
  EXPECT_EQ(v.batches(), 3);
  TokenBatch first, again;
  v.next(first);
  v.next(first);  // batch 1
  v.set_position(1);
  v.next(again);
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(v.position(), 2);
  EXPECT_THROW(v.set_position(4), std::out_of_range);
  EXPECT_THROW(v.batch_at(3), std::out_of_range);
  v.reset();
  EXPECT_EQ(v.position(), 0);
}

}  // namespace
}  // namespace tttlab
