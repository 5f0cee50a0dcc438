// tttlab/util/parallel.hpp — fork-join over a fixed number of threads, kept in a pool.
//
// run_parallel(n, fn) runs fn(i) for i = 0 .. n−1, each on its own thread (the calling thread takes
// i = 0), and returns when all are done. The split of work is the caller's (fixed slices give
// deterministic results for a given n). The n calls run at once, so fn(i) may wait on fn(j) (the
// ranks of a data-parallel step do). The first exception thrown by any fn is rethrown here after
// every thread has finished. When a thread cannot be started (the process is at its limit of
// threads or memory), no fn runs at all and a std::runtime_error says so, naming the thread and the
// remedy; a std::bad_alloc in a worker becomes such a std::runtime_error too, naming the worker.
//
// The threads for i ≥ 1 come from a process-wide pool: starting a thread per call is expensive
// (tens of microseconds on the desktop, milliseconds to tens of milliseconds in the browser, where
// every WebAssembly thread is started by the page's main thread), and the training step calls this
// on every step. A call takes n−1 idle workers and starts new ones only when not enough are idle;
// it never waits for a worker busy with another call, so nested calls (fn itself calling
// run_parallel) and calls from several threads at once cannot deadlock. Idle workers are stopped
// and joined at process exit; a call made after that (from a later static destructor) starts
// threads of its own. A process made by fork() starts with an empty pool (the parent's workers do
// not exist in it); forking from inside fn is not supported.
#pragma once

#include <cstddef>
#include <memory>

namespace tttlab {

namespace detail {

// A non-owning reference to a callable taking an int: two pointers, no allocation. It lives only as
// long as the run_parallel call that made it.
class ParallelFn {
 public:
  template <class F>
  static ParallelFn of(F& fn) noexcept {
    return ParallelFn(const_cast<void*>(static_cast<const void*>(std::addressof(fn))),
                      [](void* object, int i) { (*static_cast<F*>(object))(i); });
  }
  void operator()(int i) const { m_call(m_object, i); }

 private:
  ParallelFn(void* object, void (*call)(void*, int)) noexcept : m_object(object), m_call(call) {}

  void* m_object;
  void (*m_call)(void*, int);
};

void run_parallel(int n, ParallelFn fn);

}  // namespace detail

template <class F>
void run_parallel(int n, F&& fn) {
  detail::run_parallel(n, detail::ParallelFn::of(fn));
}

// How many worker threads the pool has started and keeps (for diagnostics and tests).
std::size_t parallel_pool_size();

}  // namespace tttlab
