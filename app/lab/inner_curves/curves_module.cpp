#include "lab/inner_curves/curves_module.hpp"

#include <stdexcept>

#include "lab/engine/data_source.hpp"
#include "lab/engine/head_inputs.hpp"
#include "tttlab/fastweight/member_trace.hpp"
#include "tttlab/fastweight/rule.hpp"
#include "tttlab/data/batches.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/model.hpp"

namespace tttlab::lab {

namespace {
constexpr long kChunk = 64;
}

struct CurvesModule::Job {
  std::shared_ptr<const Model<float>> model;
  std::shared_ptr<const DataBytes> data;
  std::unique_ptr<SequentialWindows> windows;
  long window = 0;
  long pos = 0;  // tokens of the current window done
  std::unique_ptr<ModelStream> stream;
  std::vector<int> tokens;
  std::vector<std::vector<double>> s0, sb, sa;  // [block][t] sums over windows and heads
  // On a GPU: the GPU's forward gives every block's inner-loop inputs for the window (one launch); the
  // inner loop of each block's heads then runs here, one block per work item.
  std::unique_ptr<GpuModel> gpu;
  std::vector<GpuLayerInputs> inputs;  // of the current window
  int block = 0;                       // the next block of the current window (GPU path)
  // A member other than TTT: its preset and the toy head's settings (text and seed set per head).
  const FastWeightPreset* member = nullptr;
  HeadConfig toy;
  std::vector<double> cb, ca;  // LaCT: sums of each update's chunk loss before and after
};

namespace {

// The toy heads' settings for a member (head_config.hpp's TOY source), validated as the other
// inner-loop views validate theirs (with this view's longer sequences).
HeadConfig curves_toy_config(const CurvesSettings& s) {
  HeadConfig c;
  c.source = HeadSource::Toy;
  c.set_member(s.member);
  c.d = s.toy_d;
  c.seed = static_cast<std::uint64_t>(s.toy_seed);
  c.mini_batch = s.toy_mini_batch;
  c.eta_base = s.toy_eta_base;
  c.text = std::string(static_cast<std::size_t>(s.seq_len), 'a');
  HeadLimits lim;
  lim.max_tokens = 2048;
  validate(c, lim);
  if (s.toy_heads < 1 || s.toy_heads > 16) throw std::invalid_argument("toy heads must be in [1, 16]");
  return c;
}

}  // namespace

CurvesModule::CurvesModule(std::shared_ptr<ModelLibrary> library,
                           std::shared_ptr<ComputeChoice> compute)
    : ModelAccess(std::move(library), std::move(compute)) {}
CurvesModule::~CurvesModule() = default;

bool CurvesModule::handle(const Command& command, ModuleContext& ctx) {
  if (const auto* t = std::get_if<TrainStart>(&command)) {
    // The lesson's run whose followed view came back just now is not trained again.
    const bool answered = t->lesson && m_answer_next_start;
    m_answer_next_start = false;
    return answered;
  }
  const auto* run = std::get_if<CurvesRun>(&command);
  if (!run) return false;
  m_answer_next_start = false;
  if (run->lesson_run && restore_followed(*run, ctx)) {
    m_answer_next_start = true;
    return true;
  }
  m_reloads = 0;
  m_replay.clear();  // a shipped run starts again from its first checkpoint (start puts it)
  m_replay_next = 0;
  m_follow_after = m_library->puts();  // kFollowTrainingId: only checkpoints saved from now on
  m_chain_run = run->settings.model_id == kFollowTrainingId ? run->lesson_run : std::nullopt;
  start(run->settings, ctx, nullptr);
  return true;
}

bool CurvesModule::restore_followed(const CurvesRun& run, ModuleContext& ctx) {
  if (!m_followed || !m_followed_run || *m_followed_run != *run.lesson_run || m_followed->settings != run.settings)
    return false;
  {
    // Newer weights of that run since (it is still training): the view must follow them instead.
    const auto lib = m_library->view();
    const ModelInfo* info = lib->find(m_followed->model_id);
    if (!info || info->version != m_followed->model_version) return false;
  }
  m_slot.supersede(ctx);
  m_job.reset();
  auto v = std::make_shared<CurvesView>(*m_followed);
  v->generation = ++m_generation;
  m_reloads = v->reloads;
  m_chain_run = m_followed_run;
  m_follow_after = m_library->puts();  // from here on, the next checkpoint any run saves
  m_seen_library = m_library->generation();
  show(std::move(v), ctx);
  return true;
}

void CurvesModule::start(const CurvesSettings& s, ModuleContext& ctx, std::shared_ptr<const CurvesView> previous) {
  if (previous)
    m_slot.supersede(ctx, "newer weights arrived: computing again");
  else
    m_slot.supersede(ctx);
  m_job.reset();
  auto v = std::make_shared<CurvesView>();
  v->settings = s;
  v->generation = ++m_generation;
  v->reloads = m_reloads;
  const std::string id = resolve(s.model_id);
  v->model_id = id;
  if (!s.ttt()) return start_member(s, ctx, std::move(v));
  if (previous)
    v->first_followed = previous->first_followed          ? previous->first_followed
                        : previous->outcome == JobOutcome::Done ? previous
                                                                : nullptr;
  try {
    if (s.seq_len < 8 || s.seq_len > 2048) throw std::invalid_argument("the sequence length T must be in [8, 2048]");
    if (s.sequences < 1 || s.sequences > 256) throw std::invalid_argument("the number of sequences must be in [1, 256]");
    if (is_shipped_run_id(id)) {
      if (m_replay.empty()) {
        m_replay = shipped_run_checkpoints(id);
        replay_next(id);
      }
      v->replay_pending = m_replay_next < m_replay.size();
    }
    if (id.empty()) {
      // Nothing to compute until a training run saves its first checkpoint (after_iteration looks).
      v->waiting = true;
      v->model_label = "the next training run";
    } else {
      auto job = std::make_unique<Job>();
      job->model = m_library->get(id);
      const ModelConfig& c = job->model->config();
      if (!c.is_ttt())
        throw std::invalid_argument("this model's layers are " + to_string(c.seq_layer) +
                                    ", which have no inner loop: choose a TTT model");
      job->data = load_data(s.data, s.seq_len);
      job->windows = std::make_unique<SequentialWindows>(std::span<const std::uint8_t>(job->data->val), 1, s.seq_len,
                                                        s.sequences);
      v->data_description = job->data->description;
      v->blocks = c.num_hidden_layers;
      v->heads = c.num_attention_heads;
      v->mini_batch = c.mini_batch_size;
      v->T = s.seq_len;
      const std::vector<double> zeros(static_cast<std::size_t>(s.seq_len), 0.0);
      job->s0.assign(static_cast<std::size_t>(v->blocks), zeros);
      job->sb = job->sa = job->s0;
      v->l0 = v->lb = v->la = job->s0;
      const ComputeTarget target = m_compute->target();
      v->device = engine_thread_cpu();
      v->device_note = target.note;
      if (target.gpu) {
        if (const std::string why = target.gpu->model_unsupported(c); why.empty()) {
          job->gpu = target.gpu->load_model(*job->model, 1, s.seq_len);
          v->device = "GPU: " + target.gpu->device().name + " (the model's forward) and " + engine_thread_cpu() +
                      " (each head's inner loop)";
        } else {
          v->device_note = "on the CPU: " + why;
        }
      }
      if (previous && previous->blocks == v->blocks && previous->T == v->T && previous->sequences_done > 0) {
        // Keep the previous weights' curves on show until the first sequence with the new ones is done.
        v->l0 = previous->l0;
        v->lb = previous->lb;
        v->la = previous->la;
        v->sequences_done = previous->sequences_done;
        v->reloading = true;
      }
      m_job = std::move(job);
      m_slot.begin(ctx, *v, "Inner-loss curves: " + std::to_string(m_job->windows->windows()) + " sequences");
    }
  } catch (const std::exception& e) {
    m_job.reset();
    v->outcome = JobOutcome::Failed;
    v->error = e.what();
  }
  if (!id.empty()) {
    const auto lib = m_library->view();
    if (const ModelInfo* info = lib->find(id)) {
      v->model_label = info->label;
      v->model_version = info->version;
      v->model_step = info->step;
    } else {
      v->model_label = id;
    }
  }
  m_seen_library = m_library->generation();
  show(std::move(v), ctx);
}

void CurvesModule::start_member(const CurvesSettings& s, ModuleContext& ctx, std::shared_ptr<CurvesView> v) {
  v->model_id.clear();
  try {
    if (s.seq_len < 8 || s.seq_len > 2048) throw std::invalid_argument("the sequence length T must be in [8, 2048]");
    if (s.sequences < 1 || s.sequences > 256) throw std::invalid_argument("the number of sequences must be in [1, 256]");
    auto job = std::make_unique<Job>();
    job->member = &fast_weight_preset(s.member);  // lists the ids if unknown
    job->toy = curves_toy_config(s);
    job->data = load_data(s.data, s.seq_len);
    job->windows = std::make_unique<SequentialWindows>(std::span<const std::uint8_t>(job->data->val), 1, s.seq_len,
                                                      s.sequences);
    v->member = job->member->id;
    v->member_name = job->toy.member_name();
    v->member_loss = job->toy.member_loss();
    v->state_names = member_state_names(*job->member);
    v->model_label = "toy heads (random projections, d = " + std::to_string(s.toy_d) + ", seeds " +
                     std::to_string(s.toy_seed) + " … " + std::to_string(s.toy_seed + s.toy_heads - 1) + ")";
    v->data_description = job->data->description;
    v->blocks = 1;
    v->heads = s.toy_heads;
    v->mini_batch = member_is_matrix_rule(*job->member) ? 1 : s.toy_mini_batch;
    v->T = s.seq_len;
    const std::vector<double> zeros(static_cast<std::size_t>(s.seq_len), 0.0);
    job->s0.assign(1, zeros);
    job->sb = job->sa = job->s0;
    v->l0 = v->lb = v->la = job->s0;
    v->device = engine_thread_cpu();
    v->device_note = "the member's inner loop in double precision on the CPU";
    m_job = std::move(job);
    m_slot.begin(ctx, *v, "Inner-loss curves (" + v->member_name + "): " +
                              std::to_string(m_job->windows->windows()) + " sequences");
  } catch (const std::exception& e) {
    m_job.reset();
    v->outcome = JobOutcome::Failed;
    v->error = e.what();
  }
  m_seen_library = m_library->generation();
  show(std::move(v), ctx);
}

// One window: every toy head runs the member's inner loop over it and adds its three losses per token.
void CurvesModule::work_member() {
  Job& j = *m_job;
  const long T = m_view->T;
  const TokenBatch b = j.windows->batch_at(j.window);
  const auto row = b.row(0);
  HeadConfig c = j.toy;
  c.text.assign(row.begin(), row.begin() + T);
  std::size_t update = 0;
  for (int head = 0; head < m_view->heads; ++head) {
    c.seed = j.toy.seed + static_cast<std::uint64_t>(head);
    const HeadInputs<double> h = make_toy_head<double>(c);
    MemberTracer tracer(*j.member, make_member_inputs(c, h));
    update = 0;
    while (tracer.computed() < tracer.tokens()) {
      const MemberStepRecord r = tracer.step();
      const std::size_t t = static_cast<std::size_t>(r.token);
      j.s0[0][t] += r.loss_initial;
      j.sb[0][t] += r.loss_before;
      j.sa[0][t] += r.loss_after;
      if (r.chunk_tokens > 0) {
        if (j.cb.size() <= update) {
          j.cb.resize(update + 1, 0.0);
          j.ca.resize(update + 1, 0.0);
        }
        j.cb[update] += r.chunk_loss_before;
        j.ca[update] += r.chunk_loss_after;
        ++update;
      }
    }
  }
  j.pos = T;
}

void CurvesModule::replay_next(const std::string& model_id) {
  const ShippedCheckpoint& c = m_replay.at(m_replay_next);
  CheckpointLoadInfo info;  // shipped weights carry no checksum: the note is not printed
  std::shared_ptr<const Model<float>> m = load_model(c.dir, ModelLoadOptions{.info = &info});
  const std::string name = model_id.substr(std::string(kShippedRunPrefix).size());
  m_library->put(model_id, "the shipped run " + name + " (step " + std::to_string(c.step) + ")", c.dir.string(),
                 std::move(m), true, c.step);
  ++m_replay_next;
}

std::string CurvesModule::resolve(const std::string& model_id) const {
  if (model_id != kFollowTrainingId) return model_id;
  return m_library->puts() > m_follow_after ? m_library->newest_put() : std::string();
}

void CurvesModule::after_iteration(ModuleContext& ctx) {
  if (m_view->generation == 0 || m_library->generation() == m_seen_library) return;
  if (!m_view->settings.ttt()) {  // toy heads: no weights to follow
    m_seen_library = m_library->generation();
    return;
  }
  m_seen_library = m_library->generation();
  const std::string id = resolve(m_view->settings.model_id);
  if (id.empty()) return;
  const auto lib = m_library->view();
  const ModelInfo* info = lib->find(id);
  if (!info || (id == m_view->model_id && info->version == m_view->model_version)) return;
  // Newer weights (a training run saved a checkpoint): compute the same settings again. When following
  // "training", another run's first checkpoint starts a new chain (like a run the view waited for).
  if (id != m_view->model_id) {
    m_reloads = 0;
    // Another run than the one followed so far: no longer the lesson's (waiting, it is the first).
    if (!m_view->model_id.empty()) m_chain_run.reset();
    start(m_view->settings, ctx, nullptr);
    return;
  }
  ++m_reloads;
  start(m_view->settings, ctx, m_view);
}

void CurvesModule::work(ModuleContext& ctx) {
  Job& j = *m_job;
  if (m_slot.cancel_requested(ctx)) return end(ctx, JobOutcome::Cancelled, "cancelled");
  const long T = m_view->T;
  const long W = j.windows->windows();
  try {
    if (j.member) {
      work_member();
    } else if (j.gpu) {
      // One block per work item: its heads' inner loops over the whole window, from the GPU's inputs.
      const TokenBatch b = j.windows->batch_at(j.window);
      if (j.block == 0) j.inputs = j.gpu->layer_inputs(b);
      const auto row = b.row(0);
      const std::vector<unsigned char> bytes(row.begin(), row.begin() + T);
      const auto heads = model_layer_heads_from<float>(*j.model, bytes, j.block, "", j.inputs[static_cast<std::size_t>(j.block)]);
      auto& s0 = j.s0[static_cast<std::size_t>(j.block)];
      auto& sb = j.sb[static_cast<std::size_t>(j.block)];
      auto& sa = j.sa[static_cast<std::size_t>(j.block)];
      for (const HeadInputs<float>& h : heads) {
        auto st = InnerState<float>::start(h.w0);
        Mat<float> out;
        inner_forward_primal<float>(
            h.options, h.params, h.Q, h.K, h.V, h.lambda, st, out,
            [&](const InnerStepRecord<float>& r) {
              const std::size_t t = static_cast<std::size_t>(r.token);
              s0[t] += r.loss_initial;
              sb[t] += r.loss_before;
              sa[t] += r.loss_after;
            },
            &h.w0);
      }
      if (++j.block < static_cast<int>(j.inputs.size())) return;
      j.block = 0;
      j.inputs.clear();
      j.pos = T;
    } else {
    if (j.pos == 0) {
      const TokenBatch b = j.windows->batch_at(j.window);
      const auto row = b.row(0);
      j.tokens.assign(row.begin(), row.begin() + T);  // inputs only: the curves need no targets
      j.stream = j.model->start();
    }
    const long n = std::min(kChunk, T - j.pos);
    const long base = j.pos;
    j.model->forward(*j.stream, std::span<const int>(j.tokens.data() + base, static_cast<std::size_t>(n)),
                     [&](int block, int, const InnerStepRecord<float>& r) {
                       const std::size_t t = static_cast<std::size_t>(base + r.token);
                       j.s0[static_cast<std::size_t>(block)][t] += r.loss_initial;
                       j.sb[static_cast<std::size_t>(block)][t] += r.loss_before;
                       j.sa[static_cast<std::size_t>(block)][t] += r.loss_after;
                     });
    j.pos += n;
    }
  } catch (const std::exception& e) {
    return end(ctx, JobOutcome::Failed, e.what());
  }
  if (j.pos < T) return;  // publish whole windows only: a half-done window would bend the curves
  j.pos = 0;
  ++j.window;
  auto v = next_view();
  v->reloading = false;
  v->sequences_done = j.window;
  const double n = static_cast<double>(j.window) * v->heads;
  for (std::size_t b = 0; b < j.s0.size(); ++b)
    for (std::size_t t = 0; t < j.s0[b].size(); ++t) {
      v->l0[b][t] = j.s0[b][t] / n;
      v->lb[b][t] = j.sb[b][t] / n;
      v->la[b][t] = j.sa[b][t] / n;
    }
  if (!j.cb.empty()) {
    // LaCT: update u is made when token (u + 1)·C arrives.
    v->chunk_at.resize(j.cb.size());
    v->chunk_before.resize(j.cb.size());
    v->chunk_after.resize(j.cb.size());
    for (std::size_t u = 0; u < j.cb.size(); ++u) {
      v->chunk_at[u] = static_cast<long>(u + 1) * v->mini_batch;
      v->chunk_before[u] = j.cb[u] / n;
      v->chunk_after[u] = j.ca[u] / n;
    }
  }
  m_slot.set_progress(ctx, *v, static_cast<double>(j.window) / static_cast<double>(W));
  if (j.window >= W) {
    m_slot.finish(ctx, *v, JobOutcome::Done);
    m_job.reset();
    if (v->replay_pending) {
      // The next checkpoint of the shipped run: after_iteration sees its newer version and follows it.
      try {
        replay_next(v->settings.model_id);
      } catch (const std::exception& e) {
        v->outcome = JobOutcome::Failed;
        v->error = e.what();
      }
    }
    if (v->settings.model_id == kFollowTrainingId && v->model_step >= 0) {
      m_followed = v;
      m_followed_run = m_chain_run;
    }
  }
  show(std::move(v), ctx);
}

void CurvesModule::end(ModuleContext& ctx, JobOutcome outcome, const std::string& message) {
  auto v = next_view();
  m_slot.finish(ctx, *v, outcome, message);
  m_job.reset();
  show(std::move(v), ctx);
}

}  // namespace tttlab::lab
