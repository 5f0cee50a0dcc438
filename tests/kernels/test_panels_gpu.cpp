// The desktop app's computing panels on the GPU (app/compute/cuda_compute.hpp), driven through their
// engine modules without drawing, and compared with the same modules on the CPU: primal vs dual (the
// CUDA dual form beside the CPU primal reference, and Theorem 1's reduction), the mini-batch lab
// (the loss per b from the GPU, its timings with spread), evaluation and the latency lab (every point
// timed on the GPU beside the CPU).
//
// Tolerances. The GPU computes in fp32 (3xTF32 tensor-core products, fp32 GEMMs in the model), the
// CPU reference in fp64 (primal vs dual) or fp32 (models): outputs agree to a relative 1e-5 of their
// largest magnitude, losses to 1e-4 nats (a sum of thousands of fp32 log-probabilities, each within
// ~1e-6, in a different order).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "compute/cuda_compute.hpp"
#include "lab/engine/compute_device.hpp"
#include "lab/engine/engine.hpp"
#include "lab/inner_curves/curves_module.hpp"
#include "lab/evaluation/evaluation_module.hpp"
#include "lab/evolution/evolution_module.hpp"
#include "lab/generation/generation_module.hpp"
#include "lab/latency/latency_module.hpp"
#include "lab/minibatch/minibatch_module.hpp"
#include "lab/primal_dual/primal_dual_module.hpp"
#include "require_gpu.hpp"

