// `tttlab bench --device cuda --latency` (see bench_latency.hpp): latency against context length.
#include "cli/bench_latency.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "cli/commands.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/model/config.hpp"
#ifdef TTTLAB_HAVE_CUDA
#include "tttlab/data/batches.hpp"
#include "tttlab/kernels/cuda_device.hpp"
#include "tttlab/kernels/decode_cuda.hpp"
#include "tttlab/kernels/train_cuda.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/optim/adamw.hpp"
#include "tttlab/train/trainer.hpp"
#include "tttlab/util/rng.hpp"
#endif

namespace tttlab::cli {
namespace {

constexpr int kMaxPrefillBatch = 16;  // the paper's prefill batch
constexpr int kDecodeWindow = 64;     // tokens timed one by one at each context
// The batched decode rows of the paper's figure (each the largest batch up to this that fits), and
// their steps: 2 untimed (the CUDA graph's capture), then kBatchWindow timed; all inside the
// kDecodeWindow positions the KV cache is sized for.
constexpr int kDecodeBatches[] = {16, 512};
constexpr int kBatchWarmup = 2, kBatchWindow = 32;
static_assert(kBatchWarmup + kBatchWindow <= kDecodeWindow);

bool runs_prefill(const LatencyArgs& a) { return a.phases != "decode"; }
bool runs_decode(const LatencyArgs& a) { return a.phases != "prefill"; }

const char* const kWeightsNote =
    "random weights of the preset (latency does not depend on the weights' values)";

int decode_limit(const LatencyArgs& a) {
  return a.decode_max_context > 0 ? a.decode_max_context : a.lengths.back();
}

// The model a row measures: the preset with `layer`; the TTT layers in the bench's backbone, the
// Transformer and Mamba-2 in the Transformer block; RoPE tables and KV caches sized for the longest T.
ModelConfig latency_config(const LatencyArgs& a, const std::string& layer) {
  ModelConfig m = ModelConfig::preset(a.preset);
  m.seq_layer = seq_layer_from_string(layer);
  const bool ttt = m.seq_layer == SeqLayerKind::TTTLinear || m.seq_layer == SeqLayerKind::TTTMLP;
  m.mamba_backbone = ttt && a.ttt_backbone == "m";
  m.ttt_base_lr = default_ttt_base_lr(m.seq_layer);
  m.max_position_embeddings = std::max(a.lengths.back(), decode_limit(a) + kDecodeWindow);
  return m;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

Json row_json(const LatencyRow& r) {
  Json o = {
      {"layer", r.layer}, {"phase", r.phase}, {"batch", r.batch}, {"T", r.T}, {"status", r.status}};
  if (!r.products.empty()) o["products"] = r.products;
  if (r.status == "ok") {
    o["median_us_per_token"] = r.median_us;
    o["q1_us_per_token"] = r.q1_us;
    o["q3_us_per_token"] = r.q3_us;
    o["min_us_per_token"] = r.min_us;
    o["max_us_per_token"] = r.max_us;
    o["repeats"] = r.repeats;
    if (r.phase == "decode") {
      o["median_us_per_step"] = r.step_us;
      o["context"] = r.context;
    }
  }
  if (r.device_gib > 0) o["device_gib"] = r.device_gib;
  return o;
}

void print_header(const LatencyArgs& a, const char* what) {
  std::printf("Fig. 3 in miniature (%s): time per token against context T, preset %s, %s.\n", what,
              a.preset.c_str(), kWeightsNote);
  std::printf("%-17s %-7s %5s %6s %10s %21s %21s %4s  %s\n", "layer", "phase", "batch", "T",
              "us/token", "IQR", "min - max", "n", "status");
}

void print_row(const LatencyRow& r) {
  char T[16] = "all";
  if (r.T > 0) std::snprintf(T, sizeof T, "%d", r.T);
  if (r.status == "ok") {
    char extra[128] = "";
    if (r.phase == "decode")
      std::snprintf(extra, sizeof extra, " (step %.1f us, context %s%s%s)", r.step_us,
                    r.context.c_str(), r.products.empty() ? "" : ", products ", r.products.c_str());
    std::printf("%-17s %-7s %5d %6s %10.3f %10.3f - %-8.3f %10.3f - %-8.3f %4d  ok%s\n",
                r.layer.c_str(), r.phase.c_str(), r.batch, T, r.median_us, r.q1_us, r.q3_us,
                r.min_us, r.max_us, r.repeats, extra);
  } else {
    std::printf("%-17s %-7s %5d %6s %10s %21s %21s %4s  %s\n", r.layer.c_str(), r.phase.c_str(),
                r.batch, T, "-", "", "", "", r.status.c_str());
  }
  std::fflush(stdout);
}

void write_csv(const LatencyArgs& a, const std::vector<LatencyRow>& rows) {
  if (!a.csv.empty()) write_file_atomic(a.csv, latency_csv(rows));
}

}  // namespace

void validate_latency_args(LatencyArgs& a) {
  const auto names = ModelConfig::preset_names();
  if (std::find(names.begin(), names.end(), a.preset) == names.end())
    throw std::invalid_argument("--latency: unknown preset '" + a.preset + "'");
  if (a.layers.empty()) throw std::invalid_argument("--latency: no layer to measure");
  for (const std::string& l : a.layers) {
    const SeqLayerKind kind = seq_layer_from_string(l);
    const std::string why = gpu_decoder_missing(kind);
    if (!why.empty()) throw std::invalid_argument("--latency: " + why);
  }
  if (a.lengths.empty()) throw std::invalid_argument("--lengths: give at least one context length");
  for (int T : a.lengths)
    if (T < 64 || T > 65536 || T % 64 != 0)
      throw std::invalid_argument("--lengths: " + std::to_string(T) +
                                  " is not a multiple of 64 in [64, 65536]");
  std::sort(a.lengths.begin(), a.lengths.end());
  a.lengths.erase(std::unique(a.lengths.begin(), a.lengths.end()), a.lengths.end());
  if (a.decode_max_context < 0 || a.decode_max_context > 65536)
    throw std::invalid_argument("--decode-max-context: " + std::to_string(a.decode_max_context) +
                                " is not in [0, 65536]");
  if (a.phases != "all" && a.phases != "prefill" && a.phases != "decode")
    throw std::invalid_argument("--phases: '" + a.phases + "' is not all, prefill or decode");
  if (a.decode_fill != "walk" && a.decode_fill != "skip")
    throw std::invalid_argument("--decode-fill: '" + a.decode_fill + "' is not walk or skip");
  if (a.decode_products != "cublas" && a.decode_products != "exact")
    throw std::invalid_argument("--decode-products: '" + a.decode_products +
                                "' is not cublas or exact");
  if (!a.csv.empty()) {
    namespace fs = std::filesystem;
    const fs::path p(a.csv);
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      throw std::invalid_argument("--csv: the folder '" + dir.string() + "' does not exist");
    if (fs::is_directory(p, ec)) throw std::invalid_argument("--csv: '" + a.csv + "' is a folder");
  }
}

std::vector<LatencyRow> plan_latency(const LatencyArgs& a) {
  std::vector<LatencyRow> rows;
  for (const auto& layer : a.layers) {
    if (runs_prefill(a))
      for (int T : a.lengths) {
        LatencyRow r;
        r.layer = layer, r.phase = "prefill", r.batch = kMaxPrefillBatch, r.T = T,
        r.status = "planned";
        rows.push_back(r);
      }
    if (!runs_decode(a)) continue;
    for (int b : {1, kDecodeBatches[0], kDecodeBatches[1]})
      for (int T : a.lengths) {
        LatencyRow r;
        r.layer = layer, r.phase = "decode", r.batch = b, r.T = T;
        if (b > 1) r.products = a.decode_products;
        r.status = T <= decode_limit(a) ? "planned" : "skipped: beyond --decode-max-context";
        rows.push_back(r);
      }
  }
  return rows;
}

std::string latency_csv(const std::vector<LatencyRow>& rows) {
  std::string csv =
      "layer,phase,batch,T,median_us_per_token,q1_us,q3_us,min_us,max_us,repeats,"
      "median_us_per_step,context,products,status\n";
  char buf[256];
  for (const auto& r : rows) {
    csv += csv_field(r.layer) + "," + r.phase + "," + std::to_string(r.batch) + "," +
           (r.T > 0 ? std::to_string(r.T) : std::string()) + ",";
    if (r.status == "ok") {
      std::snprintf(buf, sizeof buf, "%.4f,%.4f,%.4f,%.4f,%.4f,%d,", r.median_us, r.q1_us, r.q3_us,
                    r.min_us, r.max_us, r.repeats);
      csv += buf;
      if (r.phase == "decode") {
        std::snprintf(buf, sizeof buf, "%.4f,", r.step_us);
        csv += buf + r.context + ",";
      } else {
        csv += ",,";
      }
    } else {
      csv += ",,,,,,,,";
    }
    csv += r.products + "," + csv_field(r.status) + "\n";
  }
  return csv;
}

void print_latency_plan(const LatencyArgs& a) {
  const std::vector<LatencyRow> rows = plan_latency(a);
  if (a.json) {
    Json arr = Json::array();
    for (const auto& r : rows) arr.push_back(row_json(r));
    Json o = {{"preset", a.preset}, {"plan", true}, {"rows", arr}};
    std::printf("%s\n", o.dump(2).c_str());
  } else {
    print_header(a, "plan; nothing measured");
    for (const auto& r : rows) print_row(r);
    std::printf(
        "prefill batch: the largest <= %d whose memory fits the GPU at that T, decided when "
        "measured; decode batches 16 and 512 likewise (the largest <= 16, <= 512 whose states and "
        "KV cache fit), products %s.\n",
        kMaxPrefillBatch, a.decode_products.c_str());
  }
  write_csv(a, rows);
  set_exit_code(0);
}

#ifndef TTTLAB_HAVE_CUDA
void run_latency(const LatencyArgs&, int, const std::string&) {
  throw std::runtime_error("this build has no CUDA kernels (reconfigure with -DTTTLAB_CUDA=ON)");
}
#else
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Median, quartiles and extremes of per-token times (µs).
void summarize(std::vector<double> us, LatencyRow& r) {
  std::sort(us.begin(), us.end());
  const auto at = [&](double q) {
    const double x = q * double(us.size() - 1);
    const std::size_t i = static_cast<std::size_t>(x);
    const double f = x - double(i);
    return i + 1 < us.size() ? us[i] * (1 - f) + us[i + 1] * f : us[i];
  };
  r.median_us = at(0.5), r.q1_us = at(0.25), r.q3_us = at(0.75), r.min_us = us.front(),
  r.max_us = us.back();
  r.repeats = static_cast<int>(us.size());
}

TokenBatch random_batch(int B, int T, std::uint64_t seed) {
  Rng rng(seed);
  TokenBatch b;
  b.batch = B;
  b.seq_len = T;
  b.tokens.resize(std::size_t(B) * (T + 1));
  for (auto& t : b.tokens) t = static_cast<Token>(32 + rng.below(95));
  b.starts.assign(B, -1);
  return b;
}

struct Prefill {
  const ModelConfig& mc;
  Model<float>& model;
  int device;
  std::string describe;  // the backend's own description (which kernels it runs)

