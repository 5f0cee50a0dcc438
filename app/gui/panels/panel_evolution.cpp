// Panel 2 — Hidden-state evolution: the hidden state W_t of one head over a whole sequence, for any
// block and head of a model (TTT-Linear or TTT-MLP; a toy head too). A scrubber walks the tokens;
// the panel shows W_t (or its change from W_0), the change made by token t, how far the state has
// drifted from W_0, and the singular values of W_t and of W_t − W_0 over the sequence: the update
// is a sum of rank-1 terms, and the spectrum shows how many directions the state has actually learned.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "lab/evolution/evolution_module.hpp"
#include "lab/engine/head_inputs.hpp"
#include "gui/fonts.hpp"
#include "gui/keys.hpp"
#include "gui/panels/feature_panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/heatmap.hpp"
#include "gui/plot/line_plot.hpp"
#include "lab/plot/pooling.hpp"
#include "lab/plot/ticks.hpp"
#include "lab/evolution/evolution_settings.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;

class EvolutionPanel final
    : public FeaturePanel<EvolutionPanelSettings, EvolutionView, &Snapshot::evolution> {
 public:
  EvolutionPanel()
      : FeaturePanel(kEvolutionId, {{"evolution.source", "Evolution: model, block and head"},
                                    {"evolution.text", "Evolution: input text"},
                                    {"evolution.inner", "Evolution: toy-head settings"},
                                    {"evolution.view", "Evolution: view options"}}) {}

  std::vector<ShortcutHelp> shortcut_help() const override {
    return {{"Space", "play / pause the scrubber"},
            {"→  ←", "one token forward / back"},
            {"Shift+→  Shift+←", "one mini-batch forward / back"},
            {"Home  End", "the first / the last token"}};
  }

  void shortcuts(const Snapshot& snap, CommandSink&) override {
    const EvolutionView* v = snap.evolution.get();
    if (!v || v->steps.empty()) return;
    const long n = static_cast<long>(v->steps.size());
    const long b = std::max(1, v->mini_batch);
    long t = cursor(*v);
    if (key_pressed(Key::Space, false)) toggle_play(*v);
    if (key_pressed(Key::Right)) t += shift_down() ? b : 1;
    if (key_pressed(Key::Left)) t -= shift_down() ? b : 1;
    if (key_pressed(Key::Home, false)) t = 0;
    if (key_pressed(Key::End, false)) t = n - 1;
    if (t != cursor(*v)) {
      m_playing = false;
      m_settings.cursor = std::clamp(t, 0L, n - 1);
    }
  }

 private:
  long cursor(const EvolutionView& v) const {
    const long n = static_cast<long>(v.steps.size());
    if (n == 0) return -1;
    return m_settings.cursor < 0 ? n - 1 : std::min(m_settings.cursor, n - 1);
  }

  void toggle_play(const EvolutionView& v) {
    m_playing = !m_playing;
    if (m_playing && cursor(v) >= static_cast<long>(v.steps.size()) - 1) m_settings.cursor = 0;
    m_play_clock = ImGui::GetTime();
  }

  // The scrubber plays on the UI side: every W_t is already in the snapshot.
  void update(const EvolutionView& v) override {
    if (!m_playing || v.steps.empty()) return;
    const double now = ImGui::GetTime();
    const long steps = static_cast<long>((now - m_play_clock) * m_settings.play_speed);
    if (steps <= 0) return;
    m_play_clock += static_cast<double>(steps) / m_settings.play_speed;
    const long n = static_cast<long>(v.steps.size());
    m_settings.cursor = std::min(cursor(v) + steps, n - 1);
    if (m_settings.cursor >= n - 1 && v.done) m_playing = false;
  }

  void draw_controls(const EvolutionView& v, const Snapshot& snap, CommandSink& sink) override {
    widgets::HeadEditorOptions opt;
    opt.limits = EvolutionModule::limits();
    opt.library = snap.library ? snap.library->models.get() : nullptr;
    opt.sink = &sink;
    opt.panel = "evolution";
    const std::string text_before = m_settings.head.text;
    bool changed = widgets::head_editor(m_settings.head, opt);
    if (changed && m_settings.head.text != text_before) m_settings.text_file.clear();  // typed over the file's
    changed |= widgets::own_text_file(opt.panel, m_settings.text_file, m_settings.head, opt.limits, m_text_error);
    if (changed) {
      m_settings.cursor = -1;
      sink.post(EvolutionConfigure{m_settings.head});
    }
    if (classroom::visible("evolution.view")) {
      widgets::section_label("VIEW");
      widgets::row("Map", "What the large heat-map shows at the cursor.");
      widgets::choice_pair("Wₜ − W₀", true, "Wₜ", false, m_settings.show_delta);
      widgets::row("Spectrum", "Singular values of the learned change Wₜ − W₀ (how many directions the state has "
                               "written) or of Wₜ itself.");
      widgets::choice_pair("of Wₜ − W₀", true, "of Wₜ", false, m_settings.spectrum_of_delta);
      if (v.mlp) {
        widgets::row("Layer");
        ImGui::RadioButton(widgets::state_matrix_name(v.config, true, 0).c_str(), &m_settings.layer, 0);
        ImGui::SameLine();
        ImGui::RadioButton(widgets::state_matrix_name(v.config, true, 1).c_str(), &m_settings.layer, 1);
      }
      widgets::row("Play speed");
      float sp_f = static_cast<float>(m_settings.play_speed);
      if (ImGui::SliderFloat("##speed", &sp_f, 2.0f, 300.0f, "%.0f tokens/s", ImGuiSliderFlags_Logarithmic))
        m_settings.play_speed = sp_f;
    }
    ImGui::Dummy(ImVec2(0, 6));
    // The text follows the b of the view shown: with b > 1 the tokens of a mini-batch all take their
    // gradient at the state the mini-batch started from, which "one step per token" would hide.
    if (!m_settings.head.ttt()) {
      widgets::note("The member reads the whole text in its primal form (in double precision); every state is "
                     "kept, so scrubbing is instant. Each token's step adds a rank-1 gradient term (and, with a "
                     "decay or weight decay, shrinks what is there); the singular values show how many "
                     "independent directions the state holds.");
    } else if (m_shown_b > 1) {
      const std::string b = std::to_string(m_shown_b);
      widgets::note(("The head reads the whole text in the primal form (in double precision); every Wₜ is kept, "
                    "so scrubbing is instant. With b = " + b + ", the " + b + " tokens of a mini-batch all take "
                    "their gradient at the state the mini-batch started from: each adds a rank-1 term −η kᵀ∇ℓ, "
                    "so one mini-batch can add up to " + b + " directions at once. The singular values show how "
                    "many independent directions all those terms add up to.").c_str());
    } else {
      widgets::note("The head reads the whole text in the primal form (one gradient step per token, in double "
                    "precision); every Wₜ is kept, so scrubbing is instant. Each token adds a rank-1 term "
                    "−η kᵀ∇ℓ to the state; the singular values show how many independent directions those "
                    "terms add up to.");
    }
  }

  void draw_view(const EvolutionView& v, const Snapshot&, CommandSink&) override {
    m_shown_b = v.mini_batch;
    const Fonts& f = fonts();
    if (v.config.ttt())
      widgets::panel_title("Hidden-state evolution", "The state Wₜ of one head as it reads the whole sequence.");
    else
      widgets::panel_title("Hidden-state evolution", ("The state of " + v.config.member_name() +
                                                      " as it reads the whole sequence.").c_str());
    if (!v.error.empty()) {
      ImGui::Dummy(ImVec2(0, 8));
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(colors::kError));
      ImGui::TextWrapped("These settings cannot run: %s", v.error.c_str());
      ImGui::PopStyleColor();
      return;
    }
    if (!v.w0) return;
    ImGui::PushFont(f.small);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kAccent), "%s", v.description.c_str());
    ImGui::SameLine(0, 10);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "%s, d = %d, b = %d, T = %ld%s",
                       v.config.member_name().c_str(), v.d, v.mini_batch, v.tokens(),
                       v.done ? "" : "  (computing…)");
    if (!v.config.toy()) widgets::device_line(v.device, v.device_note);
    ImGui::PopFont();
    if (!v.config.toy()) widgets::follow_line(v.model_step, v.reloads);

    const long n = static_cast<long>(v.steps.size());
    const long t = cursor(v);
    scrubber(v, t);
    if (const long c = widgets::token_strip(v.bytes, std::max(1, v.mini_batch), t, n, 2.0f * (f.mono->FontSize + 10.0f));
        c >= 0 && c < n) {
      m_settings.cursor = c;
      m_playing = false;
    }
    if (t < 0) return;
    ImGui::Dummy(ImVec2(0, 4));
    maps(v, t);
    ImGui::Dummy(ImVec2(0, 6));
    curves(v, t);
  }

  void scrubber(const EvolutionView& v, long t) {
    const long n = static_cast<long>(v.steps.size());
    if (widgets::icon_button(m_playing ? "\xE2\x85\xA1" : "\xE2\x96\xB6", m_playing ? "Pause (Space)" : "Play (Space)",
                             m_playing))
      toggle_play(v);
    ImGui::SameLine(0, 10);
    const float w = ImGui::GetContentRegionAvail().x - ImGui::GetFontSize() * 11.0f;
    ImGui::SetNextItemWidth(std::max(60.0f, w));
    int ti = static_cast<int>(std::max(0L, t));
    if (ImGui::SliderInt("##scrub", &ti, 0, static_cast<int>(std::max(0L, n - 1)), "")) {
      m_settings.cursor = ti;
      m_playing = false;
    }
    // Mini-batch boundaries on the slider track.
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const long T = v.tokens();
    if (v.mini_batch > 0 && T / v.mini_batch < 200)
      for (long s = v.mini_batch; s < T; s += v.mini_batch) {
        const float x = a.x + 6.0f + (b.x - a.x - 12.0f) * static_cast<float>(s) / static_cast<float>(std::max(1L, T - 1));
        dl->AddLine(ImVec2(x, b.y - 4.0f), ImVec2(x, b.y - 1.0f), colors::kMarker);
      }
    ImGui::SameLine(0, 10);
    ImGui::AlignTextToFramePadding();
    ImGui::Text("t = %ld %s  of %ld", t, widgets::quoted_token(v.bytes, t).c_str(), T);
  }

  const Mat<float>& pick(const EvolutionStep& s) const { return m_settings.layer == 1 && s.w2.size() ? s.w2 : s.w1; }

  void maps(const EvolutionView& v, long t) {
    const EvolutionStep& cur = *v.steps[static_cast<std::size_t>(t)];
    const EvolutionStep& prev = t > 0 ? *v.steps[static_cast<std::size_t>(t - 1)] : *v.w0;
    const Mat<float>& W = pick(cur);
    const Mat<float>& W0 = pick(*v.w0);
    m_map_main = m_settings.show_delta ? Mat<float>(W - W0) : W;
    m_map_step = W - pick(prev);
    const std::string wn = widgets::state_matrix_name(v.config, v.mlp, v.mlp ? m_settings.layer : 0);
    const std::string shape = "[" + std::to_string(W.rows()) + " × " + std::to_string(W.cols()) + "]";

    const float avail = ImGui::GetContentRegionAvail().x;
    const float h = std::clamp(ImGui::GetContentRegionAvail().y * 0.42f, 200.0f, 330.0f);
    const float wide = static_cast<float>(W.cols()) / static_cast<float>(std::max<Eigen::Index>(1, W.rows()));
    // The spectrum beside the two maps keeps at least a third of the row (280 px or more): the wide
    // maps of TTT-MLP (d × 4d) would otherwise take four fifths and squeeze it.
    const float gap = 18.0f;
    // Beside a docked lesson the row is narrow: the spectrum then takes at most 40 %, so that the three
    // never run past the right edge.
    const float spectrum_min = std::min(std::max(avail / 3.0f, 280.0f), avail * 0.4f);
    const float map_w = std::max(120.0f, std::min({avail * (wide > 1.5f ? 0.40f : 0.27f), (h - 40.0f) * wide + 70.0f,
                                                   (avail - 2.0f * gap - spectrum_min) * 0.5f}));
    // The row is as tall as a map with square cells at this width (no gap under short maps).
    const float h_fit = std::min(h, (map_w - 62.0f) / wide + 48.0f);
    const ImVec2 top = ImGui::GetCursorScreenPos();

    plot::Heatmap a;
    a.id = "w_main";
    a.export_name = m_settings.show_delta ? "W_t_minus_W0" : "W_t";
    a.title = m_settings.show_delta ? wn + "ₜ − " + wn + "₀" : wn + "ₜ";
    a.subtitle = shape + "  after token " + std::to_string(t);
    a.m = plot::MatrixView::of(m_map_main.data(), m_map_main.rows(), m_map_main.cols(), m_map_main.cols());
    a.size = ImVec2(map_w, h_fit);
    a.row_name = "i";
    a.col_name = "j";
    const EvolutionStep* w0p = v.w0.get();
    const bool l2 = m_settings.layer == 1 && cur.w2.size();
    a.tooltip = [&, w0p, l2](long i, long j, double) {
      const Mat<float>& w0m = l2 ? w0p->w2 : w0p->w1;
      const Mat<float>& wm = l2 ? cur.w2 : cur.w1;
      ImGui::TextDisabled("%sₜ[%ld,%ld] = %s   %s₀[%ld,%ld] = %s", wn.c_str(), i, j, format_value(wm(i, j), 4).c_str(),
                          wn.c_str(), i, j, format_value(w0m(i, j), 4).c_str());
    };
    plot::heatmap(a);

    ImGui::SetCursorScreenPos(ImVec2(top.x + map_w + gap, top.y));
    plot::Heatmap b;
    b.id = "w_step";
    b.export_name = "delta_W_t";
    b.title = "Δ" + wn + "ₜ = " + wn + "ₜ − " + wn + "ₜ₋₁";
    b.subtitle = "what token " + std::to_string(t) + " " + widgets::quoted_token(v.bytes, t) + " changed";
    b.m = plot::MatrixView::of(m_map_step.data(), m_map_step.rows(), m_map_step.cols(), m_map_step.cols());
    b.size = ImVec2(map_w, h_fit);
    b.row_name = "i";
    b.col_name = "j";
    plot::heatmap(b);

    // The spectrum at the cursor against W0's.
    ImGui::SetCursorScreenPos(ImVec2(top.x + 2.0f * (map_w + gap), top.y));
    const std::vector<float>& sv = spectrum(cur);
    const std::vector<float>& sv0 = m_settings.spectrum_of_delta ? std::vector<float>() : spectrum(*v.w0);
    m_sv_now.assign(sv.begin(), sv.end());
    m_sv_zero.assign(sv0.begin(), sv0.end());
    plot::LinePlot p;
    p.id = "spectrum_now";
    p.export_name = "singular_values_at_t";
    const float plot_w = ImGui::GetContentRegionAvail().x;
    const std::string at = " at t = " + std::to_string(t);
    p.title = widgets::fit("Singular values" + at, "σᵢ" + at, plot_w, fonts().bold);
    const std::string of = m_settings.spectrum_of_delta ? "σᵢ(" + wn + "ₜ − " + wn + "₀)" : "σᵢ(" + wn + "ₜ) against σᵢ(" + wn + "₀)";
    p.y_label = widgets::fit(of + ", log scale", of, plot_w, fonts().small);
    p.x_label = "index i (largest first)";
    // As tall as the maps, but never flatter than a plot reads (wide maps are short).
    const float plot_h = std::max(h_fit, std::min(h, 220.0f));
    p.size = ImVec2(plot_w, plot_h);
    p.y_scale = plot::ScaleKind::Log10;
    p.x_range = plot::Range{0.5, std::max(2.0, static_cast<double>(sv.size()) + 0.5)};
    auto s1 = plot::line(m_settings.spectrum_of_delta ? "σ(Wₜ − W₀)" : "σ(Wₜ)", m_sv_now, colors::kNormDW, false, 1.0, 1.0);
    s1.markers = sv.size() <= 64;
    p.series.push_back(s1);
    if (!m_settings.spectrum_of_delta) {
      auto s0 = plot::line("σ(W₀)", m_sv_zero, colors::kLossInitial, false, 1.0, 1.0);
      p.series.push_back(s0);
    }
    p.x_format = [](double x) { return "i = " + std::to_string(std::lround(x)); };
    plot::line_plot(p);
    ImGui::SetCursorScreenPos(ImVec2(top.x, top.y + plot_h + 4.0f));
    ImGui::Dummy(ImVec2(avail, 1.0f));
  }

  const std::vector<float>& spectrum(const EvolutionStep& s) const {
    const bool l2 = m_settings.layer == 1 && !s.sv2.empty();
    if (m_settings.spectrum_of_delta) return l2 ? s.dsv2 : s.dsv1;
    return l2 ? s.sv2 : s.sv1;
  }

  void curves(const EvolutionView& v, long t) {
    const long n = static_cast<long>(v.steps.size());
    const bool l2 = m_settings.layer == 1 && v.mlp;
    m_drift.resize(static_cast<std::size_t>(n));
    m_norm.resize(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) {
      const EvolutionStep& s = *v.steps[static_cast<std::size_t>(i)];
      m_drift[static_cast<std::size_t>(i)] = l2 ? s.drift2 : s.drift1;
      m_norm[static_cast<std::size_t>(i)] = l2 ? s.norm2 : s.norm1;
    }
    const long T = v.tokens();
    std::vector<plot::VLine> marks;
    for (long s = v.mini_batch; v.mini_batch > 0 && s < T; s += v.mini_batch) marks.push_back({s - 0.5, colors::kMarker, true});
    const auto fmt = [&v](double x) {
      const long i = std::lround(x);
      return "t = " + std::to_string(i) + "  " + widgets::quoted_token(v.bytes, i);
    };
    const std::string wn = widgets::state_matrix_name(v.config, v.mlp, l2 ? 1 : 0);
    // At least 11.5 lines (the view scrolls): the plot's title, labels and axes take about 7 at any UI scale.
    const float h = std::max(ImGui::GetFontSize() * 11.5f, ImGui::GetContentRegionAvail().y - 6.0f);
    const float avail = ImGui::GetContentRegionAvail().x;

    plot::LinePlot d;
    d.id = "drift";
    d.export_name = "state_drift";
    d.title = widgets::fit("How far the state has moved", "State drift", avail * 0.42f, fonts().bold);
    d.y_label = widgets::fit("Frobenius norms · dashed: mini-batch ends · drag to scrub",
                             "Frobenius norms · drag to scrub", avail * 0.42f, fonts().small);
    d.x_label = "token t";
    d.size = ImVec2(avail * 0.42f, h);
    d.x_range = plot::Range{-0.5, std::max(1.0, static_cast<double>(T) - 0.5)};
    d.markers = marks;
    d.cursor = static_cast<double>(t);
    d.x_format = fmt;
    d.series.push_back(plot::line("‖" + wn + "ₜ − " + wn + "₀‖", m_drift, colors::kNormDW, false));
    d.series.push_back(plot::line("‖" + wn + "ₜ‖", m_norm, colors::kNormW, false));
    if (const auto r = plot::line_plot(d); r.drag_x) {
      m_settings.cursor = std::clamp(std::lround(*r.drag_x), 0L, n - 1);
      m_playing = false;
    }
    ImGui::SameLine(0, 14);

    // The whole spectrum over time: row i is σ_i, column t is token t (a "spectrogram").
    // Rebuilt only when the data changes: as one pooled matrix it is drawn from a cached texture.
    const SpecKey key{v.generation, n, m_settings.spectrum_of_delta, m_settings.layer};
    if (!(key == m_spec_key)) {
      const long k = static_cast<long>(spectrum(*v.steps[0]).size());
      m_spec = plot::pool_max_abs_fn(k, n, 512, 2048, [&](long r, long c) {
        const auto& sv = spectrum(*v.steps[static_cast<std::size_t>(c)]);
        return static_cast<std::size_t>(r) < sv.size() ? std::max(static_cast<double>(sv[static_cast<std::size_t>(r)]), 1e-12)
                                                        : 1e-12;
      });
      m_spec_key = key;
    }
    plot::Heatmap sg;
    sg.id = "spectrogram";
    sg.export_name = "singular_values_over_t";
    sg.title = m_settings.spectrum_of_delta
                   ? widgets::fit("Singular values of " + wn + "ₜ − " + wn + "₀ over the sequence",
                                  "σᵢ(" + wn + "ₜ − " + wn + "₀) over t", ImGui::GetContentRegionAvail().x, fonts().bold)
                   : widgets::fit("Singular values of " + wn + "ₜ over the sequence", "σᵢ(" + wn + "ₜ) over t",
                                  ImGui::GetContentRegionAvail().x, fonts().bold);
    sg.subtitle = widgets::fit("row i: σᵢ (largest on top), column t: after token t; log colour over 4 decades",
                               "row i: σᵢ, column t: token t; log colours", ImGui::GetContentRegionAvail().x,
                               fonts().small);
    sg.pooled = &m_spec;
    sg.m = plot::MatrixView::of(m_spec);
    sg.palette = plot::Palette::Sequential;
    sg.log_color = true;
    sg.log_span = 1e4;  // four decades: the zero singular values (rank < d) sit at the dark end
    sg.square = false;
    sg.max_cell = 60.0f;
    sg.show_values = false;
    sg.size = ImVec2(ImGui::GetContentRegionAvail().x, h);
    sg.row_name = "σ index i";
    sg.col_name = "token t";
    sg.col_label = [&v](long c) { return widgets::quoted_token(v.bytes, c); };
    sg.highlight_col = t;
    if (const auto r = plot::heatmap(sg); r.clicked && r.col >= 0) {
      m_settings.cursor = r.col;
      m_playing = false;
    }
  }

  bool m_playing = false;
  std::string m_text_error;  // why the last text file chosen was refused
  double m_play_clock = 0.0;
  int m_shown_b = 0;  // the b of the view last drawn, for the settings' note
  // Per-frame scratch (kept to avoid reallocations; rebuilt every frame from the snapshot).
  Mat<float> m_map_main, m_map_step;
  struct SpecKey {
    std::uint64_t generation = 0;
    long n = -1;
    bool delta = false;
    int layer = 0;
    bool operator==(const SpecKey&) const = default;
  };
  plot::PooledMatrix m_spec;
  SpecKey m_spec_key;
  std::vector<double> m_drift, m_norm, m_sv_now, m_sv_zero;
};

}  // namespace

std::unique_ptr<Panel> make_evolution_panel() { return std::make_unique<EvolutionPanel>(); }

}  // namespace tttlab::gui
