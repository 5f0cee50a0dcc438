// Panel 3 — Inner-loss curves: the three inner losses over token position, averaged over a batch of
// validation sequences and over the heads of each block (the paper's Fig. 5 and 17):
//   ℓ(W_0; x_t)      what the initial state predicts: no learning at test time
//   ℓ(W_{t−1}; x_t)  before the gradient step on x_t: what the state learned from tokens before t
//   ℓ(W_t; x_t)      after it
// The gap between the first two is what test-time training buys; it grows along the sequence.
// A member of the fast-weight family other than TTT draws the same three curves of its own inner loss,
// from its own inner loop on toy heads (curves_types.hpp); LaCT adds its chunk losses per update.
#include <imgui.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <cmath>
#include <nlohmann/json.hpp>

#include "gui/fonts.hpp"
#include "gui/panels/feature_panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/line_plot.hpp"
#include "gui/plot/small_multiples.hpp"
#include "lab/plot/ticks.hpp"
#include "lab/inner_curves/curves_settings.hpp"
#include "tttlab/fastweight/rule.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;

// The state's letter in the legends: W for TTT and LaCT, S for the matrix members, M for Titans.
std::string state_letter(const CurvesView& v) {
  if (v.member.empty() || v.member == "lact") return "W";
  return v.state_names.empty() ? "W" : v.state_names.front();
}

