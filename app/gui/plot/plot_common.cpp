#include "gui/plot/plot_common.hpp"

#include <cmath>

#include "gui/plot/plot_export.hpp"

namespace tttlab::gui::plot {

ImU32 with_alpha(ImU32 c, float alpha) {
  const auto a = static_cast<ImU32>(((c >> IM_COL32_A_SHIFT) & 0xFF) * alpha);
  return (c & ~IM_COL32_A_MASK) | (a << IM_COL32_A_SHIFT);
}

void dashed_line(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 col, float dash, float gap,
                 float thickness) {
  const float dx = b.x - a.x, dy = b.y - a.y;
  const float len = std::sqrt(dx * dx + dy * dy);
  if (len <= 0.0f) return;
  const float ux = dx / len, uy = dy / len;
  for (float s = 0.0f; s < len; s += dash + gap) {
    const float e = std::min(s + dash, len);
    dl->AddLine(ImVec2(a.x + ux * s, a.y + uy * s), ImVec2(a.x + ux * e, a.y + uy * e), col,
                thickness);
  }
}

ImVec2 text_size(ImFont* font, const char* text) {
  return font->CalcTextSizeA(font->FontSize, FLT_MAX, 0.0f, text);
}

void text_at(ImDrawList* dl, ImFont* font, ImVec2 anchor, float ax, float ay, ImU32 col,
             const char* text) {
  const ImVec2 s = text_size(font, text);
  dl->AddText(font, font->FontSize,
              ImVec2(std::floor(anchor.x - ax * s.x), std::floor(anchor.y - ay * s.y)), col, text);
}

void export_menu(ImGuiID plot, const std::string& stem, const std::function<std::string()>& csv) {
  if (!ImGui::BeginPopupContextItem("##export")) return;
  ImGui::TextDisabled("%s", stem.c_str());
  ImGui::Separator();
  if (ImGui::MenuItem("Save image (PNG)")) exporter().request_png(plot, stem);
  if (csv && ImGui::MenuItem("Save data (CSV)")) exporter().save_text(stem, "csv", csv());
  ImGui::EndPopup();
}

}  // namespace tttlab::gui::plot
