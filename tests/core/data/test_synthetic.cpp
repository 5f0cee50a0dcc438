// MQAR and copy tasks: the documented layout and mask, the answers being recoverable from the
// context (so the task is solvable), determinism per (seed, index), and config validation.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tttlab/data/synthetic.hpp"

namespace tttlab {
namespace {

TEST(Mqar, LayoutMaskAndAnswersFollowTheContext) {
  MqarConfig c;
  c.seq_len = 48;
  c.num_pairs = 10;
  c.num_queries = 6;
  const TokenBatch b = mqar_batch(c, 16, 7, 0);
  ASSERT_EQ(b.batch, 16);
  ASSERT_EQ(b.mask.size(), 16u * 48u);
  EXPECT_EQ(b.counted_targets(), 16 * 6);
  std::set<std::string> rows;
  for (int r = 0; r < b.batch; ++r) {
    std::map<Token, Token> kv;
    for (int i = 0; i < 10; ++i) {
      const Token k = b.at(r, 2 * i), v = b.at(r, 2 * i + 1);
      ASSERT_NE(c.keys.find(static_cast<char>(k)), std::string::npos);
      ASSERT_NE(c.values.find(static_cast<char>(v)), std::string::npos);
      ASSERT_TRUE(kv.emplace(k, v).second) << "keys must be distinct within a row";
      EXPECT_FALSE(b.counts(r, 2 * i));
      EXPECT_FALSE(b.counts(r, 2 * i + 1));
    }
    EXPECT_EQ(b.at(r, 20), '|');
    std::set<Token> queried;
    for (int t = 0; t < 48; ++t) {
      if (!b.counts(r, t)) continue;
      ASSERT_GT(t, 20);
      ASSERT_EQ((t - 21) % 2, 0) << "answers sit right after their query key";
      ASSERT_TRUE(kv.count(b.input(r, t))) << "a query asks a key of this row";
      EXPECT_EQ(b.target(r, t), kv[b.input(r, t)]) << "the target is the value paired with the key";
      EXPECT_TRUE(queried.insert(b.input(r, t)).second) << "queries are distinct";
    }
    EXPECT_EQ(queried.size(), 6u);
    for (int t = 21 + 12; t <= 48; ++t) EXPECT_EQ(b.at(r, t), '.');
    rows.insert(std::string(b.row(r).begin(), b.row(r).end()));
  }
  EXPECT_GT(rows.size(), 14u);  // rows differ
}

TEST(Mqar, DeterministicPerSeedAndIndex) {
  MqarConfig c;
  EXPECT_EQ(mqar_batch(c, 4, 1, 5).tokens, mqar_batch(c, 4, 1, 5).tokens);
  EXPECT_NE(mqar_batch(c, 4, 1, 5).tokens, mqar_batch(c, 4, 1, 6).tokens);
  EXPECT_NE(mqar_batch(c, 4, 1, 5).tokens, mqar_batch(c, 4, 2, 5).tokens);
}

TEST(Mqar, ValidationMessages) {
  auto msg = [](const MqarConfig& c) -> std::string {
    try {
      c.validate();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "valid";
  };
  MqarConfig c;
  EXPECT_EQ(msg(c), "valid");
  c.seq_len = 32;  // 8 pairs + 8 queries need 33 tokens = T + 1
  EXPECT_EQ(msg(c), "valid");
  c.seq_len = 31;
  EXPECT_NE(msg(c).find("need 33 tokens, more than T + 1 = 32"), std::string::npos) << msg(c);
  c = MqarConfig{};
  c.num_queries = 9;
  EXPECT_NE(msg(c).find("between 1 and the number of pairs"), std::string::npos);
  c = MqarConfig{};
  c.keys = "abc";
  EXPECT_NE(msg(c).find("8 pairs need as many distinct keys"), std::string::npos);
  c = MqarConfig{};
  c.values = "0a";
  EXPECT_NE(msg(c).find("shares one"), std::string::npos);
  c = MqarConfig{};
  c.keys = "ab|cdefgh";
  EXPECT_NE(msg(c).find("separator"), std::string::npos);
  EXPECT_THROW(mqar_batch(c, 1, 0, 0), std::invalid_argument);
}

TEST(Copy, LayoutAndMask) {
  CopyConfig c;
  c.seq_len = 40;
  c.min_len = 3;
  c.max_len = 12;
  const TokenBatch b = copy_batch(c, 64, 3, 0);
  std::set<int> lengths;
  for (int r = 0; r < b.batch; ++r) {
    int L = 0;
    while (b.at(r, L) != '|') ++L;
    lengths.insert(L);
    ASSERT_GE(L, 3);
    ASSERT_LE(L, 12);
    for (int i = 0; i < L; ++i) {
      EXPECT_NE(c.alphabet.find(static_cast<char>(b.at(r, i))), std::string::npos);
      EXPECT_EQ(b.at(r, L + 1 + i), b.at(r, i));
    }
    for (int t = 0; t < 40; ++t) {
      const bool answer = t >= L && t < 2 * L;
      EXPECT_EQ(b.counts(r, t), answer) << "row " << r << " t " << t;
      if (answer) {
        EXPECT_EQ(b.target(r, t), b.at(r, t - L)) << "target is the symbol being copied";
      }
    }
    for (int t = 2 * L + 1; t <= 40; ++t) EXPECT_EQ(b.at(r, t), '.');
  }
  EXPECT_GT(lengths.size(), 5u);
  EXPECT_EQ(copy_batch(c, 2, 9, 1).tokens, copy_batch(c, 2, 9, 1).tokens);
}

TEST(Copy, ValidationMessages) {
  CopyConfig c;
  c.seq_len = 31;  // max_len 16 needs 33
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = CopyConfig{};
  c.min_len = 0;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = CopyConfig{};
  c.alphabet = "aa";
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = CopyConfig{};
  c.pad = '|';
  EXPECT_THROW(c.validate(), std::invalid_argument);
  EXPECT_THROW(copy_batch(CopyConfig{}, 0, 1, 1), std::invalid_argument);
}

}  // namespace
}  // namespace tttlab
