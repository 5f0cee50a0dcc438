// The lesson file format (app/course/lesson.hpp): what parses, what is refused with file and line,
// and the shipped course itself: every lesson in lessons/ parses and its checks name measures its
// scene's view offers.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <unistd.h>
#include <cmath>
#include <cstdio>

#include "core/io/temp_dir.hpp"
#include "course/experiments.hpp"
#include "course/lesson.hpp"
#include "lab/state/state_file.hpp"

namespace tttlab::course {
namespace {

namespace fs = std::filesystem;

const char* kGood = R"(---
title: A lesson
goal: To test the parser.
duration: 20 min
scene: a.tttlab
---
# 1. A lesson

Some *text*.

```predict
id: gap
ask: Which way does it go?
measure: gain_from_context
choice: Down. | > 0.01
choice: Flat. | -0.01 .. 0.01
choice: Up.   | < -0.01
reveal: It goes down,
  over many tokens.
```

More text.

```sh
tttlab lessons check 01
```

```question
ask: Why?
hint: Think.
answer: Because.
```

```check
claim: It goes down.
measure: gain_from_context
expect: > 0
```

```experiment
id: other
scene: b.tttlab
```

```predict
ask: How big?
experiment: other
measure: max_rel_diff
slider: 0 .. 1
tolerance: 0.1
unit: nats
```
)";

TEST(CourseLesson, ParsesEveryBlockKind) {
  const Lesson L = parse_lesson(kGood, "lessons/01-a.md");
  EXPECT_EQ(L.name, "01-a");
  EXPECT_EQ(L.title, "A lesson");
  EXPECT_EQ(L.minutes, 20);
  EXPECT_EQ(L.scene, fs::path("lessons/a.tttlab"));
  ASSERT_EQ(L.predictions.size(), 2u);
  const Prediction& p = L.predictions[0];
  EXPECT_EQ(p.id, "gap");
  ASSERT_EQ(p.choices.size(), 3u);
  EXPECT_EQ(p.choices[1].text, "Flat.");
  EXPECT_EQ(p.reveal, "It goes down, over many tokens.");
  EXPECT_EQ(p.right_choice(0.5), 0);
  EXPECT_EQ(p.right_choice(0.0), 1);
  EXPECT_EQ(p.right_choice(-0.5), 2);
  const Prediction& s = L.predictions[1];
  EXPECT_TRUE(s.is_slider());
  EXPECT_EQ(s.experiment, "other");
  EXPECT_DOUBLE_EQ(s.tolerance, 0.1);
  EXPECT_EQ(L.scene_of("other"), fs::path("lessons/b.tttlab"));
  ASSERT_EQ(L.questions.size(), 1u);
  EXPECT_EQ(L.questions[0].answer, "Because.");
  ASSERT_EQ(L.checks.size(), 1u);
  EXPECT_TRUE(L.checks[0].expect.holds(0.1));
  EXPECT_FALSE(L.checks[0].expect.holds(0.0));
  // Prose, predict, prose (with the sh block kept as code), question, check, predict.
  std::vector<LessonPart::Kind> kinds;
  for (const auto& part : L.parts) kinds.push_back(part.kind);
  const std::vector<LessonPart::Kind> want = {LessonPart::Kind::Markdown, LessonPart::Kind::Prediction,
                                              LessonPart::Kind::Markdown, LessonPart::Kind::Question,
                                              LessonPart::Kind::Check,    LessonPart::Kind::Prediction};
  EXPECT_EQ(kinds, want);
  EXPECT_NE(L.parts[2].markdown.find("tttlab lessons check 01"), std::string::npos);
}

TEST(CourseLesson, Expectations) {
  EXPECT_TRUE(Expectation::parse("<= 1e-12").holds(1e-12));
  EXPECT_FALSE(Expectation::parse("< 1e-12").holds(1e-12));
  EXPECT_TRUE(Expectation::parse("1 ± 0.1").holds(1.05));
  EXPECT_FALSE(Expectation::parse("1 +- 0.1").holds(1.2));
  EXPECT_TRUE(Expectation::parse("≥ 2").holds(2));
  EXPECT_FALSE(Expectation::parse("> 0").holds(std::nan("")));
  EXPECT_THROW(Expectation::parse("about 3"), LessonError);
  EXPECT_THROW(Expectation::parse("3 .. 1"), LessonError);
  EXPECT_THROW(Expectation::parse("> x"), LessonError);
}

// Each malformed lesson is refused with a message naming the file, the line and the problem.
TEST(CourseLesson, MalformedLessonsNameFileAndLine) {
  const std::string head = "---\ntitle: T\ngoal: G\nduration: 5\nscene: s.tttlab\n---\n";
  const std::string check = "```check\nclaim: c\nmeasure: m\nexpect: > 0\n```\n";
  const std::string predict = "```predict\nask: a\nmeasure: m\nchoice: x | > 0\nchoice: y | <= 0\n```\n";
  struct Case {
    std::string text, expect_in_message;
  };
  const std::vector<Case> cases = {
      {"# no front matter\n", "x.md:1: a lesson starts with its front matter"},
      {"---\ntitle: T\n", "no closing"},
      {"---\ntitle: T\ngoal: G\nscene: s.tttlab\n---\n" + predict + check, "duration"},
      {"---\ntitle: T\ngoal: G\nduration: soon\nscene: s.tttlab\n---\n", "x.md:4: duration"},
      {head + "```predcit\nask: a\n```\n" + predict + check, "x.md:7: unknown block \"```predcit\""},
      {head + "```predict\nask: a\nmeasure: m\nchoice: x > 0\nchoice: y | < 0\n```\n" + check, "x.md:10: a choice is"},
      {head + "```predict\nask: a\nmeasure: m\nchoice: only | > 0\n```\n" + check, "at least two"},
      {head + "```predict\nask: a\nmeasure: m\nwhen: x\n```\n" + check, "x.md:10: unknown key \"when\""},
      {head + predict + "```check\nclaim: c\nmeasure: m\nexpect: soon\n```\n", "x.md:16: \"soon\" is not an expectation"},
      {head + predict + "```check\nclaim: c\nexpect: > 0\n```\n", "x.md:13: the check block has no \"measure:\""},
      {head + predict + check + "```question\nask: q\nanswer: a\n```\n", "no \"hint:\""},
      {head + predict, "at least one claim"},
      {head + check, "at least one prediction"},
      {head + predict + "```check\nclaim: c\nexperiment: nope\nmeasure: m\nexpect: > 0\n```\n", "x.md:15: experiment: \"nope\""},
      {head + predict + check + "```question\nask: q\n", "not closed"},
      {head + "```predict\nask: a\nmeasure: m\nslider: 1 .. 0\ntolerance: 1\n```\n" + check, "empty"},
      {head + "```predict\nask: a\nmeasure: m\nslider: 0 .. 1\n```\n" + check, "tolerance"},
      {head + "```predict\nask: a\nmeasure: m\nchoice: x (under 40 %) | < 0.4\nchoice: y | >= 40\n```\n" + check,
       "x.md:11: the choices are written in percent"},
  };
  for (const auto& c : cases) {
    try {
      parse_lesson(c.text, "lessons/x.md");
      ADD_FAILURE() << "accepted:\n" << c.text;
    } catch (const LessonError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect_in_message), std::string::npos)
          << "message: " << e.what() << "\nexpected to contain: " << c.expect_in_message;
      EXPECT_EQ(std::string(e.what()).rfind("lessons/x.md:", 0), 0u) << e.what();
    }
  }
}

