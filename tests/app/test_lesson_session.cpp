// A lesson as the student works through it (app/course/lesson_session.hpp): the veil while a
// prediction not locked in asks about the view, the lesson read only up to that prediction, checks
// that wait for the predictions above them, a first answer that stays final, a real experiment on the engine revealing the prediction and the
// check, the answers recorded in the course progress and restored from it, and a view (the stepper)
// whose panel computes less than its measures need.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <unistd.h>

#include "core/io/temp_dir.hpp"
#include "course/experiments.hpp"
#include "course/lesson.hpp"
#include "course/progress.hpp"
#include "lab/engine/engine.hpp"
#include "lab/engine/head_config.hpp"
#include "course/lesson_session.hpp"
#include "lab/state/state_file.hpp"

namespace tttlab::lab {
namespace {

using namespace tttlab::course;  // the lessons and classroom mode, over the lab

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using tttlab::testing::TempDir;  // tests/core/io/temp_dir.hpp

using tttlab::testing::write;

// The primal-vs-dual comparison on a toy head of 8 tokens: done in milliseconds.
const char* kPrimalDualScene = R"({
  "format": "tttlab-state", "version": 1, "active_panel": "primal_dual",
  "panels": { "primal_dual": {
    "head": { "source": "toy", "text": "the moon", "repeat": 1, "seed": 7, "model": "linear", "d": 4,
              "mini_batch": 4, "eta_base": 1.0, "gate": "fixed", "token_index": true, "layer_norm": false,
              "residual": false, "bias": false, "w0": "random" },
    "precision": "double", "timing_reps": 3, "linear_attention": false } }
})";

const char* kLesson = R"(---
title: Two forms, one answer
goal: Test the lesson session.
duration: 10
scene: scene.tttlab
---
# 1. Two forms, one answer

Some text.

```predict
id: equal
ask: How far apart are the two forms?
measure: max_rel_diff
choice: Rounding only. | <= 1e-12
choice: Further apart. | > 1e-12
reveal: Rounding only.
```

```check
claim: The forms agree to rounding.
measure: max_rel_diff
expect: <= 1e-12
```

```question
ask: Why?
hint: Algebra.
answer: The dual form reorders the sums.
```

```predict
id: tokens
ask: How many tokens does the text have?
measure: tokens
slider: 0 .. 100
tolerance: 1
unit: tokens
```
)";

