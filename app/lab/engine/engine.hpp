// app/lab/engine/engine.hpp — the engine thread: owns all engine state, takes commands, publishes
// snapshots. The UI thread never waits on it.
//
//   UI thread                              engine thread (Engine::run)
//   ─────────                              ───────────────────────────
//   engine.post(cmd) ──► command queue ──► drain all commands, in order  (EngineModule::handle)
//                                          run one work item per module that has work due
//                                          publish a new Snapshot if anything changed
//   engine.snapshot() ◄── latest Snapshot ◄┘  (≤ ~120 per second; immediately when going idle)
//                                          sleep until a command arrives or a module's wake-up time
//
// Modules (EngineModule) are the engine-side halves of panels: a module owns its state, handles the
// commands addressed to it, splits long computations into work items of a few milliseconds (so new
// commands are seen promptly), and writes its immutable view into each new Snapshot.
//
// Jobs: a module registers long computations as jobs (ModuleContext::begin_job); the snapshot lists
// them with progress. Cancelling (post(CancelJob{id})) sets the job's flag at once, from the calling
// thread, so even a work item that is in progress can stop at its next cancel_requested() check.
//
// Threading: post(), snapshot(), quiescent() and wait_quiescent() are safe from any thread. A
// module's methods run only on the engine thread. post() and snapshot() take one short mutex each
// and never wait for engine work.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "lab/engine/command.hpp"
#include "lab/engine/job.hpp"
#include "lab/engine/snapshot.hpp"

namespace tttlab::lab {

using Clock = std::chrono::steady_clock;

class Engine;

// What a module may do while handling a command or running a work item (engine thread only, except
// cancel_requested(), which any thread may call).
class ModuleContext {
 public:
  JobId begin_job(std::string label);
  void set_progress(JobId id, double progress);
  void finish_job(JobId id, JobOutcome outcome, std::string message = {});
  bool cancel_requested(JobId id) const;
  // This module's view changed: include it in the next snapshot.
  void mark_dirty() { m_dirty = true; }

 private:
  friend class Engine;
  ModuleContext(Engine& e) : m_engine(&e) {}
  Engine* m_engine;
  bool m_dirty = true;  // publish every module's initial view
};

// One job at a time for a job-style module, with the JobView of the module's view kept in step:
// a new request supersedes the running job (which ends Cancelled, saying so), and however a job
// ends, the view says how. Engine thread only.
class JobSlot {
 public:
  bool running() const { return m_id != 0; }
  JobId id() const { return m_id; }
  // Ends the running job, if any, as Cancelled: a newer request replaces it.
  void supersede(ModuleContext& ctx, std::string why = "superseded by a new request");
  // Starts a job: `start()` checks the request and prepares the job, returning the job's label for
  // the status area. If it throws, no job starts and the view says Failed and why.
  template <class Start>
  void start(ModuleContext& ctx, JobView& view, Start&& start) {
    try {
      begin(ctx, view, start());
    } catch (const std::exception& e) {
      view.outcome = JobOutcome::Failed;
      view.error = e.what();
    }
  }
  // One work item: ends the job as Cancelled when asked to, as Failed when `step()` throws, and as
  // Done when `step()` returns true (it finished).
  template <class Step>
  void step(ModuleContext& ctx, JobView& view, Step&& step) {
    if (ctx.cancel_requested(m_id)) return finish(ctx, view, JobOutcome::Cancelled, "cancelled");
    try {
      if (step()) finish(ctx, view, JobOutcome::Done);
    } catch (const std::exception& e) {
      finish(ctx, view, JobOutcome::Failed, e.what());
    }
  }
  // Registers a job whose request was checked: the view says Running.
  void begin(ModuleContext& ctx, JobView& view, std::string label);
  void set_progress(ModuleContext& ctx, JobView& view, double progress);
  bool cancel_requested(const ModuleContext& ctx) const { return ctx.cancel_requested(m_id); }
  // Ends the job with `outcome`; a Failed job's message becomes the view's error.
  void finish(ModuleContext& ctx, JobView& view, JobOutcome outcome, std::string message = {});

