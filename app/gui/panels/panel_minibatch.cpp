// Panel 4 — Mini-batch lab: the inner mini-batch size b trades quality for speed. For b = 1, 2, 4,
// …, T the same model (same weights, same seed, same validation windows) gives a loss and a measured
// forward time; small multiples show the loss by position for each b, and a quality-versus-time plot
// (the paper's Fig. 8) puts them side by side. The sweep before stays on screen as a grey ghost, so a
// change (another model, T, the Train mode) can be compared with what came before.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "lab/minibatch/minibatch_module.hpp"
#include "gui/fonts.hpp"
#include "gui/panels/feature_panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/line_plot.hpp"
#include "gui/plot/plot_common.hpp"
#include "gui/plot/small_multiples.hpp"
#include "lab/plot/ticks.hpp"
#include "lab/minibatch/minibatch_settings.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;

constexpr auto kGhost = colors::kGhost;

const SweepPoint* point_for(const SweepResult* r, int b) {
  if (!r) return nullptr;
  for (const auto& p : r->points)
    if (p.b == b && p.windows_done > 0) return &p;
  return nullptr;
}

class MiniBatchPanel final
    : public FeaturePanel<MiniBatchPanelSettings, MiniBatchView, &Snapshot::minibatch> {
 public:
  MiniBatchPanel()
      : FeaturePanel(kMiniBatchId,
                     {{"minibatch.mode", "Mini-batch lab: evaluate or train"},
                      {"minibatch.model", "Mini-batch lab: model and data"},
                      {"minibatch.size", "Mini-batch lab: T, windows, steps"},
                      {"minibatch.view", "Mini-batch lab: view options"}},
                     "run the sweep again") {}

  // The ghost to save is the sweep the engine drew before the one these settings asked for.
  void observe(const Snapshot& snap) override {
    const MiniBatchView* v = snap.minibatch.get();
    if (!v || v->generation == m_seen_generation) return;
    if (v->current && v->current->settings == m_settings.sweep) {
      m_seen_generation = v->generation;
      if (v->previous)
        m_settings.ghost = v->previous->settings;
      else
        m_settings.ghost.reset();
    }
  }

 private:
  std::optional<Command> rerun() const override { return SweepRun{m_settings.sweep, false}; }

  void draw_controls(const MiniBatchView& v, const Snapshot& snap, CommandSink& sink) override {
    // An edit runs the sweep at once in Evaluate mode (seconds). Train mode trains one model per b
    // (minutes): its edits only change the settings, and the Train button below starts it, so the
    // size can be set before anything trains.
    bool run = false, edited = false;
    SweepSettings& w = m_settings.sweep;
    const LibraryView* lib = snap.library ? snap.library->models.get() : nullptr;
    if (classroom::visible("minibatch.mode")) {
      widgets::section_label("EXPERIMENT");
      widgets::row("Mode", "Evaluate: the chosen model's own weights, run with each b (what b does at test time; "
                           "fast). Train: for each b a small 2-block model trained from the same seed on the same "
                           "batches, then evaluated (the paper's experiment at toy scale; slow: it starts only with "
                           "its Train button, and can be cancelled).");
      edited |= widgets::choice_pair("evaluate", SweepMode::Evaluate, "train each b", SweepMode::Train, w.mode);
    }
    if (classroom::visible("minibatch.model")) {
      widgets::section_label(w.mode == SweepMode::Evaluate ? "MODEL AND DATA" : "LAYER AND DATA");
      if (w.mode == SweepMode::Evaluate) {
        widgets::row("Model");
        edited |= widgets::model_combo("model", w.model_id, lib, true, &sink);
        widgets::model_summary_line(w.model_id, lib);
      } else {
        widgets::row("Layer");
        edited |= widgets::choice_pair("TTT-Linear", std::string("ttt-linear"), "TTT-MLP", std::string("ttt-mlp"),
                                       w.layer);
        widgets::row("Seed", "Initialisation and training batches: the same for every b.");
        edited |= widgets::seed_input(w.seed);
      }
      widgets::row("Data");
      edited |= widgets::data_combo("data", w.data);
    }
    if (classroom::visible("minibatch.size")) {
      widgets::section_label("SIZE");
      widgets::row("T", "Sequence length; b runs over 1, 2, 4, … up to T.");
      ImGui::SliderInt("##T", &w.seq_len, 8, 512, "%d tokens", ImGuiSliderFlags_Logarithmic);
      edited |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Windows", "Validation windows per b: the loss is their mean, the time their median.");
      ImGui::SliderInt("##W", &w.windows, 1, 64, "%d per b");
      edited |= ImGui::IsItemDeactivatedAfterEdit();
      if (w.mode == SweepMode::Train) {
        widgets::row("Steps");
        ImGui::SliderInt("##steps", &w.train_steps, 10, 2000, "%d per b", ImGuiSliderFlags_Logarithmic);
        edited |= ImGui::IsItemDeactivatedAfterEdit();
      }
      ImGui::Dummy(ImVec2(0, 4));
      if (w.mode == SweepMode::Train) {
        const std::vector<int> bs = sweep_mini_batches(w.seq_len);
        const long models = static_cast<long>(bs.size());
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim),
                           "%ld models (b = 1 … %d), %d optimiser steps each: %ld steps in all, then %d "
                           "validation windows per model.",
                           models, bs.back(), w.train_steps, models * w.train_steps, w.windows);
        ImGui::PopTextWrapPos();
        const bool shown = v.current && v.current->settings == w;
        const std::string label = "Train " + std::to_string(models) + " models (" +
                                  std::to_string(models * w.train_steps) + " steps)" + (shown ? "  (F5)" : "");
        if (ImGui::Button(label.c_str(), ImVec2(-1, 0))) run = true;
        if (!shown && !run) {
          ImGui::PushTextWrapPos(0.0f);
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kWarning),
                             "Nothing trains until you press the button: the view still shows the sweep before.");
          ImGui::PopTextWrapPos();
        }
      } else if (ImGui::Button("Run the sweep again  (F5)", ImVec2(-1, 0))) {
        run = true;
      }
    }
    if (edited && w.mode == SweepMode::Evaluate) run = true;
    if (run) sink.post(SweepRun{w, false});
    if (classroom::visible("minibatch.view")) {
      widgets::section_label("VIEW");
      widgets::smoothing_row(m_settings.smoothing, 0.98f);
      ImGui::Checkbox("log time axis", &m_settings.log_time);
    }
    ImGui::Dummy(ImVec2(0, 6));
    widgets::note("Small b: more, smaller gradient steps per sequence (closer to online learning, more sequential "
                  "work). Large b: the gradients of a whole mini-batch are taken at one stale state, and the dual "
                  "form does more of its work as large matrix products. CPU times are forward passes of the whole "
                  "model (dual form) on the CPU, 1 thread, the median over the windows. With a GPU (the Compute menu) each b "
                  "also runs there: the loss comes from the GPU, and its time is the median of 20 forward passes of "
                  "one window measured on the GPU, after 3 warm-up passes that are not counted. On a CPU the dual "
                  "form's large b is cheap; on a GPU small b also leaves most of the chip idle: there the tradeoff "
                  "of the paper's Fig. 8 shows.");
    if (snap.minibatch && snap.minibatch->current) timing_table(*snap.minibatch->current);
  }

  // Every b's forward time on each device: median and the fastest–slowest run.
  static void timing_table(const SweepResult& r) {
    bool any = false, gpu = false;
    for (const auto& p : r.points) {
      any = any || p.cpu_time.repeats > 0;
      gpu = gpu || p.gpu;
    }
    if (!any) return;
    widgets::section_label("FORWARD TIME OF ONE WINDOW");
    ImGui::PushFont(fonts().small);
    if (ImGui::BeginTable("##times", gpu ? 3 : 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
      ImGui::TableSetupColumn("b");
      ImGui::TableSetupColumn("CPU, ms");
      if (gpu) ImGui::TableSetupColumn("GPU, ms");
      ImGui::TableHeadersRow();
      const auto cell = [](const TimingSummary& t) {
        if (t.repeats == 0) {
          ImGui::TextDisabled("—");
          return;
        }
        ImGui::Text("%s", format_value(t.median_ms, 3).c_str());
        ImGui::SameLine(0, 4);
        ImGui::TextDisabled("%s–%s", format_value(t.min_ms, 3).c_str(), format_value(t.max_ms, 3).c_str());
      };
      for (const auto& p : r.points) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%d", p.b);
        ImGui::TableNextColumn();
        cell(p.cpu_time);
        if (gpu) {
          ImGui::TableNextColumn();
          cell(p.gpu_time);
        }
      }
      ImGui::EndTable();
    }
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("median, then fastest–slowest: CPU over the windows%s", gpu ? ", GPU over 20 runs" : "");
    ImGui::PopTextWrapPos();
    ImGui::PopFont();
  }

  void draw_view(const MiniBatchView& v, const Snapshot& snap, CommandSink& sink) override {
    const Fonts& f = fonts();
    // Beside a docked lesson the view is 450–770 px wide: the two plots stacked at full width (the view
    // scrolls), three small multiples per row, shorter labels.
    const bool narrow = widgets::narrow_view(ImGui::GetContentRegionAvail().x);
    widgets::panel_title("Mini-batch lab", "How the inner mini-batch size b trades loss against time.");
    widgets::job_status(v.outcome, v.progress, v.error, snap, sink);
    const SweepResult* cur = v.current.get();
    const SweepResult* ghost = v.previous.get();
    if (!cur) return;
    ImGui::PushFont(f.small);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kAccent), "%s", cur->label.c_str());
    const std::string details = "T = " + std::to_string(cur->settings.seq_len) + ", " +
                                std::to_string(cur->settings.windows) + " windows of " + v.data_description;
    widgets::same_line_if_fits(details.c_str(), 10);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "%s", details.c_str());
    ImGui::PopTextWrapPos();
    if (ghost) {
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kGhost), "ghost (grey): %s, T = %d", ghost->label.c_str(),
                         ghost->settings.seq_len);
    }
    {
      std::string dev = "Computed on: " + cur->cpu_device;
      if (!cur->gpu_device.empty()) dev += " and GPU " + cur->gpu_device + " (losses from the GPU where b ≤ 64)";
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "%s", dev.c_str());
      if (!cur->gpu_note.empty())
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kWarning), "GPU: %s", cur->gpu_note.c_str());
      for (const auto& p : cur->points)
        if (!p.gpu_note.empty()) {
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "b = %d on the CPU only: %s", p.b,
                             p.gpu_note.c_str());
          break;
        }
      ImGui::PopTextWrapPos();
    }
    ImGui::PopFont();
    ImGui::Dummy(ImVec2(0, 4));

    const std::vector<int> bs = sweep_mini_batches(cur->settings.seq_len);
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float top_h = narrow ? 230.0f : std::max(200.0f, avail.y * 0.52f);
    const float left_w = narrow ? avail.x : avail.x * 0.56f;

    // Quality versus time (left) and the loss per b (right).
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    m_scatter.clear();
    m_scatter.reserve(3);  // the series below keep pointers into it for this frame
    for (const SweepResult* r : {ghost, cur}) {
      if (!r) continue;
      auto& s = m_scatter.emplace_back();
      for (const auto& p : r->points)
        if (p.windows_done > 0) {
          s.x.push_back(p.ms_per_forward);
          s.y.push_back(p.bpb);
          s.b.push_back(p.b);
          s.spread.push_back(p.cpu_time);
        }
    }
    // The GPU's curve of the current sweep: the same losses against the GPU's forward time.
    auto& gs = m_scatter.emplace_back();
    for (const auto& p : cur->points)
      if (p.gpu) {
        gs.x.push_back(p.gpu_time.median_ms);
        gs.y.push_back(p.bpb);
        gs.b.push_back(p.b);
        gs.spread.push_back(p.gpu_time);
      }
    plot::LinePlot q;
    q.id = "quality_time";
    q.export_name = "minibatch_quality_vs_time";
    q.title = "Quality versus time";
    q.y_label = widgets::fit("validation loss (bits per byte) against the forward time of one window",
                             "validation loss (bits per byte)", left_w, f.small);
    q.x_label = gs.x.empty() ? "milliseconds per forward pass of one window (CPU, 1 thread; median)"
                             : "milliseconds per forward pass of one window (median; CPU, 1 thread)";
    q.size = ImVec2(left_w, top_h);
    q.x_scale = m_settings.log_time ? plot::ScaleKind::Log10 : plot::ScaleKind::Linear;
    q.x_pad = 0.1;
    std::size_t k = 0;
    for (const SweepResult* r : {ghost, cur}) {
      if (!r) continue;
      const auto& s = m_scatter[k++];
      auto ser = plot::xy(r == cur ? (gs.x.empty() ? "this sweep" : "this sweep, CPU") : "previous sweep", s.x, s.y,
                          r == cur ? colors::kAccent : kGhost);
      ser.line = false;
      ser.markers = true;
      const Scatter* sc = &s;
      ser.point_label = [sc](std::size_t i) { return sc->label(i); };
      q.series.push_back(ser);
    }
    if (!gs.x.empty()) {
      auto ser = plot::xy("this sweep, GPU", gs.x, gs.y, colors::kGood);
      ser.line = false;
      ser.markers = true;
      const Scatter* sc = &gs;
      ser.point_label = [sc](std::size_t i) { return sc->label(i); };
      q.series.push_back(ser);
    }
    q.x_format = [](double x) { return format_value(x, 3) + " ms"; };
    plot::line_plot(q);

    if (narrow)
      ImGui::Dummy(ImVec2(0, 6));
    else
      ImGui::SetCursorScreenPos(ImVec2(origin.x + left_w + 14.0f, origin.y));
    m_bars.clear();
    for (const SweepResult* r : {ghost, cur}) {
      auto& s = m_bars.emplace_back();
      for (int b : bs) {
        const SweepPoint* p = point_for(r, b);
        s.push_back(p ? p->bpb : NAN);
      }
    }
    plot::LinePlot lb = plot::titled("loss_by_b", "minibatch_loss_by_b", "Loss for each b",
                                      "bits per byte (log₂ b on the x axis)",
                                      "inner mini-batch size b", ImVec2(ImGui::GetContentRegionAvail().x, narrow ? 200.0f : top_h));
    lb.x_scale = plot::ScaleKind::Log10;
    m_bx.assign(bs.begin(), bs.end());
    lb.x_range = plot::Range{0.8, static_cast<double>(bs.back()) * 1.25};
    if (ghost) {
      auto g = plot::xy("previous sweep", m_bx, m_bars[0], kGhost);
      g.markers = true;
      lb.series.push_back(g);
    }
    auto c = plot::xy("this sweep", m_bx, m_bars[1], colors::kAccent);
    c.markers = true;
    lb.series.push_back(c);
    lb.x_format = [](double x) { return "b = " + std::to_string(std::lround(x)); };
    plot::line_plot(lb);
    if (narrow)
      ImGui::Dummy(ImVec2(0, 4));
    else
      ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + top_h + 10.0f));

    // Small multiples: loss by position, one cell per b, one y range.
    ImGui::PushFont(f.bold);
    ImGui::TextUnformatted("Loss by token position for each b");
    ImGui::PopFont();
    ImGui::PushFont(f.small);
    const char* multiples_note = "small multiples on one scale: bits per byte against t; dashed: mini-batch ends";
    widgets::same_line_if_fits(multiples_note, 10);
    ImGui::AlignTextToFramePadding();
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("%s", multiples_note);
    ImGui::PopTextWrapPos();
    ImGui::PopFont();
    plot::RangeFitter fit(plot::ScaleKind::Linear);
    for (const SweepResult* r : {ghost, cur})
      if (r)
        for (const auto& p : r->points)
          for (double x : p.loss_by_position) fit.add(x / std::log(2.0));
    const plot::Range yr = fit.range(0.04);
    const int n = static_cast<int>(bs.size());
    const int cols = std::min(n, narrow ? 3 : 5);
    const int rows = (n + cols - 1) / cols;
    const ImVec2 rest = ImGui::GetContentRegionAvail();
    const ImVec2 cell((rest.x - 10.0f * static_cast<float>(cols - 1)) / static_cast<float>(cols),
                      std::max(110.0f, (rest.y - 10.0f * static_cast<float>(rows - 1)) / static_cast<float>(rows) - 2.0f));
    m_curves.assign(static_cast<std::size_t>(2 * n), {});
    plot::small_multiples(n, cols, cell, ImVec2(10.0f, 10.0f), [&](int i, ImVec2 size) {
      const int b = bs[static_cast<std::size_t>(i)];
      plot::LinePlot p;
      p.id = m_cell_ids[static_cast<std::size_t>(std::min(i, 11))];
      p.export_name = "minibatch_loss_by_position_b" + std::to_string(b);
      const SweepPoint* cp = point_for(cur, b);
      // A narrow cell drops "bpb", then the loss, rather than letting the title run into the next cell.
      const std::string b_is = "b = " + std::to_string(b);
      const std::string loss = cp ? format_value(cp->bpb, 3) : std::string();
      p.title = cp ? widgets::fit(b_is + "   " + loss + " bpb", widgets::fit(b_is + "  " + loss, b_is, size.x, f.bold),
                                  size.x, f.bold)
                   : b_is;
      p.size = size;
      p.y_range = yr;
      p.x_range = plot::Range{-0.5, static_cast<double>(cur->settings.seq_len) - 0.5};
      p.smoothing = m_settings.smoothing;
      p.legend = false;
      p.empty_text = "waiting…";
      for (long s = b; s < cur->settings.seq_len && cur->settings.seq_len / b <= 32; s += b)
        p.markers.push_back({s - 0.5, colors::kMarker, true});
      int slot = 0;
      for (const SweepResult* r : {ghost, cur}) {
        const SweepPoint* pt = point_for(r, b);
        auto& y = m_curves[static_cast<std::size_t>(2 * i + slot++)];
        if (!pt) continue;
        y.resize(pt->loss_by_position.size());
        for (std::size_t t = 0; t < y.size(); ++t) y[t] = pt->loss_by_position[t] / std::log(2.0);
        p.series.push_back(plot::line(r == cur ? "this sweep" : "previous", y, r == cur ? colors::kAccent : kGhost));
      }
      p.x_format = [](double x) { return "t = " + std::to_string(std::lround(x)); };
      plot::line_plot(p);
    });
  }

  struct Scatter {
    std::vector<double> x, y;
    std::vector<int> b;
    std::vector<TimingSummary> spread;  // the time of each point: median, min–max, runs
    // The point's label on the plot; its times with their spread are in the table under the controls.
    std::string label(std::size_t i) const { return "b=" + std::to_string(b[i]); }
  };
  std::uint64_t m_seen_generation = 0;
  std::vector<Scatter> m_scatter;
  std::vector<std::vector<double>> m_bars, m_curves;
  std::vector<double> m_bx;
  const char* m_cell_ids[12] = {"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10", "m11"};
};

}  // namespace

std::unique_ptr<Panel> make_minibatch_panel() { return std::make_unique<MiniBatchPanel>(); }

}  // namespace tttlab::gui
