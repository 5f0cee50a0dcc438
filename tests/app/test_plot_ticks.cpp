// Tick selection and labels (app/lab/plot/ticks.hpp).
#include <gtest/gtest.h>

#include <cmath>

#include "lab/plot/ticks.hpp"

namespace tttlab::lab::plot {
namespace {

std::vector<double> majors(const std::vector<Tick>& ticks) {
  std::vector<double> v;
  for (const auto& t : ticks)
    if (t.major) v.push_back(t.value);
  return v;
}

TEST(PlotTicks, NiceStepIsOneTwoFiveTimesAPowerOfTen) {
  EXPECT_DOUBLE_EQ(nice_step(0.17), 0.2);
  EXPECT_DOUBLE_EQ(nice_step(0.2), 0.2);
  EXPECT_DOUBLE_EQ(nice_step(0.21), 0.5);
  EXPECT_DOUBLE_EQ(nice_step(3.0), 5.0);
  EXPECT_DOUBLE_EQ(nice_step(7.0), 10.0);
  EXPECT_DOUBLE_EQ(nice_step(1.0), 1.0);
  EXPECT_NEAR(nice_step(1.3e-7), 2e-7, 1e-22);
  EXPECT_DOUBLE_EQ(nice_step(4200.0), 5000.0);
}

TEST(PlotTicks, LinearTicksAreRoundAndInsideTheRange) {
  const auto t = linear_ticks(0.0, 1.0, 5);
  const auto m = majors(t);
  const std::vector<double> want{0.0, 0.2, 0.4, 0.6, 0.8, 1.0};
  ASSERT_EQ(m.size(), want.size());
  for (std::size_t i = 0; i < m.size(); ++i) EXPECT_NEAR(m[i], want[i], 1e-12);
  for (const auto& k : t) {
    EXPECT_GE(k.value, 0.0);
    EXPECT_LE(k.value, 1.0);
    EXPECT_EQ(k.major, !k.label.empty());
  }
  // Minor ticks split a step of 2 into four parts and a step of 1 or 5 into five.
  const auto two = linear_ticks(0.0, 8.0, 4);  // step 2
  EXPECT_EQ(two.size(), 17u);                  // every 0.5
  const auto five = linear_ticks(0.0, 20.0, 4);  // step 5
  EXPECT_EQ(five.size(), 21u);                   // every 1
}

TEST(PlotTicks, LinearTicksStayWithinBudgetForAnyRange) {
  for (double lo : {-1234.5, -3.0, 0.0, 1e-9, 17.0})
    for (double width : {1e-6, 0.3, 7.0, 950.0, 3.3e7})
      for (int budget : {2, 4, 7, 10}) {
        const auto m = majors(linear_ticks(lo, lo + width, budget));
        EXPECT_GE(m.size(), 1u) << lo << " " << width;
        EXPECT_LE(static_cast<int>(m.size()), 2 * budget + 1) << lo << " " << width;
      }
}

TEST(PlotTicks, LabelsUseTheStepsDecimalsAndATrueMinus) {
  EXPECT_EQ(format_tick(0.4, 0.2), "0.4");
  EXPECT_EQ(format_tick(3.0, 1.0), "3");
  EXPECT_EQ(format_tick(-0.25, 0.05), "\xE2\x88\x92" "0.25");
  EXPECT_EQ(format_tick(-1e-17, 0.1), "0.0");  // no "−0.0" from rounding noise
  EXPECT_EQ(format_tick(2.5e-5, 5e-6), "2.5e\xE2\x88\x92" "5");
  EXPECT_EQ(format_tick(2e6, 1e6), "2e6");
}

TEST(PlotTicks, LogTicksLabelDecadesWithMinorTicksBetween) {
  const auto t = log_ticks(1e-3, 10.0, 6);
  const auto m = majors(t);
  const std::vector<double> want{1e-3, 1e-2, 1e-1, 1.0, 10.0};
  ASSERT_EQ(m.size(), want.size());
  for (std::size_t i = 0; i < m.size(); ++i) EXPECT_NEAR(m[i], want[i], want[i] * 1e-12);
  int minor = 0;
  for (const auto& k : t) minor += !k.major;
  EXPECT_EQ(minor, 4 * 8);  // 2..9 in each of the four decades
  EXPECT_EQ(t.front().label, "10\xE2\x81\xBB\xC2\xB3");  // 10⁻³
  EXPECT_EQ(t.back().label, "10");
}

TEST(PlotTicks, ManyDecadesAreThinnedToTheBudget) {
  const auto t = log_ticks(1e-16, 1e2, 5);
  int labelled = 0;
  for (const auto& k : t) labelled += !k.label.empty();
  EXPECT_LE(labelled, 6);
  EXPECT_GE(labelled, 3);
}

TEST(PlotTicks, NarrowLogRangeFallsBackToLinearLabels) {
  const auto t = log_ticks(2.0, 8.0, 6);
  ASSERT_FALSE(majors(t).empty());
  for (double v : majors(t)) {
    EXPECT_GE(v, 2.0);
    EXPECT_LE(v, 8.0);
  }
}

TEST(PlotTicks, PowerOfTenUsesSuperscripts) {
  EXPECT_EQ(power_of_ten(12), "10\xC2\xB9\xC2\xB2");
  EXPECT_EQ(power_of_ten(-7), "10\xE2\x81\xBB\xE2\x81\xB7");
}

TEST(PlotTicks, ValuesAreReadableAtEveryMagnitude) {
  EXPECT_EQ(format_value(0.123456), "0.1235");
  EXPECT_EQ(format_value(1234.4), "1234");
  EXPECT_EQ(format_value(3.2e-9), "3.200e\xE2\x88\x92" "9");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
}

}  // namespace
}  // namespace tttlab::lab::plot

namespace tttlab::lab::plot {
namespace {

TEST(PlotTicks, OneOrTwoDecadesGetOneTwoFiveLabels) {
  const auto t = log_ticks(1.5e-16, 3e-15, 5);
  std::vector<std::string> labels;
  for (const auto& k : t)
    if (k.major) labels.push_back(k.label);
  const std::vector<std::string> want{"2\xC3\x97" "10\xE2\x81\xBB\xC2\xB9\xE2\x81\xB6",
                                      "5\xC3\x97" "10\xE2\x81\xBB\xC2\xB9\xE2\x81\xB6",
                                      "10\xE2\x81\xBB\xC2\xB9\xE2\x81\xB5",
                                      "2\xC3\x97" "10\xE2\x81\xBB\xC2\xB9\xE2\x81\xB5"};
  EXPECT_EQ(labels, want);
  const auto plain = log_ticks(0.3, 8.0, 5);
  std::vector<std::string> pl;
  for (const auto& k : plain)
    if (k.major) pl.push_back(k.label);
  EXPECT_EQ(pl, (std::vector<std::string>{"0.5", "1", "2", "5"}));
}

TEST(PlotFormat, DurationsReadLikeAClock) {
  EXPECT_EQ(format_duration(0.4), "0s");
  EXPECT_EQ(format_duration(42.0), "42s");
  EXPECT_EQ(format_duration(187.0), "3m 07s");
  EXPECT_EQ(format_duration(7500.0), "2h 05m");
  EXPECT_EQ(format_duration(-1.0), "\xE2\x80\x94");
  EXPECT_EQ(format_duration(std::nan("")), "\xE2\x80\x94");
}

}  // namespace
}  // namespace tttlab::lab::plot
