// Panel 1 — Inner-loop stepper: one TTT head — by default head 0 of block 0 of the shipped, trained
// tiny-brown model — consumes a text token by token (the primal form, the way a decoder runs), and
// the panel takes each step apart: the key k_t, the loss gradient ∇ℓ_t,
// their outer product (the token's rank-1 gradient term), the learning rate, and the weights before,
// the change, and after; plus the three inner losses over the sequence.
//
// Index of this file
//   [SECTION] Settings (state file: lab/inner_stepper/stepper_settings.hpp)
//   [SECTION] Panel: controls column, transport, token strip, update anatomy, plots, film strip
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "lab/inner_stepper/stepper_module.hpp"
#include "lab/engine/head_inputs.hpp"
#include "gui/fonts.hpp"
#include "gui/keys.hpp"
#include "gui/panels/feature_panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/heatmap.hpp"
#include "gui/plot/line_plot.hpp"
#include "gui/plot/plot_common.hpp"
#include "gui/plot/small_multiples.hpp"
#include "lab/plot/ticks.hpp"
#include "lab/inner_stepper/stepper_settings.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;

// ---- [SECTION] Settings ------------------------------------------------------------------------------

// The settings and their state-file form: lab/inner_stepper/stepper_settings.hpp.
using ColourScale = StepperColourScale;

// ---- [SECTION] Panel -----------------------------------------------------------------------------------

plot::MatrixView view_of(const Mat<double>& m) {
  return plot::MatrixView::of(m.data(), m.rows(), m.cols(), m.cols());
}
plot::MatrixView view_of(const RowVec<double>& v, bool as_column) {
  return as_column ? plot::MatrixView::of(v.data(), v.size(), 1, 1)
                   : plot::MatrixView::of(v.data(), 1, v.size(), v.size());
}

// The 95th percentile (nearest rank) of positive values.
double robust_max(std::vector<double> v) {
  std::erase_if(v, [](double x) { return !(x > 0.0) || !std::isfinite(x); });
  if (v.empty()) return 0.0;
  const std::size_t k = static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(v.size()))) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// "₁₂" for 12.
std::string subscript(long n) {
  static const char* const kSub[] = {"\xE2\x82\x80", "\xE2\x82\x81", "\xE2\x82\x82", "\xE2\x82\x83",
                                     "\xE2\x82\x84", "\xE2\x82\x85", "\xE2\x82\x86", "\xE2\x82\x87",
                                     "\xE2\x82\x88", "\xE2\x82\x89"};
  std::string s;
  for (char c : std::to_string(n)) s += kSub[c - '0'];
  return s;
}

// A member of the family other than TTT whose state is one matrix S (linear attention, Mamba-2,
// DeltaNet, Gated DeltaNet).
bool member_matrix(const StepperView& v) { return !v.config.ttt() && !v.mlp(); }

// What one step of a member other than TTT does, in words.
std::string member_step_text(const StepperView& v) {
  const std::string id = v.config.member_id();
  if (id == "linear_attention") return "Sₜ = Sₜ₋₁ + kₜᵀvₜ: one step of rate 1 down the Hebbian loss, whose gradient is −kₜᵀvₜ.";
  if (id == "mamba2") return "Sₜ = αₜSₜ₋₁ + βₜkₜᵀvₜ: the decay αₜ, then a Hebbian step of rate βₜ (Δₜ in Mamba-2).";
  if (id == "deltanet") return "Sₜ = Sₜ₋₁ − βₜkₜᵀ(kₜSₜ₋₁ − vₜ): one exact gradient step on this token's squared error, at Sₜ₋₁.";
  if (id == "gated_deltanet")
    return "Sₜ = αₜSₜ₋₁ − βₜkₜᵀ(kₜαₜSₜ₋₁ − vₜ): the decay αₜ, then the delta step at the decayed state.";
  if (id == "titans")
    return "Sₜ = ηₜSₜ₋₁ − 2θₜkₜᵀuₜ, Mₜ = (1 − αₜ)Mₜ₋₁ + Sₜ: momentum (the \"surprise\" S), forgetting αₜ, and "
           "uₜ taken at the memory of the mini-batch's start (b tokens). Shown: W₁ = M, W₂ = S (the momentum); "
           "the gradient term kₜᵀuₜ.";
  if (id == "lact")
    return "Tokens are read with the weights of their chunk (C = b tokens); when the next chunk's first token "
           "arrives, one Muon step with momentum on the chunk's rate-weighted gradient, every row renormalised "
           "(apply, then update). The weights change only there. Shown: W₁ = W₀ [4d, d] and W₂ = W₁ [d, 4d] "
           "of LaCT's SwiGLU (its W₂, like W₀, is not drawn); the gradient of this token's −f(kₜ)·vₜ.";
  return "";
}

