// Panel 7 — Evaluation: the loss by token position of several models on the same validation windows
// (the paper's Fig. 2, right) and their bits per byte. A model with a useful hidden state keeps
// improving deeper into the window; one without flattens out early.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "gui/fonts.hpp"
#include "gui/panels/feature_panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/line_plot.hpp"
#include "lab/plot/ticks.hpp"
#include "lab/evaluation/evaluation_settings.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;

class EvaluationPanel final
    : public FeaturePanel<EvaluationPanelSettings, EvaluationView, &Snapshot::evaluation> {
 public:
  EvaluationPanel()
      : FeaturePanel(kEvaluationId,
                     {{"evaluation.models", "Evaluation: the models compared"},
                      {"evaluation.data", "Evaluation: data, T and windows"},
                      {"evaluation.view", "Evaluation: view options"}},
                     "evaluate again") {}

 private:
  std::optional<Command> rerun() const override { return EvaluationRun{m_settings.eval}; }

  void draw_controls(const EvaluationView&, const Snapshot& snap, CommandSink& sink) override {
    bool run = false;
    const LibraryView* lib = snap.library ? snap.library->models.get() : nullptr;
    if (classroom::visible("evaluation.models")) {
      widgets::section_label("MODELS (UP TO 8)");
      if (lib)
        for (const auto& m : lib->models) {
          bool on = std::find(m_settings.eval.models.begin(), m_settings.eval.models.end(), m.id) != m_settings.eval.models.end();
          ImGui::BeginDisabled(!m.error.empty() || (!on && m_settings.eval.models.size() >= 8));
          // The box, then its label wrapped to the column (a long model name would be cut by it); a
          // click on the label ticks the box too.
          bool clicked = ImGui::Checkbox(("##" + m.id).c_str(), &on);
          ImGui::SameLine(0, ImGui::GetStyle().ItemInnerSpacing.x);
          ImGui::AlignTextToFramePadding();
          ImGui::PushTextWrapPos(0.0f);
          ImGui::TextUnformatted(m.label.c_str());
          ImGui::PopTextWrapPos();
          if (ImGui::IsItemClicked()) {
            on = !on;
            clicked = true;
          }
          if (clicked) {
            if (on)
              m_settings.eval.models.push_back(m.id);
            else if (m_settings.eval.models.size() > 1)
              std::erase(m_settings.eval.models, m.id);
            run = true;
          }
          ImGui::EndDisabled();
          if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) {
            ImGui::BeginTooltip();
            ImGui::TextUnformatted(m.summary().c_str());
            if (!m.path.empty()) ImGui::TextDisabled("%s", m.path.c_str());
            ImGui::EndTooltip();
          }
        }
      ImGui::Dummy(ImVec2(0, 2));
      if (ImGui::Button("Open a checkpoint…", ImVec2(-1, 0))) ImGui::OpenPopup("Open a model");
      static std::string path = "runs/";
      if (widgets::path_prompt("Open a model",
                               "A checkpoint folder or a run directory; it joins this list (and every panel's):", path))
        sink.post(LibraryOpen{path});
      ImGui::PushFont(fonts().small);
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextDisabled("Checkpoints saved in the Training panel appear here.");
      ImGui::PopTextWrapPos();
      ImGui::PopFont();
    }
    if (classroom::visible("evaluation.data")) {
      widgets::section_label("DATA");
      widgets::row("Text");
      run |= widgets::data_combo("data", m_settings.eval.data);
      widgets::row("T", "Window length: the x axis runs over positions 0 … T−1.");
      ImGui::SliderInt("##T", &m_settings.eval.seq_len, 16, 2048, "%d tokens", ImGuiSliderFlags_Logarithmic);
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Windows", "The first windows of the validation text, the same for every model.");
      ImGui::SliderInt("##W", &m_settings.eval.windows, 1, 256, "%d", ImGuiSliderFlags_Logarithmic);
      run |= ImGui::IsItemDeactivatedAfterEdit();
      ImGui::Dummy(ImVec2(0, 4));
      if (ImGui::Button("Evaluate again  (F5)", ImVec2(-1, 0))) run = true;
    }
    if (run) sink.post(EvaluationRun{m_settings.eval});
    if (classroom::visible("evaluation.view")) {
      widgets::section_label("VIEW");
      widgets::smoothing_row(m_settings.smoothing, 0.99f);
      ImGui::Checkbox("log scale for the position", &m_settings.log_x);
    }
    ImGui::Dummy(ImVec2(0, 6));
    widgets::note("Each window of text is read once by the model: the loss of every next-byte prediction is kept "
                  "by its position. Bits per byte = nats / ln 2; 8 is a uniform guess over 256 bytes. Models trained on "
                  "shorter windows than T are evaluated beyond their training length.");
  }

  void draw_view(const EvaluationView& v, const Snapshot& snap, CommandSink& sink) override {
    const Fonts& f = fonts();
    widgets::panel_title("Evaluation", "Loss by token position and bits per byte, several models on the same text.");
    widgets::job_status(v.outcome, v.progress, v.error, snap, sink);
    if (v.curves.empty()) return;
    ImGui::PushFont(f.small);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "%ld windows of T = %d from %s",
                       v.windows_total, v.settings.seq_len, v.data_description.c_str());
    // Where each curve was computed, and (GPU) how long the whole evaluation took: one run, so no spread.
    ImGui::PushTextWrapPos(0.0f);
    for (const EvalCurve& c : v.curves) {
      if (c.device.empty()) continue;
      std::string line = c.label + ": " + c.device;
      if (c.eval_ms > 0)
        line += ", all " + std::to_string(c.windows_done) + " windows in " + format_value(c.eval_ms, 3) +
                " ms (one run, copies included; loading the weights took " + format_value(c.load_ms, 3) + " ms)";
      if (!c.note.empty()) line += " — " + c.note;
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "%s", line.c_str());
    }
    ImGui::PopTextWrapPos();
    ImGui::PopFont();
    ImGui::Dummy(ImVec2(0, 4));

    // One card per model; beside a docked lesson (a narrow view) two per row, so that "1.946 bits/byte"
    // fits its card.
    const bool narrow = widgets::narrow_view(ImGui::GetContentRegionAvail().x);
    const int n = static_cast<int>(v.curves.size());
    const float gap = 8.0f;
    const int per_row = std::min(n, narrow ? 2 : 4);
    const float cw = widgets::box_width(per_row, gap);
    for (int i = 0; i < n; ++i) {
      const EvalCurve& c = v.curves[static_cast<std::size_t>(i)];
      if (i % per_row) ImGui::SameLine(0, gap);
      // CPU: the median time of one window and the fastest–slowest; GPU: the whole evaluation divided by
      // the windows (one run).
      const std::string each = format_value(c.ms_per_window, 3) + " ms per window";
      const std::string spread = c.window_time.repeats > 1 ? " (" + format_value(c.window_time.min_ms, 2) + "–" +
                                                                 format_value(c.window_time.max_ms, 2) + ")"
                                                           : std::string();
      const std::string caption =
          c.error.empty()
              ? widgets::fit(std::to_string(c.windows_done) + " windows, " + format_value(c.ms_per_window, 3) +
                                 (c.eval_ms > 0 ? " ms each (GPU, all at once)" : " ms each, median" + spread),
                             each, cw - 16.0f, f.small)
              : c.error;
      widgets::metric(c.label.c_str(),
                      !c.error.empty() ? "—" : c.windows_done ? format_value(c.bpb, 4) + " bits/byte" : "…", caption,
                      c.error.empty() ? widgets::series_color(i) : colors::kError, cw);
    }
    ImGui::Dummy(ImVec2(0, 6));
    // The boxes clip their captions: an error (a model that would not load or gives NaN) in full.
    for (const EvalCurve& c : v.curves)
      if (!c.error.empty()) widgets::warning(c.label + ": " + c.error);

    const double ln2 = std::log(2.0);
    m_ys.assign(v.curves.size(), {});
    plot::LinePlot p;
    p.id = "loss_by_position";
    p.export_name = "loss_by_position";
    p.title = "Loss by token position";
    p.size = ImVec2(ImGui::GetContentRegionAvail().x, std::max(220.0f, ImGui::GetContentRegionAvail().y - 4.0f));
    p.y_label = widgets::fit("bits per byte at position t, mean over the windows (raw faint, EMA bold)",
                             "bits per byte at position t, mean over the windows", p.size.x, f.small);
    p.x_label = "token position t in the window";
    p.smoothing = m_settings.smoothing;
    p.x_scale = m_settings.log_x ? plot::ScaleKind::Log10 : plot::ScaleKind::Linear;
    for (std::size_t i = 0; i < v.curves.size(); ++i) {
      const EvalCurve& c = v.curves[i];
      m_ys[i].resize(c.loss_by_position.size());
      for (std::size_t t = 0; t < m_ys[i].size(); ++t) m_ys[i][t] = c.loss_by_position[t] / ln2;
      // On a log axis position t is drawn at t + 1 (log 0 does not exist).
      p.series.push_back(plot::line(c.label, m_ys[i], widgets::series_color(static_cast<int>(i)), true, m_settings.log_x ? 1.0 : 0.0));
    }
    p.x_format = [this](double x) { return "t = " + std::to_string(std::lround(m_settings.log_x ? x - 1.0 : x)); };
    plot::line_plot(p);
  }

  std::vector<std::vector<double>> m_ys;
};

}  // namespace

std::unique_ptr<Panel> make_evaluation_panel() { return std::make_unique<EvaluationPanel>(); }

}  // namespace tttlab::gui