 private:
  JobId m_id = 0;
};

class EngineModule {
 public:
  virtual ~EngineModule() = default;
  virtual const char* name() const = 0;
  // Handles `command` if it belongs to this module; returns whether it did.
  virtual bool handle(const Command& command, ModuleContext& ctx) = 0;
  // Whether a work item should run now.
  virtual bool has_work(Clock::time_point now) const = 0;
  // When the module next wants to run without a command (e.g. the next playback tick).
  virtual std::optional<Clock::time_point> next_wakeup() const { return std::nullopt; }
  // One bounded work item (aim for a few milliseconds).
  virtual void work(ModuleContext& ctx) = 0;
  // Writes this module's view into a snapshot being built (called after mark_dirty()).
  virtual void publish(Snapshot& snapshot) const = 0;
  // Whether the module still has timed work ahead that a screenshot should wait for (playback that
  // ends, text being generated). Modules whose timed work may never end (a training run) say no.
  virtual bool awaiting_more() const { return next_wakeup().has_value(); }
  // Called after every pass of the engine loop (commands and work items of all modules), e.g. to
  // notice state that other modules share (the model library). It may start work (has_work() is
  // asked again before the engine sleeps).
  virtual void after_iteration(ModuleContext& /*ctx*/) {}
};

// The modules of the app: the compute module, each feature's module in the order of lab/features.cpp,
// then the model library's (defined there). `devices`: where the panels and training runs may compute
// (compute_device.hpp; empty: the CPU only).
struct ComputeDevices;
std::vector<std::unique_ptr<EngineModule>> make_engine_modules(const ComputeDevices& devices);
std::vector<std::unique_ptr<EngineModule>> make_engine_modules();  // the CPU only

class Engine final : public CommandSink {
 public:
  explicit Engine(std::vector<std::unique_ptr<EngineModule>> modules);
  ~Engine() override;  // stop()s
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void start();  // spawns the engine thread
  void stop();   // asks the thread to finish its current work item and joins it

  void post(Command command) override;
  std::shared_ptr<const Snapshot> snapshot() const;

  // True when every posted command was handled, the result published, and no module has work due.
  bool quiescent() const;
  // quiescent(), and no module awaits more timed work (EngineModule::awaiting_more): the picture will
  // not change by itself any more. For screenshots.
  bool settled() const;
  // Blocks the CALLER until quiescent() or the timeout. For tests, screenshots and benchmarks only;
  // the interactive UI never calls it.
  bool wait_quiescent(std::chrono::milliseconds timeout) const;

  // Called on the engine thread after each publication (e.g. to wake the UI's event loop).
  void set_publish_callback(std::function<void()> callback);

 private:
  friend class ModuleContext;
  struct Job {
    JobStatus status;
    std::shared_ptr<std::atomic<bool>> cancel;
    Clock::time_point finished{};
  };

  void run();
  void dispatch(const Command& c);
  void publish();

  std::vector<std::unique_ptr<EngineModule>> m_modules;
  std::vector<ModuleContext> m_contexts;

  // Command queue (UI → engine).
  mutable std::mutex m_queue_mu;
  mutable std::condition_variable m_queue_cv;
  std::deque<Command> m_queue;
  std::uint64_t m_posted = 0;   // commands posted
  std::uint64_t m_drained = 0;  // commands handled and published when the thread last went idle
  bool m_sleeping = false;
  bool m_settled = false;  // when it went to sleep, no module awaited more timed work
  bool m_stop = false;

  // Latest snapshot (engine → UI).
  mutable std::mutex m_snapshot_mu;
  std::shared_ptr<const Snapshot> m_snapshot;
  std::function<void()> m_on_publish;

  // Jobs: status is engine-thread only; cancel flags are shared with post().
  mutable std::mutex m_jobs_mu;
  std::unordered_map<JobId, Job> m_jobs;
  JobId m_next_job = 1;
  bool m_jobs_dirty = false;

  EngineStats m_stats;
  std::deque<std::pair<Clock::time_point, double>> m_busy;  // (end, ms) of recent work items
  Clock::time_point m_last_publish{};
  std::thread m_thread;
};

}  // namespace tttlab::lab