// Polls like the app does once per frame until the run ends (or 60 s pass).
void run_to_end(LessonSession& s, Engine& engine) {
  const auto t0 = std::chrono::steady_clock::now();
  while (s.running() && std::chrono::steady_clock::now() - t0 < 60s) {
    s.poll(*engine.snapshot(), engine.quiescent(), engine);
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_FALSE(s.running()) << "the experiment did not finish within 60 s";
}

course::Lesson write_lesson(const fs::path& dir, const std::string& lesson, const std::string& scene) {
  write(dir / "scene.tttlab", scene);
  write(dir / "01-test.md", lesson);
  return course::read_lesson(dir / "01-test.md");
}

TEST(LessonSession, PredictLockRunRevealAndRecord) {
  TempDir dir;
  const course::Lesson L = write_lesson(dir.path(), kLesson, kPrimalDualScene);
  course::ProgressStore store(dir.path() / "progress.json");
  LessonSession s(L, &store);

  // The title is the pane's header: the text does not repeat it.
  ASSERT_FALSE(s.part_doc(0).blocks.empty());
  EXPECT_FALSE(s.part_doc(0).blocks.front().kind == MdBlockKind::Heading && s.part_doc(0).blocks.front().level == 1);

  EXPECT_TRUE(s.veiled()) << "the view stays veiled until the predictions on it are locked in";
  EXPECT_EQ(s.visible_parts(), 2u) << "the lesson is read up to its first prediction";
  EXPECT_FALSE(s.check_open(0));
  EXPECT_FALSE(s.lock(0)) << "nothing chosen yet";
  s.choose(0, 0);
  ASSERT_TRUE(s.lock(0));
  EXPECT_TRUE(s.veiled()) << "the second prediction asks about the same view";
  EXPECT_EQ(s.visible_parts(), L.parts.size()) << "the rest of the lesson, up to the slider, is shown";
  s.choose(0, 1);
  EXPECT_EQ(s.prediction(0).choice, 0) << "a locked prediction does not change";
  {
    const course::ProgressStore reread(dir.path() / "progress.json");
    ASSERT_NE(reread.lesson("01-test"), nullptr) << "locking in is saved at once";
    EXPECT_FALSE(reread.lesson("01-test")->predictions.at("equal").revealed);
  }
  EXPECT_TRUE(s.check_would_spoil(0)) << "the check on the same value waits for the reveal";

  Engine engine(make_engine_modules());
  engine.start();
  const auto scene = s.begin_run("", *engine.snapshot());
  ASSERT_TRUE(scene) << s.run_error();
  EXPECT_EQ(*scene, L.scene);
  EXPECT_TRUE(s.running());
  course::post_scene(read_state_file(*scene), engine);  // what opening the scene makes the panel post
  run_to_end(s, engine);

  EXPECT_EQ(s.run_error(), "");
  const auto& p = s.prediction(0);
  ASSERT_TRUE(p.revealed);
  EXPECT_LE(p.measured, 1e-12);
  EXPECT_EQ(p.right_choice, 0);
  EXPECT_TRUE(p.right);
  EXPECT_FALSE(s.prediction(1).revealed) << "a prediction not locked in is never revealed";
  EXPECT_TRUE(s.check_would_spoil(0) == false && s.check_open(0));
  const auto c = s.check(0);
  EXPECT_TRUE(c.known);
  EXPECT_TRUE(c.holds);
  EXPECT_FALSE(s.check_would_spoil(0));
  ASSERT_NE(s.measures(""), nullptr);
  EXPECT_DOUBLE_EQ(s.measures("")->at("tokens").value, 8.0);

  // The slider, locked after the first run: the next run reveals it (8 tokens, tolerance 1).
  s.set_value(1, 8.5);
  ASSERT_TRUE(s.lock(1));
  EXPECT_FALSE(s.veiled()) << "every prediction on the view is locked in";
  ASSERT_TRUE(s.begin_run("", *engine.snapshot()));
  course::post_scene(read_state_file(L.scene), engine);
  run_to_end(s, engine);
  ASSERT_TRUE(s.prediction(1).revealed);
  EXPECT_TRUE(s.prediction(1).right);
  EXPECT_DOUBLE_EQ(s.prediction(1).measured, 8.0);

  s.set_finished(true);
  engine.stop();

  // Everything is in the progress file, and a new session restores it.
  const course::ProgressStore reread(dir.path() / "progress.json");
  EXPECT_EQ(reread.error(), "");
  const course::LessonProgress* lp = reread.lesson("01-test");
  ASSERT_NE(lp, nullptr);
  EXPECT_TRUE(lp->finished);
  const course::PredictionRecord& r = lp->predictions.at("equal");
  EXPECT_EQ(r.choice, 0);
  EXPECT_TRUE(r.revealed);
  EXPECT_TRUE(r.right);
  EXPECT_LE(r.measured, 1e-12);
  EXPECT_DOUBLE_EQ(lp->predictions.at("tokens").value, 8.5);

  course::ProgressStore again(dir.path() / "progress.json");
  LessonSession restored(L, &again);
  EXPECT_FALSE(restored.veiled());
  EXPECT_TRUE(restored.prediction(0).locked);
  EXPECT_TRUE(restored.prediction(0).revealed);
  EXPECT_TRUE(restored.prediction(0).right);
  EXPECT_EQ(restored.prediction(0).right_choice, 0);
  EXPECT_DOUBLE_EQ(restored.prediction(1).value, 8.5);
  EXPECT_TRUE(restored.finished());

  // "Predict again" unlocks the prediction, but the first answer stays on record; the new answer is a
  // retry, judged when it is measured, and a new session restores it with the first answer beside it.
  restored.forget(0);
  EXPECT_TRUE(restored.veiled());
  EXPECT_EQ(restored.visible_parts(), 2u);
  {
    const course::ProgressStore file(dir.path() / "progress.json");
    const course::PredictionRecord& kept = file.lesson("01-test")->predictions.at("equal");
    EXPECT_EQ(kept.choice, 0);
    EXPECT_TRUE(kept.right);
    EXPECT_FALSE(kept.committed_at.empty());
    EXPECT_TRUE(kept.retries.empty());
  }
  restored.choose(0, 1);
  ASSERT_TRUE(restored.lock(0));
  course::Measures m;
  m["max_rel_diff"] = course::Measurement{1e-16, std::nullopt, std::nullopt, false};
  m["tokens"] = course::Measurement{8, std::nullopt, std::nullopt, false};
  restored.apply_measures("", m);
  EXPECT_FALSE(restored.prediction(0).right) << "the retry chose the wrong answer";
  {
    const course::ProgressStore file(dir.path() / "progress.json");
    const course::PredictionRecord& kept = file.lesson("01-test")->predictions.at("equal");
    EXPECT_EQ(kept.choice, 0) << "the first answer is final";
    EXPECT_TRUE(kept.right) << "and keeps its verdict";
    ASSERT_EQ(kept.retries.size(), 1u);
    EXPECT_EQ(kept.retries[0].choice, 1);
    EXPECT_FALSE(kept.retries[0].right);
    EXPECT_FALSE(kept.retries[0].at.empty());
  }
  course::ProgressStore third(dir.path() / "progress.json");
  LessonSession again2(L, &third);
  EXPECT_EQ(again2.prediction(0).choice, 1) << "the answer locked in last is the one shown";
  EXPECT_EQ(again2.record(0).choice, 0);
  EXPECT_EQ(again2.record(0).retries.size(), 1u);
}

// Each prediction veils the view while it shows the experiment the prediction asks about; a check
// opens only below locked predictions, whatever was measured before.
TEST(LessonSession, EachPredictionVeilsItsOwnExperimentAndGatesTheChecksBelowIt) {
  TempDir dir;
  write(dir.path() / "other.tttlab", kPrimalDualScene);
  const std::string lesson = std::string(kLesson) + R"(
```experiment
id: other
scene: other.tttlab
```

```check
claim: The other view has eight tokens.
experiment: other
measure: tokens
expect: 7.5 .. 8.5
```

```predict
id: other-diff
ask: And in the other view?
experiment: other
measure: max_rel_diff
choice: Rounding only. | <= 1e-12
choice: Further apart. | > 1e-12
```
)";
  const course::Lesson L = write_lesson(dir.path(), lesson, kPrimalDualScene);
  LessonSession s(L, nullptr);
  course::Measures m;
  m["max_rel_diff"] = course::Measurement{1e-16, std::nullopt, std::nullopt, false};
  m["tokens"] = course::Measurement{8, std::nullopt, std::nullopt, false};
  // Measured before any prediction ("Check it now" pressed early): nothing may show yet.
  s.apply_measures("", m);
  s.apply_measures("other", m);
  for (int c = 0; c < 2; ++c) {
    EXPECT_FALSE(s.check_open(c));
    EXPECT_FALSE(s.check(c).known) << "check " << c << " shows nothing before the predictions above it";
  }
  s.choose(0, 0);
  ASSERT_TRUE(s.lock(0));
  EXPECT_FALSE(s.check(0).known) << "its prediction is locked but not revealed yet";
  s.apply_measures("", m);
  EXPECT_TRUE(s.check(0).known);
  EXPECT_FALSE(s.check(1).known) << "the slider above it is not locked in";
  s.set_value(1, 8);
  ASSERT_TRUE(s.lock(1));
  EXPECT_FALSE(s.veiled()) << "no prediction left on the lesson's own view";
  EXPECT_TRUE(s.check(1).known);
  EXPECT_TRUE(s.check(1).holds);

  // The view opens the other experiment: its prediction veils it again.
  s.scene_opened(dir.path() / "other.tttlab");
  ASSERT_TRUE(s.view_experiment());
  EXPECT_EQ(*s.view_experiment(), "other");
  EXPECT_TRUE(s.veiled());
  s.scene_opened(dir.path() / "scene.tttlab");
  EXPECT_FALSE(s.veiled());
  Engine engine(make_engine_modules());
  ASSERT_TRUE(s.begin_run("other", *engine.snapshot()));
  s.cancel_run();
  EXPECT_TRUE(s.veiled()) << "a run opens its experiment's view";
  s.scene_opened(dir.path() / "01-test.md");
  EXPECT_FALSE(s.view_experiment()) << "not one of the lesson's scenes";
  EXPECT_FALSE(s.veiled());
  s.choose(2, 0);
  ASSERT_TRUE(s.lock(2));
  s.view_opened("other");
  EXPECT_FALSE(s.veiled());
  EXPECT_EQ(s.visible_parts(), L.parts.size());
}

