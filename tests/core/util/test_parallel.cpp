// run_parallel's worker pool: every index exactly once, threads reused across calls, nested calls
// and calls from several threads at once, errors, and a child of fork() that starts its own
// workers. The error messages under thread and memory limits are in test_loses_nothing.cpp (F07).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tttlab/util/parallel.hpp"

namespace tttlab {
namespace {

// Thread ids seen by fn(i) for i ≥ 1 in one call, checked to be distinct and not the caller's.
std::set<std::thread::id> worker_ids_of_one_call(int n) {
  std::vector<std::thread::id> ids(n);
  run_parallel(n, [&](int i) { ids[i] = std::this_thread::get_id(); });
  EXPECT_EQ(ids[0], std::this_thread::get_id()) << "the calling thread takes i = 0";
  std::set<std::thread::id> workers(ids.begin() + 1, ids.end());
  EXPECT_EQ(workers.size(), static_cast<std::size_t>(n - 1)) << "each i on a thread of its own";
  EXPECT_EQ(workers.count(std::this_thread::get_id()), 0u);
  return workers;
}

// Waits until `count` reaches `target`, or fails after a few seconds rather than hanging the suite.
bool wait_until_count(const std::atomic<int>& count, int target) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (count.load() < target) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(Parallel, RepeatedCallsReuseTheSameThreads) {
  const std::set<std::thread::id> first = worker_ids_of_one_call(4);
  const std::size_t size = parallel_pool_size();
  EXPECT_GE(size, 3u);
  for (int call = 0; call < 50; ++call) {
    for (const std::thread::id& id : worker_ids_of_one_call(4))
      EXPECT_EQ(first.count(id), 1u)
          << "call " << call << " ran on a thread the first call did not use";
    // Fewer threads take from the same idle workers too.
    for (const std::thread::id& id : worker_ids_of_one_call(2)) EXPECT_EQ(first.count(id), 1u);
  }
  EXPECT_EQ(parallel_pool_size(), size) << "no thread was started after the first call";
}

TEST(Parallel, EveryIndexRunsOnceAndOneThreadIsTheCallerAlone) {
  for (int n : {0, 1, 2, 3, 7, 16}) {
    std::vector<int> runs(n > 0 ? n : 1, 0);
    run_parallel(n, [&](int i) { ++runs[i]; });
    if (n <= 1) {
      EXPECT_EQ(runs[0], 1) << "n = " << n;
      continue;
    }
    for (int i = 0; i < n; ++i) EXPECT_EQ(runs[i], 1) << "n = " << n << ", i = " << i;
  }
}

// The n calls of one run_parallel run at once: fn(i) may wait for fn(j), as data-parallel ranks do.
TEST(Parallel, AllIndicesRunAtOnceSoTheyMayWaitForEachOther) {
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> arrived{0};
    std::atomic<int> timed_out{0};
    run_parallel(5, [&](int) {
      ++arrived;
      if (!wait_until_count(arrived, 5)) ++timed_out;
    });
    ASSERT_EQ(timed_out.load(), 0)
        << "round " << round << ": an index waited for one that never started";
  }
}

TEST(Parallel, NestedCallsComplete) {
  constexpr int kOuter = 3, kMiddle = 3, kInner = 4;
  const std::size_t before = parallel_pool_size();
  std::vector<std::atomic<int>> runs(kOuter * kMiddle * kInner);
  std::atomic<int> timed_out{0};
  run_parallel(kOuter, [&](int a) {
    run_parallel(kMiddle, [&](int b) {
      std::atomic<int> arrived{0};
      run_parallel(kInner, [&](int c) {
        ++arrived;
        if (!wait_until_count(arrived, kInner)) ++timed_out;  // the inner threads too run at once
        ++runs[(a * kMiddle + b) * kInner + c];
      });
    });
  });
  EXPECT_EQ(timed_out.load(), 0);
  for (std::size_t k = 0; k < runs.size(); ++k) EXPECT_EQ(runs[k].load(), 1) << "index " << k;
  // Repeated, the same nesting reuses idle threads: the pool never holds more than the calls in
  // flight at once could hold (how many are in flight at once depends on timing).
  for (int round = 0; round < 20; ++round)
    run_parallel(kOuter, [&](int) {
      run_parallel(kMiddle, [&](int) { run_parallel(kInner, [](int) {}); });
    });
  constexpr int kMostAtOnce =
      (kOuter - 1) + kOuter * (kMiddle - 1) + kOuter * kMiddle * (kInner - 1);
  EXPECT_LE(parallel_pool_size(), before + kMostAtOnce);
}

TEST(Parallel, CallsFromSeveralThreadsAtOnceEachGetEveryIndexOnce) {
  constexpr int kCallers = 3, kCalls = 200, kN = 5;
  const std::size_t before = parallel_pool_size();
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      for (int call = 0; call < kCalls; ++call) {
        std::vector<std::atomic<int>> runs(kN + c);
        run_parallel(kN + c, [&](int i) { ++runs[i]; });
        for (auto& r : runs)
          if (r.load() != 1) ++wrong;
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  // Never more threads than the calls in flight at once could hold: a worker is reused once idle.
  std::size_t most = 0;
  for (int c = 0; c < kCallers; ++c) most += kN + c - 1;
  EXPECT_LE(parallel_pool_size(), before + most);
}

TEST(Parallel, ExceptionsFromSeveralIndicesAreRethrownOnceAndThePoolStaysUsable) {
  run_parallel(6, [](int) {});
  const std::size_t size = parallel_pool_size();
  for (int round = 0; round < 10; ++round) {
    std::atomic<int> ran{0};
    int caught = 0;
    try {
      run_parallel(6, [&](int i) {
        ++ran;
        if (i % 2 == 1) throw std::invalid_argument("index " + std::to_string(i) + " failed");
      });
    } catch (const std::invalid_argument& e) {
      ++caught;
      const std::string what = e.what();
      EXPECT_TRUE(what == "index 1 failed" || what == "index 3 failed" || what == "index 5 failed")
          << what;
    }
    EXPECT_EQ(caught, 1);
    EXPECT_EQ(ran.load(), 6) << "every index ran to its end before the error was rethrown";
  }
  // The caller's own index throwing is the same.
  EXPECT_THROW(run_parallel(3,
                            [](int i) {
                              if (i == 0) throw std::logic_error("zero");
                            }),
               std::logic_error);
  std::vector<int> runs(6, 0);
  run_parallel(6, [&](int i) { ++runs[i]; });
  EXPECT_EQ(runs, std::vector<int>(6, 1));
  EXPECT_EQ(parallel_pool_size(), size) << "the workers whose fn threw went back to the pool";
}

// A child of fork() has none of its parent's threads: it starts workers of its own instead of
// handing jobs to threads that do not exist there, and exit() stops and joins them.
TEST(Parallel, AChildOfForkStartsItsOwnWorkersAndExitsCleanly) {
  run_parallel(4, [](int) {});
  ASSERT_GE(parallel_pool_size(), 3u);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(30);  // a hang becomes SIGALRM, which the parent reports
    if (parallel_pool_size() != 0) ::_exit(2);
    std::vector<int> runs(4, 0);
    run_parallel(4, [&](int i) { ++runs[i]; });
    run_parallel(4, [&](int i) { ++runs[i]; });
    if (runs != std::vector<int>(4, 2)) ::_exit(3);
    if (parallel_pool_size() != 3) ::_exit(4);
    std::exit(0);  // static destructors run: the pool's workers are stopped and joined
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "2: the parent's workers were counted; 3: wrong runs; 4: wrong pool size";
  // The parent's pool is untouched.
  std::vector<int> runs(4, 0);
  run_parallel(4, [&](int i) { ++runs[i]; });
  EXPECT_EQ(runs, std::vector<int>(4, 1));
}

}  // namespace
}  // namespace tttlab
