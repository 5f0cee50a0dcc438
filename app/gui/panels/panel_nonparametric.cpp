// Panel — Theorem 2: softmax attention as a nonparametric learner. One block of a softmax-attention
// model reads a text; for each head the engine builds the Nadaraya–Watson estimator from the layer's
// own keys, values and queries (the "training set" at token t is every pair seen so far, the kernel
// exp(q·k/√d)) and compares its predictions with the layer's attention output. The view: the kernel
// weights over (t, i), the weights of one position as bars over the text, both outputs for that
// position, the difference meter, and how the learner's state grows with t against TTT-Linear's.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "lab/engine/data_source.hpp"
#include "lab/engine/head_inputs.hpp"
#include "lab/nonparametric/nonparametric_module.hpp"
#include "lab/engine/resources.hpp"
#include "gui/fonts.hpp"
#include "gui/keys.hpp"
#include "gui/panels/feature_panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/heatmap.hpp"
#include "gui/plot/line_plot.hpp"
#include "lab/plot/ticks.hpp"
#include "lab/nonparametric/nonparametric_settings.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;
using widgets::fit;

constexpr auto kNW = colors::kPrimal;          // the estimator ŷ
constexpr auto kAttention = colors::kDual;     // the layer's output z
constexpr auto kTTT = colors::kNormW;          // TTT-Linear's fixed state

