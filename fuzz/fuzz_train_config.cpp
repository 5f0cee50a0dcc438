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
  const auto config = tttlab::fuzz::parsed_or_refused<std::invalid_argument>(
      [&] { return TrainConfig::from_json(tttlab::fuzz::as_text(data, size), "fuzz/train_config.json"); });
  if (!config) return 0;
  config->validate();
  tttlab::fuzz::check_round_trip(*config, "rewritten train_config.json");
  return 0;
}
