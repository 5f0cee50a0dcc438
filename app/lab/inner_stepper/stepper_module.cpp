#include "lab/inner_stepper/stepper_module.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "tttlab/model/checkpoint.hpp"

namespace tttlab::lab {

HeadLimits StepperModule::limits() {
  HeadLimits l;
  l.max_tokens = 512;  // one record holds W_t: 512 tokens × (d=64)² doubles ≈ 16 MiB
  l.max_d_linear = 64;
  l.max_d_mlp = 32;
  l.max_mini_batch = 512;
  return l;
}

StepperModule::StepperModule(std::shared_ptr<ModelLibrary> library)
    : library_(library ? std::move(library) : std::make_shared<ModelLibrary>()) {
  // Nothing is built before the first StepperConfigure: loading the model belongs on the engine
  // thread, and the constructor runs on the caller's.
  error_ = "waiting for settings";
}

bool StepperModule::handle(const Command& command, ModuleContext& ctx) {
  if (const auto* c = std::get_if<StepperConfigure>(&command)) {
    configure(*c);
  } else if (const auto* t = std::get_if<StepperTransport>(&command)) {
    transport(*t);
  } else if (const auto* s = std::get_if<StepperSetSpeed>(&command)) {
    speed_ = std::clamp(s->tokens_per_second, 0.25, 1000.0);
    loop_ = s->loop;
    if (playing_) next_tick_ = Clock::now();
  } else {
    return false;
  }
  ctx.mark_dirty();
  return true;
}

void StepperModule::configure(const StepperConfigure& c) {
  if (!(c.config == config_) || !head_) {
    config_ = c.config;
    ++generation_;
    reloads_ = 0;
    if (!rebuild()) return;
  }
  set_cursor_target(c.cursor);
  cursor_ = std::min(cursor_, target_);
}

bool StepperModule::rebuild() {
  records_.clear();
  head_.reset();
  state_.reset();
  w0_.reset();
  eta_.reset();
  cursor_ = target_ = -1;
  compute_us_total_ = 0;
  model_version_ = 0;
  model_step_ = -1;
  warning_.clear();
  try {
    validate(config_, limits());
    head_ = build_head_inputs<double>(config_, *library_);
    if (config_.toy())
      non_finite_ = "the inner loop's numbers are no longer finite (NaN or infinity) or beyond what a float can "
                    "hold: the learning rate is too large for these settings";
    else
      non_finite_ = non_finite_model_message(model_source(*library_->view(), config_.model_id));
    w0_ = std::make_shared<const InnerWeights<double>>(head_->w0);
    const int b = head_->options.mini_batch;
    auto eta = std::make_shared<std::vector<double>>(static_cast<std::size_t>(head_->tokens()));
    for (long t = 0; t < head_->tokens(); ++t)
      (*eta)[static_cast<std::size_t>(t)] = head_->params.tau(t % b) * head_->lambda(t);
    eta_ = std::move(eta);
    state_ = InnerState<double>::start(head_->w0);
    error_.clear();
    const HeadInputs<double>& h = *head_;
    if (any_beyond_float(h.Q) || any_beyond_float(h.K) || any_beyond_float(h.V) || any_beyond_float(h.lambda) ||
        any_beyond_float(h.w0.W1) || any_beyond_float(h.w0.b1) || any_beyond_float(h.w0.W2) ||
        any_beyond_float(h.w0.b2))
      warning_ = non_finite_;
  } catch (const std::exception& e) {
    error_ = e.what();
    head_.reset();
    playing_ = false;
  }
  if (!config_.toy())
    if (const ModelInfo* info = library_->view()->find(config_.model_id)) {
      model_version_ = info->version;
      model_step_ = info->step;
    }
  seen_library_ = library_->generation();
  return head_.has_value();
}

void StepperModule::after_iteration(ModuleContext& ctx) {
  if (generation_ == 0 || config_.toy() || library_->generation() == seen_library_) return;
  seen_library_ = library_->generation();
  const ModelInfo* info = library_->view()->find(config_.model_id);
  if (!info || info->version == model_version_) return;
  // A training run saved newer weights of this model: the same head, text and cursor with them.
  const long keep = target_;
  ++reloads_;
  ++generation_;
  if (rebuild()) set_cursor_target(keep);
  ctx.mark_dirty();
}

void StepperModule::set_cursor_target(long token) {
  if (!head_) return;
  target_ = std::clamp(token, -1L, head_->tokens() - 1);
  if (target_ < static_cast<long>(records_.size())) cursor_ = target_;
}

void StepperModule::transport(const StepperTransport& t) {
  if (!head_) return;
  const long T = head_->tokens();
  const long b = head_->options.mini_batch;
  // The stepper's position is where the cursor is heading (a seek in progress counts as done).
  const long at = target_;
  switch (t.op) {
    case StepperOp::Play:
      if (at >= T - 1) set_cursor_target(-1);  // play from the start again
      playing_ = true;
      next_tick_ = Clock::now();
      return;
    case StepperOp::Pause:
      playing_ = false;
      return;
    case StepperOp::TogglePlay:
      transport({playing_ ? StepperOp::Pause : StepperOp::Play, 0});
      return;
    default:
      break;
  }
  playing_ = false;  // every manual move pauses, like a video player's frame step
  switch (t.op) {
    case StepperOp::StepForward: set_cursor_target(at + 1); break;
    case StepperOp::StepBack: set_cursor_target(at - 1); break;
    case StepperOp::NextMiniBatch: {
      // Last token of the current mini-batch (pos = b−1, where the state is committed); if already
      // there, the last token of the next one.
      const long next_end = (at + 1) / b * b + b - 1;
      set_cursor_target(std::min(next_end, T - 1));
      break;
    }
    case StepperOp::PrevMiniBatch: {
      const long prev_end = (at + 1) % b == 0 ? at - b : at - (at + 1) % b;
      set_cursor_target(std::max(prev_end, -1L));
      break;
    }
    case StepperOp::Seek: set_cursor_target(t.token); break;
    case StepperOp::ToStart: set_cursor_target(-1); break;
    case StepperOp::ToEnd: set_cursor_target(T - 1); break;
    default: break;
  }
}

bool StepperModule::has_work(Clock::time_point now) const {
  if (!head_) return false;
  if (target_ > cursor_) return true;
  return playing_ && now >= next_tick_;
}

std::optional<Clock::time_point> StepperModule::next_wakeup() const {
  if (head_ && playing_) return next_tick_;
  return std::nullopt;
}

void StepperModule::work(ModuleContext& ctx) {
  const long T = head_->tokens();
  if (target_ <= cursor_ && playing_) {
    // A playback tick: advance by one token (or wrap / stop at the end).
    if (cursor_ >= T - 1) {
      if (loop_) {
        cursor_ = target_ = -1;
      } else {
        playing_ = false;
      }
    } else {
      target_ = cursor_ + 1;
    }
    const auto period = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(1.0 / speed_));
    next_tick_ = std::max(next_tick_ + period, Clock::now() - period);
  }
  if (target_ > cursor_) {
    if (static_cast<long>(records_.size()) <= cursor_ + 1) compute_next_token();
    ++cursor_;
  }
  ctx.mark_dirty();
}