  std::unique_ptr<kernels::CudaTrainBackend> make(int B, int T, TrainConfig& cfg,
                                                  AdamW<float>& optim) {
    cfg.model = mc;
    cfg.batch_size = B;
    cfg.seq_len = T;
    kernels::CudaTrainOptions o;
    o.device = device;
    o.gemm = kernels::GemmPrecision::Bf16;
    // No backward follows: two blocks' activations, taken in turn, so that B = 16 fits at long T.
    o.forward_only = true;
    const TrainBackendContext ctx{&cfg, &model, &optim, 1};
    return std::make_unique<kernels::CudaTrainBackend>(ctx, o);
  }
};

// Bytes of a backend for B sequences of T tokens, as c0 + c1·B·T: every activation and workspace it
// allocates grows with B·T (train_cuda.hpp), the parameters and moments do not. Two probes at a small
// T give both coefficients before any large allocation.
struct MemoryModel {
  double c0 = 0, c1 = 0;
  double bytes(int B, int T) const { return c0 + c1 * double(B) * T; }
};

MemoryModel probe_memory(Prefill& p, int T0) {
  double m[2];
  for (int B = 1; B <= 2; ++B) {
    TrainConfig cfg;
    WarmupCosineSchedule sched;
    AdamW<float> optim(AdamWConfig{}, sched);
    m[B - 1] = double(p.make(B, T0, cfg, optim)->device_bytes());
  }
  MemoryModel mm;
  mm.c1 = (m[1] - m[0]) / T0;
  mm.c0 = m[0] - mm.c1 * T0;
  return mm;
}

std::vector<LatencyRow> measure_prefill(const LatencyArgs& a, const std::string& layer, Prefill& p,
                                        bool quiet) {
  std::vector<LatencyRow> rows;
  const auto skip_all = [&](const std::string& why) {
    for (int T : a.lengths) {
      LatencyRow r;
      r.layer = layer, r.phase = "prefill", r.batch = 0, r.T = T, r.status = "skipped: " + why;
      if (!quiet) print_row(r);
      rows.push_back(r);
    }
    return rows;
  };
  if (const std::string why = kernels::cuda_train_unsupported(p.mc); !why.empty())
    return skip_all(why);
  const MemoryModel mm = probe_memory(p, std::min(a.lengths.front(), 1024));
  for (int T : a.lengths) {
    LatencyRow r;
    r.layer = layer, r.phase = "prefill", r.T = T;
    std::uint64_t free_b = 0, total_b = 0;
    std::string why;
    if (!kernels::cuda_memory_info(p.device, free_b, total_b, &why))
      throw std::runtime_error("--latency: " + why);
    // Room for cuBLAS's workspaces, the allocator's rounding and what the estimate leaves out.
    const double usable = 0.9 * double(free_b) - 1.0 * kGiB;
    int B = kMaxPrefillBatch;
    while (B >= 1 && mm.bytes(B, T) > usable) --B;
    if (B < 1) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "skipped: needs about %.1f GiB at batch 1, %.1f GiB free",
                    mm.bytes(1, T) / kGiB, double(free_b) / kGiB);
      r.status = buf;
    } else {
      r.batch = B;
      r.device_gib = mm.bytes(B, T) / kGiB;
      // Fewer forwards where one takes long: the whole run stays within a few minutes on an H200.
      const bool long_T = std::int64_t(B) * T >= 65536;
      const int warmup = long_T ? 1 : 2, repeats = T >= 8192 ? 5 : 10;
      try {
        TrainConfig cfg;
        WarmupCosineSchedule sched;
        AdamW<float> optim(AdamWConfig{}, sched);
        auto backend = p.make(B, T, cfg, optim);
        p.describe = backend->describe();
        r.device_gib = double(backend->device_bytes()) / kGiB;
        const std::vector<double> ms =
            backend->time_forward(random_batch(B, T, 7), warmup, repeats);
        std::vector<double> us;
        for (double x : ms) us.push_back(x * 1e3 / (double(B) * T));
        summarize(us, r);
      } catch (const std::exception& e) {
        // A backstop: the estimate above should keep every allocation inside the free memory.
        kernels::cuda_clear_last_error();
        r.status = std::string("skipped: ") + e.what();
      }
    }
    if (!quiet) print_row(r);
    rows.push_back(r);
  }
  return rows;
}

