// Panel 5 — Primal vs dual: every head of every block of the trained model (or one toy head) through
// inner_forward_primal (token by token, W_t formed explicitly) and inner_forward_dual (per mini-batch
// matrix products, never forming W_t); how far apart the outputs are per layer, what each form costs,
// and the dual form's masked attention-like matrix of the chosen block and head. A toggle reduces TTT
// to plain causal linear attention (Theorem 1), where the output must equal tril(QKᵀ)V.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "lab/primal_dual/primal_dual_module.hpp"
#include "lab/engine/head_inputs.hpp"
#include "gui/fonts.hpp"
#include "gui/panels/feature_panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/heatmap.hpp"
#include "gui/plot/line_plot.hpp"
#include "lab/plot/ticks.hpp"
#include "lab/primal_dual/primal_dual_settings.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;
using widgets::fit;

std::string ms(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v < 1.0 ? "%.3f ms" : (v < 100.0 ? "%.2f ms" : "%.0f ms"), v);
  return b;
}

class PrimalDualPanel final
    : public FeaturePanel<PrimalDualPanelSettings, PrimalDualView, &Snapshot::primal_dual> {
 public:
  PrimalDualPanel()
      : FeaturePanel(kPrimalDualId,
                     {{"primal_dual.reduction", "Primal vs dual: the linear-attention toggle"},
                      {"primal_dual.source", "Primal vs dual: model, block and head"},
                      {"primal_dual.text", "Primal vs dual: input text"},
                      {"primal_dual.inner", "Primal vs dual: toy-head settings"},
                      {"primal_dual.measurement", "Primal vs dual: precision and repeats"}},
                     "run the comparison again") {}

 private:
  std::optional<Command> rerun() const override { return PrimalDualRun{m_settings.run}; }

  void draw_controls(const PrimalDualView&, const Snapshot& snap, CommandSink& sink) override {
    bool changed = false;
    const bool ttt = m_settings.run.head.ttt();
    if (ttt && classroom::visible("primal_dual.reduction")) {
      widgets::section_label("REDUCTION (THEOREM 1)");
      changed |= ImGui::Checkbox("Reduce to linear attention", &m_settings.run.linear_attention);
      widgets::note("One mini-batch (b = T), W₀ = 0, no LayerNorm, residual or bias, λ ≡ 1 and τ ≡ 1, so every "
                    "weight of E is 1. Then TTT's output is exactly the causal linear attention tril(QKᵀ)V of the "
                    "same Q, K, V (see the Math reference, §9.1), and the meter on the right drops to rounding error.");
    }

    widgets::HeadEditorOptions opt;
    opt.limits = PrimalDualModule::limits();
    opt.library = snap.library ? snap.library->models.get() : nullptr;
    opt.sink = &sink;
    opt.panel = "primal_dual";
    opt.lock_reduction = ttt && m_settings.run.linear_attention;
    if (ttt && m_settings.run.linear_attention && m_settings.run.head.toy()) {
      // Show the values the reduction runs with; keep the user's own for when it is switched off.
      HeadConfig shown = m_settings.run.effective();
      changed |= widgets::head_editor(shown, opt);
      m_settings.run.head.text = shown.text;
      m_settings.run.head.repeat = shown.repeat;
      m_settings.run.head.seed = shown.seed;
      m_settings.run.head.d = shown.d;
      m_settings.run.head.source = shown.source;
    } else {
      changed |= widgets::head_editor(m_settings.run.head, opt);
    }

    if (!m_settings.run.head.ttt()) {
      widgets::section_label("PARALLEL FORM");
      widgets::row("Chunk C", "The chunked form's chunk size: within a chunk, matrix products (SSD's cumulative "
                              "decays; the UT transform for the delta rules); between chunks, the state. The last "
                              "chunk is shorter when C does not divide T.");
      ImGui::SliderInt("##chunk", &m_settings.run.chunk, 1, 256, "C = %d", ImGuiSliderFlags_Logarithmic);
      changed |= ImGui::IsItemDeactivatedAfterEdit();
    }

    if (classroom::visible("primal_dual.measurement")) {
    widgets::section_label("MEASUREMENT");
    widgets::row("Precision");
    changed |= widgets::choice_pair("double", Precision::Double, "float", Precision::Float,
                                    m_settings.run.precision);
    widgets::row("Repeats");
    ImGui::SliderInt("##reps", &m_settings.run.timing_reps, 1, 50, "%d runs per form");
    changed |= ImGui::IsItemDeactivatedAfterEdit();
    if (snap.compute && snap.compute->gpu_available && snap.compute->request != ComputeRequest::CPU) {
      widgets::row("GPU math");
      changed |= widgets::choice_pair("fp32", GpuMath::Fp32, "tf32", GpuMath::Tf32, m_settings.run.gpu_math);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("tf32 rounds each product's inputs to 10 bits of mantissa on the tensor cores: faster, "
                          "with differences near 1e-3 of |O| instead of 1e-7");
    }
    }
    ImGui::Dummy(ImVec2(0, 4));
    if (ImGui::Button("Run again  (F5)", ImVec2(-1, 0))) changed = true;
    if (changed) sink.post(PrimalDualRun{m_settings.run});
    ImGui::Dummy(ImVec2(0, 4));
    widgets::note(m_settings.run.head.toy()
                      ? "Both forms run on the engine thread, one after the other, on the same inputs (a fixed "
                        "random byte embedding and random projections from the seed), alternately: primal, dual, "
                        "primal, dual, …. Times (CPU, 1 thread) are the median over the repeats, with the "
                        "fastest and slowest run beside it."
                      : "Both forms run on the engine thread over every head of every block, each block reading "
                        "the input its own layer sees in the model (the embedding passed through the blocks before it, "
                        "then the layer's own projections of q, k and v), alternately: primal, dual, primal, dual, …. "
                        "Times (CPU, 1 thread) are the median over the repeats, all heads of a block together. "
                        "A speed-up is each repeat's primal time over its dual time: the median of those "
                        "ratios, and their range, for the whole model (the card) and for each block (the table).");
    widgets::note("With a GPU (the Compute menu), the same inputs also go through the GPU's dual-form kernel in "
                  "single precision, all heads of a block at once; its output is compared with the CPU's primal "
                  "form, the reference. GPU times are kernel times measured on the GPU itself, after 2 warm-up runs "
                  "that are not counted; copying the inputs over is not included.");
  }

  void draw_view(const PrimalDualView& v, const Snapshot& snap, CommandSink& sink) override {
    const Fonts& f = fonts();
    // Beside a docked lesson the view is 450–770 px wide: two cards per row, the plots stacked at full
    // width (the view scrolls), shorter titles and a table that scrolls sideways instead of cutting numbers.
    const float view_w = ImGui::GetContentRegionAvail().x;
    const bool narrow = widgets::narrow_view(view_w);
    const bool member = v.config.head.ttt() == false;
    const std::string who = v.config.head.member_name();
    if (!member)
      widgets::panel_title("Primal vs parallel form", narrow ? "Two ways to compute the same TTT layer output."
                                                             : "Two ways to compute the same TTT layer output: "
                                                               "explicit Wₜ per token, or TTT's dual form: matrix "
                                                               "products per mini-batch.");
    else
      widgets::panel_title("Primal vs parallel form",
                           (narrow ? "Two ways to compute the same " + who + " output."
                                   : "Two ways to compute the same " + who + " output: the state " +
                                         (v.config.head.member_id() == "titans" ? "Mₜ" : "Sₜ") +
                                         " token by token, or the chunked form: matrix products per chunk of C tokens.")
                               .c_str());

    // Status line: running / failed / stale.
    if (v.outcome == JobOutcome::Running) {
      ImGui::ProgressBar(static_cast<float>(v.progress), ImVec2(260, 0), "computing…");
      ImGui::SameLine();
      for (const auto& j : snap.jobs)
        if (j.outcome == JobOutcome::Running && ImGui::SmallButton("Cancel")) sink.post(CancelJob{j.id});
      if (v.results_generation != 0) {
        const char* stale = "the results below are from the previous run";
        widgets::same_line_if_fits(stale, ImGui::GetStyle().ItemSpacing.x);
        ImGui::TextDisabled("%s", stale);
      }
    } else if (v.outcome == JobOutcome::Failed) {
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kError), "Cannot run: %s", v.error.c_str());
      ImGui::PopTextWrapPos();
    } else if (v.outcome == JobOutcome::Cancelled) {
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kWarning), "Cancelled.");
    } else {
      ImGui::PushFont(f.small);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kAccent), "%s", v.description.c_str());
      char details[160];
      if (v.member_chunked)
        std::snprintf(details, sizeof details, "T = %ld tokens, d = %d, chunk C = %d, %s, %s precision", v.T, v.d,
                      v.mini_batch, who.c_str(), v.config.precision == Precision::Double ? "double" : "float");
      else
        std::snprintf(details, sizeof details, "T = %ld tokens, d = %d, b = %d, TTT-%s, %s precision%s", v.T, v.d,
                      v.mini_batch, v.mlp ? "MLP" : "Linear",
                      v.config.precision == Precision::Double ? "double" : "float",
                      v.linear_attention ? ", reduced to linear attention" : "");
      widgets::same_line_if_fits(details, 10);
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextDisabled("%s", details);
      std::string devices =
          "Computed on: " + v.cpu_device + (v.member_chunked ? " (primal and chunked form)" : " (primal and dual form)");
      if (v.gpu_ran) devices += "; GPU: " + v.gpu_device + " (" + v.gpu_kernel + ")";
      ImGui::TextDisabled("%s", devices.c_str());
      if (!v.gpu_note.empty())
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kWarning), "GPU: %s", v.gpu_note.c_str());
      ImGui::PopTextWrapPos();
      ImGui::PopFont();
    }
    if (v.results_generation == 0) return;

    ImGui::Dummy(ImVec2(0, 4));
    const bool dbl = v.config.precision == Precision::Double;
    const double tol = dbl ? 1e-12 : 1e-4;
    metric_cards(v, tol, narrow);
    ImGui::Dummy(ImVec2(0, 6));
    layer_table(v, tol, narrow);
    ImGui::Dummy(ImVec2(0, 6));

    // The dual form's matrix, and the difference per token: side by side when wide, stacked when narrow.
    const float avail_w = ImGui::GetContentRegionAvail().x;
    const float map_w = narrow ? avail_w : std::min(avail_w * 0.46f, ImGui::GetContentRegionAvail().y - 40.0f);
    std::vector<long> lines;
    const long b = v.mini_batch;
    for (long s = b; s < v.T; s += b) lines.push_back(s);
    const auto tok = [&v](long t) { return widgets::quoted_token(v.bytes, t); };
    const std::string where =
        v.model_source ? "block " + std::to_string(v.shown_block) + ", head " + std::to_string(v.shown_head)
                       : std::string();
    if (v.member_chunked) {
      member_view(v, narrow);
      return;
    }
    const bool zoom = m_zoom && v.T > 128 && v.attention_start.src_rows < v.T;
    const plot::PooledMatrix& shown_m = zoom ? v.attention_start : v.attention;
    plot::Heatmap m;
    m.id = "attention";
    m.export_name = "dual_matrix_M";
    const std::string m_name = v.bias ? "M = E ⊙ tril(QKᵀ + 1)" : "M = E ⊙ tril(QKᵀ)";
    m.title = fit(where.empty() ? m_name : m_name + "   " + where, m_name, map_w, f.bold);
    // The heat-map appends the colour range ("   ±0.0551") to the subtitle: leave room for it.
    const float sub_w = map_w - 70.0f;
    const std::string range_note = ", row i reads tokens j ≤ i";
    if (zoom) {
      const std::string first = "the first " + std::to_string(shown_m.src_rows) + " of " + std::to_string(v.T) + " tokens";
      m.subtitle = fit(first + " (click the map for all)" + range_note, first + " (click for all)", sub_w, f.small);
    } else {
      const std::string dims = "[" + std::to_string(v.T) + " × " + std::to_string(v.T) + "]";
      const std::string full = dims + (shown_m.pooled() ? ", pooled: max |·| per bin" : "");
      m.subtitle = fit(full + range_note, full, sub_w, f.small);
    }
    m.pooled = &shown_m;
    m.m = plot::MatrixView::of(shown_m);
    // Wide, the map's height is set by its width; narrow, the colour bar takes ~60 px of the full width,
    // so a height 60 px lower (less the title lines) keeps the square map without a gap under it.
    m.size = ImVec2(map_w, narrow ? map_w - 30.0f : map_w + 30.0f);
    m.max_cell = 40.0f;
    m.row_name = "query i";
    m.col_name = "key j";
    m.row_label = tok;
    m.col_label = tok;
    // E ⊙ tril: later tokens and earlier mini-batches are zero by construction (printed blank).
    m.masked = [b = std::max(1, v.mini_batch)](long i, long j) { return j > i || j < (i / b) * b; };
    m.diagonal_blocks = {0};
    m.diagonal_blocks.insert(m.diagonal_blocks.end(), lines.begin(), lines.end());
    m.tooltip = [&v](long i, long j, double) {
      const long mb = i / std::max(1, v.mini_batch);
      if (j > i)
        ImGui::TextDisabled("above the diagonal: a token never reads later tokens");
      else if (j < mb * v.mini_batch)
        ImGui::TextDisabled("earlier mini-batch: reaches token i only through the committed W");
      else
        ImGui::TextDisabled("τᵢ λⱼ (qᵢ·kⱼ%s): how much token j's gradient moves token i's read-out",
                            v.bias ? " + 1" : "");
    };
    const ImVec2 top = ImGui::GetCursorScreenPos();
    if (plot::heatmap(m).clicked && v.T > 128) m_zoom = !m_zoom;
    // Wide: the two plots share the map's height in a column on its right. Narrow: each at full width
    // under the map, at a height that still reads.
    const float right_x = narrow ? top.x : top.x + map_w + 70.0f;
    const float right_w = avail_w - (right_x - top.x);
    const float plot_h = narrow ? ImGui::GetFontSize() * 12.5f : (map_w + 30.0f) * 0.5f - 6.0f;
    if (narrow)
      ImGui::Dummy(ImVec2(0, 6));
    else
      ImGui::SetCursorScreenPos(ImVec2(right_x, top.y));
    ImGui::BeginGroup();
    std::vector<plot::VLine> marks;
    for (long s : lines) marks.push_back({s - 0.5, colors::kMarker, true});
    std::vector<double> diff = v.token_diff;
    const double floor = dbl ? 1e-18 : 1e-10;  // exact zeros cannot sit on a log axis
    for (double& d : diff) d = std::max(d, floor);
    plot::LinePlot dp;
    dp.id = "token_diff";
    dp.export_name = "primal_dual_difference";
    dp.title = fit(where.empty() ? "Difference per token" : "Difference per token (" + where + ")",
                   "Difference per token", right_w, f.bold);
    const std::string dp_y = "maxⱼ |O_primal − O_dual|[t, j]";
    dp.y_label = fit(dp_y + "  (log scale; " + std::string(dbl ? "double" : "float") + " rounding ≈ " +
                         (dbl ? "1e−16" : "1e−7") + " × |O|)",
                     dp_y + ", log scale", right_w, f.small);
    dp.x_label = "token t";
    dp.size = ImVec2(right_w, plot_h);
    dp.y_scale = plot::ScaleKind::Log10;
    dp.x_range = plot::Range{-0.5, static_cast<double>(v.T) - 0.5};
    dp.markers = marks;
    dp.x_format = [&](double x) { return "t = " + std::to_string(std::lround(x)) + "  " + tok(std::lround(x)); };
    dp.series.push_back(plot::line("CPU dual", diff, colors::kAccent, false, 0, 1));
    dp.legend = false;
    std::vector<double> gpu_diff;  // outlives the plot call: series view their data, they do not copy it
    if (v.gpu_ran && v.gpu_token_diff.size() == diff.size()) {
      gpu_diff = v.gpu_token_diff;
      for (double& d : gpu_diff) d = std::max(d, 1e-18);
      dp.series.push_back(plot::line("GPU dual", gpu_diff, colors::kGood, false, 0, 1));
      dp.legend = true;
    }
    plot::line_plot(dp);
    ImGui::Dummy(ImVec2(0, 6));
    plot::LinePlot tp;
    tp.id = "timings";
    tp.export_name = "primal_dual_timings";
    tp.title = fit(v.model_source ? "Time of each run (all layers)" : "Time of each run", "Time of each run", right_w,
                   f.bold);
    tp.y_label = fit("milliseconds (the first run includes cache warm-up)", "ms (first run warms caches)", right_w,
                     f.small);
    tp.x_label = "repeat";
    tp.size = ImVec2(right_w, plot_h);
    tp.series.push_back(plot::line("primal", v.primal_ms, colors::kPrimal, false, 1, 1));
    tp.series.push_back(plot::line("dual", v.dual_ms, colors::kDual, false, 1, 1));
    double top_ms = std::max(*std::max_element(v.primal_ms.begin(), v.primal_ms.end()),
                             *std::max_element(v.dual_ms.begin(), v.dual_ms.end()));
    if (v.gpu_ran && !v.gpu_ms.empty()) {
      tp.series.push_back(plot::line("GPU dual", v.gpu_ms, colors::kGood, false, 1, 1));
      top_ms = std::max(top_ms, *std::max_element(v.gpu_ms.begin(), v.gpu_ms.end()));
    }
    tp.y_range = plot::Range{0.0, 1.08 * top_ms};
    tp.x_range = plot::Range{0.8, std::max(2.0, static_cast<double>(v.primal_ms.size()) + 0.2)};
    tp.x_format = [](double x) { return "run " + std::to_string(std::lround(x)); };
    plot::line_plot(tp);
    ImGui::EndGroup();

    if (narrow)
      ImGui::Dummy(ImVec2(0, 6));
    else
      ImGui::SetCursorScreenPos(ImVec2(top.x, top.y + map_w + 36.0f));
    // Wide, the map fills the space left above the note; narrow, the view scrolls and it gets a fixed height.
    const float rest = narrow ? 180.0f : ImGui::GetContentRegionAvail().y - 4.0f * ImGui::GetTextLineHeightWithSpacing();
    if (rest > 90.0f && !v.diff_map.empty()) {
      plot::Heatmap dm;
      dm.id = "diff_map";
      dm.export_name = "primal_dual_difference_map";
      dm.title = fit("Where the two forms differ: |O_primal − O_dual| per output element",
                     "Where they differ: |O_primal − O_dual|", avail_w, f.bold);
      dm.subtitle = fit("[d × T], log colour scale; darkest: exactly equal. Rounding noise has no structure.",
                        "[d × T], log colours; darkest: exactly equal", avail_w, f.small);
      dm.pooled = &v.diff_map;
      dm.m = plot::MatrixView::of(v.diff_map);
      dm.palette = plot::Palette::Sequential;
      dm.log_color = true;
      dm.square = false;
      dm.max_cell = 60.0f;
      dm.size = ImVec2(avail_w, std::min(rest, 220.0f));
      dm.row_name = "feature j";
      dm.col_name = "token t";
      dm.col_label = tok;
      dm.col_lines = lines;
      plot::heatmap(dm);
      ImGui::Dummy(ImVec2(0, 4));
    }
    widgets::note(
        "Dual form, per mini-batch (see the Math reference, §4.2): the read-out is QW + b − M·G with "
        "M = E ⊙ tril(QKᵀ + 1), where b is the bias (added to every row), G holds the loss gradients taken at the "
        "mini-batch's start state and E[i, j] = τᵢλⱼ. Row i of M weighs every earlier "
        "token's gradient of the same mini-batch, like a causal attention pattern; across mini-batches "
        "information flows only through the committed W. The primal form applies the same updates one "
        "token at a time, so the two outputs agree up to floating-point rounding.");
  }

  // The cards over the whole model: all in one row when wide, two per row when narrow. Each label and
  // caption has a shorter form for a narrow card, so no number is ever clipped.
  void metric_cards(const PrimalDualView& v, double tol, bool narrow) {
    const int cards = (v.linear_attention ? 5 : 4) + (v.gpu_ran ? 2 : 0);
    const int per_row = narrow ? 2 : cards;
    const float gap = 10.0f;
    const float cw = widgets::box_width(per_row, gap);
    const float text_w = cw - 16.0f;  // metric()'s padding on both sides
    ImFont* small = fonts().small;
    int placed = 0;
    const auto card = [&](const std::string& label, const std::string& short_label, const std::string& value,
                          const std::string& caption, const std::string& short_caption, ImU32 color) {
      if (placed++ % per_row) ImGui::SameLine(0, gap);
      widgets::metric(fit(label, short_label, text_w, small).c_str(), value,
                      fit(caption, short_caption, text_w, small), color, cw);
    };
    const double rel = v.max_abs_output > 0 ? v.max_abs_diff / v.max_abs_output : 0.0;
    const std::string relative = "relative " + format_value(rel, 2);
    const std::string other = v.member_chunked ? "chunked" : "dual";
    card("max |O_primal − O_" + other + "|", "max difference", format_value(v.max_abs_diff, 3),
         relative + " (max |O| " + format_value(v.max_abs_output, 3) + ")", relative,
         rel < tol ? colors::kGood : colors::kWarning);
    const auto timing = [&](const char* label, const TimingSummary& t, ImU32 color) {
      const std::string spread = ms(t.min_ms) + "–" + ms(t.max_ms);
      card(label, label, ms(t.median_ms), spread + ", median of " + std::to_string(t.repeats), spread, color);
    };
    timing("primal form (CPU)", v.primal_time, colors::kPrimal);
    timing(v.member_chunked ? "chunked form (CPU)" : "dual form (CPU)", v.dual_time, colors::kDual);
    if (v.gpu_ran) {
      const double grel = v.max_abs_output > 0 ? v.gpu_max_abs_diff / v.max_abs_output : 0.0;
      const std::string grelative = "relative " + format_value(grel, 2);
      card("max |O_primal − O_GPU|", "GPU difference", format_value(v.gpu_max_abs_diff, 3),
           grelative + " (GPU dual, " + to_string(v.gpu_math) + ")", grelative,
           grel < (v.gpu_math == GpuMath::Tf32 ? 1e-2 : 1e-4) ? colors::kGood : colors::kWarning);
      timing("dual form (GPU)", v.gpu_time, colors::kGood);
    }
    // The median of the repeats' ratios over the whole model, computed as each block's row is, with
    // its range: a swing between repeats (the machine's load) is visible instead of hidden.
    const Speedup& s = v.speedup;
    char sp[32], range[64];
    std::snprintf(sp, sizeof sp, "%.2f×", s.median);
    std::snprintf(range, sizeof range, "%.2f–%.2f×", s.min, s.max);
    card(v.member_chunked ? "chunked speed-up (CPU)" : "dual speed-up (CPU, whole model)",
         v.member_chunked ? "chunked speed-up" : "dual speed-up", sp,
         std::string(range) + ", median of " + std::to_string(s.repeats) + " repeats", range, colors::kText);
    if (v.linear_attention) {
      const double lrel = v.linear_attention_scale > 0 ? v.linear_attention_diff / v.linear_attention_scale : 0.0;
      const std::string lrelative = "relative " + format_value(lrel, 2);
      // Like the first card: an absolute difference means nothing without the size of what it is a
      // difference of (in float precision 0.01 can be rounding on outputs of size 1000).
      card("max |O − tril(QKᵀ)V|", "vs tril(QKᵀ)V", format_value(v.linear_attention_diff, 3),
           lrelative + " (max |tril(QKᵀ)V| " + format_value(v.linear_attention_scale, 3) + ")", lrelative,
           lrel < tol ? colors::kGood : colors::kWarning);
    }
  }

  // One row per block: how far apart the two forms are and what each costs. Wide, the columns share the
  // width; narrow, they take the width of their content under short headers and the table scrolls
  // sideways if they still do not fit, so a number is never cut.
  void layer_table(const PrimalDualView& v, double tol, bool narrow) {
    if (v.layers.size() < 2 && !v.model_source) return;
    const Fonts& f = fonts();
    const int cols = (v.linear_attention ? 6 : 5) + (v.gpu_ran ? 2 : 0);
    ImGui::PushFont(f.small);
    ImGuiTableFlags flags = ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_RowBg;
    ImVec2 outer(0.0f, 0.0f);
    if (narrow) {
      flags |= ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollX;
      // A scrolling table is a child window: give it the height of its rows and the scrollbar.
      const float row_h = ImGui::GetTextLineHeight() + 2.0f * ImGui::GetStyle().CellPadding.y;
      outer.y = row_h * static_cast<float>(v.layers.size() + 1) + ImGui::GetStyle().ScrollbarSize + 4.0f;
    } else {
      flags |= ImGuiTableFlags_SizingStretchProp;
    }
    if (ImGui::BeginTable("##layers", cols, flags, outer)) {
      ImGui::TableSetupColumn("layer");
      ImGui::TableSetupColumn(narrow ? "max |O_p − O_d|" : "max |O_primal − O_dual|");
      ImGui::TableSetupColumn("relative");
      ImGui::TableSetupColumn(narrow ? "primal / dual" : "primal / dual (median, all heads)");
      ImGui::TableSetupColumn(narrow ? "speed-up" : "dual speed-up (median, min–max)");
      if (v.linear_attention) ImGui::TableSetupColumn(narrow ? "vs tril(QKᵀ)V" : "max |O − tril(QKᵀ)V|");
      if (v.gpu_ran) {
        ImGui::TableSetupColumn(narrow ? "|O_p − O_GPU|" : "max |O_primal − O_GPU|");
        ImGui::TableSetupColumn(narrow ? "GPU" : "GPU dual (median, min–max)");
      }
      ImGui::TableHeadersRow();
      for (const auto& L : v.layers) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        if (narrow)
          ImGui::Text("block %d", L.block);
        else
          ImGui::Text("block %d  (%d heads)", L.block, L.heads);
        ImGui::TableNextColumn();
        const double rel = L.max_abs_output > 0 ? L.max_abs_diff / L.max_abs_output : 0.0;
        ImGui::PushFont(f.mono);
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(rel < tol ? colors::kGood : colors::kWarning), "%s",
                           format_value(L.max_abs_diff, 3).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(format_value(rel, 2).c_str());
        ImGui::TableNextColumn();
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kPrimal), "%s", ms(L.primal_ms).c_str());
        ImGui::SameLine(0, 4);
        ImGui::TextUnformatted("/");
        ImGui::SameLine(0, 4);
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kDual), "%s", ms(L.dual_ms).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%.2f×", L.speedup.median);
        ImGui::SameLine(0, 4);
        ImGui::TextDisabled("%.2f–%.2f", L.speedup.min, L.speedup.max);
        if (v.linear_attention) {
          ImGui::TableNextColumn();
          const double lrel = L.linear_attention_scale > 0 ? L.linear_attention_diff / L.linear_attention_scale : 0.0;
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(lrel < tol ? colors::kGood : colors::kWarning), "%s",
                             format_value(L.linear_attention_diff, 3).c_str());
          ImGui::SameLine();
          ImGui::TextDisabled("relative %s", format_value(lrel, 2).c_str());
        }
        if (v.gpu_ran) {
          ImGui::TableNextColumn();
          const double grel = L.max_abs_output > 0 ? L.gpu_max_abs_diff / L.max_abs_output : 0.0;
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(
                                 grel < (v.gpu_math == GpuMath::Tf32 ? 1e-2 : 1e-4) ? colors::kGood : colors::kWarning),
                             "%s", format_value(L.gpu_max_abs_diff, 3).c_str());
          ImGui::TableNextColumn();
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kGood), "%s", ms(L.gpu_time.median_ms).c_str());
          ImGui::SameLine(0, 4);
          ImGui::TextDisabled("%s–%s", ms(L.gpu_time.min_ms).c_str(), ms(L.gpu_time.max_ms).c_str());
        }
        ImGui::PopFont();
      }
      ImGui::EndTable();
    }
    ImGui::PopFont();
  }

  // A member other than TTT: its chunked form's difference per token, the Hebbian members' causal matrix M
  // (o = M V), the times, and what the chunked form is.
  void member_view(const PrimalDualView& v, bool narrow) {
    const Fonts& f = fonts();
    const float avail_w = ImGui::GetContentRegionAvail().x;
    const float map_w = narrow ? avail_w : std::min(avail_w * 0.46f, ImGui::GetContentRegionAvail().y - 40.0f);
    const long C = std::max(1, v.mini_batch);
    std::vector<long> lines;
    for (long s = C; s < v.T; s += C) lines.push_back(s);
    const auto tok = [&v](long t) { return widgets::quoted_token(v.bytes, t); };
    const bool dbl = v.config.precision == Precision::Double;
    const std::string id = v.config.head.member_id();
    const bool delta = id == "deltanet" || id == "gated_deltanet";
    const ImVec2 top = ImGui::GetCursorScreenPos();
    if (!v.attention.empty()) {
      const bool zoom = m_zoom && v.T > 128 && v.attention_start.src_rows < v.T;
      const plot::PooledMatrix& shown_m = zoom ? v.attention_start : v.attention;
      plot::Heatmap m;
      m.id = "attention";
      m.export_name = "member_matrix_M";
      const std::string m_name = id == "mamba2" ? "M[i, j] = (αⱼ₊₁⋯αᵢ) βⱼ qᵢ·kⱼ" : "M = tril(QKᵀ)";
      m.title = fit(m_name + "   (o = M V)", m_name, map_w, f.bold);
      const std::string sub = zoom ? "the first " + std::to_string(shown_m.src_rows) + " of " + std::to_string(v.T) +
                                         " tokens (click for all)"
                                   : "[" + std::to_string(v.T) + " × " + std::to_string(v.T) + "]" +
                                         (shown_m.pooled() ? ", pooled" : "");
      m.subtitle = fit(sub + "; dashed: chunk boundaries", sub, map_w - 70.0f, f.small);
      m.pooled = &shown_m;
      m.m = plot::MatrixView::of(shown_m);
      m.size = ImVec2(map_w, narrow ? map_w - 30.0f : map_w + 30.0f);
      m.max_cell = 40.0f;
      m.row_name = "query i";
      m.col_name = "key j";
      m.row_label = tok;
      m.col_label = tok;
      m.masked = [](long i, long j) { return j > i; };
      m.diagonal_blocks = {0};
      m.diagonal_blocks.insert(m.diagonal_blocks.end(), lines.begin(), lines.end());
      m.tooltip = [](long i, long j, double) {
        if (j > i) ImGui::TextDisabled("above the diagonal: a token never reads later tokens");
        else ImGui::TextDisabled("how much of vⱼ token i's read-out holds; the chunked form computes the "
                                 "blocks on the diagonal as matrix products and the rest through the state");
      };
      if (plot::heatmap(m).clicked && v.T > 128) m_zoom = !m_zoom;
    } else {
      ImGui::BeginGroup();
      ImGui::Dummy(ImVec2(map_w, 4));
      ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + map_w);
      ImGui::TextDisabled("%s",
                          delta ? "No attention matrix here: the delta rule's read-out is not M V for a matrix of q and "
                                  "k alone. Its chunked form solves a triangular system per chunk (the UT transform, "
                                  "T = (I + tril(diag(β)(KKᵀ ⊙ Γ), −1))⁻¹ diag(β)) and passes the state between chunks."
                          : id == "titans"
                              ? "No attention matrix here: Titans' read-out passes through LayerNorms. C is its "
                                "mini-batch b in both forms (gradients at each mini-batch's start, so b changes the "
                                "function; both forms compute the same one). The chunked form takes all b writes "
                                "uₜ from the start memory at once, then the memory and momentum in closed form, "
                                "Mᵢ = βᵢM_p + fᵢS_p − 2Σⱼ≤ᵢ Gᵢⱼkⱼᵀuⱼ, with β, f, G the products of (1 − α) and η "
                                "inside the mini-batch (docs/MATH.md §11.9)."
                              : "");
      ImGui::PopTextWrapPos();
      ImGui::EndGroup();
    }
    const float right_x = narrow ? top.x : top.x + map_w + 70.0f;
    const float right_w = avail_w - (right_x - top.x);
    const float plot_h = narrow ? ImGui::GetFontSize() * 12.5f : (map_w + 30.0f) * 0.5f - 6.0f;
    if (narrow)
      ImGui::Dummy(ImVec2(0, 6));
    else
      ImGui::SetCursorScreenPos(ImVec2(right_x, top.y));
    ImGui::BeginGroup();
    std::vector<plot::VLine> marks;
    for (long s : lines) marks.push_back({s - 0.5, colors::kMarker, true});
    std::vector<double> diff = v.token_diff;
    for (double& d : diff) d = std::max(d, dbl ? 1e-18 : 1e-10);
    plot::LinePlot dp;
    dp.id = "token_diff";
    dp.export_name = "primal_chunked_difference";
    dp.title = fit("Difference per token, " + v.config.head.member_name(), "Difference per token", right_w, f.bold);
    dp.y_label = fit("maxⱼ |O_primal − O_chunked|[t, j] (log scale; dashed: chunk boundaries)",
                     "maxⱼ |O_primal − O_chunked|, log", right_w, f.small);
    dp.x_label = "token t";
    dp.size = ImVec2(right_w, plot_h);
    dp.y_scale = plot::ScaleKind::Log10;
    dp.x_range = plot::Range{-0.5, static_cast<double>(v.T) - 0.5};
    dp.markers = marks;
    dp.x_format = [&](double x) { return "t = " + std::to_string(std::lround(x)) + "  " + tok(std::lround(x)); };
    dp.series.push_back(plot::line("chunked", diff, colors::kAccent, false, 0, 1));
    dp.legend = false;
    plot::line_plot(dp);
    ImGui::Dummy(ImVec2(0, 6));
    plot::LinePlot tp;
    tp.id = "timings";
    tp.export_name = "primal_chunked_timings";
    tp.title = "Time of each run";
    tp.y_label = fit("milliseconds (the first run includes cache warm-up)", "ms", right_w, f.small);
    tp.x_label = "repeat";
    tp.size = ImVec2(right_w, plot_h);
    tp.series.push_back(plot::line("primal", v.primal_ms, colors::kPrimal, false, 1, 1));
    tp.series.push_back(plot::line("chunked", v.dual_ms, colors::kDual, false, 1, 1));
    const double top_ms = std::max(*std::max_element(v.primal_ms.begin(), v.primal_ms.end()),
                                   *std::max_element(v.dual_ms.begin(), v.dual_ms.end()));
    tp.y_range = plot::Range{0.0, 1.08 * top_ms};
    tp.x_range = plot::Range{0.8, std::max(2.0, static_cast<double>(v.primal_ms.size()) + 0.2)};
    tp.x_format = [](double x) { return "run " + std::to_string(std::lround(x)); };
    plot::line_plot(tp);
    ImGui::EndGroup();
    if (!narrow) ImGui::SetCursorScreenPos(ImVec2(top.x, top.y + map_w + 36.0f));
    widgets::note(("Primal form: Sₜ updated token by token. Chunked form: per chunk of C tokens, matrix "
                   "products inside the chunk and the state passed between chunks (Math reference §11.3). They are the same function, so the outputs agree "
                   "to rounding (" + std::string(dbl ? "≤ 1e−12 of |O| in double" : "about 1e−6 of |O| in float") +
                   ") for every C, including one that does not divide T. TTT's dual form is different: with b > 1 "
                   "its gradients are stale, and no per-token form equals it.").c_str());
  }

  bool m_zoom = true;  // M: the first tokens up close (a view choice, not a setting)
};

}  // namespace

std::unique_ptr<Panel> make_primal_dual_panel() { return std::make_unique<PrimalDualPanel>(); }

}  // namespace tttlab::gui
