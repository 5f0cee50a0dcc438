// `tttlab verify [--json] [--seed N]`: the built-in equivalence suite (see tttlab/verify.hpp).
// Prints a table of every check's errors against its threshold; exits 1 if any check fails.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.hpp"
#include "cli/validators.hpp"
#include "tttlab/verify.hpp"

namespace tttlab::cli {
namespace {

struct VerifyArgs {
  bool json = false;
  std::uint64_t seed = 0;
  bool seed_given = false;
};

void run(const VerifyArgs& args) {
  VerifyOptions opt;
  opt.seed = args.seed_given ? args.seed : std::random_device{}() * 0x100000001ULL ^ std::random_device{}();
  if (!args.json) {
    std::printf("TTT Lab equivalence suite, seed %llu (rerun with --seed to reproduce)\n\n",
                static_cast<unsigned long long>(opt.seed));
    std::printf("%-44s %12s %12s %10s  %s\n", "check", "max abs err", "max rel err", "threshold",
                "result");
    opt.on_check = [](const CheckResult& r) {
      std::printf("%-44s %12.3e %12.3e %10.0e  %s\n", r.name.c_str(), r.max_abs_err, r.max_rel_err,
                  r.threshold, r.passed ? "ok" : "FAIL");
      std::fflush(stdout);
    };
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<CheckResult> results = run_verify_suite(opt);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int failed = 0;
  for (const auto& r : results) failed += r.passed ? 0 : 1;

  if (args.json) {
    nlohmann::json j;
    j["seed"] = opt.seed;
    j["checks"] = nlohmann::json::array();
    for (const auto& r : results)
      j["checks"].push_back({{"name", r.name},
                             {"max_abs_err", r.max_abs_err},
                             {"max_rel_err", r.max_rel_err},
                             {"threshold", r.threshold},
                             {"passed", r.passed}});
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("\n%zu passed, %d failed (%.2f s)\n", results.size() - failed, failed, secs);
  }
  set_exit_code(failed ? 1 : 0);
}

}  // namespace

void register_verify(CLI::App& app) {
  auto args = std::make_shared<VerifyArgs>();
  auto* cmd = app.add_subcommand(
      "verify",
      "Run the built-in equivalence suite on fresh random inputs: primal vs dual form (TTT-Linear and "
      "TTT-MLP, head dims 16/32/64, several mini-batch sizes), fp32 vs fp64, prefill then decode, the "
      "LN+L2 gradient vs finite differences, and the linear-attention and delta-rule limits. Exits 1 "
      "if any check fails.");
  cmd->add_flag("--json", args->json,
                "Print {\"checks\": [{\"name\", \"max_abs_err\", \"max_rel_err\", \"threshold\", "
                "\"passed\"}, ...]} instead of a table");
  cmd->add_option_function<std::uint64_t>(
      "--seed",
      [args](std::uint64_t s) {
        args->seed = s;
        args->seed_given = true;
      },
      "Random seed (default: a fresh one, printed)")
      ->check(seed_value());
  cmd->callback([args] { run(*args); });
}

}  // namespace tttlab::cli
