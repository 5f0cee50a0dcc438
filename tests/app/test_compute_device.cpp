// The panels' device choice (app/lab/engine/compute_device.hpp) without a GPU: the Compute menu's
// policy, the timing summaries every panel shows, and the primal-vs-dual module's GPU column driven by a
// stand-in GPU that computes the dual form on the CPU from the kernels' layouts — so the packing of a
// block's heads into those layouts and back is checked on every machine, not only on the GPU one.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>

#include "lab/engine/compute_device.hpp"
#include "lab/engine/engine.hpp"
#include "lab/evaluation/evaluation_module.hpp"
#include "lab/primal_dual/primal_dual_module.hpp"
#include "tttlab/ttt/inner.hpp"

namespace tttlab::lab {
namespace {

using namespace std::chrono_literals;

TEST(ComputeDevice, TimingSummaryIsMedianWithSpread) {
  const TimingSummary t = summarize_ms({3.0, 1.0, 2.0, 10.0}, 2);
  EXPECT_DOUBLE_EQ(t.median_ms, 2.5);
  EXPECT_DOUBLE_EQ(t.min_ms, 1.0);
  EXPECT_DOUBLE_EQ(t.max_ms, 10.0);
  EXPECT_EQ(t.repeats, 4);
  EXPECT_EQ(t.warmup, 2);
  EXPECT_EQ(format_timing(t), "2.50 ms (1.00–10.0, median of 4)");
  EXPECT_EQ(format_timing(summarize_ms({}, 0)), "not measured");
}

TEST(ComputeDevice, RequestsParseAndPrint) {
  for (ComputeRequest r : {ComputeRequest::Auto, ComputeRequest::CPU, ComputeRequest::GPU})
    EXPECT_EQ(parse_compute_request(to_string(r)), r);
  EXPECT_EQ(parse_compute_request("cuda"), ComputeRequest::GPU);
  EXPECT_THROW(parse_compute_request("tpu"), std::invalid_argument);
}

TEST(ComputeDevice, WithoutGpuKernelsEveryChoiceIsTheCpu) {
  ComputeChoice c;  // a build without CUDA: no factory
  for (ComputeRequest r : {ComputeRequest::Auto, ComputeRequest::CPU, ComputeRequest::GPU}) {
    c.set_request(r);
    const ComputeTarget t = c.target();
    EXPECT_EQ(t.gpu, nullptr);
    EXPECT_EQ(t.label.rfind("CPU", 0), 0u) << t.label;
    // Auto without kernels is the normal case (no note); asking for the GPU explains why not.
    EXPECT_EQ(t.note.empty(), r != ComputeRequest::GPU) << t.note;
  }
  const ComputeView v = c.view();
  EXPECT_FALSE(v.gpu_build);
  EXPECT_FALSE(v.gpu_available);
}

TEST(ComputeDevice, AFailingProbeIsANoteNotACrash) {
  ComputeDevices d;
  int calls = 0;
  d.gpu = [&calls](std::string& why) -> std::shared_ptr<GpuCompute> {
    ++calls;
    why = "no driver";
    return nullptr;
  };
  ComputeChoice c(d);
  EXPECT_EQ(c.target().gpu, nullptr);
  EXPECT_TRUE(c.target().note.empty());  // auto: the CPU is the expected answer without a GPU
  EXPECT_NE(c.view().note.find("no driver"), std::string::npos);
  c.set_request(ComputeRequest::GPU);
  EXPECT_NE(c.target().note.find("no driver"), std::string::npos);
  EXPECT_EQ(calls, 1);  // probed once for the process
  ComputeDevices t;
  t.gpu = [](std::string&) -> std::shared_ptr<GpuCompute> { throw std::runtime_error("driver crashed"); };
  ComputeChoice ct(t);
  ct.set_request(ComputeRequest::GPU);
  EXPECT_NE(ct.target().note.find("driver crashed"), std::string::npos);
}

// A stand-in GPU: the dual form of each head on the CPU (float), read from and written to the kernels'
// layouts exactly as the CUDA services are.
class CpuStandIn final : public GpuCompute {
 public:
  CpuStandIn() {
    m_info.kind = DeviceKind::CUDA;
    m_info.name = "stand-in GPU";
  }
  const DeviceInfo& device() const override { return m_info; }
  std::string ttt_forward_unsupported(const GpuHeads& g) const override {
    return g.mini_batch > 64 ? "b > 64" : std::string();
  }
  GpuRun ttt_forward(const GpuHeads& g, GpuMath, int warmup, int repeats) override {
    const int H = g.heads, T = g.T, d = g.d, hid = g.mlp ? 4 * d : d;
    GpuRun r;
    r.O.assign(static_cast<std::size_t>(T) * H * d, 0.0f);
    InnerOptions opt;
    opt.model = g.mlp ? InnerModel::MLP : InnerModel::Linear;
    opt.mini_batch = g.mini_batch;
    opt.layer_norm = g.layer_norm;
    opt.residual = g.residual;
    opt.bias = g.bias;
    opt.ln_eps = g.ln_eps;
    for (int h = 0; h < H; ++h) {
      Mat<float> Q(T, d), K(T, d), V(T, d);
      Vec<float> lam(T);
      for (int t = 0; t < T; ++t) {
        for (int c = 0; c < d; ++c) {
          const std::size_t e = (static_cast<std::size_t>(t) * H + h) * d + c;
          Q(t, c) = g.Q[e];
          K(t, c) = g.K[e];
          V(t, c) = g.V[e];
        }
        lam(t) = g.lambda[static_cast<std::size_t>(h) * T + t];
      }
      InnerHeadParams<float> p;
      p.ln_weight = Eigen::Map<const RowVec<float>>(g.ln_weight.data() + h * d, d);
      p.ln_bias = Eigen::Map<const RowVec<float>>(g.ln_bias.data() + h * d, d);
      p.tau = Eigen::Map<const Vec<float>>(g.tau.data(), g.mini_batch);
      InnerWeights<float> w = InnerWeights<float>::zeros(opt, d);
      w.W1 = Eigen::Map<const Mat<float>>(g.W1.data() + static_cast<std::size_t>(h) * d * hid, d, hid);
      if (g.bias) w.b1 = Eigen::Map<const RowVec<float>>(g.b1.data() + static_cast<std::size_t>(h) * hid, hid);
      if (g.mlp) {
        w.W2 = Eigen::Map<const Mat<float>>(g.W2.data() + static_cast<std::size_t>(h) * hid * d, hid, d);
        if (g.bias) w.b2 = Eigen::Map<const RowVec<float>>(g.b2.data() + static_cast<std::size_t>(h) * d, d);
      }
      auto st = InnerState<float>::start(w);
      Mat<float> O;
      inner_forward_dual<float>(opt, p, Q, K, V, lam, st, O);
      for (int t = 0; t < T; ++t)
        for (int c = 0; c < d; ++c) r.O[(static_cast<std::size_t>(t) * H + h) * d + c] = O(t, c);
    }
    r.warmup = warmup;
    r.ms.assign(static_cast<std::size_t>(repeats), 1.0);
    r.kernel = "stand-in";
    return r;
  }
  GpuRun linear_attention(const std::vector<float>&, const std::vector<float>&, const std::vector<float>&, int, int,
                          int, int, int) override {
    throw std::runtime_error("not in the stand-in");
  }
  std::string model_unsupported(const ModelConfig&) const override { return "the stand-in runs no models"; }
  std::unique_ptr<GpuModel> load_model(const Model<float>&, int, int) override {
    throw std::runtime_error("not in the stand-in");
  }
  std::string decode_unsupported(const ModelConfig&) const override { return "the stand-in decodes nothing"; }
  std::unique_ptr<TokenDecoder> decoder(const Model<float>&) override { throw std::runtime_error("not in the stand-in"); }

