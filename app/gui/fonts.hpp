// app/gui/fonts.hpp — the app's fonts: DejaVu Sans (fonts-dejavu-core) with the glyphs the maths
// needs (Greek η θ λ τ, ∇ ℓ ‖ ⊙ ≤ −, sub- and superscripts ₜ ᵀ ⁻², arrows, ▶ Ⅱ for the transport).
//
// Loaded once after the ImGui context exists, at sizes scaled by the monitor's content scale. If
// DejaVu is missing the built-in ImGui font is used and a warning printed (maths symbols then show
// as '?'). TTTLAB_FONT_DIR overrides the font folder.
#pragma once

struct ImFont;

namespace tttlab::gui {

struct Fonts {
  ImFont* regular = nullptr;  // body text, 15 px × scale
  ImFont* small = nullptr;    // axis ticks and captions, 13 px
  ImFont* bold = nullptr;     // titles, 15 px
  ImFont* large = nullptr;    // metric values, 22 px
  ImFont* mono = nullptr;     // numbers in tables, 14 px
  bool dejavu = false;        // false: fell back to ImGui's built-in font
};

// Adds the fonts to ImGui's atlas; call before the renderer backend builds its font texture.
const Fonts& load_fonts(float scale);
// The fonts loaded by load_fonts() (all null before).
const Fonts& fonts();

}  // namespace tttlab::gui
