// `tttlab bench [--json]`: training and inference speed of each preset on this machine's CPU, as a
// ratio to this machine's GEMM rate measured in the same run.
//
// Ceiling: Eigen float GEMM (n × n × n, n = 384) run on every worker thread at once, each thread on
// its own matrices, as training runs (one sequence per thread, Eigen single-threaded inside). Model
// FLOPs count the matrix products of the forward (projections, SwiGLU, tied head, and the TTT inner
// loop: 6d² + 4bd per token and head for TTT-Linear) and 3× that for a training step. MFU = model
// FLOP/s ÷ the GEMM rate.
//
// Generation (both devices): bytes/s of greedy decoding at batch 1 through a TokenDecoder
// (tttlab/model/decoder.hpp) for a randomly initialised model of each preset: W warm-up bytes (not
// timed: first steps, CUDA graph capture), then R repeats of N bytes, each repeat timed as a whole
// (decode steps and the host's argmax); rows give the median and min–max over the repeats, and on
// CUDA the ratio of the medians to the CPU row of the same preset.
//
// `--device cuda [--json]` adds, after the generation rows: the TTT and attention kernels at the
// paper's shape (kernels::ttt_bench: median and min–max of CUDA-event times, GFLOP/s, and the floor:
// the bytes that must move over the copy bandwidth measured in the same run), the GEMM rate of tf32
// and fp32 products measured in the same run (the ceiling), and whole-model training steps for all
// four layers at both shapes (D256-L4 B16 T512, D768-L12 B8 T2048) in tf32 and fp32: median and
// min–max of 10 timed steps, tokens/s, TFLOP/s, the ratio to the ceiling and the floor (the step's
// FLOPs at the ceiling), and one profiled step's breakdown. --json prints all of it as one object.
//
// `--device cuda --latency [--json] [--csv FILE]` measures instead the paper's Fig. 3 / 15 in
// miniature, prefill and decode time per token against context length (cli/bench_latency.hpp);
// `--latency --plan` prints the rows it would measure without touching a GPU.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/bench_latency.hpp"
#include "cli/commands.hpp"
#include "tttlab/util/parallel.hpp"
#include "cli/progress.hpp"
#include "cli/model_options.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/model/decoder.hpp"
#include "tttlab/train/trainer.hpp"
#include "tttlab/util/rng.hpp"
#ifdef TTTLAB_HAVE_CUDA
#include "tttlab/data/batches.hpp"
#include "tttlab/kernels/decode_cuda.hpp"
#include "tttlab/kernels/multi_gpu.hpp"
#include "tttlab/kernels/train_cuda.hpp"
#include "tttlab/kernels/ttt_bench.hpp"
#include "tttlab/optim/adamw.hpp"
#endif

namespace tttlab::cli {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// What every row reports of its repeats: the median (the upper one of an even count), min and max.
struct Spread {
  double median = 0, min = 0, max = 0;
};
Spread spread_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// GFLOP/s of float GEMM with `threads` threads each multiplying its own n × n matrices.
double gemm_rate(int threads, int n, double seconds) {
  std::vector<double> flops(threads, 0.0);
  std::vector<double> elapsed(threads, 0.0);
  // run_parallel: a thread that cannot be started is a clear error, not std::terminate.
  run_parallel(threads, [&](int i) {
      Rng rng(i + 1);
      Mat<float> A(n, n), B(n, n), C(n, n);
      for (Eigen::Index k = 0; k < A.size(); ++k) A.data()[k] = rng.uniform_float() - 0.5f;
      for (Eigen::Index k = 0; k < B.size(); ++k) B.data()[k] = rng.uniform_float() - 0.5f;
      C.noalias() = A * B;  // warm-up
      const auto t0 = Clock::now();
      long reps = 0;
      do {
        C.noalias() = A * B;
        A(0, 0) += C(1, 1) * 1e-30f;  // keep every product live
        ++reps;
      } while (since(t0) < seconds);
      elapsed[i] = since(t0);
      flops[i] = 2.0 * n * n * double(n) * reps;
    });
  double rate = 0;
  for (int i = 0; i < threads; ++i) rate += flops[i] / elapsed[i];
  return rate / 1e9;
}

struct Row {
  std::string preset, layer;
  long params = 0;
  int batch = 0, seq_len = 0;
  double fwd_flops_per_token = 0;
  // One training step's wall time: median and min–max over the timed steps (after one warm-up).
  int steps_timed = 0;
  double step_ms_median = 0, step_ms_min = 0, step_ms_max = 0;
  double train_tok_s = 0, train_gflops = 0, train_mfu = 0;  // at the median step
  double prefill_tok_s = 0, decode_tok_s = 0;
};

Row bench_preset(const ModelConfig& model, const std::string& preset, int batch, int seq_len, int steps,
                 int threads, double gemm) {
  TrainConfig cfg;
  cfg.model = model;
  cfg.model.max_position_embeddings = seq_len;
  cfg.batch_size = batch;
  cfg.seq_len = seq_len;
  cfg.steps = steps + 1;
  cfg.threads = threads;
  TextData data;
  Rng rng(5);
  data.train.resize(std::size_t(batch) * (seq_len + 1) * 4 + 4096);
  for (auto& b : data.train) b = static_cast<std::uint8_t>(32 + rng.below(95));
  data.val = data.train;
  data.description = "random printable bytes";
  Trainer t(cfg, std::move(data));
  Row r;
  r.preset = preset;
  r.layer = to_string(model.seq_layer);
  r.params = t.model().num_params();
  r.batch = batch;
  r.seq_len = seq_len;
  r.fwd_flops_per_token = t.model().forward_flops(seq_len) / seq_len;
  t.step();  // warm-up (allocations)
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    t.step();
    ms.push_back(1e3 * since(t0));
  }
  const Spread step = spread_of(ms);
  r.steps_timed = static_cast<int>(ms.size());
  r.step_ms_median = step.median;
  r.step_ms_min = step.min;
  r.step_ms_max = step.max;
  r.train_tok_s = double(batch) * seq_len / (r.step_ms_median / 1e3);
  r.train_gflops = r.train_tok_s * 3 * r.fwd_flops_per_token / 1e9;
  r.train_mfu = r.train_gflops / gemm;
  // Inference, one sequence: prefill (dual form over T tokens), then decode (one primal step a token).
  std::vector<int> tokens(seq_len);
  for (int& v : tokens) v = static_cast<int>(32 + rng.below(95));
  auto st = t.model().start();
  const auto t1 = Clock::now();
  t.model().forward(*st, tokens);
  r.prefill_tok_s = seq_len / since(t1);
  const int n_decode = std::min(seq_len, 128);
  const auto t2 = Clock::now();
  for (int i = 0; i < n_decode; ++i) {
    const int tok[1] = {tokens[i]};
    t.model().forward(*st, tok);
  }
  r.decode_tok_s = n_decode / since(t2);
  return r;
}

