#include "gui/plot/small_multiples.hpp"

#include <algorithm>
#include <cmath>

namespace tttlab::gui::plot {

void small_multiples(int count, int columns, ImVec2 cell, ImVec2 gap,
                     const std::function<void(int, ImVec2)>& draw) {
  if (count <= 0) return;
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  if (columns <= 0)
    columns = std::max(1, static_cast<int>((ImGui::GetContentRegionAvail().x + gap.x) / (cell.x + gap.x)));
  const int rows = (count + columns - 1) / columns;
  for (int i = 0; i < count; ++i) {
    const int r = i / columns, c = i % columns;
    ImGui::SetCursorScreenPos(ImVec2(origin.x + c * (cell.x + gap.x), origin.y + r * (cell.y + gap.y)));
    ImGui::PushID(i);
    draw(i, cell);
    ImGui::PopID();
  }
  ImGui::SetCursorScreenPos(origin);
  ImGui::Dummy(ImVec2(std::min(count, columns) * (cell.x + gap.x) - gap.x, rows * (cell.y + gap.y) - gap.y));
}

}  // namespace tttlab::gui::plot
