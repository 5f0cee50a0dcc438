// The whole TTT layer's backward (projections, convs, RoPE, η gate, τ clamp, inner loop, post-norm,
// gate, o_proj) against central finite differences in fp64, for every parameter tensor by name.
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "core/nn/grad_check.hpp"
#include "tttlab/ttt/layer.hpp"
#include "tttlab/verify.hpp"

namespace tttlab {
namespace {

class LayerBackward : public ::testing::TestWithParam<std::tuple<InnerModel, bool /*mamba*/>> {};

TEST_P(LayerBackward, EveryParameterAndTheInputMatchFiniteDifferences) {
  const auto [model, mamba] = GetParam();
  TTTLayerConfig cfg;
  cfg.width = 8;
  cfg.heads = 2;
  cfg.inner.model = model;
  cfg.inner.mini_batch = 4;
  cfg.inner.mlp_expansion = 2;
  cfg.share_qk = cfg.use_gate = mamba;
  TTTLayerParams<double> params = random_layer_params<double>(cfg, 42);
  params.token_idx_offset(2) = -0.5;  // τ_3 = max(1/3 − 0.5, 0) = 0: the clamp is active there
  TTTLayer<double> layer(cfg, params);
  std::mt19937_64 rng(43);
  std::normal_distribution<double> n01;
  const int T = 11;  // two full mini-batches and a short one
  Mat<double> x(T, cfg.width), W(T, cfg.width);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = n01(rng);
  for (Eigen::Index i = 0; i < W.size(); ++i) W.data()[i] = n01(rng);

  auto loss = [&] { return (layer.forward(x).array() * W.array()).sum(); };
  TTTLayerCache<double> cache;
  const Mat<double> y = layer.forward_train(x, cache);
  ASSERT_LT((y - layer.forward(x)).cwiseAbs().maxCoeff(), 1e-14);
  TTTLayerParams<double> grads = TTTLayerParams<double>::zeros(cfg);
  Mat<double> dx;
  layer.backward(cache, W, grads, dx);

  auto fd = [&](double& v) { return test::central_difference(v, loss); };
  double scale = std::max(1.0, dx.cwiseAbs().maxCoeff());
  for (Eigen::Index i = 0; i < x.size(); ++i)
    EXPECT_NEAR(dx.data()[i], fd(x.data()[i]), 1e-7 * scale) << "dx[" << i << "]";

  // Walk the analytic gradients and the live parameters side by side, tensor by tensor.
  std::vector<std::pair<std::string, Eigen::Map<Mat<double>>>> g_list, p_list;
  grads.for_each(cfg, [&](Eigen::Map<Mat<double>> m, const std::string& name) { g_list.emplace_back(name, m); });
  layer.mutable_params().for_each(cfg, [&](Eigen::Map<Mat<double>> m, const std::string& name) {
    p_list.emplace_back(name, m);
  });
  ASSERT_EQ(g_list.size(), p_list.size());
  int checked = 0;
  for (size_t k = 0; k < g_list.size(); ++k) {
    const auto& [name, g] = g_list[k];
    auto& pm = p_list[k].second;
    ASSERT_EQ(name, p_list[k].first);
    const double s = std::max(1.0, g.cwiseAbs().maxCoeff());
    for (Eigen::Index i = 0; i < pm.size(); ++i) {
      EXPECT_NEAR(g.data()[i], fd(pm.data()[i]), 1e-7 * s) << name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
  // The clamped τ entry gets no gradient; an active one does.
  EXPECT_EQ(grads.token_idx_offset(2), 0.0);
  EXPECT_NE(grads.token_idx_offset(1), 0.0);
}

INSTANTIATE_TEST_SUITE_P(ModelsAndBackbones, LayerBackward,
                         ::testing::Combine(::testing::Values(InnerModel::Linear, InnerModel::MLP),
                                            ::testing::Bool()));

}  // namespace
}  // namespace tttlab
