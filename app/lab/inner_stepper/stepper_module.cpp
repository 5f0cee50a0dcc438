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
    : m_library(library ? std::move(library) : std::make_shared<ModelLibrary>()) {
  // Nothing is built before the first StepperConfigure: loading the model belongs on the engine
  // thread, and the constructor runs on the caller's.
  m_error = "waiting for settings";
}

bool StepperModule::handle(const Command& command, ModuleContext& ctx) {
  if (const auto* c = std::get_if<StepperConfigure>(&command)) {
    configure(*c);
  } else if (const auto* t = std::get_if<StepperTransport>(&command)) {
    transport(*t);
  } else if (const auto* s = std::get_if<StepperSetSpeed>(&command)) {
    m_speed = std::clamp(s->tokens_per_second, 0.25, 1000.0);
    m_loop = s->loop;
    if (m_playing) m_next_tick = Clock::now();
  } else {
    return false;
  }
  ctx.mark_dirty();
  return true;
}

void StepperModule::configure(const StepperConfigure& c) {
  if (!(c.config == m_config) || !m_head) {
    m_config = c.config;
    ++m_generation;
    m_reloads = 0;
    if (!rebuild()) return;
  }
  set_cursor_target(c.cursor);
  m_cursor = std::min(m_cursor, m_target);
}

bool StepperModule::rebuild() {
  m_records.clear();
  m_head.reset();
  m_state.reset();
  m_tracer.reset();
  m_w0.reset();
  m_eta.reset();
  m_cursor = m_target = -1;
  m_compute_us_total = 0;
  m_model_version = 0;
  m_model_step = -1;
  m_warning.clear();
  try {
    validate(m_config, limits());
    m_head = build_head_inputs<double>(m_config, *m_library);
    if (m_config.toy())
      m_non_finite = "the inner loop's numbers are no longer finite (NaN or infinity) or beyond what a float can "
                    "hold: the learning rate is too large for these settings";
    else
      m_non_finite = non_finite_model_message(model_source(*m_library->view(), m_config.model_id));
    if (!m_config.ttt()) start_member();
    m_w0 = std::make_shared<const InnerWeights<double>>(m_head->w0);
    const int b = m_head->options.mini_batch;
    auto eta = std::make_shared<std::vector<double>>(static_cast<std::size_t>(m_head->tokens()));
    for (long t = 0; t < m_head->tokens(); ++t)
      (*eta)[static_cast<std::size_t>(t)] =
          m_tracer ? m_member_rate[static_cast<std::size_t>(t)] : m_head->params.tau(t % b) * m_head->lambda(t);
    m_eta = std::move(eta);
    if (!m_tracer) m_state = InnerState<double>::start(m_head->w0);
    m_error.clear();
    const HeadInputs<double>& h = *m_head;
    if (any_beyond_float(h.Q) || any_beyond_float(h.K) || any_beyond_float(h.V) || any_beyond_float(h.lambda) ||
        any_beyond_float(h.w0.W1) || any_beyond_float(h.w0.b1) || any_beyond_float(h.w0.W2) ||
        any_beyond_float(h.w0.b2))
      m_warning = m_non_finite;
  } catch (const std::exception& e) {
    m_error = e.what();
    m_head.reset();
    m_tracer.reset();
    m_playing = false;
  }
  if (!m_config.toy())
    if (const ModelInfo* info = m_library->view()->find(m_config.model_id)) {
      m_model_version = info->version;
      m_model_step = info->step;
    }
  m_seen_library = m_library->generation();
  return m_head.has_value();
}

void StepperModule::after_iteration(ModuleContext& ctx) {
  if (m_generation == 0 || m_config.toy() || m_library->generation() == m_seen_library) return;
  m_seen_library = m_library->generation();
  const ModelInfo* info = m_library->view()->find(m_config.model_id);
  if (!info || info->version == m_model_version) return;
  // A training run saved newer weights of this model: the same head, text and cursor with them.
  const long keep = m_target;
  ++m_reloads;
  ++m_generation;
  if (rebuild()) set_cursor_target(keep);
  ctx.mark_dirty();
}

void StepperModule::set_cursor_target(long token) {
  if (!m_head) return;
  m_target = std::clamp(token, -1L, m_head->tokens() - 1);
  if (m_target < static_cast<long>(m_records.size())) m_cursor = m_target;
}

void StepperModule::transport(const StepperTransport& t) {
  if (!m_head) return;
  const long T = m_head->tokens();
  const long b = m_head->options.mini_batch;
  // The stepper's position is where the cursor is heading (a seek in progress counts as done).
  const long at = m_target;
  switch (t.op) {
    case StepperOp::Play:
      if (at >= T - 1) set_cursor_target(-1);  // play from the start again
      m_playing = true;
      m_next_tick = Clock::now();
      return;
    case StepperOp::Pause:
      m_playing = false;
      return;
    case StepperOp::TogglePlay:
      transport({m_playing ? StepperOp::Pause : StepperOp::Play, 0});
      return;
    default:
      break;
  }
  m_playing = false;  // every manual move pauses, like a video player's frame step
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
  if (!m_head) return false;
  if (m_target > m_cursor) return true;
  return m_playing && now >= m_next_tick;
}

std::optional<Clock::time_point> StepperModule::next_wakeup() const {
  if (m_head && m_playing) return m_next_tick;
  return std::nullopt;
}