// ---- generation ----------------------------------------------------------------------------------

struct GenRow {
  std::string preset, layer, device, describe;
  long params = 0;
  int warmup = 0, bytes = 0, repeats = 0;
  double median_bps = 0, min_bps = 0, max_bps = 0;
  double ratio_to_cpu = 0;  // CUDA rows: median / the CPU row's median (0: no CPU row)
};

// The model a generation row decodes: the preset with the bench's layer and backbone, random weights.
ModelConfig generation_config(const std::string& preset, const std::string& layer, const std::string& backbone) {
  ModelConfig m = ModelConfig::preset(preset);
  m.seq_layer = seq_layer_from_string(layer);
  m.mamba_backbone = backbone == "m";
  m.ttt_base_lr = default_ttt_base_lr(m.seq_layer);
  return m;
}

// Greedy decoding from the prompt byte 'T': `warmup` bytes untimed, then `repeats` timed runs of
// `bytes` bytes each, continuing the same stream.
GenRow bench_generation(const std::string& preset, const Model<float>& model, const DecoderFactory& make,
                        const std::string& device, int warmup, int bytes, int repeats) {
  const std::unique_ptr<TokenDecoder> dec = make(model);
  std::vector<float> logits;
  const int first[1] = {'T'};
  dec->feed(first, logits);
  const auto step = [&] {
    const int tok[1] = {static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin())};
    dec->feed(tok, logits);
  };
  for (int i = 0; i < warmup; ++i) step();
  std::vector<double> bps;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < bytes; ++i) step();
    bps.push_back(bytes / std::max(since(t0), 1e-9));
  }
  const Spread rate = spread_of(bps);
  GenRow g;
  g.preset = preset;
  g.layer = to_string(model.config().seq_layer);
  g.device = device;
  g.describe = dec->describe();
  g.params = const_cast<Model<float>&>(model).num_params();
  g.warmup = warmup;
  g.bytes = bytes;
  g.repeats = repeats;
  g.median_bps = rate.median;
  g.min_bps = rate.min;
  g.max_bps = rate.max;
  return g;
}

// W, N, R per preset and device: the CPU's 125m row decodes fewer bytes (a 125M-parameter primal step
// takes tens of ms on a few cores).
void generation_counts(const std::string& preset, bool cuda, int& warmup, int& bytes, int& repeats) {
  warmup = 32, bytes = 256, repeats = 5;
  if (!cuda && preset == "125m") warmup = 16, bytes = 32, repeats = 3;
  if (cuda && preset == "125m") warmup = 64, bytes = 512, repeats = 5;
}

void print_generation_header() {
  std::printf("\nGeneration at batch 1 (greedy; random weights of each preset). bytes/s = N bytes / the wall time of\n"
              "their decode steps; median and min-max over R repeats, after W warm-up bytes that are not timed\n"
              "(first steps, CUDA graph capture). x CPU: the CUDA median over the CPU median of the same preset.\n");
  std::printf("%-6s %-17s %-16s %10s %4s %5s %3s %11s %23s %8s\n", "preset", "layer", "device", "params", "W", "N", "R",
              "bytes/s", "min - max", "x CPU");
}