void StepperModule::compute_next_token() {
  const long t = static_cast<long>(records_.size());
  const HeadInputs<double>& h = *head_;
  const int b = h.options.mini_batch;
  auto rec = std::make_shared<TokenRecord>();
  rec->t = t;
  rec->byte = h.bytes[static_cast<std::size_t>(t)];
  rec->mini_batch_index = t / b;

  const InnerObserver<double> observer = [&](const InnerStepRecord<double>& r) {
    rec->pos = r.pos;
    rec->commits = r.pos == b - 1;
    rec->lambda = r.lambda;
    rec->tau = r.tau;
    rec->loss_initial = r.loss_initial;
    rec->loss_before = r.loss_before;
    rec->loss_after = r.loss_after;
    rec->k = *r.k;
    rec->grad_z = *r.grad_z;
    if (r.x2) rec->x2 = *r.x2;
    if (r.grad_z2) rec->grad_z2 = *r.grad_z2;
    rec->output = *r.output;
    rec->w_after = *r.w_after;
    rec->delta = *r.w_after;
    rec->delta.sub_scaled(*r.w_before, 1.0);
    rec->outer1 = r.k->transpose() * *r.grad_z;
    if (r.x2 && r.grad_z2) rec->outer2 = r.x2->transpose() * *r.grad_z2;
    rec->w_norm = r.w_after->W1.norm();
    rec->dw_norm = rec->delta.W1.norm();
    const auto absmax = [](const auto& m) { return m.size() ? m.cwiseAbs().maxCoeff() : 0.0; };
    rec->w_absmax = absmax(rec->w_after.W1);
    rec->w2_absmax = absmax(rec->w_after.W2);
    rec->delta_absmax = absmax(rec->delta.W1);
    rec->delta2_absmax = absmax(rec->delta.W2);
    rec->outer_absmax = absmax(rec->outer1);
    rec->outer2_absmax = absmax(rec->outer2);
  };
  const Vec<double> lam = h.lambda.segment(t, 1);
  Mat<double> out;
  const auto t0 = Clock::now();
  inner_forward_primal<double>(h.options, h.params, h.Q.middleRows(t, 1), h.K.middleRows(t, 1),
                               h.V.middleRows(t, 1), lam, *state_, out, observer, w0_.get());
  compute_us_total_ += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  if (warning_.empty() &&
      (beyond_float(rec->loss_initial) || beyond_float(rec->loss_before) || beyond_float(rec->loss_after) ||
       beyond_float(rec->w_norm) || beyond_float(rec->dw_norm) || any_beyond_float(rec->output)))
    warning_ = non_finite_;
  records_.push_back(std::move(rec));
}

void StepperModule::publish(Snapshot& snapshot) const {
  auto v = std::make_shared<StepperView>();
  v->config = config_;
  v->generation = generation_;
  v->error = error_;
  v->warning = warning_;
  if (head_) {
    v->bytes = head_->bytes;
    v->description = head_->description;
    v->options = head_->options;
    v->d = head_->d();
  }
  v->w0 = w0_;
  v->eta = eta_;
  v->records = records_;
  v->cursor = cursor_;
  v->playing = playing_;
  v->speed = speed_;
  v->loop = loop_;
  v->model_version = model_version_;
  v->model_step = model_step_;
  v->reloads = reloads_;
  v->compute_us_per_token =
      records_.empty() ? 0.0 : compute_us_total_ / static_cast<double>(records_.size());
  snapshot.stepper = std::move(v);
}

}  // namespace tttlab::lab
