// app/lab/engine/engine_activity.hpp — what the sidebar's ENGINE box says, derived from one snapshot.
//
// The engine thread goes quiet while a training run computes on its own worker thread, so "is the
// engine thread quiescent" alone would call the app idle in the middle of a run. The activity joins
// the engine thread's state, its cancellable jobs and the training runs that are computing.
#pragma once

#include <string>
#include <vector>

#include "lab/engine/snapshot.hpp"

namespace tttlab::lab {

struct ActivityItem {
  std::string label;    // "Mini-batch sweep: b = 1 … 64", "Training ttt-linear-m-b16-1: step 120 of 1000"
  double progress = 0;  // 0..1
  JobId cancel = 0;     // the job a Cancel button stops; 0: none (a run stops from the Training panel)
};

struct EngineActivity {
  enum class State { Idle, Working, Training };
  State state = State::Idle;
  std::vector<ActivityItem> items;  // running jobs, then training runs that compute

  bool busy() const { return state != State::Idle; }
  // "idle", "working", "training": the word beside the status dot.
  const char* word() const;
  // One line for a tooltip: "The engine is idle", "A training run is computing", …
  std::string sentence() const;
};

// engine_quiescent: Engine::quiescent() for the frame that drew `snapshot`.
EngineActivity engine_activity(const Snapshot& snapshot, bool engine_quiescent);

}  // namespace tttlab::lab
