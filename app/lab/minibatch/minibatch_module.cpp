#include "lab/minibatch/minibatch_module.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "lab/engine/data_source.hpp"
#include "tttlab/data/batches.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab::lab {

std::vector<int> sweep_mini_batches(int T) {
  std::vector<int> b;
  for (int x = 1; x <= T; x *= 2) b.push_back(x);
  if (T >= 1 && b.back() != T) b.push_back(T);
  return b;
}

struct MiniBatchModule::Job {
  SweepSettings settings;
  std::shared_ptr<const DataBytes> data;
  std::unique_ptr<SequentialWindows> windows;
  std::vector<int> bs;
  std::size_t index = 0;  // which b
  long window = 0;
  std::shared_ptr<const Model<float>> model;  // Evaluate mode
  std::unique_ptr<Trainer> trainer;           // Train mode
  std::vector<double> sums, times;
  double loss_sum = 0;
  long counted = 0;
  std::shared_ptr<SweepResult> result;        // copied into each published view
  ComputeTarget target;                       // the GPU also runs each b when target.gpu

  long units_per_b() const {
    return windows->windows() + (settings.mode == SweepMode::Train ? settings.train_steps : 0);
  }
};

// The same b on the GPU: the loss over the sweep's windows (one launch) and the timed forward of one
// window. Shapes the kernels do not take (b > 64) keep the CPU's numbers, with a note.
void MiniBatchModule::run_gpu(Job& j, const Model<float>& m, SweepPoint& p) {
  GpuCompute& gpu = *j.target.gpu;
  const std::string why = gpu.model_unsupported(m.config());
  if (!why.empty()) {
    p.gpu_note = why;
    return;
  }
  const int T = j.settings.seq_len;
  const long W = j.windows->windows();
  // Up to 16 windows per launch bounds the activations a large model keeps on the device.
  const auto gm = gpu.load_model(m, static_cast<int>(std::min<long>(W, 16)), T);
  EvalOptions eo;
  eo.max_windows = static_cast<int>(W);
  const EvalReport r = gm->evaluate(j.data->val, T, eo);
  p.loss = r.loss;
  p.bpb = r.bpb;
  p.loss_by_position = r.loss_by_position;
  p.gpu_loss = true;
  constexpr int kWarmup = 3, kRepeats = 20;
  SequentialWindows one(std::span<const std::uint8_t>(j.data->val), 1, T, 1);
  p.gpu_time = summarize_ms(gm->time_forward(one.batch_at(0), kWarmup, kRepeats), kWarmup);
  p.gpu = true;
}

MiniBatchModule::MiniBatchModule(std::shared_ptr<ModelLibrary> library,
                                 std::shared_ptr<ComputeChoice> compute)
    : ModelAccess(std::move(library), std::move(compute)) {}
MiniBatchModule::~MiniBatchModule() = default;

bool MiniBatchModule::handle(const Command& command, ModuleContext& ctx) {
  const auto* run = std::get_if<SweepRun>(&command);
  if (!run) return false;
  if (run->after_current && m_job) {
    m_queued.push_back(run->settings);
    return true;
  }
  m_queued.clear();
  m_slot.supersede(ctx);
  m_job.reset();
  start(run->settings, ctx);
  return true;
}

void MiniBatchModule::start(const SweepSettings& s, ModuleContext& ctx) {
  auto v = next_view();
  // The sweep on show becomes the ghost, unless it has nothing to show.
  if (v->current && !v->current->points.empty()) v->previous = v->current;
  v->current.reset();
  v->settings = s;
  v->generation = ++m_generation;
  v->error.clear();
  v->progress = 0;
  m_slot.start(ctx, *v, [&] {
    if (s.seq_len < 2 || s.seq_len > 1024) throw std::invalid_argument("the sequence length T must be in [2, 1024]");
    if (s.windows < 1 || s.windows > 256) throw std::invalid_argument("windows per b must be in [1, 256]");
    if (s.train_steps < 1 || s.train_steps > 100000) throw std::invalid_argument("training steps must be in [1, 100000]");
    auto job = std::make_unique<Job>();
    job->settings = s;
    job->data = load_data(s.data, s.seq_len);
    job->windows = std::make_unique<SequentialWindows>(std::span<const std::uint8_t>(job->data->val), 1, s.seq_len,
                                                      s.windows);
    job->bs = sweep_mini_batches(s.seq_len);
    job->result = std::make_shared<SweepResult>();
    job->result->settings = s;
    job->target = m_compute->target();
    job->result->cpu_device = engine_thread_cpu();
    job->result->gpu_device = job->target.gpu ? job->target.gpu->device().name : std::string();
    job->result->gpu_note = job->target.note;
    if (s.mode == SweepMode::Evaluate) {
      const auto m = m_library->get(s.model_id);  // fail now (clear message) rather than mid-sweep
      if (!m->config().is_ttt())
        throw std::invalid_argument("this model has no TTT layers: b does not exist for " +
                                    to_string(m->config().seq_layer));
      const auto lib = m_library->view();
      const ModelInfo* info = lib->find(s.model_id);
      job->result->label = (info ? info->label.substr(0, info->label.find(" (")) : s.model_id) + ", trained with b = " +
                           std::to_string(m->config().mini_batch_size) + ", evaluated with each b";
    } else {
      ModelConfig c = ModelConfig::preset("tiny");
      c.seq_layer = seq_layer_from_string(s.layer);
      if (!c.is_ttt()) throw std::invalid_argument("the Train mode sweeps TTT layers: choose ttt-linear or ttt-mlp");
      job->result->label = std::string(s.layer == "ttt-mlp" ? "TTT-MLP" : "TTT-Linear") + ", 2 blocks, trained " +
                           std::to_string(s.train_steps) + " steps per b (seed " + std::to_string(s.seed) + ")";
    }
    v->data_description = job->data->description;
    m_job = std::move(job);
    v->current = m_job->result;
    return "Mini-batch sweep: b = 1 … " + std::to_string(s.seq_len);
  });
  show(std::move(v), ctx);
}