TEST(LessonSession, RevealJudgesSlidersAndChoicesAndReportsMissingMeasures) {
  TempDir dir;
  const course::Lesson L = write_lesson(dir.path(), kLesson, kPrimalDualScene);
  LessonSession s(L, nullptr);  // no progress kept: nothing is recorded, nothing fails
  s.choose(0, 0);
  ASSERT_TRUE(s.lock(0));
  s.set_value(1, 40.0);
  ASSERT_TRUE(s.lock(1));

  course::Measures m;
  m["max_rel_diff"] = course::Measurement{3e-3, std::nullopt, std::nullopt, false};
  m["tokens"] = course::Measurement{42.5, 41.0, 44.0, false};
  s.apply_measures("", m);
  EXPECT_TRUE(s.prediction(0).revealed);
  EXPECT_EQ(s.prediction(0).right_choice, 1);
  EXPECT_FALSE(s.prediction(0).right) << "the student chose 0, the measurement supports 1";
  EXPECT_FALSE(s.prediction(1).right) << "|40 − 42.5| > 1";
  EXPECT_EQ(s.prediction(1).lo, 41.0);
  EXPECT_EQ(s.prediction(1).hi, 44.0);
  EXPECT_FALSE(s.check(0).holds);

  s.forget(1);
  s.set_value(1, 42.0);
  ASSERT_TRUE(s.lock(1));
  s.apply_measures("", m);
  EXPECT_TRUE(s.prediction(1).right) << "|42 − 42.5| ≤ 1";

  // Measures of another experiment reveal nothing here; a measure the experiment lacks is reported.
  s.forget(0);
  s.choose(0, 1);
  ASSERT_TRUE(s.lock(0));
  s.apply_measures("other", m);
  EXPECT_FALSE(s.prediction(0).revealed);
  s.apply_measures("", course::Measures{});
  EXPECT_FALSE(s.prediction(0).revealed);
  EXPECT_FALSE(s.prediction(0).error.empty());
  EXPECT_FALSE(s.check(0).known) << "its prediction is not revealed: the check on the same value waits";
  EXPECT_FALSE(s.finished());

  // An experiment the lesson does not have cannot start.
  Engine engine(make_engine_modules());
  EXPECT_FALSE(s.begin_run("no-such-experiment", *engine.snapshot()));
  EXPECT_NE(s.run_error().find("could not start"), std::string::npos) << s.run_error();
  EXPECT_FALSE(s.running());
}