void StepperModule::work(ModuleContext& ctx) {
  const long T = m_head->tokens();
  if (m_target <= m_cursor && m_playing) {
    // A playback tick: advance by one token (or wrap / stop at the end).
    if (m_cursor >= T - 1) {
      if (m_loop) {
        m_cursor = m_target = -1;
      } else {
        m_playing = false;
      }
    } else {
      m_target = m_cursor + 1;
    }
    const auto period = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(1.0 / m_speed));
    m_next_tick = std::max(m_next_tick + period, Clock::now() - period);
  }
  if (m_target > m_cursor) {
    if (static_cast<long>(m_records.size()) <= m_cursor + 1) compute_next_token();
    ++m_cursor;
  }
  ctx.mark_dirty();
}

// The member's tracer, and the head's options, W₀ and rates rewritten to describe it (the view draws
// TokenRecords of either path).
void StepperModule::start_member() {
  HeadInputs<double>& h = *m_head;
  const FastWeightPreset& p = fast_weight_preset(m_config.member_id());
  MemberInputs in = make_member_inputs(m_config, h);
  const bool matrix = member_is_matrix_rule(p);
  const long T = h.tokens();
  m_member_rate.assign(static_cast<std::size_t>(T), 1.0);
  if (p.id != "linear_attention")
    for (long t = 0; t < T; ++t) m_member_rate[static_cast<std::size_t>(t)] = in.beta(t);
  m_tracer.emplace(p, std::move(in));
  const std::vector<Mat<double>>& w0 = m_tracer->initial_state();
  h.options.model = w0.size() > 1 ? InnerModel::MLP : InnerModel::Linear;
  // One step per token for the matrix members; Titans' mini-batch and LaCT's chunk are b tokens.
  h.options.mini_batch = matrix ? 1 : m_config.mini_batch;
  h.options.layer_norm = h.options.residual = h.options.bias = false;
  h.w0 = member_weights(w0);
}

InnerWeights<double> StepperModule::member_weights(const std::vector<Mat<double>>& w) {
  InnerWeights<double> o;
  o.W1 = w[0];
  o.b1 = RowVec<double>::Zero(w[0].cols());
  if (w.size() > 1) {
    o.W2 = w[1];
    o.b2 = RowVec<double>::Zero(w[1].cols());
  }
  return o;
}

void StepperModule::compute_member_token() {
  const long t = static_cast<long>(m_records.size());
  const HeadInputs<double>& h = *m_head;
  const int b = h.options.mini_batch;
  auto rec = std::make_shared<TokenRecord>();
  rec->t = t;
  rec->byte = h.bytes[static_cast<std::size_t>(t)];
  rec->mini_batch_index = t / b;
  rec->pos = static_cast<int>(t % b);
  rec->commits = rec->pos == b - 1;
  const auto t0 = Clock::now();
  MemberStepRecord r = m_tracer->step();
  m_compute_us_total += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  rec->lambda = m_member_rate[static_cast<std::size_t>(t)];
  rec->tau = 1.0;
  rec->alpha = r.alpha;
  rec->loss_initial = r.loss_initial;
  rec->loss_before = r.loss_before;
  rec->loss_after = r.loss_after;
  if (!r.key.empty()) {
    rec->k = r.key[0];
    rec->grad_z = r.grad[0];
  }
  rec->output = r.output;
  rec->w_after = member_weights(r.state_after);
  rec->delta = member_weights(r.delta);
  rec->outer1 = r.gradient[0];
  if (r.gradient.size() > 1) rec->outer2 = r.gradient[1];
  rec->w_norm = rec->w_after.W1.norm();
  rec->dw_norm = rec->delta.W1.norm();
  const auto absmax = [](const auto& m) { return m.size() ? m.cwiseAbs().maxCoeff() : 0.0; };
  rec->w_absmax = absmax(rec->w_after.W1);
  rec->w2_absmax = absmax(rec->w_after.W2);
  rec->delta_absmax = absmax(rec->delta.W1);
  rec->delta2_absmax = absmax(rec->delta.W2);
  rec->outer_absmax = absmax(rec->outer1);
  rec->outer2_absmax = absmax(rec->outer2);
  if (m_warning.empty() &&
      (beyond_float(rec->loss_initial) || beyond_float(rec->loss_before) || beyond_float(rec->loss_after) ||
       beyond_float(rec->w_norm) || beyond_float(rec->dw_norm) || any_beyond_float(rec->output)))
    m_warning = m_non_finite;
  m_records.push_back(std::move(rec));
}

void StepperModule::compute_next_token() {
  if (m_tracer) return compute_member_token();
  const long t = static_cast<long>(m_records.size());
  const HeadInputs<double>& h = *m_head;
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
                               h.V.middleRows(t, 1), lam, *m_state, out, observer, m_w0.get());
  m_compute_us_total += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  if (m_warning.empty() &&
      (beyond_float(rec->loss_initial) || beyond_float(rec->loss_before) || beyond_float(rec->loss_after) ||
       beyond_float(rec->w_norm) || beyond_float(rec->dw_norm) || any_beyond_float(rec->output)))
    m_warning = m_non_finite;
  m_records.push_back(std::move(rec));
}

void StepperModule::publish(Snapshot& snapshot) const {
  auto v = std::make_shared<StepperView>();
  v->config = m_config;
  v->generation = m_generation;
  v->error = m_error;
  v->warning = m_warning;
  if (m_head) {
    v->bytes = m_head->bytes;
    v->description = m_head->description;
    v->options = m_head->options;
    v->d = m_head->d();
  }
  v->w0 = m_w0;
  v->eta = m_eta;
  v->records = m_records;
  v->cursor = m_cursor;
  v->playing = m_playing;
  v->speed = m_speed;
  v->loop = m_loop;
  v->model_version = m_model_version;
  v->model_step = m_model_step;
  v->reloads = m_reloads;
  v->compute_us_per_token =
      m_records.empty() ? 0.0 : m_compute_us_total / static_cast<double>(m_records.size());
  snapshot.stepper = std::move(v);
}

}  // namespace tttlab::lab
