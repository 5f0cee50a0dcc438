#include "gui/panels/widgets.hpp"

#include <algorithm>
#include <cstdio>

#include "gui/engine/toy_head.hpp"
#include "gui/fonts.hpp"
#include "gui/plot/plot_common.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui::widgets {
namespace {

struct Preset {
  const char* name;
  const char* text;
};
// Short texts with different amounts of repetition: the inner loop can only reduce its loss on what
// recurs (a byte maps to the same key and value every time it appears).
const Preset kPresets[] = {
    {"Repeated sentence", "the cat sat on the mat. the cat sat on the mat. the cat sat on the mat."},
    {"Counting", "one two three four five six seven eight nine ten one two three four five six seven "
                 "eight nine ten"},
    {"Alphabet, three times", "abcdefghijklmnopqrstuvwxyz abcdefghijklmnopqrstuvwxyz "
                              "abcdefghijklmnopqrstuvwxyz"},
    {"Pangrams (little repetition)",
     "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs."},
    {"Hamlet", "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer "
               "the slings and arrows of outrageous fortune, or to take arms against a sea of troubles"},
};

int resize_callback(ImGuiInputTextCallbackData* data) {
  if (data->EventFlag == ImGuiInputTextFlags_CallbackResize) {
    auto* s = static_cast<std::string*>(data->UserData);
    s->resize(static_cast<std::size_t>(data->BufTextLen));
    data->Buf = s->data();
  }
  return 0;
}

// Label on the left, control filling the rest of the row.
void row(const char* label, const char* help = nullptr) {
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted(label);
  if (help) {
    ImGui::SameLine(0, 4);
    help_marker(help);
  }
  ImGui::SameLine(ImGui::GetFontSize() * 6.6f);
  ImGui::SetNextItemWidth(-1);
}

}  // namespace

void section_label(const char* text) {
  ImGui::Dummy(ImVec2(0, 2));
  ImGui::PushFont(fonts().small);
  ImGui::PushStyleColor(ImGuiCol_Text, colors::kTextDim);
  ImGui::TextUnformatted(text);
  ImGui::PopStyleColor();
  ImGui::PopFont();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddLine(ImVec2(p.x, p.y - 2), ImVec2(p.x + ImGui::GetContentRegionAvail().x, p.y - 2),
                                      IM_COL32(52, 55, 64, 255));
  ImGui::Dummy(ImVec2(0, 2));
}

void help_marker(const char* text) {
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30.0f);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

void note(const char* text) {
  ImGui::PushFont(fonts().small);
  ImGui::PushStyleColor(ImGuiCol_Text, colors::kTextDim);
  ImGui::TextWrapped("%s", text);
  ImGui::PopStyleColor();
  ImGui::PopFont();
}

void metric(const char* label, const std::string& value, const std::string& caption, ImU32 value_color,
            float width) {
  const Fonts& f = fonts();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float pad = 8.0f;
  const float h = pad * 2 + f.small->FontSize * 2 + f.large->FontSize + 4;
  dl->AddRectFilled(p, ImVec2(p.x + width, p.y + h), IM_COL32(32, 34, 40, 255), 4.0f);
  dl->AddRect(p, ImVec2(p.x + width, p.y + h), IM_COL32(52, 55, 64, 255), 4.0f);
  dl->AddText(f.small, f.small->FontSize, ImVec2(p.x + pad, p.y + pad), colors::kTextDim, label);
  dl->AddText(f.large, f.large->FontSize, ImVec2(p.x + pad, p.y + pad + f.small->FontSize + 1),
              value_color, value.c_str());
  dl->PushClipRect(p, ImVec2(p.x + width - pad, p.y + h), true);
  dl->AddText(f.small, f.small->FontSize,
              ImVec2(p.x + pad, p.y + pad + f.small->FontSize + f.large->FontSize + 3), colors::kTextFaint,
              caption.c_str());
  dl->PopClipRect();
  ImGui::Dummy(ImVec2(width, h));
}

bool icon_button(const char* glyph, const char* tooltip, bool active) {
  if (active) ImGui::PushStyleColor(ImGuiCol_Button, ImVec4(0.25f, 0.40f, 0.65f, 1.0f));
  const float s = ImGui::GetFrameHeight();
  const bool clicked = ImGui::Button(glyph, ImVec2(s * 1.35f, s));
  if (active) ImGui::PopStyleColor();
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tooltip);
  return clicked;
}

