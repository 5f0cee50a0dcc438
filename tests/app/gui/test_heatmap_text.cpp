// A heat-map's title lines stay inside its block (heatmap.hpp): at 1280 × 720 the stepper's maps are
// ~150 px wide, and "[16 × 16]  before this token   ±0.538" ran into the next map's "the change".
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gui/plot/heatmap.hpp"

namespace tttlab::gui::plot {
namespace {

// 7 px per code point, a stand-in for a font.
float measure(const std::string& s) {
  float w = 0;
  for (const unsigned char c : s)
    if ((c & 0xC0) != 0x80) w += 7.0f;
  return w;
}

TEST(HeatmapText, TheRangeJoinsTheSubtitleOnlyWhereItFits) {
  EXPECT_EQ(subtitle_line("[16 × 16]", "±0.538", 400.0f, measure), "[16 × 16]   ±0.538");
  EXPECT_EQ(subtitle_line("the change", "±0.538", 100.0f, measure), "the change");
  EXPECT_EQ(subtitle_line("", "±0.538", 100.0f, measure), "±0.538");
}

TEST(HeatmapText, AWideSubtitleIsClippedAtACodePoint) {
  const std::string line = subtitle_line("[16 × 16]  before this token", "±0.538", 150.0f, measure);
  EXPECT_LE(measure(line), 150.0f);
  EXPECT_EQ(line, "[16 × 16]  before th…");
  EXPECT_EQ(clip_to_width("Wₜ − Wₜ₋₁", 35.0f, measure), "Wₜ −…") << "never half a character";
  EXPECT_EQ(clip_to_width("short", 100.0f, measure), "short");
}

// A plot's y label wraps at spaces instead of being cut: at UI scale 1.5 the inner-loss curves' label
// lost its last words at the plot's edge.
TEST(HeatmapText, ALabelWrapsAtSpacesAndEveryLineFits) {
  const std::string label = "inner loss ½‖f(k; W) − v‖², mean over sequences and heads";
  const auto lines = wrap_to_width(label, 150.0f, measure);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "inner loss ½‖f(k; W)");
  EXPECT_EQ(lines[1], "− v‖², mean over");
  EXPECT_EQ(lines[2], "sequences and heads");
  for (const auto& l : lines) EXPECT_LE(measure(l), 150.0f);
  EXPECT_EQ(wrap_to_width(label, 1000.0f, measure), std::vector<std::string>{label});
  EXPECT_TRUE(wrap_to_width("", 100.0f, measure).empty());
  // A single word wider than the line is the one case that still ends in "…".
  EXPECT_EQ(wrap_to_width("a verylongwordindeed", 70.0f, measure), (std::vector<std::string>{"a", "verylongw…"}));
}

}  // namespace
}  // namespace tttlab::gui::plot
