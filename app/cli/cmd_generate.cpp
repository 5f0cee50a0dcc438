// `tttlab generate --checkpoint DIR --prompt TEXT --tokens N [--temperature T] [--top-k K] [--seed S]
// [--device auto|cpu|cuda] [--stats]`: sample bytes from a trained model. The prompt is prefilled once,
// then every new byte is one primal-form step on the streaming state: the prefix is never run again.
//
// The decoder (tttlab/model/decoder.hpp) runs on the CPU engine (prefill in the dual form) or on the
// GPU (kernels::CudaDecoder: the prompt is fed through the same per-token step; for attention models
// its KV cache holds exactly the prompt and --tokens). The device policy is
// `tttlab train --device`'s (cli/train_device.hpp): auto = the GPU when present and it can run the
// model, else the CPU with a note; cuda without a GPU is an error (exit 1), cuda for a model the GPU
// decoder does not run is a usage error (exit 2). Sampling stays here, on the host, from the float
// logits, so greedy decoding gives the same bytes on both devices whenever their argmax agree.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <span>

#include "cli/checkpoint_option.hpp"
#include "cli/commands.hpp"
#include "cli/validators.hpp"
#include "tttlab/device.hpp"
#include "tttlab/model/decoder.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/config.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/util/rng.hpp"
#ifdef TTTLAB_HAVE_CUDA
#include "tttlab/kernels/decode_cuda.hpp"
#endif

