// The CPU TokenDecoder (tttlab/model/decoder.hpp): it is Model::start() + Model::forward(stream, ...),
// so feeding a sequence in chunks must give exactly (bit for bit) the logits of Model::forward run on
// one stream with the same chunks, for every layer kind and backbone; and it validates its input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "core/tiny_run.hpp"
#include "tttlab/model/decoder.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {
namespace {

ModelConfig small_config(SeqLayerKind kind, bool mamba) {
  ModelConfig c = testing::tiny_model(
      {.hidden = 32, .layers = 2, .intermediate = 64, .mini_batch = 4, .seq_layer = kind, .mamba = mamba});
  c.ttt_base_lr = testing::official_base_lr(kind);
  return c;
}

TEST(CpuDecoder, ChunkedFeedGivesExactlyTheModelsStreamingLogits) {
  const std::uint64_t seed = 20251125;
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  // Chunk lengths cross mini-batch boundaries (b = 4) and mix one-token (primal) and longer (dual) feeds.
  const std::vector<int> chunks = {1, 3, 5, 1, 1, 7, 2, 4, 1};
  for (const auto kind : {SeqLayerKind::TTTLinear, SeqLayerKind::TTTMLP, SeqLayerKind::LinearAttention,
                          SeqLayerKind::SoftmaxAttention}) {
    for (const bool mamba : {true, false}) {
      SCOPED_TRACE(to_string(kind) + (mamba ? " m" : " t"));
      const Model<float> model(small_config(kind, mamba), seed);
      Rng rng(seed);
      const auto dec = make_cpu_decoder(model);
      EXPECT_EQ(dec->kind(), DeviceKind::CPU);
      EXPECT_FALSE(dec->describe().empty());
      auto ref = model.start();
      long fed = 0;
      for (const int n : chunks) {
        std::vector<int> tokens(n);
        for (int& t : tokens) t = static_cast<int>(rng.below(256));
        std::vector<float> got;
        dec->feed(tokens, got);
        const Mat<float> want = model.forward(*ref, tokens);
        fed += n;
        ASSERT_EQ(dec->position(), fed);
        ASSERT_EQ(got.size(), static_cast<std::size_t>(want.cols()));
        for (Eigen::Index v = 0; v < want.cols(); ++v)
          ASSERT_EQ(got[static_cast<std::size_t>(v)], want(want.rows() - 1, v)) << "after " << fed << " tokens, logit " << v;
      }
    }
  }
}

TEST(CpuDecoder, RefusesEmptyFeedsAndOutOfRangeTokens) {
  const Model<float> model(small_config(SeqLayerKind::TTTLinear, true), 1);
  const auto dec = make_cpu_decoder(model);
  std::vector<float> logits;
  EXPECT_THROW(dec->feed(std::span<const int>(), logits), std::invalid_argument);
  const int bad[1] = {256};
  EXPECT_THROW(dec->feed(bad, logits), std::invalid_argument);
  const int neg[1] = {-1};
  EXPECT_THROW(dec->feed(neg, logits), std::invalid_argument);
  EXPECT_EQ(dec->position(), 0);
}

TEST(GenerateTokens, GreedyFollowsTheArgmaxOfTheModelsStreamingLogits) {
  const Model<float> model(small_config(SeqLayerKind::TTTLinear, true), 7);
  const std::vector<int> prompt = {'T', 'h', 'e', ' ', 'c', 'a', 't'};
  GenerateOptions o;
  o.tokens = 12;
  o.temperature = 0;
  const auto dec = make_cpu_decoder(model);
  const std::vector<int> got = generate_tokens(*dec, prompt, o);
  auto ref = model.start();
  Mat<float> logits = model.forward(*ref, prompt);
  std::vector<int> want;
  for (int i = 0; i < o.tokens; ++i) {
    Eigen::Index best = 0;
    logits.row(logits.rows() - 1).maxCoeff(&best);  // the first of equal maxima, as sample_token
    want.push_back(static_cast<int>(best));
    const int tok[1] = {want.back()};
    logits = model.forward(*ref, tok);
  }
  EXPECT_EQ(got, want);
}

TEST(GenerateTokens, SamplingDrawsOnlyFromTheTopKAndRepeatsForASeed) {
  const std::uint64_t seed = 20261130;
  std::printf("[   INFO   ] seed %llu\n", static_cast<unsigned long long>(seed));
  std::vector<float> logits(256);
  Rng fill(seed);
  for (float& x : logits) x = static_cast<float>(fill.uniform() * 4.0);
  std::vector<int> order(256);
  for (int i = 0; i < 256; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  Rng a(seed), b(seed);
  for (int i = 0; i < 2000; ++i) {
    const int t = sample_token(logits, 1.5, 3, a);
    ASSERT_TRUE(t == order[0] || t == order[1] || t == order[2]) << "draw " << i << " gave " << t;
    ASSERT_EQ(sample_token(logits, 1.5, 3, b), t);
  }
  Rng c(seed);
  EXPECT_EQ(sample_token(logits, 50.0, 1, c), order[0]);  // top_k 1 is greedy at any temperature
}

TEST(GenerateTokens, RefusesOutOfRangeOptionsNamingTheField) {
  const auto refused = [](GenerateOptions o, const std::string& field) {
    try {
      o.validate();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what()).rfind(field, 0) == 0;
    }
    return false;
  };
  GenerateOptions o;
  EXPECT_NO_THROW(o.validate());
  o.temperature = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(refused(o, "temperature"));
  o = {};
  o.temperature = -0.5;
  EXPECT_TRUE(refused(o, "temperature"));
  o = {};
  o.top_k = 257;
  EXPECT_TRUE(refused(o, "top_k"));
  o = {};
  o.tokens = -1;
  EXPECT_TRUE(refused(o, "tokens"));
  const Model<float> model(small_config(SeqLayerKind::TTTLinear, true), 1);
  const auto dec = make_cpu_decoder(model);
  EXPECT_THROW(generate_tokens(*dec, std::span<const int>(), GenerateOptions{}), std::invalid_argument);
}

}  // namespace
}  // namespace tttlab
