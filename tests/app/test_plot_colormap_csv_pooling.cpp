// Colour maps (colormap.hpp), CSV formatting (csv.hpp) and max-magnitude pooling (pooling.hpp).
#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "lab/plot/colormap.hpp"
#include "lab/plot/csv.hpp"
#include "lab/plot/pooling.hpp"

namespace tttlab::lab::plot {
namespace {

TEST(PlotColormap, LabConversionMatchesKnownValuesAndRoundTrips) {
  const Lab white = srgb_to_lab({1, 1, 1});
  EXPECT_NEAR(white.L, 100.0, 1e-3);
  EXPECT_NEAR(white.a, 0.0, 1e-3);
  EXPECT_NEAR(white.b, 0.0, 1e-3);
  const Lab red = srgb_to_lab({1, 0, 0});  // sRGB red: L* 53.24, a* 80.09, b* 67.20
  EXPECT_NEAR(red.L, 53.24, 0.01);
  EXPECT_NEAR(red.a, 80.09, 0.02);
  EXPECT_NEAR(red.b, 67.20, 0.02);
  for (Rgb c : {Rgb{0.2, 0.5, 0.9}, Rgb{0.9, 0.1, 0.3}, Rgb{0.01, 0.02, 0.03}}) {
    bool ok = false;
    const Rgb back = lab_to_srgb(srgb_to_lab(c), &ok);
    EXPECT_TRUE(ok);
    EXPECT_NEAR(back.r, c.r, 1e-6);
    EXPECT_NEAR(back.g, c.g, 1e-6);
    EXPECT_NEAR(back.b, c.b, 1e-6);
  }
  bool ok = true;
  lab_to_srgb(lch_to_lab(50, 120, 140), &ok);  // far outside sRGB
  EXPECT_FALSE(ok);
}

TEST(PlotColormap, DivergingIsWhiteAtZeroAndSymmetricInLightness) {
  const Lab mid = srgb_to_lab(diverging(0.0));
  EXPECT_GT(mid.L, 95.0);
  EXPECT_LT(std::hypot(mid.a, mid.b), 1.0);
  for (int i = 1; i <= 100; ++i) {
    const double t = i / 100.0;
    const Lab pos = srgb_to_lab(diverging(t)), neg = srgb_to_lab(diverging(-t));
    EXPECT_NEAR(pos.L, neg.L, 0.3) << t;
    // Blue below zero, orange-red above: opposite signs of b*.
    EXPECT_LT(neg.b, 0.0);
    EXPECT_GT(pos.b, 0.0);
  }
}

TEST(PlotColormap, DivergingLightnessFallsEvenlyFromTheMiddle) {
  double prev = srgb_to_lab(diverging(0.0)).L;
  const double step = (srgb_to_lab(diverging(0.0)).L - srgb_to_lab(diverging(1.0)).L) / 50.0;
  for (int i = 1; i <= 50; ++i) {
    const double L = srgb_to_lab(diverging(i / 50.0)).L;
    EXPECT_LT(L, prev);
    EXPECT_NEAR(prev - L, step, 0.15 * step) << "uneven lightness step at " << i;
    prev = L;
  }
}

TEST(PlotColormap, EveryColourIsInsideTheSrgbGamut) {
  for (int i = 0; i <= 400; ++i) {
    const double t = i / 400.0;
    for (double u : {2 * t - 1}) {
      const double m = std::abs(u);
      bool ok = false;
      lab_to_srgb(lch_to_lab(97.0 + (45.0 - 97.0) * m, 48.0 * m, u < 0 ? 278.0 : 45.0), &ok);
      EXPECT_TRUE(ok) << "diverging " << u;
    }
    // The sequential map's construction, same constants as colormap.cpp.
    bool ok = false;
    lab_to_srgb(lch_to_lab(15.0 + 81.0 * t, 8.0 + 52.0 * std::sin(M_PI * t),
                           std::fmod(290.0 + 165.0 * t, 360.0)),
                &ok);
    EXPECT_TRUE(ok) << "sequential " << t;
    // And the public functions agree with that construction.
    const Lab s = srgb_to_lab(sequential(t));
    EXPECT_NEAR(s.L, 15.0 + 81.0 * t, 0.05);
  }
}

TEST(PlotColormap, SignStaysReadableUnderRedGreenColourBlindness) {
  // For every magnitude, the positive and negative colours must stay clearly apart after
  // simulating deuteranopia and protanopia (ΔE*76 > 10 already at a quarter of the range).
  for (Deficiency d : {Deficiency::None, Deficiency::Deuteranopia, Deficiency::Protanopia,
                       Deficiency::Tritanopia}) {
    for (int i = 1; i <= 20; ++i) {
      const double t = 0.25 + 0.75 * i / 20.0;
      const double de = delta_e76(srgb_to_lab(simulate_cvd(diverging(t), d)),
                                  srgb_to_lab(simulate_cvd(diverging(-t), d)));
      EXPECT_GT(de, 10.0) << "deficiency " << static_cast<int>(d) << " t " << t;
    }
  }
  // The simulation itself: a red-green pair collapses for a deuteranope (so the test can fail).
  const double rg = delta_e76(srgb_to_lab(simulate_cvd({0.8, 0.2, 0.2}, Deficiency::Deuteranopia)),
                              srgb_to_lab(simulate_cvd({0.45, 0.5, 0.2}, Deficiency::Deuteranopia)));
  EXPECT_LT(rg, 10.0);
}

TEST(PlotColormap, SequentialLightnessRisesMonotonically) {
  double prev = -1.0;
  for (int i = 0; i <= 200; ++i) {
    const double L = srgb_to_lab(sequential(i / 200.0)).L;
    EXPECT_GT(L, prev);
    prev = L;
  }
}

TEST(PlotColormap, PackedColoursUseImGuiByteOrderAndClampInput) {
  EXPECT_EQ(pack_u32({1.0, 0.0, 0.0}), 0xFF0000FFu);  // IM_COL32(255, 0, 0, 255)
  EXPECT_EQ(pack_u32({0.0, 0.0, 1.0}, 0.0), 0x00FF0000u);
  EXPECT_EQ(diverging_u32(-5.0), diverging_u32(-1.0));
  EXPECT_EQ(sequential_u32(2.0), sequential_u32(1.0));
  EXPECT_EQ(diverging_u32(0.0), pack_u32(diverging(0.0)));
  EXPECT_EQ(categorical(0).r, categorical(8).r);
}

TEST(PlotCsv, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(csv_field("loss"), "loss");
  EXPECT_EQ(csv_field("ℓ(W0; x_t)"), "ℓ(W0; x_t)");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
}

TEST(PlotCsv, NumbersRoundTripExactly) {
  for (double v : {0.1, 1.0 / 3.0, -2.5e-300, 6.02214076e23, 0.0}) {
    const std::string s = csv_number(v);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << s;
  }
  EXPECT_EQ(csv_number(std::nan("")), "nan");
  EXPECT_EQ(csv_number(-INFINITY), "-inf");
}

// The browser build's stand-in for std::to_chars(double) must write the same text: checked against it
// on values of every magnitude, sign and digit count (seed printed).
TEST(PlotCsv, ShortestTextMatchesToChars) {
  const unsigned seed = 3801;
  std::printf("seed %u\n", seed);
  std::mt19937_64 rng(seed);
  std::vector<double> values = {0.0, -0.0, 0.1, 1.0 / 3.0, 100.0, 1e16, 1e22, 1e23, 123456789.0, 1e-5, 1e-4,
                                5e-324, 1.7976931348623157e308, 2.5e-300, 0.5, 1234.5, -7.0, 1e21, 9.5e15};
  std::uniform_real_distribution<double> mantissa(1.0, 10.0);
  std::uniform_int_distribution<int> exponent(-320, 305), round_to(1, 17);
  for (int i = 0; i < 20000; ++i) {
    double v = mantissa(rng) * std::pow(10.0, exponent(rng));
    if (i % 3 == 0) {  // short decimals, where fixed and scientific compete
      char text[64];
      std::snprintf(text, sizeof text, "%.*e", round_to(rng) - 1, v);
      v = std::strtod(text, nullptr);
    }
    if (i % 2) v = -v;
    if (std::isfinite(v)) values.push_back(v);
  }
  for (double v : values) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    ASSERT_EQ(shortest_double_text(v), std::string(buf, r.ptr)) << "value " << std::scientific << v;
  }
}

TEST(PlotCsv, ColumnsOfDifferentLengthsLeaveCellsEmpty) {
  const std::vector<CsvColumn> cols{{"t", {0, 1, 2}}, {"loss, raw", {0.5, 0.25}}};
  EXPECT_EQ(columns_to_csv(cols), "t,\"loss, raw\"\n0,0.5\n1,0.25\n2,\n");
}

TEST(PlotCsv, MatrixHasLabelledRowsAndColumns) {
  const double m[] = {1, 2, 99, 3, 4, 99};  // 2×2 with row stride 3
  const std::vector<std::string> rows{"k0", "k1"};
  EXPECT_EQ(matrix_to_csv(m, 2, 2, 3, rows, {}, "i\\j"), "i\\j,0,1\nk0,1,2\nk1,3,4\n");
}

TEST(PlotPooling, SmallMatricesAreCopiedUnchanged) {
  const double m[] = {1, -2, 3, 4, 5, -6};
  const auto p = pool_max_abs(m, 2, 3, 3, 8, 8);
  EXPECT_FALSE(p.pooled());
  ASSERT_EQ(p.values.size(), 6u);
  EXPECT_FLOAT_EQ(p.at(1, 2), -6.0f);
}

TEST(PlotPooling, BinsKeepTheLargestMagnitudeWithItsSign) {
  std::vector<double> m(10 * 10, 0.1);
  m[3 * 10 + 7] = -9.0;  // one outlier
  m[9 * 10 + 9] = std::nan("");
  const auto p = pool_max_abs(m.data(), 10, 10, 10, 3, 4);
  EXPECT_TRUE(p.pooled());
  EXPECT_EQ(p.rows, 3);
  EXPECT_EQ(p.cols, 4);
  const int r = p.row_bin(3), c = p.col_bin(7);
  EXPECT_FLOAT_EQ(p.at(r, c), -9.0f);
  EXPECT_TRUE(std::isnan(p.at(p.row_bin(9), p.col_bin(9))));
  // The bins partition the source: every row belongs to exactly one bin, in order.
  int prev = 0;
  for (long i = 0; i < 10; ++i) {
    const int b = p.row_bin(i);
    EXPECT_GE(i, p.row_begin(b));
    EXPECT_LT(i, p.row_begin(b + 1));
    EXPECT_GE(b, prev);
    prev = b;
  }
  EXPECT_EQ(p.row_begin(3), 10);
}

TEST(PlotPooling, FunctionFormEvaluatesEveryEntryOnce) {
  long calls = 0;
  const auto p = pool_max_abs_fn(7, 5, 2, 2, [&](long i, long j) {
    ++calls;
    return static_cast<double>(i * 5 + j);
  });
  EXPECT_EQ(calls, 35);
  EXPECT_FLOAT_EQ(p.at(1, 1), 34.0f);
}

}  // namespace
}  // namespace tttlab::lab::plot