struct DecodeReport {
  std::string describe;
  double walk_tokens_per_s = 0;
  long walked = 0;
};

std::vector<LatencyRow> measure_decode(const LatencyArgs& a, const std::string& layer,
                                       const ModelConfig& mc, const Model<float>& model, int device,
                                       DecodeReport& rep, bool quiet) {
  std::vector<LatencyRow> rows;
  const std::string why = kernels::cuda_decode_unsupported(mc);
  std::unique_ptr<kernels::CudaDecoder> dec;
  if (why.empty()) {
    kernels::CudaDecoderOptions o;
    o.device = device;
    dec = std::make_unique<kernels::CudaDecoder>(model, o);
    rep.describe = dec->describe();
  }
  Rng rng(11);
  std::vector<int> chunk;
  std::vector<float> logits;
  double walk_s = 0;
  for (int T : a.lengths) {
    LatencyRow r;
    r.layer = layer, r.phase = "decode", r.batch = 1, r.T = T;
    if (!why.empty()) {
      r.status = "skipped: " + why;
    } else if (T > decode_limit(a)) {
      r.status = "skipped: beyond --decode-max-context";
    } else if (a.decode_fill == "skip") {
      // The context set to T without running it (the rows below T hold zeros); one real step
      // gives the window its first logits (where the last window ended at T, they are its own).
      r.context = "set";
      if (dec->position() < T) {
        dec->skip_for_bench(T - 1);
        const int first[1] = {'a'};
        dec->feed(first, logits);
      }
    } else {
      r.context = "walked";
      // Walk the context up to T, in chunks that return only their last logits.
      const auto t0 = Clock::now();
      while (dec->position() < T) {
        const long n = std::min<long>(4096, T - dec->position());
        chunk.resize(n);
        for (int& t : chunk) t = static_cast<int>(32 + rng.below(95));
        dec->feed(chunk, logits);
        rep.walked += n;
      }
      walk_s += std::chrono::duration<double>(Clock::now() - t0).count();
    }
    if (r.context == "set" || r.context == "walked") {
      // The window: one full generation step per token (the logits back on the host, the next token
      // their argmax), each timed.
      std::vector<double> us;
      for (int i = 0; i < kDecodeWindow; ++i) {
        const int tok[1] = {
            static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin())};
        const auto s = Clock::now();
        dec->feed(tok, logits);
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
      }
      summarize(us, r);
      r.step_us = r.median_us;
      std::fprintf(stderr, "[decode] %s batch 1 T %d (%s): %.1f us/token\n", layer.c_str(), T,
                   r.context.c_str(), r.median_us);
    }
    if (!quiet) print_row(r);
    rows.push_back(r);
  }
  if (walk_s > 0) rep.walk_tokens_per_s = double(rep.walked) / walk_s;
  return rows;
}