bool head_editor(HeadConfig& c, const HeadEditorOptions& opt) {
  bool changed = false;
  const bool lock = opt.lock_reduction;

  section_label("INPUT");
  row("Text");
  int current = -1;
  for (int i = 0; i < static_cast<int>(std::size(kPresets)); ++i)
    if (c.text == kPresets[i].text) current = i;
  if (ImGui::BeginCombo("##preset", current >= 0 ? kPresets[current].name : "Custom text")) {
    for (int i = 0; i < static_cast<int>(std::size(kPresets)); ++i)
      if (ImGui::Selectable(kPresets[i].name, i == current)) {
        c.text = kPresets[i].text;
        changed = true;
      }
    ImGui::EndCombo();
  }
  ImGui::InputTextMultiline("##text", c.text.data(), c.text.capacity() + 1,
                            ImVec2(-1, ImGui::GetTextLineHeight() * 3.6f),
                            ImGuiInputTextFlags_CallbackResize, resize_callback, &c.text);
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  row("Repeat", "The text is repeated this many times. T = bytes × repeat.");
  int rep = c.repeat;
  if (ImGui::SliderInt("##repeat", &rep, 1, 32, "× %d")) c.repeat = std::max(1, rep);
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  ImGui::PushFont(fonts().small);
  const long T = c.tokens();
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(T > opt.limits.max_tokens ? colors::kError : colors::kTextDim),
                     "T = %ld tokens (bytes)%s", T,
                     T > opt.limits.max_tokens ? " — too long for this panel" : "");
  ImGui::PopFont();
  row("Seed", "Draws the byte embedding, the projections W_Q, W_K, W_V, the gate θ and a random W₀.");
  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x - ImGui::GetFrameHeight() * 2.2f);
  std::uint64_t seed = c.seed;
  if (ImGui::InputScalar("##seed", ImGuiDataType_U64, &seed, nullptr, nullptr, "%llu",
                         ImGuiInputTextFlags_EnterReturnsTrue)) {
    c.seed = seed;
    changed = true;
  }
  ImGui::SameLine();
  if (ImGui::Button("Next", ImVec2(-1, 0))) {
    c.seed += 1;
    changed = true;
  }

  section_label("INNER MODEL f");
  ImGui::BeginDisabled(lock);
  row("Model", "TTT-Linear: f(k) = k W + b.  TTT-MLP: f(k) = GELU(k W₁ + b₁) W₂ + b₂ with 4d hidden units.");
  int model = c.model == InnerModel::Linear ? 0 : 1;
  if (ImGui::RadioButton("Linear", &model, 0)) changed = true;
  ImGui::SameLine();
  if (ImGui::RadioButton("MLP", &model, 1)) changed = true;
  c.model = model == 0 ? InnerModel::Linear : InnerModel::MLP;
  ImGui::EndDisabled();
  const int max_d = c.model == InnerModel::Linear ? opt.limits.max_d_linear : opt.limits.max_d_mlp;
  if (c.d > max_d) {
    c.d = max_d;
    changed = true;
  }
  row("d", "Head dimension: k, v, q ∈ ℝᵈ and W ∈ ℝᵈˣᵈ (Linear).");
  ImGui::SliderInt("##d", &c.d, 2, max_d, "%d");
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  ImGui::BeginDisabled(lock);
  row("b", "Inner mini-batch size. All gradients of a mini-batch are taken at the state from its start; "
           "the state is committed after its last token. b = 1 is online GD; b ≥ T is batch GD.");
  ImGui::SliderInt("##b", &c.mini_batch, 1, std::min(opt.limits.max_mini_batch, 256), "%d",
                   ImGuiSliderFlags_Logarithmic);
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  row("η base", "η_base. The learning rate of token t is λ_t = η_base · σ(x_t·θ) / d (learned gate) or "
                "η_base / d (fixed).");
  float eta = static_cast<float>(c.eta_base);
  if (ImGui::SliderFloat("##eta", &eta, 0.01f, 100.0f, "%.3g", ImGuiSliderFlags_Logarithmic))
    c.eta_base = eta;
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  row("Gate", "Learned: λ_t = η_base·σ(x_t·θ)/d depends on the token. Fixed: λ_t = η_base/d.");
  int gate = c.gate == EtaGate::Learned ? 0 : 1;
  if (ImGui::Combo("##gate", &gate, "learned σ(x·θ)\0fixed\0")) {
    c.gate = gate == 0 ? EtaGate::Learned : EtaGate::Fixed;
    changed = true;
  }
  changed |= ImGui::Checkbox("token-index scale τᵢ = 1/i", &c.token_index);
  ImGui::SameLine();
  help_marker("On: token i of a mini-batch applies the MEAN of the λ-weighted gradients of tokens 1..i "
              "(official). Off: τ = 1, the plain sum.");
  changed |= ImGui::Checkbox("LayerNorm", &c.layer_norm);
  ImGui::SameLine();
  changed |= ImGui::Checkbox("residual", &c.residual);
  ImGui::SameLine();
  changed |= ImGui::Checkbox("bias", &c.bias);
  row("W₀", "The inner weights at the start of the sequence (a learned parameter in a real model). Random: "
            "entries N(0, 0.02²), the official initialisation. Zero: every z = kW₀ is constant, its "
            "LayerNorm variance is 0, and the first gradients are scaled by 1/√ε = 1000.");
  int w0 = c.w0 == W0Init::Zero ? 0 : 1;
  if (ImGui::RadioButton("zero", &w0, 0)) changed = true;
  ImGui::SameLine();
  if (ImGui::RadioButton("random", &w0, 1)) changed = true;
  c.w0 = w0 == 0 ? W0Init::Zero : W0Init::Random;
  ImGui::EndDisabled();
  return changed;
}

