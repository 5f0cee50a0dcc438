// The sidebar's ENGINE box (engine_activity.hpp): a training run computes on its own thread while the
// engine thread sleeps, and the box must say so.
#include <gtest/gtest.h>

#include <memory>

#include "lab/engine/engine_activity.hpp"

namespace tttlab::lab {
namespace {

std::shared_ptr<const RunView> run(RunState state, long done, long total) {
  auto r = std::make_shared<RunView>();
  r->name = "ttt-linear-m-b16-1";
  r->state = state;
  r->steps_done = done;
  r->steps_total = total;
  return r;
}

Snapshot with_runs(std::vector<std::shared_ptr<const RunView>> runs) {
  auto v = std::make_shared<TrainingView>();
  v->runs = std::move(runs);
  Snapshot s;
  s.training = v;
  return s;
}

TEST(EngineActivity, ATrainingRunIsActivityWhileTheEngineThreadSleeps) {
  const EngineActivity a = engine_activity(with_runs({run(RunState::Running, 120, 1000)}), true);
  EXPECT_TRUE(a.busy());
  EXPECT_STREQ(a.word(), "training");
  ASSERT_EQ(a.items.size(), 1u);
  EXPECT_EQ(a.items[0].label, "Training ttt-linear-m-b16-1: step 120 of 1000");
  EXPECT_DOUBLE_EQ(a.items[0].progress, 0.12);
  EXPECT_EQ(a.items[0].cancel, 0u) << "a run is stopped from the Training panel, not cancelled as a job";
}

TEST(EngineActivity, FinishedAndPausedRunsAreNotActivity) {
  const EngineActivity a =
      engine_activity(with_runs({run(RunState::Finished, 1000, 1000), run(RunState::Paused, 10, 1000)}), true);
  EXPECT_FALSE(a.busy());
  EXPECT_STREQ(a.word(), "idle");
  EXPECT_TRUE(a.items.empty());
  EXPECT_EQ(a.sentence(), "The engine is idle");
}

TEST(EngineActivity, JobsComeFirstAndCanBeCancelled) {
  Snapshot s = with_runs({run(RunState::Starting, 0, 50)});
  s.jobs.push_back({7, "Mini-batch sweep: b = 1 … 64", 0.5, JobOutcome::Running, ""});
  s.jobs.push_back({6, "Evaluation: 2 models", 1.0, JobOutcome::Done, ""});
  const EngineActivity a = engine_activity(s, false);
  EXPECT_STREQ(a.word(), "working");
  ASSERT_EQ(a.items.size(), 2u) << "the finished job is not listed";
  EXPECT_EQ(a.items[0].cancel, 7u);
  EXPECT_EQ(a.items[1].label, "Training ttt-linear-m-b16-1: step 0 of 50");
}

}  // namespace
}  // namespace tttlab::lab
