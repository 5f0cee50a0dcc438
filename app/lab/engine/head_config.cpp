#include "lab/engine/head_config.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "lab/engine/resources.hpp"
#include "lab/state/json_fields.hpp"

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

nlohmann::json to_json(const HeadConfig& c) {
  return {
      {"source", to_string(c.source)},
      {"model_id", c.model_id},
      {"block", c.block},
      {"head", c.head},
      {"override_model", c.override_model},
      {"text", c.text},
      {"seed", c.seed},
      {"repeat", c.repeat},
      {"model", c.model == InnerModel::Linear ? "linear" : "mlp"},
      {"d", c.d},
      {"mini_batch", c.mini_batch},
      {"eta_base", c.eta_base},
      {"gate", to_string(c.gate)},
      {"token_index", c.token_index},
      {"layer_norm", c.layer_norm},
      {"residual", c.residual},
      {"bias", c.bias},
      {"w0", to_string(c.w0)},
  };
}

HeadConfig head_config_from(const FieldReader& r) {
  HeadConfig c;
  c.source = r.choice("source", {"model", "toy"}, c.source == HeadSource::Model ? 0 : 1) == 0 ? HeadSource::Model
                                                                                             : HeadSource::Toy;
  c.model_id = r.string("model_id", 4096, c.model_id);
  c.block = static_cast<int>(r.integer("block", 0, 1023, c.block));
  c.head = static_cast<int>(r.integer("head", 0, 1023, c.head));
  c.override_model = r.boolean("override_model", c.override_model);
  c.text = r.string("text", 1 << 16, c.text);
  c.seed = r.uint64("seed", c.seed);
  c.repeat = static_cast<int>(r.integer("repeat", 1, 1 << 16, c.repeat));
  c.model = r.choice("model", {"linear", "mlp"}, c.model == InnerModel::Linear ? 0 : 1) == 0 ? InnerModel::Linear : InnerModel::MLP;
  c.d = static_cast<int>(r.integer("d", 2, 64, c.d));
  c.mini_batch = static_cast<int>(r.integer("mini_batch", 1, 1 << 16, c.mini_batch));
  c.eta_base = r.number("eta_base", 1e-6, 1000.0, c.eta_base);
  c.gate = r.choice("gate", {"learned", "fixed"}, c.gate == EtaGate::Learned ? 0 : 1) == 0 ? EtaGate::Learned : EtaGate::Fixed;
  c.token_index = r.boolean("token_index", c.token_index);
  c.layer_norm = r.boolean("layer_norm", c.layer_norm);
  c.residual = r.boolean("residual", c.residual);
  c.bias = r.boolean("bias", c.bias);
  c.w0 = r.choice("w0", {"zero", "random"}, c.w0 == W0Init::Zero ? 0 : 1) == 0 ? W0Init::Zero : W0Init::Random;
  return c;
}

}  // namespace tttlab::lab
