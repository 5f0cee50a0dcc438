// Lesson 15 without training: the checkpoints of its run ship in assets/models/two-loops-run, and
// "Use the shipped run (no training)" replays them in the inner-loss curves as if the view followed the
// run. Driven here as the student drives it (LessonSession, the real lesson and scene, the real
// weights): both predictions are answered from the replay, inside the bands the lesson's reveals and
// checks state, and nothing trains.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "course/experiments.hpp"
#include "course/lesson.hpp"
#include "course/lesson_session.hpp"
#include "lab/engine/resources.hpp"
#include "lab/engine/engine.hpp"
#include "lab/engine/snapshot.hpp"
#include "lab/features.hpp"
#include "lab/inner_curves/curves_types.hpp"
#include "lab/models/model_library.hpp"
#include "lab/state/state_file.hpp"
#include "lab/training/training_types.hpp"

namespace tttlab::lab {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path kLesson = fs::path(TTTLAB_SOURCE_DIR) / "lessons" / "15-two-loops.md";

// The shipped weights and the Brown corpus are found from the repository, wherever the test runs.
bool repository_resources() {
  setenv("TTTLAB_HOME", TTTLAB_SOURCE_DIR, 0);
  return find_brown_dir().has_value();
}

TEST(ShippedRun, ListsTheLessonRunsCheckpointsByStepAndRefusesNamesOutsideAssets) {
  repository_resources();
  const auto c = shipped_run_checkpoints(std::string(kShippedRunPrefix) + "two-loops-run");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].step, 20);
  EXPECT_EQ(c[1].step, 120);
  EXPECT_THROW(shipped_run_checkpoints(std::string(kShippedRunPrefix) + "../models"), std::runtime_error);
  EXPECT_THROW(shipped_run_checkpoints(std::string(kShippedRunPrefix) + "no-such-run"), std::runtime_error);
  // A shipped model is not a run: it has no step folders.
  EXPECT_THROW(shipped_run_checkpoints(std::string(kShippedRunPrefix) + "tiny-brown"), std::runtime_error);
}

TEST(ShippedRun, LessonFifteenAnswersBothPredictionsFromTheShippedRunWithoutTraining) {
  if (!repository_resources()) GTEST_SKIP() << "the Brown corpus is not prepared (data/brown)";
  const course::Lesson L = course::read_lesson(kLesson);
  course::LessonSession s(L, nullptr);
  ASSERT_TRUE(s.offers_shipped_run(""));
  ASSERT_EQ(L.predictions.size(), 2u);
  // Any answers: the test is about what the replay measures, not the student's verdict.
  for (int i = 0; i < 2; ++i) {
    s.choose(i, 0);
    ASSERT_TRUE(s.lock(i));
  }

  Engine engine(make_engine_modules());
  engine.start();
  const auto scene = s.begin_run("", *engine.snapshot(), true);
  ASSERT_TRUE(scene) << s.run_error();
  EXPECT_EQ(fs::weakly_canonical(*scene), fs::weakly_canonical(L.scene));
  // What the app posts when it opens the scene file (the panel's own command): the view waits for a run.
  const nlohmann::json state = read_state_file(*scene);
  CurvesSettings cs;
  cs.model_id = state.at("panels").at(kInnerCurvesId).at("model_id").get<std::string>();
  cs.data = state.at("panels").at(kInnerCurvesId).at("data").get<std::string>();
  cs.seq_len = state.at("panels").at(kInnerCurvesId).at("seq_len").get<int>();
  cs.sequences = state.at("panels").at(kInnerCurvesId).at("sequences").get<int>();
  ASSERT_EQ(cs.model_id, kFollowTrainingId);
  engine.post(CurvesRun{cs});
  const auto t0 = std::chrono::steady_clock::now();
  while (s.running() && std::chrono::steady_clock::now() - t0 < 120s) {
    s.poll(*engine.snapshot(), engine.quiescent(), engine);
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_FALSE(s.running()) << "the replay did not finish within 120 s";
  EXPECT_EQ(s.run_error(), "");
  const auto snap = engine.snapshot();
  // Nothing trained: no run was started.
  ASSERT_TRUE(snap->training);
  EXPECT_TRUE(snap->training->runs.empty());
  engine.stop();

  const course::Measures* m = s.measures("");
  ASSERT_NE(m, nullptr);
  // The view followed the shipped checkpoints: step 20 first, then step 120, one reload.
  EXPECT_EQ(m->at("first_checkpoint_step").value, 20);
  EXPECT_EQ(m->at("followed_step").value, 120);
  EXPECT_EQ(m->at("reloads").value, 1);
  // The reveals: about nine tenths at step 20 (the "more than 70 %" choice), and a fall of about 13
  // points by step 120 (the "shrinks by more than 5 points" choice).
  for (int i = 0; i < 2; ++i) {
    const auto& p = L.predictions[static_cast<std::size_t>(i)];
    ASSERT_TRUE(s.prediction(i).revealed) << p.id << ": " << s.prediction(i).error;
    EXPECT_EQ(s.prediction(i).right_choice, static_cast<int>(p.choices.size()) - 1) << p.id;
  }
  EXPECT_NEAR(m->at("relative_gain_first_checkpoint").value, 0.90, 0.03);
  EXPECT_NEAR(m->at("relative_gain_change").value, -0.13, 0.03);
  // Every check on the lesson's own experiment holds for the replay as it does for the trained run.
  int checked = 0;
  for (std::size_t i = 0; i < L.checks.size(); ++i) {
    if (!L.checks[i].experiment.empty()) continue;
    const auto c = s.check(static_cast<int>(i));
    ASSERT_TRUE(c.known) << L.checks[i].claim;
    EXPECT_FALSE(c.missing) << L.checks[i].claim;
    EXPECT_TRUE(c.holds) << L.checks[i].claim << ": " << L.checks[i].measure << " = " << c.measured.value;
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

// The headless path (`tttlab lessons check`'s run_scene) replays the same way and gives the same values.
TEST(ShippedRun, RunSceneReplaysTheShippedRunLikeTheApp) {
  if (!repository_resources()) GTEST_SKIP() << "the Brown corpus is not prepared (data/brown)";
  const course::Lesson L = course::read_lesson(kLesson);
  const course::Measures a = course::run_scene(L.scene, 120s, {}, nullptr, true);
  const course::Measures b = course::run_scene(L.scene, 120s, {}, nullptr, true);
  EXPECT_EQ(a.at("followed_step").value, 120);
  // Deterministic: the same weights, windows and order give the same numbers.
  EXPECT_EQ(a.at("relative_gain").value, b.at("relative_gain").value);
  EXPECT_EQ(a.at("relative_gain_first_checkpoint").value, b.at("relative_gain_first_checkpoint").value);
  // A scene that follows no training run has no shipped run to use.
  const fs::path shipped = L.scene_of("shipped");
  EXPECT_EQ(course::scene_shipped_run(read_state_file(shipped)), "");
  EXPECT_THROW(course::run_scene(shipped, 60s, {}, nullptr, true), course::LessonError);
}

}  // namespace
}  // namespace tttlab::lab
