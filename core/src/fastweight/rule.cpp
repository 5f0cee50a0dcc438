// The fast-weight template's spellings, presets and nearest member (docs/MATH.md §11.1).
#include "tttlab/fastweight/rule.hpp"

#include <array>
#include <stdexcept>

namespace tttlab {
namespace {

template <class E, std::size_t N>
using Names = std::array<std::pair<E, const char*>, N>;

constexpr Names<FastWeightState, 2> kStateNames{
    {{FastWeightState::Matrix, "matrix"}, {FastWeightState::Mlp, "mlp"}}};
constexpr Names<FastWeightLoss, 4> kLossNames{{{FastWeightLoss::Hebbian, "hebbian"},
                                               {FastWeightLoss::Squared, "squared"},
                                               {FastWeightLoss::TttLnResidual, "ttt_ln_residual"},
                                               {FastWeightLoss::DotProduct, "dot_product"}}};
constexpr Names<FastWeightRetention, 4> kRetentionNames{
    {{FastWeightRetention::None, "none"},
     {FastWeightRetention::ScalarDecay, "scalar_decay"},
     {FastWeightRetention::ChannelDecay, "channel_decay"},
     {FastWeightRetention::WeightDecay, "weight_decay"}}};
constexpr Names<FastWeightOptimizer, 3> kOptimizerNames{
    {{FastWeightOptimizer::Gd, "gd"},
     {FastWeightOptimizer::Momentum, "momentum"},
     {FastWeightOptimizer::Muon, "muon"}}};
constexpr Names<FastWeightRate, 3> kRateNames{{{FastWeightRate::Fixed, "fixed"},
                                               {FastWeightRate::PerToken, "per_token"},
                                               {FastWeightRate::PerPosition, "per_position"}}};
constexpr Names<FastWeightGranularity, 4> kGranularityNames{
    {{FastWeightGranularity::PerToken, "per_token"},
     {FastWeightGranularity::MiniBatch, "mini_batch"},
     {FastWeightGranularity::ExactChunk, "exact_chunk"},
     {FastWeightGranularity::LargeChunk, "large_chunk"}}};

template <class E, std::size_t N>
const char* component_name(const Names<E, N>& names, E v) {
  for (const auto& [e, s] : names)
    if (e == v) return s;
  throw std::invalid_argument("fast-weight component value out of range");
}

template <class E, std::size_t N>
E parse_component(const Names<E, N>& names, std::string_view component, std::string_view text) {
  std::string accepted;
  for (const auto& [e, s] : names) {
    if (text == s) return e;
    if (!accepted.empty()) accepted += '|';
    accepted += s;
  }
  throw std::invalid_argument("unknown fast-weight " + std::string(component) + " '" +
                              std::string(text) + "' (expected " + accepted + ")");
}

FastWeightPreset preset(std::string id, std::string name, FastWeightState state,
                        FastWeightLoss loss, FastWeightRetention retention,
                        FastWeightOptimizer optimizer, FastWeightRate rate,
                        FastWeightGranularity granularity, std::string inner_loop,
                        std::string note = {}) {
  return {std::move(id), std::move(name),
          FastWeightRule{state, loss, retention, optimizer, rate, granularity},
          std::move(inner_loop), std::move(note)};
}

}  // namespace

const std::vector<std::string>& fast_weight_component_names() {
  static const std::vector<std::string> kNames{"state",     "loss", "retention",
                                               "optimizer", "rate", "granularity"};
  return kNames;
}

const char* to_string(FastWeightState v) { return component_name(kStateNames, v); }
const char* to_string(FastWeightLoss v) { return component_name(kLossNames, v); }
const char* to_string(FastWeightRetention v) { return component_name(kRetentionNames, v); }
const char* to_string(FastWeightOptimizer v) { return component_name(kOptimizerNames, v); }
const char* to_string(FastWeightRate v) { return component_name(kRateNames, v); }
const char* to_string(FastWeightGranularity v) { return component_name(kGranularityNames, v); }

std::string to_string(const FastWeightRule& r) {
  return std::string("state=") + to_string(r.state) + " loss=" + to_string(r.loss) +
         " retention=" + to_string(r.retention) + " optimizer=" + to_string(r.optimizer) +
         " rate=" + to_string(r.rate) + " granularity=" + to_string(r.granularity);
}

FastWeightState parse_fast_weight_state(std::string_view t) {
  return parse_component(kStateNames, "state", t);
}
FastWeightLoss parse_fast_weight_loss(std::string_view t) {
  return parse_component(kLossNames, "loss", t);
}
FastWeightRetention parse_fast_weight_retention(std::string_view t) {
  return parse_component(kRetentionNames, "retention", t);
}
FastWeightOptimizer parse_fast_weight_optimizer(std::string_view t) {
  return parse_component(kOptimizerNames, "optimizer", t);
}
FastWeightRate parse_fast_weight_rate(std::string_view t) {
  return parse_component(kRateNames, "rate", t);
}
FastWeightGranularity parse_fast_weight_granularity(std::string_view t) {
  return parse_component(kGranularityNames, "granularity", t);
}

FastWeightRule parse_fast_weight_rule(std::string_view text) {
  FastWeightRule r;
  const std::vector<std::string>& comps = fast_weight_component_names();
  std::vector<bool> seen(comps.size(), false);
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (text[pos] == ' ') {
      ++pos;
      continue;
    }
    std::size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(pos, end - pos);
    pos = end;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      throw std::invalid_argument("fast-weight rule: expected name=value, got '" +
                                  std::string(item) + "'");
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    std::size_t c = 0;
    while (c < comps.size() && comps[c] != key) ++c;
    if (c == comps.size())
      throw std::invalid_argument("fast-weight rule: unknown component '" + std::string(key) +
                                  "' (expected state|loss|retention|optimizer|rate|granularity)");
    if (seen[c])
      throw std::invalid_argument("fast-weight rule: component '" + std::string(key) +
                                  "' given twice");
    seen[c] = true;
    switch (c) {
      case 0: r.state = parse_fast_weight_state(value); break;
      case 1: r.loss = parse_fast_weight_loss(value); break;
      case 2: r.retention = parse_fast_weight_retention(value); break;
      case 3: r.optimizer = parse_fast_weight_optimizer(value); break;
      case 4: r.rate = parse_fast_weight_rate(value); break;
      default: r.granularity = parse_fast_weight_granularity(value); break;
    }
  }
  for (std::size_t c = 0; c < comps.size(); ++c)
    if (!seen[c])
      throw std::invalid_argument("fast-weight rule: component '" + comps[c] + "' missing");
  return r;
}

