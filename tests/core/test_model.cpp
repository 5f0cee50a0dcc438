// The language model end to end: gradients against finite differences in fp64 for every layer kind
// and both backbones (ttt-spec.md oracle 8), streaming equals the full forward, config.json round trip.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "tttlab/model/model.hpp"
#include "tttlab/train/ablation.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {
namespace {

ModelConfig tiny_test_config(SeqLayerKind kind, bool mamba) {
  ModelConfig c;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.num_hidden_layers = 2;
  c.intermediate_size = 24;
  c.mini_batch_size = 4;
  c.seq_layer = kind;
  c.mamba_backbone = mamba;
  c.ttt_base_lr = kind == SeqLayerKind::TTTMLP ? 0.1 : 1.0;
  c.initializer_range = 0.3;  // larger than 0.02 so that every path carries gradient worth checking
  return c;
}

std::vector<int> random_tokens(int n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<int> t(n);
  for (int& v : t) v = static_cast<int>(rng.below(256));
  return t;
}

class ModelGrad : public ::testing::TestWithParam<std::tuple<SeqLayerKind, bool>> {};

TEST_P(ModelGrad, SampledParametersMatchFiniteDifferences) {
  const auto [kind, mamba] = GetParam();
  Model<double> model(tiny_test_config(kind, mamba), 1);
  auto grads = model.zeros_like();
  const std::vector<int> tokens = random_tokens(19, 2);  // T = 18: a short last mini-batch
  const CrossEntropyStats st = model.train_sequence(tokens, {}, 18, *grads);
  EXPECT_NEAR(st.loss_sum, model.eval_sequence(tokens, {}).loss_sum, 1e-10);
  auto loss = [&] { return model.eval_sequence(tokens, {}).loss_sum / 18.0; };

  std::vector<std::pair<std::string, Eigen::Map<Mat<double>>>> gs, ps;
  grads->for_each_param([&](Eigen::Map<Mat<double>> m, const std::string& n) { gs.emplace_back(n, m); });
  model.for_each_param([&](Eigen::Map<Mat<double>> m, const std::string& n) { ps.emplace_back(n, m); });
  ASSERT_EQ(gs.size(), ps.size());
  Rng pick(3);
  // Central differences with one Richardson step, (4·D(h/2) − D(h)) / 3, which cancels the O(h²)
  // error. Through a whole model the loss is curved enough (TTT-MLP's inner biases above all) that a
  // plain central difference is off by ~1e-5 relative at h = 1e-6: measured on b2 of TTT-MLP, the
  // difference to the analytic value was 0.135, 1.35e-3, 1.35e-5 at h = 1e-5, 1e-6, 1e-7, shrinking as
  // h², so the analytic gradient is the limit.
  const double h = 2e-6;
  int checked = 0;
  for (size_t k = 0; k < ps.size(); ++k) {
    ASSERT_EQ(gs[k].first, ps[k].first);
    auto& p = ps[k].second;
    const auto& g = gs[k].second;
    // Three random entries of every tensor.
    for (int r = 0; r < 3; ++r) {
      const Eigen::Index i = static_cast<Eigen::Index>(pick.below(p.size()));
      const double v0 = p.data()[i];
      auto at = [&](double dv) {
        p.data()[i] = v0 + dv;
        const double l = loss();
        p.data()[i] = v0;
        return l;
      };
      const double d1 = (at(h) - at(-h)) / (2 * h), d2 = (at(h / 2) - at(-h / 2)) / h;
      const double fd = (4 * d2 - d1) / 3;
      EXPECT_NEAR(g.data()[i], fd, 1e-6 * std::max(1.0, std::abs(fd))) << ps[k].first << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 30);
}

INSTANTIATE_TEST_SUITE_P(
    LayersAndBackbones, ModelGrad,
    ::testing::Combine(::testing::Values(SeqLayerKind::TTTLinear, SeqLayerKind::TTTMLP,
                                         SeqLayerKind::LinearAttention, SeqLayerKind::SoftmaxAttention),
                       ::testing::Bool()));

TEST(Model, StreamingTokenByTokenEqualsOnePass) {
  for (SeqLayerKind kind : {SeqLayerKind::TTTLinear, SeqLayerKind::TTTMLP, SeqLayerKind::SoftmaxAttention}) {
    Model<double> model(tiny_test_config(kind, true), 4);
    const std::vector<int> tokens = random_tokens(23, 5);
    auto s1 = model.start();
    const Mat<double> full = model.forward(*s1, tokens);
    auto s2 = model.start();
    Mat<double> step(23, 256);
    step.topRows(6) = model.forward(*s2, std::span<const int>(tokens).first(6));
    for (int t = 6; t < 23; ++t) step.row(t) = model.forward(*s2, std::span<const int>(tokens).subspan(t, 1));
    EXPECT_LT((full - step).cwiseAbs().maxCoeff(), 1e-11) << to_string(kind);
  }
}

TEST(Model, ObservedForwardReportsEveryBlockHeadAndTokenAndChangesNothing) {
  Model<double> model(tiny_test_config(SeqLayerKind::TTTLinear, true), 6);
  const std::vector<int> tokens = random_tokens(10, 7);
  auto s1 = model.start(), s2 = model.start();
  const Mat<double> plain = model.forward(*s1, tokens);
  int calls = 0;
  double last_loss = 0;
  const Mat<double> observed = model.forward(*s2, tokens, [&](int block, int head, const InnerStepRecord<double>& r) {
    EXPECT_GE(block, 0);
    EXPECT_LT(head, 2);
    last_loss = r.loss_after;
    ++calls;
  });
  EXPECT_EQ(calls, 2 * 2 * 10);  // blocks × heads × tokens
  EXPECT_GT(last_loss, 0);
  EXPECT_LT((plain - observed).cwiseAbs().maxCoeff(), 1e-12);
  // mixer_input of block 0 is what that block's TTT layer was fed.
  const Mat<double> x0 = model.mixer_input(tokens, 0);
  EXPECT_EQ(x0.rows(), 10);
  EXPECT_EQ(x0.cols(), 16);
  EXPECT_THROW(model.mixer_input(tokens, 5), std::invalid_argument);
}

TEST(Model, PresetsHaveTheAdvertisedSize) {
  ModelConfig tiny = ModelConfig::preset("tiny");
  Model<float> m(tiny, 0);
  const long n = m.num_params();
  EXPECT_GT(n, 700'000);
  EXPECT_LT(n, 1'300'000);
  ModelConfig small = ModelConfig::preset("small");
  Model<float> s(small, 0);
  EXPECT_GT(s.num_params(), 10'000'000);
  EXPECT_LT(s.num_params(), 30'000'000);
  EXPECT_THROW(ModelConfig::preset("huge"), std::invalid_argument);
}

TEST(ModelConfig, JsonRoundTripAndErrors) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.seq_layer = SeqLayerKind::TTTMLP;
  c.ttt_base_lr = 0.1;
  c.eta_token_index = false;
  const ModelConfig r = ModelConfig::from_json(c.to_json());
  EXPECT_EQ(r.to_json(), c.to_json());
  EXPECT_NE(c.to_json().find("\"ttt_layer_type\": \"mlp\""), std::string::npos);
  EXPECT_THROW(ModelConfig::from_json("{\"hidden_size\": 10, \"num_attention_heads\": 3}"), std::invalid_argument);
  EXPECT_THROW(ModelConfig::from_json("{\"hidden_size\": \"big\"}"), std::invalid_argument);
  EXPECT_THROW(ModelConfig::from_json("[1, 2"), std::invalid_argument);
  EXPECT_THROW(ModelConfig::from_json("{\"ttt_layer_type\": \"conv\"}"), std::invalid_argument);
}

}  // namespace
}  // namespace tttlab

