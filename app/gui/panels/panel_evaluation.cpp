// Panel 7 — Evaluation: the loss by token position of several models on the same validation windows
// (the paper's Fig. 2, right) and their bits per byte. A model with a useful hidden state keeps
// improving deeper into the window; one without flattens out early.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "lab/engine/data_source.hpp"
#include "gui/fonts.hpp"
#include "gui/keys.hpp"
#include "gui/panels/panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/line_plot.hpp"
#include "lab/plot/ticks.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/run_settings.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;

struct EvaluationPanelSettings {
  EvalSettings eval;
  double smoothing = 0.9;
  bool log_x = false;
};

EvaluationPanelSettings default_settings() {
  EvaluationPanelSettings s;
  s.eval.data = default_data_source();
  s.eval.models = {"shipped", "random:ttt-linear:m:0"};
  return s;
}

nlohmann::json to_json(const EvaluationPanelSettings& s) {
  nlohmann::json j = to_json(s.eval);
  j["view"] = {{"smoothing", s.smoothing}, {"log_x", s.log_x}};
  return j;
}

EvaluationPanelSettings settings_from(const FieldReader& r) {
  EvaluationPanelSettings s = default_settings();
  s.eval = eval_settings_from(r, s.eval);
  const FieldReader v = r.object("view");
  s.smoothing = v.number("smoothing", 0.0, 0.999, s.smoothing);
  s.log_x = v.boolean("log_x", s.log_x);
  return s;
}

class EvaluationPanel final : public Panel {
 public:
  const char* id() const override { return "evaluation"; }
  const char* name() const override { return "Evaluation"; }
  const char* summary() const override {
    return "Loss by token position for several models on the same windows (the paper's Fig. 2, right), and "
           "bits per byte.";
  }
  std::vector<ClassroomControl> classroom_controls() const override {
    return {{"evaluation.models", "Evaluation: the models compared"},
            {"evaluation.data", "Evaluation: data, T and windows"},
            {"evaluation.view", "Evaluation: view options"}};
  }

  void sync(CommandSink& sink) override { sink.post(EvaluationRun{s_.eval}); }
  nlohmann::json save_state() const override { return to_json(s_); }
  std::function<void()> parse_state(const nlohmann::json& j, const std::string& path) override {
    const EvaluationPanelSettings s = settings_from(FieldReader(j, path));
    return [this, s] { s_ = s; };
  }
  std::vector<ShortcutHelp> shortcut_help() const override { return {{"F5", "evaluate again"}}; }
  void shortcuts(const Snapshot&, CommandSink& sink) override {
    if (key_pressed(Key::F5, false)) sink.post(EvaluationRun{s_.eval});
  }

  void draw(const Snapshot& snap, CommandSink& sink) override {
    const EvaluationView* v = snap.evaluation.get();
    if (!v) return;
    widgets::controls_and_view([&] { draw_controls(snap, sink); }, [&] { draw_view(*v, snap, sink); });
  }

 private:
  void draw_controls(const Snapshot& snap, CommandSink& sink) {
    bool run = false;
    const LibraryView* lib = snap.library ? snap.library->models.get() : nullptr;
    if (classroom::visible("evaluation.models")) {
      widgets::section_label("MODELS (UP TO 8)");
      if (lib)
        for (const auto& m : lib->models) {
          bool on = std::find(s_.eval.models.begin(), s_.eval.models.end(), m.id) != s_.eval.models.end();
          ImGui::BeginDisabled(!m.error.empty() || (!on && s_.eval.models.size() >= 8));
          if (ImGui::Checkbox(m.label.c_str(), &on)) {
            if (on)
              s_.eval.models.push_back(m.id);
            else if (s_.eval.models.size() > 1)
              std::erase(s_.eval.models, m.id);
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
      ImGui::TextDisabled("Checkpoints saved in the Training panel appear here.");
      ImGui::PopFont();
    }
    if (classroom::visible("evaluation.data")) {
      widgets::section_label("DATA");
      widgets::row("Text");
      run |= widgets::data_combo("data", s_.eval.data);
      widgets::row("T", "Window length: the x axis runs over positions 0 … T−1.");
      ImGui::SliderInt("##T", &s_.eval.seq_len, 16, 2048, "%d tokens", ImGuiSliderFlags_Logarithmic);
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Windows", "The first windows of the validation text, the same for every model.");
      ImGui::SliderInt("##W", &s_.eval.windows, 1, 256, "%d", ImGuiSliderFlags_Logarithmic);
      run |= ImGui::IsItemDeactivatedAfterEdit();
      ImGui::Dummy(ImVec2(0, 4));
      if (ImGui::Button("Evaluate again  (F5)", ImVec2(-1, 0))) run = true;
    }
    if (run) sink.post(EvaluationRun{s_.eval});
    if (classroom::visible("evaluation.view")) {
      widgets::section_label("VIEW");
      widgets::row("Smoothing");
      float sm = static_cast<float>(s_.smoothing);
      if (ImGui::SliderFloat("##smooth", &sm, 0.0f, 0.99f, sm == 0.0f ? "off" : "EMA %.2f")) s_.smoothing = sm;
      ImGui::Checkbox("log scale for the position", &s_.log_x);
    }
    ImGui::Dummy(ImVec2(0, 6));
    widgets::note("Each window of text is read once by the model: the loss of every next-byte prediction is kept "
                  "by its position. Bits per byte = nats / ln 2; 8 is a uniform guess over 256 bytes. Models trained on "
                  "shorter windows than T are evaluated beyond their training length.");
  }

  void draw_view(const EvaluationView& v, const Snapshot& snap, CommandSink& sink) {
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
    p.smoothing = s_.smoothing;
    p.x_scale = s_.log_x ? plot::ScaleKind::Log10 : plot::ScaleKind::Linear;
    for (std::size_t i = 0; i < v.curves.size(); ++i) {
      const EvalCurve& c = v.curves[i];
      m_ys[i].resize(c.loss_by_position.size());
      for (std::size_t t = 0; t < m_ys[i].size(); ++t) m_ys[i][t] = c.loss_by_position[t] / ln2;
      // On a log axis position t is drawn at t + 1 (log 0 does not exist).
      p.series.push_back(plot::line(c.label, m_ys[i], widgets::series_color(static_cast<int>(i)), true, s_.log_x ? 1.0 : 0.0));
    }
    p.x_format = [this](double x) { return "t = " + std::to_string(std::lround(s_.log_x ? x - 1.0 : x)); };
    plot::line_plot(p);
  }

  EvaluationPanelSettings s_ = default_settings();
  std::vector<std::vector<double>> m_ys;
};

}  // namespace

std::unique_ptr<Panel> make_evaluation_panel() { return std::make_unique<EvaluationPanel>(); }

}  // namespace tttlab::gui