namespace tttlab::lab {
namespace {

using namespace std::chrono_literals;

// The GPU services, or a skip that says why there are none.
std::shared_ptr<ComputeChoice> gpu_choice(std::string& why_not) {
  // The shipped model and the Brown corpus are found from the source tree.
  ::setenv("TTTLAB_HOME", TTTLAB_SOURCE_DIR, 1);
  ComputeDevices d;
  d.gpu = [](std::string& why) { return compute::make_cuda_compute(why); };
  auto choice = std::make_shared<ComputeChoice>(d);
  choice->set_request(ComputeRequest::GPU);
  if (!choice->target().gpu) {
    why_not = choice->target().note;
    return nullptr;
  }
  return choice;
}

#define REQUIRE_GPU(choice)                                     \
  TTTLAB_REQUIRE_GPU();                                         \
  std::string why_not;                                          \
  const auto choice = gpu_choice(why_not);                      \
  if (!choice) GTEST_SKIP() << "no CUDA device: " << why_not

template <class Module, class Command, class View>
std::shared_ptr<const View> run_module(std::shared_ptr<ComputeChoice> compute, const Command& cmd,
                                       std::shared_ptr<const View> Snapshot::*field) {
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<Module>(std::make_shared<ModelLibrary>(), std::move(compute)));
  Engine e(std::move(mods));
  e.start();
  e.post(cmd);
  EXPECT_TRUE(e.wait_quiescent(300s));
  return e.snapshot().get()->*field;
}

PrimalDualConfig toy(InnerModel m, int d, int b) {
  PrimalDualConfig c;
  c.head.source = HeadSource::Toy;
  c.head.text = "the GPU's dual form and the CPU's primal form compute one function. ";
  c.head.repeat = 3;
  c.head.model = m;
  c.head.d = d;
  c.head.mini_batch = b;
  c.head.w0 = W0Init::Random;
  c.head.seed = 11;
  c.precision = Precision::Double;
  c.timing_reps = 3;
  return c;
}

TEST(PanelsGpu, PrimalDualToyHeadsAgreeWithTheCpuPrimalForm) {
  REQUIRE_GPU(choice);
  for (InnerModel m : {InnerModel::Linear, InnerModel::MLP})
    for (int b : {1, 16}) {
      const PrimalDualConfig c = toy(m, m == InnerModel::MLP ? 32 : 64, b);
      SCOPED_TRACE(std::string(m == InnerModel::MLP ? "MLP" : "Linear") + " b=" + std::to_string(b));
      const auto v = run_module<PrimalDualModule>(choice, PrimalDualRun{c}, &Snapshot::primal_dual);
      ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
      ASSERT_TRUE(v->gpu_ran) << v->gpu_note;
      EXPECT_FALSE(v->gpu_device.empty());
      EXPECT_GT(v->max_abs_output, 0.1);
      EXPECT_LT(v->gpu_max_abs_diff, 1e-5 * v->max_abs_output);
      EXPECT_GT(v->gpu_max_abs_diff, 0.0);  // fp32 against fp64: rounding shows
      EXPECT_EQ(v->gpu_ms.size(), 3u);
      EXPECT_EQ(v->gpu_time.repeats, 3);
      EXPECT_EQ(v->gpu_time.warmup, 2);
      EXPECT_LE(v->gpu_time.min_ms, v->gpu_time.median_ms);
      EXPECT_LE(v->gpu_time.median_ms, v->gpu_time.max_ms);
      EXPECT_EQ(v->gpu_token_diff.size(), static_cast<std::size_t>(v->T));
    }
}

TEST(PanelsGpu, PrimalDualModelLayersAgreeWithTheCpuPrimalForm) {
  REQUIRE_GPU(choice);
  PrimalDualConfig c;
  c.head.source = HeadSource::Model;
  c.head.model_id = "shipped";
  c.head.text = "Test-time training turns the hidden state into a model that learns while it reads. ";
  c.head.repeat = 4;
  c.precision = Precision::Double;
  c.timing_reps = 2;
  const auto v = run_module<PrimalDualModule>(choice, PrimalDualRun{c}, &Snapshot::primal_dual);
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  ASSERT_TRUE(v->gpu_ran) << v->gpu_note;
  ASSERT_GE(v->layers.size(), 2u);
  for (const LayerComparison& L : v->layers) {
    EXPECT_LT(L.gpu_max_abs_diff, 1e-5 * L.max_abs_output) << "block " << L.block;
    EXPECT_EQ(L.gpu_time.repeats, 2);
  }
}

TEST(PanelsGpu, TheTf32OptionIsLessExactButClose) {
  REQUIRE_GPU(choice);
  PrimalDualConfig c = toy(InnerModel::Linear, 64, 16);
  c.gpu_math = GpuMath::Tf32;
  const auto v = run_module<PrimalDualModule>(choice, PrimalDualRun{c}, &Snapshot::primal_dual);
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  ASSERT_TRUE(v->gpu_ran);
  EXPECT_NE(v->gpu_kernel.find("tf32"), std::string::npos) << v->gpu_kernel;
  EXPECT_LT(v->gpu_max_abs_diff, 1e-2 * v->max_abs_output);
}

TEST(PanelsGpu, TheoremOneReductionRunsOnTheGpu) {
  REQUIRE_GPU(choice);
  // T = 32 (b = T fits the TTT kernels) and T = 210 (it does not: the GPU's linear-attention kernel).
  for (int repeat : {0, 2}) {
    PrimalDualConfig c = toy(InnerModel::Linear, 32, 16);
    c.head.text = repeat ? c.head.text : std::string("thirty-two bytes of a short text");
    c.head.repeat = repeat ? 3 : 1;
    c.linear_attention = true;
    const auto v = run_module<PrimalDualModule>(choice, PrimalDualRun{c}, &Snapshot::primal_dual);
    ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
    ASSERT_TRUE(v->gpu_ran) << v->gpu_note;
    EXPECT_EQ(v->gpu_kernel.find("linear attention") != std::string::npos, v->T > 64) << v->gpu_kernel;
    EXPECT_LT(v->gpu_max_abs_diff, 1e-5 * v->linear_attention_scale) << "T = " << v->T;
  }
}

TEST(PanelsGpu, MiniBatchLabLossesComeFromTheGpuAndAgreeWithTheCpu) {
  REQUIRE_GPU(choice);
  SweepSettings s;
  s.mode = SweepMode::Evaluate;
  s.model_id = "shipped";
  s.seq_len = 128;
  s.windows = 4;
  const auto v = run_module<MiniBatchModule>(choice, SweepRun{s, false}, &Snapshot::minibatch);
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  ASSERT_TRUE(v->current);
  EXPECT_FALSE(v->current->gpu_device.empty());
  ASSERT_EQ(v->current->points.size(), 8u);  // b = 1 … 128
  for (const SweepPoint& p : v->current->points) {
    SCOPED_TRACE("b = " + std::to_string(p.b));
    EXPECT_EQ(p.cpu_time.repeats, 4);
    if (p.b > 64) {  // beyond the kernels: CPU only, and said so
      EXPECT_FALSE(p.gpu);
      EXPECT_FALSE(p.gpu_note.empty());
      continue;
    }
    ASSERT_TRUE(p.gpu) << p.gpu_note;
    EXPECT_TRUE(p.gpu_loss);
    EXPECT_NEAR(p.loss, p.cpu_loss, 1e-4);
    EXPECT_EQ(p.gpu_time.repeats, 20);
    EXPECT_EQ(p.gpu_time.warmup, 3);
    EXPECT_GT(p.gpu_time.min_ms, 0.0);
    EXPECT_LE(p.gpu_time.min_ms, p.gpu_time.median_ms);
    EXPECT_LE(p.gpu_time.median_ms, p.gpu_time.max_ms);
  }
}

TEST(PanelsGpu, LatencyLabTimesEveryPointOnTheGpuToo) {
  REQUIRE_GPU(choice);
  LatencySettings s;
  s.max_context = 256;
  s.repeats = 2;
  s.decode_tokens = 8;
  const auto v = run_module<LatencyModule>(choice, LatencyRun{s}, &Snapshot::latency);
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  EXPECT_FALSE(v->gpu_device.empty());
  ASSERT_EQ(v->curves.size(), 5u);
  for (const LatencyCurve& c : v->curves) {
    SCOPED_TRACE(c.layer);
    ASSERT_EQ(c.points.size(), 3u);  // T = 64, 128, 256
    for (const LatencyPoint& p : c.points) {
      SCOPED_TRACE("T = " + std::to_string(p.T));
      EXPECT_TRUE(p.prefill.measured());
      EXPECT_TRUE(p.decode.measured());
      // A layer the GPU refuses says why; every other point has its GPU times.
      if (c.gpu_prefill_note.empty()) {
        EXPECT_EQ(p.gpu_prefill.samples, kGpuRepeats);
        EXPECT_EQ(p.gpu_prefill.warmup, kGpuWarmup);
        EXPECT_GT(p.gpu_prefill.min_us, 0.0);
        EXPECT_LE(p.gpu_prefill.min_us, p.gpu_prefill.median_us);
      } else {
        EXPECT_FALSE(p.gpu_prefill.measured());
      }
      if (c.gpu_decode_note.empty()) {
        EXPECT_EQ(p.gpu_decode.samples, s.decode_tokens);
        EXPECT_GT(p.gpu_decode.min_us, 0.0);
      } else {
        EXPECT_FALSE(p.gpu_decode.measured());
      }
    }
    std::printf("  %-17s GPU prefill %s | decode %s\n", c.layer.c_str(),
                c.gpu_prefill_note.empty() ? "ok" : c.gpu_prefill_note.c_str(),
                c.gpu_decode_note.empty() ? "ok" : c.gpu_decode_note.c_str());
  }
}

TEST(PanelsGpu, EvaluationOnTheGpuAgreesWithTheCpu) {
  REQUIRE_GPU(choice);
  EvalSettings s;
  s.models = {"shipped", "random:ttt-mlp:m:0"};
  s.seq_len = 256;
  s.windows = 8;
  const auto g = run_module<EvaluationModule>(choice, EvaluationRun{s}, &Snapshot::evaluation);
  auto cpu = std::make_shared<ComputeChoice>();
  cpu->set_request(ComputeRequest::CPU);
  const auto c = run_module<EvaluationModule>(cpu, EvaluationRun{s}, &Snapshot::evaluation);
  ASSERT_EQ(g->outcome, JobOutcome::Done) << g->error;
  ASSERT_EQ(c->outcome, JobOutcome::Done) << c->error;
  ASSERT_EQ(g->curves.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(g->curves[i].label);
    EXPECT_TRUE(g->curves[i].error.empty()) << g->curves[i].error;
    EXPECT_EQ(g->curves[i].device.rfind("GPU: ", 0), 0u) << g->curves[i].device;
    EXPECT_EQ(c->curves[i].device.rfind("CPU", 0), 0u) << c->curves[i].device;
    EXPECT_GT(g->curves[i].eval_ms, 0.0);
    EXPECT_EQ(g->curves[i].windows_done, 8);
    EXPECT_NEAR(g->curves[i].loss, c->curves[i].loss, 1e-4);
    ASSERT_EQ(g->curves[i].loss_by_position.size(), 256u);
    for (std::size_t t = 0; t < 256; t += 51)
      EXPECT_NEAR(g->curves[i].loss_by_position[t], c->curves[i].loss_by_position[t], 1e-3) << "t = " << t;
  }
}

TEST(PanelsGpu, InnerLossCurvesFromTheGpusLayerInputsMatchTheCpu) {
  REQUIRE_GPU(choice);
  CurvesSettings s;
  s.model_id = "shipped";
  s.seq_len = 128;
  s.sequences = 3;
  const auto g = run_module<CurvesModule>(choice, CurvesRun{s}, &Snapshot::curves);
  auto cpu = std::make_shared<ComputeChoice>();
  cpu->set_request(ComputeRequest::CPU);
  const auto c = run_module<CurvesModule>(cpu, CurvesRun{s}, &Snapshot::curves);
  ASSERT_EQ(g->outcome, JobOutcome::Done) << g->error;
  ASSERT_EQ(c->outcome, JobOutcome::Done) << c->error;
  EXPECT_EQ(g->device.rfind("GPU: ", 0), 0u) << g->device;
  ASSERT_EQ(g->lb.size(), c->lb.size());
  double worst = 0;
  for (std::size_t b = 0; b < g->lb.size(); ++b)
    for (std::size_t t = 0; t < g->lb[b].size(); ++t)
      for (const auto m : {&CurvesView::l0, &CurvesView::lb, &CurvesView::la}) {
        const double x = ((*g).*m)[b][t], y = ((*c).*m)[b][t];
        worst = std::max(worst, std::abs(x - y) / std::max(1e-3, std::abs(y)));
      }
  std::printf("[ curves ] largest relative difference GPU inputs vs CPU: %.3g\n", worst);
  EXPECT_LT(worst, 1e-3);
}

TEST(PanelsGpu, HiddenStateEvolutionFromTheGpusLayerInputsMatchesTheCpu) {
  REQUIRE_GPU(choice);
  HeadConfig h;
  h.source = HeadSource::Model;
  h.model_id = "shipped";
  h.text = "A hidden state that learns: every token takes one gradient step. ";
  h.repeat = 2;
  h.block = 1;
  h.head = 2;
  const auto run = [&](std::shared_ptr<ComputeChoice> compute) {
    std::vector<std::unique_ptr<EngineModule>> mods;
    mods.push_back(std::make_unique<EvolutionModule>(std::make_shared<ModelLibrary>(), compute));
    Engine e(std::move(mods));
    e.start();
    e.post(EvolutionConfigure{h});
    EXPECT_TRUE(e.wait_quiescent(120s));
    return e.snapshot()->evolution;
  };
  const auto g = run(choice);
  auto cpu = std::make_shared<ComputeChoice>();
  cpu->set_request(ComputeRequest::CPU);
  const auto c = run(cpu);
  ASSERT_TRUE(g->error.empty()) << g->error;
  ASSERT_TRUE(g->done);
  EXPECT_EQ(g->device.rfind("GPU: ", 0), 0u) << g->device;
  ASSERT_EQ(g->steps.size(), c->steps.size());
  double worst = 0;
  for (std::size_t t = 0; t < g->steps.size(); ++t)
    worst = std::max(worst, double((g->steps[t]->w1 - c->steps[t]->w1).cwiseAbs().maxCoeff()) /
                                std::max(1e-6, double(c->steps[t]->w1.cwiseAbs().maxCoeff())));
  std::printf("[ evolution ] largest relative difference of W_t, GPU inputs vs CPU: %.3g\n", worst);
  EXPECT_LT(worst, 1e-4);
}

TEST(PanelsGpu, GenerationPanelDecodesOnTheGpuWithTheCpusGreedyBytes) {
  REQUIRE_GPU(choice);
  GenSettings s;
  s.model_id = "shipped";
  s.prompt = "The house stood ";
  s.max_tokens = 120;
  s.temperature = 0;  // greedy
  s.tokens_per_second = 1e6;
  const auto run = [&](std::shared_ptr<ComputeChoice> compute) {
    std::vector<std::unique_ptr<EngineModule>> mods;
    mods.push_back(std::make_unique<GenerationModule>(std::make_shared<ModelLibrary>(), compute));
    Engine e(std::move(mods));
    e.start();
    e.post(GenerateStart{s});
    const auto until = std::chrono::steady_clock::now() + 120s;
    while (std::chrono::steady_clock::now() < until) {
      const auto v = e.snapshot()->generation;
      if (v && v->generation > 0 && !v->running) break;
      std::this_thread::sleep_for(20ms);
    }
    EXPECT_TRUE(e.wait_quiescent(60s));
    return e.snapshot()->generation;
  };
  const auto g = run(choice);
  auto cpu = std::make_shared<ComputeChoice>();
  cpu->set_request(ComputeRequest::CPU);
  const auto c = run(cpu);
  ASSERT_TRUE(g->error.empty()) << g->error;
  ASSERT_TRUE(c->error.empty()) << c->error;
  EXPECT_TRUE(g->states_on_gpu);
  EXPECT_EQ(g->device.rfind("CUDA", 0), 0u) << g->device;
  ASSERT_EQ(g->tokens.size(), c->tokens.size());
  std::string gb, cb;
  for (const auto& t : g->tokens) gb += static_cast<char>(t->byte);
  for (const auto& t : c->tokens) cb += static_cast<char>(t->byte);
  std::printf("[ generation ] GPU: %s\n", gb.c_str());
  EXPECT_EQ(gb, cb);
  EXPECT_EQ(g->byte_time.repeats, 120);
}

TEST(PanelsGpu, TheCpuChoiceKeepsEveryPanelOnTheCpu) {
  REQUIRE_GPU(choice);
  choice->set_request(ComputeRequest::CPU);
  EXPECT_EQ(choice->target().gpu, nullptr);
  const auto v = run_module<PrimalDualModule>(choice, PrimalDualRun{toy(InnerModel::Linear, 32, 16)},
                                              &Snapshot::primal_dual);
  ASSERT_EQ(v->outcome, JobOutcome::Done) << v->error;
  EXPECT_FALSE(v->gpu_ran);
}

}  // namespace
}  // namespace tttlab::lab
