// app/lab/engine/late_resources.hpp — files that ship with the app but arrive after it has started.
//
// In the browser, the shipped models that only some lessons compare are a second download, fetched
// once the lab runs, so that the first frame does not wait for them (web/late_files.js,
// docs/WEB.md). The platform says when they are expected and when they have arrived, or could not be
// had; a lookup of a shipped file that misses (model_library.cpp) waits for that instead of failing.
// Only worker threads (the engine's) may wait; the UI thread must not. On the desktop nothing is ever
// expected, and waiting returns at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tttlab::lab {

// The platform: late files are on their way.
void expect_late_resources();
// The platform: they are in place (`error` empty), or they will not come (`error` says why, for the
// message of a lookup that then fails).
void late_resources_settled(const std::string& error = "");
// Waits until the late files have settled or `timeout` has passed. Returns "" when nothing is awaited
// and everything expected arrived, else why a lookup still misses them (they could not be
// downloaded, or are still on their way).
std::string wait_for_late_resources(std::chrono::milliseconds timeout);
// Raised each time late files arrive, so that whoever listed the shipped files lists them again.
std::uint64_t late_resources_generation();

}  // namespace tttlab::lab