class InnerStepperPanel final
    : public FeaturePanel<StepperPanelSettings, StepperView, &Snapshot::stepper> {
 public:
  InnerStepperPanel()
      : FeaturePanel(kInnerStepperId, {{"inner_stepper.source", "Stepper: model, block and head"},
                                       {"inner_stepper.text", "Stepper: input text"},
                                       {"inner_stepper.inner", "Stepper: toy-head settings"},
                                       {"inner_stepper.playback", "Stepper: playback speed"},
                                       {"inner_stepper.view", "Stepper: view options"}}) {}

  std::vector<ShortcutHelp> shortcut_help() const override {
    return {{"Space", "play / pause"},
            {"→  ←", "one token forward / back"},
            {"Shift+→  Shift+←", "to the end of the next / previous mini-batch (PgDn / PgUp)"},
            {"Home  End", "before the first token / the last token"}};
  }

  void shortcuts(const Snapshot&, CommandSink& sink) override {
    const auto go = [&](StepperOp op) { sink.post(StepperTransport{op, 0}); };
    if (key_pressed(Key::Space, false)) go(StepperOp::TogglePlay);
    if (key_pressed(Key::Right)) go(shift_down() ? StepperOp::NextMiniBatch : StepperOp::StepForward);
    if (key_pressed(Key::Left)) go(shift_down() ? StepperOp::PrevMiniBatch : StepperOp::StepBack);
    if (key_pressed(Key::PageDown)) go(StepperOp::NextMiniBatch);
    if (key_pressed(Key::PageUp)) go(StepperOp::PrevMiniBatch);
    if (key_pressed(Key::Home, false)) go(StepperOp::ToStart);
    if (key_pressed(Key::End, false)) go(StepperOp::ToEnd);
  }

  void observe(const Snapshot& snap) override {
    if (snap.stepper && snap.stepper->error.empty()) m_last_cursor = snap.stepper->cursor;
  }

 private:
  // The cursor saved is where playback stands, which the engine moves.
  StepperPanelSettings saved() const override {
    StepperPanelSettings s = m_settings;
    s.cursor = m_last_cursor;
    return s;
  }
  void loaded() override { m_last_cursor = m_settings.cursor; }

  void draw_controls(const StepperView& v, const Snapshot& snap, CommandSink& sink) override {
    widgets::HeadEditorOptions opt;
    opt.limits = StepperModule::limits();
    opt.library = snap.library ? snap.library->models.get() : nullptr;
    opt.sink = &sink;
    opt.panel = "inner_stepper";
    const std::string text_before = m_settings.head.text;
    bool changed = widgets::head_editor(m_settings.head, opt);
    if (changed && m_settings.head.text != text_before) m_settings.text_file.clear();  // typed over the file's
    changed |= widgets::own_text_file(opt.panel, m_settings.text_file, m_settings.head, opt.limits, m_text_error);
    if (changed) sink.post(StepperConfigure{m_settings.head, m_last_cursor});

    if (classroom::visible("inner_stepper.playback")) {
    widgets::section_label("PLAYBACK");
    widgets::row("Speed");
    float speed = static_cast<float>(m_settings.speed);
    if (ImGui::SliderFloat("##speed", &speed, 0.5f, 240.0f, "%.3g tokens/s", ImGuiSliderFlags_Logarithmic)) {
      m_settings.speed = speed;
      sink.post(StepperSetSpeed{m_settings.speed, m_settings.loop});
    }
    if (ImGui::Checkbox("loop at the end", &m_settings.loop)) sink.post(StepperSetSpeed{m_settings.speed, m_settings.loop});
    }

    if (classroom::visible("inner_stepper.view")) {
    widgets::section_label("VIEW");
    widgets::smoothing_row(m_settings.smoothing, 0.99f);
    ImGui::Checkbox("log scale for losses", &m_settings.log_losses);
    widgets::row("Colours");
    int cm = static_cast<int>(m_settings.colours);
    if (ImGui::Combo("##colours", &cm, "W before/after shared\0fixed over the run\0per matrix\0"))
      m_settings.colours = static_cast<ColourScale>(cm);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("Shared: Wₜ₋₁ and Wₜ use one range, the other maps their own.\n"
                        "Fixed over the run: one range per kind of matrix over all computed tokens\n"
                        "(95th percentile), so magnitudes compare while stepping.\n"
                        "Per matrix: every map uses its own largest |value|.");
    if (v.mlp() && v.config.ttt()) {
      widgets::row("Layer");
      ImGui::RadioButton("W₁", &m_settings.layer, 0);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("W₁: d × 4d, the first layer (key kₜ)");
      ImGui::SameLine();
      ImGui::RadioButton("W₂", &m_settings.layer, 1);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("W₂: 4d × d, the second layer (key x₂ = GELU(z₁))");
    } else if (v.mlp()) {
      // Titans: the memory M and the momentum S; LaCT: W₀ and W₁ of its SwiGLU (member_step_text).
      widgets::row("Matrix");
      ImGui::RadioButton(widgets::state_matrix_name(v.config, true, 0).c_str(), &m_settings.layer, 0);
      ImGui::SameLine();
      ImGui::RadioButton(widgets::state_matrix_name(v.config, true, 1).c_str(), &m_settings.layer, 1);
    }
    }

    ImGui::Dummy(ImVec2(0, 6));
    if (!v.config.ttt())
      widgets::note("The member's own inner loop runs one token at a time, in double precision, on the toy "
                    "head's keys and values.");
    else if (v.config.toy())
      widgets::note("Toy head: q, k and v come from a fixed random byte embedding and random projections drawn "
                    "from the seed, so a byte always has the same key and value. The inner loop is the engine's "
                    "own primal form, run one token at a time.");
    else
      widgets::note("Trained model: the layer reads what the model feeds it (the embedding and the blocks "
                    "before), and k, v, q, η and W₀ are the layer's own (its projections, convolutions, "
                    "rotary positions and learned gate). The inner loop is the engine's own primal form, one "
                    "token per step, in double precision.");
    if (v.computed() > 0) {
      ImGui::PushFont(fonts().small);
      ImGui::TextDisabled("engine: %.1f µs per primal step", v.compute_us_per_token);
      ImGui::PopFont();
    }
  }

  void transport(const StepperView& v, CommandSink& sink) {
    const auto go = [&](StepperOp op, long token = 0) { sink.post(StepperTransport{op, token}); };
    struct Button {
      const char* glyph;  // nullptr: play / pause, whose glyph follows the playback
      const char* tooltip;
      StepperOp op;
    };
    static constexpr Button kButtons[] = {
        {"\xE2\x87\xA4", "Before the first token (Home)", StepperOp::ToStart},
        {"\xC2\xAB", "Previous mini-batch (Shift+←)", StepperOp::PrevMiniBatch},
        {"\xE2\x80\xB9", "One token back (←)", StepperOp::StepBack},
        {nullptr, nullptr, StepperOp::TogglePlay},
        {"\xE2\x80\xBA", "One token forward (→)", StepperOp::StepForward},
        {"\xC2\xBB", "To the end of the mini-batch (Shift+→)", StepperOp::NextMiniBatch},
        {"\xE2\x87\xA5", "The last token (End)", StepperOp::ToEnd}};
    for (std::size_t i = 0; i < std::size(kButtons); ++i) {
      const Button& b = kButtons[i];
      const bool clicked =
          b.glyph ? widgets::icon_button(b.glyph, b.tooltip)
                  : widgets::icon_button(v.playing ? "\xE2\x85\xA1" : "\xE2\x96\xB6",
                                         v.playing ? "Pause (Space)" : "Play (Space)", v.playing);
      if (clicked) go(b.op);
      ImGui::SameLine(0, i + 1 < std::size(kButtons) ? 4.0f : 14.0f);  // a wider gap before the timeline
    }

    // The timeline: one segment per mini-batch, the computed part filled, the cursor as a handle.
    const float h = ImGui::GetFrameHeight();
    const float w = ImGui::GetContentRegionAvail().x - ImGui::GetFontSize() * 9.5f;
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("##timeline", ImVec2(std::max(w, 50.0f), h));
    const long T = v.tokens();
    const int b = std::max(1, v.mini_batch());
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float y0 = p.y + h * 0.35f, y1 = p.y + h * 0.65f;
    const auto X = [&](double t) { return p.x + static_cast<float>(t / std::max(1L, T)) * w; };
    dl->AddRectFilled(ImVec2(p.x, y0), ImVec2(p.x + w, y1), colors::kTrack, 3.0f);
    dl->AddRectFilled(ImVec2(p.x, y0), ImVec2(X(static_cast<double>(v.computed())), y1), colors::kTrackFill, 3.0f);
    for (long s = b; s < T; s += b) {
      const float x = std::round(X(static_cast<double>(s))) + 0.5f;
      dl->AddLine(ImVec2(x, y0 - 3), ImVec2(x, y1 + 3), colors::kMarker);
    }
    if (v.cursor >= 0) {
      const float x = X(v.cursor + 0.5);
      dl->AddCircleFilled(ImVec2(x, (y0 + y1) * 0.5f), h * 0.32f, colors::kCursor);
    }
    if (ImGui::IsItemActive() && ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
      const float u = std::clamp((ImGui::GetIO().MousePos.x - p.x) / w, 0.0f, 1.0f);
      const long t = std::min(T - 1, static_cast<long>(u * static_cast<float>(T)));
      if (t != v.cursor) go(StepperOp::Seek, t);
    }
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Drag to scrub through the tokens");
    ImGui::SameLine(0, 10);
    ImGui::AlignTextToFramePadding();
    if (v.cursor >= 0)
      ImGui::Text("token %ld / %ld", v.cursor, T - 1);
    else
      ImGui::TextDisabled("before token 0");
  }

  void draw_view(const StepperView& v, const Snapshot& snap, CommandSink& sink) override {
    const Fonts& f = fonts();
    char explanation[256];
    std::snprintf(explanation, sizeof explanation, "Each token is one gradient step on %s, %s, primal form.",
                  v.config.member_loss().c_str(), v.config.member_name().c_str());
    widgets::panel_title("Inner-loop stepper", explanation);
    if (!v.description.empty()) {
      ImGui::PushFont(f.small);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kAccent), "%s", v.description.c_str());
      ImGui::SameLine(0, 10);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "%s · d = %d, b = %d, T = %ld",
                         v.config.member_name().c_str(), v.d, v.mini_batch(), v.tokens());
      ImGui::PopFont();
      if (!v.config.toy()) widgets::follow_line(v.model_step, v.reloads);
    }
    widgets::cpu_only_line(snap, "one head, one token at a time, as you watch: work too small and too sequential "
                                 "to gain from a GPU.");

    if (!v.error.empty()) {
      ImGui::Dummy(ImVec2(0, 8));
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(colors::kError));
      ImGui::TextWrapped("These settings cannot run: %s", v.error.c_str());
      ImGui::PopStyleColor();
      if (!v.config.toy() && v.config.ttt())
        widgets::note("Choose another model on the left (an untrained one, or a checkpoint you open), or the toy "
                      "head: every view works with each of them.");
      return;
    }
    widgets::warning(v.warning);

    transport(v, sink);
    ImGui::Dummy(ImVec2(0, 2));
    if (const long t = widgets::token_strip(v.bytes, v.mini_batch(), v.cursor, v.computed(),
                                            3.0f * (f.mono->FontSize + 10.0f));
        t >= 0)
      sink.post(StepperTransport{StepperOp::Seek, t});
    eta_strip(v, sink);
    ImGui::Dummy(ImVec2(0, 2));
    step_summary(v);
    ImGui::Dummy(ImVec2(0, 4));
    anatomy(v);
    ImGui::Dummy(ImVec2(0, 6));
    plots(v, sink);
    ImGui::Dummy(ImVec2(0, 6));
    film_strip(v);
  }

  // ηₜ for every token as one row: the token-index scale τᵢ = 1/i makes a sawtooth that restarts at
  // every mini-batch; the learned gate makes it token-dependent.
  void eta_strip(const StepperView& v, CommandSink& sink) {
    if (!v.eta || v.eta->empty()) return;
    const Fonts& f = fonts();
    const char* label = v.config.ttt() ? "ηₜ = τᵢλₜ" : member_matrix(v) ? "βₜ (step)" : "η (step)";
    const float label_w = ImGui::CalcTextSize("ηₜ = τᵢλₜ").x + 10.0f;
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddText(f.regular, f.regular->FontSize, ImVec2(p.x, p.y + 1.0f), colors::kTextDim,
                                        label);
    ImGui::SetCursorScreenPos(ImVec2(p.x + label_w, p.y));
    plot::Heatmap h;
    h.id = "eta";
    h.export_name = "eta_per_token";
    h.m = plot::MatrixView::of(v.eta->data(), 1, static_cast<long>(v.eta->size()), static_cast<long>(v.eta->size()));
    h.palette = plot::Palette::Sequential;
    h.square = false;
    h.size = ImVec2(ImGui::GetContentRegionAvail().x, f.regular->FontSize + 4.0f);
    h.max_cell = 40.0f;
    h.show_values = false;
    h.colorbar = false;  // one row: the value is in the tooltip; dark = small, light = large
    h.row_name = "";
    h.col_name = "token";
    h.col_label = [&v](long t) { return widgets::quoted_token(v.bytes, t); };
    for (long s = v.mini_batch(); s < v.tokens(); s += v.mini_batch()) h.col_lines.push_back(s);
    h.highlight_col = v.cursor;
    const int b = v.mini_batch();
    h.tooltip = [&v, b](long, long t, double val) {
      if (!v.config.ttt()) {
        ImGui::TextDisabled("step size %s", format_value(val, 3).c_str());
        ImGui::TextDisabled("click to go to this token");
        return;
      }
      ImGui::TextDisabled("position %ld of its mini-batch: τ = %s, λ = %s", t % b + 1,
                          v.computed() > t ? format_value(v.records[static_cast<std::size_t>(t)]->tau, 3).c_str() : "…",
                          v.computed() > t ? format_value(v.records[static_cast<std::size_t>(t)]->lambda, 3).c_str()
                                           : "…");
      ImGui::TextDisabled("click to go to this token");
    };
    if (const auto r = plot::heatmap(h); r.clicked && r.col >= 0) sink.post(StepperTransport{StepperOp::Seek, r.col});
  }

  void step_summary(const StepperView& v) {
    const Fonts& f = fonts();
    const long t = v.cursor;
    if (t < 0) {
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim),
                         "No token consumed yet: W = W₀. Press → to take the first step, Space to play.");
      ImGui::Dummy(ImVec2(0, f.small->FontSize));
      return;
    }
    const TokenRecord& r = *v.records[static_cast<std::size_t>(t)];
    const int b = v.mini_batch();
    // Each read-out goes on the line while it fits, else on the next: nothing is cut at the view's edge.
    const auto dim = ImGui::ColorConvertU32ToFloat4(colors::kTextDim);
    ImGui::PushFont(f.bold);
    ImGui::Text("t = %ld  %s", t, widgets::quoted_token(v.bytes, t).c_str());
    ImGui::PopFont();
    char text[160];
    const bool ttt = v.config.ttt();
    if (ttt) {
      std::snprintf(text, sizeof text, "mini-batch %ld, position %d of %d", r.mini_batch_index, r.pos + 1, b);
      widgets::same_line_if_fits(text, 16);
      ImGui::TextUnformatted(text);
      std::snprintf(text, sizeof text, "λₜ = %s", format_value(r.lambda, 3).c_str());
      widgets::same_line_if_fits(text, 16);
      ImGui::TextColored(dim, "%s", text);
      std::snprintf(text, sizeof text, "τ%s = %s", subscript(r.pos + 1).c_str(), format_value(r.tau, 3).c_str());
      widgets::same_line_if_fits(text, 12);
      ImGui::TextColored(dim, "%s", text);
      std::snprintf(text, sizeof text, "ηₜ = τλ = %s", format_value(r.tau * r.lambda, 3).c_str());
      widgets::same_line_if_fits(text, 12);
      ImGui::TextUnformatted(text);
    } else {
      if (b > 1) {
        std::snprintf(text, sizeof text, "%s %ld, position %d of %d",
                      v.config.member_id() == "lact" ? "chunk" : "mini-batch", r.mini_batch_index, r.pos + 1, b);
        widgets::same_line_if_fits(text, 16);
        ImGui::TextUnformatted(text);
      }
      std::snprintf(text, sizeof text, "%s = %s", member_matrix(v) ? "βₜ" : "η", format_value(r.lambda, 3).c_str());
      widgets::same_line_if_fits(text, 16);
      ImGui::TextUnformatted(text);
      if (r.alpha != 1.0) {
        std::snprintf(text, sizeof text, "αₜ = %s", format_value(r.alpha, 4).c_str());
        widgets::same_line_if_fits(text, 12);
        ImGui::TextColored(dim, "%s", text);
      }
    }
    // The two losses and the change stay together.
    const double drop = r.loss_before != 0 ? (r.loss_after - r.loss_before) / std::abs(r.loss_before) : 0.0;
    const std::string before = "ℓ(Wₜ₋₁) " + format_value(r.loss_before, 3);
    const std::string after = "ℓ(Wₜ) " + format_value(r.loss_after, 3);
    char change[32];
    std::snprintf(change, sizeof change, "(%+.1f %%)", 100.0 * drop);
    widgets::same_line_if_fits((before + "  →  " + after + "  " + change).c_str(), 20);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kLossBefore), "%s", before.c_str());
    ImGui::SameLine(0, 6);
    ImGui::TextUnformatted("→");
    ImGui::SameLine(0, 6);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kLossAfter), "%s", after.c_str());
    ImGui::SameLine(0, 6);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(drop <= 0 ? colors::kGood : colors::kWarning), "%s", change);
    ImGui::PushFont(f.small);
    ImGui::PushTextWrapPos(0.0f);
    const long start = r.mini_batch_index * b;
    if (!ttt)
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "%s", member_step_text(v).c_str());
    else if (r.commits)
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kAccent),
                         "Last token of its mini-batch: the state is committed here, and the next token's "
                         "gradient will be taken at this Wₜ.");
    else
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim),
                         "∇ℓₜ is taken at the W from the start of this mini-batch (after token %ld), not at Wₜ₋₁; "
                         "Wₜ = W_start − τᵢ · Σ λ kᵀ∇ℓ over this mini-batch's tokens so far.",
                         start - 1);
    ImGui::PopTextWrapPos();
    ImGui::PopFont();
  }

  // The update taken apart: [k, ∇ℓ, kᵀ∇ℓ]   W_{t−1} + ΔW = W_t.
  void anatomy(const StepperView& v) {
    const Fonts& f = fonts();
    const long t = v.cursor;
    const bool mlp = v.mlp();
    const bool l2 = mlp && m_settings.layer == 1;
    const TokenRecord* r = t >= 0 ? v.records[static_cast<std::size_t>(t)].get() : nullptr;
    const auto pick = [&](const InnerWeights<double>& w) -> const Mat<double>& { return l2 ? w.W2 : w.W1; };
    const Mat<double>& w_prev = pick(v.weights_before(std::max(0L, t)));
    const Mat<double>& w_now = r ? pick(r->w_after) : pick(*v.w0);

    // Colour ranges.
    // "Fixed over the run": the 95th percentile of the per-token largest magnitudes, so one
    // outlier token (e.g. the first step from W₀ = 0) does not wash out every other picture; the
    // few larger values saturate.
    double lim_w = 0, lim_d = 0, lim_o = 0;
    if (m_settings.colours == ColourScale::FixedOverRun && !v.records.empty()) {
      std::vector<double> w, d, o;
      for (const auto& rec : v.records) {
        w.push_back(l2 ? rec->w2_absmax : rec->w_absmax);
        d.push_back(l2 ? rec->delta2_absmax : rec->delta_absmax);
        o.push_back(l2 ? rec->outer2_absmax : rec->outer_absmax);
      }
      w.push_back(plot::max_abs(view_of(pick(*v.w0))));
      lim_w = robust_max(w);
      lim_d = robust_max(d);
      lim_o = robust_max(o);
    } else if (m_settings.colours == ColourScale::SharedPerToken) {
      lim_w = std::max(plot::max_abs(view_of(w_prev)), plot::max_abs(view_of(w_now)));
    }

    const float avail = ImGui::GetContentRegionAvail().x;
    const float op_w = 26.0f;
    const float block_w = (avail - 3.0f * op_w - 24.0f) / 4.0f;
    // The blocks are as tall as their maps: square cells sized by the width, up to 250 px (wide
    // TTT-MLP matrices give short blocks, and the plots below move up).
    const float head_h = f.bold->FontSize + f.small->FontSize + 6.0f;
    const float est_cell = std::min((block_w - 64.0f) / static_cast<float>(w_now.cols()), 26.0f);
    const float block_h =
        std::clamp(head_h + est_cell * static_cast<float>(w_now.rows()) + 6.0f, head_h + 70.0f, 250.0f);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const std::string wname = v.config.ttt() ? (l2 ? "W₂" : (mlp ? "W₁" : "W"))
                                             : widgets::state_matrix_name(v.config, mlp, l2 ? 1 : 0);
    const std::string shape = "[" + std::to_string(w_now.rows()) + " × " + std::to_string(w_now.cols()) + "]";

    // Block 1: the rank-1 gradient term, drawn like a multiplication table.
    {
      const std::string key_name = l2 ? "x₂" : "kₜ";
      const std::string grad_name = member_matrix(v) ? "∂ℓₜ/∂(kₜS)" : l2 ? "∂ℓₜ/∂z₂" : (mlp ? "∂ℓₜ/∂z₁" : "∇ℓₜ");
      const std::string title = key_name + "ᵀ " + grad_name;
      dl->AddText(f.bold, f.bold->FontSize, origin, colors::kText, title.c_str());
      dl->AddText(f.small, f.small->FontSize, ImVec2(origin.x, origin.y + f.bold->FontSize + 1), colors::kTextDim,
                  widgets::fit("this token's gradient term", "gradient term", block_w, f.small).c_str());
      const float head = f.bold->FontSize + f.small->FontSize + 6.0f;
      const long rows = w_now.rows(), cols = w_now.cols();
      const float bar = 58.0f;
      float cell = std::min({(block_w - bar - 14.0f) / static_cast<float>(cols + 1),
                             (block_h - head - 10.0f) / static_cast<float>(rows + 1), 24.0f});
      cell = std::max(cell, 1.0f);
      const float gap = 5.0f;
      const ImVec2 grid(origin.x + cell + gap, origin.y + head + cell + gap);
      if (r && (l2 ? r->x2.size() == 0 : r->k.size() == 0)) {
        // No row factors (an MLP member's W₂): the gradient matrix alone.
        plot::Heatmap o;
        o.id = "outer";
        o.export_name = "outer_product";
        o.m = view_of(l2 ? r->outer2 : r->outer1);
        o.limit = lim_o;
        o.show_range = false;
        o.size = ImVec2(block_w, block_h - head);
        o.row_name = "i";
        o.col_name = "j";
        ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + head));
        plot::heatmap(o);
      } else if (r) {
        const RowVec<double>& key = l2 ? r->x2 : r->k;
        const RowVec<double>& grad = l2 ? r->grad_z2 : r->grad_z;
        const Mat<double>& outer = l2 ? r->outer2 : r->outer1;
        plot::Heatmap g;
        g.id = "grad";
        g.export_name = "grad";
        g.m = view_of(grad, false);
        g.size = ImVec2(cell * static_cast<float>(cols) + 1, cell + 1);
        g.colorbar = false;
        g.show_values = false;
        g.show_range = false;
        g.row_name = "";
        g.col_name = "j";
        g.tooltip = [&](long, long j, double val) {
          ImGui::TextDisabled("%s[%ld] = ∂ℓₜ/∂z[%ld] = %s", grad_name.c_str(), j, j, format_value(val, 5).c_str());
        };
        ImGui::SetCursorScreenPos(ImVec2(grid.x, origin.y + head));
        plot::heatmap(g);
        plot::Heatmap k = g;
        k.id = "key";
        k.export_name = "key";
        k.m = view_of(key, true);
        k.size = ImVec2(cell + 1, cell * static_cast<float>(rows) + 1);
        k.row_name = "i";
        k.col_name = "";
        k.tooltip = [&](long i, long, double val) {
          ImGui::TextDisabled("%s[%ld] = %s", key_name.c_str(), i, format_value(val, 5).c_str());
        };
        ImGui::SetCursorScreenPos(ImVec2(origin.x, grid.y));
        plot::heatmap(k);
        plot::Heatmap o;
        o.id = "outer";
        o.export_name = "outer_product";
        o.m = view_of(outer);
        o.limit = lim_o;
        o.show_range = false;
        o.size = ImVec2(block_w - cell - gap, cell * static_cast<float>(rows) + 2);
        o.max_cell = cell;
        o.row_name = "i";
        o.col_name = "j";
        const double eta = r->tau * r->lambda;
        const char* rate = v.config.ttt() ? "ηₜ" : member_matrix(v) ? "βₜ" : "η";
        o.tooltip = [&, eta, rate](long i, long j, double val) {
          ImGui::Text("%s[%ld] · %s[%ld] = %s · %s", key_name.c_str(), i, grad_name.c_str(), j,
                      format_value(key(i), 4).c_str(), format_value(grad(j), 4).c_str());
          ImGui::TextDisabled("scaled by −%s = −%s: %s", rate, format_value(eta, 3).c_str(),
                              format_value(-eta * val, 4).c_str());
        };
        ImGui::SetCursorScreenPos(grid);
        plot::heatmap(o);
      } else {
        plot::text_at(dl, f.small, ImVec2(origin.x + block_w * 0.5f, origin.y + block_h * 0.5f), 0.5f, 0.5f,
                      colors::kTextFaint, "— no token yet —");
      }
    }

    const auto op = [&](float x, const char* glyph) {
      plot::text_at(dl, f.large, ImVec2(x + op_w * 0.5f, origin.y + block_h * 0.5f), 0.5f, 0.5f, colors::kTextDim,
                    glyph);
    };
    const auto mat_block = [&](const char* id, const std::string& title, const std::string& sub,
                               const Mat<double>* m, double limit, const std::string& export_name) {
      plot::Heatmap h;
      h.id = id;
      h.title = title;
      h.subtitle = sub;
      h.export_name = export_name;
      if (m) h.m = view_of(*m);
      h.limit = limit;
      h.size = ImVec2(block_w, block_h);
      h.row_name = "i";
      h.col_name = "j";
      return h;
    };

    // Blocks 2–4: W_{t−1} + ΔW = W_t.
    const float x1 = origin.x + block_w + 24.0f;
    {
      plot::Heatmap h = mat_block("w_prev", wname + "ₜ₋₁",
                                  widgets::fit(shape + "  before this token", "before this token", block_w, f.small),
                                  r ? &w_prev : nullptr,
                                  lim_w, "W_prev");
      ImGui::SetCursorScreenPos(ImVec2(x1, origin.y));
      plot::heatmap(h);
    }
    op(x1 + block_w, "+");
    const float x2 = x1 + block_w + op_w;
    {
      plot::Heatmap h = mat_block("delta", "Δ" + wname + " = " + wname + "ₜ − " + wname + "ₜ₋₁", "the change",
                                  r ? (l2 ? &r->delta.W2 : &r->delta.W1) : nullptr, lim_d, "delta_W");
      if (r) {
        const double eta = r->tau * r->lambda;
        const Mat<double>& outer = l2 ? r->outer2 : r->outer1;
        const int pos = r->pos;
        const double alpha = r->alpha;
        const bool ttt = v.config.ttt(), matrix = member_matrix(v);
        h.tooltip = [&, eta, pos, alpha, ttt, matrix](long i, long j, double) {
          if (!ttt) {
            ImGui::TextDisabled("this token's gradient term −%s·(∇ℓ)[%ld,%ld] = %s", matrix ? "βₜ" : "η", i, j,
                                format_value(-eta * outer(i, j), 4).c_str());
            if (alpha != 1.0)
              ImGui::TextDisabled("and the decay (αₜ − 1)·%sₜ₋₁[%ld,%ld] = %s", wname.c_str(), i, j,
                                  format_value((alpha - 1.0) * w_prev(i, j), 4).c_str());
            if (!matrix) ImGui::TextDisabled("(momentum, weight decay and the mini-batch or chunk also move W)");
            return;
          }
          ImGui::TextDisabled("this token's own term −ηₜ·(kᵀ∇ℓ)[%ld,%ld] = %s", i, j,
                              format_value(-eta * outer(i, j), 4).c_str());
          if (pos > 0) ImGui::TextDisabled("the rest: τ changes from 1/%d to 1/%d on the earlier terms", pos, pos + 1);
        };
      }
      ImGui::SetCursorScreenPos(ImVec2(x2, origin.y));
      plot::heatmap(h);
    }
    op(x2 + block_w, "=");
    const float x3 = x2 + block_w + op_w;
    {
      plot::Heatmap h = mat_block("w_now", r ? wname + "ₜ" : wname + "₀",
                                  r ? widgets::fit(shape + "  after this token", "after this token", block_w, f.small) : shape,
                                  &w_now, lim_w, "W_t");
      ImGui::SetCursorScreenPos(ImVec2(x3, origin.y));
      plot::heatmap(h);
    }
    ImGui::SetCursorScreenPos(origin);
    ImGui::Dummy(ImVec2(avail, block_h + 4.0f));
  }

  void plots(const StepperView& v, CommandSink& sink) {
    const long n = v.computed();
    std::vector<double> l0(static_cast<std::size_t>(n)), lb(static_cast<std::size_t>(n)),
        la(static_cast<std::size_t>(n)), wn(static_cast<std::size_t>(n)), dn(static_cast<std::size_t>(n));
    for (long t = 0; t < n; ++t) {
      const TokenRecord& r = *v.records[static_cast<std::size_t>(t)];
      l0[static_cast<std::size_t>(t)] = r.loss_initial;
      lb[static_cast<std::size_t>(t)] = r.loss_before;
      la[static_cast<std::size_t>(t)] = r.loss_after;
      wn[static_cast<std::size_t>(t)] = r.w_norm;
      dn[static_cast<std::size_t>(t)] = r.dw_norm;
    }
    const long T = v.tokens();
    const int b = v.mini_batch();
    std::vector<plot::VLine> marks;
    for (long s = b; s < T; s += b) marks.push_back({s - 0.5, colors::kMarker, true});
    const auto fmt = [&v](double x) {
      const long t = std::lround(x);
      return "t = " + std::to_string(t) + "  " + widgets::quoted_token(v.bytes, t);
    };

    const float avail = ImGui::GetContentRegionAvail().x;
    const float h = std::clamp(ImGui::GetContentRegionAvail().y - 124.0f, 170.0f, 330.0f);
    plot::LinePlot lp;
    lp.id = "losses";
    lp.export_name = "inner_losses";
    lp.title = "Inner losses per token";
    const std::string loss = v.config.member_loss();
    lp.y_label = v.config.ttt()
                     ? widgets::fit("½‖f(kₜ; W) − vₜ‖² at W₀ (no learning), before and after token t's step · "
                                    "dashed: mini-batch ends · drag to scrub",
                                    "½‖f(kₜ; W) − vₜ‖² · dashed: mini-batch ends", avail * 0.64f, fonts().small)
                     : widgets::fit(v.config.member_name() + ": " + loss +
                                        " at the start state, before and after token t's step · drag to scrub",
                                    v.config.member_name() + ": " + loss, avail * 0.64f, fonts().small);
    lp.x_label = "token t";
    lp.size = ImVec2(avail * 0.64f, h);
    lp.x_range = plot::Range{-0.5, std::max(1.0, static_cast<double>(T) - 0.5)};
    lp.y_scale = m_settings.log_losses ? plot::ScaleKind::Log10 : plot::ScaleKind::Linear;
    lp.smoothing = m_settings.smoothing;
    lp.markers = marks;
    if (v.cursor >= 0) lp.cursor = static_cast<double>(v.cursor);
    lp.x_format = fmt;
    const std::string w = member_matrix(v) ? "S" : "W";
    lp.series.push_back(plot::line("ℓ(" + w + "₀; xₜ)", l0, colors::kLossInitial, true, 0, 1));
    lp.series.push_back(plot::line("ℓ(" + w + "ₜ₋₁; xₜ)", lb, colors::kLossBefore, true, 0, 1));
    lp.series.push_back(plot::line("ℓ(" + w + "ₜ; xₜ)", la, colors::kLossAfter, true, 0, 1));
    const auto res = plot::line_plot(lp);
    if (res.drag_x) {
      const long t = std::clamp(std::lround(*res.drag_x), 0L, T - 1);
      if (t != v.cursor) sink.post(StepperTransport{StepperOp::Seek, t});
    }
    ImGui::SameLine(0, 14);
    plot::LinePlot np = plot::titled("norms", "weight_norms", "Size of the state",
                                      "Frobenius norms (log scale)",
                                      "token t", ImVec2(ImGui::GetContentRegionAvail().x, h));
    np.x_range = lp.x_range;
    np.y_scale = plot::ScaleKind::Log10;
    np.markers = marks;
    np.cursor = lp.cursor;
    np.x_format = fmt;
    const bool mlp = v.mlp();
    np.series.push_back(plot::line(mlp ? "‖W₁,ₜ‖" : "‖" + w + "ₜ‖", wn, colors::kNormW, false));
    np.series.push_back(plot::line(mlp ? "‖ΔW₁,ₜ‖" : "‖Δ" + w + "ₜ‖", dn, colors::kNormDW, false));
    const auto res2 = plot::line_plot(np);
    if (res2.drag_x) {
      const long t = std::clamp(std::lround(*res2.drag_x), 0L, T - 1);
      if (t != v.cursor) sink.post(StepperTransport{StepperOp::Seek, t});
    }
  }

  // ΔW of every token of the current mini-batch so far, on one colour scale.
  void film_strip(const StepperView& v) {
    const long t = v.cursor;
    const int b = v.mini_batch();
    if (t < 0) return;
    // A member with one step per token: the last tokens instead of a mini-batch.
    const bool per_token = !v.config.ttt() && b == 1;
    const long start = per_token ? 0 : t / b * b;
    const long first = std::max(start, t - 23);
    const bool l2 = v.mlp() && m_settings.layer == 1;
    double lim = 0;
    for (long s = first; s <= t; ++s) {
      const TokenRecord& r = *v.records[static_cast<std::size_t>(s)];
      lim = std::max(lim, l2 ? r.delta2_absmax : r.delta_absmax);
    }
    ImGui::PushFont(fonts().bold);
    ImGui::TextUnformatted(per_token ? (member_matrix(v) ? "ΔS of each of the last tokens" : "ΔW of each of the last tokens")
                                     : v.config.ttt() || v.config.member_id() != "lact" ? "ΔW of each token in this mini-batch"
                                                                                  : "ΔW of each token in this chunk");
    ImGui::PopFont();
    ImGui::SameLine(0, 10);
    ImGui::PushFont(fonts().small);
    ImGui::AlignTextToFramePadding();
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("one colour scale (±%s); the last is the current token%s", format_value(lim, 3).c_str(),
                        v.config.ttt() && (!v.config.toy() || v.config.token_index)
                            ? "; τᵢ ≈ 1/i: later tokens move W less"
                            : "");
    ImGui::PopTextWrapPos();
    ImGui::PopFont();
    const Mat<double>& shape = l2 ? v.records[static_cast<std::size_t>(t)]->delta.W2
                                  : v.records[static_cast<std::size_t>(t)]->delta.W1;
    const float aspect = static_cast<float>(shape.rows()) / static_cast<float>(std::max<Eigen::Index>(1, shape.cols()));
    const float room = std::clamp(ImGui::GetContentRegionAvail().y - 22.0f, 40.0f, 76.0f);
    const float cw = aspect >= 1.0f ? room / aspect : std::min(room / aspect, 3.0f * room);
    const float ch = cw * aspect;
    const int count = static_cast<int>(t - first + 1);
    plot::small_multiples(count, 0, ImVec2(cw, ch + 16.0f), ImVec2(8.0f, 4.0f), [&](int i, ImVec2 size) {
      const long s = first + i;
      const TokenRecord& r = *v.records[static_cast<std::size_t>(s)];
      const Mat<double>& d = l2 ? r.delta.W2 : r.delta.W1;
      plot::Heatmap h;
      h.id = "strip";
      h.export_name = "delta_W_t" + std::to_string(s);
      h.m = view_of(d);
      h.limit = lim;
      h.size = ImVec2(size.x, size.y - 16.0f);
      h.square = false;
      h.colorbar = false;
      h.show_values = false;
      h.show_range = false;
      h.row_name = "i";
      h.col_name = "j";
      if (s == t) h.highlight_row = -1;
      const ImVec2 p = ImGui::GetCursorScreenPos();
      plot::heatmap(h);
      const std::string label = std::to_string(s) + " " + widgets::quoted_token(v.bytes, s);
      plot::text_at(ImGui::GetWindowDrawList(), fonts().small, ImVec2(p.x + size.x * 0.5f, p.y + size.y - 14.0f), 0.5f,
                    0.0f, s == t ? colors::kAccent : colors::kTextDim, label.c_str());
    });
  }

  long m_last_cursor = StepperPanelSettings{}.cursor;
  std::string m_text_error;  // why the last text file chosen was refused
};

}  // namespace

std::unique_ptr<Panel> make_inner_stepper_panel() { return std::make_unique<InnerStepperPanel>(); }

}  // namespace tttlab::gui