// The largest batch <= most whose decoder (weights, states, a KV cache of `context` tokens) fits in
// the device's free memory with room to spare (the cuBLAS workspace, the CUDA graphs and the
// allocator's rounding take some); 0 when not even one sequence fits. `gib` gets the chosen decoder's bytes.
int largest_decode_batch(const ModelConfig& mc, int most, long context, int device, double& gib,
                         double& free_gib) {
  std::uint64_t free_b = 0, total_b = 0;
  std::string why;
  if (!kernels::cuda_memory_info(device, free_b, total_b, &why))
    throw std::runtime_error("--latency: " + why);
  free_gib = double(free_b) / kGiB;
  const double usable = 0.9 * double(free_b) - 0.5 * kGiB;
  for (int B = most; B >= 1; --B) {
    const kernels::CudaDecodeMemory m = kernels::cuda_decode_memory(mc, B, context, device);
    if (m.weight_bytes + m.batch_bytes <= usable) {
      gib = (m.weight_bytes + m.batch_bytes) / kGiB;
      return B;
    }
  }
  return 0;
}

// The decode rows at the batches 16 and 512 (each the largest that fits, up to it), per context T:
// the context set with skip_for_bench, then B tokens per step in, B greedy tokens back.
std::vector<LatencyRow> measure_decode_batched(const LatencyArgs& a, const std::string& layer,
                                               const ModelConfig& mc, const Model<float>& model,
                                               int device, std::string& describe, bool quiet) {
  const kernels::DecodeProducts products = a.decode_products == "exact"
                                               ? kernels::DecodeProducts::Exact
                                               : kernels::DecodeProducts::Cublas;
  std::vector<LatencyRow> rows;
  const std::string why = kernels::cuda_decode_unsupported(mc);
  const bool attention = mc.seq_layer == SeqLayerKind::SoftmaxAttention;
  for (int most : kDecodeBatches) {
    std::unique_ptr<kernels::CudaDecoder> dec;
    double dec_gib = 0;
    for (int T : a.lengths) {
      LatencyRow r;
      r.layer = layer, r.phase = "decode", r.batch = most, r.T = T;
      r.products = kernels::to_string(products);
      if (!why.empty()) {
        r.status = "skipped: " + why;
      } else if (T > decode_limit(a)) {
        r.status = "skipped: beyond --decode-max-context";
      } else {
        // The cache holds the context and every step after it; states do not grow with T, so a
        // decoder without a cache is kept from one T to the next.
        const long context = long(T) + kDecodeWindow;
        const bool keep = dec && !attention && dec->position() <= T;
        if (!keep) dec.reset();  // its memory back before the free memory is read
        double gib = 0, free_gib = 0;
        const int B =
            keep ? dec->batch() : largest_decode_batch(mc, most, context, device, gib, free_gib);
        if (B < 1) {
          char buf[160];
          std::snprintf(buf, sizeof buf,
                        "skipped: one sequence's decoder at T %d does not fit in %.1f GiB free", T,
                        free_gib);
          r.status = buf;
        } else {
          try {
            if (!keep) {
              kernels::CudaDecoderOptions o;
              o.device = device;
              o.batch = B;
              o.products = products;
              if (attention) o.max_context = context;
              dec = std::make_unique<kernels::CudaDecoder>(model, o);
              dec_gib = gib;
              describe = dec->describe();
            }
            r.batch = B;
            r.device_gib = dec_gib;
            r.context = "set";
            dec->skip_for_bench(T);
            std::vector<int> tok(B), next;
            for (int s = 0; s < B; ++s) tok[s] = 32 + s % 95;
            std::vector<double> us;
            for (int i = 0; i < kBatchWarmup + kBatchWindow; ++i) {
              const auto t0 = Clock::now();
              dec->feed_greedy(tok, next);
              const double t = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
              if (i >= kBatchWarmup) us.push_back(t / B);
              tok = next;
            }
            summarize(us, r);
            r.step_us = r.median_us * B;
            std::fprintf(stderr,
                         "[decode] %s batch %d (of <= %d) T %d, %s products: %.2f us/token, "
                         "%.1f us/step\n",
                         layer.c_str(), B, most, T, r.products.c_str(), r.median_us, r.step_us);
          } catch (const std::exception& e) {
            // A backstop: the estimate above should keep every allocation inside the free memory.
            dec.reset();
            kernels::cuda_clear_last_error();
            r.status = std::string("skipped: ") + e.what();
          }
        }
      }
      if (!quiet) print_row(r);
      rows.push_back(r);
    }
  }
  return rows;
}

}  // namespace

