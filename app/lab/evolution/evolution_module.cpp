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
  HeadLimits l;
  l.max_tokens = 2048;
  l.max_d_linear = 64;
  l.max_d_mlp = 32;
  l.max_mini_batch = 1024;
  return l;
}

EvolutionModule::EvolutionModule(std::shared_ptr<ModelLibrary> library, std::shared_ptr<ComputeChoice> compute)
    : library_(library ? std::move(library) : std::make_shared<ModelLibrary>()),
      compute_(compute ? std::move(compute) : std::make_shared<ComputeChoice>()) {
  error_ = "waiting for settings";
}

bool EvolutionModule::handle(const Command& command, ModuleContext& ctx) {
  const auto* c = std::get_if<EvolutionConfigure>(&command);
  if (!c) return false;
  if (configured_ && c->config == config_ && head_) return true;
  configured_ = true;
  config_ = c->config;
  ++generation_;
  reloads_ = 0;
  rebuild();
  ctx.mark_dirty();
  return true;
}

void EvolutionModule::rebuild() {
  head_.reset();
  state_.reset();
  w0_.reset();
  steps_.clear();
  model_version_ = 0;
  model_step_ = -1;
  try {
    validate(config_, limits());
    device_ = cpu_device().describe();
    device_note_.clear();
    const ComputeTarget target = config_.toy() ? ComputeTarget{} : compute_->target();
    if (!config_.toy()) device_note_ = target.note;
    if (target.gpu) {
      // The GPU's forward gives what the chosen block reads (the expensive part for a large model at
      // a long T); W_t is then recomputed here, token by token in double precision, from those inputs:
      // the views need every W_t on the host anyway (its singular values), and recomputing it costs
      // O(d²) per token instead of streaming d² floats per token back from the device.
      ModelOverrides o;
      if (config_.override_model) {
        o.mini_batch = config_.mini_batch;
        o.base_lr = config_.eta_base;
      }
      const auto model = library_->get(config_.model_id, o);
      if (const std::string why = target.gpu->model_unsupported(model->config()); !why.empty()) {
        device_note_ = "on the CPU: " + why;
        head_ = build_head_inputs<double>(config_, *library_);
      } else {
        const std::vector<unsigned char> bytes = config_bytes(config_);
        TokenBatch b;
        b.batch = 1;
        b.seq_len = static_cast<int>(bytes.size());
        b.tokens.assign(bytes.begin(), bytes.end());
        b.tokens.push_back(0);  // a target for the last input (no loss is read)
        const auto gm = target.gpu->load_model(*model, 1, b.seq_len);
        const auto inputs = gm->layer_inputs(b);
        if (config_.block < 0 || config_.block >= static_cast<int>(inputs.size()))
          throw std::invalid_argument("block " + std::to_string(config_.block) + " does not exist");
        const auto lib = library_->view();
        const ModelInfo* info = lib->find(config_.model_id);
        const std::string label = info ? info->label.substr(0, info->label.find(" (")) : config_.model_id;
        auto heads = model_layer_heads_from<double>(*model, bytes, config_.block, label,
                                                    inputs[static_cast<std::size_t>(config_.block)]);
        if (config_.head < 0 || config_.head >= static_cast<int>(heads.size()))
          throw std::invalid_argument("head " + std::to_string(config_.head) + " does not exist");
        head_ = std::move(heads[static_cast<std::size_t>(config_.head)]);
        device_ = "GPU: " + target.gpu->device().name + " (the model's forward); W_t recomputed on the CPU";
      }
    } else {
      head_ = build_head_inputs<double>(config_, *library_);
    }
    state_ = InnerState<double>::start(head_->w0);
    auto w0 = std::make_shared<EvolutionStep>();
    w0->w1 = head_->w0.W1.cast<float>();
    w0->w2 = head_->w0.W2.cast<float>();
    w0->norm1 = head_->w0.W1.norm();
    w0->norm2 = head_->w0.W2.norm();
    w0->sv1 = singular_values(head_->w0.W1);
    w0->sv2 = singular_values(head_->w0.W2);
    w0->dsv1.assign(w0->sv1.size(), 0.0f);
    w0->dsv2.assign(w0->sv2.size(), 0.0f);
    w0_ = std::move(w0);
    error_.clear();
  } catch (const std::exception& e) {
    error_ = e.what();
    head_.reset();
  }
  if (!config_.toy())
    if (const ModelInfo* info = library_->view()->find(config_.model_id)) {
      model_version_ = info->version;
      model_step_ = info->step;
    }
  seen_library_ = library_->generation();
}

void EvolutionModule::after_iteration(ModuleContext& ctx) {
  if (!configured_ || config_.toy() || library_->generation() == seen_library_) return;
  seen_library_ = library_->generation();
  const ModelInfo* info = library_->view()->find(config_.model_id);
  if (!info || info->version == model_version_) return;
  // A training run saved newer weights of this model: the same head and text again with them.
  ++reloads_;
  ++generation_;
  rebuild();
  ctx.mark_dirty();
}

bool EvolutionModule::has_work(Clock::time_point) const {
  return head_ && static_cast<long>(steps_.size()) < head_->tokens();
}

void EvolutionModule::work(ModuleContext& ctx) {
  const HeadInputs<double>& h = *head_;
  const long t0 = static_cast<long>(steps_.size());
  const long n = std::min(kTokensPerItem, h.tokens() - t0);
  const InnerWeights<double>& W0 = h.w0;
  std::vector<std::shared_ptr<EvolutionStep>> fresh;
  const InnerObserver<double> observer = [&](const InnerStepRecord<double>& r) {
    auto s = std::make_shared<EvolutionStep>();
    const InnerWeights<double>& w = *r.w_after;
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
    s->loss_before = r.loss_before;
    s->loss_after = r.loss_after;
    fresh.push_back(std::move(s));
  };
  const Vec<double> lam = h.lambda.segment(t0, n);
  Mat<double> out;
  inner_forward_primal<double>(h.options, h.params, h.Q.middleRows(t0, n), h.K.middleRows(t0, n),
                               h.V.middleRows(t0, n), lam, *state_, out, observer, &h.w0);
  for (auto& s : fresh) steps_.push_back(std::move(s));
  ctx.mark_dirty();
}

void EvolutionModule::publish(Snapshot& snapshot) const {
  auto v = std::make_shared<EvolutionView>();
  v->config = config_;
  v->generation = generation_;
  v->error = error_;
  if (head_) {
    v->description = head_->description;
    v->bytes = head_->bytes;
    v->d = head_->d();
    v->mini_batch = head_->options.mini_batch;
    v->mlp = head_->options.model == InnerModel::MLP;
    v->w0 = w0_;
    v->steps = steps_;
    v->done = static_cast<long>(steps_.size()) == head_->tokens();
    v->device = device_;
    v->device_note = device_note_;
  }
  v->model_version = model_version_;
  v->model_step = model_step_;
  v->reloads = reloads_;
  snapshot.evolution = std::move(v);
}

}  // namespace tttlab::lab
