// The sequence layers behind one interface: TTT-Linear, TTT-MLP, linear attention, softmax attention,
// Mamba-2 (whose own tests are tests/core/test_mamba2.cpp), DeltaNet and Gated DeltaNet (theirs:
// tests/core/test_deltanet_layer.cpp).
// Every layer streams (chunks and single tokens give the full forward), its backward matches finite
// differences in fp64, and the TTT layer in the Theorem 1 configuration IS the linear-attention layer.
#include <gtest/gtest.h>

#include <random>

#include "core/nn/grad_check.hpp"
#include "tttlab/seq/attention_layers.hpp"
#include "tttlab/seq/deltanet_layer.hpp"
#include "tttlab/seq/mamba2_layer.hpp"
#include "tttlab/seq/titans_layer.hpp"
#include "tttlab/ttt/layer.hpp"
#include "tttlab/verify.hpp"

namespace tttlab {
namespace {

std::unique_ptr<SequenceLayer<double>> make_layer(const std::string& kind, int D, int H, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01;
  auto normal = [&] { return n01(rng); };
  if (kind == "ttt-linear" || kind == "ttt-mlp") {
    TTTLayerConfig c;
    c.width = D;
    c.heads = H;
    c.inner.model = kind == "ttt-mlp" ? InnerModel::MLP : InnerModel::Linear;
    c.inner.mini_batch = 4;
    c.inner.mlp_expansion = 2;
    c.share_qk = c.use_gate = true;
    return std::make_unique<TTTLayer<double>>(c, random_layer_params<double>(c, seed));
  }
  if (kind == "mamba2") {
    // H heads of the inner width 2·D, chunks of 4 so that T = 13 and 9 end in a short chunk.
    Mamba2Config m;
    m.width = D;
    m.headdim = 2 * D / H;
    m.d_state = 4;
    m.chunk_size = 4;
    Rng r(seed);
    return std::make_unique<Mamba2Layer<double>>(m, Mamba2Params<double>::init(m, 0.3, r));
  }
  if (kind == "deltanet" || kind == "gated-deltanet") {
    // Chunks of 4, so that T = 13 and 9 end in a short chunk.
    DeltaNetConfig c;
    c.width = D, c.heads = H, c.chunk_size = 4, c.gated = kind == "gated-deltanet";
    Rng r(seed);
    return std::make_unique<DeltaNetLayer<double>>(c, DeltaNetParams<double>::init(c, 0.3, r));
  }
  if (kind == "titans") {
    // Mini-batches of 4, so that T = 13 and 9 end in a short one.
    TitansLayerConfig c;
    c.width = D, c.heads = H, c.mini_batch = 4;
    Rng r(seed);
    return std::make_unique<TitansLayer<double>>(c, TitansParams<double>::init(c, 0.3, r));
  }
  AttentionConfig a{D, H, true, 1e4};
  // Scale 0.3 instead of 0.02 so the attention patterns are far from uniform.
  AttentionParams<double> p = AttentionParams<double>::init(a, [&] { return 15.0 * normal(); });
  if (kind == "linear-attention") return std::make_unique<LinearAttentionLayer<double>>(a, p);
  return std::make_unique<SoftmaxAttentionLayer<double>>(a, p);
}

class EveryLayer : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryLayer, StreamingInChunksAndTokensMatchesTheFullForward) {
  auto layer = make_layer(GetParam(), 8, 2, 1);
  std::mt19937_64 rng(2);
  std::normal_distribution<double> n01;
  const int T = 13;
  Mat<double> x(T, 8);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = n01(rng);
  const Mat<double> ref = layer->forward(x);
  auto st = layer->start();
  Mat<double> y(T, 8);
  y.topRows(5) = layer->forward(*st, x.topRows(5));
  for (int t = 5; t < T; ++t) y.row(t) = layer->forward(*st, x.row(t));
  EXPECT_LT((y - ref).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_EQ(st->tokens, T);
  // The training forward computes the same function.
  Mat<double> yt;
  layer->forward_train(x, yt);
  EXPECT_LT((yt - ref).cwiseAbs().maxCoeff(), 1e-12);
}

TEST_P(EveryLayer, BackwardMatchesFiniteDifferences) {
  auto layer = make_layer(GetParam(), 8, 2, 3);
  std::mt19937_64 rng(4);
  std::normal_distribution<double> n01;
  const int T = 9;
  Mat<double> x(T, 8), W(T, 8);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = n01(rng);
  for (Eigen::Index i = 0; i < W.size(); ++i) W.data()[i] = n01(rng);
  Mat<double> y, dx;
  auto cache = layer->forward_train(x, y);
  auto grads = layer->zeros_like();
  layer->backward(*cache, W, *grads, dx);
  auto loss = [&] { return (layer->forward(x).array() * W.array()).sum(); };
  auto fd = [&](double& v) { return test::central_difference(v, loss); };
  const double sx = std::max(1.0, dx.cwiseAbs().maxCoeff());
  for (Eigen::Index i = 0; i < x.size(); ++i) EXPECT_NEAR(dx.data()[i], fd(x.data()[i]), 1e-7 * sx);
  std::vector<Eigen::Map<Mat<double>>> gs, ps;
  std::vector<std::string> names;
  grads->for_each_param([&](Eigen::Map<Mat<double>> m, const std::string& n) { gs.push_back(m); names.push_back(n); });
  layer->for_each_param([&](Eigen::Map<Mat<double>> m, const std::string&) { ps.push_back(m); });
  ASSERT_EQ(gs.size(), ps.size());
  for (size_t k = 0; k < gs.size(); ++k) {
    const double s = std::max(1.0, gs[k].cwiseAbs().maxCoeff());
    // Every entry of small tensors; a strided sample of the larger ones.
    const Eigen::Index step = std::max<Eigen::Index>(1, ps[k].size() / 24);
    for (Eigen::Index i = 0; i < ps[k].size(); i += step)
      EXPECT_NEAR(gs[k].data()[i], fd(ps[k].data()[i]), 1e-7 * s) << names[k] << "[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, EveryLayer,
                         ::testing::Values("ttt-linear", "ttt-mlp", "linear-attention", "softmax-attention", "mamba2",
                                           "deltanet", "gated-deltanet", "titans"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(Theorem1, TttLayerEqualsLinearAttentionLayer) {
  const int D = 16, H = 2, T = 20;
  const TTTLayerConfig cfg = TTTLayerConfig::linear_attention_equivalent(D, H, T);
  TTTLayerParams<double> p = random_layer_params<double>(cfg, 9);
  for (auto& w : p.W0) w.set_zero();
  TTTLayer<double> ttt(cfg, p);
  LinearAttentionLayer<double> lin(AttentionConfig{D, H, false, 1e4},
                                   AttentionParams<double>{p.wq, p.wk, p.wv, p.wo});
  std::mt19937_64 rng(10);
  std::normal_distribution<double> n01;
  Mat<double> x(T, D);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = n01(rng);
  const Mat<double> a = ttt.forward(x), b = lin.forward(x);
  EXPECT_LT((a - b).cwiseAbs().maxCoeff(), 1e-12 * std::max(1.0, b.cwiseAbs().maxCoeff()));
  // One extra mini-batch boundary breaks the equivalence: TTT with b < T is not linear attention.
  TTTLayerConfig cfg2 = cfg;
  cfg2.inner.mini_batch = T / 2;
  TTTLayerParams<double> p2 = p;
  p2.token_idx_offset = RowVec<double>::Zero(T / 2);
  TTTLayer<double> ttt2(cfg2, p2);
  EXPECT_GT((ttt2.forward(x) - b).cwiseAbs().maxCoeff(), 1e-6);
}

}  // namespace
}  // namespace tttlab