namespace tttlab::cli {
namespace {

struct GenerateArgs {
  std::string checkpoint;
  std::string prompt = "The ";
  int tokens = 200;
  double temperature = 0.8;
  int top_k = 0;
  std::uint64_t seed = 0;
  std::string device = "auto";
  bool stats = false;
};

// The decoder for --device (the policy at the top of this file). `note` receives why the CPU was
// chosen under auto although the build has CUDA kernels (empty otherwise). `context`: the tokens the
// run will feed (prompt and generated), the GPU's KV-cache capacity for attention models (its
// default where that passes k_max_positions; the decoder then refuses the feed that fills it).
std::unique_ptr<TokenDecoder> make_decoder(const std::string& device, const Model<float>& model,
                                           long context, std::string& note) {
  DeviceRequest request;
  try {
    request = parse_device_request(device);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
  // A layer without GPU kernels (Titans, LaCT) stops here, before a GPU is looked for; a model the
  // GPU decoder does not run (cuda_decode_unsupported: linear attention, some shapes) below, with
  // its reason.
  if (request == DeviceRequest::CUDA)
    if (const std::string why = gpu_kernels_missing(model.config().seq_layer); !why.empty())
      throw CLI::ValidationError("--device cuda: " + why + "; use --device cpu");
  const DeviceSelection sel = select_device(request);  // DeviceError (exit 1) for cuda without a GPU
  note = sel.note;
  if (sel.device.kind == DeviceKind::CUDA) {
#ifdef TTTLAB_HAVE_CUDA
    const std::string why = kernels::cuda_decode_unsupported(model.config());
    if (why.empty())
      return kernels::cuda_decoder_factory(sel.device.index, true,
                                           context <= k_max_positions ? context : 0)(model);
    if (request == DeviceRequest::CUDA) throw CLI::ValidationError("--device cuda: " + why);
    note = why + "; using the CPU";
#endif
  }
  return make_cpu_decoder(model);
}

// Draws a byte from logits with temperature (0: greedy) and top-k (0: all).
// Greedy picks the first of equal maxima.
int sample(std::span<const float> logits, double temperature, int top_k, Rng& rng) {
  const int V = static_cast<int>(logits.size());
  if (temperature <= 0) return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<int> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  int k = top_k > 0 ? std::min(top_k, V) : V;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  const double m = logits[idx[0]];
  std::vector<double> p(k);
  double z = 0;
  for (int i = 0; i < k; ++i) z += p[i] = std::exp((double(logits[idx[i]]) - m) / temperature);
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
  std::string note;
  const std::unique_ptr<TokenDecoder> decoder =
      make_decoder(a.device, *model, long(a.prompt.size()) + a.tokens, note);
  std::fprintf(stderr, "[decoding on %s]\n", decoder->describe().c_str());
  if (!note.empty()) std::fprintf(stderr, "[%s]\n", note.c_str());
  Rng rng(a.seed);
  std::vector<int> prompt(a.prompt.begin(), a.prompt.end());
  for (int& t : prompt) t &= 0xff;
  std::vector<float> last;
  const auto t0 = std::chrono::steady_clock::now();
  decoder->feed(prompt, last);
  // A diverged model (NaN or infinite weights) gives non-finite logits: sampling from them would print
  // arbitrary bytes. Refuse it, before printing anything. (Only the last prompt position's logits come
  // back from the decoder; a non-finite weight makes every later position non-finite too.)
  const auto refuse_non_finite = [&](const std::vector<float>& row) {
    for (float x : row)
      if (!std::isfinite(x))
        refuse_non_finite_model(a.checkpoint);
  };
  refuse_non_finite(last);
  const auto t1 = std::chrono::steady_clock::now();
  std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
  std::fflush(stdout);
  std::vector<double> step_s;  // --stats: each generated byte's decode step (feed), in seconds
  step_s.reserve(static_cast<std::size_t>(a.tokens));
  for (int i = 0; i < a.tokens; ++i) {
    const int next = sample(last, a.temperature, a.top_k, rng);
    const unsigned char c = static_cast<unsigned char>(next);
    std::fwrite(&c, 1, 1, stdout);
    std::fflush(stdout);
    const int tok[1] = {next};
    const auto s0 = std::chrono::steady_clock::now();
    decoder->feed(tok, last);
    step_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count());
    refuse_non_finite(last);
  }
  const auto t2 = std::chrono::steady_clock::now();
  const double prefill = std::chrono::duration<double>(t1 - t0).count();
  const double decode = std::chrono::duration<double>(t2 - t1).count();
  std::fprintf(stderr, "\n[%zu prompt bytes prefilled in %.1f ms; %d bytes decoded at %.0f bytes/s]\n",
               prompt.size(), prefill * 1e3, a.tokens, a.tokens / std::max(decode, 1e-9));
  if (a.stats) {
    // The first steps may build per-position CUDA graphs (one per mini-batch position, at most 64):
    // they are warm-up, left out of the median and spread.
    const std::size_t n = step_s.size();
    const std::size_t warm = std::min<std::size_t>(64, n / 2);
    std::vector<double> s(step_s.begin() + static_cast<std::ptrdiff_t>(warm), step_s.end());
    if (s.empty()) {
      std::fprintf(stderr, "[stats: no generated bytes to time]\n");
    } else {
      std::sort(s.begin(), s.end());
      const double med = s[s.size() / 2];
      std::fprintf(stderr,
                   "[stats, %s: %.0f bytes/s = 1 / the median decode step %.3f ms (min %.3f, max %.3f) over %zu "
                   "generated bytes; the first %zu bytes are warm-up, excluded; prefill excluded; sampling and "
                   "output not timed]\n",
                   to_string(decoder->kind()), 1.0 / med, med * 1e3, s.front() * 1e3, s.back() * 1e3, s.size(),
                   warm);
    }
  }
  set_exit_code(0);
}

}  // namespace

void register_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Sample text from a trained model, one byte at a time");
  add_checkpoint_option(cmd, a->checkpoint)->required();
  cmd->add_option("--prompt", a->prompt, "Text to start from")->capture_default_str();
  cmd->add_option("--tokens", a->tokens, "Bytes to generate")->check(CLI::Range(0, 1 << 24))->capture_default_str();
  cmd->add_option("--temperature", a->temperature, "Sampling temperature (0: greedy)")->check(finite_range(0.0, 100.0))->capture_default_str();
  cmd->add_option("--top-k", a->top_k, "Sample among the k most likely bytes (0: all)")->check(CLI::Range(0, 256))->capture_default_str();
  cmd->add_option("--seed", a->seed, "Sampling seed")->check(seed_value())->capture_default_str();
  cmd->add_option("--device", a->device, "auto (a GPU when present and it can run the model, else the CPU), cpu, or cuda")
      ->capture_default_str();
  cmd->add_flag("--stats", a->stats, "Print the decode speed (bytes/s, median step time and spread) on stderr");
  cmd->callback([a] { run(*a); });
}

}  // namespace tttlab::cli
