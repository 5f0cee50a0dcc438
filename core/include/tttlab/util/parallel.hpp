// tttlab/util/parallel.hpp — fork-join over a fixed number of threads.
//
// run_parallel(n, fn) runs fn(i) for i = 0 .. n−1, each on its own thread (the calling thread takes
// i = 0), and returns when all are done. The split of work is the caller's (fixed slices give
// deterministic results for a given n). The first exception thrown by any fn is rethrown here after
// every thread has finished. When a thread cannot be started (the process is at its limit of threads
// or memory), the threads already started are joined and a std::runtime_error says so; destroying a
// joinable std::thread would otherwise end the program with "terminate called without an active
// exception". A std::bad_alloc in a worker becomes such a std::runtime_error too, naming the worker.
#pragma once

#include <exception>
#include <new>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace tttlab {

template <class F>
void run_parallel(int n, F&& fn) {
  std::vector<std::thread> workers;
  std::exception_ptr error;
  std::mutex error_mutex;
  auto guarded = [&](int i) {
    try {
      fn(i);
    } catch (const std::bad_alloc&) {
      // Threads started before the limit was reached can be the ones that run out: the same limit,
      // said as plainly as when a thread cannot start.
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error)
        error = std::make_exception_ptr(std::runtime_error(
            "worker thread " + std::to_string(i + 1) + " of " + std::to_string(n) +
            " ran out of memory (the process is at its limit of memory: ulimit -v, cgroup memory.max, or "
            "free memory); run with fewer threads, e.g. --threads 1"));
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  workers.reserve(n > 1 ? static_cast<std::size_t>(n - 1) : 0);
  for (int i = 1; i < n; ++i) {
    try {
      workers.emplace_back(guarded, i);
    } catch (const std::exception& e) {  // std::system_error, or std::bad_alloc for the thread's state
      for (auto& w : workers) w.join();
      throw std::runtime_error("cannot start worker thread " + std::to_string(i + 1) + " of " + std::to_string(n) +
                               ": " + e.what() +
                               " (the process is at its limit of threads or memory: ulimit -u, cgroup pids.max, "
                               "or free memory); run with fewer threads, e.g. --threads 1");
    }
  }
  guarded(0);
  for (auto& w : workers) w.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace tttlab
