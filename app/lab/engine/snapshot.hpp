// app/lab/engine/snapshot.hpp — the immutable picture of the engine that the UI draws from.
//
// The engine thread publishes a new Snapshot whenever something changed (at most ~120 per second);
// the UI takes the latest one once per frame (Engine::snapshot()) and reads it for the whole frame.
// A Snapshot is never modified after publication: each part is a shared_ptr<const …>, and a new
// snapshot shares every part that did not change with the previous one, so publishing is cheap and a
// frame never sees a half-updated state. Holding a snapshot keeps its data alive; nothing else does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/engine/compute_device.hpp"
#include "lab/designer/designer_types.hpp"
#include "lab/inner_curves/curves_types.hpp"
#include "lab/latency/latency_types.hpp"
#include "lab/evaluation/evaluation_types.hpp"
#include "lab/evolution/evolution_types.hpp"
#include "lab/generation/generation_types.hpp"
#include "lab/models/library_types.hpp"
#include "lab/minibatch/minibatch_types.hpp"
#include "lab/nonparametric/nonparametric_types.hpp"
#include "lab/primal_dual/primal_dual_types.hpp"
#include "lab/recall/recall_types.hpp"
#include "lab/inner_stepper/stepper_types.hpp"
#include "lab/training/training_types.hpp"

namespace tttlab::lab {

// A unit of engine work that the UI can watch and cancel (shown in the status area).
struct JobStatus {
  JobId id = 0;
  std::string label;
  double progress = 0;  // 0..1
  JobOutcome outcome = JobOutcome::Running;
  std::string message;  // why it failed / was cancelled
};

struct EngineStats {
  std::uint64_t commands = 0;       // commands handled since start
  std::uint64_t work_items = 0;     // work items run since start
  double busy_ms_last_second = 0;   // engine time spent working in the last second
};

struct Snapshot {
  std::uint64_t version = 0;  // increases with every publication
  std::shared_ptr<const LibraryStatus> library;
  std::shared_ptr<const StepperView> stepper;
  std::shared_ptr<const PrimalDualView> primal_dual;
  std::shared_ptr<const EvolutionView> evolution;
  std::shared_ptr<const CurvesView> curves;
  std::shared_ptr<const MiniBatchView> minibatch;
  std::shared_ptr<const TrainingView> training;
  std::shared_ptr<const EvaluationView> evaluation;
  std::shared_ptr<const GenerationView> generation;
  std::shared_ptr<const NonparametricView> nonparametric;
  std::shared_ptr<const RecallView> recall;
  std::shared_ptr<const DesignerView> designer;
  std::shared_ptr<const LatencyView> latency;
  std::shared_ptr<const ComputeView> compute;  // which device the panels compute on
  std::vector<JobStatus> jobs;  // running jobs and those finished in the last few seconds
  EngineStats stats;
};

}  // namespace tttlab::lab
