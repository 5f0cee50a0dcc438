// web/engine_check.hpp — the numbers the browser build must reproduce, computed the same way in the
// browser (web/main.cpp, page address ?check=engine) and natively (tttlab_web_check), so that the
// browser test compares like with like and `scripts/web.sh --bench` times like with like.
//
// The check, in order, each part timed:
//   verify   the engine's self-check (run_verify_suite: primal = dual, backward = finite differences)
//   eval     a shipped model's loss on the first windows of the Brown validation split
//   greedy   that model's greedy continuation of a fixed prompt (argmax: the same bytes when the
//            logits agree to rounding)
//   train    a few steps of training a tiny model on Brown, one thread, fixed seed: the step losses
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace tttlab::web {

struct EngineCheckOptions {
  std::filesystem::path model_dir;  // a shipped model (assets/models/tiny-brown)
  std::filesystem::path brown_dir;  // the prepared corpus: train.txt, val.txt
  int eval_windows = 4;             // validation windows of the model's T bytes
  int greedy_bytes = 48;
  std::string prompt = "The jury said that the";
  long train_steps = 5;
  int repeats = 1;  // > 1: each timed part runs this many times and reports the median (the benchmark)
};

// Runs the check and returns one line of JSON: the results and the seconds each part took. `progress`
// (may be empty) receives a line of text as each part finishes. Throws std::exception on failure
// (a missing model or corpus, a failed verify check is reported in the JSON, not thrown).
std::string run_engine_check(const EngineCheckOptions& options, const std::function<void(const std::string&)>& progress);

}  // namespace tttlab::web
