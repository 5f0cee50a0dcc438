// Panel 8 — Generation: a model writes text byte by byte from a prompt (temperature, top-k), and each
// byte's update of the TTT hidden states is visible as it is decoded: every byte is tinted by how much
// it changed W in the chosen block and head, hovering shows the sampling distribution and the size of
// the update in every block and head, and the selected byte's ΔW is drawn as a heat-map.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "lab/engine/head_inputs.hpp"
#include "gui/fonts.hpp"
#include "gui/keys.hpp"
#include "gui/panels/feature_panel.hpp"
#include "gui/panels/widgets.hpp"
#include "lab/plot/colormap.hpp"
#include "gui/plot/heatmap.hpp"
#include "gui/plot/line_plot.hpp"
#include "gui/plot/plot_common.hpp"
#include "lab/plot/ticks.hpp"
#include "lab/generation/generation_settings.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

using plot::format_value;

std::string byte_text(unsigned char b) {
  if (b == '\n') return "\xE2\x8F\x8E";  // ⏎
  if (b >= 0x20 && b < 0x7F) return std::string(1, static_cast<char>(b));
  return "\xC2\xB7";  // a middle dot for other bytes
}

class GenerationPanel final
    : public FeaturePanel<GenerationPanelSettings, GenerationView, &Snapshot::generation> {
 public:
  GenerationPanel()
      : FeaturePanel(kGenerationId,
                     {{"generation.model", "Generation: the model"},
                      {"generation.sampling", "Generation: temperature, top-k, length, seed, speed"},
                      {"generation.prompt", "Generation: the prompt"}},
                     "generate again (the same seed gives the same text)") {}

  std::vector<ShortcutHelp> shortcut_help() const override {
    std::vector<ShortcutHelp> help = FeaturePanel::shortcut_help();
    help.push_back({"Space", "stop / generate"});
    help.push_back({"→  ←", "select the next / previous byte"});
    return help;
  }
  void shortcuts(const Snapshot& snap, CommandSink& sink) override {
    FeaturePanel::shortcuts(snap, sink);
    const GenerationView* v = snap.generation.get();
    if (key_pressed(Key::Space, false)) {
      if (v && v->running)
        sink.post(GenerateStop{});
      else
        sink.post(GenerateStart{m_settings.gen});
    }
    if (v && !v->tokens.empty()) {
      const long n = static_cast<long>(v->tokens.size());
      long sel = m_selected < 0 ? n - 1 : m_selected;
      if (key_pressed(Key::Right)) m_selected = std::min(sel + 1, n - 1);
      if (key_pressed(Key::Left)) m_selected = std::max(sel - 1, 0L);
    }
  }

 private:
  std::optional<Command> rerun() const override { return GenerateStart{m_settings.gen}; }

  void update(const GenerationView& v) override {
    if (v.generation != m_seen_generation) {
      m_seen_generation = v.generation;
      m_selected = -1;  // follow the newest byte
    }
  }

  void draw_controls(const GenerationView& v, const Snapshot& snap, CommandSink& sink) override {
    const LibraryView* lib = snap.library ? snap.library->models.get() : nullptr;
    GenSettings& g = m_settings.gen;
    if (classroom::visible("generation.model")) {
      widgets::section_label("MODEL");
      widgets::row("Model");
      widgets::model_combo("model", g.model_id, lib, false, &sink);
      widgets::model_summary_line(g.model_id, lib);
    }
    if (classroom::visible("generation.prompt")) {
      widgets::section_label("PROMPT");
      widgets::input_string("##prompt", g.prompt, true, ImGui::GetTextLineHeight() * 4.0f);
    }
    if (classroom::visible("generation.sampling")) {
      widgets::section_label("SAMPLING");
      widgets::row("Temperature", "Divides the logits before the softmax: 0 always takes the most likely byte; 1 "
                                  "samples the model's own distribution; above 1 flattens it.");
      float temp = static_cast<float>(g.temperature);
      if (ImGui::SliderFloat("##temp", &temp, 0.0f, 2.0f, temp == 0.0f ? "greedy" : "%.2f")) g.temperature = temp;
      widgets::row("Top-k", "Sample only among the k most likely bytes (0: all 256).");
      ImGui::SliderInt("##topk", &g.top_k, 0, 256, g.top_k == 0 ? "all" : "%d", ImGuiSliderFlags_Logarithmic);
      widgets::row("Length");
      ImGui::SliderInt("##len", &g.max_tokens, 10, 2000, "%d bytes", ImGuiSliderFlags_Logarithmic);
      widgets::row("Seed", "The sampling seed: the same settings and seed give the same text.");
      std::uint64_t seed = g.seed;
      ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x - ImGui::GetFrameHeight() * 2.2f);
      if (ImGui::InputScalar("##seed", ImGuiDataType_U64, &seed)) g.seed = seed;
      ImGui::SameLine();
      if (ImGui::Button("Next", ImVec2(-1, 0))) ++g.seed;
      widgets::row("Speed", "Bytes per second on screen (the model itself is much faster).");
      float sp = static_cast<float>(g.tokens_per_second);
      if (ImGui::SliderFloat("##speed", &sp, 2.0f, 1000.0f, sp >= 999.0f ? "as fast as possible" : "%.0f bytes/s",
                             ImGuiSliderFlags_Logarithmic))
        g.tokens_per_second = sp >= 999.0f ? 1e6 : sp;
    }
    ImGui::Dummy(ImVec2(0, 4));
    const float bw = (ImGui::GetContentRegionAvail().x - 6.0f) * 0.5f;
    if (ImGui::Button("Generate  (F5)", ImVec2(bw, ImGui::GetFrameHeight() * 1.3f))) sink.post(GenerateStart{g});
    ImGui::SameLine(0, 6);
    ImGui::BeginDisabled(!v.running);
    if (ImGui::Button("Stop", ImVec2(-1, ImGui::GetFrameHeight() * 1.3f))) sink.post(GenerateStop{});
    ImGui::EndDisabled();

    if (v.ttt) {
      widgets::section_label("WHICH HIDDEN STATE");
      widgets::row("Block");
      ImGui::SliderInt("##block", &m_settings.block, 0, std::max(0, v.blocks - 1), "block %d");
      widgets::row("Head");
      ImGui::SliderInt("##head", &m_settings.head, 0, std::max(0, v.heads - 1), "head %d");
      widgets::row("Tint by", "The colour behind each byte: ‖ΔW‖ of the chosen head, or the mean over the block's heads.");
      int tint = m_settings.all_heads ? 0 : 1;
      ImGui::RadioButton("block (mean)", &tint, 0);
      ImGui::SameLine();
      ImGui::RadioButton("head", &tint, 1);
      m_settings.all_heads = tint == 0;
    }
    ImGui::Dummy(ImVec2(0, 6));
    widgets::note("The prompt is read once; then every byte is one streaming step of the model (the primal form, "
                  "as a decoder runs), so each new byte is also one gradient step of every TTT layer's hidden "
                  "state. Bytes the model found surprising tend to move W more.");
  }

  float tint_value(const GenToken& g, const GenerationView& v) const {
    if (g.dw_norm.empty()) return 0.0f;
    const int b = std::min(m_settings.block, v.blocks - 1), h = std::min(m_settings.head, v.heads - 1);
    if (!m_settings.all_heads) return g.dw_norm[static_cast<std::size_t>(b * v.heads + h)];
    float s = 0;
    for (int k = 0; k < v.heads; ++k) s += g.dw_norm[static_cast<std::size_t>(b * v.heads + k)];
    return s / static_cast<float>(v.heads);
  }

  void draw_view(const GenerationView& v, const Snapshot&, CommandSink&) override {
    const Fonts& f = fonts();
    widgets::panel_title("Generation", "Bytes appear as they are decoded; each one is a gradient step of every hidden state.");
    if (!v.error.empty()) {
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kError), "Cannot generate: %s", v.error.c_str());
      ImGui::PopTextWrapPos();
      return;
    }
    long n_prompt = 0;
    for (const auto& t : v.tokens) n_prompt += t->prompt ? 1 : 0;
    const long n = static_cast<long>(v.tokens.size());
    ImGui::PushFont(f.small);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kAccent), "%s", v.model_label.c_str());
    ImGui::SameLine(0, 10);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim),
                       "%ld prompt bytes + %ld generated%s · T %.2f, top-k %s", n_prompt, n - n_prompt,
                       v.running ? " …" : "", v.settings.temperature,
                       v.settings.top_k ? std::to_string(v.settings.top_k).c_str() : "all");
    ImGui::PushTextWrapPos(0.0f);
    if (v.byte_time.repeats > 0)
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim),
                         "Decoding at %.0f bytes/s: %s per byte (engine time; the prompt's prefill not counted)",
                         v.bytes_per_second, format_timing(v.byte_time).c_str());
    ImGui::PopTextWrapPos();
    widgets::device_line(v.device, v.device_note);
    ImGui::PopFont();
    if (n == 0) return;
    const long sel = m_selected < 0 || m_selected >= n ? n - 1 : m_selected;

    // The text, each byte tinted by its ‖ΔW‖ (sequential colour map, shared scale over the text).
    float vmax = 0;
    for (const auto& t : v.tokens) vmax = std::max(vmax, tint_value(*t, v));
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float cw = f.mono->FontSize * 0.62f + 2.0f, ch = f.mono->FontSize + 6.0f;
    // As tall as the text (up to a third of the view), so the plots below get the rest.
    const float pad = ImGui::GetStyle().WindowPadding.y * 2.0f + 4.0f;
    const float inner_w = avail.x - ImGui::GetStyle().WindowPadding.x * 2.0f - ImGui::GetStyle().ScrollbarSize;
    float lines = 1;
    {
      float lx = 0;
      for (long i = 0; i < n; ++i) {
        if (lx + cw > inner_w || (i > 0 && v.tokens[static_cast<std::size_t>(i - 1)]->byte == '\n')) {
          lx = 0;
          ++lines;
        }
        lx += cw;
      }
    }
    const float text_h = std::clamp(lines * ch + pad, 3.0f * ch + pad, std::max(120.0f, avail.y * 0.36f));
    ImGui::BeginChild("##text", ImVec2(0, text_h), true);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float width = ImGui::GetContentRegionAvail().x;
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    float x = 0, y = 0;
    long hovered = -1;
    for (long i = 0; i < n; ++i) {
      const GenToken& g = *v.tokens[static_cast<std::size_t>(i)];
      if (x + cw > width || (i > 0 && v.tokens[static_cast<std::size_t>(i - 1)]->byte == '\n')) {
        x = 0;
        y += ch;
      }
      const ImVec2 a(o.x + x, o.y + y), b(a.x + cw, a.y + ch - 1.0f);
      double u = 0.0;
      if (v.ttt && vmax > 0) {
        u = std::sqrt(tint_value(g, v) / vmax);  // √: small updates stay visible
        dl->AddRectFilled(a, b, plot::sequential_u32(0.15 + 0.85 * u));
      }
      if (i == sel) dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(b.x + 1, b.y + 1), colors::kCursor, 0.0f, 0, 2.0f);
      // Dark letters on the light end of the map, light ones on the dark end; the prompt a little dimmer.
      const bool light_bg = 0.15 + 0.85 * u > 0.62;
      const ImU32 fg = light_bg ? IM_COL32(20, 20, 28, 255) : (g.prompt ? IM_COL32(190, 195, 205, 255) : IM_COL32(255, 255, 255, 255));
      plot::text_at(dl, f.mono, ImVec2((a.x + b.x) * 0.5f, (a.y + b.y) * 0.5f), 0.5f, 0.5f, fg, byte_text(g.byte).c_str());
      if (i == n_prompt && n_prompt > 0)
        dl->AddLine(ImVec2(a.x, a.y), ImVec2(a.x, b.y), colors::kWarning, 2.0f);
      if (ImGui::IsWindowHovered() && mouse.x >= a.x && mouse.x < b.x && mouse.y >= a.y && mouse.y < b.y) hovered = i;
      x += cw;
    }
    ImGui::Dummy(ImVec2(width, y + ch));
    if (v.running && m_selected < 0) ImGui::SetScrollHereY(1.0f);
    ImGui::EndChild();
    if (hovered >= 0) {
      token_tooltip(v, hovered);
      if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) m_selected = hovered;
    }
    ImGui::PushFont(f.small);
    ImGui::PushTextWrapPos(0.0f);  // the whole line at any width: its last words say how to select a byte
    if (v.states_on_gpu)
      ImGui::TextDisabled("Orange bar: the model starts writing. Hover: probabilities. Click or ← →: select.");
    else
      ImGui::TextDisabled("Behind each byte: its ‖ΔW‖ %s (light = large). Orange bar: the model starts writing. "
                          "Hover: probabilities. Click or ← →: select.",
                          m_settings.all_heads ? "(block mean)" : "(chosen head)");
    ImGui::PopTextWrapPos();
    ImGui::PopFont();
    ImGui::Dummy(ImVec2(0, 4));
    if (!v.ttt) {
      widgets::note("This model has no TTT layer: there is no hidden state to watch.");
      return;
    }
    if (v.states_on_gpu) {
      widgets::note("The GPU decodes these bytes and keeps every hidden state on the GPU, so there is no ΔW to "
                    "show here. Choose the CPU in the Compute menu and generate again to watch each byte's "
                    "update of every head.");
      return;
    }
    selected_view(v, sel);
  }

  void token_tooltip(const GenerationView& v, long i) {
    const GenToken& g = *v.tokens[static_cast<std::size_t>(i)];
    ImGui::BeginTooltip();
    ImGui::PushFont(fonts().bold);
    ImGui::Text("byte %ld  '%s'  %s", i, token_label(g.byte).c_str(), g.prompt ? "(prompt)" : "");
    ImGui::PopFont();
    if (!g.prompt) {
      ImGui::Text("sampled with probability %s", format_value(g.prob, 3).c_str());
      for (const auto& [b, p] : g.top) {
        ImGui::Text("%-4s", token_label(b).c_str());
        ImGui::SameLine(ImGui::GetFontSize() * 3.0f);
        ImGui::ProgressBar(p, ImVec2(ImGui::GetFontSize() * 10.0f, 0), format_value(p, 2).c_str());
      }
    }
    if (v.ttt) {
      const int b = std::min(m_settings.block, v.blocks - 1), h = std::min(m_settings.head, v.heads - 1);
      ImGui::TextDisabled("‖ΔW‖ in block %d head %d: %s", b, h,
                          format_value(g.dw_norm[static_cast<std::size_t>(b * v.heads + h)], 3).c_str());
    }
    ImGui::EndTooltip();
  }

  void selected_view(const GenerationView& v, long sel) {
    const Fonts& f = fonts();
    const GenToken& g = *v.tokens[static_cast<std::size_t>(sel)];
    const int b = std::min(m_settings.block, v.blocks - 1), h = std::min(m_settings.head, v.heads - 1);
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float row_h = std::clamp(avail.y * 0.5f, 180.0f, 300.0f);
    const ImVec2 top = ImGui::GetCursorScreenPos();

    // Row 1: ΔW of the selected byte in the chosen block and head, ‖ΔW‖ everywhere, the distribution.
    const Mat<float>& dw = g.dw[static_cast<std::size_t>(b * v.heads + h)];
    plot::Heatmap m;
    m.id = "dw";
    m.export_name = "generation_delta_W";
    m.title = "ΔW of byte " + std::to_string(sel) + " '" + token_label(g.byte) + "'";
    m.subtitle = "block " + std::to_string(b) + ", head " + std::to_string(h) + ", W₁ [" + std::to_string(dw.rows()) +
                 " × " + std::to_string(dw.cols()) + "]";
    if (dw.size()) m.m = plot::MatrixView::of(dw.data(), dw.rows(), dw.cols(), dw.cols());
    const float map_w = std::min(avail.x * 0.3f, row_h + 40.0f);
    m.size = ImVec2(map_w, row_h);
    m.row_name = "i";
    m.col_name = "j";
    plot::heatmap(m);

    ImGui::SetCursorScreenPos(ImVec2(top.x + map_w + 16.0f, top.y));
    m_grid = Mat<double>(v.blocks, v.heads);
    for (int r = 0; r < v.blocks; ++r)
      for (int c = 0; c < v.heads; ++c) m_grid(r, c) = g.dw_norm[static_cast<std::size_t>(r * v.heads + c)];
    plot::Heatmap gm;
    gm.id = "grid";
    gm.export_name = "generation_update_sizes";
    const float grid_w = std::min(avail.x * 0.26f, row_h + 20.0f);
    gm.title = widgets::fit("‖ΔW‖ in every block and head", "‖ΔW‖ of each head", grid_w, f.bold);
    gm.subtitle = "rows: blocks, columns: heads";
    gm.m = plot::MatrixView::of(m_grid.data(), m_grid.rows(), m_grid.cols(), m_grid.cols());
    gm.palette = plot::Palette::Sequential;
    gm.size = ImVec2(grid_w, row_h);
    gm.max_cell = 56.0f;
    gm.row_name = "block";
    gm.col_name = "head";
    gm.highlight_row = b;
    gm.highlight_col = h;
    if (const auto r = plot::heatmap(gm); r.clicked && r.row >= 0) {
      m_settings.block = static_cast<int>(r.row);
      m_settings.head = static_cast<int>(r.col);
    }

    ImGui::SetCursorScreenPos(ImVec2(top.x + map_w + grid_w + 32.0f, top.y));
    ImGui::BeginGroup();
    ImGui::PushFont(f.bold);
    ImGui::TextUnformatted(g.prompt ? "A prompt byte" : "What the model could have written");
    ImGui::PopFont();
    ImGui::PushFont(f.small);
    if (g.prompt) {
      ImGui::TextDisabled("read, not sampled: no distribution");
    } else {
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextDisabled("the most likely bytes after temperature and top-k; drawn: '%s' (p = %s)",
                          token_label(g.byte).c_str(), format_value(g.prob, 3).c_str());
      ImGui::PopTextWrapPos();
      const float bar_w = ImGui::GetContentRegionAvail().x - ImGui::GetFontSize() * 3.0f;
      for (const auto& [byte, p] : g.top) {
        // Only the bars that fit the row: the plot below must not be covered (a short window, a
        // docked lesson). They are sorted, so the ones left out are the least likely.
        if (ImGui::GetCursorScreenPos().y + ImGui::GetFrameHeight() > top.y + row_h) break;
        ImGui::PushFont(f.mono);
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(byte == g.byte ? colors::kAccent : colors::kText), "%-4s",
                           token_label(byte).c_str());
        ImGui::PopFont();
        ImGui::SameLine(ImGui::GetFontSize() * 3.0f);
        if (byte == g.byte) ImGui::PushStyleColor(ImGuiCol_PlotHistogram, ImGui::ColorConvertU32ToFloat4(colors::kAccent));
        ImGui::ProgressBar(p, ImVec2(std::max(60.0f, bar_w), 0), format_value(p, 2).c_str());
        if (byte == g.byte) ImGui::PopStyleColor();
      }
    }
    ImGui::PopFont();
    ImGui::EndGroup();

    // Row 2: ‖ΔW‖ along the text, per block.
    ImGui::SetCursorScreenPos(ImVec2(top.x, top.y + row_h + 10.0f));
    const std::size_t n = v.tokens.size();
    m_lines.assign(static_cast<std::size_t>(v.blocks), std::vector<double>(n));
    for (std::size_t i = 0; i < n; ++i)
      for (int r = 0; r < v.blocks; ++r) {
        double sum = 0;
        for (int c = 0; c < v.heads; ++c) sum += v.tokens[i]->dw_norm[static_cast<std::size_t>(r * v.heads + c)];
        m_lines[static_cast<std::size_t>(r)][i] = sum / v.heads;
      }
    plot::LinePlot p = plot::titled("dw_along", "generation_update_sizes_along_text", "Update size along the text",
                                      "‖ΔW‖ per byte, mean over the heads of each block (log scale) · orange: the model starts writing · drag to select",
                                      "byte", ImVec2(avail.x, std::max(140.0f, ImGui::GetContentRegionAvail().y - 6.0f)));
    p.y_scale = plot::ScaleKind::Log10;
    p.smoothing = 0.6;
    p.cursor = static_cast<double>(sel);
    long n_prompt = 0;
    for (const auto& t : v.tokens) n_prompt += t->prompt ? 1 : 0;
    p.markers.push_back({static_cast<double>(n_prompt) - 0.5, colors::kWarning, false});
    for (int r = 0; r < v.blocks; ++r)
      p.series.push_back(plot::line("block " + std::to_string(r), m_lines[static_cast<std::size_t>(r)],
                                    widgets::series_color(r)));
    p.x_format = [&v](double x) {
      const long i = std::clamp(std::lround(x), 0L, static_cast<long>(v.tokens.size()) - 1);
      return "byte " + std::to_string(i) + " '" + token_label(v.tokens[static_cast<std::size_t>(i)]->byte) + "'";
    };
    if (const auto r = plot::line_plot(p); r.drag_x)
      m_selected = std::clamp(std::lround(*r.drag_x), 0L, static_cast<long>(n) - 1);
  }

  long m_selected = -1;
  std::uint64_t m_seen_generation = 0;
  Mat<double> m_grid;
  std::vector<std::vector<double>> m_lines;
};

}  // namespace

std::unique_ptr<Panel> make_generation_panel() { return std::make_unique<GenerationPanel>(); }

}  // namespace tttlab::gui
