#include "gui/engine/curves_module.hpp"

#include <stdexcept>

#include "gui/engine/data_source.hpp"
#include "tttlab/data/batches.hpp"

namespace tttlab::gui {

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
};

CurvesModule::CurvesModule(std::shared_ptr<ModelLibrary> library)
    : library_(library ? std::move(library) : std::make_shared<ModelLibrary>()),
      view_(std::make_shared<CurvesView>()) {}
CurvesModule::~CurvesModule() = default;

bool CurvesModule::handle(const Command& command, ModuleContext& ctx) {
  const auto* run = std::get_if<CurvesRun>(&command);
  if (!run) return false;
  reloads_ = 0;
  follow_after_ = library_->puts();  // kFollowTrainingId: only checkpoints saved from now on
  start(run->settings, ctx, nullptr);
  return true;
}

void CurvesModule::start(const CurvesSettings& s, ModuleContext& ctx, std::shared_ptr<const CurvesView> previous) {
  if (job_)
    ctx.finish_job(job_id_, JobOutcome::Cancelled,
                   previous ? "newer weights arrived: computing again" : "superseded by a new request");
  job_.reset();
  auto v = std::make_shared<CurvesView>();
  v->settings = s;
  v->generation = ++generation_;
  v->reloads = reloads_;
  const std::string id = resolve(s.model_id);
  v->model_id = id;
  if (previous)
    v->first_followed = previous->first_followed          ? previous->first_followed
                        : previous->outcome == JobOutcome::Done ? previous
                                                                : nullptr;
  try {
    if (s.seq_len < 8 || s.seq_len > 2048) throw std::invalid_argument("the sequence length T must be in [8, 2048]");
    if (s.sequences < 1 || s.sequences > 256) throw std::invalid_argument("the number of sequences must be in [1, 256]");
    if (id.empty()) {
      // Nothing to compute until a training run saves its first checkpoint (after_iteration looks).
      v->waiting = true;
      v->model_label = "the next training run";
    } else {
      auto job = std::make_unique<Job>();
      job->model = library_->get(id);
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
      if (previous && previous->blocks == v->blocks && previous->T == v->T && previous->sequences_done > 0) {
        // Keep the previous weights' curves on show until the first sequence with the new ones is done.
        v->l0 = previous->l0;
        v->lb = previous->lb;
        v->la = previous->la;
        v->sequences_done = previous->sequences_done;
        v->reloading = true;
      }
      job_ = std::move(job);
      v->outcome = JobOutcome::Running;
      job_id_ = ctx.begin_job("Inner-loss curves: " + std::to_string(job_->windows->windows()) + " sequences");
    }
  } catch (const std::exception& e) {
    job_.reset();
    v->outcome = JobOutcome::Failed;
    v->error = e.what();
  }
  if (!id.empty()) {
    const auto lib = library_->view();
    if (const ModelInfo* info = lib->find(id)) {
      v->model_label = info->label;
      v->model_version = info->version;
      v->model_step = info->step;
    } else {
      v->model_label = id;
    }
  }
  seen_library_ = library_->generation();
  view_ = std::move(v);
  ctx.mark_dirty();
}

std::string CurvesModule::resolve(const std::string& model_id) const {
  if (model_id != kFollowTrainingId) return model_id;
  return library_->puts() > follow_after_ ? library_->newest_put() : std::string();
}

void CurvesModule::after_iteration(ModuleContext& ctx) {
  if (view_->generation == 0 || library_->generation() == seen_library_) return;
  seen_library_ = library_->generation();
  const std::string id = resolve(view_->settings.model_id);
  if (id.empty()) return;
  const auto lib = library_->view();
  const ModelInfo* info = lib->find(id);
  if (!info || (id == view_->model_id && info->version == view_->model_version)) return;
  // Newer weights (a training run saved a checkpoint): compute the same settings again. When following
  // "training", another run's first checkpoint starts a new chain (like a run the view waited for).
  if (id != view_->model_id) {
    reloads_ = 0;
    start(view_->settings, ctx, nullptr);
    return;
  }
  ++reloads_;
  start(view_->settings, ctx, view_);
}

bool CurvesModule::has_work(Clock::time_point) const { return job_ != nullptr; }

void CurvesModule::work(ModuleContext& ctx) {
  Job& j = *job_;
  if (ctx.cancel_requested(job_id_)) {
    auto v = std::make_shared<CurvesView>(*view_);
    ctx.finish_job(job_id_, JobOutcome::Cancelled, "cancelled");
    v->outcome = JobOutcome::Cancelled;
    job_.reset();
    view_ = std::move(v);
    ctx.mark_dirty();
    return;
  }
  const long T = view_->T;
  const long W = j.windows->windows();
  try {
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
  } catch (const std::exception& e) {
    auto v = std::make_shared<CurvesView>(*view_);
    ctx.finish_job(job_id_, JobOutcome::Failed, e.what());
    v->outcome = JobOutcome::Failed;
    v->error = e.what();
    job_.reset();
    view_ = std::move(v);
    ctx.mark_dirty();
    return;
  }
  if (j.pos < T) return;  // publish whole windows only: a half-done window would bend the curves
  j.pos = 0;
  ++j.window;
  auto v = std::make_shared<CurvesView>(*view_);
  v->reloading = false;
  v->sequences_done = j.window;
  const double n = static_cast<double>(j.window) * v->heads;
  for (std::size_t b = 0; b < j.s0.size(); ++b)
    for (std::size_t t = 0; t < j.s0[b].size(); ++t) {
      v->l0[b][t] = j.s0[b][t] / n;
      v->lb[b][t] = j.sb[b][t] / n;
      v->la[b][t] = j.sa[b][t] / n;
    }
  v->progress = static_cast<double>(j.window) / static_cast<double>(W);
  ctx.set_progress(job_id_, v->progress);
  if (j.window >= W) {
    v->outcome = JobOutcome::Done;
    ctx.finish_job(job_id_, JobOutcome::Done);
    job_.reset();
  }
  view_ = std::move(v);
  ctx.mark_dirty();
}

void CurvesModule::publish(Snapshot& snapshot) const { snapshot.curves = view_; }

}  // namespace tttlab::gui
