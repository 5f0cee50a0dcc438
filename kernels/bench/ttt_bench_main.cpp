// tttlab_ttt_bench: times the TTT kernels at one shape and prints the table of ttt_bench()
// (median ms, GFLOP/s, memory-traffic floor, peer and target). Default shape:
// B=16 H=12 T=2048 d=64 b=16.
//
//   tttlab_ttt_bench [--batch N] [--heads N] [--seq N] [--dim N] [--mini-batch N]
//                    [--warmup N] [--repeats N] [--no-mlp] [--no-backward] [--default-only]
//                    [--attention-length T]... [--only GROUP]...
//
// --only times one group of rows (repeat it for several): ttt-linear, ttt-mlp, attention,
// linear-attention, matrix-rules, delta-rules, titans, lact.
//
// Exit status: 0 ok, 1 failure (no GPU, CUDA error), 2 usage error.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include "tttlab/kernels/cuda_device.hpp"
#include "tttlab/kernels/ttt_bench.hpp"

namespace {

int parse_int(const char* flag, const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (!text[0] || *end || v < 0 || v > 1000000)
    throw std::invalid_argument(std::string(flag) + " needs a non-negative integer, got '" + text + "'");
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tttlab::kernels;
  TttBenchConfig cfg;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> const char* {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--batch") cfg.dims.batch = parse_int("--batch", value());
      else if (a == "--heads") cfg.dims.heads = parse_int("--heads", value());
      else if (a == "--seq") cfg.dims.seq_len = parse_int("--seq", value());
      else if (a == "--dim") cfg.dims.head_dim = parse_int("--dim", value());
      else if (a == "--mini-batch") cfg.dims.mini_batch = parse_int("--mini-batch", value());
      else if (a == "--warmup") cfg.warmup = parse_int("--warmup", value());
      else if (a == "--repeats") cfg.repeats = parse_int("--repeats", value());
      else if (a == "--attention-length") cfg.attention_lengths.push_back(parse_int("--attention-length", value()));
      else if (a == "--only") cfg.groups.push_back(value());
      else if (a == "--no-mlp") cfg.mlp = false;
      else if (a == "--no-backward") cfg.backward = false;
      else if (a == "--default-only") cfg.all_versions = false;
      else if (a == "--help" || a == "-h") {
        std::printf("usage: tttlab_ttt_bench [--batch N] [--heads N] [--seq N] [--dim N] "
                    "[--mini-batch N] [--warmup N] [--repeats N] [--no-mlp] [--no-backward] "
                    "[--default-only] [--attention-length T]... [--only GROUP]...\n"
                    "groups: ttt-linear ttt-mlp attention linear-attention matrix-rules "
                    "delta-rules titans lact\n");
        return 0;
      } else {
        throw std::invalid_argument("unknown option '" + a + "' (see --help)");
      }
    }
    for (const std::string& g : cfg.groups)
      if (!is_ttt_bench_group(g))
        throw std::invalid_argument("--only: no row group named '" + g + "' (see --help)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tttlab_ttt_bench: %s\n", e.what());
    return 2;
  }
  const CudaQuery q = query_cuda_devices();
  if (q.status != CudaStatus::Ok) {
    std::fprintf(stderr, "tttlab_ttt_bench: no CUDA device: %s\n", q.message.c_str());
    return 1;
  }
  try {
    const TttBenchReport r = ttt_bench(cfg);
    std::fputs(format_ttt_bench(r).c_str(), stdout);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "tttlab_ttt_bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tttlab_ttt_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