void print_generation_row(const GenRow& g) {
  char ratio[32] = "";
  if (g.ratio_to_cpu > 0) std::snprintf(ratio, sizeof ratio, "%.1f", g.ratio_to_cpu);
  std::printf("%-6s %-17s %-16s %10ld %4d %5d %3d %11.0f %11.0f - %-9.0f %8s\n", g.preset.c_str(), g.layer.c_str(),
              g.device.c_str(), g.params, g.warmup, g.bytes, g.repeats, g.median_bps, g.min_bps, g.max_bps, ratio);
  std::fflush(stdout);
}

Json generation_json(const GenRow& g) {
  Json o = {{"preset", g.preset}, {"layer", g.layer}, {"device", g.device}, {"device_description", g.describe},
            {"params", g.params}, {"batch", 1},
            {"warmup_bytes", g.warmup}, {"bytes_per_repeat", g.bytes}, {"repeats", g.repeats},
            {"bytes_per_s_median", g.median_bps}, {"bytes_per_s_min", g.min_bps}, {"bytes_per_s_max", g.max_bps}};
  if (g.ratio_to_cpu > 0) o["ratio_to_cpu"] = g.ratio_to_cpu;
  return o;
}

struct BenchArgs {
  std::vector<std::string> presets{"tiny", "small", "125m"};
  std::string layer = "ttt-linear";
  // --layer given on the command line: with --device cuda, the training rows of that layer only.
  bool layer_given = false;
  std::string backbone = "m";
  int threads = 0;
  int steps = 0;  // CPU training rows: timed steps per preset (0: the preset's default)
  bool json = false;
  std::string device = "cpu";
  bool generation_only = false;
  bool training_only = false;  // GPU: only the GEMM ceilings and the whole-model training rows
  int gpus = 0;  // > 0: the data-parallel scaling rows on 1 .. gpus GPUs instead of everything else
  bool latency = false;  // Fig. 3 in miniature instead of everything else (bench_latency.hpp)
  LatencyArgs lat;
};

#ifdef TTTLAB_HAVE_CUDA
// Whole-model training on the GPU: tokens/s of full steps (forward, backward, AdamW) at one shape,
// and where one step's device time goes.
struct GpuRow {
  std::string name, gemm, layer, backbone;
  int width = 0, layers = 0, heads = 0, ffn = 0, batch = 0, seq_len = 0;
  long params = 0;
  double ms_per_step = 0, min_ms = 0, max_ms = 0, tok_s = 0, tflops = 0;
  int repeats = 0, warmup = 2;
  double step_flops = 0;  // 3x the forward's matrix-product FLOPs
  kernels::CudaStepProfile profile;
};

// gpus = 0: one CudaTrainBackend on device 0. gpus ≥ 1: the data-parallel backend (kernels/multi_gpu.hpp)
// over that many GPUs with B sequences on each (a global batch of B·gpus).
GpuRow bench_gpu_training(const std::string& name, int D, int L, int B, int T, const std::string& layer,
                          const std::string& backbone, kernels::GemmPrecision gemm, int steps, int gpus = 0) {
  B *= std::max(1, gpus);
  TrainConfig cfg;
  cfg.model.hidden_size = D;
  cfg.model.num_hidden_layers = L;
  cfg.model.num_attention_heads = D / 64;
  cfg.model.intermediate_size = (D * 8 / 3 + 63) / 64 * 64;  // SwiGLU's 8/3·D, rounded up to 64 (2048 at D=768)
  cfg.model.seq_layer = seq_layer_from_string(layer);
  // LaCT's fast-weight heads of 128 (D / 128 of them), as docs/RESULTS.md's rows were measured; the
  // default 2 heads would be 384 wide at D = 768.
  cfg.model.lact_heads = std::max(1, D / 128);
  cfg.model.mamba_backbone = backbone == "m";
  cfg.model.max_position_embeddings = T;
  cfg.batch_size = B;
  cfg.seq_len = T;
  std::vector<std::uint8_t> text(std::size_t(B) * (T + 1) * 4 + 4096);
  Rng rng(5);
  for (auto& b : text) b = static_cast<std::uint8_t>(32 + rng.below(95));
  Model<float> model(cfg.model, 1);
  WarmupCosineSchedule sched;
  sched.peak_value = 1e-3;
  sched.decay_steps = 1000;
  AdamW<float> optim(AdamWConfig{}, sched);
  kernels::CudaTrainOptions o;
  o.gemm = gemm;
  const TrainBackendContext ctx{&cfg, &model, &optim, 1};
  std::unique_ptr<TrainBackend> backend;
  kernels::CudaTrainBackend* single = nullptr;
  if (gpus > 0) {
    kernels::MultiGpuOptions m;
    m.gpus = gpus;
    m.cuda = o;
    backend = kernels::multi_gpu_train_backend_factory(m)(ctx);
  } else {
    auto b = std::make_unique<kernels::CudaTrainBackend>(ctx, o);
    single = b.get();
    backend = std::move(b);
  }
  TrainBackend& gpu = *backend;
  RandomWindowSampler sampler(text, B, T, 3);
  GpuRow r;
  r.name = name;
  r.gemm = kernels::to_string(gemm);
  r.layer = layer;
  r.backbone = backbone;
  r.width = D;
  r.layers = L;
  r.heads = cfg.model.num_attention_heads;
  r.ffn = cfg.model.intermediate_size;
  r.batch = B;
  r.seq_len = T;
  r.params = model.num_params();
  for (int i = 0; i < 2; ++i) gpu.step(sampler.next());  // warm-up: cuBLAS heuristics, first launches
  // step() returns once the gradient norm reached the host, with the AdamW update still running; the
  // next step waits for it before its batch is copied. In steady state one step() is one step.
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    const TokenBatch batch = sampler.next();
    const auto t0 = Clock::now();
    gpu.step(batch);
    ms.push_back(since(t0) * 1e3);
  }
  const Spread step = spread_of(ms);
  r.ms_per_step = step.median;
  r.min_ms = step.min;
  r.max_ms = step.max;
  r.repeats = steps;
  r.tok_s = double(B) * T / (r.ms_per_step / 1e3);
  r.step_flops = 3.0 * B * model.forward_flops(T);
  r.tflops = r.step_flops / (r.ms_per_step / 1e3) / 1e12;
  if (single) single->profile_step(sampler.next(), r.profile);
  return r;
}

