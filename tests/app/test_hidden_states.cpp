// The hidden states that `tttlab states` writes and `tttlab probe --checkpoint` prints
// (app/inspect/hidden_states.hpp), checked against the app's inner-loop stepper on a shipped
// TTT-Linear and a shipped TTT-MLP model, read back from the file; and which tokens' states are saved.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "core/io/temp_dir.hpp"
#include "lab/engine/engine.hpp"
#include "lab/models/model_library.hpp"
#include "lab/inner_stepper/stepper_module.hpp"
#include "inspect/hidden_states.hpp"
#include "tttlab/io/safetensors.hpp"
#include "tttlab/model/checkpoint.hpp"

namespace tttlab::inspect {
namespace {

using namespace std::chrono_literals;

TEST(SavedTokens, EveryTokenMiniBatchEndsAndStridesEndWithTheLastToken) {
  EXPECT_EQ(saved_tokens(5, 16, SaveEvery::Token, 1), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(saved_tokens(40, 16, SaveEvery::MiniBatchEnd, 1), (std::vector<std::int64_t>{15, 31, 39}));
  EXPECT_EQ(saved_tokens(32, 16, SaveEvery::MiniBatchEnd, 1), (std::vector<std::int64_t>{15, 31}));
  EXPECT_EQ(saved_tokens(10, 16, SaveEvery::Stride, 4), (std::vector<std::int64_t>{3, 7, 9}));
  EXPECT_EQ(saved_tokens(3, 16, SaveEvery::MiniBatchEnd, 1), (std::vector<std::int64_t>{2}));
  EXPECT_THROW(saved_tokens(10, 16, SaveEvery::Stride, 0), std::invalid_argument);
}

// Max |a − b| over a d × d state stored row-major at `at` in `file` against an Eigen matrix.
double max_diff(const std::vector<double>& file, std::size_t at, const Mat<double>& m) {
  double worst = 0;
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      worst = std::max(worst, std::abs(file[at + static_cast<std::size_t>(i * m.cols() + j)] - m(i, j)));
  return worst;
}

// The states file of one head against the stepper, for the shipped TTT-Linear model and a shipped
// TTT-MLP model: every member of W_t (W1, b1; W2, b2 for TTT-MLP), W0, the losses and η.
class StatesFileVsStepper : public ::testing::TestWithParam<std::string> {};

TEST_P(StatesFileVsStepper, HoldsTheStatesTheStepperShowsForEveryToken) {
  const std::string model_id = GetParam();
  const std::string text = "The keeper climbed the stairs; the lamp was lit at dusk, every evening.";
  const int block = 2, head = 1;
  auto lib = std::make_shared<lab::ModelLibrary>();
  const auto model = lib->get(model_id);
  const bool mlp = model->config().seq_layer == SeqLayerKind::TTTMLP;

  // The stepper, as the app runs it, through every token.
  std::vector<std::unique_ptr<lab::EngineModule>> mods;
  mods.push_back(std::make_unique<lab::StepperModule>(lib));
  lab::Engine e(std::move(mods));
  e.start();
  lab::HeadConfig c;
  c.model_id = model_id;
  c.block = block;
  c.head = head;
  c.text = text;
  e.post(lab::StepperConfigure{c, static_cast<long>(text.size()) - 1});
  ASSERT_TRUE(e.wait_quiescent(60s));
  const auto v = e.snapshot()->stepper;
  ASSERT_TRUE(v->error.empty()) << v->error;
  ASSERT_EQ(v->computed(), static_cast<long>(text.size()));

  // The file, in double and in float.
  testing::TempDir dir;
  StatesRequest r;
  r.bytes.assign(text.begin(), text.end());
  r.blocks = {block};
  r.heads = {head};
  r.model_source = model_id;
  for (DType stored : {DType::F64, DType::F32}) {
    r.stored = stored;
    const auto path = dir.path() / (stored == DType::F64 ? "f64.safetensors" : "f32.safetensors");
    const StatesSummary s = write_states_file(*model, r, path);
    EXPECT_EQ(s.tokens, static_cast<long>(text.size()));
    const SafetensorsFile f = SafetensorsFile::read(path);
    ASSERT_NE(f.metadata_value("format"), nullptr);
    EXPECT_EQ(*f.metadata_value("format"), "tttlab-states");
    EXPECT_EQ(f.at("tokens").dtype, DType::U8);
    const std::vector<double> tokens = f.to_f64("tokens");
    ASSERT_EQ(tokens.size(), text.size());
    for (std::size_t t = 0; t < text.size(); ++t) EXPECT_EQ(tokens[t], static_cast<unsigned char>(text[t]));
    const std::string p = "block2.head1.";
    const std::int64_t T = static_cast<std::int64_t>(text.size()), d = 32, h = mlp ? 4 * d : d;
    ASSERT_EQ(f.at(p + "W1").shape, (std::vector<std::int64_t>{T, d, mlp ? h : d}));
    ASSERT_EQ(f.find(p + "W2") != nullptr, mlp);
    if (mlp) {
      ASSERT_EQ(f.at(p + "W2").shape, (std::vector<std::int64_t>{T, h, d}));
    }
    const std::vector<double> before = f.to_f64(p + "loss_before"), eta = f.to_f64(p + "eta");
    // F64 holds the stepper's own double values; F32 rounds them once.
    const double tol = stored == DType::F64 ? 1e-13 : 1e-6;
    // Every member, every token: |file − stepper| relative to the member's largest magnitude.
    const auto member_of = [&](const InnerWeights<double>& w, const std::string& m) -> Mat<double> {
      if (m == "W1") return w.W1;
      if (m == "W2") return w.W2;
      return m == "b1" ? Mat<double>(w.b1) : Mat<double>(w.b2);
    };
    for (const std::string m : {"W1", "b1", "W2", "b2"}) {
      if (!mlp && m.back() == '2') continue;
      const std::vector<double> data = f.to_f64(p + m), initial = f.to_f64(p + m + "_initial");
      double worst = 0;
      for (std::size_t t = 0; t < text.size(); ++t) {
        const Mat<double> want = member_of(v->records[t]->w_after, m);
        const double scale = std::max(1.0, want.cwiseAbs().maxCoeff());
        worst = std::max(worst, max_diff(data, t * static_cast<std::size_t>(want.size()), want) / scale);
      }
      EXPECT_LE(worst, tol) << m << ", " << dtype_name(stored);
      std::printf("[ states ] %s, %s, %s: largest relative difference from the stepper over %zu tokens: %.3g\n",
                  model_id.c_str(), m.c_str(), std::string(dtype_name(stored)).c_str(), text.size(), worst);
      EXPECT_LE(max_diff(initial, 0, member_of(*v->w0, m)), tol) << m << "_initial is the stepper's W0";
    }
    for (std::size_t t = 0; t < text.size(); ++t) {
      const lab::TokenRecord& rec = *v->records[t];
      EXPECT_NEAR(before[t], rec.loss_before, tol * std::max(1.0, rec.loss_before)) << "token " << t;
      EXPECT_NEAR(eta[t], rec.tau * rec.lambda, tol) << "token " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ShippedModels, StatesFileVsStepper,
                         ::testing::Values(std::string(lab::kShippedModelId), std::string("shipped:long-ttt-mlp-m")),
                         [](const auto& param) { return param.index == 0 ? std::string("TTTLinear") : std::string("TTTMLP"); });

TEST(StatesFile, RefusesBadRequestsBeforeComputing) {
  auto lib = std::make_shared<lab::ModelLibrary>();
  const auto model = lib->get(lab::kShippedModelId);
  testing::TempDir dir;
  StatesRequest r;
  r.bytes.assign(10000, 'a');
  r.max_file_bytes = 1 << 20;  // 10,000 tokens × 16 heads × (32² + 32) floats ≈ 640 MiB
  try {
    write_states_file(*model, r, dir.path() / "big.safetensors");
    FAIL() << "a 640 MiB file was not refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("MiB"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "big.safetensors"));
  r.bytes = {'a', 'b'};
  r.blocks = {9};
  EXPECT_THROW(plan_states(model->config(), r), std::invalid_argument);
  r.blocks = {};
  r.heads = {4};
  EXPECT_THROW(plan_states(model->config(), r), std::invalid_argument);
  r.heads = {};
  r.bytes.clear();
  EXPECT_THROW(plan_states(model->config(), r), std::invalid_argument);
}

}  // namespace
}  // namespace tttlab::inspect

namespace tttlab::inspect {
namespace {

// A model whose states are not finite is refused with the model message before anything is written
// (finite weights that overflow reach this point where load_model's short probe text does not).
TEST(LosesNothing, F11_states_refuses_non_finite_states_before_writing) {
  auto model = load_model(std::filesystem::path(TTTLAB_SOURCE_DIR) / "assets/models/tiny-brown");
  testing::TempDir dir;
  StatesRequest r;
  r.bytes.assign(40, 'a');
  r.blocks = {1};
  r.model_source = "hostile\x1b]0;model";
  const std::vector<std::int64_t> saved = saved_tokens(40, model->config().mini_batch_size, SaveEvery::Token, 1);
  HeadTrace tr = trace_head(*model, r.bytes, 1, 0, saved);
  EXPECT_TRUE(trace_is_finite(tr));
  tr.loss_after[3] = std::nan("");
  EXPECT_FALSE(trace_is_finite(tr));
  tr = trace_head(*model, r.bytes, 1, 0, saved);
  tr.states[5].W1(0, 0) = INFINITY;
  EXPECT_FALSE(trace_is_finite(tr));

  EXPECT_NO_THROW(write_states_file(*model, r, dir / "ok.safetensors"));
  int changed = 0;
  model->for_each_param([&](Eigen::Map<Mat<float>> p, const std::string& name) {
    // Head 0's initial inner state W0 of block 1 ("...seq_modeling_block.W1" and the head's index).
    if (changed == 0 && name.find("layers.1.seq_modeling_block.W1") != std::string::npos) {
      p(0, 0) = std::numeric_limits<float>::quiet_NaN();
      ++changed;
    }
  });
  ASSERT_EQ(changed, 1);
  try {
    write_states_file(*model, r, dir / "bad.safetensors");
    FAIL() << "non-finite states were written";
  } catch (const NonFiniteModelError& e) {
    EXPECT_EQ(std::string(e.what()), non_finite_model_message(r.model_source));
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.safetensors"));
}

}  // namespace
}  // namespace tttlab::inspect
