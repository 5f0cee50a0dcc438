// app/gui/plot/plot_common.hpp — drawing helpers shared by the plot types (ImDrawList based).
// UI thread only.
#pragma once

#include <imgui.h>

#include <functional>
#include <string>

namespace tttlab::gui::plot {

ImU32 with_alpha(ImU32 c, float alpha);
void dashed_line(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 col, float dash, float gap,
                 float thickness = 1.0f);
// Draws `text` so that `anchor` sits at fraction (ax, ay) of its box (0,0 top-left; 1,1 bottom-right).
void text_at(ImDrawList* dl, ImFont* font, ImVec2 anchor, float ax, float ay, ImU32 col,
             const char* text);
ImVec2 text_size(ImFont* font, const char* text);

// The right-click menu of a plot: "Save image (PNG)" and "Save data (CSV)". Call right after the
// plot's interaction item. `csv` builds the file content on demand.
void export_menu(ImGuiID plot, const std::string& stem, const std::function<std::string()>& csv);

}  // namespace tttlab::gui::plot
