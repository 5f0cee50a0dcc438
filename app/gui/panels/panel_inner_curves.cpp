// Panel 3 — Inner-loss curves: the three inner losses over token position, averaged over a batch of
// validation sequences and over the heads of each block (the paper's Fig. 5 and 17):
//   ℓ(W_0; x_t)      what the initial state predicts: no learning at test time
//   ℓ(W_{t−1}; x_t)  before the gradient step on x_t: what the state learned from tokens before t
//   ℓ(W_t; x_t)      after it
// The gap between the first two is what test-time training buys; it grows along the sequence.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "gui/fonts.hpp"
#include "gui/panels/feature_panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/line_plot.hpp"
#include "gui/plot/small_multiples.hpp"
#include "lab/plot/ticks.hpp"
#include "lab/inner_curves/curves_settings.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;

double mean(const std::vector<double>& v, std::size_t from = 0) {
  if (v.size() <= from) return 0.0;
  double s = 0;
  for (std::size_t i = from; i < v.size(); ++i) s += v[i];
  return s / static_cast<double>(v.size() - from);
}

class InnerCurvesPanel final
    : public FeaturePanel<CurvesPanelSettings, CurvesView, &Snapshot::curves> {
 public:
  InnerCurvesPanel()
      : FeaturePanel(kInnerCurvesId,
                     {{"inner_curves.model", "Inner-loss curves: model and data"},
                      {"inner_curves.size", "Inner-loss curves: T and number of sequences"},
                      {"inner_curves.view", "Inner-loss curves: view options"}},
                     "compute again") {}

 private:
  std::optional<Command> rerun() const override { return CurvesRun{m_settings.run}; }

  void draw_controls(const CurvesView&, const Snapshot& snap, CommandSink& sink) override {
    bool run = false;
    const LibraryView* lib = snap.library ? snap.library->models.get() : nullptr;
    if (classroom::visible("inner_curves.model")) {
      widgets::section_label("MODEL AND DATA");
      widgets::row("Model");
      const bool follow = m_settings.run.model_id == kFollowTrainingId;
      const bool replay = is_shipped_run_id(m_settings.run.model_id);
      if (follow || replay) {
        ImGui::BeginDisabled();
        std::string shown = follow ? "the next training run's checkpoints" : "the shipped run's checkpoints";
        widgets::model_combo("model", shown, nullptr, true, nullptr);
        ImGui::EndDisabled();
      } else {
        run |= widgets::model_combo("model", m_settings.run.model_id, lib, true, &sink);
        widgets::model_summary_line(m_settings.run.model_id, lib);
      }
      bool follow_box = follow;
      if (ImGui::Checkbox("follow the training", &follow_box)) {
        m_settings.run.model_id = follow_box ? std::string(kFollowTrainingId) : std::string(kShippedModelId);
        run = true;
      }
      ImGui::SameLine();
      widgets::help_marker("Then start a run in the Training view: this view shows the first checkpoint the run "
                           "saves and computes again each time it saves a new one. (A run chosen in the list "
                           "above is followed the same way, from its latest checkpoint.)");
      if (!m_settings.shipped_run.empty() && !replay) {
        // The run this view's lesson trains also ships: its checkpoints, replayed, stand in for training.
        if (ImGui::Button("Use the shipped run (no training)")) {
          m_settings.run.model_id = kShippedRunPrefix + m_settings.shipped_run;
          run = true;
        }
        if (ImGui::IsItemHovered())
          ImGui::SetTooltip("The checkpoints of the lesson's run, made with the same settings and shipped with "
                            "the app: this view computes with each in turn, as if it followed the run");
      }
      widgets::row("Data", "Sequences are the first validation windows of this text (the same for every model).");
      run |= widgets::data_combo("data", m_settings.run.data);
    }
    if (classroom::visible("inner_curves.size")) {
      widgets::section_label("AVERAGE OVER");
      widgets::row("T", "Sequence length: the curves run over positions 0 … T−1.");
      ImGui::SliderInt("##T", &m_settings.run.seq_len, 16, 1024, "%d tokens", ImGuiSliderFlags_Logarithmic);
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Sequences");
      ImGui::SliderInt("##n", &m_settings.run.sequences, 1, 64, "%d windows");
      run |= ImGui::IsItemDeactivatedAfterEdit();
      ImGui::Dummy(ImVec2(0, 4));
      if (ImGui::Button("Compute again  (F5)", ImVec2(-1, 0))) run = true;
    }
    if (run) sink.post(CurvesRun{m_settings.run});
    if (classroom::visible("inner_curves.view")) {
      widgets::section_label("VIEW");
      widgets::smoothing_row(m_settings.smoothing, 0.98f);
      ImGui::Checkbox("log scale", &m_settings.log_scale);
      ImGui::SameLine();
      ImGui::Checkbox("same y range for all blocks", &m_settings.shared_y);
    }
    ImGui::Dummy(ImVec2(0, 6));
    widgets::note("Every sequence streams through the whole model in the primal form; every head of every block "
                  "reports, for each token, the loss of its inner model before any learning (W₀), before the "
                  "token's own step (Wₜ₋₁) and after it (Wₜ). The curves are means over the sequences done and "
                  "the heads; they sharpen while the job runs. Raw values stay visible under the smoothed line.");
  }

  void draw_view(const CurvesView& v, const Snapshot& snap, CommandSink& sink) override {
    const Fonts& f = fonts();
    widgets::panel_title("Inner-loss curves", "What each layer's hidden state learns along the sequence.");
    widgets::job_status(v.outcome, v.progress, v.error, snap, sink);
    if (v.waiting) {
      ImGui::Dummy(ImVec2(0, 8));
      widgets::note("Waiting for the training. Start a run in the Training view (with \"checkpoint every\" set): "
                    "this view shows the run's first checkpoint as soon as it is saved, and every later one.");
      return;
    }
    if (v.blocks == 0) return;
    ImGui::PushFont(f.small);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kAccent), "%s", v.model_label.c_str());
    ImGui::SameLine(0, 10);
    // Wrapped: the data's description can be a long path, and beside a docked lesson the line is narrow.
    ImGui::PushStyleColor(ImGuiCol_Text, colors::kTextDim.vec4());
    ImGui::PushTextWrapPos(0.0f);
    ImGui::Text("%ld of %d sequences of T = %ld from %s · mean over %d heads · b = %d", v.sequences_done,
                v.settings.sequences, v.T, v.data_description.c_str(), v.heads, v.mini_batch);
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
    widgets::device_line(v.device, v.device_note);
    ImGui::PopFont();
    widgets::follow_line(v.model_step, v.reloads, v.reloading, is_shipped_run_id(v.settings.model_id));
    if (v.sequences_done == 0) return;
    ImGui::Dummy(ImVec2(0, 2));
    summary_table(v);
    ImGui::Dummy(ImVec2(0, 6));

    std::optional<plot::Range> shared;
    if (m_settings.shared_y) {
      plot::RangeFitter fit(m_settings.log_scale ? plot::ScaleKind::Log10 : plot::ScaleKind::Linear);
      for (int b = 0; b < v.blocks; ++b) {
        fit.add(v.l0[static_cast<std::size_t>(b)]);
        fit.add(v.la[static_cast<std::size_t>(b)]);
      }
      shared = fit.range(0.05);
    }
    const int cols = v.blocks <= 2 ? v.blocks : (v.blocks <= 4 ? 2 : (v.blocks <= 9 ? 3 : 4));
    const int rows = (v.blocks + cols - 1) / cols;
    const float gap = 14.0f;
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const ImVec2 cell((avail.x - gap * static_cast<float>(cols - 1)) / static_cast<float>(cols),
                      // At least 12.5 lines: a plot's title, labels and axes take about 7 at any UI scale.
                      std::max(ImGui::GetFontSize() * 12.5f, (avail.y - gap * static_cast<float>(rows - 1)) / static_cast<float>(rows) - 2.0f));
    std::vector<plot::VLine> marks;
    for (long s = v.mini_batch; v.mini_batch > 0 && s < v.T; s += v.mini_batch) marks.push_back({s - 0.5, colors::kMarker, true});
    plot::small_multiples(v.blocks, cols, cell, ImVec2(gap, gap), [&](int b, ImVec2 size) {
      const std::size_t k = static_cast<std::size_t>(b);
      plot::LinePlot p;
      p.id = m_ids[static_cast<std::size_t>(std::min(b, 15))];
      p.export_name = "inner_losses_block" + std::to_string(b);
      p.title = "Block " + std::to_string(b);
      p.y_label = "inner loss ½‖f(k; W) − v‖², mean over sequences and heads";
      p.x_label = "token position t";
      p.size = size;
      p.x_range = plot::Range{-0.5, static_cast<double>(v.T) - 0.5};
      p.y_range = shared;
      p.y_scale = m_settings.log_scale ? plot::ScaleKind::Log10 : plot::ScaleKind::Linear;
      p.smoothing = m_settings.smoothing;
      p.markers = marks;
      p.series.push_back(plot::line("ℓ(W₀; xₜ)", v.l0[k], colors::kLossInitial));
      p.series.push_back(plot::line("ℓ(Wₜ₋₁; xₜ)", v.lb[k], colors::kLossBefore));
      p.series.push_back(plot::line("ℓ(Wₜ; xₜ)", v.la[k], colors::kLossAfter));
      p.x_format = [](double x) { return "t = " + std::to_string(std::lround(x)); };
      plot::line_plot(p);
    });
  }

  // Per block: the mean of each curve, and how much of ℓ(W₀) the state removes by the end.
  void summary_table(const CurvesView& v) {
    const Fonts& f = fonts();
    ImGui::PushFont(f.small);
    if (ImGui::BeginTable("##summary", 5, ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_RowBg |
                                              ImGuiTableFlags_SizingStretchProp)) {
      ImGui::TableSetupColumn("block");
      ImGui::TableSetupColumn("mean ℓ(W₀; xₜ)");
      ImGui::TableSetupColumn("mean ℓ(Wₜ₋₁; xₜ)");
      ImGui::TableSetupColumn("mean ℓ(Wₜ; xₜ)");
      ImGui::TableSetupColumn("second half: ℓ(Wₜ₋₁) vs ℓ(W₀)");
      ImGui::TableHeadersRow();
      for (int b = 0; b < v.blocks; ++b) {
        const std::size_t k = static_cast<std::size_t>(b);
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("block %d", b);
        ImGui::PushFont(f.mono);
        ImGui::TableNextColumn();
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kLossInitial), "%s", format_value(mean(v.l0[k]), 4).c_str());
        ImGui::TableNextColumn();
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kLossBefore), "%s", format_value(mean(v.lb[k]), 4).c_str());
        ImGui::TableNextColumn();
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kLossAfter), "%s", format_value(mean(v.la[k]), 4).c_str());
        ImGui::TableNextColumn();
        const std::size_t half = v.l0[k].size() / 2;
        const double a = mean(v.l0[k], half), c = mean(v.lb[k], half);
        const double rel = a > 0 ? (c - a) / a : 0.0;
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(rel < 0 ? colors::kGood : colors::kWarning), "%+.1f %%",
                           100.0 * rel);
        ImGui::PopFont();
      }
      ImGui::EndTable();
    }
    ImGui::PopFont();
  }

  const char* m_ids[16] = {"b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7",
                          "b8", "b9", "b10", "b11", "b12", "b13", "b14", "b15"};
};

}  // namespace

std::unique_ptr<Panel> make_inner_curves_panel() { return std::make_unique<InnerCurvesPanel>(); }

}  // namespace tttlab::gui
