// tttlab/util/parallel.hpp — fork-join over a fixed number of threads.
//
// run_parallel(n, fn) runs fn(i) for i = 0 .. n−1, each on its own thread (the calling thread takes
// i = 0), and returns when all are done. The split of work is the caller's (fixed slices give
// deterministic results for a given n). The first exception thrown by any fn is rethrown here after
// every thread has finished.
#pragma once

#include <exception>
#include <mutex>
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
  for (int i = 1; i < n; ++i) workers.emplace_back(guarded, i);
  guarded(0);
  for (auto& w : workers) w.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace tttlab
