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
  std::lock_guard lk(m_engine->m_jobs_mu);
  const JobId id = m_engine->m_next_job++;
  Engine::Job job;
  job.status.id = id;
  job.status.label = std::move(label);
  job.status.outcome = JobOutcome::Running;
  job.cancel = std::make_shared<std::atomic<bool>>(false);
  m_engine->m_jobs.emplace(id, std::move(job));
  m_engine->m_jobs_dirty = true;
  return id;
}

void ModuleContext::set_progress(JobId id, double progress) {
  std::lock_guard lk(m_engine->m_jobs_mu);
  auto it = m_engine->m_jobs.find(id);
  if (it == m_engine->m_jobs.end()) return;
  it->second.status.progress = std::clamp(progress, 0.0, 1.0);
  m_engine->m_jobs_dirty = true;
}

void ModuleContext::finish_job(JobId id, JobOutcome outcome, std::string message) {
  std::lock_guard lk(m_engine->m_jobs_mu);
  auto it = m_engine->m_jobs.find(id);
  if (it == m_engine->m_jobs.end()) return;
  it->second.status.outcome = outcome;
  it->second.status.message = std::move(message);
  if (outcome == JobOutcome::Done) it->second.status.progress = 1.0;
  it->second.finished = Clock::now();
  m_engine->m_jobs_dirty = true;
}

bool ModuleContext::cancel_requested(JobId id) const {
  std::lock_guard lk(m_engine->m_jobs_mu);
  auto it = m_engine->m_jobs.find(id);
  return it != m_engine->m_jobs.end() && it->second.cancel->load(std::memory_order_relaxed);
}

// ---- Engine ----------------------------------------------------------------------------------------

Engine::Engine(std::vector<std::unique_ptr<EngineModule>> modules) : m_modules(std::move(modules)) {
  m_contexts.reserve(m_modules.size());
  for (std::size_t i = 0; i < m_modules.size(); ++i) m_contexts.push_back(ModuleContext(*this));
  auto s = std::make_shared<Snapshot>();
  for (auto& m : m_modules) m->publish(*s);
  m_snapshot = std::move(s);
}

Engine::~Engine() { stop(); }

void Engine::start() {
  if (m_thread.joinable()) return;
  {
    std::lock_guard lk(m_queue_mu);
    m_stop = false;
  }
  m_thread = std::thread([this] { run(); });
}

void Engine::stop() {
  {
    std::lock_guard lk(m_queue_mu);
    m_stop = true;
  }
  {
    // Let a long work item notice: every job counts as cancelled when the engine stops.
    std::lock_guard lk(m_jobs_mu);
    for (auto& [id, job] : m_jobs) job.cancel->store(true);
  }
  m_queue_cv.notify_all();
  if (m_thread.joinable()) m_thread.join();
}

void Engine::post(Command command) {
  if (const auto* c = std::get_if<CancelJob>(&command)) {
    std::lock_guard lk(m_jobs_mu);
    if (auto it = m_jobs.find(c->id); it != m_jobs.end()) it->second.cancel->store(true);
  }
  {
    std::lock_guard lk(m_queue_mu);
    m_queue.push_back(std::move(command));
    ++m_posted;
  }
  m_queue_cv.notify_all();
}

std::shared_ptr<const Snapshot> Engine::snapshot() const {
  std::lock_guard lk(m_snapshot_mu);
  return m_snapshot;
}

bool Engine::quiescent() const {
  std::lock_guard lk(m_queue_mu);
  return m_sleeping && m_queue.empty() && m_drained == m_posted;
}

bool Engine::settled() const {
  std::lock_guard lk(m_queue_mu);
  return m_sleeping && m_settled && m_queue.empty() && m_drained == m_posted;
}

bool Engine::wait_quiescent(std::chrono::milliseconds timeout) const {
  std::unique_lock lk(m_queue_mu);
  return m_queue_cv.wait_for(lk, timeout,
                            [&] { return m_sleeping && m_queue.empty() && m_drained == m_posted; });
}

void Engine::set_publish_callback(std::function<void()> callback) {
  std::lock_guard lk(m_snapshot_mu);
  m_on_publish = std::move(callback);
}

void Engine::dispatch(const Command& c) {
  ++m_stats.commands;
  if (std::holds_alternative<CancelJob>(c)) return;  // the flag was set in post(); modules poll it
  for (std::size_t i = 0; i < m_modules.size(); ++i)
    if (m_modules[i]->handle(c, m_contexts[i])) return;
}