// A whole-model row's shape and times (the training rows and the scaling rows).
Json step_json(const GpuRow& r) {
  return {{"shape", r.name}, {"layer", r.layer}, {"backbone", r.backbone}, {"gemm", r.gemm},
          {"D", r.width}, {"L", r.layers}, {"H", r.heads}, {"F", r.ffn}, {"B", r.batch}, {"T", r.seq_len},
          {"params", r.params},
          {"median_ms", r.ms_per_step}, {"min_ms", r.min_ms}, {"max_ms", r.max_ms},
          {"repeats", r.repeats}, {"warmup", r.warmup},
          {"tokens_per_s", r.tok_s}, {"tflops", r.tflops}};
}

// Data-parallel scaling (`--gpus N`): the same model with B sequences per GPU on 1, 2, 4, … and N
// GPUs; efficiency = tokens/s on n GPUs / (n × tokens/s on one), the one-GPU row measured through
// the same data-parallel code (one NCCL rank) in the same run.
void run_cuda_scaling(const BenchArgs& a) {
  std::string why;
  if (!kernels::nccl_available(&why)) throw std::runtime_error("--gpus: " + why);
  const int have = kernels::cuda_device_count();
  if (a.gpus > have)
    throw std::runtime_error("--gpus " + std::to_string(a.gpus) + ": this machine shows " + std::to_string(have) + " GPUs");
  std::vector<int> counts;
  for (int n = 1; n < a.gpus; n *= 2) counts.push_back(n);
  counts.push_back(a.gpus);
  const int B = 8, T = 2048, steps = 10;
  if (!a.json) {
    std::printf("Data-parallel scaling, NCCL %s: %s, D768 L12, B %d x T %d per GPU, tf32; median and min-max of %d steps\n"
                "after 2 warm-up steps\n",
                kernels::nccl_version().c_str(), a.layer.c_str(), B, T, steps);
    std::printf("%5s %9s %17s %12s %14s %11s\n", "GPUs", "ms/step", "min - max", "tokens/s", "per GPU", "efficiency");
  }
  Json rows = Json::array();
  double one = 0;
  for (const int n : counts) {
    const GpuRow r = bench_gpu_training("D768-L12", 768, 12, B, T, a.layer, a.backbone, kernels::GemmPrecision::Tf32,
                                        steps, n);
    if (n == 1) one = r.tok_s;
    const double eff = one > 0 ? r.tok_s / (n * one) : 0.0;
    if (!a.json) {
      std::printf("%5d %9.2f %8.2f - %-6.2f %12.0f %14.0f %10.1f%%\n", n, r.ms_per_step, r.min_ms, r.max_ms, r.tok_s,
                  r.tok_s / n, 100 * eff);
      std::fflush(stdout);
    }
    Json o = step_json(r);
    o["gpus"] = n;
    o["B_per_gpu"] = B;
    o["tokens_per_s_per_gpu"] = r.tok_s / n;
    o["scaling_efficiency"] = eff;
    rows.push_back(o);
  }
  if (a.json) {
    Json out = Json::object();
    out["nccl"] = kernels::nccl_version();
    out["scaling"] = rows;
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("\nefficiency: tokens/s on n GPUs / (n x tokens/s on 1 GPU). Each step: every GPU's forward and backward\n"
                "on its 8 sequences, one all-reduce of the fp32 gradient through NCCL, the same AdamW update on every GPU.\n");
  }
  set_exit_code(0);
}

