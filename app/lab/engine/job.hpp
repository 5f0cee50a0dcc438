// app/lab/engine/job.hpp — what every job-style module shares: a job's id and outcome, and the part
// of a view that says how its last request went (JobView). The slot that runs one job at a time for
// a module is JobSlot (engine.hpp), which needs the engine's ModuleContext.
#pragma once

#include <cstdint>
#include <string>

namespace tttlab::lab {

using JobId = std::uint64_t;

enum class JobOutcome { None, Running, Done, Cancelled, Failed };

// The head of a job-style module's view: which request it shows and how that request went. A new
// request increments `generation`; the panels compare it to tell a fresh result from an old one.
struct JobView {
  std::uint64_t generation = 0;  // increments with every new request
  JobOutcome outcome = JobOutcome::None;
  double progress = 0;  // 0..1 while running
  std::string error;    // Failed: why
};

}  // namespace tttlab::lab
