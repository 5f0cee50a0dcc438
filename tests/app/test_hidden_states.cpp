// The hidden states that `tttlab states` writes and `tttlab probe --checkpoint` prints
// (app/inspect/hidden_states.hpp), checked against the app's inner-loop stepper on the shipped model,
// read back from the file; and which tokens' states are saved.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "core/io/temp_dir.hpp"
#include "gui/engine/engine.hpp"
#include "gui/engine/model_library.hpp"
#include "gui/engine/stepper_module.hpp"
#include "inspect/hidden_states.hpp"
#include "tttlab/io/safetensors.hpp"

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

TEST(StatesFile, HoldsTheStatesTheStepperShowsForEveryToken) {
  const std::string text = "The keeper climbed the stairs; the lamp was lit at dusk, every evening.";
  const int block = 2, head = 1;
  auto lib = std::make_shared<gui::ModelLibrary>();
  const auto model = lib->get(gui::kShippedModelId);

  // The stepper, as the app runs it, through every token.
  std::vector<std::unique_ptr<gui::EngineModule>> mods;
  mods.push_back(std::make_unique<gui::StepperModule>(lib));
  gui::Engine e(std::move(mods));
  e.start();
  gui::HeadConfig c;
  c.block = block;
  c.head = head;
  c.text = text;
  e.post(gui::StepperConfigure{c, static_cast<long>(text.size()) - 1});
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
  r.model_source = "shipped";
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
    const TensorEntry& w1 = f.at(p + "W1");
    ASSERT_EQ(w1.shape, (std::vector<std::int64_t>{static_cast<std::int64_t>(text.size()), 32, 32}));
    const std::vector<double> W = f.to_f64(p + "W1"), b = f.to_f64(p + "b1"), W0 = f.to_f64(p + "W1_initial");
    const std::vector<double> before = f.to_f64(p + "loss_before"), eta = f.to_f64(p + "eta");
    // F64 holds the stepper's own double values; F32 rounds them once.
    const double tol = stored == DType::F64 ? 1e-13 : 1e-6;
    double worst = 0;
    for (std::size_t t = 0; t < text.size(); ++t) {
      const gui::TokenRecord& rec = *v->records[t];
      const double scale = std::max(1.0, rec.w_after.W1.cwiseAbs().maxCoeff());
      worst = std::max(worst, max_diff(W, t * 32 * 32, rec.w_after.W1) / scale);
      for (int j = 0; j < 32; ++j) EXPECT_NEAR(b[t * 32 + j], rec.w_after.b1(j), tol) << "token " << t;
      EXPECT_NEAR(before[t], rec.loss_before, tol * std::max(1.0, rec.loss_before)) << "token " << t;
      EXPECT_NEAR(eta[t], rec.tau * rec.lambda, tol) << "token " << t;
    }
    EXPECT_LE(worst, tol) << "largest relative difference of W_t from the stepper's, " << dtype_name(stored);
    std::printf("[ states ] %s: largest relative difference of W_t from the stepper's over %zu tokens: %.3g\n",
                std::string(dtype_name(stored)).c_str(), text.size(), worst);
    EXPECT_LE(max_diff(W0, 0, v->w0->W1), tol) << "W_initial is the stepper's W0";
  }
}

TEST(StatesFile, RefusesBadRequestsBeforeComputing) {
  auto lib = std::make_shared<gui::ModelLibrary>();
  const auto model = lib->get(gui::kShippedModelId);
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
