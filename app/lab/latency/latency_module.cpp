// app/lab/latency/latency_module.cpp — see latency_module.hpp and latency_types.hpp.
#include "lab/latency/latency_module.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "tttlab/data/batches.hpp"
#include "tttlab/model/config.hpp"
#include "tttlab/model/decoder.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab::lab {

namespace {

const char* const kLatencyLayers[] = {"ttt-linear", "ttt-mlp", "softmax-attention", "linear-attention",
                               "mamba2"};
// Tokens a decoder's walk feeds in one work item: a cancel lands within one such chunk.
constexpr long kWalkChunk = 256;

ModelConfig latency_config(const LatencySettings& s, const std::string& layer) {
  ModelConfig c = ModelConfig::preset(s.preset);
  c.seq_layer = seq_layer_from_string(layer);
  // TTT in the lab's default backbone, the others in the Transformer block (as bench --latency).
  c.mamba_backbone = c.is_ttt();
  c.ttt_base_lr = default_ttt_base_lr(c.seq_layer);
  c.max_position_embeddings = s.max_context + s.decode_tokens;
  c.validate();
  return c;
}

}  // namespace

void validate(const LatencySettings& s) {
  if (s.layers.empty() || s.layers.size() > std::size(kLatencyLayers))
    throw std::invalid_argument("give 1 to 5 layers");
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    if (std::find(std::begin(kLatencyLayers), std::end(kLatencyLayers), s.layers[i]) == std::end(kLatencyLayers))
      throw std::invalid_argument(
          "every layer must be one of ttt-linear, ttt-mlp, softmax-attention, "
          "linear-attention, mamba2");
    if (std::find(s.layers.begin(), s.layers.begin() + static_cast<long>(i), s.layers[i]) !=
        s.layers.begin() + static_cast<long>(i))
      throw std::invalid_argument("the layer " + s.layers[i] + " is listed twice");
  }
  if (s.preset != "tiny" && s.preset != "small")
    throw std::invalid_argument("the preset must be tiny or small");
  if (s.max_context < kLatencyMinContext || s.max_context > 16384 ||
      s.max_context % kLatencyMinContext != 0)
    throw std::invalid_argument("the largest context must be a multiple of 64 in [64, 16384]");
  if (s.repeats < 1 || s.repeats > 50)
    throw std::invalid_argument("the prefill repeats must be in [1, 50]");
  // Below 64: the next context of the run always lies past the end of a decode window.
  if (s.decode_tokens < 1 || s.decode_tokens > 63)
    throw std::invalid_argument("the decode steps per context must be in [1, 63]");
}

std::vector<int> latency_contexts(int max_context) {
  std::vector<int> T;
  for (int x = kLatencyMinContext; x <= max_context; x *= 2) T.push_back(x);
  if (!T.empty() && T.back() != max_context) T.push_back(max_context);
  return T;
}

PerTokenTime per_token(const std::vector<double>& ms, double tokens, int warmup) {
  const TimingSummary t = summarize_ms(ms, warmup);
  PerTokenTime p;
  p.samples = t.repeats;
  p.warmup = warmup;
  if (t.repeats == 0 || tokens <= 0) return p;
  p.median_us = t.median_ms * 1e3 / tokens;
  p.min_us = t.min_ms * 1e3 / tokens;
  p.max_us = t.max_ms * 1e3 / tokens;
  // Quartiles by linear interpolation between the sorted runs (the median as summarize_ms has it).
  std::vector<double> v = ms;
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) {
    const double x = q * static_cast<double>(v.size() - 1);
    const std::size_t i = static_cast<std::size_t>(x);
    const double f = x - static_cast<double>(i);
    return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
  };
  p.q1_us = at(0.25) * 1e3 / tokens;
  p.q3_us = at(0.75) * 1e3 / tokens;
  return p;
}

std::string latency_layer_label(const std::string& layer) {
  if (layer == "ttt-linear") return "TTT-Linear";
  if (layer == "ttt-mlp") return "TTT-MLP";
  if (layer == "softmax-attention") return "Transformer (softmax attention)";
  if (layer == "linear-attention") return "Linear attention";
  if (layer == "mamba2") return "Mamba-2";
  return layer;
}

struct LatencyModule::Job {
  enum class Phase { Prefill, Walk, Window, GpuPrefill, GpuDecode };
  LatencySettings s;
  std::vector<int> contexts;
  // The run's text: random printable bytes from the seed, max_context + decode_tokens + 1 of them.
  std::vector<int> tokens;
  std::vector<std::unique_ptr<Model<float>>> models;  // per layer
  // Per layer, each walking the context from one T to the next.
  std::vector<std::unique_ptr<TokenDecoder>> decoders, gpu_decoders;
  ComputeTarget target;
  std::size_t ti = 0, li = 0;  // the point: contexts[ti], layer li
  Phase phase = Phase::Prefill;
  std::vector<double> ms;      // the point's timed runs so far
  std::vector<double> ref_ms;  // the runs of its reference at T = 64 (largest T), alternating
  std::vector<float> logits;
  long units_done = 0, units_total = 0;

