// Axis scales (scale.hpp) and EMA smoothing (smoothing.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "lab/plot/scale.hpp"
#include "lab/plot/smoothing.hpp"

namespace tttlab::lab::plot {
namespace {

TEST(PlotScale, LinearMapsEndsToZeroAndOneAndInverts) {
  AxisMap m{ScaleKind::Linear, -2.0, 6.0};
  EXPECT_DOUBLE_EQ(m.forward(-2.0), 0.0);
  EXPECT_DOUBLE_EQ(m.forward(6.0), 1.0);
  EXPECT_DOUBLE_EQ(m.forward(2.0), 0.5);
  for (double v : {-2.0, -0.3, 1.0, 5.9}) EXPECT_NEAR(m.inverse(m.forward(v)), v, 1e-12);
}

TEST(PlotScale, LogMapsDecadesEvenlyAndRejectsNonPositive) {
  AxisMap m{ScaleKind::Log10, 1e-4, 1.0};
  EXPECT_NEAR(m.forward(1e-2), 0.5, 1e-12);
  EXPECT_NEAR(m.forward(1e-3), 0.25, 1e-12);
  EXPECT_NEAR(m.inverse(0.75), 1e-1, 1e-15);
  EXPECT_FALSE(m.drawable(0.0));
  EXPECT_FALSE(m.drawable(-1.0));
  EXPECT_FALSE(m.drawable(std::numeric_limits<double>::infinity()));
  EXPECT_TRUE(m.drawable(1e-30));
}

TEST(PlotScale, FitterPadsIgnoresBadValuesAndWidensDegenerateRanges) {
  RangeFitter f(ScaleKind::Linear);
  f.add(std::vector<double>{1.0, std::nan(""), 3.0, std::numeric_limits<double>::infinity()});
  const Range r = f.range(0.1);
  EXPECT_DOUBLE_EQ(r.lo, 0.8);
  EXPECT_DOUBLE_EQ(r.hi, 3.2);

  RangeFitter flat(ScaleKind::Linear);
  flat.add(5.0);
  const Range fr = flat.range(0.0);
  EXPECT_LT(fr.lo, 5.0);
  EXPECT_GT(fr.hi, 5.0);

  RangeFitter lg(ScaleKind::Log10);
  lg.add(std::vector<double>{0.0, -3.0, 1e-3, 1e1});
  const Range lr = lg.range(0.0);
  EXPECT_NEAR(lr.lo, 1e-3, 1e-15);
  EXPECT_NEAR(lr.hi, 10.0, 1e-12);

  EXPECT_DOUBLE_EQ(RangeFitter(ScaleKind::Log10).range().lo, 1.0);
}

TEST(PlotSmoothing, ZeroWeightIsTheIdentity) {
  const std::vector<double> y{3.0, -1.0, 4.0};
  EXPECT_EQ(ema_smooth(y, 0.0), y);
}

TEST(PlotSmoothing, DebiasingKeepsAConstantSeriesConstant) {
  // Without the 1/(1 − wⁿ) correction the curve would start near 0 and creep up.
  const std::vector<double> y(50, 2.5);
  for (double s : ema_smooth(y, 0.9)) EXPECT_NEAR(s, 2.5, 1e-12);
}

TEST(PlotSmoothing, MatchesTheRecurrenceByHand) {
  const std::vector<double> y{1.0, 3.0, 2.0};
  const double w = 0.5;
  const auto s = ema_smooth(y, w);
  // acc: 0.5, 0.5·0.5+0.5·3 = 1.75, 0.5·1.75+0.5·2 = 1.875; debias by 1−wⁿ: 0.5, 0.75, 0.875
  EXPECT_DOUBLE_EQ(s[0], 1.0);
  EXPECT_DOUBLE_EQ(s[1], 1.75 / 0.75);
  EXPECT_DOUBLE_EQ(s[2], 1.875 / 0.875);
}

TEST(PlotSmoothing, NonFiniteValuesPassThroughAndAreSkipped) {
  const std::vector<double> y{1.0, std::nan(""), 1.0, std::numeric_limits<double>::infinity(), 1.0};
  const auto s = ema_smooth(y, 0.8);
  EXPECT_TRUE(std::isnan(s[1]));
  EXPECT_TRUE(std::isinf(s[3]));
  EXPECT_NEAR(s[4], 1.0, 1e-12);
}

TEST(PlotSmoothing, StepResponseRisesMonotonicallyTowardsTheNewLevel) {
  std::vector<double> y(20, 0.0);
  for (int i = 10; i < 20; ++i) y[static_cast<std::size_t>(i)] = 1.0;
  const auto s = ema_smooth(y, 0.7);
  for (int i = 11; i < 20; ++i) {
    EXPECT_GT(s[static_cast<std::size_t>(i)], s[static_cast<std::size_t>(i - 1)]);
    EXPECT_LT(s[static_cast<std::size_t>(i)], 1.0);
  }
}

}  // namespace
}  // namespace tttlab::lab::plot
