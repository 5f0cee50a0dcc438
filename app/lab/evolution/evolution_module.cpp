#include "lab/evolution/evolution_module.hpp"

#include <Eigen/SVD>
#include <algorithm>

#include "tttlab/data/batches.hpp"
#include "tttlab/model/model.hpp"

namespace tttlab::lab {

namespace {
constexpr long kTokensPerItem = 32;
}

std::vector<float> singular_values(const Mat<double>& m) {
  if (m.size() == 0) return {};
  Eigen::BDCSVD<Eigen::MatrixXd> svd(m);
  const auto& s = svd.singularValues();
  std::vector<float> out(static_cast<std::size_t>(s.size()));
  for (Eigen::Index i = 0; i < s.size(); ++i) out[static_cast<std::size_t>(i)] = static_cast<float>(s(i));
  return out;  // Eigen returns them sorted in decreasing order
}

HeadLimits EvolutionModule::limits() {
  return {.max_tokens = 2048, .max_d_linear = 64, .max_d_mlp = 32, .max_mini_batch = 1024};
}

bool EvolutionModule::handle(const Command& command, ModuleContext& ctx) {
  const auto* c = std::get_if<EvolutionConfigure>(&command);
  if (!c) return false;
  if (m_configured && c->config == m_config && m_head) return true;
  m_configured = true;
  m_config = c->config;
  ++m_generation;
  m_reloads = 0;
  rebuild();
  ctx.mark_dirty();
  return true;
}

void EvolutionModule::rebuild() {
  m_head.reset();
  m_state.reset();
  m_tracer.reset();
  m_w0.reset();
  m_steps.clear();
  m_model_version = 0;
  m_model_step = -1;
  try {
    validate(m_config, limits());
    m_device = engine_thread_cpu();
    m_device_note.clear();
    const ComputeTarget target = m_config.toy() ? ComputeTarget{} : m_compute->target();
    if (!m_config.toy()) m_device_note = target.note;
    if (target.gpu) {
      // The GPU's forward gives what the chosen block reads (the expensive part for a large model at
      // a long T); W_t is then recomputed here, token by token in double precision, from those inputs:
      // the views need every W_t on the host anyway (its singular values), and recomputing it costs
      // O(d²) per token instead of streaming d² floats per token back from the device.
      ModelOverrides o;
      if (m_config.override_model) {
        o.mini_batch = m_config.mini_batch;
        o.base_lr = m_config.eta_base;
      }
      const auto model = m_library->get(m_config.model_id, o);
      if (const std::string why = target.gpu->model_unsupported(model->config()); !why.empty()) {
        m_device_note = "on the CPU: " + why;
        m_head = build_head_inputs<double>(m_config, *m_library);
      } else {
        const std::vector<unsigned char> bytes = config_bytes(m_config);
        TokenBatch b;
        b.batch = 1;
        b.seq_len = static_cast<int>(bytes.size());
        b.tokens.assign(bytes.begin(), bytes.end());
        b.tokens.push_back(0);  // a target for the last input (no loss is read)
        const auto gm = target.gpu->load_model(*model, 1, b.seq_len);
        const auto inputs = gm->layer_inputs(b);
        if (m_config.block < 0 || m_config.block >= static_cast<int>(inputs.size()))
          throw std::invalid_argument("block " + std::to_string(m_config.block) + " does not exist");
        const auto lib = m_library->view();
        const ModelInfo* info = lib->find(m_config.model_id);
        const std::string label = info ? info->label.substr(0, info->label.find(" (")) : m_config.model_id;
        auto heads = model_layer_heads_from<double>(*model, bytes, m_config.block, label,
                                                    inputs[static_cast<std::size_t>(m_config.block)]);
        if (m_config.head < 0 || m_config.head >= static_cast<int>(heads.size()))
          throw std::invalid_argument("head " + std::to_string(m_config.head) + " does not exist");
        m_head = std::move(heads[static_cast<std::size_t>(m_config.head)]);
        m_device = "GPU: " + target.gpu->device().name + " (the model's forward); W_t recomputed on the CPU";
      }
    } else {
      m_head = build_head_inputs<double>(m_config, *m_library);
    }
    if (!m_config.ttt()) {
      HeadInputs<double>& h = *m_head;
      const FastWeightPreset& p = fast_weight_preset(m_config.member_id());
      m_tracer.emplace(p, make_member_inputs(m_config, h));
      const std::vector<Mat<double>>& s0 = m_tracer->initial_state();
      h.options.model = s0.size() > 1 ? InnerModel::MLP : InnerModel::Linear;
      h.options.mini_batch = member_is_matrix_rule(p) ? 1 : m_config.mini_batch;
      h.w0 = InnerWeights<double>{};
      h.w0.W1 = s0[0];
      if (s0.size() > 1) h.w0.W2 = s0[1];
    } else {
      m_state = InnerState<double>::start(m_head->w0);
    }
    auto w0 = std::make_shared<EvolutionStep>();
    w0->w1 = m_head->w0.W1.cast<float>();
    w0->w2 = m_head->w0.W2.cast<float>();
    w0->norm1 = m_head->w0.W1.norm();
    w0->norm2 = m_head->w0.W2.norm();
    w0->sv1 = singular_values(m_head->w0.W1);
    w0->sv2 = singular_values(m_head->w0.W2);
    w0->dsv1.assign(w0->sv1.size(), 0.0f);
    w0->dsv2.assign(w0->sv2.size(), 0.0f);
    m_w0 = std::move(w0);
    m_error.clear();
  } catch (const std::exception& e) {
    m_error = e.what();
    m_head.reset();
    m_tracer.reset();
  }
  if (!m_config.toy())
    if (const ModelInfo* info = m_library->view()->find(m_config.model_id)) {
      m_model_version = info->version;
      m_model_step = info->step;
    }
  m_seen_library = m_library->generation();
}

void EvolutionModule::after_iteration(ModuleContext& ctx) {
  if (!m_configured || m_config.toy() || m_library->generation() == m_seen_library) return;
  m_seen_library = m_library->generation();
  const ModelInfo* info = m_library->view()->find(m_config.model_id);
  if (!info || info->version == m_model_version) return;
  // A training run saved newer weights of this model: the same head and text again with them.
  ++m_reloads;
  ++m_generation;
  rebuild();
  ctx.mark_dirty();
}

bool EvolutionModule::has_work(Clock::time_point) const {
  return m_head && static_cast<long>(m_steps.size()) < m_head->tokens();
}

void EvolutionModule::work(ModuleContext& ctx) {
  const HeadInputs<double>& h = *m_head;
  const long t0 = static_cast<long>(m_steps.size());
  const long n = std::min(kTokensPerItem, h.tokens() - t0);
  const InnerWeights<double>& W0 = h.w0;
  std::vector<std::shared_ptr<EvolutionStep>> fresh;
  const auto summarise = [&](const InnerWeights<double>& w, double loss_before, double loss_after) {
    auto s = std::make_shared<EvolutionStep>();
    s->w1 = w.W1.cast<float>();
    s->w2 = w.W2.cast<float>();
    const Mat<double> d1 = w.W1 - W0.W1;
    s->drift1 = d1.norm();
    s->norm1 = w.W1.norm();
    s->sv1 = singular_values(w.W1);
    s->dsv1 = singular_values(d1);
    if (w.W2.size()) {
      const Mat<double> d2 = w.W2 - W0.W2;
      s->drift2 = d2.norm();
      s->norm2 = w.W2.norm();
      s->sv2 = singular_values(w.W2);
      s->dsv2 = singular_values(d2);
    }
    s->loss_before = loss_before;
    s->loss_after = loss_after;
    fresh.push_back(std::move(s));
  };
  if (m_tracer) {
    InnerWeights<double> w;
    for (long i = 0; i < n; ++i) {
      MemberStepRecord r = m_tracer->step();
      w.W1 = std::move(r.state_after[0]);
      if (r.state_after.size() > 1) w.W2 = std::move(r.state_after[1]);
      summarise(w, r.loss_before, r.loss_after);
    }
    for (auto& s : fresh) m_steps.push_back(std::move(s));
    ctx.mark_dirty();
    return;
  }
  const InnerObserver<double> observer = [&](const InnerStepRecord<double>& r) {
    summarise(*r.w_after, r.loss_before, r.loss_after);
  };
  const Vec<double> lam = h.lambda.segment(t0, n);
  Mat<double> out;
  inner_forward_primal<double>(h.options, h.params, h.Q.middleRows(t0, n), h.K.middleRows(t0, n),
                               h.V.middleRows(t0, n), lam, *m_state, out, observer, &h.w0);
  for (auto& s : fresh) m_steps.push_back(std::move(s));
  ctx.mark_dirty();
}

void EvolutionModule::publish(Snapshot& snapshot) const {
  auto v = std::make_shared<EvolutionView>();
  v->config = m_config;
  v->generation = m_generation;
  v->error = m_error;
  if (m_head) {
    v->description = m_head->description;
    v->bytes = m_head->bytes;
    v->d = m_head->d();
    v->mini_batch = m_head->options.mini_batch;
    v->mlp = m_head->options.model == InnerModel::MLP;
    v->w0 = m_w0;
    v->steps = m_steps;
    v->done = static_cast<long>(m_steps.size()) == m_head->tokens();
    v->device = m_device;
    v->device_note = m_device_note;
  }
  v->model_version = m_model_version;
  v->model_step = m_model_step;
  v->reloads = m_reloads;
  snapshot.evolution = std::move(v);
}

}  // namespace tttlab::lab
