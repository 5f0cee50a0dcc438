// fuzz_train_state: any bytes read as a checkpoint's train_state.safetensors, through the in-memory
// steps of Trainer::resume (tttlab/train/trainer.hpp): the safetensors reader, the training config
// embedded in its metadata (TrainConfig::from_json), and the optimizer state (AdamWState::load),
// which the optimizer then takes (AdamW::load_state) and continues from for one step.
//
// Contract checked: each step either throws its documented error (SafetensorsError;
// std::invalid_argument from the config and the optimizer) or gives a state the optimizer can step
// on; a state that loads writes back and reloads to the same moments and step.
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "fuzz_check.hpp"
#include "tttlab/io/safetensors.hpp"
#include "tttlab/optim/adamw.hpp"
#include "tttlab/train/trainer.hpp"

namespace {

using namespace tttlab;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// One optimizer step on parameters shaped like the state, as the trainer does after resuming.
void step_once(const AdamWState<float>& state) {
  AdamW<float> optim(AdamWConfig{}, WarmupCosineSchedule::official(3e-3, 1000));
  optim.load_state(state);
  std::vector<std::vector<float>> values, grads;
  std::vector<NamedParam<float>> params;
  values.reserve(state.names.size());
  grads.reserve(state.names.size());
  for (std::size_t i = 0; i < state.names.size(); ++i) {
    values.emplace_back(state.m[i].size(), 0.5f);
    grads.emplace_back(state.m[i].size(), 0.25f);
    params.push_back({state.names[i], values.back(), grads.back()});
  }
  const AdamWReport report = optim.step(params);
  FUZZ_CHECK(report.skipped || report.step == state.step + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parsed = fuzz::parsed_or_refused<SafetensorsError>([&] {
    return SafetensorsFile::parse(std::vector<std::uint8_t>(data, data + size), "fuzz/train_state.safetensors");
  });
  if (!parsed) return 0;
  const SafetensorsFile& file = *parsed;

  if (const std::string* text = file.metadata_value("train_config")) {
    try {
      const TrainConfig config = TrainConfig::from_json(*text, "fuzz/train_state.safetensors (train_config)");
      config.validate();
    } catch (const std::invalid_argument&) {
    }
  }

  const auto state = fuzz::parsed_or_refused<SafetensorsError>([&] { return AdamWState<float>::load(file, "optim."); });
  if (!state) return 0;
  FUZZ_CHECK(state->step >= 0);
  FUZZ_CHECK(state->m.size() == state->names.size() && state->v.size() == state->names.size());
  for (std::size_t i = 0; i < state->names.size(); ++i) FUZZ_CHECK(state->m[i].size() == state->v[i].size());

  SafetensorsWriter writer;
  state->save(writer, "optim.");
  const AdamWState<float> again =
      AdamWState<float>::load(SafetensorsFile::parse(writer.serialize(), "rewritten"), "optim.");
  FUZZ_CHECK(again.step == state->step && again.names == state->names);
  for (std::size_t i = 0; i < state->names.size(); ++i)
    FUZZ_CHECK(same_bits(again.m[i], state->m[i]) && same_bits(again.v[i], state->v[i]));

  // The same tensors read as a double-precision state must load or be refused, never crash.
  try {
    (void)AdamWState<double>::load(file, "optim.");
  } catch (const SafetensorsError&) {
  }

  try {
    step_once(*state);
  } catch (const std::invalid_argument&) {
    // load_state and step refuse states they cannot continue from, with a message
  }
  return 0;
}
