#include "gui/engine/primal_dual_module.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "gui/engine/toy_head.hpp"

namespace tttlab::gui {

HeadConfig PrimalDualConfig::effective() const {
  HeadConfig h = head;
  if (!linear_attention) return h;
  h.model = InnerModel::Linear;
  h.mini_batch = static_cast<int>(std::max(1L, h.tokens()));
  h.w0 = W0Init::Zero;
  h.layer_norm = false;
  h.residual = false;
  h.bias = false;
  h.gate = EtaGate::Fixed;
  h.eta_base = h.d;  // λ = η_base/d = 1
  h.token_index = false;  // τ = 1, so E ≡ 1
  return h;
}

HeadLimits PrimalDualModule::limits() {
  HeadLimits l;
  l.max_tokens = 2048;
  l.max_d_linear = 64;
  l.max_d_mlp = 32;
  l.max_mini_batch = 2048;
  return l;
}

namespace {

constexpr int kMaxBins = 512;

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

// The job as a small state machine; each call of step() is one work item.
struct PrimalDualModule::Job {
  virtual ~Job() = default;
  virtual bool step(PrimalDualView& out) = 0;  // returns true when finished
  virtual double progress() const = 0;
};

namespace {

template <class S>
class TypedJob final : public PrimalDualModule::Job {
 public:
  TypedJob(const PrimalDualConfig& cfg) : cfg_(cfg), eff_(cfg.effective()) {}

  double progress() const override {
    const double total = 2.0 + 2.0 * cfg_.timing_reps;
    return done_steps_ / total;
  }

  bool step(PrimalDualView& out) override {
    ++done_steps_;
    if (phase_ == Phase::Build) {
      head_ = make_toy_head<S>(eff_);
      phase_ = Phase::Primal;
      return false;
    }
    if (phase_ == Phase::Primal) {
      run_form(/*dual=*/false);
      if (static_cast<int>(primal_ms_.size()) == cfg_.timing_reps) phase_ = Phase::Dual;
      return false;
    }
    if (phase_ == Phase::Dual) {
      run_form(/*dual=*/true);
      if (static_cast<int>(dual_ms_.size()) == cfg_.timing_reps) phase_ = Phase::Compare;
      return false;
    }
    compare(out);
    return true;
  }

 private:
  enum class Phase { Build, Primal, Dual, Compare };

  void run_form(bool dual) {
    const ToyHead<S>& h = *head_;
    auto st = InnerState<S>::start(h.w0);
    Mat<S> o;
    const auto t0 = std::chrono::steady_clock::now();
    if (dual)
      inner_forward_dual<S>(h.options, h.params, h.Q, h.K, h.V, h.lambda, st, o);
    else
      inner_forward_primal<S>(h.options, h.params, h.Q, h.K, h.V, h.lambda, st, o);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    (dual ? dual_ms_ : primal_ms_).push_back(ms);
    (dual ? out_dual_ : out_primal_) = o.template cast<double>();
  }

  void compare(PrimalDualView& v) {
    const ToyHead<S>& h = *head_;
    const long T = h.tokens();
    const int b = eff_.mini_batch;
    v.results_generation = v.generation;
    v.bytes = h.bytes;
    v.T = T;
    v.d = eff_.d;
    const Mat<double> diff = (out_primal_ - out_dual_).cwiseAbs();
    v.max_abs_diff = diff.size() ? diff.maxCoeff() : 0.0;
    v.max_abs_output = out_primal_.size() ? out_primal_.cwiseAbs().maxCoeff() : 0.0;
    v.token_diff.resize(static_cast<std::size_t>(T));
    for (long t = 0; t < T; ++t) v.token_diff[static_cast<std::size_t>(t)] = diff.row(t).maxCoeff();
    v.primal_ms = primal_ms_;
    v.dual_ms = dual_ms_;
    v.primal_ms_median = median(primal_ms_);
    v.dual_ms_median = median(dual_ms_);
    const Mat<double> diff_t = diff.transpose();  // [d, T]: tokens run along the wide axis
    v.diff_map = plot::pool_max_abs(diff_t.data(), diff_t.rows(), T, T, kMaxBins, kMaxBins);

    // The dual form's matrix M = E ⊙ tril(QKᵀ + 1), built per mini-batch exactly as the dual form
    // weighs the gradients (the +1 only with the inner bias). Rows of the two forms' W1 read-out.
    const Mat<double> Q = h.Q.template cast<double>(), K = h.K.template cast<double>();
    const Vec<double> lam = h.lambda.template cast<double>();
    const Vec<double> tau = h.params.tau.template cast<double>();
    const double one = eff_.bias ? 1.0 : 0.0;
    v.attention = plot::pool_max_abs_fn(T, T, kMaxBins, kMaxBins, [&](long i, long j) {
      const long start = i / b * b;
      if (j < start || j > i) return 0.0;  // other mini-batches interact through W only
      return tau(i - start) * lam(j) * (Q.row(i).dot(K.row(j)) + one);
    });

    v.linear_attention = cfg_.linear_attention;
    if (cfg_.linear_attention) {
      // Plain causal linear attention, computed independently of the TTT code: O = tril(QKᵀ)V.
      // Row blocks keep the T×T scores to [block, T] at a time.
      const Mat<double> V = h.V.template cast<double>();
      v.linear_attention_diff = v.linear_attention_scale = 0.0;
      constexpr long kBlock = 256;
      for (long i0 = 0; i0 < T; i0 += kBlock) {
        const long n = std::min(kBlock, T - i0);
        Mat<double> A = Q.middleRows(i0, n) * K.transpose();
        for (long r = 0; r < n; ++r) A.row(r).tail(T - (i0 + r + 1)).setZero();  // tril
        const Mat<double> ref = A * V;
        v.linear_attention_diff = std::max(
            v.linear_attention_diff, (out_dual_.middleRows(i0, n) - ref).cwiseAbs().maxCoeff());
        v.linear_attention_scale = std::max(v.linear_attention_scale, ref.cwiseAbs().maxCoeff());
      }
    }
  }

