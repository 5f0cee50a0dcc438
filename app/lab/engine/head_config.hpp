// app/lab/engine/head_config.hpp — which TTT head a panel runs, and on what text; shared by the panels
// that drive the inner loop directly (inner-loop stepper, hidden-state evolution, primal vs dual).
//
// Two sources (head_inputs.hpp builds the inputs):
//
// MODEL (the default): head `head` of block `block` of a language model from the ModelLibrary (the
// shipped, trained tiny-brown unless chosen otherwise). The tokens are the bytes of `text` (× repeat);
// the layer input is Model::mixer_input(tokens, block) and Q, K, V, λ, τ come from the layer's own
// TTTLayer::inputs(); W0, γ, β and the options are the layer's. `mini_batch` and `eta_base` apply
// only when `override_model` is set (the model's own b and η_base otherwise).
//
// TOY: ONE head's inputs built from text, for experiments the trained model cannot show (any d, W0 = 0,
// switching LayerNorm off, …):
//   tokens   the UTF-8 bytes of `text`, repeated `repeat` times (T tokens)
//   x_t      a fixed random byte embedding E[byte_t] ∈ R^d, E ~ N(0, 1) drawn from `seed`
//   q, k, v  x_t·W_Q, x_t·W_K, x_t·W_V with random W_* ~ N(0, 1/d) drawn from `seed`
//   λ_t      η_base·σ(x_t·θ)/d with a random θ ~ N(0, 1/d) (learned gate) or η_base/d (fixed gate)
//   τ_i      1/i (token-index scale, δ = 0) or 1
//   W0       zero, or N(0, 0.02²) as the official initialisation (biases zero)
// The projections are NOT trained: the panels show what the inner loop does with whatever keys and
// values it is given. The UI says so next to the controls.
//
// MEMBER: which member of the fast-weight family (tttlab/fastweight/rule.hpp, fast_weight_presets())
// runs. "ttt_linear" / "ttt_mlp" are TTT with `model` (the TTT path, unchanged; the default, following
// `model`, so a state file without "member" opens as before). Every other member runs on the TOY
// source only (the trained model's heads are TTT heads), through tttlab/fastweight/member_trace.hpp, on
// the toy head's q, k, v (head_inputs.hpp, make_member_inputs):
//   linear attention, Mamba-2   q, k as drawn (their layers do not normalise them)
//   DeltaNet, Gated DeltaNet    k̂ = k/‖k‖, q̂ = q/‖q‖/√d (ε = 1e−6 under the roots), as their layers
//   Titans, LaCT                k, q L2-normalised as their layers, v as drawn
//   β_t = η_base·σ(x_t·θ) (learned gate; the θ of λ, so β_t = d·λ_t) or η_base (fixed gate)
//   α_t = σ(3 + x_t·θ_α), θ_α ~ N(0, 1/d) (learned gate) or σ(3) ≈ 0.953 (fixed gate)
//   S₀ = 0 (matrix members); Titans (titans.hpp): θ_t = β_t/d, forgetting 1 − α_t, momentum 0.9,
//   mini-batch b, M₀ = 0, LN w = 1, b = 0; LaCT (lact.hpp): rate β_t/d for W₀, W₁, W₂, momentum 0.9
//   (Muon, as its preset), chunk C = b, d_h = 4d, initial weights from `seed` (member_trace.hpp)
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "tttlab/ttt/eta.hpp"
#include "tttlab/ttt/inner.hpp"

namespace tttlab::lab {

class FieldReader;

enum class W0Init { Zero, Random };
enum class HeadSource { Model, Toy };

struct HeadConfig {
  HeadSource source = HeadSource::Model;
  std::string model_id = "shipped";  // ModelLibrary id (MODEL source)
  int block = 0;                  // MODEL: which block's TTT layer
  int head = 0;                   // MODEL: which head
  bool override_model = false;    // MODEL: run with `mini_batch` and `eta_base` instead of the model's
  std::string text = default_text();
  std::uint64_t seed = 7;
  int repeat = 1;                 // the text is repeated this many times
  InnerModel model = InnerModel::Linear;
  // A fast_weight_presets() id; "ttt_linear" and "ttt_mlp" both mean TTT with `model` (member_id()).
  std::string member = "ttt_linear";
  int d = 16;                     // TOY: head dimension (= width of the toy embedding)
  int mini_batch = 16;            // b (TOY, or MODEL with override_model)
  double eta_base = 1.0;          // η_base (TOY, or MODEL with override_model)
  EtaGate gate = EtaGate::Learned;
  bool token_index = true;        // τ_i = 1/i (on) or 1 (off)
  bool layer_norm = true;
  bool residual = true;
  bool bias = true;
  // Random is the official initialisation. With W0 = 0 (and b = 0) every z = kW + b is constant, its
  // LayerNorm variance is 0 and the first gradients are scaled by 1/√ε = 1000.
  W0Init w0 = W0Init::Random;

  bool operator==(const HeadConfig&) const = default;

  long tokens() const { return static_cast<long>(text.size()) * repeat; }
  bool toy() const { return source == HeadSource::Toy; }
  // TTT (the inner loop of tttlab/ttt/inner.hpp), or another member of the family.
  bool ttt() const { return member == "ttt_linear" || member == "ttt_mlp"; }
  // The member as run: "ttt_linear" / "ttt_mlp" following `model` for TTT, else `member`.
  std::string member_id() const;
  // Its printed name ("TTT-Linear", "DeltaNet", …) and its inner loss in words.
  std::string member_name() const;
  std::string member_loss() const;
  // Sets the member; a TTT member sets `model` as well.
  void set_member(const std::string& id);
  static std::string default_text();
  InnerOptions inner_options() const;
  EtaOptions eta_options() const;
};

// Limits the panels enforce (memory of the per-token records, responsiveness).
struct HeadLimits {
  long max_tokens = 512;
  int max_d_linear = 64;
  int max_d_mlp = 32;
  int max_mini_batch = 1024;
};

// Throws std::invalid_argument with a one-line, user-facing message when `c` is unusable (an unknown
// member: the message lists the ids; a member other than TTT with the MODEL source: it says the toy
// source runs it). (For the MODEL source, whether block and head exist is checked when the model is at
// hand.)
void validate(const HeadConfig& c, const HeadLimits& limits);

nlohmann::json to_json(const HeadConfig& c);
// Reads every field (missing ones keep HeadConfig's defaults; a missing "member" follows "model", a TTT
// member without "model" sets it); throws StateError on bad content. An unknown member id is read as
// written and rejected by validate().
HeadConfig head_config_from(const FieldReader& r);

const char* to_string(InnerModel m);
const char* to_string(EtaGate g);
const char* to_string(W0Init w);
const char* to_string(HeadSource s);

}  // namespace tttlab::lab
