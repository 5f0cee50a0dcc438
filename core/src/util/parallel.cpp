// The worker pool behind run_parallel (see tttlab/util/parallel.hpp).
//
// One mutex guards the pool: the list of workers, the idle ones, and each worker's next job. A call
// takes its idle workers and registers the ones it must start under the mutex, starts threads
// without it (starting a thread can take milliseconds, and in the browser needs the page's main
// thread), then hands every worker its job at once, so that when a thread cannot start no fn has
// run. A worker that finishes its job puts itself back among the idle ones before it tells the
// call, so a call that returns has given back all of its workers.
#include "tttlab/util/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__unix__) && !defined(__EMSCRIPTEN__)
#include <pthread.h>
#define TTTLAB_POOL_FORK_HANDLERS 1
#endif

namespace tttlab {
namespace {

std::string out_of_memory_message(int i, int n) {
  return "worker thread " + std::to_string(i + 1) + " of " + std::to_string(n) +
         " ran out of memory (the process is at its limit of memory: ulimit -v, "
         "cgroup memory.max, or free memory); run with fewer threads, e.g. --threads 1";
}

std::string cannot_start_message(int i, int n, const char* why) {
  return "cannot start worker thread " + std::to_string(i + 1) + " of " + std::to_string(n) + ": " +
         why +
         " (the process is at its limit of threads or memory: ulimit -u, cgroup pids.max, "
         "or free memory); run with fewer threads, e.g. --threads 1";
}

// One run_parallel call: its fn, how many of its workers are still running, and the first error.
class ParallelCall {
 public:
  ParallelCall(detail::ParallelFn fn, int n, int workers) : m_fn(fn), m_n(n), m_running(workers) {}

  // fn(i), its exception kept (the first one wins). Threads started before the limit was reached
  // can be the ones that run out of memory: the same limit, said as plainly as when a thread cannot
  // start.
  void run(int i) noexcept {
    try {
      m_fn(i);
    } catch (const std::bad_alloc&) {
      try {
        keep(std::make_exception_ptr(std::runtime_error(out_of_memory_message(i, m_n))));
      } catch (...) {  // no memory even for the message
        keep(std::current_exception());
      }
    } catch (...) {
      keep(std::current_exception());
    }
  }

  // A worker is done with this call; the last one wakes the caller. The notify happens under the
  // lock so that the caller, which destroys this object when it wakes, cannot do so before it
  // returns.
  void worker_done() {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (--m_running == 0) m_done.notify_one();
  }

  void wait_for_workers() {
    std::unique_lock<std::mutex> lock(m_mutex);
    m_done.wait(lock, [&] { return m_running == 0; });
  }

  void rethrow() {
    if (m_error) std::rethrow_exception(m_error);
  }

 private:
  void keep(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_error) m_error = std::move(e);
  }

  detail::ParallelFn m_fn;
  int m_n;
  int m_running;
  std::mutex m_mutex;
  std::condition_variable m_done;
  std::exception_ptr m_error;
};

// The old way, for calls made while the pool is shutting down or after it is gone: n−1 threads of
// this call's own, joined before it returns.
void run_on_own_threads(int n, detail::ParallelFn fn) {
  ParallelCall call(fn, n, 0);
  std::vector<std::thread> threads;
  threads.reserve(n > 1 ? static_cast<std::size_t>(n - 1) : 0);
  for (int i = 1; i < n; ++i) {
    try {
      threads.emplace_back([&call, i] { call.run(i); });
    } catch (const std::exception& e) {
      // std::system_error, or std::bad_alloc for the thread's state. Destroying a joinable
      // std::thread would end the program with "terminate called without an active exception".
      for (auto& t : threads) t.join();
      throw std::runtime_error(cannot_start_message(i, n, e.what()));
    }
  }
  call.run(0);
  for (auto& t : threads) t.join();
  call.rethrow();
}

struct PoolWorker {
  std::thread thread;
  std::condition_variable wake;
  // The job, set by the call that claimed this worker, under WorkerPool::m_mutex.
  ParallelCall* call = nullptr;
  int index = 0;               // its i
  PoolWorker* next = nullptr;  // the next worker of the same call, or of the list of orphans
};

// The workers left behind in a child of fork(): their threads do not exist there, so they can be
// neither joined nor destroyed (a joinable std::thread ends the program when destroyed, and a
// condition variable whose waiter vanished cannot be destroyed). They stay, reachable from here.
PoolWorker* g_fork_orphans = nullptr;

// True on a pool worker's thread, and on a caller's thread while its call runs: a thread that ends
// the process from inside fn cannot wait for its own call to finish.
thread_local int t_in_call = 0;

class WorkerPool {
 public:
  // Runs the call on the pool; false when the pool is shutting down (the caller uses threads of its
  // own).
  bool run(int n, detail::ParallelFn fn);