std::string member_title(const std::string& id) {
  if (id == "ttt") return "TTT (the model's layers)";
  try {
    return fast_weight_preset(id).name;
  } catch (const std::invalid_argument&) {
    return id;
  }
}

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
    CurvesSettings& r = m_settings.run;
    if (classroom::visible("inner_curves.model")) {
      widgets::section_label("WHAT RUNS");
      widgets::row("Member", "Which member of the fast-weight family (docs/MATH.md §11): TTT as the model's own "
                             "layers, or any other member's own inner loop on toy heads.");
      if (ImGui::BeginCombo("##member", member_title(r.ttt() ? "ttt" : r.member).c_str())) {
        if (ImGui::Selectable(member_title("ttt").c_str(), r.ttt()) && !r.ttt()) {
          r.member = "ttt";
          run = true;
        }
        for (const FastWeightPreset& p : fast_weight_presets())
          if (p.id != "ttt_linear" && p.id != "ttt_mlp" && ImGui::Selectable(p.name.c_str(), p.id == r.member) &&
              p.id != r.member) {
            r.member = p.id;
            if (p.rule.state == FastWeightState::Mlp) r.toy_d = std::clamp(r.toy_d, 4, 32);
            run = true;
          }
        ImGui::EndCombo();
      }
    }
    if (classroom::visible("inner_curves.model") && !r.ttt()) {
      widgets::section_label("TOY HEADS");
      widgets::row("d", "The toy heads' dimension: random byte embeddings and projections (no trained model).");
      const int max_d = fast_weight_preset(r.member).rule.state == FastWeightState::Mlp ? 32 : 64;
      ImGui::SliderInt("##toy_d", &r.toy_d, 2, max_d);
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Heads", "Toy heads averaged over, with seeds seed, seed + 1, …");
      ImGui::SliderInt("##toy_heads", &r.toy_heads, 1, 16);
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Seed");
      ImGui::InputInt("##toy_seed", &r.toy_seed);
      r.toy_seed = std::clamp(r.toy_seed, 0, 1000000000);
      run |= ImGui::IsItemDeactivatedAfterEdit();
      if (r.member == "titans" || r.member == "lact") {
        widgets::row(r.member == "lact" ? "Chunk C" : "Mini-batch b",
                     r.member == "lact" ? "LaCT learns from each chunk of C tokens when the next one starts."
                                        : "Titans takes every gradient at the memory of its mini-batch's start.");
        ImGui::SliderInt("##toy_b", &r.toy_mini_batch, 1, 1024, "%d", ImGuiSliderFlags_Logarithmic);
        run |= ImGui::IsItemDeactivatedAfterEdit();
      }
      widgets::row("η_base", "Scales the toy's rates (the same η_base as the stepper's toy head).");
      float eta = static_cast<float>(r.toy_eta_base);
      if (ImGui::SliderFloat("##toy_eta", &eta, 0.001f, 10.0f, "%.3f", ImGuiSliderFlags_Logarithmic))
        r.toy_eta_base = eta;
      run |= ImGui::IsItemDeactivatedAfterEdit();
      widgets::row("Data", "Sequences are the first validation windows of this text: the toy heads read its bytes.");
      run |= widgets::data_combo("data", r.data);
    }
    if (classroom::visible("inner_curves.model") && r.ttt()) {
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
    if (m_settings.run.ttt())
      widgets::note("Every sequence streams through the whole model in the primal form; every head of every block "
                    "reports, for each token, the loss of its inner model before any learning (W₀), before the "
                    "token's own step (Wₜ₋₁) and after it (Wₜ). The curves are means over the sequences done and "
                    "the heads; they sharpen while the job runs. Raw values stay visible under the smoothed line.");
    else
      widgets::note("Every sequence is read by each toy head through the member's own inner loop, token by token in "
                    "double precision; each token reports the member's inner loss on the initial state, on the "
                    "state before its step and after it. The curves are means over the sequences done and the "
                    "toy heads. The toy heads' projections are random, not trained: the curves show what the "
                    "inner loop does with whatever keys and values it is given.");
  }

  void draw_view(const CurvesView& v, const Snapshot& snap, CommandSink& sink) override {
    const Fonts& f = fonts();
    const std::string subtitle = v.member.empty() ? "What each layer's hidden state learns along the sequence."
                                                  : "What " + v.member_name + "'s state learns along the sequence.";
    widgets::panel_title("Inner-loss curves", subtitle.c_str());
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
    if (v.member.empty())
      ImGui::Text("%ld of %d sequences of T = %ld from %s · mean over %d heads · b = %d", v.sequences_done,
                  v.settings.sequences, v.T, v.data_description.c_str(), v.heads, v.mini_batch);
    else
      ImGui::Text("%s: %s · %ld of %d sequences of T = %ld from %s · mean over %d toy heads%s",
                  v.member_name.c_str(), v.member_loss.c_str(), v.sequences_done, v.settings.sequences, v.T,
                  v.data_description.c_str(), v.heads,
                  v.member == "titans"  ? (" · b = " + std::to_string(v.mini_batch)).c_str()
                  : v.member == "lact" ? (" · C = " + std::to_string(v.mini_batch)).c_str()
                                       : "");
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
    widgets::device_line(v.device, v.device_note);
    ImGui::PopFont();
    widgets::follow_line(v.model_step, v.reloads, v.reloading, is_shipped_run_id(v.settings.model_id));
    if (v.sequences_done == 0) return;
    ImGui::Dummy(ImVec2(0, 2));
    summary_table(v);
    if (v.member == "lact") lact_note(v);
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
    // A member with one step per token has no mini-batch to mark (TTT's markers as before).
    const int first_mark = v.member.empty() ? 0 : 1;
    for (long s = v.mini_batch; v.mini_batch > first_mark && s < v.T; s += v.mini_batch)
      marks.push_back({s - 0.5, colors::kMarker, true});
    const std::string w = state_letter(v);
    plot::small_multiples(v.blocks, cols, cell, ImVec2(gap, gap), [&](int b, ImVec2 size) {
      const std::size_t k = static_cast<std::size_t>(b);
      plot::LinePlot p;
      p.id = m_ids[static_cast<std::size_t>(std::min(b, 15))];
      p.export_name = "inner_losses_block" + std::to_string(b);
      p.title = v.member.empty() ? "Block " + std::to_string(b) : v.member_name + " · toy heads";
      p.y_label = v.member.empty() ? "inner loss ½‖f(k; W) − v‖², mean over sequences and heads"
                                   : "inner loss " + v.member_loss + ", mean over sequences and toy heads";
      p.x_label = "token position t";
      p.size = size;
      p.x_range = plot::Range{-0.5, static_cast<double>(v.T) - 0.5};
      p.y_range = shared;
      p.y_scale = m_settings.log_scale ? plot::ScaleKind::Log10 : plot::ScaleKind::Linear;
      p.smoothing = m_settings.smoothing;
      p.markers = marks;
      p.series.push_back(plot::line("ℓ(" + w + "₀; xₜ)", v.l0[k], colors::kLossInitial));
      p.series.push_back(plot::line("ℓ(" + w + "ₜ₋₁; xₜ)", v.lb[k], colors::kLossBefore));
      p.series.push_back(plot::line("ℓ(" + w + "ₜ; xₜ)", v.la[k], colors::kLossAfter));
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
      ImGui::TableSetupColumn(v.member.empty() ? "block" : "member");
      ImGui::TableSetupColumn("mean ℓ(W₀; xₜ)");
      ImGui::TableSetupColumn("mean ℓ(Wₜ₋₁; xₜ)");
      ImGui::TableSetupColumn("mean ℓ(Wₜ; xₜ)");
      ImGui::TableSetupColumn("second half: ℓ(Wₜ₋₁) vs ℓ(W₀)");
      ImGui::TableHeadersRow();
      for (int b = 0; b < v.blocks; ++b) {
        const std::size_t k = static_cast<std::size_t>(b);
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        if (v.member.empty())
          ImGui::Text("block %d", b);
        else
          ImGui::TextUnformatted(v.member_name.c_str());
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

  // LaCT's weights change only when a chunk is learnt from: inside a chunk ℓ(Wₜ₋₁) = ℓ(Wₜ). What each
  // update does to the loss of the chunk it learnt from, in the mean over sequences and toy heads.
  void lact_note(const CurvesView& v) {
    const Fonts& f = fonts();
    ImGui::PushFont(f.small);
    ImGui::PushTextWrapPos(0.0f);
    std::string text = "LaCT reads each chunk of C tokens with the weights from before it and learns from it when "
                       "the next chunk's first token arrives: ℓ(Wₜ₋₁; xₜ) and ℓ(Wₜ; xₜ) differ only at those "
                       "tokens (the markers). The chunk's mean loss before → after each update:";
    for (std::size_t u = 0; u < v.chunk_at.size() && u < 8; ++u)
      text += (u ? ", " : " ") + std::string("t = ") + std::to_string(v.chunk_at[u]) + ": " +
              format_value(v.chunk_before[u], 3) + " → " + format_value(v.chunk_after[u], 3);
    if (v.chunk_at.size() > 8) text += ", …";
    if (v.chunk_at.empty()) text += " none (T ≤ C: the one chunk is only read).";
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "%s", text.c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopFont();
  }

  const char* m_ids[16] = {"b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7",
                          "b8", "b9", "b10", "b11", "b12", "b13", "b14", "b15"};
};

}  // namespace

std::unique_ptr<Panel> make_inner_curves_panel() { return std::make_unique<InnerCurvesPanel>(); }

}  // namespace tttlab::gui
