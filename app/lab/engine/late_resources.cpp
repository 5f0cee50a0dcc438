#include "lab/engine/late_resources.hpp"

#include <condition_variable>
#include <mutex>

namespace tttlab::lab {
namespace {

struct LateResources {
  std::mutex mutex;
  std::condition_variable settled;
  bool expected = false;
  std::string error;
  std::uint64_t generation = 0;
};

LateResources& late() {
  static LateResources l;
  return l;
}

}  // namespace

void expect_late_resources() {
  auto& l = late();
  std::lock_guard lock(l.mutex);
  l.expected = true;
  l.error.clear();
}

void late_resources_settled(const std::string& error) {
  auto& l = late();
  {
    std::lock_guard lock(l.mutex);
    l.expected = false;
    l.error = error;
    if (error.empty()) ++l.generation;
  }
  l.settled.notify_all();
}

std::string wait_for_late_resources(std::chrono::milliseconds timeout) {
  auto& l = late();
  std::unique_lock lock(l.mutex);
  if (!l.settled.wait_for(lock, timeout, [&] { return !l.expected; }))
    return "the files that arrive after the lab opens are still downloading; try again in a moment";
  return l.error.empty() ? "" : "the files that arrive after the lab opens could not be downloaded: " + l.error;
}

std::uint64_t late_resources_generation() {
  auto& l = late();
  std::lock_guard lock(l.mutex);
  return l.generation;
}

}  // namespace tttlab::lab
