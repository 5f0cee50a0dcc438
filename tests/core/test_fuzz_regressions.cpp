// Regressions from fuzzing the engine's file readers (fuzz/, docs/BUILDING.md "Fuzzing"): each input
// that once crashed is fed to the same entry point as its fuzz target and must now be refused with
// the documented error. The inputs are also in fuzz/corpus/<target>/, so every fuzzing run replays them.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tttlab/io/safetensors.hpp"
#include "tttlab/optim/adamw.hpp"

namespace tttlab {
namespace {

// A train_state.safetensors as Trainer::save writes it for one parameter "w", with the given step.
std::vector<std::uint8_t> train_state_with_step(const std::string& step) {
  SafetensorsWriter w;
  const std::vector<float> m = {0.5f}, v = {0.25f};
  w.add("optim.m.w", {1}, std::span<const float>(m));
  w.add("optim.v.w", {1}, std::span<const float>(v));
  w.set_metadata("optim.type", "adamw");
  w.set_metadata("optim.step", step);
  return w.serialize();
}

std::string load_error(const std::string& step) {
  const SafetensorsFile f = SafetensorsFile::parse(train_state_with_step(step), "run/step-1/train_state.safetensors");
  try {
    (void)AdamWState<float>::load(f, "optim.");
  } catch (const SafetensorsError& e) {
    return e.what();
  }
  return "(loaded)";
}

// fuzz_train_state (fuzz/corpus/fuzz_train_state/regression-step-max.safetensors): optim.step =
// 2^63 - 1 loaded, and the first step after resuming overflowed the step count (UBSan: signed integer
// overflow in AdamW::step). Such a count is now refused when the state is read, naming the file.
TEST(OptimizerFuzzRegressions, OptimizerStepCountThatWouldOverflowIsRefused) {
  const std::string msg = load_error(std::to_string(std::numeric_limits<std::int64_t>::max()));
  EXPECT_NE(msg.find("run/step-1/train_state.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("optim.step is 9223372036854775807, more than any run takes"), std::string::npos) << msg;
  EXPECT_NE(load_error("9007199254740993").find("more than any run takes"), std::string::npos);  // 2^53 + 1
}

// The bound itself still loads and steps: 2^53 is exact in the double the bias corrections use.
TEST(OptimizerFuzzRegressions, OptimizerStepCountAtTheBoundStillContinues) {
  const SafetensorsFile f = SafetensorsFile::parse(train_state_with_step("9007199254740992"), "state");
  AdamWState<float> state = AdamWState<float>::load(f, "optim.");
  ASSERT_EQ(state.step, std::int64_t{1} << 53);
  AdamW<float> optim(AdamWConfig{}, WarmupCosineSchedule::official(1e-3, 100));
  optim.load_state(state);
  std::vector<float> value = {1.0f}, grad = {0.5f};
  const std::vector<NamedParam<float>> params = {{"w", value, grad}};
  const AdamWReport r = optim.step(params);
  EXPECT_FALSE(r.skipped);
  EXPECT_EQ(r.step, (std::int64_t{1} << 53) + 1);
}

// AdamW::load_state refuses such a state too, for callers that build one without a file.
TEST(OptimizerFuzzRegressions, LoadStateRefusesAStepCountThatWouldOverflow) {
  AdamW<float> optim(AdamWConfig{}, WarmupCosineSchedule::official(1e-3, 100));
  AdamWState<float> state;
  state.step = std::numeric_limits<std::int64_t>::max();
  EXPECT_THROW(optim.load_state(state), std::invalid_argument);
}

}  // namespace
}  // namespace tttlab