  int T() const { return contexts[ti]; }
  bool last() const { return ti + 1 == contexts.size(); }  // the point the growth measures read
  bool gpu() const { return target.gpu != nullptr; }
};

LatencyModule::LatencyModule(std::shared_ptr<ModelLibrary> library,
                             std::shared_ptr<ComputeChoice> compute)
    : ModelAccess(std::move(library), std::move(compute)) {}
LatencyModule::~LatencyModule() = default;

bool LatencyModule::handle(const Command& command, ModuleContext& ctx) {
  return start_request<LatencyRun>(command, ctx, false, [&](const LatencyRun& run, LatencyView& v) {
    m_job.reset();
    const LatencySettings& s = run.settings;
    v.settings = s;
    validate(s);
    auto job = std::make_unique<Job>();
    job->s = s;
    job->contexts = latency_contexts(s.max_context);
    Rng rng(s.seed, 1);
    job->tokens.resize(static_cast<std::size_t>(s.max_context + s.decode_tokens + 1));
    for (int& t : job->tokens) t = static_cast<int>(32 + rng.below(95));
    job->target = m_compute->target();
    v.contexts = job->contexts;
    v.cpu_device = engine_thread_cpu();
    v.gpu_device = job->target.gpu ? job->target.gpu->device().name : std::string();
    v.gpu_note = job->target.note;
    for (const std::string& layer : s.layers) {
      const ModelConfig c = latency_config(s, layer);
      auto m = std::make_unique<Model<float>>(c, s.seed);
      LatencyCurve curve;
      curve.layer = layer;
      curve.label = latency_layer_label(layer);
      curve.params = m->num_params();
      if (job->gpu()) {
        curve.gpu_prefill_note = job->target.gpu->model_unsupported(c);
        curve.gpu_decode_note = job->target.gpu->decode_unsupported(c);
      }
      job->models.push_back(std::move(m));
      job->decoders.push_back(make_cpu_decoder(*job->models.back()));
      job->gpu_decoders.emplace_back();
      v.curves.push_back(std::move(curve));
    }
    const ModelConfig c = ModelConfig::preset(s.preset);
    v.model = s.preset + " preset (D = " + std::to_string(c.hidden_size) + ", " +
              std::to_string(c.num_hidden_layers) + " blocks, " +
              std::to_string(c.num_attention_heads) + " heads), random weights (seed " +
              std::to_string(s.seed) + ")";
    const long per_point = s.repeats + 2 + (job->gpu() ? 2 : 0);
    job->units_total = static_cast<long>(job->contexts.size() * s.layers.size()) * per_point;
    m_job = std::move(job);
    return "Latency lab: T = 64 … " + std::to_string(s.max_context) + ", " +
           std::to_string(s.layers.size()) + " layers";
  });
}

void LatencyModule::finish(ModuleContext& ctx, JobOutcome outcome, const std::string& message) {
  auto v = next_view();
  m_slot.finish(ctx, *v, outcome, message);
  m_job.reset();
  show(std::move(v), ctx);
}