void Engine::publish() {
  auto s = std::make_shared<Snapshot>(*snapshot());
  ++s->version;
  for (std::size_t i = 0; i < m_modules.size(); ++i) {
    if (!m_contexts[i].m_dirty) continue;
    m_modules[i]->publish(*s);
    m_contexts[i].m_dirty = false;
  }
  const auto now = Clock::now();
  {
    std::lock_guard lk(m_jobs_mu);
    std::erase_if(m_jobs, [&](const auto& kv) {
      return kv.second.status.outcome != JobOutcome::Running &&
             now - kv.second.finished > kFinishedJobLinger;
    });
    s->jobs.clear();
    for (const auto& [id, job] : m_jobs) s->jobs.push_back(job.status);
    std::sort(s->jobs.begin(), s->jobs.end(), [](auto& a, auto& b) { return a.id < b.id; });
    m_jobs_dirty = false;
  }
  while (!m_busy.empty() && now - m_busy.front().first > std::chrono::seconds(1)) m_busy.pop_front();
  m_stats.busy_ms_last_second = 0;
  for (const auto& b : m_busy) m_stats.busy_ms_last_second += b.second;
  s->stats = m_stats;

  std::function<void()> cb;
  {
    std::lock_guard lk(m_snapshot_mu);
    m_snapshot = std::move(s);
    cb = m_on_publish;
  }
  m_last_publish = now;
  if (cb) cb();
}

void Engine::run() {
  for (;;) {
    std::deque<Command> commands;
    std::uint64_t taken = 0;
    {
      std::lock_guard lk(m_queue_mu);
      if (m_stop) return;
      commands.swap(m_queue);
      taken = m_posted;
    }
    for (const auto& c : commands) dispatch(c);

    bool worked = false;
    const auto now = Clock::now();
    for (std::size_t i = 0; i < m_modules.size(); ++i) {
      if (!m_modules[i]->has_work(now)) continue;
      const auto t0 = Clock::now();
      m_modules[i]->work(m_contexts[i]);
      const auto t1 = Clock::now();
      m_busy.emplace_back(t1, std::chrono::duration<double, std::milli>(t1 - t0).count());
      ++m_stats.work_items;
      worked = true;
    }

    for (std::size_t i = 0; i < m_modules.size(); ++i) m_modules[i]->after_iteration(m_contexts[i]);
    // after_iteration may have given a module work (a view computing again with newer weights): look
    // again before going to sleep.
    if (!worked)
      for (const auto& m : m_modules) worked = worked || m->has_work(Clock::now());

    bool dirty = false;
    {
      std::lock_guard lk(m_jobs_mu);
      dirty = m_jobs_dirty;
    }
    for (const auto& c : m_contexts) dirty = dirty || c.m_dirty;
    if (dirty && (!worked || Clock::now() - m_last_publish >= kMinPublishInterval)) publish();
    if (worked) continue;

    // Idle: sleep until a command arrives or a module wants to run again.
    std::optional<Clock::time_point> wake;
    bool settled = true;
    for (const auto& m : m_modules) {
      if (auto w = m->next_wakeup(); w && (!wake || *w < *wake)) wake = w;
      settled = settled && !m->awaiting_more();
    }
    std::unique_lock lk(m_queue_mu);
    m_settled = settled;
    if (m_stop) return;
    if (!m_queue.empty()) continue;
    m_drained = taken;
    m_sleeping = true;
    m_queue_cv.notify_all();  // wait_quiescent() callers
    const auto ready = [&] { return m_stop || !m_queue.empty(); };
    if (wake)
      m_queue_cv.wait_until(lk, *wake, ready);
    else
      m_queue_cv.wait(lk, ready);
    m_sleeping = false;
  }
}

void JobSlot::supersede(ModuleContext& ctx, std::string why) {
  if (!running()) return;
  ctx.finish_job(m_id, JobOutcome::Cancelled, std::move(why));
  m_id = 0;
}

void JobSlot::begin(ModuleContext& ctx, JobView& view, std::string label) {
  view.outcome = JobOutcome::Running;
  m_id = ctx.begin_job(std::move(label));
}

void JobSlot::set_progress(ModuleContext& ctx, JobView& view, double progress) {
  view.progress = progress;
  ctx.set_progress(m_id, progress);
}

void JobSlot::finish(ModuleContext& ctx, JobView& view, JobOutcome outcome, std::string message) {
  view.outcome = outcome;
  if (outcome == JobOutcome::Failed) view.error = message;
  ctx.finish_job(m_id, outcome, std::move(message));
  m_id = 0;
}

}  // namespace tttlab::lab