const std::vector<FastWeightPreset>& fast_weight_presets() {
  using St = FastWeightState;
  using L = FastWeightLoss;
  using Re = FastWeightRetention;
  using O = FastWeightOptimizer;
  using Ra = FastWeightRate;
  using G = FastWeightGranularity;
  const std::string matrix = "tttlab/fastweight/matrix_rules.hpp", ttt = "tttlab/ttt/inner.hpp";
  static const std::vector<FastWeightPreset> kPresets{
      preset("linear_attention", "Linear attention", St::Matrix, L::Hebbian, Re::None, O::Gd,
             Ra::Fixed, G::PerToken, matrix),
      preset("mamba2", "Mamba-2 (SSD)", St::Matrix, L::Hebbian, Re::ScalarDecay, O::Gd,
             Ra::PerToken, G::ExactChunk, matrix,
             "the step is Δ_t and the decay exp(Δ_t A); the layer's convolution, gate and D skip "
             "are outside the inner loop"),
      preset("deltanet", "DeltaNet", St::Matrix, L::Squared, Re::None, O::Gd, Ra::PerToken,
             G::ExactChunk, matrix, "keys L2-normalised"),
      preset("gated_deltanet", "Gated DeltaNet", St::Matrix, L::Squared, Re::ScalarDecay, O::Gd,
             Ra::PerToken, G::ExactChunk, matrix,
             "keys L2-normalised; decay before the delta step"),
      preset("ttt_linear", "TTT-Linear", St::Matrix, L::TttLnResidual, Re::None, O::Gd,
             Ra::PerToken, G::MiniBatch, ttt,
             "the rate is λ_t per token times τ_i per position in the mini-batch"),
      preset("ttt_mlp", "TTT-MLP", St::Mlp, L::TttLnResidual, Re::None, O::Gd, Ra::PerToken,
             G::MiniBatch, ttt, "the rate as TTT-Linear's"),
      preset("titans", "Titans (memory)", St::Mlp, L::Squared, Re::WeightDecay, O::Momentum,
             Ra::PerToken, G::MiniBatch, "tttlab/fastweight/titans.hpp",
             "the paper's deep MLP memory, which the designer runs; titans.hpp and the layer compute "
             "flash-linear-attention's linear memory with TTT's LN + residual loss instead (state "
             "matrix, loss ttt_ln_residual), whose step is not the exact gradient of its loss; "
             "data-dependent rate θ, momentum η and forgetting α per token (docs/MATH.md §11.9)"),
      preset("lact", "LaCT", St::Mlp, L::DotProduct, Re::None, O::Muon, Ra::PerToken, G::LargeChunk,
             "tttlab/fastweight/lact.hpp",
             "SwiGLU state; a rate per token and per weight; momentum (the chunk's mean) before "
             "Muon, both optional; forgets by rescaling every weight row to its initial norm after "
             "each update, which the retention component does not name"),
  };
  return kPresets;
}

const FastWeightPreset& fast_weight_preset(std::string_view id) {
  std::string accepted;
  for (const FastWeightPreset& p : fast_weight_presets()) {
    if (p.id == id) return p;
    if (!accepted.empty()) accepted += '|';
    accepted += p.id;
  }
  throw std::invalid_argument("unknown fast-weight member '" + std::string(id) + "' (expected " +
                              accepted + ")");
}

NearestMember nearest_member(const FastWeightRule& r) {
  NearestMember best;
  for (const FastWeightPreset& p : fast_weight_presets()) {
    const FastWeightRule& m = p.rule;
    const std::array<bool, 6> same{r.state == m.state,         r.loss == m.loss,
                                   r.retention == m.retention, r.optimizer == m.optimizer,
                                   r.rate == m.rate,           r.granularity == m.granularity};
    int common = 0;
    for (bool s : same) common += s ? 1 : 0;
    if (best.preset != nullptr && common <= best.common) continue;  // ties keep the earlier one
    best.preset = &p;
    best.common = common;
    best.differs.clear();
    for (std::size_t c = 0; c < same.size(); ++c)
      if (!same[c]) best.differs.push_back(fast_weight_component_names()[c]);
  }
  return best;
}

}  // namespace tttlab
