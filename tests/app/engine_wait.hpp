// Waiting on an Engine from a test: engines with timed work (a live training run, a generation) never
// become quiescent, so a test polls snapshots until its condition holds, and fails (returning the last
// snapshot) rather than hanging when it never does.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "lab/engine/engine.hpp"

namespace tttlab::testing {

template <class F>
std::shared_ptr<const lab::Snapshot> wait_for(lab::Engine& e, F done,
                                              std::chrono::seconds limit = std::chrono::seconds(120)) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    auto s = e.snapshot();
    if (s && done(*s)) return s;
    if (std::chrono::steady_clock::now() - t0 > limit) {
      ADD_FAILURE() << "timed out waiting for the engine";
      return s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace tttlab::testing
