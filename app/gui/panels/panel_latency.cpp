// Panel — Latency lab: the time a layer takes per token against the context length T, for prefill (a
// forward over a window of T tokens) and for decode (one more token after a context of T), one curve
// per layer (the paper's Fig. 3). A fixed-size state costs the same per token at any T; attention reads
// every key and value of the context, so its cost per token grows with T. Each point is a median, its
// quartiles drawn as thin lines around it; where the panels compute on a GPU the same points are
// measured there too and drawn with markers.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "gui/fonts.hpp"
#include "gui/lab.hpp"
#include "gui/panels/feature_panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/line_plot.hpp"
#include "gui/plot/plot_common.hpp"
#include "gui/theme.hpp"
#include "lab/latency/latency_settings.hpp"
#include "lab/plot/ticks.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;

const char* const kLatencyLayers[] = {"ttt-linear", "ttt-mlp", "softmax-attention", "linear-attention",
                               "mamba2"};

ImU32 layer_color(const std::string& layer) {
  if (layer == "ttt-linear") return colors::kLossAfter;         // sky blue
  if (layer == "ttt-mlp") return colors::kNormW;                // green
  if (layer == "linear-attention") return colors::kLossBefore;  // orange
  if (layer == "softmax-attention") return colors::kNormDW;     // purple
  if (layer == "mamba2") return colors::kMamba2;                // vermillion
  return colors::kText;
}

ImU32 faint(ImU32 c) { return (c & 0x00FFFFFFu) | (static_cast<ImU32>(90) << IM_COL32_A_SHIFT); }

