// fuzz_train_config: any text through TrainConfig::from_json, the reader of a run's
// train_config.json and of the copy embedded in every train_state.safetensors
// (tttlab/train/trainer.hpp).
//
// Contract checked: from_json either throws std::invalid_argument (one line naming the source and the
// field) or returns a config that validates and survives a round trip (to_json, from_json, same JSON).
#include <stdexcept>

#include "fuzz_check.hpp"
#include "tttlab/train/trainer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using tttlab::TrainConfig;
  TrainConfig config;
  try {
    config = TrainConfig::from_json(tttlab::fuzz::as_text(data, size), "fuzz/train_config.json");
  } catch (const std::invalid_argument&) {
    return 0;  // refused with a clear error
  }
  config.validate();
  const std::string json = config.to_json();
  const TrainConfig again = TrainConfig::from_json(json, "rewritten train_config.json");
  FUZZ_CHECK(again.to_json() == json);
  return 0;
}
