// tttlab/util/parallel.hpp — fork-join over a fixed number of threads.
//
// run_parallel(n, fn) runs fn(i) for i = 0 .. n−1, each on its own thread (the calling thread takes
// i = 0), and returns when all are done. The split of work is the caller's (fixed slices give
// deterministic results for a given n). The first exception thrown by any fn is rethrown here after
// every thread has finished. When a thread cannot be started (the process is at its limit of threads
// or memory), the threads already started are joined and a std::runtime_error says so; destroying a
// joinable std::thread would otherwise end the program with "terminate called without an active
// exception".
#pragma once

#include <exception>
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
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  workers.reserve(n > 1 ? static_cast<std::size_t>(n - 1) : 0);
  for (int i = 1; i < n; ++i) {
    try {
      workers.emplace_back(guarded, i);
    } catch (const std::system_error& e) {
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