  std::size_t size() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_started;
  }

  // Stops and joins the workers once every call in flight has finished. False when that cannot be
  // done because this thread is inside a call (fn ended the process): the workers are then detached
  // and the pool must be left in place for them.
  bool shut_down();

  void before_fork() { m_mutex.lock(); }
  void after_fork_in_parent() { m_mutex.unlock(); }
  void after_fork_in_child();

 private:
  void work(PoolWorker* w);
  PoolWorker* start_worker();  // registered, not idle; throws when its thread cannot start
  void give_back(PoolWorker* team);

  std::mutex m_mutex;
  std::condition_variable m_calls_finished;
  std::vector<std::unique_ptr<PoolWorker>> m_workers;
  // Its capacity is kept at m_workers.size(), so that a worker's return to it cannot throw.
  std::vector<PoolWorker*> m_idle;
  std::size_t m_started = 0;
  int m_calls = 0;          // calls in flight
  bool m_stopping = false;  // no new calls
  bool m_exit = false;      // workers end when idle
};

bool WorkerPool::run(int n, detail::ParallelFn fn) {
  const int needed = n - 1;
  PoolWorker* team = nullptr;  // linked through PoolWorker::next, last claimed first
  int have = 0;
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_stopping) return false;
    ++m_calls;
    while (have < needed && !m_idle.empty()) {
      PoolWorker* w = m_idle.back();
      m_idle.pop_back();
      w->next = team;
      team = w;
      ++have;
    }
  }
  for (; have < needed; ++have) {
    try {
      PoolWorker* w = start_worker();
      w->next = team;
      team = w;
    } catch (const std::exception& e) {
      give_back(team);
      throw std::runtime_error(cannot_start_message(have + 1, n, e.what()));
    }
  }
  ParallelCall call(fn, n, needed);
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    int i = 1;
    for (PoolWorker* w = team; w != nullptr; w = w->next) {
      w->call = &call;
      w->index = i++;
      w->wake.notify_one();
    }
  }
  ++t_in_call;
  call.run(0);
  call.wait_for_workers();
  --t_in_call;
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (--m_calls == 0 && m_stopping) m_calls_finished.notify_all();
  }
  call.rethrow();
  return true;
}

PoolWorker* WorkerPool::start_worker() {
  auto owned = std::make_unique<PoolWorker>();
  PoolWorker* w = owned.get();
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_workers.reserve(m_workers.size() + 1);
    m_idle.reserve(m_workers.size() + 1);
    m_workers.push_back(std::move(owned));
  }
  try {
    w->thread = std::thread([this, w] { work(w); });
  } catch (...) {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_workers.erase(std::find_if(m_workers.begin(), m_workers.end(),
                                 [&](const auto& p) { return p.get() == w; }));
    throw;
  }
  std::lock_guard<std::mutex> lock(m_mutex);
  ++m_started;
  return w;
}

// Workers claimed or started by a call that then could not start the rest: idle again, having run
// nothing.
void WorkerPool::give_back(PoolWorker* team) {
  std::lock_guard<std::mutex> lock(m_mutex);
  for (PoolWorker* w = team; w != nullptr; w = w->next) m_idle.push_back(w);
  if (--m_calls == 0 && m_stopping) m_calls_finished.notify_all();
}

