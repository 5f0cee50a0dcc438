// tttlab/fastweight/rule.hpp — the fast-weight template: a sequence layer whose state is a model that
// learns as it reads, described by six components (docs/MATH.md §11.1).
//
//   state        what the fast weights are: a matrix S [d_k, d_v] (read o = q S), or an MLP
//   loss         the inner loss the update descends: Hebbian −⟨k S, v⟩, squared ½‖k S − v‖²,
//                TTT's ½‖LN(k S) + k − v‖² (LN + residual, docs/MATH.md §3.1), or a dot product
//   retention    how the state forgets: none, a scalar decay α_t, a decay per channel, weight decay
//   optimizer    the inner step: gradient descent, GD with momentum, Muon (orthogonalised momentum)
//   rate         the step size: fixed, learned per token (β_t), learned per position in a mini-batch
//   granularity  when gradients are taken: every token (per_token), at the start of each mini-batch
//                (mini_batch: TTT's stale gradients), every token but computed chunk-parallel with
//                the exact same result (exact_chunk: WY/UT, SSD), or large chunks applied then
//                updated (large_chunk: LaCT)
//
// The members of the family are named presets of the template (fast_weight_presets(), in the order
// of docs/MATH.md §11's table, which is also the tie-break of nearest_member). Which of them core
// computes is in each preset's inner_loop: the matrix-state members with one step per token in
// tttlab/fastweight/matrix_rules.hpp (linear attention, Mamba-2's decayed Hebbian rule, DeltaNet,
// Gated DeltaNet; matrix_rule_for maps a rule to one of them), TTT-Linear and TTT-MLP in
// tttlab/ttt/inner.hpp, Titans' memory in tttlab/fastweight/titans.hpp (flash-linear-attention's
// linear memory; the preset's row is the paper's MLP memory, which only the designer runs), LaCT in
// tttlab/fastweight/lact.hpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tttlab {

enum class FastWeightState { Matrix, Mlp };
enum class FastWeightLoss { Hebbian, Squared, TttLnResidual, DotProduct };
enum class FastWeightRetention { None, ScalarDecay, ChannelDecay, WeightDecay };
enum class FastWeightOptimizer { Gd, Momentum, Muon };
enum class FastWeightRate { Fixed, PerToken, PerPosition };
enum class FastWeightGranularity { PerToken, MiniBatch, ExactChunk, LargeChunk };

// One point of the template. Spelled `state=matrix loss=squared retention=none optimizer=gd
// rate=per_token granularity=exact_chunk` by to_string and parse_fast_weight_rule.
struct FastWeightRule {
  FastWeightState state = FastWeightState::Matrix;
  FastWeightLoss loss = FastWeightLoss::Hebbian;
  FastWeightRetention retention = FastWeightRetention::None;
  FastWeightOptimizer optimizer = FastWeightOptimizer::Gd;
  FastWeightRate rate = FastWeightRate::Fixed;
  FastWeightGranularity granularity = FastWeightGranularity::PerToken;

  bool operator==(const FastWeightRule&) const = default;
};

// The component names, in FastWeightRule's order: "state", "loss", "retention", "optimizer", "rate",
// "granularity".
const std::vector<std::string>& fast_weight_component_names();

// Lower-case spellings (e.g. "ttt_ln_residual", "scalar_decay", "exact_chunk"). The parsers accept
// exactly these and throw std::invalid_argument (one line naming the accepted values) otherwise.
const char* to_string(FastWeightState v);
const char* to_string(FastWeightLoss v);
const char* to_string(FastWeightRetention v);
const char* to_string(FastWeightOptimizer v);
const char* to_string(FastWeightRate v);
const char* to_string(FastWeightGranularity v);
std::string to_string(const FastWeightRule& rule);

FastWeightState parse_fast_weight_state(std::string_view text);
FastWeightLoss parse_fast_weight_loss(std::string_view text);
FastWeightRetention parse_fast_weight_retention(std::string_view text);
FastWeightOptimizer parse_fast_weight_optimizer(std::string_view text);
FastWeightRate parse_fast_weight_rate(std::string_view text);
FastWeightGranularity parse_fast_weight_granularity(std::string_view text);
// The whole rule: space-separated `name=value` pairs, each component exactly once, in any order.
FastWeightRule parse_fast_weight_rule(std::string_view text);

// A named member of the family.
struct FastWeightPreset {
  std::string id;    // command-line spelling: "linear_attention", "mamba2", "deltanet", ...
  std::string name;  // as printed: "Linear attention", "Mamba-2 (SSD)", "DeltaNet", ...
  FastWeightRule rule;
  std::string
      inner_loop;    // the core header that computes its inner loop; empty where none does yet
  std::string note;  // what the six components leave out, where something is left out
};

// Every member of docs/MATH.md §11's table, in its order: linear attention, Mamba-2, DeltaNet, Gated
// DeltaNet, TTT-Linear, TTT-MLP, Titans, LaCT.
const std::vector<FastWeightPreset>& fast_weight_presets();
// The preset with this id; throws std::invalid_argument for an unknown id.
const FastWeightPreset& fast_weight_preset(std::string_view id);

// Where a rule sits on the map of members: the preset with the most components equal to the rule's
// (ties go to the earlier preset of the table), how many it shares, and the names of the components
// that differ (in FastWeightRule's order).
struct NearestMember {
  const FastWeightPreset* preset = nullptr;
  int common = 0;  // 0..6
  std::vector<std::string> differs;
};
NearestMember nearest_member(const FastWeightRule& rule);

}  // namespace tttlab