void run_latency(const LatencyArgs& a, int device, const std::string& device_text) {
  const bool quiet = a.json;
  if (!quiet) print_header(a, "measured");
  std::vector<LatencyRow> rows;
  Json layers = Json::array();
  const auto t_all = Clock::now();
  for (const auto& layer : a.layers) {
    const auto t_layer = Clock::now();
    const ModelConfig mc = latency_config(a, layer);
    Model<float> model(mc, 1);
    Prefill p{mc, model, device, ""};
    std::vector<LatencyRow> pre;
    if (runs_prefill(a)) pre = measure_prefill(a, layer, p, quiet);
    DecodeReport rep;
    std::vector<LatencyRow> dec, batched;
    std::string batched_describe;
    if (runs_decode(a)) {
      dec = measure_decode(a, layer, mc, model, device, rep, quiet);
      batched = measure_decode_batched(a, layer, mc, model, device, batched_describe, quiet);
    }
    rows.insert(rows.end(), pre.begin(), pre.end());
    rows.insert(rows.end(), dec.begin(), dec.end());
    rows.insert(rows.end(), batched.begin(), batched.end());
    const double secs = std::chrono::duration<double>(Clock::now() - t_layer).count();
    layers.push_back({{"layer", layer},
                      {"backbone", mc.mamba_backbone ? "m" : "t"},
                      {"params", model.num_params()},
                      {"prefill_backend", p.describe},
                      {"decode_backend", rep.describe},
                      {"decode_batched_backend", batched_describe},
                      {"decode_walk_tokens", rep.walked},
                      {"decode_walk_tokens_per_s", rep.walk_tokens_per_s},
                      {"seconds", secs}});
    if (!quiet)
      std::printf(
          "  [%s: %.1f s; prefill: %s; decode: %s, context walked at %.0f tokens/s; batched: %s]\n",
          layer.c_str(), secs, p.describe.empty() ? "-" : p.describe.c_str(),
          rep.describe.empty() ? "-" : rep.describe.c_str(), rep.walk_tokens_per_s,
          batched_describe.empty() ? "-" : batched_describe.c_str());
  }
  const double total_s = std::chrono::duration<double>(Clock::now() - t_all).count();
  write_csv(a, rows);
  if (a.json) {
    Json arr = Json::array();
    for (const auto& r : rows) arr.push_back(row_json(r));
    Json o = {
        {"device", device_text},
        {"preset", a.preset},
        {"weights", kWeightsNote},
        {"prefill",
         "CudaTrainBackend::time_forward, the training forward (forward_only: two blocks' "
         "activations, taken in turn) with bf16 "
         "products; "
         "B the largest <= 16 that fits; per token = forward ms / (B*T); median, quartiles, "
         "min-max over "
         "the timed repeats (CUDA events)"},
        {"decode",
         "CudaDecoder at batch 1 (CUDA graphs): context " +
             std::string(a.decode_fill == "walk"
                             ? "walked token by token to T"
                             : "set to T without running the steps (skip_for_bench)") +
             ", then " + std::to_string(kDecodeWindow) +
             " single-token steps (logits to the host, argmax next) each timed on the host clock. "
             "Batches 16 and 512: the largest B up to each whose weights, states and KV cache fit "
             "the free memory; context set to T (skip_for_bench: the skipped cache rows hold "
             "zeros, a step's work is that of a real context T), " +
             std::to_string(kBatchWarmup) + " untimed and " + std::to_string(kBatchWindow) +
             " timed steps of B tokens (greedy tokens chosen on the device, B ints back); per "
             "token = step time / B, median_us_per_step the median step; products " +
             a.decode_products +
             (a.decode_products == "cublas"
                  ? " (fp32 cuBLAS GEMMs, logits within rounding of batch 1)"
                  : " (the batched split-k product, each sequence bitwise its batch-1 decoder)")},
        {"decode_products", a.decode_products},
        {"phases", a.phases},
        {"layers", layers},
        {"seconds", total_s},
        {"rows", arr}};
    std::printf("%s\n", o.dump(2).c_str());
  } else {
    std::printf(
        "\nus/token: prefill = forward time / (B x T), over the timed forwards; decode = one "
        "step's wall time / B,\n"
        "over %d steps at context T (batch 1) or %d (batched; the context set, not walked). IQR: "
        "quartiles; n: samples. %.1f s in all.\n",
        kDecodeWindow, kBatchWindow, total_s);
  }
  set_exit_code(0);
}
#endif

}  // namespace tttlab::cli
