// `tttlab states --checkpoint DIR (--text TEXT | --data FILE) --out FILE.safetensors`: the hidden
// state of every TTT head of a trained model along a text, with the three inner losses and η, written
// to a safetensors file for analysis in Python or elsewhere (app/inspect/hidden_states.hpp gives the
// file's layout; the README shows how to read it).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <unistd.h>

#include "cli/checkpoint_option.hpp"
#include "cli/commands.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "cli/validators.hpp"
#include "inspect/hidden_states.hpp"
#include "tttlab/data/text_file.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/model/checkpoint.hpp"

namespace tttlab::cli {
namespace {

struct StatesArgs {
  std::string checkpoint;
  std::string text;
  std::string data;
  std::string out;
  std::vector<int> blocks, heads;
  std::string every = "token";
  long stride = 0;
  std::string dtype = "f32";
  double max_size_mib = 2048;
  long max_tokens = 1 << 16;
};

void run(const StatesArgs& a) {
  check_output_file(a.out);  // before anything is computed
  inspect::StatesRequest r;
  if (!a.data.empty()) {
    TextLoadOptions lo;
    lo.max_bytes = static_cast<std::uint64_t>(a.max_tokens);
    const TextCorpus c = load_text_file(a.data, lo);  // refuses empty, binary and non-UTF-8 files
    r.bytes.assign(c.bytes.begin(), c.bytes.end());
  } else {
    if (static_cast<long>(a.text.size()) > a.max_tokens)
      throw std::runtime_error("--text has " + std::to_string(a.text.size()) + " bytes, above --max-tokens " +
                               std::to_string(a.max_tokens));
    r.bytes.assign(a.text.begin(), a.text.end());
  }
  r.blocks = a.blocks;
  r.heads = a.heads;
  if (a.stride > 0) {
    r.every = inspect::SaveEvery::Stride;
    r.stride = a.stride;
  } else {
    r.every = a.every == "mini-batch" ? inspect::SaveEvery::MiniBatchEnd : inspect::SaveEvery::Token;
  }
  r.stored = a.dtype == "f64" ? DType::F64 : DType::F32;
  r.max_file_bytes = static_cast<std::uint64_t>(a.max_size_mib * 1024 * 1024);
  r.model_source = resolve_checkpoint(a.checkpoint).string();
  const auto model = load_model(a.checkpoint);
  const bool tty = isatty(fileno(stdout));
  const inspect::StatesSummary plan = inspect::plan_states(model->config(), r);
  check_memory(inspect::states_memory(model->config(), r, plan), "the states file");
  std::printf("model: %s (%s, b = %d)\n", printable(r.model_source).c_str(), to_string(model->config().seq_layer).c_str(),
              model->config().mini_batch_size);
  std::printf("text: %ld bytes; %zu block%s x %zu head%s; %zu states per head (%s); about %.1f MiB\n", plan.tokens,
              plan.blocks.size(), plan.blocks.size() == 1 ? "" : "s", plan.heads.size(), plan.heads.size() == 1 ? "" : "s",
              plan.saved.size(),
              a.stride > 0 ? ("every " + std::to_string(a.stride) + " tokens").c_str()
                           : (a.every == "mini-batch" ? "at every mini-batch end" : "after every token"),
              double(plan.file_bytes) / (1 << 20));
  std::fflush(stdout);
  const auto done = inspect::write_states_file(*model, r, a.out, [&](int k, int n) {
    if (tty) {
      std::printf("\r\33[2Kheads %d/%d", k, n);
      std::fflush(stdout);
    }
  });
  if (tty) std::printf("\r\33[2K");
  std::printf("wrote %s (%.1f MiB)\n", printable(a.out).c_str(), double(done.file_bytes) / (1 << 20));
  set_exit_code(0);
}

}  // namespace

void register_states(CLI::App& app) {
  auto a = std::make_shared<StatesArgs>();
  auto* cmd = app.add_subcommand(
      "states",
      "Write the hidden state of a trained TTT model's heads along a text to a safetensors file: W_t and b_t "
      "(and W2, b2 for TTT-MLP) per block and head, the three inner losses, lambda, tau, eta and the token bytes. "
      "Read it with Python's safetensors or NumPy (see the README).");
  add_checkpoint_option(cmd, a->checkpoint, std::string(kCheckpointHelp) + " (e.g. assets/models/tiny-brown)")->required();
  auto* text = cmd->add_option("--text", a->text, "The text to read (its bytes are the tokens)");
  auto* data = cmd->add_option("--data", a->data, "A UTF-8 text file to read instead of --text")->check(non_empty_path());
  text->excludes(data);
  data->excludes(text);
  cmd->add_option("--out", a->out, "The safetensors file to write")->check(non_empty_path())->required();
  cmd->add_option("--block", a->blocks, "Blocks to include (repeat or comma-separate; default: all)")->delimiter(',');
  cmd->add_option("--head", a->heads, "Heads to include (repeat or comma-separate; default: all)")->delimiter(',');
  cmd->add_option("--every", a->every, "Save the state after every token, or after the last token of every mini-batch")
      ->check(CLI::IsMember({"token", "mini-batch"}))->capture_default_str();
  cmd->add_option("--stride", a->stride, "Save the state after every N-th token instead (and after the last)")
      ->check(CLI::Range(1L, 1L << 30));
  cmd->add_option("--dtype", a->dtype, "Storage of the numbers: f32, or f64 (the engine's own double values)")
      ->check(CLI::IsMember({"f32", "f64"}))->capture_default_str();
  cmd->add_option("--max-size", a->max_size_mib, "Refuse to write a file larger than this many MiB (checked before computing)")
      ->check(finite_range(1.0, 1e7))->capture_default_str();
  cmd->add_option("--max-tokens", a->max_tokens, "Refuse a text longer than this many bytes")
      ->check(CLI::Range(1L, 1L << 30))->capture_default_str();
  cmd->callback([cmd, a] {
    if (cmd->count("--text") == 0 && cmd->count("--data") == 0)
      throw CLI::ValidationError("give the text with --text or --data");
    run(*a);
  });
}

}  // namespace tttlab::cli