namespace tttlab {
namespace {

// Table 1's second row is the same function as its first: with the linear-attention layer's weights
// copied in, the TTT-equivalence model gives the same logits.
TEST(Ablation, TttEquivalenceRowIsLinearAttention) {
  ModelConfig base = ModelConfig::preset("tiny");
  base.hidden_size = 16;
  base.num_attention_heads = 2;
  base.num_hidden_layers = 2;
  base.intermediate_size = 24;
  base.initializer_range = 0.2;
  const auto rows = table1_rows(base, 12);
  ASSERT_EQ(rows.size(), 7u);
  Model<double> lin(rows[0].model, 1);
  Model<double> ttt(rows[1].model, 2);
  // Copy by name: the shared tensors have the same names; the TTT-only ones (W0 fixed at 0, the η
  // parameters, which the fixed η ignores) keep their values.
  std::map<std::string, Mat<double>> src;
  lin.for_each_param([&](Eigen::Map<Mat<double>> m, const std::string& n) { src[n] = m; });
  int copied = 0;
  ttt.for_each_param([&](Eigen::Map<Mat<double>> m, const std::string& n) {
    if (auto it = src.find(n); it != src.end()) {
      m = it->second;
      ++copied;
    }
  });
  EXPECT_EQ(copied, static_cast<int>(src.size()));
  const std::vector<int> tokens = random_tokens(12, 3);
  auto s1 = lin.start(), s2 = ttt.start();
  const Mat<double> a = lin.forward(*s1, tokens), b = ttt.forward(*s2, tokens);
  EXPECT_LT((a - b).cwiseAbs().maxCoeff(), 1e-10);
  // The next row (learnable W0, initialised away from 0) is a different function.
  Model<double> w0(rows[2].model, 2);
  w0.for_each_param([&](Eigen::Map<Mat<double>> m, const std::string& n) {
    if (auto it = src.find(n); it != src.end()) m = it->second;
  });
  auto s3 = w0.start();
  EXPECT_GT((w0.forward(*s3, tokens) - a).cwiseAbs().maxCoeff(), 1e-8);
}

}  // namespace
}  // namespace tttlab
