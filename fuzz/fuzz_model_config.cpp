// fuzz_model_config: any text through ModelConfig::from_json, the reader of a checkpoint's config.json
// (tttlab/model/config.hpp).
//
// Contract checked: from_json either throws std::invalid_argument (its one-line "model config: ..."
// error; JSON errors arrive wrapped in it) or returns a config that validates, whose layer and attention
// configs can be derived, and that survives a round trip: to_json, from_json again, the same JSON.
#include <stdexcept>

#include "fuzz_check.hpp"
#include "tttlab/model/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using tttlab::ModelConfig;
  const auto config = tttlab::fuzz::parsed_or_refused<std::invalid_argument>(
      [&] { return ModelConfig::from_json(tttlab::fuzz::as_text(data, size), "fuzz/config.json"); });
  if (!config) return 0;
  config->validate();  // accepted means valid: an escape from here is a finding
  FUZZ_CHECK(config->head_dim() > 0);
  (void)config->ttt_layer_config();
  (void)config->attention_config();
  (void)config->trains("model.layers.0.seq_modeling_block.q_proj.weight");
  tttlab::fuzz::check_round_trip(*config, "rewritten config.json");
  return 0;
}
