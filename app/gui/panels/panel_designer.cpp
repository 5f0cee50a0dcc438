// Panel — Layer designer: the student builds a fast-weight layer from the template's six components
// (docs/MATH.md §11.1), sees which named member it is or is nearest to on the map of members, and
// races its memory against a member's on the recall lab's task (§11.7): accuracy against the number
// of pairs, and the inner loss of each pair before and after its write.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "gui/fonts.hpp"
#include "gui/lab.hpp"
#include "gui/panels/feature_panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/line_plot.hpp"
#include "gui/theme.hpp"
#include "lab/designer/designer_settings.hpp"
#include "lab/plot/ticks.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;

// One component's values, each with what it means in a sentence (the combo's tooltip).
template <class E>
struct DesignerOption {
  E value;
  const char* help;
};

const DesignerOption<FastWeightState> kDesignerStates[] = {
    {FastWeightState::Matrix, "a d × d matrix S: the layer reads q S"},
    {FastWeightState::Mlp, "a two-layer network gelu(x W₁) W₂ with 4d hidden units: more to store, "
                           "and it can bend"},
};
const DesignerOption<FastWeightLoss> kDesignerLosses[] = {
    {FastWeightLoss::Hebbian, "−f(k)·v: push the answer for k towards v, however far it already is"},
    {FastWeightLoss::Squared, "½‖f(k) − v‖²: correct the answer for k only by what it gets wrong (the "
                              "delta rule)"},
    {FastWeightLoss::TttLnResidual, "TTT's ½‖LN(f(k)) + k − v‖²: the squared loss through a "
                                    "LayerNorm and a residual"},
    {FastWeightLoss::DotProduct, "−f(k)·v through any state: LaCT's loss (on a matrix it is the "
                                 "Hebbian one)"},
};
const DesignerOption<FastWeightRetention> kDesignerRetentions[] = {
    {FastWeightRetention::None, "keep everything"},
    {FastWeightRetention::ScalarDecay, "multiply the whole state by α before each write (Mamba-2, "
                                       "Gated DeltaNet)"},
    {FastWeightRetention::ChannelDecay, "a decay of its own for each key channel, around α"},
    {FastWeightRetention::WeightDecay, "shrink the weights by ηλ each step (Titans)"},
};
const DesignerOption<FastWeightOptimizer> kDesignerOptimizers[] = {
    {FastWeightOptimizer::Gd, "one gradient step"},
    {FastWeightOptimizer::Momentum, "a velocity carried from write to write (Titans' surprise)"},
    {FastWeightOptimizer::Muon, "the momentum orthogonalised before the step (LaCT)"},
};
const DesignerOption<FastWeightRate> kDesignerRates[] = {
    {FastWeightRate::Fixed, "the same step η for every pair"},
    {FastWeightRate::PerToken, "a gate learned with the layer sets each step β_t. The designer trains "
                               "nothing, so here every step is η, as with a fixed rate"},
    {FastWeightRate::PerPosition, "η / i for the i-th pair of a mini-batch or chunk"},
};
const DesignerOption<FastWeightGranularity> kDesignerGranularities[] = {
    {FastWeightGranularity::PerToken, "one step per pair, at the state just before it"},
    {FastWeightGranularity::MiniBatch, "the pairs of a mini-batch of b all take their gradient at the "
                                       "state the batch started from (TTT)"},
    {FastWeightGranularity::ExactChunk, "one step per pair, computed chunk-parallel: the same "
                                        "function as per token"},
    {FastWeightGranularity::LargeChunk, "read a whole chunk of C pairs with the old state, then "
                                        "update once (LaCT)"},
};

template <class E, std::size_t N>
bool designer_combo(const char* id, E& value, const DesignerOption<E> (&options)[N]) {
  bool changed = false;
  if (ImGui::BeginCombo(id, to_string(value))) {
    for (const DesignerOption<E>& o : options) {
      if (ImGui::Selectable(to_string(o.value), o.value == value) && o.value != value) {
        value = o.value;
        changed = true;
      }
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", o.help);
    }
    ImGui::EndCombo();
  }
  return changed;
}

