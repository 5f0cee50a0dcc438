// app/gui/theme.hpp — the app's look: one dark theme and the colours every panel shares, so that a
// quantity has the same colour wherever it appears (e.g. ℓ(W_{t−1}) is always orange).
#pragma once

#include <imgui.h>

namespace tttlab::gui {

namespace colors {
// Chrome
inline constexpr ImU32 kText = IM_COL32(226, 228, 233, 255);
inline constexpr ImU32 kTextDim = IM_COL32(150, 155, 166, 255);
inline constexpr ImU32 kTextFaint = IM_COL32(105, 110, 122, 255);
inline constexpr ImU32 kAccent = IM_COL32(94, 158, 255, 255);
inline constexpr ImU32 kWarning = IM_COL32(240, 180, 70, 255);
inline constexpr ImU32 kError = IM_COL32(240, 100, 90, 255);
inline constexpr ImU32 kGood = IM_COL32(90, 200, 140, 255);
// Plots
inline constexpr ImU32 kPlotBg = IM_COL32(30, 32, 37, 255);
inline constexpr ImU32 kPlotFrame = IM_COL32(70, 75, 86, 255);
inline constexpr ImU32 kGrid = IM_COL32(56, 60, 69, 255);
inline constexpr ImU32 kGridMinor = IM_COL32(42, 45, 52, 255);
inline constexpr ImU32 kMarker = IM_COL32(120, 126, 140, 170);   // mini-batch boundaries
inline constexpr ImU32 kCursor = IM_COL32(94, 158, 255, 230);    // current token
inline constexpr ImU32 kCrosshair = IM_COL32(200, 204, 214, 120);
// Quantities (Okabe–Ito, colour-blind safe)
inline constexpr ImU32 kLossInitial = IM_COL32(153, 153, 153, 255);  // ℓ(W0; x_t)
inline constexpr ImU32 kLossBefore = IM_COL32(230, 159, 0, 255);     // ℓ(W_{t−1}; x_t)
inline constexpr ImU32 kLossAfter = IM_COL32(86, 180, 233, 255);     // ℓ(W_t; x_t)
inline constexpr ImU32 kPrimal = IM_COL32(230, 159, 0, 255);
inline constexpr ImU32 kDual = IM_COL32(86, 180, 233, 255);
inline constexpr ImU32 kNormW = IM_COL32(0, 158, 115, 255);
inline constexpr ImU32 kNormDW = IM_COL32(204, 121, 167, 255);
}  // namespace colors

// Applies the theme and scales every size by `scale` (the monitor's content scale).
void apply_theme(float scale);
// The window background, for glClearColor.
ImVec4 clear_color();

}  // namespace tttlab::gui
