// app/gui/theme.hpp — the app's look: a dark and a light theme, the UI scale, and the colours every
// panel shares, so that a quantity has the same colour wherever it appears (e.g. ℓ(W_{t−1}) is always
// orange).
//
// A colour is named by its role (colors::kText, colors::kPlotBg, …) and resolved against the current
// theme when it is used: it converts to ImU32 wherever one is expected, so drawing code reads the
// same in both themes and a theme change applies from the next frame. Colours fixed by their meaning
// (a heat map's colour scale, a cell's text chosen by the cell's lightness) are not roles.
#pragma once

#include <imgui.h>

#include "gui/ui_settings.hpp"

namespace tttlab::gui {

namespace colors {

enum class Role : int {
  // Chrome
  Text, TextDim, TextFaint, Accent, Warning, Error, Good,
  // Surfaces of the layout
  SidebarBg, PaneBg, StatusBg, Rule, Divider,
  // The lessons' text: links, emphasis, code
  Link, Emphasis, CodeBg, CodeText,
  // Widgets drawn by hand: cards, progress tracks, token chips, the active toggle button
  CardBg, CardEdge, Track, TrackFill, ChipA, ChipB, ChipHover, ChipSelected, OnChipSelected, ButtonOn,
  // Plots
  PlotBg, PlotFrame, Grid, GridMinor, Marker, Cursor, Crosshair, LegendBg, HoverTint, PointOutline,
  CellSeparator, CellHighlight, BlockOutline, Missing, Ghost, Toast,
  // Quantities (Okabe–Ito, colour-blind safe; a shade darker on the light theme)
  LossInitial, LossBefore, LossAfter, Primal, Dual, NormW, NormDW, Mamba2,
  Count
};

// The current theme's colour of each role (theme.cpp fills it; dark until apply_theme runs).
ImU32 resolve(Role r);

// A colour role: converts to the current theme's ImU32.
struct Color {
  Role role;
  operator ImU32() const { return resolve(role); }  // NOLINT(google-explicit-constructor): used as ImU32
  ImVec4 vec4() const { return ImGui::ColorConvertU32ToFloat4(resolve(role)); }
};

// Chrome
inline constexpr Color kText{Role::Text};
inline constexpr Color kTextDim{Role::TextDim};
inline constexpr Color kTextFaint{Role::TextFaint};
inline constexpr Color kAccent{Role::Accent};
inline constexpr Color kWarning{Role::Warning};
inline constexpr Color kError{Role::Error};
inline constexpr Color kGood{Role::Good};
// Surfaces
inline constexpr Color kSidebarBg{Role::SidebarBg};
inline constexpr Color kPaneBg{Role::PaneBg};      // the docked lesson's pane
inline constexpr Color kStatusBg{Role::StatusBg};
inline constexpr Color kRule{Role::Rule};          // thin separating lines
inline constexpr Color kDivider{Role::Divider};    // between the lesson pane and its view
inline constexpr Color kLink{Role::Link};          // the lessons' text: a link
inline constexpr Color kEmphasis{Role::Emphasis};  // *emphasis*
inline constexpr Color kCodeBg{Role::CodeBg};      // `code` and code blocks
inline constexpr Color kCodeText{Role::CodeText};
// Hand-drawn widgets
inline constexpr Color kCardBg{Role::CardBg};
inline constexpr Color kCardEdge{Role::CardEdge};
inline constexpr Color kTrack{Role::Track};            // an empty progress track
inline constexpr Color kTrackFill{Role::TrackFill};    // its done part
inline constexpr Color kChipA{Role::ChipA};            // token chips, alternate mini-batches
inline constexpr Color kChipB{Role::ChipB};
inline constexpr Color kChipHover{Role::ChipHover};
inline constexpr Color kChipSelected{Role::ChipSelected};
inline constexpr Color kOnChipSelected{Role::OnChipSelected};
inline constexpr Color kButtonOn{Role::ButtonOn};      // a toggle button that is on
// Plots
inline constexpr Color kPlotBg{Role::PlotBg};
inline constexpr Color kPlotFrame{Role::PlotFrame};
inline constexpr Color kGrid{Role::Grid};
inline constexpr Color kGridMinor{Role::GridMinor};
inline constexpr Color kMarker{Role::Marker};          // mini-batch boundaries
inline constexpr Color kCursor{Role::Cursor};          // current token
inline constexpr Color kCrosshair{Role::Crosshair};
inline constexpr Color kLegendBg{Role::LegendBg};
inline constexpr Color kHoverTint{Role::HoverTint};
inline constexpr Color kPointOutline{Role::PointOutline};
inline constexpr Color kCellSeparator{Role::CellSeparator};
inline constexpr Color kCellHighlight{Role::CellHighlight};
inline constexpr Color kBlockOutline{Role::BlockOutline};
inline constexpr Color kMissing{Role::Missing};        // a NaN cell
inline constexpr Color kGhost{Role::Ghost};            // a remembered earlier result
inline constexpr Color kToast{Role::Toast};
// Quantities
inline constexpr Color kLossInitial{Role::LossInitial};  // ℓ(W0; x_t)
inline constexpr Color kLossBefore{Role::LossBefore};    // ℓ(W_{t−1}; x_t)
inline constexpr Color kLossAfter{Role::LossAfter};      // ℓ(W_t; x_t)
inline constexpr Color kPrimal{Role::Primal};
inline constexpr Color kDual{Role::Dual};
inline constexpr Color kNormW{Role::NormW};
inline constexpr Color kNormDW{Role::NormDW};
inline constexpr Color kMamba2{Role::Mamba2};  // the Mamba-2 layer, where layers are compared
}  // namespace colors

// Applies `theme` and scales every size by `scale` (the monitor's content scale times the UI scale).
void apply_theme(float scale, Theme theme = Theme::Dark);
Theme current_theme();
// The window background, for glClearColor.
ImVec4 clear_color();

}  // namespace tttlab::gui
