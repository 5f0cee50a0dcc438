// app/lab/engine/command.hpp — the messages the UI sends to the engine thread.
//
// The UI never touches engine state. A panel posts a Command to a CommandSink; the engine thread
// drains its queue between work items, in order, and the effect shows up in a later Snapshot.
// Commands are plain values (std::variant), so they can be recorded, replayed and tested without
// a window. Add a new command type to the variant; the module that owns it handles it.
#pragma once

#include <cstdint>
#include <variant>

#include "lab/engine/compute_device.hpp"
#include "lab/engine/job.hpp"
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

// Stop a running job (see JobStatus in snapshot.hpp). A no-op when it already finished.
struct CancelJob {
  JobId id = 0;
};

using Command = std::variant<CancelJob, LibraryOpen, LibraryLoad, StepperConfigure, StepperTransport,
                             StepperSetSpeed, PrimalDualRun, EvolutionConfigure, CurvesRun, SweepRun,
                             TrainStart, TrainControl, TrainOpen, EvaluationRun, GenerateStart, GenerateStop,
                             NonparametricRun, RecallRun, DesignerRun, LatencyRun, SetComputeDevice>;

// Where panels send commands. Engine implements it; tests use a recording sink.
// Thread-safety: post() may be called from any thread and never blocks on engine work.
class CommandSink {
 public:
  virtual ~CommandSink() = default;
  virtual void post(Command command) = 0;
};

}  // namespace tttlab::lab
