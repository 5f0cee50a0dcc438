// Regressions from fuzzing the app's file readers (fuzz/, docs/BUILDING.md "Fuzzing"): each input
// that once crashed, hung or ran out of memory is fed to the same entry point as its fuzz target, and
// must now give the documented outcome. The inputs are also in fuzz/corpus/<target>/, so every fuzzing
// run replays them.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/io/temp_dir.hpp"
#include "course/lesson.hpp"
#include "course/progress.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"

namespace tttlab::course {
namespace {

// A lesson whose one prediction has `choices` choices, each a valid "text | condition".
std::string lesson_with_choices(int choices) {
  std::string text =
      "---\ntitle: Many choices\ngoal: Be read in linear time.\nduration: 5\nscene: s.tttlab\n---\n"
      "```predict\nask: Which?\nmeasure: gain\n";
  for (int i = 0; i < choices; ++i) text += "choice: c" + std::to_string(i) + " | > " + std::to_string(i) + "\n";
  text += "```\n```check\nclaim: It holds.\nmeasure: gain\nexpect: > 0\n```\n";
  return text;
}

// fuzz_lesson's entry point: the duplicate-key check compared every field with every earlier one, so a
// block of many "choice:" lines (the repeatable key) took quadratic time. This input, ~1 MiB (the most
// read_lesson reads), took seconds even in an optimised build and minutes under the sanitizers: a hang
// for the Lessons panel and `tttlab lessons check`. The check is linear now; the test's time limit is
// a generous bound that only a quadratic check would exceed.
TEST(LessonFuzzRegressions, LessonWithTensOfThousandsOfChoicesParsesQuickly) {
  const std::string text = lesson_with_choices(42'000);
  ASSERT_GT(text.size(), 1'000'000u);
  ASSERT_LE(text.size(), std::size_t{1} << 20);  // what read_lesson accepts
  const auto start = std::chrono::steady_clock::now();
  const Lesson lesson = parse_lesson(text, "lessons/99-many-choices.md");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(lesson.predictions.size(), 1u);
  EXPECT_EQ(lesson.predictions[0].choices.size(), 42'000u);
  EXPECT_EQ(lesson.predictions[0].right_choice(2.5), 0);  // "> 0" is the first that holds
  // The bound leaves room for a loaded machine and still fails the quadratic check in any build.
  EXPECT_LT(seconds, 3.0) << "parsing a lesson of " << text.size() << " bytes took " << seconds << " s";
}

// The same check still refuses a repeated non-repeatable key after many choices, naming both lines.
TEST(LessonFuzzRegressions, RepeatedKeyAfterManyChoicesIsStillRefused) {
  std::string text = lesson_with_choices(1000);
  const std::string marker = "measure: gain\n";
  text.insert(text.find(marker) + marker.size(), "ask: Again?\n");
  try {
    (void)parse_lesson(text, "lessons/99-twice.md");
    FAIL() << "a block with two \"ask:\" lines was accepted";
  } catch (const LessonError& e) {
    EXPECT_NE(std::string(e.what()).find("lessons/99-twice.md:10: \"ask:\" given twice (first on line 8)"),
              std::string::npos)
        << e.what();
  }
}

// fuzz_state_file (fuzz/corpus/fuzz_state_file/regression-number-overflow.tttlab, the fuzzer's own
// find): a number too large for a double is nlohmann's out_of_range, not a parse_error, and escaped
// parse_state, whose callers (File > Open, `--state`, the lesson checker) catch only StateError.
TEST(StateFileFuzzRegressions, NumberTooLargeForADoubleIsAStateError) {
  const std::string crash = "77e777ry \xd0\xd0";  // the bytes the fuzzer found
  for (const std::string& text : {crash, std::string(R"({"format": "tttlab-state", "version": 1e999})")}) {
    try {
      (void)lab::parse_state(text, "scene.tttlab");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const lab::StateError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("scene.tttlab is not valid JSON"), std::string::npos) << msg;
      EXPECT_NE(msg.find("number overflow"), std::string::npos) << msg;
    }
  }
}

// The course progress file had the same catch: its error message now says what is wrong too.
TEST(StateFileFuzzRegressions, ProgressFileWithAnOverflowingNumberSaysSo) {
  const tttlab::testing::TempDir dir;
  const std::filesystem::path file = dir.path() / "progress.json";
  std::ofstream(file) << R"({"format": "tttlab-course-progress", "version": 1e999})";
  const ProgressStore store(file);
  EXPECT_NE(store.error().find("not valid JSON: number overflow"), std::string::npos) << store.error();
}

}  // namespace
}  // namespace tttlab::course