void LatencyModule::work(ModuleContext& ctx) {
  if (m_slot.cancel_requested(ctx)) return finish(ctx, JobOutcome::Cancelled, "cancelled");
  Job& j = *m_job;
  const LatencySettings& s = j.s;
  using Phase = Job::Phase;
  auto v = next_view();
  try {
    LatencyCurve& curve = v->curves[j.li];
    if (curve.points.size() <= j.ti) {
      LatencyPoint p;
      p.T = j.T();
      curve.points.push_back(p);
    }
    LatencyPoint& p = curve.points[j.ti];
    const int T = j.T();
    const Model<float>& model = *j.models[j.li];
    bool point_done = false;
    switch (j.phase) {
      case Phase::Prefill: {
        // At the largest T each run is followed by its reference: the same T tokens read as T/64
        // separate windows of 64. Both take about as long, so a change of load on the machine
        // (another process taking the core for a while) slows both alike.
        const auto forward = [&](int from, int n) {
          const auto t0 = std::chrono::steady_clock::now();
          (void)model.eval_sequence(
              std::span<const int>(j.tokens.data() + from, static_cast<std::size_t>(n + 1)), {});
          return ms_since(t0);
        };
        j.ms.push_back(forward(0, T));
        if (j.last()) {
          double ms = T == kLatencyMinContext ? j.ms.back() : 0.0;
          for (int w = 0; T != kLatencyMinContext && w + kLatencyMinContext <= T;
               w += kLatencyMinContext)
            ms += forward(w, kLatencyMinContext);
          j.ref_ms.push_back(ms);
        }
        p.prefill = per_token(j.ms, T, 0);
        p.prefill_ref = per_token(j.ref_ms, T, 0);
        ++j.units_done;
        if (static_cast<int>(j.ms.size()) >= s.repeats) {
          j.ms.clear();
          j.ref_ms.clear();
          j.phase = Phase::Walk;
        }
        break;
      }
      case Phase::Walk: {
        // The decoder reads the run's text up to T, a chunk per item; the window's steps follow it.
        TokenDecoder& d = *j.decoders[j.li];
        const long n = std::min<long>(kWalkChunk, T - d.position());
        if (n > 0)
          d.feed(std::span<const int>(j.tokens.data() + d.position(), static_cast<std::size_t>(n)),
                 j.logits);
        if (d.position() >= T) {
          ++j.units_done;
          j.phase = Phase::Window;
        }
        break;
      }
      case Phase::Window: {
        // The steps after T alternate with the steps of a fresh decoder after 64 tokens: the
        // reference of the growth measures, timed under the same load (at the largest T only).
        TokenDecoder& d = *j.decoders[j.li];
        std::unique_ptr<TokenDecoder> ref;
        if (j.last() && T != kLatencyMinContext) {
          ref = make_cpu_decoder(model);
          ref->feed(std::span<const int>(j.tokens.data(), kLatencyMinContext), j.logits);
        }
        const auto step = [&](TokenDecoder& dec) {
          const auto t0 = std::chrono::steady_clock::now();
          dec.feed(std::span<const int>(j.tokens.data() + dec.position(), 1), j.logits);
          return ms_since(t0);
        };
        for (int i = 0; i < s.decode_tokens; ++i) {
          j.ms.push_back(step(d));
          if (ref)
            j.ref_ms.push_back(step(*ref));
          else if (j.last())
            j.ref_ms.push_back(j.ms.back());
        }
        p.decode = per_token(j.ms, 1, 0);
        p.decode_ref = per_token(j.ref_ms, 1, 0);
        j.ms.clear();
        j.ref_ms.clear();
        ++j.units_done;
        if (j.gpu())
          j.phase = Phase::GpuPrefill;
        else
          point_done = true;
        break;
      }
      case Phase::GpuPrefill: {
        if (curve.gpu_prefill_note.empty()) {
          try {
            GpuCompute& gpu = *j.target.gpu;
            const auto gm = gpu.load_model(model, kGpuPrefillBatch, T);
            TokenBatch b;
            b.batch = kGpuPrefillBatch;
            b.seq_len = T;
            for (int r = 0; r < kGpuPrefillBatch; ++r)
              b.tokens.insert(b.tokens.end(), j.tokens.begin(), j.tokens.begin() + T + 1);
            b.starts.assign(static_cast<std::size_t>(kGpuPrefillBatch), -1);
            p.gpu_prefill = per_token(gm->time_forward(b, kGpuWarmup, kGpuRepeats),
                                      static_cast<double>(kGpuPrefillBatch) * T, kGpuWarmup);
          } catch (const std::exception& e) {
            curve.gpu_prefill_note = std::string("T = ") + std::to_string(T) + ": " + e.what();
          }
        }
        ++j.units_done;
        j.phase = Phase::GpuDecode;
        break;
      }
      case Phase::GpuDecode: {
        if (curve.gpu_decode_note.empty()) {
          try {
            auto& d = j.gpu_decoders[j.li];
            if (!d) d = j.target.gpu->decoder(model);
            if (d->position() < T)
              d->feed(std::span<const int>(j.tokens.data() + d->position(),
                                           static_cast<std::size_t>(T - d->position())),
                      j.logits);
            std::vector<double> ms;
            for (int i = 0; i < s.decode_tokens; ++i) {
              const auto t0 = std::chrono::steady_clock::now();
              d->feed(std::span<const int>(j.tokens.data() + d->position(), 1), j.logits);
              ms.push_back(ms_since(t0));
            }
            p.gpu_decode = per_token(ms, 1, 0);
          } catch (const std::exception& e) {
            curve.gpu_decode_note = std::string("T = ") + std::to_string(T) + ": " + e.what();
            j.gpu_decoders[j.li].reset();
          }
        }
        ++j.units_done;
        point_done = true;
        break;
      }
    }
    if (point_done) {
      j.phase = Phase::Prefill;
      if (++j.li == s.layers.size()) {
        j.li = 0;
        ++j.ti;
      }
    }
  } catch (const std::exception& e) {
    m_view = std::move(v);
    return finish(ctx, JobOutcome::Failed, e.what());
  }
  m_slot.set_progress(
      ctx, *v,
      std::min(1.0, static_cast<double>(j.units_done) / static_cast<double>(j.units_total)));
  show(std::move(v), ctx);
  if (j.ti >= j.contexts.size()) finish(ctx, JobOutcome::Done, {});
}

}  // namespace tttlab::lab