// Generation rows on the CPU and the GPU for each preset (plus the GPU without CUDA graphs, to show
// what the graphs save).
std::vector<GenRow> run_cuda_generation(const BenchArgs& a, int device) {
  std::vector<GenRow> rows;
  if (!a.json) print_generation_header();
  for (const auto& p : a.presets) {
    const ModelConfig m = generation_config(p, a.layer, a.backbone);
    const Model<float> model(m, 1);
    int W, N, R;
    generation_counts(p, false, W, N, R);
    const GenRow cpu = bench_generation(p, model, make_cpu_decoder, "cpu", W, N, R);
    rows.push_back(cpu);
    if (!a.json) print_generation_row(cpu);
    if (const std::string why = kernels::cuda_decode_unsupported(m); !why.empty()) {
      if (!a.json) std::printf("%-6s %-11s cuda: %s\n", p.c_str(), to_string(m.seq_layer).c_str(), why.c_str());
      continue;
    }
    generation_counts(p, true, W, N, R);
    for (const bool graphs : {true, false}) {
      GenRow g = bench_generation(p, model, kernels::cuda_decoder_factory(device, graphs),
                                  graphs ? "cuda" : "cuda (no graphs)", W, N, R);
      g.ratio_to_cpu = g.median_bps / cpu.median_bps;
      rows.push_back(g);
      if (!a.json) print_generation_row(g);
    }
  }
  return rows;
}

Json kernel_json(const kernels::TttBenchRow& r) {
  Json o = {{"name", r.name}, {"shape", r.shape},
            {"median_ms", r.median_ms}, {"min_ms", r.min_ms}, {"max_ms", r.max_ms},
            {"repeats", r.repeats}, {"warmup", r.warmup}, {"gflops", r.gflops},
            {"floor_ms", r.floor_ms}};  // bytes that must move / the copy bandwidth measured in this run
  o["floor_ratio"] = r.floor_ms > 0 ? r.median_ms / r.floor_ms : 0.0;
  if (r.peer_ms > 0) {
    o["peer_ms"] = r.peer_ms;
    o["peer"] = r.peer;
    o["ratio_to_peer"] = r.median_ms / r.peer_ms;
  }
  if (r.target_ms > 0) o["target_ms"] = r.target_ms;
  return o;
}

Json training_json(const GpuRow& r, const kernels::GemmRate& ceiling) {
  Json o = step_json(r);
  // The ceiling measured in this run: the GEMM rate of this precision. floor_ms: the step's FLOPs at
  // that rate (every FLOP of a step is a matrix product or the inner loop's).
  o["gemm_ceiling_tflops"] = ceiling.median_tflops;
  o["floor_ms"] = r.step_flops / (ceiling.median_tflops * 1e12) * 1e3;
  o["ratio_to_ceiling"] = r.tflops / ceiling.median_tflops;
  o["one_profiled_step"] = {{"total_ms", r.profile.total_ms}, {"gemm_ms", r.profile.gemm_ms},
                            {"mixer_forward_ms", r.profile.inner_forward_ms},
                            {"mixer_backward_ms", r.profile.inner_backward_ms}, {"rest_ms", r.profile.other_ms}};
  return o;
}