 private:
  DeviceInfo m_info;
};

std::shared_ptr<ComputeChoice> stand_in() {
  ComputeDevices d;
  d.gpu = [](std::string&) { return std::make_shared<CpuStandIn>(); };
  return std::make_shared<ComputeChoice>(d);
}

TEST(ComputeDevice, PrimalDualGpuColumnPacksEveryHeadOfEveryBlock) {
  // The shipped model (several blocks and heads): a head or block mixed up in the packing would show
  // as a difference far above float rounding.
  PrimalDualConfig c;
  c.head.source = HeadSource::Model;
  c.head.model_id = "shipped";
  c.head.text = "Every head of every block goes through the packing. ";
  c.precision = Precision::Double;
  c.timing_reps = 2;
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<PrimalDualModule>(std::make_shared<ModelLibrary>(), stand_in()));
  Engine e(std::move(mods));
  e.start();
  e.post(PrimalDualRun{c});
  ASSERT_TRUE(e.wait_quiescent(120s));
  const auto v = e.snapshot()->primal_dual;
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  ASSERT_TRUE(v->gpu_ran) << v->gpu_note;
  EXPECT_EQ(v->gpu_device, "stand-in GPU");
  ASSERT_GE(v->layers.size(), 2u);
  for (const LayerComparison& L : v->layers) {
    EXPECT_GT(L.heads, 1);
    EXPECT_LT(L.gpu_max_abs_diff, 1e-5 * L.max_abs_output) << "block " << L.block;
    EXPECT_EQ(L.gpu_time.repeats, 2);
    EXPECT_EQ(L.gpu_time.warmup, 2);
  }
  EXPECT_EQ(v->gpu_token_diff.size(), static_cast<std::size_t>(v->T));
}

TEST(ComputeDevice, PrimalDualSaysWhyTheGpuDidNotRun) {
  PrimalDualConfig c;
  c.head.source = HeadSource::Toy;
  c.head.text = "a mini-batch larger than the kernels take";
  c.head.d = 16;
  c.head.mini_batch = 128;
  c.timing_reps = 1;
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<PrimalDualModule>(std::make_shared<ModelLibrary>(), stand_in()));
  Engine e(std::move(mods));
  e.start();
  e.post(PrimalDualRun{c});
  ASSERT_TRUE(e.wait_quiescent(60s));
  const auto v = e.snapshot()->primal_dual;
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  EXPECT_FALSE(v->gpu_ran);
  EXPECT_NE(v->gpu_note.find("b > 64"), std::string::npos) << v->gpu_note;
}

TEST(ComputeDevice, EvaluationFallsBackToTheCpuWithANote) {
  EvalSettings s;
  s.models = {"shipped"};
  s.seq_len = 64;
  s.windows = 2;
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<EvaluationModule>(std::make_shared<ModelLibrary>(), stand_in()));
  Engine e(std::move(mods));
  e.start();
  e.post(EvaluationRun{s});
  ASSERT_TRUE(e.wait_quiescent(60s));
  const auto v = e.snapshot()->evaluation;
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  ASSERT_EQ(v->curves.size(), 1u);
  EXPECT_EQ(v->curves[0].windows_done, 2);
  EXPECT_EQ(v->curves[0].device.rfind("CPU", 0), 0u) << v->curves[0].device;
  EXPECT_NE(v->curves[0].note.find("stand-in runs no models"), std::string::npos) << v->curves[0].note;
}

}  // namespace
}  // namespace tttlab::lab