void WorkerPool::work(PoolWorker* w) {
  t_in_call = 1;
  std::unique_lock<std::mutex> lock(m_mutex);
  for (;;) {
    w->wake.wait(lock, [&] { return w->call != nullptr || m_exit; });
    ParallelCall* call = w->call;
    if (call == nullptr) return;
    const int index = w->index;
    w->call = nullptr;
    lock.unlock();
    call->run(index);
    lock.lock();
    // Back among the idle before the call learns it is done: a call that returns has all its
    // workers back.
    m_idle.push_back(w);
    lock.unlock();
    call->worker_done();
    lock.lock();
  }
}

bool WorkerPool::shut_down() {
  std::unique_lock<std::mutex> lock(m_mutex);
  m_stopping = true;
  if (t_in_call > 0) {
    m_exit = true;
    for (auto& w : m_workers) {
      w->wake.notify_one();
      if (w->thread.joinable()) w->thread.detach();
    }
    return false;
  }
  // A call still running on another thread (a training step while the program exits) finishes
  // first; a call begun from now on uses threads of its own.
  m_calls_finished.wait(lock, [&] { return m_calls == 0; });
  m_exit = true;
  for (auto& w : m_workers) w->wake.notify_one();
  lock.unlock();
  for (auto& w : m_workers)
    if (w->thread.joinable()) w->thread.join();
  return true;
}

// In the child only the forking thread exists, and it holds m_mutex (before_fork). The parent's
// workers are orphaned, its calls forgotten.
void WorkerPool::after_fork_in_child() {
  for (auto& w : m_workers) {
    PoolWorker* orphan = w.release();
    orphan->next = g_fork_orphans;
    g_fork_orphans = orphan;
  }
  m_workers.clear();
  m_idle.clear();
  m_started = 0;
  m_calls = 0;
  m_mutex.unlock();
}

// The live pool, for the fork handlers and for parallel_pool_size; null before the first call and
// after exit has stopped it.
std::atomic<WorkerPool*> g_pool{nullptr};
std::atomic<bool> g_pool_closed{false};

#ifdef TTTLAB_POOL_FORK_HANDLERS
void pool_before_fork() {
  if (WorkerPool* p = g_pool.load()) p->before_fork();
}
void pool_after_fork_in_parent() {
  if (WorkerPool* p = g_pool.load()) p->after_fork_in_parent();
}
void pool_after_fork_in_child() {
  if (WorkerPool* p = g_pool.load()) p->after_fork_in_child();
}
#endif

// Owns the pool; a function-local static, so that it is made on the first call (a program that
// never calls run_parallel starts nothing) and destroyed at exit, after every static made later. A
// static destroyed after it that calls run_parallel finds g_pool_closed and uses threads of its
// own.
class WorkerPoolOwner {
 public:
  WorkerPoolOwner() : m_pool(new WorkerPool) {
    g_pool.store(m_pool);
#ifdef TTTLAB_POOL_FORK_HANDLERS
    ::pthread_atfork(pool_before_fork, pool_after_fork_in_parent, pool_after_fork_in_child);
#endif
  }
  ~WorkerPoolOwner() {
    g_pool_closed.store(true);
    if (m_pool->shut_down()) {
      g_pool.store(nullptr);
      delete m_pool;
    }
    // else: fn ended the process from inside a call; the detached workers still use the pool, which
    // stays allocated (and reachable from here) until the process is gone.
  }
  WorkerPoolOwner(const WorkerPoolOwner&) = delete;
  WorkerPoolOwner& operator=(const WorkerPoolOwner&) = delete;

  WorkerPool* pool() const { return m_pool; }

 private:
  WorkerPool* m_pool;
};

WorkerPool* live_pool() {
  if (g_pool_closed.load()) return nullptr;
  static WorkerPoolOwner owner;
  return owner.pool();
}

}  // namespace

void detail::run_parallel(int n, ParallelFn fn) {
  if (n <= 1) {  // no thread to start; fn(0) is still guarded like any worker's
    ParallelCall call(fn, n, 0);
    call.run(0);
    call.rethrow();
    return;
  }
  if (WorkerPool* pool = live_pool(); pool != nullptr && pool->run(n, fn)) return;
  run_on_own_threads(n, fn);
}

std::size_t parallel_pool_size() {
  WorkerPool* pool = g_pool.load();
  return pool != nullptr ? pool->size() : 0;
}

}  // namespace tttlab