  PrimalDualConfig cfg_;
  HeadConfig eff_;
  Phase phase_ = Phase::Build;
  int done_steps_ = 0;
  std::optional<ToyHead<S>> head_;
  std::vector<double> primal_ms_, dual_ms_;
  Mat<double> out_primal_, out_dual_;
};

}  // namespace

PrimalDualModule::PrimalDualModule() : view_(std::make_shared<PrimalDualView>()) {}
PrimalDualModule::~PrimalDualModule() = default;

bool PrimalDualModule::handle(const Command& command, ModuleContext& ctx) {
  const auto* run = std::get_if<PrimalDualRun>(&command);
  if (!run) return false;
  if (job_) ctx.finish_job(job_id_, JobOutcome::Cancelled, "superseded by a new request");
  job_.reset();

  // Keep the previous results on show (marked stale by results_generation) while the new job runs.
  auto v = std::make_shared<PrimalDualView>(*view_);
  v->error.clear();
  v->progress = 0;
  v->config = run->config;
  v->effective = run->config.effective();
  v->generation = ++generation_;
  try {
    if (run->config.timing_reps < 1 || run->config.timing_reps > 50)
      throw std::invalid_argument("timing repetitions must be in [1, 50]");
    validate(v->effective, limits());
    if (run->config.precision == Precision::Float)
      job_ = std::make_unique<TypedJob<float>>(run->config);
    else
      job_ = std::make_unique<TypedJob<double>>(run->config);
    v->outcome = JobOutcome::Running;
    job_id_ = ctx.begin_job("Primal vs dual: T = " + std::to_string(v->effective.tokens()));
  } catch (const std::exception& e) {
    v->outcome = JobOutcome::Failed;
    v->error = e.what();
  }
  view_ = std::move(v);
  ctx.mark_dirty();
  return true;
}

bool PrimalDualModule::has_work(Clock::time_point) const { return job_ != nullptr; }

void PrimalDualModule::work(ModuleContext& ctx) {
  auto v = std::make_shared<PrimalDualView>(*view_);
  if (ctx.cancel_requested(job_id_)) {
    ctx.finish_job(job_id_, JobOutcome::Cancelled, "cancelled");
    v->outcome = JobOutcome::Cancelled;
    job_.reset();
  } else {
    try {
      const bool finished = job_->step(*v);
      v->progress = job_->progress();
      ctx.set_progress(job_id_, v->progress);
      if (finished) {
        v->outcome = JobOutcome::Done;
        ctx.finish_job(job_id_, JobOutcome::Done);
        job_.reset();
      }
    } catch (const std::exception& e) {
      v->outcome = JobOutcome::Failed;
      v->error = e.what();
      ctx.finish_job(job_id_, JobOutcome::Failed, e.what());
      job_.reset();
    }
  }
  view_ = std::move(v);
  ctx.mark_dirty();
}

void PrimalDualModule::publish(Snapshot& snapshot) const { snapshot.primal_dual = view_; }

}  // namespace tttlab::gui
