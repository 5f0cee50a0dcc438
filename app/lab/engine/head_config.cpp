#include "lab/engine/head_config.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "lab/engine/resources.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/settings_fields.hpp"
#include "tttlab/fastweight/rule.hpp"

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

std::string HeadConfig::member_id() const {
  if (ttt()) return model == InnerModel::MLP ? "ttt_mlp" : "ttt_linear";
  return member;
}

std::string HeadConfig::member_name() const {
  try {
    return fast_weight_preset(member_id()).name;
  } catch (const std::invalid_argument&) {
    return member;
  }
}

std::string HeadConfig::member_loss() const {
  const std::string id = member_id();
  if (id == "ttt_linear" || id == "ttt_mlp") return "ℓ(W; xₜ) = ½‖f(kₜ; W) − vₜ‖²";
  if (id == "linear_attention") return "ℓ(S) = −(kₜS)·vₜ (Hebbian)";
  if (id == "mamba2") return "ℓ(S) = −(kₜS)·vₜ (Hebbian), after the decay S ← αₜS";
  if (id == "deltanet") return "ℓ(S) = ½‖kₜS − vₜ‖²";
  if (id == "gated_deltanet") return "ℓ(S) = ½‖kₜS − vₜ‖², after the decay S ← αₜS";
  if (id == "titans") return "ℓ(M) = ‖LN(kₜM) + kₜ − vₜ‖² (FLA's, no ½), forgetting, momentum";
  if (id == "lact") return "ℓ(f) = −f(kₜ)·vₜ, large chunks, Muon";
  return "ℓ";
}

void HeadConfig::set_member(const std::string& id) {
  member = id;
  if (id == "ttt_linear") model = InnerModel::Linear;
  if (id == "ttt_mlp") model = InnerModel::MLP;
}

std::string HeadConfig::default_text() { return sample_texts().front().text; }

void validate(const HeadConfig& c, const HeadLimits& lim) {
  using std::to_string;
  if (c.text.empty()) throw std::invalid_argument("the input text is empty: type or pick a text");
  const FastWeightPreset& member = fast_weight_preset(c.member_id());  // lists the ids if unknown
  if (!c.ttt() && c.source != HeadSource::Toy)
    throw std::invalid_argument(member.name + " runs on the toy head only (the trained model's heads are TTT "
                                "heads): choose Source: toy");
  const bool mlp_member = member.rule.state == FastWeightState::Mlp;
  if (!c.ttt() && mlp_member && c.source == HeadSource::Toy && (c.d < 4 || c.d > lim.max_d_mlp))
    throw std::invalid_argument("head dimension d must be in [4, " + to_string(lim.max_d_mlp) + "] for " +
                                member.name);
  if (c.source == HeadSource::Model) {
    if (c.model_id.empty()) throw std::invalid_argument("no model chosen");
    if (c.block < 0 || c.head < 0) throw std::invalid_argument("block and head must be ≥ 0");
  }
  if (c.repeat < 1) throw std::invalid_argument("repeat must be at least 1");
  if (c.tokens() > lim.max_tokens)
    throw std::invalid_argument("the input has " + to_string(c.tokens()) + " tokens (bytes), at most " +
                                to_string(lim.max_tokens) + " are allowed here: shorten the text");
  const int max_d = (c.ttt() ? c.model == InnerModel::Linear : !mlp_member) ? lim.max_d_linear : lim.max_d_mlp;
  if (c.source == HeadSource::Toy && (c.d < 2 || c.d > max_d))
    throw std::invalid_argument("head dimension d must be in [2, " + to_string(max_d) + "] for " + member.name);
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
          .string("member", &H::member, 64)
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

// "member" is written as it is held, so that a config round-trips field for field; for TTT the "model"
// field says which TTT runs (member_id()).
nlohmann::json to_json(const HeadConfig& c) { return head_fields().to_json(c); }

HeadConfig head_config_from(const FieldReader& r) {
  HeadConfig c;
  head_fields().read(r, c);
  if (!r.has("member"))
    c.member = c.model == InnerModel::MLP ? "ttt_mlp" : "ttt_linear";  // a file from before members
  else if (!r.has("model"))
    c.set_member(c.member);  // "member": "ttt_mlp" alone names TTT-MLP
  return c;
}

}  // namespace tttlab::lab