void run_cuda(const BenchArgs& a, int device, const std::string& device_text) {
  if (a.gpus > 0) {
    run_cuda_scaling(a);
    return;
  }
  const std::vector<GenRow> gen =
      a.training_only ? std::vector<GenRow>{} : run_cuda_generation(a, device);
  if (a.generation_only && !a.json) {
    set_exit_code(0);
    return;
  }
  Json out = Json::object();
  out["device"] = device_text;
  Json garr = Json::array();
  for (const auto& g : gen) garr.push_back(generation_json(g));
  out["generation"] = garr;
  if (a.generation_only) {
    std::printf("%s\n", out.dump(2).c_str());
    set_exit_code(0);
    return;
  }
  if (!a.training_only) {
    if (!a.json) std::printf("\n");
    // The tensor-core attention also at the long contexts where the paper compares TTT with it.
    kernels::TttBenchConfig kcfg;
    kcfg.attention_lengths = {8192, 32768};
    const kernels::TttBenchReport rep = kernels::ttt_bench(kcfg);
    if (!a.json)
      std::printf("TTT inner-loop kernels\n%s\n", kernels::format_ttt_bench(rep).c_str());
    out["copy_bandwidth_gbs"] = rep.copy_bandwidth_gbs;
    Json karr = Json::array();
    for (const auto& r : rep.rows) karr.push_back(kernel_json(r));
    out["kernels"] = karr;
  }

  // The ceilings of the whole-model rows, measured in this run.
  const kernels::GemmRate tf32 = kernels::measure_gemm_rate(kernels::GemmPrecision::Tf32);
  const kernels::GemmRate fp32 = kernels::measure_gemm_rate(kernels::GemmPrecision::Fp32);
  const kernels::GemmRate bf16 = kernels::measure_gemm_rate(kernels::GemmPrecision::Bf16);
  Json ceil = Json::object();
  for (const auto* g : {&tf32, &fp32, &bf16}) {
    ceil[g == &tf32 ? "tf32" : g == &fp32 ? "fp32" : "bf16"] = {
        {"median_tflops", g->median_tflops}, {"min_tflops", g->min_tflops}, {"max_tflops", g->max_tflops},
        {"n", g->n}, {"repeats", g->repeats}, {"engine", g->engine}};
  }
  out["gemm_ceiling"] = ceil;
  if (!a.json) {
    std::printf("GEMM ceiling (n = %d, median of %d, min-max): tf32 %.1f TFLOP/s (%.1f - %.1f), fp32 %.1f (%.1f - %.1f), "
                "bf16 %.1f (%.1f - %.1f; its operands rounded from fp32 included)\n\n",
                tf32.n, tf32.repeats, tf32.median_tflops, tf32.min_tflops, tf32.max_tflops, fp32.median_tflops,
                fp32.min_tflops, fp32.max_tflops, bf16.median_tflops, bf16.min_tflops, bf16.max_tflops);
    std::printf("Whole-model training steps on the GPU (%s backbone; forward + backward + AdamW; median and min-max of 10 "
                "timed steps after 2 warm-up steps)\n",
                a.backbone.c_str());
    std::printf("%-17s %-9s %5s %3s %9s %10s %5s %8s %17s %9s %7s %6s | %-44s\n", "layer", "shape", "D", "L", "B x T",
                "params", "gemm", "ms/step", "min - max", "tokens/s", "TFLOP/s", "ceil%",
                "one profiled step, ms: total: GEMM, mixer fwd, mixer bwd, rest");
  }
  Json tarr = Json::array();
  for (const char* layer : {"ttt-linear", "ttt-mlp", "linear-attention", "softmax-attention", "mamba2",
                            "deltanet", "gated-deltanet", "titans", "lact"}) {
    if (a.layer_given && a.layer != layer) continue;
    // Only the TTT layers and the attention baselines take the Mamba-style backbone; the family's
    // other members sit in the Transformer block whatever --backbone says.
    const std::string l(layer);
    const bool transformer_only = l == "mamba2" || l == "deltanet" || l == "gated-deltanet" || l == "titans" || l == "lact";
    const std::string backbone = transformer_only ? "t" : a.backbone;
    for (const auto& gemm : {kernels::GemmPrecision::Tf32, kernels::GemmPrecision::Bf16, kernels::GemmPrecision::Fp32})
      for (int shape = 0; shape < 2; ++shape) {
        const GpuRow r = shape == 0 ? bench_gpu_training("D256-L4", 256, 4, 16, 512, layer, backbone, gemm, 10)
                                    : bench_gpu_training("D768-L12", 768, 12, 8, 2048, layer, backbone, gemm, 10);
        const kernels::GemmRate& c = gemm == kernels::GemmPrecision::Tf32 ? tf32 : gemm == kernels::GemmPrecision::Bf16 ? bf16 : fp32;
        tarr.push_back(training_json(r, c));
        if (!a.json) {
          const kernels::CudaStepProfile& p = r.profile;
          std::printf("%-17s %-9s %5d %3d %3d x %-4d %10ld %5s %8.2f %8.2f - %-6.2f %9.0f %7.1f %5.0f%% | %6.1f: %6.1f %6.1f %6.1f %6.1f\n",
                      layer, r.name.c_str(), r.width, r.layers, r.batch, r.seq_len, r.params, r.gemm.c_str(),
                      r.ms_per_step, r.min_ms, r.max_ms, r.tok_s, r.tflops, 100.0 * r.tflops / c.median_tflops,
                      p.total_ms, p.gemm_ms, p.inner_forward_ms, p.inner_backward_ms, p.other_ms);
          std::fflush(stdout);
        }
      }
  }
  out["training"] = tarr;
  if (a.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("\nTFLOP/s: 3x the forward's matrix-product FLOPs (inner loop included) per second of a step; ceil%%: that\n"
                "over the GEMM rate of the same precision measured above. mixer fwd, bwd: the TTT inner loop (TTT\n"
                "layers) or the attention kernel (attention baselines); the other members' inner loops count in\n"
                "the rest. bf16 rows: `tttlab train --precision bf16`, the matrix products with bf16 operands and\n"
                "fp32 accumulation, the TTT inner loop and LaCT's in tf32, the delta rules' in the chunked bf16\n"
                "form, everything else fp32 but the SwiGLU's pre-activations (docs/KERNELS.md, \"Mixed\n"
                "precision\"). LaCT: fast-weight heads of 128 (D / 128 heads).\n");
  }
  set_exit_code(0);
}
#endif