long token_strip(const std::vector<unsigned char>& bytes, int mini_batch, long cursor, long computed,
                 float max_height) {
  const Fonts& f = fonts();
  long clicked = -1;
  const float cell_h = f.mono->FontSize + 8.0f;
  const float cell_w = f.mono->FontSize * 0.62f + 8.0f;
  const float gap = 3.0f;  // between mini-batches
  const float avail = ImGui::GetContentRegionAvail().x;
  // Wrap at mini-batch boundaries when a whole mini-batch fits on a line.
  const long n = static_cast<long>(bytes.size());
  int lines = 1;
  {
    float x = 0;
    for (long t = 0; t < n; ++t) {
      const float w = cell_w + (t % mini_batch == mini_batch - 1 ? gap : 0.0f);
      if (x + w > avail && x > 0) {
        ++lines;
        x = 0;
      }
      x += w;
    }
  }
  const float h = std::min(max_height, lines * (cell_h + 2.0f) + 2.0f);
  ImGui::BeginChild("##tokens", ImVec2(0, h), false, lines * (cell_h + 2.0f) > max_height ? 0 : ImGuiWindowFlags_NoScrollbar);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  float x = 0, y = 0;
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const bool hovered_win = ImGui::IsWindowHovered();
  for (long t = 0; t < n; ++t) {
    const bool end_of_mb = t % mini_batch == mini_batch - 1;
    const float w = cell_w + (end_of_mb ? gap : 0.0f);
    if (x + w > avail && x > 0) {
      x = 0;
      y += cell_h + 2.0f;
    }
    const ImVec2 a(o.x + x, o.y + y), b(a.x + cell_w - 1.0f, a.y + cell_h);
    const long mb = t / mini_batch;
    ImU32 bg = mb % 2 ? IM_COL32(44, 48, 58, 255) : IM_COL32(36, 39, 47, 255);
    ImU32 fg = t < computed ? colors::kText : colors::kTextFaint;
    if (t == cursor) {
      bg = IM_COL32(58, 110, 200, 255);
      fg = IM_COL32(255, 255, 255, 255);
    }
    const bool over = hovered_win && mouse.x >= a.x && mouse.x < b.x && mouse.y >= a.y && mouse.y < b.y;
    if (over) bg = t == cursor ? bg : IM_COL32(70, 78, 95, 255);
    dl->AddRectFilled(a, b, bg, 2.0f);
    std::string label = token_label(bytes[static_cast<std::size_t>(t)]);
    if (label.size() > 3 && label[0] == '0') label = "\xC2\xB7";  // non-ASCII byte: a middle dot
    plot::text_at(dl, f.mono, ImVec2((a.x + b.x) * 0.5f, (a.y + b.y) * 0.5f), 0.5f, 0.5f, fg, label.c_str());
    if (over) {
      ImGui::BeginTooltip();
      ImGui::Text("token %ld  '%s'  (byte %u)", t, token_label(bytes[static_cast<std::size_t>(t)]).c_str(),
                  static_cast<unsigned>(bytes[static_cast<std::size_t>(t)]));
      ImGui::TextDisabled("mini-batch %ld, position %ld of %d — click to go there", mb, t % mini_batch + 1,
                          mini_batch);
      ImGui::EndTooltip();
      if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) clicked = t;
    }
    x += w;
  }
  ImGui::Dummy(ImVec2(avail, y + cell_h));
  ImGui::EndChild();
  return clicked;
}

}  // namespace tttlab::gui::widgets