class LatencyPanel final
    : public FeaturePanel<LatencyPanelSettings, LatencyView, &Snapshot::latency> {
 public:
  LatencyPanel()
      : FeaturePanel(kLatencyId,
                     {{"latency.layers", "Latency lab: which layers"},
                      {"latency.size", "Latency lab: model size, contexts, repeats, seed"},
                      {"latency.view", "Latency lab: view options"}},
                     "measure again") {}

 private:
  std::optional<Command> rerun() const override { return LatencyRun{m_settings.run}; }

  void draw_controls(const LatencyView&, const Snapshot&, CommandSink& sink) override {
    bool run = false;
    LatencySettings& r = m_settings.run;
    if (classroom::visible("latency.layers")) {
      widgets::section_label("LAYERS");
      for (const char* layer : kLatencyLayers) {
        const bool had = std::find(r.layers.begin(), r.layers.end(), layer) != r.layers.end();
        bool on = had;
        ImGui::PushStyleColor(ImGuiCol_CheckMark,
                              ImGui::ColorConvertU32ToFloat4(layer_color(layer)));
        ImGui::Checkbox(latency_layer_label(layer).c_str(), &on);
        ImGui::PopStyleColor();
        if (on != had && (on || r.layers.size() > 1)) {
          // Kept in the order of kLatencyLayers, so the curves keep their places.
          std::vector<std::string> next;
          for (const char* l : kLatencyLayers)
            if (l == std::string(layer)
                    ? on
                    : std::find(r.layers.begin(), r.layers.end(), l) != r.layers.end())
              next.emplace_back(l);
          r.layers = next;
          run = true;
        }
      }
    }
    if (classroom::visible("latency.size")) {
      widgets::section_label("SIZE");
      widgets::row(
          "Model",
          "Every layer sits in a model of this preset with random weights: the time per token does "
          "not depend on the weights' values.");
      run |= widgets::choice_pair("tiny", std::string("tiny"), "small", std::string("small"),
                                  r.preset);
      widgets::row("Largest T", "The contexts run 64, 128, 256, … up to this (a multiple of 64).");
      ImGui::SliderInt("##T", &r.max_context, 64, 8192, "T ≤ %d", ImGuiSliderFlags_Logarithmic);
      if (ImGui::IsItemDeactivatedAfterEdit()) {
        r.max_context = std::clamp((r.max_context + 32) / 64 * 64, 64, 16384);
        run = true;
      }
      widgets::row("Prefill runs",
                   "Forwards over the window per point: the point is their median.");
      ImGui::SliderInt("##rep", &r.repeats, 1, 20, "%d per point");
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row(
          "Decode steps",
          "Tokens fed one at a time after each context, each timed: the point is their median.");
      ImGui::SliderInt("##dec", &r.decode_tokens, 1, 63, "%d per point");
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Seed", "The random weights and tokens.");
      run |= widgets::seed_input(r.seed);
      ImGui::Dummy(ImVec2(0, 4));
      if (ImGui::Button("Measure again  (F5)", ImVec2(-1, 0))) run = true;
    }
    if (run) sink.post(LatencyRun{r});
    if (classroom::visible("latency.view")) {
      widgets::section_label("VIEW");
      ImGui::Checkbox("log time axis", &m_settings.log_time);
      ImGui::Checkbox("show the quartiles", &m_settings.spread);
    }
    ImGui::Dummy(ImVec2(0, 6));
    widgets::note(
        "Prefill: one forward of the whole model over a window of T tokens, divided by T. "
        "Decode: one more token fed to the streaming decoder (what Generation runs) after a "
        "context of T tokens. On the CPU both run on the engine thread alone (Eigen, 1 thread); "
        "each point is the median of its runs, and the thin lines around it are their quartiles "
        "(a quarter of the runs were faster than the lower line, a quarter slower than the upper "
        "one).");
    widgets::note(
        "A fixed-size state (TTT, linear attention, Mamba-2) costs the same per token at any T. "
        "Softmax attention reads every key and value of the context for each token, so its cost "
        "per token grows with T, and past some T the fixed state wins.");
  }

  void draw_view(const LatencyView& v, const Snapshot& snap, CommandSink& sink) override {
    const Fonts& f = fonts();
    const bool narrow = widgets::narrow_view(ImGui::GetContentRegionAvail().x);
    widgets::panel_title("Latency lab",
                         "Time per token against the context length, for prefill and for decode.");
    widgets::job_status(v.outcome, v.progress, v.error, snap, sink);
    if (v.curves.empty()) return;
    ImGui::PushFont(f.small);
    ImGui::PushTextWrapPos(0.0f);
    const ImVec4 dim = ImGui::ColorConvertU32ToFloat4(colors::kTextDim);
    ImGui::TextColored(dim, "%s; the time does not depend on the weights' values.",
                       v.model.c_str());
    std::string dev = "Computed on: " + v.cpu_device;
    if (!v.gpu_device.empty())
      dev += " and GPU " + v.gpu_device + " (markers; prefill at batch 16)";
    ImGui::TextColored(dim, "%s", dev.c_str());
    if (!v.gpu_note.empty())
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kWarning), "GPU: %s",
                         v.gpu_note.c_str());
    for (const auto& c : v.curves) {
      if (!c.gpu_prefill_note.empty())
        ImGui::TextColored(dim, "%s, prefill on the CPU only: %s", c.label.c_str(),
                           c.gpu_prefill_note.c_str());
      if (!c.gpu_decode_note.empty())
        ImGui::TextColored(dim, "%s, decode on the CPU only: %s", c.label.c_str(),
                           c.gpu_decode_note.c_str());
    }
    if (v.gpu_device.empty())
      ImGui::TextColored(
          dim,
          "These are the CPU's numbers. The paper's Fig. 3 was measured on a GPU, where a short "
          "context leaves most of the chip idle, so attention's extra work is nearly free until "
          "T is large. On one CPU thread there is no parallel hardware to fill: attention's cost "
          "per token grows from the first token on, and TTT overtakes it at a much shorter "
          "context. Choose the GPU in the Compute menu, where there is one, to measure both.");
    ImGui::PopTextWrapPos();
    for (std::size_t i = 0; i < v.curves.size(); ++i) {
      const std::string entry = "■ " + v.curves[i].label;
      if (i) widgets::same_line_if_fits(entry.c_str(), 14);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(layer_color(v.curves[i].layer)), "%s",
                         entry.c_str());
    }
    ImGui::PopFont();
    ImGui::Dummy(ImVec2(0, 2));

    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float w = narrow ? avail.x : (avail.x - 14.0f) * 0.5f;
    const float h =
        narrow ? std::max(220.0f, avail.y * 0.5f - 6.0f) : std::max(220.0f, avail.y - 4.0f);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    draw_phase(v, &LatencyPoint::prefill, &LatencyPoint::gpu_prefill, "latency_prefill", "Prefill",
               "µs per token of a forward over T tokens", ImVec2(w, h), 0);
    if (narrow)
      ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + h + 8.0f));
    else
      ImGui::SetCursorScreenPos(ImVec2(origin.x + w + 14.0f, origin.y));
    draw_phase(v, &LatencyPoint::decode, &LatencyPoint::gpu_decode, "latency_decode", "Decode",
               "µs per token fed after a context of T tokens", ImVec2(w, h), 1);
  }

  // One plot: per layer the CPU's medians, their quartiles as thin lines, and the GPU's medians.
  void draw_phase(const LatencyView& v, PerTokenTime LatencyPoint::*cpu,
                  PerTokenTime LatencyPoint::*gpu, const char* id, const char* title,
                  const char* y_label, ImVec2 size, int slot) {
    auto& data = m_data[slot];
    data.assign(v.curves.size(), {});
    plot::LinePlot p = plot::titled(id, id, title, y_label, "context length T (tokens)", size);
    p.x_scale = plot::ScaleKind::Log10;
    p.y_scale = m_settings.log_time ? plot::ScaleKind::Log10 : plot::ScaleKind::Linear;
    p.x_pad = 0.05;
    p.legend = false;
    for (std::size_t i = 0; i < v.curves.size(); ++i) {
      const LatencyCurve& c = v.curves[i];
      CurveData& d = data[i];
      for (const auto& pt : c.points) {
        const PerTokenTime& t = pt.*cpu;
        if (t.measured()) {
          d.x.push_back(pt.T);
          d.med.push_back(t.median_us);
          d.lo.push_back(t.q1_us);
          d.hi.push_back(t.q3_us);
        }
        const PerTokenTime& g = pt.*gpu;
        if (g.measured()) {
          d.gx.push_back(pt.T);
          d.g.push_back(g.median_us);
        }
      }
      const ImU32 col = layer_color(c.layer);
      if (m_settings.spread && !d.x.empty()) {
        p.series.push_back(plot::xy(c.label + ", 3rd quartile", d.x, d.hi, faint(col)));
        p.series.back().thickness = 1.0f;
        p.series.push_back(plot::xy(c.label + ", 1st quartile", d.x, d.lo, faint(col)));
        p.series.back().thickness = 1.0f;
      }
      auto s = plot::xy(v.gpu_device.empty() ? c.label : c.label + ", CPU", d.x, d.med, col);
      s.thickness = 2.0f;
      p.series.push_back(s);
      if (!d.gx.empty()) {
        auto g = plot::xy(c.label + ", GPU", d.gx, d.g, col);
        g.markers = true;
        g.thickness = 1.2f;
        p.series.push_back(g);
      }
    }
    p.x_format = [](double x) { return "T = " + std::to_string(std::lround(x)); };
    p.empty_text = "measuring…";
    plot::line_plot(p);
  }

  struct CurveData {
    std::vector<double> x, med, lo, hi, gx, g;
  };
  std::vector<CurveData> m_data[2];
};

}  // namespace

std::unique_ptr<Panel> make_latency_panel() { return std::make_unique<LatencyPanel>(); }

}  // namespace tttlab::gui
