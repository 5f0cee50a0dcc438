#include "lab/plot/colormap.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

namespace tttlab::lab::plot {
namespace {

// D65 reference white.
constexpr double kXn = 0.95047, kYn = 1.0, kZn = 1.08883;

double srgb_decode(double c) {
  return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
}
double srgb_encode(double c) {
  return c <= 0.0031308 ? 12.92 * c : 1.055 * std::pow(c, 1.0 / 2.4) - 0.055;
}
double lab_f(double t) {
  constexpr double e = 216.0 / 24389.0, k = 24389.0 / 27.0;
  return t > e ? std::cbrt(t) : (k * t + 16.0) / 116.0;
}
double lab_finv(double f) {
  constexpr double e = 216.0 / 24389.0, k = 24389.0 / 27.0;
  const double f3 = f * f * f;
  return f3 > e ? f3 : (116.0 * f - 16.0) / k;
}

// The map parameters (see the header).
constexpr double kDivEndL = 45.0, kDivEndC = 48.0, kDivMidL = 97.0;
constexpr double kDivHueNeg = 278.0, kDivHuePos = 45.0;
constexpr double kSeqL0 = 15.0, kSeqL1 = 96.0, kSeqHue0 = 290.0, kSeqHueTurn = 165.0;
constexpr double kSeqC0 = 8.0, kSeqCPeak = 52.0;

constexpr int kTable = 1024;

template <class F>
std::array<std::uint32_t, kTable> build_table(F&& colour_at_unit) {
  std::array<std::uint32_t, kTable> t{};
  for (int i = 0; i < kTable; ++i) t[i] = pack_u32(colour_at_unit(i / double(kTable - 1)));
  return t;
}

}  // namespace

Lab srgb_to_lab(const Rgb& c) {
  const double r = srgb_decode(c.r), g = srgb_decode(c.g), b = srgb_decode(c.b);
  const double X = 0.4124564 * r + 0.3575761 * g + 0.1804375 * b;
  const double Y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b;
  const double Z = 0.0193339 * r + 0.1191920 * g + 0.9503041 * b;
  const double fx = lab_f(X / kXn), fy = lab_f(Y / kYn), fz = lab_f(Z / kZn);
  return {116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)};
}

Rgb lab_to_srgb(const Lab& c, bool* in_gamut) {
  const double fy = (c.L + 16.0) / 116.0, fx = fy + c.a / 500.0, fz = fy - c.b / 200.0;
  const double X = kXn * lab_finv(fx), Y = kYn * lab_finv(fy), Z = kZn * lab_finv(fz);
  const double lin[3] = {3.2404542 * X - 1.5371385 * Y - 0.4985314 * Z,
                         -0.9692660 * X + 1.8760108 * Y + 0.0415560 * Z,
                         0.0556434 * X - 0.2040259 * Y + 1.0572252 * Z};
  bool ok = true;
  double out[3];
  for (int i = 0; i < 3; ++i) {
    if (lin[i] < -1e-4 || lin[i] > 1.0 + 1e-4) ok = false;
    out[i] = srgb_encode(std::clamp(lin[i], 0.0, 1.0));
  }
  if (in_gamut) *in_gamut = ok;
  return {out[0], out[1], out[2]};
}

Lab lch_to_lab(double L, double C, double h) {
  const double r = h * std::numbers::pi / 180.0;
  return {L, C * std::cos(r), C * std::sin(r)};
}

double delta_e76(const Lab& x, const Lab& y) {
  return std::sqrt((x.L - y.L) * (x.L - y.L) + (x.a - y.a) * (x.a - y.a) + (x.b - y.b) * (x.b - y.b));
}

Rgb diverging(double t) {
  t = std::clamp(t, -1.0, 1.0);
  const double m = std::abs(t);
  const double L = kDivMidL + (kDivEndL - kDivMidL) * m;
  const double C = kDivEndC * m;
  return lab_to_srgb(lch_to_lab(L, C, t < 0 ? kDivHueNeg : kDivHuePos));
}

