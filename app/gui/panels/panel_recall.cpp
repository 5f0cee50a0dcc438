// Panel — Recall lab: how many key-value pairs can a state of width d store and give back? Nine
// memories of the same width (TTT-Linear, TTT-MLP, linear attention, softmax attention, Mamba-2,
// DeltaNet, Gated DeltaNet, Titans, LaCT) read the pairs of synthetic key-value episodes and are asked
// for every value (docs/MATH.md §9.4); a checkbox per member chooses the curves drawn. Left: accuracy
// against the number of pairs P, with P = d marked; right (or below, when narrow): the forgetting map
// of one memory, which earlier pairs it still gives back after reading pair t.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "gui/fonts.hpp"
#include "gui/panels/feature_panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/heatmap.hpp"
#include "gui/plot/line_plot.hpp"
#include "lab/plot/ticks.hpp"
#include "lab/recall/recall_settings.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;

constexpr int kMemories = recall::kMemories;
const char* memory_name(int m) { return recall::memory_name(static_cast<recall::Memory>(m)); }
const char* memory_id(int m) { return recall::memory_id(static_cast<recall::Memory>(m)); }

ImU32 memory_color(int m) {
  switch (static_cast<recall::Memory>(m)) {
    case recall::Memory::TttLinear: return colors::kLossAfter;          // sky blue
    case recall::Memory::TttMlp: return colors::kNormW;                 // green
    case recall::Memory::LinearAttention: return colors::kLossBefore;   // orange
    case recall::Memory::SoftmaxAttention: return colors::kNormDW;      // purple
    case recall::Memory::Mamba2: return colors::kMamba2;                // vermillion
    // The rest of the Okabe–Ito palette, a shade darker on the light theme.
    case recall::Memory::DeltaNet: return IM_COL32(0, 114, 178, 255);  // blue
    case recall::Memory::GatedDeltaNet:                                  // yellow
      return current_theme() == Theme::Light ? IM_COL32(170, 150, 0, 255) : IM_COL32(240, 228, 66, 255);
    case recall::Memory::Titans: return colors::kLossInitial;           // grey
    case recall::Memory::Lact: return colors::kText;                    // black (white when dark)
  }
  return colors::kText;
}

bool recall_shown(const std::vector<std::string>& members, int m) {
  return std::find(members.begin(), members.end(), memory_id(m)) != members.end();
}

class RecallPanel final : public FeaturePanel<RecallPanelSettings, RecallView, &Snapshot::recall> {
 public:
  RecallPanel()
      : FeaturePanel(kRecallId,
                     {{"recall.size", "Recall lab: width, pairs, sequences, seed"},
                      {"recall.step", "Recall lab: TTT-Linear's step η and Mamba-2's decay a"},
                      {"recall.map", "Recall lab: forgetting-map settings"},
                      {"recall.view", "Recall lab: view options"}},
                     "compute again") {}

  void sync(CommandSink& sink) override {
    m_pairs_text = widgets::join_ints(m_settings.run.pairs);
    FeaturePanel::sync(sink);
  }

 private:
  std::optional<Command> rerun() const override { return RecallRun{m_settings.run}; }
  void loaded() override {
    m_pairs_text = widgets::join_ints(m_settings.run.pairs);
    m_pairs_error.clear();
  }

