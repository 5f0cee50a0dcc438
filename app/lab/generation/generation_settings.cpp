// app/lab/generation/generation_settings.cpp — see generation_settings.hpp.
#include "lab/generation/generation_settings.hpp"

namespace tttlab::lab {

const SettingsFields<GenerationPanelSettings>& GenerationPanelSettings::fields() {
  using G = GenSettings;
  static const SettingsFields<G> gen =
      SettingsFields<G>()
          .string("model_id", &G::model_id, 4096)
          .string("prompt", &G::prompt, 4096)
          .check([](const FieldReader& r, const G& g) {
            if (g.prompt.empty()) throw StateError(r.path() + ".prompt: the prompt is empty");
          })
          .number("temperature", &G::temperature, 0.0, 10.0)
          .integer("top_k", &G::top_k, 0, 256)
          .integer("max_tokens", &G::max_tokens, 1, 4096)
          .uint64("seed", &G::seed)
          .number("tokens_per_second", &G::tokens_per_second, 1.0, 1e6);
  using P = GenerationPanelSettings;
  static const SettingsFields<P> fields =
      SettingsFields<P>()
          .nested(&P::gen, gen)
          .object("view", SettingsFields<P>()
                              .integer("block", &P::block, 0, 1023)
                              .integer("head", &P::head, 0, 1023)
                              .choice("tint", &P::all_heads, {{"block", true}, {"head", false}}));
  return fields;
}

}  // namespace tttlab::lab
