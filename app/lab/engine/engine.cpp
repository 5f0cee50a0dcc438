#include "lab/engine/engine.hpp"

#include <algorithm>

namespace tttlab::lab {
namespace {

// Publication rate limit while work is ongoing: enough for smooth animation, far below the cost of
// copying a Snapshot (a few shared_ptrs).
constexpr auto kMinPublishInterval = std::chrono::milliseconds(8);
// Finished jobs stay listed this long so the UI can show how they ended.
constexpr auto kFinishedJobLinger = std::chrono::seconds(10);

}  // namespace

// ---- ModuleContext -------------------------------------------------------------------------------

JobId ModuleContext::begin_job(std::string label) {
  std::lock_guard lk(engine_->jobs_mu_);
  const JobId id = engine_->next_job_++;
  Engine::Job job;
  job.status.id = id;
  job.status.label = std::move(label);
  job.status.outcome = JobOutcome::Running;
  job.cancel = std::make_shared<std::atomic<bool>>(false);
  engine_->jobs_.emplace(id, std::move(job));
  engine_->jobs_dirty_ = true;
  return id;
}

void ModuleContext::set_progress(JobId id, double progress) {
  std::lock_guard lk(engine_->jobs_mu_);
  auto it = engine_->jobs_.find(id);
  if (it == engine_->jobs_.end()) return;
  it->second.status.progress = std::clamp(progress, 0.0, 1.0);
  engine_->jobs_dirty_ = true;
}

void ModuleContext::finish_job(JobId id, JobOutcome outcome, std::string message) {
  std::lock_guard lk(engine_->jobs_mu_);
  auto it = engine_->jobs_.find(id);
  if (it == engine_->jobs_.end()) return;
  it->second.status.outcome = outcome;
  it->second.status.message = std::move(message);
  if (outcome == JobOutcome::Done) it->second.status.progress = 1.0;
  it->second.finished = Clock::now();
  engine_->jobs_dirty_ = true;
}

bool ModuleContext::cancel_requested(JobId id) const {
  std::lock_guard lk(engine_->jobs_mu_);
  auto it = engine_->jobs_.find(id);
  return it != engine_->jobs_.end() && it->second.cancel->load(std::memory_order_relaxed);
}

// ---- Engine ----------------------------------------------------------------------------------------

Engine::Engine(std::vector<std::unique_ptr<EngineModule>> modules) : modules_(std::move(modules)) {
  contexts_.reserve(modules_.size());
  for (std::size_t i = 0; i < modules_.size(); ++i) contexts_.push_back(ModuleContext(*this));
  auto s = std::make_shared<Snapshot>();
  for (auto& m : modules_) m->publish(*s);
  snapshot_ = std::move(s);
}

Engine::~Engine() { stop(); }

void Engine::start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard lk(queue_mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { run(); });
}