// `--latency`: checked in full before any device is asked for.
void run_latency_mode(BenchArgs& a) {
  if (a.device != "cuda")
    throw CLI::ValidationError("--latency measures the GPU: use it with --device cuda");
  if (a.generation_only || a.training_only || a.gpus > 0)
    throw CLI::ValidationError("--latency excludes --generation-only, --training-only and --gpus");
  a.lat.json = a.json;
  a.lat.ttt_backbone = a.backbone;
  try {
    validate_latency_args(a.lat);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
  if (a.lat.plan) {
    print_latency_plan(a.lat);
    return;
  }
  const DeviceSelection sel = select_device(DeviceRequest::CUDA);
  if (!a.json) std::printf("device: %s\n", sel.device.describe().c_str());
  run_latency(a.lat, sel.device.index, sel.device.describe());
}

void run(const BenchArgs& a) {
  bool cuda = a.device == "cuda";
  if (a.device == "auto") {
    const DeviceSelection sel = select_device(DeviceRequest::Auto);
    cuda = sel.device.kind == DeviceKind::CUDA;
    if (!sel.note.empty()) std::fprintf(stderr, "[%s]\n", sel.note.c_str());
  }
  if (a.gpus > 0 && !cuda) throw CLI::ValidationError("--gpus measures GPUs: use it with --device cuda");
  // A layer without GPU kernels is measured on the CPU: refused on --device cuda, moved there on auto.
  if (const std::string why = gpu_kernels_missing(seq_layer_from_string(a.layer)); cuda && !why.empty()) {
    if (a.device == "cuda") throw CLI::ValidationError(why + "; measure it with --device cpu");
    std::fprintf(stderr, "[%s: measuring it on the CPU]\n", why.c_str());
    cuda = false;
  }
  if (cuda) {
#ifdef TTTLAB_HAVE_CUDA
    const DeviceSelection sel = select_device(DeviceRequest::CUDA);
    if (!a.json) std::printf("device: %s\n", sel.device.describe().c_str());
    run_cuda(a, sel.device.index, sel.device.describe());
    return;
#else
    throw std::runtime_error("this build has no CUDA kernels (reconfigure with -DTTTLAB_CUDA=ON); use --device cpu");
#endif
  }
  const int threads = a.threads > 0 ? a.threads : std::max(1u, std::thread::hardware_concurrency());
  const double gemm1 = gemm_rate(1, 384, 1.0);
  const double gemm = gemm_rate(threads, 384, 1.5);
  if (!a.json) {
    std::printf("CPU: %d threads; Eigen float GEMM 384x384x384: %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d (the ceiling)\n\n",
                threads, gemm1, gemm, threads);
    if (!a.generation_only)
      std::printf("%-6s %-17s %10s %9s %12s %24s %12s %10s %7s %12s %12s\n", "preset", "layer", "params", "B x T",
                  "MFLOP/tok", "step ms (min-max, n)", "train tok/s", "GFLOP/s", "MFU", "prefill t/s", "decode t/s");
  }
  std::vector<Row> rows;
  ProgressLine progress("presets measured");
  for (const auto& p : a.presets) {
    if (a.generation_only) break;
    progress.update(static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(a.presets.size()));
    ModelConfig m = ModelConfig::preset(p);
    m.seq_layer = seq_layer_from_string(a.layer);
    m.mamba_backbone = a.backbone == "m";
    m.ttt_base_lr = default_ttt_base_lr(m.seq_layer);
    int batch = 16, seq_len = 256, steps = 4;
    if (p == "small") batch = 4, seq_len = 512, steps = 2;
    if (p == "125m") batch = std::max(1, threads), seq_len = 512, steps = 1;
    if (a.steps > 0) steps = a.steps;
    Row r = bench_preset(m, p, batch, seq_len, steps, threads, gemm);
    progress.finish();
    if (!a.json) {
      char step[64];
      std::snprintf(step, sizeof step, "%.1f (%.1f-%.1f, %d)", r.step_ms_median, r.step_ms_min, r.step_ms_max,
                    r.steps_timed);
      std::printf("%-6s %-17s %10ld %4d x %-4d %12.2f %24s %12.0f %10.1f %6.1f%% %12.0f %12.0f\n", r.preset.c_str(),
                  r.layer.c_str(), r.params, r.batch, r.seq_len, 3 * r.fwd_flops_per_token / 1e6, step,
                  r.train_tok_s, r.train_gflops, 100 * r.train_mfu, r.prefill_tok_s, r.decode_tok_s);
      std::fflush(stdout);
    }
    rows.push_back(r);
  }
  std::vector<GenRow> gen;
  if (!a.json) print_generation_header();
  for (const auto& p : a.presets) {
    const Model<float> model(generation_config(p, a.layer, a.backbone), 1);
    int W, N, R;
    generation_counts(p, false, W, N, R);
    gen.push_back(bench_generation(p, model, make_cpu_decoder, "cpu", W, N, R));
    if (!a.json) print_generation_row(gen.back());
  }
  if (a.json) {
    Json j = Json::object();
    j["threads"] = threads;
    j["gemm_gflops_1thread"] = gemm1;
    j["gemm_gflops"] = gemm;
    Json arr = Json::array();
    for (const auto& r : rows) {
      Json o = Json::object();
      o["preset"] = r.preset;
      o["layer"] = r.layer;
      o["params"] = r.params;
      o["batch"] = r.batch;
      o["seq_len"] = r.seq_len;
      o["train_flops_per_token"] = 3 * r.fwd_flops_per_token;
      o["train_steps_timed"] = r.steps_timed;
      o["train_step_ms_median"] = r.step_ms_median;
      o["train_step_ms_min"] = r.step_ms_min;
      o["train_step_ms_max"] = r.step_ms_max;
      o["train_tokens_per_s"] = r.train_tok_s;
      o["train_gflops"] = r.train_gflops;
      o["train_mfu"] = r.train_mfu;
      o["prefill_tokens_per_s"] = r.prefill_tok_s;
      o["decode_tokens_per_s"] = r.decode_tok_s;
      arr.push_back(o);
    }
    j["rows"] = arr;
    Json garr = Json::array();
    for (const auto& g : gen) garr.push_back(generation_json(g));
    j["generation"] = garr;
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf("\nMFLOP/tok: training FLOPs per token (3x the forward's matrix products, TTT inner loop included).\n"
                "MFU: training GFLOP/s / the GEMM ceiling above. Prefill: one sequence of T tokens (dual form);\n"
                "decode: one token at a time from the streaming state (primal form).\n");
  }
  set_exit_code(0);
}

}  // namespace

