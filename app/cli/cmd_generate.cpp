// `tttlab generate --checkpoint DIR --prompt TEXT --tokens N [--temperature T] [--top-k K] [--seed S]`:
// sample bytes from a trained model. The prompt is prefilled once (dual form), then every new byte is
// one primal-form step on the streaming state: the prefix is never run again.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "cli/commands.hpp"
#include "cli/validators.hpp"
#include "tttlab/train/trainer.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab::cli {
namespace {

struct GenerateArgs {
  std::string checkpoint;
  std::string prompt = "The ";
  int tokens = 200;
  double temperature = 0.8;
  int top_k = 0;
  std::uint64_t seed = 0;
};

// Draws a byte from logits with temperature (0: greedy) and top-k (0: all).
int sample(const RowVec<float>& logits, double temperature, int top_k, Rng& rng) {
  const int V = static_cast<int>(logits.size());
  if (temperature <= 0) {
    Eigen::Index best;
    logits.maxCoeff(&best);
    return static_cast<int>(best);
  }
  std::vector<int> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  int k = top_k > 0 ? std::min(top_k, V) : V;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) { return logits(a) > logits(b); });
  const double m = logits(idx[0]);
  std::vector<double> p(k);
  double z = 0;
  for (int i = 0; i < k; ++i) z += p[i] = std::exp((double(logits(idx[i])) - m) / temperature);
  double u = rng.uniform() * z;
  for (int i = 0; i < k; ++i) {
    u -= p[i];
    if (u <= 0) return idx[i];
  }
  return idx[k - 1];
}

void run(const GenerateArgs& a) {
  auto model = load_model(a.checkpoint);
  if (a.prompt.empty()) throw CLI::ValidationError("--prompt must not be empty");
  Rng rng(a.seed);
  std::vector<int> prompt(a.prompt.begin(), a.prompt.end());
  for (int& t : prompt) t &= 0xff;
  auto stream = model->start();
  const auto t0 = std::chrono::steady_clock::now();
  Mat<float> logits = model->forward(*stream, prompt);
  // A diverged model (NaN or infinite weights) gives non-finite logits: sampling from them would print
  // arbitrary bytes. Refuse it, before printing anything.
  const auto refuse_non_finite = [&](const RowVec<float>& row) {
    if (!row.allFinite())
      throw std::runtime_error("the model in '" + resolve_checkpoint(a.checkpoint).string() +
                               "' gives non-finite outputs (NaN or infinity): its weights are damaged or its training "
                               "diverged; use an earlier checkpoint");
  };
  for (Eigen::Index r = 0; r < logits.rows(); ++r) refuse_non_finite(logits.row(r));
  const auto t1 = std::chrono::steady_clock::now();
  std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
  std::fflush(stdout);
  RowVec<float> last = logits.row(logits.rows() - 1);
  for (int i = 0; i < a.tokens; ++i) {
    const int next = sample(last, a.temperature, a.top_k, rng);
    const unsigned char c = static_cast<unsigned char>(next);
    std::fwrite(&c, 1, 1, stdout);
    std::fflush(stdout);
    const int tok[1] = {next};
    last = model->forward(*stream, tok).row(0);
    refuse_non_finite(last);
  }
  const auto t2 = std::chrono::steady_clock::now();
  const double prefill = std::chrono::duration<double>(t1 - t0).count();
  const double decode = std::chrono::duration<double>(t2 - t1).count();
  std::fprintf(stderr, "\n[%zu prompt bytes prefilled in %.1f ms; %d bytes decoded at %.0f bytes/s]\n",
               prompt.size(), prefill * 1e3, a.tokens, a.tokens / std::max(decode, 1e-9));
  set_exit_code(0);
}

}  // namespace

void register_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Sample text from a trained model, one byte at a time");
  cmd->add_option("--checkpoint", a->checkpoint, "A run directory or a checkpoint directory")->required();
  cmd->add_option("--prompt", a->prompt, "Text to start from")->capture_default_str();
  cmd->add_option("--tokens", a->tokens, "Bytes to generate")->check(CLI::Range(0, 1 << 24))->capture_default_str();
  cmd->add_option("--temperature", a->temperature, "Sampling temperature (0: greedy)")->check(finite_range(0.0, 100.0))->capture_default_str();
  cmd->add_option("--top-k", a->top_k, "Sample among the k most likely bytes (0: all)")->check(CLI::Range(0, 256))->capture_default_str();
  cmd->add_option("--seed", a->seed, "Sampling seed")->capture_default_str();
  cmd->callback([a] { run(*a); });
}

}  // namespace tttlab::cli