void Engine::stop() {
  {
    std::lock_guard lk(queue_mu_);
    stop_ = true;
  }
  {
    // Let a long work item notice: every job counts as cancelled when the engine stops.
    std::lock_guard lk(jobs_mu_);
    for (auto& [id, job] : jobs_) job.cancel->store(true);
  }
  queue_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::post(Command command) {
  if (const auto* c = std::get_if<CancelJob>(&command)) {
    std::lock_guard lk(jobs_mu_);
    if (auto it = jobs_.find(c->id); it != jobs_.end()) it->second.cancel->store(true);
  }
  {
    std::lock_guard lk(queue_mu_);
    queue_.push_back(std::move(command));
    ++posted_;
  }
  queue_cv_.notify_all();
}

std::shared_ptr<const Snapshot> Engine::snapshot() const {
  std::lock_guard lk(snapshot_mu_);
  return snapshot_;
}

bool Engine::quiescent() const {
  std::lock_guard lk(queue_mu_);
  return sleeping_ && queue_.empty() && drained_ == posted_;
}

bool Engine::settled() const {
  std::lock_guard lk(queue_mu_);
  return sleeping_ && settled_ && queue_.empty() && drained_ == posted_;
}

bool Engine::wait_quiescent(std::chrono::milliseconds timeout) const {
  std::unique_lock lk(queue_mu_);
  return queue_cv_.wait_for(lk, timeout,
                            [&] { return sleeping_ && queue_.empty() && drained_ == posted_; });
}

void Engine::set_publish_callback(std::function<void()> callback) {
  std::lock_guard lk(snapshot_mu_);
  on_publish_ = std::move(callback);
}

void Engine::dispatch(const Command& c) {
  ++stats_.commands;
  if (std::holds_alternative<CancelJob>(c)) return;  // the flag was set in post(); modules poll it
  for (std::size_t i = 0; i < modules_.size(); ++i)
    if (modules_[i]->handle(c, contexts_[i])) return;
}

void Engine::publish() {
  auto s = std::make_shared<Snapshot>(*snapshot());
  ++s->version;
  for (std::size_t i = 0; i < modules_.size(); ++i) {
    if (!contexts_[i].dirty_) continue;
    modules_[i]->publish(*s);
    contexts_[i].dirty_ = false;
  }
  const auto now = Clock::now();
  {
    std::lock_guard lk(jobs_mu_);
    std::erase_if(jobs_, [&](const auto& kv) {
      return kv.second.status.outcome != JobOutcome::Running &&
             now - kv.second.finished > kFinishedJobLinger;
    });
    s->jobs.clear();
    for (const auto& [id, job] : jobs_) s->jobs.push_back(job.status);
    std::sort(s->jobs.begin(), s->jobs.end(), [](auto& a, auto& b) { return a.id < b.id; });
    jobs_dirty_ = false;
  }
  while (!busy_.empty() && now - busy_.front().first > std::chrono::seconds(1)) busy_.pop_front();
  stats_.busy_ms_last_second = 0;
  for (const auto& b : busy_) stats_.busy_ms_last_second += b.second;
  s->stats = stats_;

  std::function<void()> cb;
  {
    std::lock_guard lk(snapshot_mu_);
    snapshot_ = std::move(s);
    cb = on_publish_;
  }
  last_publish_ = now;
  if (cb) cb();
}

void Engine::run() {
  for (;;) {
    std::deque<Command> commands;
    std::uint64_t taken = 0;
    {
      std::lock_guard lk(queue_mu_);
      if (stop_) return;
      commands.swap(queue_);
      taken = posted_;
    }
    for (const auto& c : commands) dispatch(c);

    bool worked = false;
    const auto now = Clock::now();
    for (std::size_t i = 0; i < modules_.size(); ++i) {
      if (!modules_[i]->has_work(now)) continue;
      const auto t0 = Clock::now();
      modules_[i]->work(contexts_[i]);
      const auto t1 = Clock::now();
      busy_.emplace_back(t1, std::chrono::duration<double, std::milli>(t1 - t0).count());
      ++stats_.work_items;
      worked = true;
    }

    for (std::size_t i = 0; i < modules_.size(); ++i) modules_[i]->after_iteration(contexts_[i]);
    // after_iteration may have given a module work (a view computing again with newer weights): look
    // again before going to sleep.
    if (!worked)
      for (const auto& m : modules_) worked = worked || m->has_work(Clock::now());

    bool dirty = false;
    {
      std::lock_guard lk(jobs_mu_);
      dirty = jobs_dirty_;
    }
    for (const auto& c : contexts_) dirty = dirty || c.dirty_;
    if (dirty && (!worked || Clock::now() - last_publish_ >= kMinPublishInterval)) publish();
    if (worked) continue;

    // Idle: sleep until a command arrives or a module wants to run again.
    std::optional<Clock::time_point> wake;
    bool settled = true;
    for (const auto& m : modules_) {
      if (auto w = m->next_wakeup(); w && (!wake || *w < *wake)) wake = w;
      settled = settled && !m->awaiting_more();
    }
    std::unique_lock lk(queue_mu_);
    settled_ = settled;
    if (stop_) return;
    if (!queue_.empty()) continue;
    drained_ = taken;
    sleeping_ = true;
    queue_cv_.notify_all();  // wait_quiescent() callers
    const auto ready = [&] { return stop_ || !queue_.empty(); };
    if (wake)
      queue_cv_.wait_until(lk, *wake, ready);
    else
      queue_cv_.wait(lk, ready);
    sleeping_ = false;
  }
}

}  // namespace tttlab::lab