// The stepper panel computes up to its cursor only; its measures need every token. The session posts
// the scene itself once the engine has gone quiet with the measures incomplete.
TEST(LessonSession, CompletesAViewWhosePanelComputesLessThanTheMeasuresNeed) {
  TempDir dir;
  HeadConfig h;
  h.source = HeadSource::Toy;
  h.text = "abcdabcdabcdabcd";
  h.d = 4;
  h.mini_batch = 4;
  nlohmann::json scene = {{"format", "tttlab-state"},
                          {"version", 1},
                          {"active_panel", "inner_stepper"},
                          {"panels", {{"inner_stepper", {{"cursor", 2}, {"head", to_json(h)}}}}}};
  const std::string lesson = R"(---
title: Stepper
goal: Test.
duration: 5
scene: scene.tttlab
---
Text.

```predict
id: n
ask: How many tokens?
measure: tokens
slider: 0 .. 32
tolerance: 0.5
```

```check
claim: Sixteen tokens.
measure: tokens
expect: 15.5 .. 16.5
```
)";
  const course::Lesson L = write_lesson(dir.path(), lesson, scene.dump());
  LessonSession s(L, nullptr);
  s.set_value(0, 16);
  ASSERT_TRUE(s.lock(0));
  Engine engine(make_engine_modules());
  engine.start();
  ASSERT_TRUE(s.begin_run("", *engine.snapshot())) << s.run_error();
  engine.post(StepperConfigure{h, 2});  // what the stepper panel posts for this scene: three tokens
  run_to_end(s, engine);
  EXPECT_EQ(s.run_error(), "");
  ASSERT_TRUE(s.prediction(0).revealed);
  EXPECT_DOUBLE_EQ(s.prediction(0).measured, 16.0);
  EXPECT_TRUE(s.prediction(0).right);

  // Asking again for exactly what the view shows keeps its generation: the quiet engine ends the run.
  s.forget(0);
  s.set_value(0, 3);
  ASSERT_TRUE(s.lock(0));
  ASSERT_TRUE(s.begin_run("", *engine.snapshot()));
  course::post_scene(scene, engine);
  run_to_end(s, engine);
  ASSERT_TRUE(s.prediction(0).revealed);
  EXPECT_FALSE(s.prediction(0).right);
  engine.stop();
}

}  // namespace
}  // namespace tttlab::lab
