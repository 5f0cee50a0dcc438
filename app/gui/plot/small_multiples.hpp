// app/gui/plot/small_multiples.hpp — a grid of equally sized small plots sharing one scale
// ("small multiples"): the reader compares the cells by position, not by reading axes.
#pragma once

#include <imgui.h>

#include <functional>

namespace tttlab::gui::plot {

// Places `count` cells of size `cell` in rows of `columns` (≤ 0: as many as fit the available
// width), with `gap` between them, and calls draw(i, cell) with the cursor at cell i's top-left.
// Advances the layout past the grid.
void small_multiples(int count, int columns, ImVec2 cell, ImVec2 gap,
                     const std::function<void(int, ImVec2)>& draw);

}  // namespace tttlab::gui::plot
