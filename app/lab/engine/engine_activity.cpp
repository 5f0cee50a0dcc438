#include "lab/engine/engine_activity.hpp"

namespace tttlab::lab {

const char* EngineActivity::word() const {
  switch (state) {
    case State::Working: return "working";
    case State::Training: return "training";
    case State::Idle: break;
  }
  return "idle";
}

std::string EngineActivity::sentence() const {
  switch (state) {
    case State::Working: return "The engine is working";
    case State::Training: return "A training run is computing";
    case State::Idle: break;
  }
  return "The engine is idle";
}

EngineActivity engine_activity(const Snapshot& snap, bool engine_quiescent) {
  EngineActivity a;
  for (const auto& j : snap.jobs)
    if (j.outcome == JobOutcome::Running) a.items.push_back({j.label, j.progress, j.id});
  bool training = false;
  if (snap.training)
    for (const auto& r : snap.training->runs) {
      if (!r->active()) continue;
      training = true;
      const double progress =
          r->steps_total > 0 ? static_cast<double>(r->steps_done) / static_cast<double>(r->steps_total) : 0.0;
      a.items.push_back({"Training " + r->name + ": step " + std::to_string(r->steps_done) + " of " +
                             std::to_string(r->steps_total),
                         progress, 0});
    }
  if (!engine_quiescent)
    a.state = EngineActivity::State::Working;
  else if (training)
    a.state = EngineActivity::State::Training;
  return a;
}

}  // namespace tttlab::lab