// "3,648": state sizes read better with thousands separated.
std::string grouped(long n) {
  std::string s = std::to_string(n), out;
  const int lead = static_cast<int>(s.size()) % 3;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (static_cast<int>(i) - lead) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

// Whether the library says `m` is a softmax-attention model (or may be one: a shipped model whose
// config has not been read yet).
bool maybe_softmax(const ModelInfo& m) {
  if (m.loaded || m.config_known) return m.config.seq_layer == SeqLayerKind::SoftmaxAttention;
  return m.id.rfind("shipped:", 0) == 0 || m.id.rfind("file:", 0) == 0;
}

class NonparametricPanel final
    : public FeaturePanel<NonparametricPanelSettings, NonparametricView, &Snapshot::nonparametric> {
 public:
  NonparametricPanel()
      : FeaturePanel(kNonparametricId,
                     {{"nonparametric.model", "Theorem 2: model, block and head"},
                      {"nonparametric.text", "Theorem 2: input text"},
                      {"nonparametric.precision", "Theorem 2: precision"}},
                     "compute again") {}

  std::vector<ShortcutHelp> shortcut_help() const override {
    std::vector<ShortcutHelp> help = FeaturePanel::shortcut_help();
    help.push_back({"← →", "the previous / next position t"});
    return help;
  }

  void shortcuts(const Snapshot& snap, CommandSink& sink) override {
    FeaturePanel::shortcuts(snap, sink);
    const NonparametricView* v = snap.nonparametric.get();
    if (!v || v->T <= 0) return;
    const long t = shown_position(*v);
    if (key_pressed(Key::Left, true)) m_settings.position = std::max(0L, t - 1);
    if (key_pressed(Key::Right, true)) m_settings.position = std::min(v->T - 1, t + 1);
  }

 private:
  std::optional<Command> rerun() const override { return NonparametricRun{m_settings.run}; }

  long shown_position(const NonparametricView& v) const {
    return m_settings.position < 0 || m_settings.position >= v.T ? v.T - 1 : m_settings.position;
  }

  void draw_controls(const NonparametricView&, const Snapshot& snap, CommandSink& sink) override {
    bool changed = false;
    const LibraryView* lib = snap.library ? snap.library->models.get() : nullptr;
    const ModelInfo* info = lib ? lib->find(m_settings.run.model_id) : nullptr;
    if (classroom::visible("nonparametric.model")) {
      widgets::section_label("MODEL");
      widgets::row("Model", "Any model whose sequence layers are softmax attention: an untrained one, or a "
                            "trained one if it ships with the app or you open it.");
      changed |= model_combo(lib);
      widgets::model_summary_line(m_settings.run.model_id, lib);
      const bool known = info && (info->loaded || info->config_known);
      const int blocks = known ? info->config.num_hidden_layers : 64;
      const int heads = known ? info->config.num_attention_heads : 64;
      widgets::row("Block", "Which block's attention layer to read. It sees the text after the blocks before it.");
      changed |= slider("##block", m_settings.run.block, blocks);
      widgets::row("Head", "The head whose weights and outputs are drawn. The difference meter covers every "
                           "head of the block.");
      changed |= slider("##head", m_settings.run.head, heads);
    }

    if (classroom::visible("nonparametric.text")) {
      widgets::section_label("INPUT");
      int from_corpus = m_settings.run.data.empty() ? 0 : 1;
      if (ImGui::RadioButton("a text", &from_corpus, 0) && !m_settings.run.data.empty()) {
        m_settings.run.data.clear();
        changed = true;
      }
      ImGui::SameLine();
      if (ImGui::RadioButton("part of a corpus", &from_corpus, 1) && m_settings.run.data.empty()) {
        m_settings.run.data = default_data_source();
        changed = true;
      }
      if (m_settings.run.data.empty()) {
        widgets::row("Text");
        const auto& samples = sample_texts();
        const char* preview = "Custom text";
        for (const auto& s : samples)
          if (m_settings.run.text == s.text) preview = s.name;
        if (ImGui::BeginCombo("##sample", preview)) {
          for (const auto& s : samples)
            if (ImGui::Selectable(s.name, m_settings.run.text == s.text)) {
              m_settings.run.text = s.text;
              changed = true;
            }
          ImGui::EndCombo();
        }
        changed |= widgets::input_string("##text", m_settings.run.text, true, ImGui::GetTextLineHeight() * 3.6f);
        ImGui::PushFont(fonts().small);
        const long T = static_cast<long>(m_settings.run.text.size());
        ImGui::TextColored(
            ImGui::ColorConvertU32ToFloat4(T > NonparametricModule::kMaxTokens ? colors::kError : colors::kTextDim),
            "T = %ld tokens (bytes)%s", T, T > NonparametricModule::kMaxTokens ? " — too long for this view" : "");
        ImGui::PopFont();
      } else {
        widgets::row("Corpus", "Its validation part: text the trained models never trained on.");
        changed |= widgets::data_combo("##data", m_settings.run.data);
        widgets::row("From byte");
        long long off = m_settings.run.offset;
        if (ImGui::InputScalar("##offset", ImGuiDataType_S64, &off, nullptr, nullptr, "%lld",
                               ImGuiInputTextFlags_EnterReturnsTrue)) {
          m_settings.run.offset = std::max(0LL, off);
          changed = true;
        }
        widgets::row("Tokens");
        ImGui::SliderInt("##tokens", &m_settings.run.tokens, 16, NonparametricModule::kMaxTokens, "T = %d");
        changed |= ImGui::IsItemDeactivatedAfterEdit();
      }
    }

    if (classroom::visible("nonparametric.precision")) {
      widgets::section_label("PRECISION");
      widgets::row("Attention", "The precision the attention layer runs in. The estimator always computes in "
                                "double, with its own plain sums.");
      changed |= widgets::choice_pair("double", Precision::Double, "float", Precision::Float,
                                      m_settings.run.precision);
    }
    ImGui::Dummy(ImVec2(0, 4));
    if (ImGui::Button("Compute again  (F5)", ImVec2(-1, 0))) changed = true;
    if (changed) sink.post(NonparametricRun{m_settings.run});
    ImGui::Dummy(ImVec2(0, 4));
    widgets::note(
        "A learner that trains by remembering: at token t its training set is every pair (key kᵢ, value vᵢ) "
        "with i ≤ t. To predict for the query qₜ it averages the stored values, weighting each by the kernel "
        "κ(qₜ, kᵢ) = exp(qₜ·kᵢ/√d). This is the Nadaraya–Watson estimator. The view computes it with its own "
        "sums and compares it with what the attention layer outputs (see the Math reference, §9.2).");
  }

  // A block or head picker; true when an edit is complete (one command per edit, not per pixel).
  static bool slider(const char* id, int& value, int count) {
    ImGui::SliderInt(id, &value, 0, std::max(0, count - 1));
    value = std::clamp(value, 0, std::max(0, count - 1));
    return ImGui::IsItemDeactivatedAfterEdit();
  }

  // The library's models; those that are not softmax attention are listed but disabled. The
  // untrained softmax-attention models are always offered.
  bool model_combo(const LibraryView* lib) {
    bool changed = false;
    const ModelInfo* cur = lib ? lib->find(m_settings.run.model_id) : nullptr;
    const std::string preview = cur ? cur->label : m_settings.run.model_id;
    widgets::combo_room(preview);
    if (ImGui::BeginCombo("##model", preview.c_str())) {
      std::vector<std::string> ids;
      if (lib)
        for (const auto& m : lib->models) {
          ids.push_back(m.id);
          const bool usable = m.error.empty() && maybe_softmax(m);
          ImGui::BeginDisabled(!usable);
          if (ImGui::Selectable(m.label.c_str(), m.id == m_settings.run.model_id)) {
            m_settings.run.model_id = m.id;
            changed = true;
          }
          ImGui::EndDisabled();
          if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) {
            ImGui::BeginTooltip();
            ImGui::TextUnformatted(m.summary().c_str());
            if (!usable && m.error.empty()) ImGui::TextDisabled("not a softmax-attention model");
            ImGui::EndTooltip();
          }
        }
      for (int seed = 0; seed < 2; ++seed) {
        const std::string id = random_model_id("softmax-attention", false, static_cast<std::uint64_t>(seed));
        if (std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
        const std::string label = "untrained softmax attention (random init, seed " + std::to_string(seed) + ")";
        if (ImGui::Selectable(label.c_str(), id == m_settings.run.model_id)) {
          m_settings.run.model_id = id;
          changed = true;
        }
      }
      ImGui::EndCombo();
    }
    return changed;
  }

  void draw_view(const NonparametricView& v, const Snapshot& snap, CommandSink& sink) override {
    // Beside a docked lesson the view is about 450 px wide: shorter texts, two cards per row, the
    // table above the state sizes.
    const float view_w = ImGui::GetContentRegionAvail().x;
    const bool narrow = widgets::narrow_view(view_w);
    widgets::panel_title("Theorem 2", narrow ? "Attention stores every pair and averages them."
                                             : "Softmax attention is a learner that stores every pair and averages "
                                               "with a kernel.");
    widgets::cpu_only_line(snap, "one head of one small model, and the attention it is compared with, in double "
                                 "precision: small work, exact to rounding.");
    widgets::job_status(v.outcome, v.progress, v.error, snap, sink,
                        v.results_generation != 0 ? "the results below are from the previous run" : nullptr);
    if (v.results_generation == 0 || !v.detail) return;
    const NonparametricDetail& det = *v.detail;
    if (v.outcome == JobOutcome::Done) {
      ImGui::PushFont(fonts().small);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kAccent), "%s · head %d", v.description.c_str(),
                         v.shown_head);
      char details[256];
      std::snprintf(details, sizeof details, "T = %ld tokens (%s), d = %d, attention in %s", v.T,
                    v.text_description.c_str(), v.d, v.config.precision == Precision::Double ? "double" : "float");
      if (!narrow) widgets::same_line_if_fits(details, 10);
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextDisabled("%s", details);
      ImGui::PopTextWrapPos();
      ImGui::PopFont();
    }
    const long t = shown_position(v);
    const bool dbl = v.config.precision == Precision::Double;
    const double tol = dbl ? 1e-12 : 1e-5;

    // Metric cards.
    ImGui::Dummy(ImVec2(0, 2));
    const float gap = 8.0f;
    const int per_row = narrow ? 2 : 4;
    const float cw = (ImGui::GetContentRegionAvail().x - gap * static_cast<float>(per_row - 1)) / static_cast<float>(per_row);
    widgets::metric("max |ŷ − z|, all heads", format_value(v.max_abs_diff, 3),
                    "relative " + format_value(v.max_rel_diff, 2),
                    v.max_rel_diff < tol ? colors::kGood : colors::kWarning, cw);
    ImGui::SameLine(0, gap);
    widgets::metric(widgets::fit("each row of weights sums to", "every row sums to", cw - 16.0f, fonts().small).c_str(), "1", "off by at most " + format_value(det.row_sum_err, 2),
                    det.row_sum_err < 1e-12 ? colors::kGood : colors::kWarning, cw);
    if (!narrow) ImGui::SameLine(0, gap);
    const auto ut = static_cast<std::size_t>(t);
    char eff[48];
    std::snprintf(eff, sizeof eff, "%.1f of %ld", det.effective_pairs[ut], t + 1);
    widgets::metric("pairs that count at t", eff, "largest weight " + format_value(det.max_weight[ut], 2),
                    colors::kText, cw);
    ImGui::SameLine(0, gap);
    widgets::metric("state after t tokens", grouped(nonparametric_numbers(v, t + 1)),
                    "TTT-Linear: " + grouped(v.state_numbers_ttt), kNW, cw);
    ImGui::Dummy(ImVec2(0, 4));

    // Left: the weights over (t, i). Right: row t as bars, both outputs, the state sizes.
    const float avail_w = ImGui::GetContentRegionAvail().x;
    const float avail_h = ImGui::GetContentRegionAvail().y;
    // Leave room under the map for the table of heads, the state sizes and the note.
    const float map_w = std::max(ImGui::GetFontSize() * 10.7f, std::min(avail_w * 0.42f, avail_h - 230.0f));
    const auto tok = [&v](long i) { return widgets::quoted_token(v.bytes, i); };
    plot::Heatmap m;
    m.id = "nw_weights";
    m.export_name = "kernel_weights";
    m.title = fit("Kernel weights wₜᵢ   head " + std::to_string(v.shown_head), "Weights wₜᵢ", map_w - 10.0f, fonts().bold);
    const std::string dims = "[" + std::to_string(v.T) + " × " + std::to_string(v.T) + "]";
    m.subtitle = fit(dims + (det.weights_map.pooled() ? ", pooled: max per bin" : "") + ", log colours; click a row",
                     fit(dims + ", log colours", dims, map_w - 10.0f, fonts().small), map_w - 10.0f, fonts().small);
    m.pooled = &det.weights_map;
    m.m = plot::MatrixView::of(det.weights_map);
    m.palette = plot::Palette::Sequential;
    m.limit = 1.0;
    // A log colour scale: a flat row of t pairs has weights 1/t, which a linear scale shows as black.
    m.log_color = true;
    m.log_span = 1e4;
    m.size = ImVec2(map_w, map_w + 30.0f);
    m.max_cell = 40.0f;
    m.show_values = false;
    m.row_name = "query t";
    m.col_name = "stored pair i";
    m.row_label = tok;
    m.col_label = tok;
    m.highlight_row = det.weights_map.row_bin(t);
    m.tooltip = [&det](long r, long c, double) {
      if (c > r)
        ImGui::TextDisabled("a later pair: not in the training set yet");
      else
        ImGui::TextDisabled("wₜᵢ = κ(qₜ, kᵢ) / Σⱼ κ(qₜ, kⱼ) = %.4g", det.weights(r, c));
    };
    const ImVec2 top = ImGui::GetCursorScreenPos();
    const plot::HeatmapResult hr = plot::heatmap(m);
    if (hr.clicked && hr.row >= 0) m_settings.position = hr.row;
    const float right_x = top.x + map_w + 24.0f;
    const float right_w = avail_w - (right_x - top.x);
    ImGui::SetCursorScreenPos(ImVec2(right_x, top.y));
    ImGui::BeginGroup();
    ImGui::SetNextItemWidth(right_w);
    int pos = static_cast<int>(t);
    if (ImGui::SliderInt("##position", &pos, 0, static_cast<int>(v.T - 1), "position t = %d")) m_settings.position = pos;
    // At least 15 lines: the two plots' titles, labels and axes take about 10 at any UI scale.
    const float col_h = std::max(ImGui::GetFontSize() * 15.0f, map_w + 30.0f - ImGui::GetFrameHeightWithSpacing());
    bars(v, t, ImVec2(right_w, col_h * 0.5f));
    outputs(v, t, ImVec2(right_w, col_h * 0.5f - 8.0f));
    ImGui::EndGroup();
    // Below: every head of the block beside the state sizes.
    ImGui::SetCursorScreenPos(ImVec2(top.x, top.y + std::max(map_w + 36.0f, ImGui::GetItemRectSize().y + 6.0f)));
    const float table_w = narrow ? avail_w : avail_w * 0.56f;
    const float row_h = ImGui::GetTextLineHeightWithSpacing();
    const float table_h = row_h * static_cast<float>(v.head_summaries.size() + 1) + 8.0f;
    const float bottom_h = std::max(110.0f, table_h);
    ImGui::BeginChild("##head_table", ImVec2(table_w, narrow ? table_h : bottom_h), false);
    head_table(v, tol, narrow);
    ImGui::EndChild();
    if (!narrow) ImGui::SameLine(0, 16);
    state_sizes(v, t, ImVec2(narrow ? avail_w : avail_w - table_w - 16.0f, bottom_h));
    ImGui::Dummy(ImVec2(0, 4));
    widgets::note(
        "Each row of the map is one prediction: which stored pairs the query of token t draws its value from. "
        "The weights are the causal softmax of row t of QKᵀ/√d, and the estimator's average is the attention "
        "output, up to rounding. Unlike TTT-Linear, whose state is a d × d matrix at every t, this learner keeps "
        "every pair: its state, and its work per token, grow with the text.");
  }

  static long nonparametric_numbers(const NonparametricView& v, long t) { return 2 * t * static_cast<long>(v.d); }

  // Row t of the weights as bars over the stored pairs, each labelled with its token.
  void bars(const NonparametricView& v, long t, ImVec2 size) {
    const NonparametricDetail& det = *v.detail;
    const Fonts& f = fonts();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float title_h = f.bold->FontSize + f.small->FontSize + 5.0f, label_h = f.small->FontSize + 4.0f;
    const float min_bar = f.small->FontSize * 0.95f;
    const long shown = std::min<long>(t + 1, std::max(1L, static_cast<long>(size.x / min_bar)));
    const long first = t + 1 - shown;
    double outside = 0;
    for (long i = 0; i < first; ++i) outside += det.weights(t, i);
    char buf[160];
    std::snprintf(buf, sizeof buf, "Row t = %ld %s: the weights of the stored pairs", t, widgets::quoted_token(v.bytes, t).c_str());
    const std::string title_wide = buf;
    std::snprintf(buf, sizeof buf, "Weights of row t = %ld %s", t, widgets::quoted_token(v.bytes, t).c_str());
    const std::string title_narrow = buf;
    dl->AddText(f.bold, f.bold->FontSize, p, colors::kText, fit(title_wide, title_narrow, size.x, f.bold).c_str());
    std::string sub = "every pair i ≤ t drawn", sub_narrow = sub;
    if (first > 0) {
      std::snprintf(buf, sizeof buf, "pairs %ld … %ld drawn; the %ld before them hold %.0f %% of the weight", first, t,
                    first, 100.0 * outside);
      sub = buf;
      std::snprintf(buf, sizeof buf, "i ≥ %ld drawn; earlier: %.0f %%", first, 100.0 * outside);
      sub_narrow = buf;
    }
    dl->AddText(f.small, f.small->FontSize, ImVec2(p.x, p.y + f.bold->FontSize + 1.0f), colors::kTextDim,
                fit(sub, sub_narrow, size.x, f.small).c_str());
    const ImVec2 a(p.x, p.y + title_h), b(p.x + size.x, p.y + size.y - label_h);
    dl->AddRectFilled(a, b, colors::kPlotBg);
    double top = 0;
    for (long i = first; i <= t; ++i) top = std::max(top, det.weights(t, i));
    top = top > 0 ? top : 1.0;
    const float bw = size.x / static_cast<float>(shown);
    ImGui::Dummy(size);
    const bool hovered = ImGui::IsItemHovered();
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    for (long i = first; i <= t; ++i) {
      const float x0 = a.x + bw * static_cast<float>(i - first);
      const float h = static_cast<float>(det.weights(t, i) / top) * (b.y - a.y - 4.0f);
      dl->AddRectFilled(ImVec2(x0 + 1.0f, b.y - h), ImVec2(x0 + bw - 1.0f, b.y), i == t ? colors::kCursor : kNW);
      const std::string label = token_label(v.bytes[static_cast<std::size_t>(i)]);
      const float lw = f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0, label.c_str()).x;
      if (lw <= bw + 2.0f)
        dl->AddText(f.small, f.small->FontSize, ImVec2(x0 + (bw - lw) * 0.5f, b.y + 2.0f),
                    i == t ? colors::kText : colors::kTextDim, label.c_str());
      if (hovered && mouse.x >= x0 && mouse.x < x0 + bw) {
        ImGui::BeginTooltip();
        ImGui::Text("pair i = %ld %s", i, widgets::quoted_token(v.bytes, i).c_str());
        ImGui::Text("w = %.4g   (κ(qₜ, kᵢ) over the sum of all κ(qₜ, kⱼ), j ≤ t)", det.weights(t, i));
        ImGui::EndTooltip();
      }
    }
  }

  // ŷₜ and zₜ feature by feature: the two computations give the same vector.
  void outputs(const NonparametricView& v, long t, ImVec2 size) {
    const NonparametricDetail& det = *v.detail;
    m_nw_row.assign(det.nw_output.row(t).data(), det.nw_output.row(t).data() + v.d);
    m_att_row.assign(det.attention_output.row(t).data(), det.attention_output.row(t).data() + v.d);
    plot::LinePlot lp;
    lp.id = "nw_outputs";
    lp.export_name = "nadaraya_watson_vs_attention";
    lp.title = fit("Output of t = " + std::to_string(t) + ": zₜ (line), ŷₜ (dots)", "zₜ (line), ŷₜ (dots)", size.x,
                   fonts().bold);
    lp.y_label = "max |ŷₜ − zₜ| = " + format_value(det.token_diff[static_cast<std::size_t>(t)], 3);
    lp.legend = false;
    lp.x_label = "feature j of the head";
    lp.size = size;
    lp.x_pad = 0.02;
    plot::Series z = plot::line("zₜ, attention layer", m_att_row, kAttention, false);
    z.thickness = 2.4f;
    plot::Series y = plot::line("ŷₜ, Nadaraya–Watson", m_nw_row, kNW, false);
    y.line = false;
    y.markers = true;
    lp.series = {z, y};
    lp.x_format = [](double x) { return "j = " + std::to_string(std::lround(x)); };
    plot::line_plot(lp);
  }

  // The stored pairs grow by 2d numbers per token; TTT-Linear's W stays d × d.
  void state_sizes(const NonparametricView& v, long t, ImVec2 size) {
    const long T = v.T;
    m_state_x = {0.0, static_cast<double>(T)};
    m_state_nw = {0.0, static_cast<double>(nonparametric_numbers(v, T))};
    m_state_ttt = {static_cast<double>(v.state_numbers_ttt), static_cast<double>(v.state_numbers_ttt)};
    plot::LinePlot lp;
    lp.id = "nw_state";
    lp.export_name = "state_sizes";
    lp.title = "State after t tokens";
    lp.y_label = fit("2·t·d numbers (pairs) against d² (TTT-Linear)", "2·t·d against d²", size.x, fonts().small);
    lp.legend = false;
    lp.x_label = "tokens t";
    lp.size = size;
    lp.series = {plot::xy("stored pairs: 2·t·d", m_state_x, m_state_nw, kNW),
                 plot::xy("TTT-Linear: d²", m_state_x, m_state_ttt, kTTT)};
    lp.cursor = static_cast<double>(t + 1);
    lp.y_range = plot::Range{0.0, 1.05 * std::max(m_state_nw[1], m_state_ttt[0])};
    lp.x_format = [&v](double x) {
      const long n = std::lround(x);
      return "t = " + std::to_string(n) + ": " + grouped(2 * n * v.d) + " against " + grouped(v.state_numbers_ttt);
    };
    plot::line_plot(lp);
  }

  // Every head of the block: the difference and how many pairs count at the last token.
  void head_table(const NonparametricView& v, double tol, bool narrow) {
    const Fonts& f = fonts();
    ImGui::PushFont(f.small);
    if (ImGui::BeginTable("##heads", narrow ? 3 : 4,
                          ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
      ImGui::TableSetupColumn("head");
      if (!narrow) ImGui::TableSetupColumn("max |ŷ − z|");
      ImGui::TableSetupColumn("relative");
      ImGui::TableSetupColumn("pairs that count, last t");
      ImGui::TableHeadersRow();
      for (const auto& h : v.head_summaries) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        if (h.head == v.shown_head)
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kAccent), "head %d", h.head);
        else
          ImGui::Text("head %d", h.head);
        const double rel = h.max_abs_output > 0 ? h.max_abs_diff / h.max_abs_output : h.max_abs_diff;
        const ImVec4 verdict = ImGui::ColorConvertU32ToFloat4(rel < tol ? colors::kGood : colors::kWarning);
        ImGui::PushFont(f.mono);
        if (!narrow) {
          ImGui::TableNextColumn();
          ImGui::TextColored(verdict, "%s", format_value(h.max_abs_diff, 3).c_str());
        }
        ImGui::TableNextColumn();
        ImGui::TextColored(verdict, "%s", format_value(rel, 2).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%.1f of %ld", h.effective_pairs, v.T);
        ImGui::PopFont();
      }
      ImGui::EndTable();
    }
    ImGui::PopFont();
  }

  std::vector<double> m_nw_row, m_att_row, m_state_x, m_state_nw, m_state_ttt;  // plot data of this frame
};

}  // namespace

std::unique_ptr<Panel> make_nonparametric_panel() { return std::make_unique<NonparametricPanel>(); }

}  // namespace tttlab::gui