ImU32 designer_faded(ImU32 c, float alpha) {
  ImVec4 f = ImGui::ColorConvertU32ToFloat4(c);
  f.w *= alpha;
  return ImGui::ColorConvertFloat4ToU32(f);
}

// The six component values of a rule, as designer_spelled, in FastWeightRule's order.
std::vector<std::string> designer_spelled(const FastWeightRule& r) {
  return {to_string(r.state),     to_string(r.loss), to_string(r.retention),
          to_string(r.optimizer), to_string(r.rate), to_string(r.granularity)};
}

class DesignerPanel final
    : public FeaturePanel<DesignerPanelSettings, DesignerView, &Snapshot::designer> {
 public:
  DesignerPanel()
      : FeaturePanel(kDesignerId,
                     {{"designer.components", "Layer designer: the six components"},
                      {"designer.numbers", "Layer designer: η, α, λ, μ and the chunk"},
                      {"designer.task", "Layer designer: width, pairs, sequences, seed"},
                      {"designer.compare", "Layer designer: the member it is compared with"}},
                     "compute again") {}

  void sync(CommandSink& sink) override {
    m_pairs_text = widgets::join_ints(m_settings.run.pairs);
    FeaturePanel::sync(sink);
  }

 private:
  std::optional<Command> rerun() const override { return DesignerRun{m_settings.run}; }
  void loaded() override {
    m_pairs_text = widgets::join_ints(m_settings.run.pairs);
    m_pairs_error.clear();
  }

  void draw_controls(const DesignerView&, const Snapshot&, CommandSink& sink) override {
    bool run = false;
    DesignerSettings& r = m_settings.run;
    FastWeightRule& d = r.design;
    DesignParams& p = r.params;
    if (classroom::visible("designer.components")) {
      widgets::section_label("START FROM A MEMBER");
      widgets::row("Member", "Sets all six components to a named layer's, and its step η.");
      if (ImGui::BeginCombo("##start", "choose…")) {
        for (const FastWeightPreset& m : fast_weight_presets())
          if (ImGui::Selectable(m.name.c_str())) {
            d = m.rule;
            p.eta = member_params(m, p).eta;
            run = true;
          }
        ImGui::EndCombo();
      }
      widgets::section_label("YOUR LAYER");
      widgets::row("State", "What the fast weights are.");
      run |= designer_combo("##state", d.state, kDesignerStates);
      widgets::row("Inner loss", "What each write descends.");
      run |= designer_combo("##loss", d.loss, kDesignerLosses);
      widgets::row("Forgetting", "How the state lets go of old pairs.");
      run |= designer_combo("##retention", d.retention, kDesignerRetentions);
      widgets::row("Optimizer", "How a gradient becomes a step.");
      run |= designer_combo("##optimizer", d.optimizer, kDesignerOptimizers);
      widgets::row("Step size", "How large each step is.");
      run |= designer_combo("##rate", d.rate, kDesignerRates);
      widgets::row("Updates", "When gradients are taken and applied.");
      run |= designer_combo("##granularity", d.granularity, kDesignerGranularities);
    }
    if (classroom::visible("designer.numbers")) {
      widgets::section_label("ITS NUMBERS");
      widgets::row("Step η", "The step size. Too large and the state overshoots and blows up; too small and "
                             "it barely learns.");
      float eta = static_cast<float>(p.eta);
      if (ImGui::SliderFloat("##eta", &eta, 0.01f, 10.0f, "η = %.3f", ImGuiSliderFlags_Logarithmic))
        p.eta = eta;
      run |= ImGui::IsItemDeactivatedAfterEdit();
      if (d.retention == FastWeightRetention::ScalarDecay ||
          d.retention == FastWeightRetention::ChannelDecay) {
        widgets::row("Decay α", "What each write keeps of the state: about the last 1 / (1 − α) pairs stay clear.");
        float a = static_cast<float>(p.decay);
        if (ImGui::SliderFloat("##decay", &a, 0.5f, 1.0f, "α = %.3f")) p.decay = a;
        run |= ImGui::IsItemDeactivatedAfterEdit();
      }
      if (d.retention == FastWeightRetention::WeightDecay) {
        widgets::row("Weight decay λ", "Each step shrinks the weights by the factor 1 − ηλ.");
        float l = static_cast<float>(p.weight_decay);
        const float hi = std::min(0.99f / static_cast<float>(p.eta), 1.0f);
        if (ImGui::SliderFloat("##wd", &l, 0.0f, hi, "λ = %.3f")) p.weight_decay = l;
        run |= ImGui::IsItemDeactivatedAfterEdit();
      }
      if (d.optimizer != FastWeightOptimizer::Gd) {
        widgets::row("Momentum μ", "How much of the last velocity each step keeps.");
        float m = static_cast<float>(p.momentum);
        if (ImGui::SliderFloat("##mu", &m, 0.0f, 0.99f, "μ = %.2f")) p.momentum = m;
        run |= ImGui::IsItemDeactivatedAfterEdit();
      }
      if (d.granularity == FastWeightGranularity::MiniBatch ||
          d.granularity == FastWeightGranularity::LargeChunk) {
        widgets::row(d.granularity == FastWeightGranularity::MiniBatch ? "Mini-batch b" : "Chunk C",
                     "How many pairs share one starting state.");
        ImGui::SliderInt("##chunk", &p.chunk, 1, 160, "%d pairs", ImGuiSliderFlags_Logarithmic);
        run |= ImGui::IsItemDeactivatedAfterEdit();
      }
      // Weight decay's limit, η·λ < 1: a larger η pulls λ down with it.
      if (d.retention == FastWeightRetention::WeightDecay && p.weight_decay * p.eta >= 1.0)
        p.weight_decay = 0.99 / p.eta;
    }
    if (classroom::visible("designer.compare")) {
      widgets::section_label("COMPARE WITH");
      const FastWeightPreset* now = nullptr;
      for (const FastWeightPreset& m : fast_weight_presets())
        if (m.id == r.compare) now = &m;
      if (ImGui::BeginCombo("##compare", now ? now->name.c_str() : r.compare.c_str())) {
        for (const FastWeightPreset& m : fast_weight_presets())
          if (ImGui::Selectable(m.name.c_str(), &m == now) && &m != now) {
            r.compare = m.id;
            run = true;
          }
        ImGui::EndCombo();
      }
    }
    if (classroom::visible("designer.task")) {
      widgets::section_label("THE TASK");
      widgets::row("Width d", "Keys and values are fixed random directions of this width, of length 1.");
      ImGui::SliderInt("##d", &p.width, 8, 64, "d = %d", ImGuiSliderFlags_Logarithmic);
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Pairs P", "How many pairs each memory reads before it is asked (increasing, at most 160).");
      if (widgets::input_string("##pairs", m_pairs_text)) {
        std::vector<int> v;
        if (widgets::parse_increasing_ints(m_pairs_text, 12, 160, v)) {
          r.pairs = v;
          m_pairs_error.clear();
          run = true;
        } else {
          m_pairs_error = "Write up to 12 increasing whole numbers from 1 to 160, e.g. 4, 8, 16, 32.";
        }
      }
      if (!m_pairs_error.empty()) widgets::error_text(m_pairs_error);
      widgets::row("Sequences", "Episodes per number of pairs: the accuracy is their mean.");
      ImGui::SliderInt("##n", &r.sequences, 1, 64, "%d each");
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Loss episode", "How many pairs the inner-loss curves follow.");
      ImGui::SliderInt("##curve", &r.curve_pairs, 4, 160, "P = %d", ImGuiSliderFlags_Logarithmic);
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Seed", "Draws the episodes, the directions and the MLP's first layer.");
      run |= widgets::seed_input(p.seed);
      ImGui::Dummy(ImVec2(0, 4));
      if (ImGui::Button("Compute again  (F5)", ImVec2(-1, 0))) run = true;
    }
    if (run) sink.post(DesignerRun{r});
    widgets::section_label("VIEW");
    ImGui::Checkbox("logarithmic P axis", &m_settings.log_x);
    ImGui::Dummy(ImVec2(0, 6));
    widgets::note("Every layer in this family keeps a small model as its memory and trains it while it reads: "
                  "each pair (key, value) is one training example. The six choices above say what that model is, "
                  "what it is trained to do, how it forgets, and how and when it steps. The maths is in "
                  "docs/MATH.md §11.");
  }

  void draw_map(const DesignerView& v) {
    const Fonts& f = fonts();
    ImGui::PushFont(f.small);
    const std::vector<std::string> mine = designer_spelled(v.settings.design);
    const ImVec4 hit = ImGui::ColorConvertU32ToFloat4(colors::kAccent);
    const ImVec4 dim = ImGui::ColorConvertU32ToFloat4(colors::kTextDim);
    const auto& names = fast_weight_component_names();
    const ImGuiTableFlags flags =
        ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
    if (ImGui::BeginTable("members", 8, flags)) {
      ImGui::TableSetupColumn("member");
      for (const std::string& n : names) ImGui::TableSetupColumn(n.c_str());
      ImGui::TableSetupColumn("shared");
      ImGui::TableHeadersRow();
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextColored(hit, "your layer");
      for (const std::string& c : mine) {
        ImGui::TableNextColumn();
        ImGui::TextColored(hit, "%s", c.c_str());
      }
      ImGui::TableNextColumn();
      for (const FastWeightPreset& m : fast_weight_presets()) {
        const std::vector<std::string> theirs = designer_spelled(m.rule);
        int same = 0;
        for (std::size_t i = 0; i < theirs.size(); ++i) same += theirs[i] == mine[i] ? 1 : 0;
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        const bool nearest = m.id == v.nearest_id, compared = m.id == v.settings.compare;
        ImGui::Text("%s%s%s", m.name.c_str(), nearest ? "  ◀ nearest" : "", compared ? "  (compared)" : "");
        if (ImGui::IsItemHovered() && !m.note.empty()) ImGui::SetTooltip("%s", m.note.c_str());
        for (std::size_t i = 0; i < theirs.size(); ++i) {
          ImGui::TableNextColumn();
          if (theirs[i] == mine[i])
            ImGui::TextColored(hit, "%s", theirs[i].c_str());
          else
            ImGui::TextColored(dim, "%s", theirs[i].c_str());
        }
        ImGui::TableNextColumn();
        ImGui::Text("%d of 6", same);
      }
      ImGui::EndTable();
    }
    ImGui::PopFont();
  }

  void draw_view(const DesignerView& v, const Snapshot& snap, CommandSink& sink) override {
    const Fonts& f = fonts();
    widgets::panel_title("Layer designer", "Pick six components; see which layer you built and how well it recalls.");
    widgets::cpu_only_line(snap, "two small memories reading a few thousand pairs: small sequential work.");
    widgets::job_status(v.outcome, v.progress, v.error, snap, sink);
    const DesignerSettings& st = v.settings;
    if (v.accuracy.size() != 2 || v.loss_before.size() != 2 || st.pairs.empty()) return;

    if (v.common == 6) {
      ImGui::Text("Your layer is %s.", v.nearest_name.c_str());
    } else {
      std::string differs;
      for (std::size_t i = 0; i < v.differs.size(); ++i) differs += (i ? ", " : "") + v.differs[i];
      ImGui::TextWrapped("Your layer is nearest to %s: it shares %d of the 6 components and differs in %s.",
                         v.nearest_name.c_str(), v.common, differs.c_str());
    }
    draw_map(v);

    ImGui::PushFont(f.small);
    const ImVec4 dim_c = ImGui::ColorConvertU32ToFloat4(colors::kTextDim);
    ImGui::TextColored(dim_c, "d = %d · %d of %d sequences per P · seed %llu · %s runs with η = %s", st.params.width,
                       v.episodes_done.empty() ? 0 : v.episodes_done.back(), st.sequences,
                       static_cast<unsigned long long>(st.params.seed), v.compare_name.c_str(),
                       format_value(v.compare_params.eta, 3).c_str());
    ImGui::TextColored(dim_c, "state in numbers after %d pairs: yours %ld · %s %ld", st.curve_pairs, v.state_size[0],
                       v.compare_name.c_str(), v.state_size[1]);
    const ImU32 col[2] = {widgets::series_color(0), widgets::series_color(1)};
    const std::string who[2] = {"your layer", v.compare_name};
    for (int m = 0; m < 2; ++m) {
      if (m) ImGui::SameLine(0, 14);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(col[m]), "■ %s", who[m].c_str());
    }
    ImGui::PopFont();
    if (st.design.rate == FastWeightRate::PerToken)
      widgets::note("Step size per token: the gate β_t is learned along with the layer, and this view trains "
                    "nothing, so every step here is η. Train the layer (`tttlab train --layer deltanet`) to see "
                    "a learned one.");
    for (int m = 0; m < 2; ++m)
      if (v.diverged[m])
        widgets::warning(who[m] + ": its state blew up (a loss went past 10¹² or was not a number). A smaller "
                                  "step η, or forgetting, keeps it in range.");

    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const bool side = avail.x >= 820.0f;
    const float w = side ? (avail.x - 14.0f) * 0.5f : avail.x;
    const float h = side ? std::max(200.0f, avail.y - 4.0f) : std::max(200.0f, avail.y * 0.5f - 8.0f);
    const ImVec2 origin = ImGui::GetCursorScreenPos();

    m_xs.assign(st.pairs.begin(), st.pairs.end());
    plot::LinePlot a = plot::titled("designer_accuracy", "designer_accuracy", "Recall accuracy against the number of pairs",
                                    "fraction of the P pairs given back right (dashed: P = d)", "pairs stored, P",
                                    ImVec2(w, h));
    a.x_scale = m_settings.log_x ? plot::ScaleKind::Log10 : plot::ScaleKind::Linear;
    a.x_pad = 0.06;
    a.y_range = plot::Range{0.0, 1.04};
    a.legend = false;
    a.markers.push_back({static_cast<double>(st.params.width), colors::kWarning, true});
    for (int m = 0; m < 2; ++m) {
      auto s = plot::xy(who[m], m_xs, v.accuracy[static_cast<std::size_t>(m)], col[m]);
      s.markers = true;
      a.series.push_back(s);
    }
    plot::line_plot(a);

    if (side)
      ImGui::SetCursorScreenPos(ImVec2(origin.x + w + 14.0f, origin.y));
    else
      ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + h + 8.0f));
    const std::size_t n = static_cast<std::size_t>(std::max(0, v.curve_done));
    plot::LinePlot l = plot::titled("designer_losses", "designer_losses", "Inner loss of each pair, before and after its write",
                                    "each memory's own inner loss of pair t (faint: before the write, solid: after)", "pair t", ImVec2(w, h));
    l.legend = false;
    for (int m = 0; m < 2; ++m) {
      const auto& b = v.loss_before[static_cast<std::size_t>(m)];
      const auto& af = v.loss_after[static_cast<std::size_t>(m)];
      auto sb = plot::line(who[m] + ", before", std::span<const double>(b.data(), n), designer_faded(col[m], 0.45f), false, 1.0);
      auto sa = plot::line(who[m] + ", after", std::span<const double>(af.data(), n), col[m], false, 1.0);
      l.series.push_back(sb);
      l.series.push_back(sa);
    }
    plot::line_plot(l);
  }

  std::string m_pairs_text = widgets::join_ints(DesignerSettings{}.pairs);
  std::string m_pairs_error;
  std::vector<double> m_xs;
};

}  // namespace

std::unique_ptr<Panel> make_designer_panel() { return std::make_unique<DesignerPanel>(); }

}  // namespace tttlab::gui