void register_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Measure training and inference speed per preset against this CPU's GEMM rate");
  cmd->add_option("--presets", a->presets, "Presets to measure")->check(CLI::IsMember({"tiny", "small", "125m"}))->capture_default_str();
  cmd->add_option("--layer", a->layer,
                  "Sequence layer (with --device cuda: the training rows of this layer only)")
      ->check(CLI::IsMember(seq_layer_names()))
      ->capture_default_str();
  cmd->add_option("--steps", a->steps,
                  "Timed training steps per preset on the CPU, after one warm-up (0: 4 for tiny, 2 for small, "
                  "1 for 125m)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--backbone", a->backbone,
                  "m or t (mamba2, deltanet, gated-deltanet, titans, lact: t unless m is asked for, which is refused)")
      ->check(CLI::IsMember({"t", "m"}))
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "Worker threads (0: all)")->check(CLI::Range(0, 1024));
  cmd->add_option("--device", a->device, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))->capture_default_str();
  cmd->add_flag("--generation-only", a->generation_only, "Measure only the generation rows (bytes/s at batch 1)");
  cmd->add_flag("--training-only", a->training_only,
                "With --device cuda: only the whole-model training steps and the GEMM ceilings "
                "they are measured against")
      ->excludes("--generation-only");
  cmd->add_option("--gpus", a->gpus,
                  "With --device cuda: only the data-parallel scaling rows, on 1, 2, 4, ... and N GPUs (B 8 x T 2048 "
                  "per GPU, D768 L12), with the scaling efficiency against one GPU")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->add_flag(
      "--latency", a->latency,
      "With --device cuda: only Fig. 3 in miniature, prefill (batch <= 16) and decode (batch 1, 16 "
      "and 512) time per token against context length for TTT-Linear, TTT-MLP, the Transformer "
      "and Mamba-2 (125m preset unless --presets names one; --layer: that layer only)");
  auto* lengths = cmd->add_option("--lengths", a->lat.lengths,
                                  "With --latency: the context lengths T, multiples of 64 in [64, 65536]")
                      ->capture_default_str();
  auto* dmax = cmd->add_option("--decode-max-context", a->lat.decode_max_context,
                               "With --latency: walk the decoder only up to this context (0: the longest "
                               "--lengths); longer rows are printed as skipped");
  auto* phases = cmd->add_option("--phases", a->lat.phases,
                                 "With --latency: all, prefill or decode (the rows measured)")
                     ->capture_default_str();
  auto* fill =
      cmd->add_option("--decode-fill", a->lat.decode_fill,
                      "With --latency: batch-1 decode rows walk the context token by token "
                      "(walk) or set it without running it (skip, as the batch 16 and 512 "
                      "rows always do; a step's time does not depend on the cache's content)")
          ->capture_default_str();
  auto* products =
      cmd->add_option("--decode-products", a->lat.decode_products,
                      "With --latency: the batch 16 and 512 decode rows' matrix products, cublas "
                      "(fp32 cuBLAS GEMMs) or exact (the batched split-k product, each sequence "
                      "bitwise its batch-1 decoder)")
          ->capture_default_str();
  auto* csv = cmd->add_option("--csv", a->lat.csv, "With --latency: write the rows to this CSV file too");
  auto* plan = cmd->add_flag("--plan", a->lat.plan,
                             "With --latency: print the rows it would measure (and write --csv) without "
                             "using a GPU");
  for (auto* o : {lengths, dmax, phases, fill, products, csv, plan}) o->needs("--latency");
  cmd->callback([a, cmd] {
    a->layer_given = cmd->count("--layer") > 0;
    if (a->latency) {
      if (cmd->count("--presets") > 0) {
        if (a->presets.size() != 1) throw CLI::ValidationError("--latency measures one preset: give --presets one name");
        a->lat.preset = a->presets.front();
      }
      if (a->layer_given) a->lat.layers = {a->layer};
      // The TTT rows in the bench's backbone; --backbone is read only by them.
      if (cmd->count("--backbone") == 0) a->backbone = "m";
      run_latency_mode(*a);
      return;
    }
    // Layers that are whole blocks sit in the Transformer block (as `tttlab train` decides).
    if (transformer_block_only(seq_layer_from_string(a->layer)) && cmd->count("--backbone") == 0)
      a->backbone = "t";
    run(*a);
  });
}

}  // namespace tttlab::cli