bool MiniBatchModule::has_work(Clock::time_point) const { return m_job != nullptr || !m_queued.empty(); }

void MiniBatchModule::work(ModuleContext& ctx) {
  if (!m_job) {  // the sweep before finished (or failed): start the queued one
    const SweepSettings next = m_queued.front();
    m_queued.erase(m_queued.begin());
    start(next, ctx);
    return;
  }
  Job& j = *m_job;
  auto v = next_view();
  const auto finish = [&](JobOutcome o, const std::string& msg = {}) {
    m_slot.finish(ctx, *v, o, msg);
    m_job.reset();
  };
  if (m_slot.cancel_requested(ctx)) {
    finish(JobOutcome::Cancelled, "cancelled");
    show(std::move(v), ctx);
    return;
  }
  const SweepSettings& s = j.settings;
  const int b = j.bs[j.index];
  const long W = j.windows->windows();
  try {
    auto r = std::make_shared<SweepResult>(*j.result);
    if (static_cast<std::size_t>(r->points.size()) <= j.index) {
      SweepPoint p;
      p.b = b;
      r->points.push_back(p);
      j.sums.assign(static_cast<std::size_t>(s.seq_len), 0.0);
      j.times.clear();
      j.loss_sum = 0;
      j.counted = 0;
      j.window = 0;
      if (s.mode == SweepMode::Evaluate) {
        ModelOverrides o;
        o.mini_batch = b;
        j.model = m_library->get(s.model_id, o);
      } else {
        TrainConfig c;
        c.model = ModelConfig::preset("tiny");
        c.model.seq_layer = seq_layer_from_string(s.layer);
        c.model.num_hidden_layers = 2;
        c.model.mini_batch_size = b;
        c.model.ttt_base_lr = default_ttt_base_lr(c.model.seq_layer);
        c.model.max_position_embeddings = s.seq_len;
        c.seq_len = s.seq_len;
        c.batch_size = 8;
        c.steps = s.train_steps;
        c.lr = 3e-3;
        c.seed = s.seed;
        c.threads = 1;
        TextData td;
        td.train = j.data->train;
        td.val = j.data->val;
        td.description = j.data->description;
        j.trainer = std::make_unique<Trainer>(c, std::move(td));
        j.model.reset();
      }
    }
    SweepPoint& p = r->points[j.index];
    if (j.trainer && !j.trainer->finished()) {
      p.train_loss.push_back(j.trainer->step().loss);
    } else {
      const Model<float>& m = j.trainer ? j.trainer->model() : *j.model;
      const TokenBatch batch = j.windows->batch_at(j.window);
      const auto row = batch.row(0);
      const std::vector<int> tokens(row.begin(), row.end());
      Vec<float> pos;
      const auto t0 = std::chrono::steady_clock::now();
      const CrossEntropyStats st = m.eval_sequence(tokens, {}, &pos);
      j.times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      for (long t = 0; t < pos.size(); ++t) j.sums[static_cast<std::size_t>(t)] += pos(t);
      j.loss_sum += st.loss_sum;
      j.counted += st.counted;
      ++j.window;
      p.windows_done = j.window;
      p.loss = j.counted ? j.loss_sum / static_cast<double>(j.counted) : 0.0;
      p.bpb = p.loss / std::log(2.0);
      p.loss_by_position.resize(j.sums.size());
      for (std::size_t t = 0; t < j.sums.size(); ++t) p.loss_by_position[t] = j.sums[t] / static_cast<double>(j.window);
      p.cpu_time = summarize_ms(j.times, 0);
      p.ms_per_forward = p.cpu_time.median_ms;
      p.cpu_loss = p.loss;
      if (j.window >= W && j.target.gpu) run_gpu(j, m, p);
      if (j.window >= W) {
        ++j.index;
        j.trainer.reset();
        j.model.reset();
      }
    }
    const long per_b = j.units_per_b();
    const long done_in_b = (j.index < j.bs.size() && j.index < r->points.size())
                               ? static_cast<long>(r->points[j.index].train_loss.size()) + r->points[j.index].windows_done
                               : 0;
    m_slot.set_progress(ctx, *v,
                        (static_cast<double>(j.index) * static_cast<double>(per_b) + static_cast<double>(done_in_b)) /
                            (static_cast<double>(j.bs.size()) * static_cast<double>(per_b)));
    if (j.index >= j.bs.size()) {
      r->complete = true;
      v->current = r;
      j.result = r;
      finish(JobOutcome::Done);
    } else {
      v->current = r;
      j.result = r;
    }
  } catch (const std::exception& e) {
    finish(JobOutcome::Failed, e.what());
  }
  show(std::move(v), ctx);
}

}  // namespace tttlab::lab