TEST(CourseLesson, ChoicesInPercentMarkTheMeasureAFraction) {
  const std::string head = "---\ntitle: T\ngoal: G\nduration: 5\nscene: s.tttlab\n---\n";
  const std::string check = "```check\nclaim: c\nmeasure: m\nexpect: > 0\n```\n";
  const Lesson L = parse_lesson(head +
                                    "```predict\nask: a\nmeasure: m\nchoice: Most (over 60 %). | > 0.6\n"
                                    "choice: Some. | 0.25 .. 0.6\nchoice: Few. | < 0.25\n```\n"
                                    "```predict\nask: b\nmeasure: n\nchoice: Up. | > 40\nchoice: Down. | <= 40\n```\n" +
                                    check,
                                "lessons/x.md");
  ASSERT_EQ(L.predictions.size(), 2u);
  EXPECT_TRUE(L.predictions[0].in_percent());
  EXPECT_FALSE(L.predictions[1].in_percent());
  Prediction slider;
  slider.unit = "%";
  EXPECT_FALSE(slider.in_percent()) << "a slider shows its own unit";
}

TEST(CourseLesson, CourseFindsLessonsByNameOrNumber) {
  const testing::TempDir tmp;
  const fs::path& dir = tmp.path();
  auto write = [&](const std::string& name, const std::string& text) {
    FILE* f = std::fopen((dir / name).string().c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  };
  write("03-good.md", kGood);
  write("04-bad.md", "no front matter\n");
  write("README.md", "# not a lesson\n");
  const Course c = load_course(dir);
  ASSERT_EQ(c.lessons.size(), 1u);
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_NE(c.errors[0].second.find("04-bad.md:1:"), std::string::npos);
  EXPECT_NE(c.find("03-good"), nullptr);
  EXPECT_NE(c.find("3"), nullptr);
  EXPECT_NE(c.find("03"), nullptr);
  EXPECT_EQ(c.find("4"), nullptr);
}

// The shipped course: every lesson parses, its scenes exist and are valid state files of a view that
// has measures, and every prediction and check names a measure that view offers.
TEST(CourseLesson, ShippedLessonsAreWellFormed) {
  const fs::path dir = fs::path(TTTLAB_SOURCE_DIR) / "lessons";
  const Course c = load_course(dir);
  for (const auto& [f, e] : c.errors) ADD_FAILURE() << e;
  EXPECT_FALSE(c.lessons.empty());
  auto known = [](const std::string& panel, const std::string& measure) {
    for (const auto& m : measures_of(panel)) {
      if (m.name == measure) return true;
      const auto lt = m.name.find('<');  // a family: loss_b<N>, bpb_<i>
      if (lt != std::string::npos && measure.rfind(m.name.substr(0, lt), 0) == 0) return true;
    }
    return false;
  };
  for (const auto& L : c.lessons) {
    auto panel_of = [&](const std::string& experiment) {
      const fs::path scene = L.scene_of(experiment);
      const auto state = lab::read_state_file(scene);  // throws on a bad scene
      return scene_panel(state);
    };
    for (const auto& p : L.predictions)
      EXPECT_TRUE(known(panel_of(p.experiment), p.measure)) << L.name << ": prediction " << p.id << " reads "
                                                            << p.measure;
    for (const auto& k : L.checks)
      EXPECT_TRUE(known(panel_of(k.experiment), k.measure)) << L.name << ":" << k.line << " checks " << k.measure;
  }
}

}  // namespace
}  // namespace tttlab::course
