// web/check_main.cpp — tttlab_web_check: the browser's engine check (engine_check.hpp) run natively, for
// the browser test's comparison and the web benchmark's ratio.
//
//   tttlab_web_check --model assets/models/tiny-brown --brown DIR [--repeats N]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "engine_check.hpp"

int main(int argc, char** argv) {
  CLI::App app{"The browser build's engine check, run natively; prints one line of JSON"};
  tttlab::web::EngineCheckOptions o;
  std::string model, brown;
  app.add_option("--model", model, "A model folder (assets/models/tiny-brown)")->required()->check(CLI::ExistingDirectory);
  app.add_option("--brown", brown, "The prepared Brown corpus: train.txt and val.txt")->required()->check(CLI::ExistingDirectory);
  app.add_option("--repeats", o.repeats, "Runs of each timed part; the median is reported")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  o.model_dir = model;
  o.brown_dir = brown;
  try {
    const std::string json =
        tttlab::web::run_engine_check(o, [](const std::string& line) { std::fprintf(stderr, "engine check: %s\n", line.c_str()); });
    std::printf("%s\n", json.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tttlab_web_check: %s\n", e.what());
    return 1;
  }
  return 0;
}
