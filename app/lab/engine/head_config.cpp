#include "lab/engine/head_config.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "lab/engine/resources.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/settings_fields.hpp"

namespace tttlab::lab {

InnerOptions HeadConfig::inner_options() const {
  InnerOptions o;
  o.model = model;
  o.mini_batch = mini_batch;
  o.layer_norm = layer_norm;
  o.residual = residual;
  o.bias = bias;
  return o;
}

EtaOptions HeadConfig::eta_options() const {
  EtaOptions e;
  e.base_lr = eta_base;
  e.gate = gate;
  e.token_index = token_index;
  return e;
}

std::string HeadConfig::default_text() { return sample_texts().front().text; }

void validate(const HeadConfig& c, const HeadLimits& lim) {
  using std::to_string;
  if (c.text.empty()) throw std::invalid_argument("the input text is empty: type or pick a text");
  if (c.source == HeadSource::Model) {
    if (c.model_id.empty()) throw std::invalid_argument("no model chosen");
    if (c.block < 0 || c.head < 0) throw std::invalid_argument("block and head must be ≥ 0");
  }
  if (c.repeat < 1) throw std::invalid_argument("repeat must be at least 1");
  if (c.tokens() > lim.max_tokens)
    throw std::invalid_argument("the input has " + to_string(c.tokens()) + " tokens (bytes), at most " +
                                to_string(lim.max_tokens) + " are allowed here: shorten the text");
  const int max_d = c.model == InnerModel::Linear ? lim.max_d_linear : lim.max_d_mlp;
  if (c.source == HeadSource::Toy && (c.d < 2 || c.d > max_d))
    throw std::invalid_argument("head dimension d must be in [2, " + to_string(max_d) + "] for TTT-" +
                                lab::to_string(c.model));
  if (c.mini_batch < 1 || c.mini_batch > lim.max_mini_batch)
    throw std::invalid_argument("mini-batch size b must be in [1, " + to_string(lim.max_mini_batch) +
                                "]");
  if (!(c.eta_base > 0.0) || c.eta_base > 1000.0)
    throw std::invalid_argument("η_base must be in (0, 1000]");
}

const char* to_string(InnerModel m) { return m == InnerModel::Linear ? "Linear" : "MLP"; }
const char* to_string(EtaGate g) { return g == EtaGate::Learned ? "learned" : "fixed"; }
const char* to_string(W0Init w) { return w == W0Init::Zero ? "zero" : "random"; }
const char* to_string(HeadSource s) { return s == HeadSource::Model ? "model" : "toy"; }

namespace {

const SettingsFields<HeadConfig>& head_fields() {
  using H = HeadConfig;
  static const SettingsFields<HeadConfig> fields =
      SettingsFields<HeadConfig>()
          .choice("source", &H::source, {{"model", HeadSource::Model}, {"toy", HeadSource::Toy}})
          .string("model_id", &H::model_id, 4096)
          .integer("block", &H::block, 0, 1023)
          .integer("head", &H::head, 0, 1023)
          .boolean("override_model", &H::override_model)
          .string("text", &H::text, 1 << 16)
          .uint64("seed", &H::seed)
          .integer("repeat", &H::repeat, 1, 1 << 16)
          .choice("model", &H::model, {{"linear", InnerModel::Linear}, {"mlp", InnerModel::MLP}})
          .integer("d", &H::d, 2, 64)
          .integer("mini_batch", &H::mini_batch, 1, 1 << 16)
          .number("eta_base", &H::eta_base, 1e-6, 1000.0)
          .choice("gate", &H::gate, {{"learned", EtaGate::Learned}, {"fixed", EtaGate::Fixed}})
          .boolean("token_index", &H::token_index)
          .boolean("layer_norm", &H::layer_norm)
          .boolean("residual", &H::residual)
          .boolean("bias", &H::bias)
          .choice("w0", &H::w0, {{"zero", W0Init::Zero}, {"random", W0Init::Random}});
  return fields;
}

}  // namespace

nlohmann::json to_json(const HeadConfig& c) { return head_fields().to_json(c); }

HeadConfig head_config_from(const FieldReader& r) {
  HeadConfig c;
  head_fields().read(r, c);
  return c;
}

}  // namespace tttlab::lab