  void draw_controls(const RecallView&, const Snapshot&, CommandSink& sink) override {
    bool run = false;
    RecallSettings& r = m_settings.run;
    if (classroom::visible("recall.size")) {
      widgets::section_label("THE MEMORIES");
      widgets::row("Width d", "Every memory works with vectors of this width. Keys and values are fixed random "
                              "directions of length 1.");
      ImGui::SliderInt("##d", &r.width, 8, 64, "d = %d", ImGuiSliderFlags_Logarithmic);
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Pairs P", "How many key-value pairs each memory reads before it is asked, one point of the "
                              "curves per number (increasing, at most 160).");
      if (widgets::input_string("##pairs", m_pairs_text)) {
        std::vector<int> p;
        if (widgets::parse_increasing_ints(m_pairs_text, 12, 160, p)) {
          r.pairs = p;
          m_pairs_error.clear();
          run = true;
        } else {
          m_pairs_error = "Write up to 12 increasing whole numbers from 1 to 160, e.g. 4, 8, 16, 32.";
        }
      }
      if (!m_pairs_error.empty())
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kError), "%s", m_pairs_error.c_str());
      widgets::row("Sequences", "Episodes per number of pairs: the accuracy is their mean.");
      ImGui::SliderInt("##n", &r.sequences, 1, 64, "%d each");
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Seed", "Draws the episodes and the random directions. The same seed gives the same numbers.");
      run |= widgets::seed_input(r.seed);
    }
    if (classroom::visible("recall.step")) {
      widgets::row("Step η", "The size of TTT-Linear's one gradient step per pair. At η = 1 the step stores the new "
                             "pair exactly and overwrites what was stored along its key.");
      float eta = static_cast<float>(r.eta_linear);
      if (ImGui::SliderFloat("##eta", &eta, 0.05f, 1.5f, "η = %.2f")) r.eta_linear = eta;
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Decay a", "Mamba-2 multiplies its whole state by a before each new pair. At a = 1 it is linear "
                              "attention; below 1 the oldest pairs fade, and only about the last 1 / (1 − a) stay clear.");
      float a = static_cast<float>(r.mamba_decay);
      if (ImGui::SliderFloat("##decay", &a, 0.5f, 1.0f, "a = %.3f")) r.mamba_decay = a;
      run |= ImGui::IsItemDeactivatedAfterEdit();
    }
    if (classroom::visible("recall.size")) {
      widgets::section_label("MEMBERS PLOTTED");
      ImGui::PushFont(fonts().small);
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextColored(colors::kTextDim.vec4(), "Every member is computed; tick the curves to draw. The legend "
                                                  "gives the numbers each holds after the largest P.");
      ImGui::PopTextWrapPos();
      ImGui::PopFont();
      const float column = ImGui::GetCursorPosX() + ImGui::GetContentRegionAvail().x * 0.5f;
      for (int i = 0; i < kMemories; ++i) {
        bool on = recall_shown(m_settings.members, i);
        ImGui::PushStyleColor(ImGuiCol_CheckMark, memory_color(i));
        if (ImGui::Checkbox(memory_name(i), &on)) {
          // Kept in recall::Memory order; the last one ticked stays.
          std::vector<std::string> next;
          for (int k = 0; k < kMemories; ++k)
            if (k == i ? on : recall_shown(m_settings.members, k)) next.emplace_back(memory_id(k));
          if (!next.empty()) m_settings.members = std::move(next);
        }
        ImGui::PopStyleColor();
        if (i % 2 == 0 && i + 1 < kMemories) ImGui::SameLine(column);
      }
    }
    if (classroom::visible("recall.map")) {
      widgets::section_label("FORGETTING MAP");
      widgets::row("Memory");
      int m = 0;
      for (int i = 0; i < kMemories; ++i)
        if (r.map_memory == memory_id(i)) m = i;
      if (ImGui::BeginCombo("##mapmem", memory_name(m))) {
        for (int i = 0; i < kMemories; ++i)
          if (ImGui::Selectable(memory_name(i), i == m) && i != m) {
            r.map_memory = memory_id(i);
            run = true;
          }
        ImGui::EndCombo();
      }
      widgets::row("Pairs", "How many pairs the map's episodes hold.");
      ImGui::SliderInt("##mapP", &r.map_pairs, 4, 160, "P = %d", ImGuiSliderFlags_Logarithmic);
      run |= ImGui::IsItemDeactivatedAfterEdit();
    }
    if (classroom::visible("recall.size") || classroom::visible("recall.map")) {
      ImGui::Dummy(ImVec2(0, 4));
      if (ImGui::Button("Compute again  (F5)", ImVec2(-1, 0))) run = true;
    }
    if (run) sink.post(RecallRun{r});
    if (classroom::visible("recall.view")) {
      widgets::section_label("VIEW");
      ImGui::Checkbox("logarithmic P axis", &m_settings.log_x);
    }
    ImGui::Dummy(ImVec2(0, 6));
    widgets::note("Each episode is a list of pairs (key, value). A memory reads the pairs one by one; then it is "
                  "given each key and must give back its value. The answer counts as right when the value closest "
                  "to what the memory returns is the one stored with that key.");
    widgets::note("TTT-Linear takes one gradient step per pair on its d × d matrix (the delta rule). TTT-MLP takes "
                  "one step on a two-layer network with 4d hidden units. Linear attention adds every pair into a "
                  "d × d sum. Softmax attention keeps every key and value, so its state grows with P. Mamba-2 adds "
                  "every pair into a d × d sum too, but first shrinks that sum by its decay a. The maths is in "
                  "docs/MATH.md §9.4.");
    widgets::note("DeltaNet is the delta rule with step β = 1/2; Gated DeltaNet also shrinks its matrix by a decay "
                  "α = 0.95 first. Titans is TTT-MLP's network with momentum and weight decay, its gradients taken "
                  "at the start of each mini-batch of 16 pairs. LaCT steps its network once per chunk of 16 pairs "
                  "(Muon, a dot-product loss), so a pair counts only once its chunk is full. The two MLP members "
                  "keep TTT-MLP's 8d² weights plus a momentum of the same size: their state is larger.");
  }

  void draw_view(const RecallView& v, const Snapshot& snap, CommandSink& sink) override {
    const Fonts& f = fonts();
    widgets::panel_title("Recall lab", "How many pairs can a state of width d give back?");
    widgets::cpu_only_line(snap, "one state of width d reading a few hundred pairs: small sequential work.");
    widgets::job_status(v.outcome, v.progress, v.error, snap, sink);
    const RecallSettings& st = v.settings;
    if (v.accuracy.size() != static_cast<std::size_t>(kMemories) || st.pairs.empty()) return;
    const long d = st.width;
    ImGui::PushFont(f.small);
    ImGui::PushTextWrapPos(0.0f);  // wrap at the view's edge: the lesson pane leaves it narrow
    const ImVec4 dim = ImGui::ColorConvertU32ToFloat4(colors::kTextDim);
    // Short lines of their own: ImGui may wrap after a '.', which would split a number.
    ImGui::TextColored(dim, "d = %ld · %d of %d sequences per P · seed %llu", d,
                       v.episodes_done.empty() ? 0 : v.episodes_done.back(), st.sequences,
                       static_cast<unsigned long long>(st.seed));
    ImGui::TextColored(dim, "steps: TTT-Linear η = %s · TTT-MLP, Titans, LaCT η = %s · softmax sharpness β = %s · "
                       "Mamba-2 decay a = %s",
                       format_value(st.eta_linear, 3).c_str(), format_value(v.eta_mlp, 3).c_str(),
                       format_value(v.softmax_beta, 3).c_str(), format_value(st.mamba_decay, 3).c_str());
    ImGui::TextColored(dim, "DeltaNet β = %s · Gated DeltaNet β = %s, α = %s · Titans μ = %s, λ = %s, b = %d · "
                       "LaCT μ = %s, C = %d",
                       format_value(v.params.delta_beta, 3).c_str(), format_value(v.params.delta_beta, 3).c_str(),
                       format_value(v.params.gated_decay, 3).c_str(), format_value(v.params.momentum, 3).c_str(),
                       format_value(v.params.weight_decay, 3).c_str(), v.params.titans_chunk,
                       format_value(v.params.momentum, 3).c_str(), v.params.lact_chunk);
    ImGui::TextColored(dim, "legend: numbers held after P = %d (d² = %ld; weights plus momentum and mini-batch buffers)",
                       st.pairs.back(), d * d);
    ImGui::PopTextWrapPos();
    // The legend above the plot (inside it would cover the curves' right end), wrapped at the edge.
    const bool sizes = v.state_size.size() == static_cast<std::size_t>(kMemories);
    const float right = ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x;
    bool first = true;
    for (int m = 0; m < kMemories; ++m) {
      if (!recall_shown(m_settings.members, m)) continue;
      const long n = sizes && !v.state_size[static_cast<std::size_t>(m)].empty()
                         ? std::lround(v.state_size[static_cast<std::size_t>(m)].back())
                         : 0;
      const std::string label = std::string("■ ") + memory_name(m) + " " + std::to_string(n);
      if (!first) {
        ImGui::SameLine(0, 14);
        if (ImGui::GetCursorScreenPos().x + ImGui::CalcTextSize(label.c_str()).x > right) ImGui::NewLine();
      }
      first = false;
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(memory_color(m)), "%s", label.c_str());
    }
    ImGui::PopFont();
    ImGui::Dummy(ImVec2(0, 2));

    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const bool side = avail.x >= 820.0f;
    const float plot_w = side ? avail.x * 0.55f : avail.x;
    const float plot_h = side ? avail.y - 4.0f : std::max(200.0f, avail.y * 0.5f);
    const ImVec2 origin = ImGui::GetCursorScreenPos();

    m_xs.assign(st.pairs.begin(), st.pairs.end());
    plot::LinePlot p = plot::titled("recall_accuracy", "recall_accuracy", "Recall accuracy against the number of pairs",
                                      "fraction of the P pairs given back right (dashed: P = d)",
                                      "pairs stored, P", ImVec2(plot_w, plot_h));
    p.x_scale = m_settings.log_x ? plot::ScaleKind::Log10 : plot::ScaleKind::Linear;
    p.x_pad = 0.06;
    p.y_range = plot::Range{0.0, 1.04};
    p.legend = false;
    p.markers.push_back({static_cast<double>(d), colors::kWarning, true});
    for (int m = 0; m < kMemories; ++m) {
      if (!recall_shown(m_settings.members, m)) continue;
      auto s = plot::xy(memory_name(m), m_xs, v.accuracy[static_cast<std::size_t>(m)], memory_color(m));
      s.markers = true;
      p.series.push_back(s);
    }
    p.x_format = [d](double x) {
      const long P = std::lround(x);
      return "P = " + std::to_string(P) + (P == d ? " = d" : "");
    };
    plot::line_plot(p);

    if (side)
      ImGui::SetCursorScreenPos(ImVec2(origin.x + plot_w + 14.0f, origin.y));
    else
      ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + plot_h + 8.0f));
    const ImVec2 rest = ImGui::GetContentRegionAvail();
    const long P = st.map_pairs;
    if (static_cast<long>(v.map.size()) != P * P) return;
    // Cells above the diagonal are pairs not read yet: NaN, drawn grey, not "forgotten".
    // (Rebuilt every frame: at most 160² numbers, cheaper than keeping track of which view it came from.)
    m_shown = v.map;
    for (long t = 0; t < P; ++t)
      for (long i = t + 1; i < P; ++i) m_shown[static_cast<std::size_t>(t * P + i)] = NAN;
    int mi = 0;
    for (int i = 0; i < kMemories; ++i)
      if (st.map_memory == memory_id(i)) mi = i;
    plot::Heatmap h;
    h.id = "forgetting_map";
    h.export_name = "recall_forgetting_map";
    h.title = std::string("Forgetting map: ") + memory_name(mi) + ", P = " + std::to_string(P);
    h.subtitle = "row t: after reading pair t · column i: is pair i recalled?";
    if (v.map_episodes_done < st.sequences)
      h.subtitle += " (" + std::to_string(v.map_episodes_done) + " of " + std::to_string(st.sequences) + ")";
    h.m = plot::MatrixView::of(m_shown.data(), P, P, P);
    h.palette = plot::Palette::Sequential;
    h.limit = 1.0;
    h.show_values = false;
    h.square = true;
    h.max_cell = 16.0f;
    h.size = side ? ImVec2(rest.x, std::min(rest.y - 4.0f, rest.x + 60.0f))
                  : ImVec2(rest.x, std::max(160.0f, rest.y - 4.0f));
    h.row_name = "after pair t";
    h.col_name = "pair i";
    if (d < P) h.row_lines = {d};  // below this line the memory has read more pairs than its width
    h.tooltip = [](long t, long i, double value) {
      if (i > t)
        ImGui::TextDisabled("pair %ld has not been read yet", i);
      else
        ImGui::TextDisabled("pair %ld is given back in %.0f %% of the sequences after %ld pairs", i, 100.0 * value,
                            t + 1);
    };
    plot::heatmap(h);
  }

  std::string m_pairs_text = widgets::join_ints(RecallSettings{}.pairs);
  std::string m_pairs_error;
  std::vector<double> m_xs;
  std::vector<double> m_shown;
};

}  // namespace

std::unique_ptr<Panel> make_recall_panel() { return std::make_unique<RecallPanel>(); }

}  // namespace tttlab::gui