Rgb sequential(double t) {
  t = std::clamp(t, 0.0, 1.0);
  const double L = kSeqL0 + (kSeqL1 - kSeqL0) * t;
  const double C = kSeqC0 + kSeqCPeak * std::sin(std::numbers::pi * t);
  const double h = std::fmod(kSeqHue0 + kSeqHueTurn * t, 360.0);
  return lab_to_srgb(lch_to_lab(L, C, h));
}

std::uint32_t pack_u32(const Rgb& c, double alpha) {
  const auto q = [](double v) {
    return static_cast<std::uint32_t>(std::lround(std::clamp(v, 0.0, 1.0) * 255.0));
  };
  return q(c.r) | (q(c.g) << 8) | (q(c.b) << 16) | (q(alpha) << 24);
}

std::uint32_t diverging_u32(double t) {
  static const auto table = build_table([](double u) { return diverging(2.0 * u - 1.0); });
  if (std::isnan(t)) return pack_u32({0.5, 0.5, 0.5});
  const double u = (std::clamp(t, -1.0, 1.0) + 1.0) * 0.5;
  return table[static_cast<std::size_t>(std::lround(u * (kTable - 1)))];
}

std::uint32_t sequential_u32(double t) {
  static const auto table = build_table([](double u) { return sequential(u); });
  if (std::isnan(t)) return pack_u32({0.5, 0.5, 0.5});
  return table[static_cast<std::size_t>(std::lround(std::clamp(t, 0.0, 1.0) * (kTable - 1)))];
}

Rgb simulate_cvd(const Rgb& c, Deficiency d) {
  // Machado, Oliveira & Fernandes (2009), Table: severity 1.0, applied to linear RGB.
  static constexpr double kProt[9] = {0.152286, 1.052583, -0.204868, 0.114503, 0.786281,
                                      0.099216, -0.003882, -0.048116, 1.051998};
  static constexpr double kDeut[9] = {0.367322, 0.860646, -0.227968, 0.280085, 0.672501,
                                      0.047413, -0.011820, 0.042940, 0.968881};
  static constexpr double kTrit[9] = {1.255528, -0.076749, -0.178779, -0.078411, 0.930809,
                                      0.147602, 0.004733, 0.691367, 0.303900};
  const double* m = d == Deficiency::Protanopia     ? kProt
                    : d == Deficiency::Deuteranopia ? kDeut
                    : d == Deficiency::Tritanopia   ? kTrit
                                                    : nullptr;
  if (!m) return c;
  const double r = srgb_decode(c.r), g = srgb_decode(c.g), b = srgb_decode(c.b);
  const auto enc = [](double v) { return srgb_encode(std::clamp(v, 0.0, 1.0)); };
  return {enc(m[0] * r + m[1] * g + m[2] * b), enc(m[3] * r + m[4] * g + m[5] * b),
          enc(m[6] * r + m[7] * g + m[8] * b)};
}

Rgb categorical(int i) {
  static constexpr Rgb kOkabeIto[] = {
      {230 / 255.0, 159 / 255.0, 0 / 255.0},   {86 / 255.0, 180 / 255.0, 233 / 255.0},
      {0 / 255.0, 158 / 255.0, 115 / 255.0},   {240 / 255.0, 228 / 255.0, 66 / 255.0},
      {0 / 255.0, 114 / 255.0, 178 / 255.0},   {213 / 255.0, 94 / 255.0, 0 / 255.0},
      {204 / 255.0, 121 / 255.0, 167 / 255.0}, {153 / 255.0, 153 / 255.0, 153 / 255.0}};
  const int n = static_cast<int>(sizeof kOkabeIto / sizeof kOkabeIto[0]);
  return kOkabeIto[((i % n) + n) % n];
}

}  // namespace tttlab::lab::plot
