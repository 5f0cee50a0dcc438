// app/lab/plot/colormap.hpp — the app's colour maps, defined in CIELAB from perceptual principles.
//
// DIVERGING (signed data: weights, gradients, ΔW): blue for negative, white for 0, orange-red for
// positive, symmetric around 0. Each half is a straight line in CIELAB's polar form (LCh) at a fixed
// hue: lightness rises linearly from L* = 45 at the ends to L* = 97 at 0 while chroma falls linearly
// from 48 to 0. So
//   • equal |value| has equal lightness on both sides (the eye reads magnitude from lightness),
//   • lightness changes at a constant perceptual rate (no false edges, no bands),
//   • 0 is the lightest colour and stands out as "nothing".
// The two hues (h = 278°, a blue, and h = 45°, an orange-red) lie on opposite sides of CIELAB's b*
// axis, the yellow–blue opponent channel that red–green colour-vision deficiencies keep, so the sign
// stays readable for deuteranopes and protanopes (tests check this with the Machado–Oliveira–
// Fernandes 2009 simulation). These are the requirements Moreland set out for diverging maps
// ("Diverging Color Maps for Scientific Visualization", 2009); the construction here is our own.
//
// SEQUENTIAL (magnitudes: |difference|, attention weights ≥ 0): lightness rises monotonically from
// L* = 15 to 96 while the hue turns from violet (290°) through magenta and red to pale yellow
// (95°), with chroma peaking mid-way; dark = small on the app's dark background.
//
// Every colour of both maps lies inside the sRGB gamut (checked by the tests), so no clipping
// distorts the lightness ramps. Colours are sRGB in [0, 1]; *_u32 pack them as ImGui's IM_COL32
// (R in the low byte) through a 1024-entry table.
#pragma once

#include <cstdint>

namespace tttlab::lab::plot {

struct Rgb {
  double r = 0, g = 0, b = 0;  // sRGB, gamma-encoded, [0, 1]
};
struct Lab {
  double L = 0, a = 0, b = 0;  // CIELAB, D65 white
};

Lab srgb_to_lab(const Rgb& c);
// `in_gamut` (optional) reports whether the colour was representable before clamping to [0, 1].
Rgb lab_to_srgb(const Lab& c, bool* in_gamut = nullptr);
Lab lch_to_lab(double L, double C, double h_degrees);
double delta_e76(const Lab& x, const Lab& y);

Rgb diverging(double t);   // t in [−1, 1] (clamped)
Rgb sequential(double t);  // t in [0, 1] (clamped)

std::uint32_t pack_u32(const Rgb& c, double alpha = 1.0);
std::uint32_t diverging_u32(double t);
std::uint32_t sequential_u32(double t);

// Colour-vision deficiency simulation (Machado, Oliveira & Fernandes 2009, severity 1), for tests
// and the heat-map preview option.
enum class Deficiency { None, Protanopia, Deuteranopia, Tritanopia };
Rgb simulate_cvd(const Rgb& c, Deficiency d);

// Colour-blind-safe categorical colours for series (Okabe & Ito 2008), in a fixed order:
// 0 orange, 1 sky blue, 2 bluish green, 3 yellow, 4 blue, 5 vermillion, 6 reddish purple, 7 grey.
Rgb categorical(int i);

}  // namespace tttlab::lab::plot
