// app/lab/generation/generation_settings.cpp — see generation_settings.hpp.
#include "lab/generation/generation_settings.hpp"

namespace tttlab::lab {

GenerationPanelSettings GenerationPanelSettings::from(const FieldReader& r) {
  GenerationPanelSettings s;
  GenSettings& g = s.gen;
  g.model_id = r.string("model_id", 4096, g.model_id);
  g.prompt = r.string("prompt", 4096, g.prompt);
  if (g.prompt.empty()) throw StateError(r.path() + ".prompt: the prompt is empty");
  g.temperature = r.number("temperature", 0.0, 10.0, g.temperature);
  g.top_k = static_cast<int>(r.integer("top_k", 0, 256, g.top_k));
  g.max_tokens = static_cast<int>(r.integer("max_tokens", 1, 4096, g.max_tokens));
  g.seed = r.uint64("seed", g.seed);
  g.tokens_per_second = r.number("tokens_per_second", 1.0, 1e6, g.tokens_per_second);
  const FieldReader v = r.object("view");
  s.block = static_cast<int>(v.integer("block", 0, 1023, 0));
  s.head = static_cast<int>(v.integer("head", 0, 1023, 0));
  s.all_heads = v.choice("tint", {"block", "head"}, 0) == 0;
  return s;
}

nlohmann::json GenerationPanelSettings::to_json() const {
  const GenSettings& g = gen;
  return {{"model_id", g.model_id},
          {"prompt", g.prompt},
          {"temperature", g.temperature},
          {"top_k", g.top_k},
          {"max_tokens", g.max_tokens},
          {"seed", g.seed},
          {"tokens_per_second", g.tokens_per_second},
          {"view", {{"block", block}, {"head", head}, {"tint", all_heads ? "block" : "head"}}}};
}

}  // namespace tttlab::lab
