#include "lab/nonparametric/nonparametric_module.hpp"

#include <algorithm>
#include <stdexcept>

#include "lab/engine/data_source.hpp"
#include "lab/engine/resources.hpp"
#include "tttlab/analysis/nonparametric.hpp"

namespace tttlab::lab {

std::string NonparametricConfig::default_text() { return sample_texts().front().text; }

void NonparametricModule::validate(const NonparametricConfig& c) {
  if (c.model_id.empty()) throw std::invalid_argument("no model chosen");
  if (c.block < 0 || c.head < 0) throw std::invalid_argument("block and head must be ≥ 0");
  if (c.data.empty()) {
    if (c.text.empty()) throw std::invalid_argument("the input text is empty: type or pick a text");
    if (static_cast<long>(c.text.size()) > kMaxTokens)
      throw std::invalid_argument("the text has " + std::to_string(c.text.size()) + " bytes; this view takes at most " +
                                  std::to_string(kMaxTokens));
  } else {
    if (c.tokens < 2 || c.tokens > kMaxTokens)
      throw std::invalid_argument("the number of tokens must be in [2, " + std::to_string(kMaxTokens) + "]");
    if (c.offset < 0) throw std::invalid_argument("the offset must be ≥ 0");
  }
}

namespace {

constexpr int kMaxBins = 512;

}  // namespace

// The job as a small state machine; each call of step() is one work item.
struct NonparametricModule::Job {
  Job(const NonparametricConfig& cfg, ModelLibrary& library) : cfg(cfg), library(library) {}

  double progress() const { return heads.empty() ? 0.0 : (1.0 + static_cast<double>(next_head)) / (heads.size() + 2.0); }

  // Returns true when finished (the results are then in `out`).
  bool step(NonparametricView& out) {
    if (!built) {
      build();
      built = true;
      return false;
    }
    if (next_head < heads.size()) {
      estimate(next_head++);
      return false;
    }
    finish(out);
    return true;
  }

  void build() {
    const auto model = library.get(cfg.model_id);
    const ModelConfig& mc = model->config();
    if (mc.seq_layer != SeqLayerKind::SoftmaxAttention)
      throw std::invalid_argument("this model's layers are " + to_string(mc.seq_layer) +
                                  ", not softmax attention: choose a softmax-attention model");
    if (cfg.block >= mc.num_hidden_layers)
      throw std::invalid_argument("block " + std::to_string(cfg.block) + " does not exist: the model has " +
                                  std::to_string(mc.num_hidden_layers) + " blocks (0 … " +
                                  std::to_string(mc.num_hidden_layers - 1) + ")");
    if (cfg.head >= mc.num_attention_heads)
      throw std::invalid_argument("head " + std::to_string(cfg.head) + " does not exist: the layer has " +
                                  std::to_string(mc.num_attention_heads) + " heads (0 … " +
                                  std::to_string(mc.num_attention_heads - 1) + ")");
    const auto* layer = dynamic_cast<const SoftmaxAttentionLayer<float>*>(&model->mixer(cfg.block));
    if (!layer) throw std::logic_error("a softmax-attention model without a softmax-attention layer");
    blocks = mc.num_hidden_layers;

    if (cfg.data.empty()) {
      bytes.assign(cfg.text.begin(), cfg.text.end());
      text_description = "typed text";
    } else {
      const auto data = load_data(cfg.data, cfg.tokens);
      const long n = static_cast<long>(data->val.size());
      if (cfg.offset + cfg.tokens > n)
        throw std::invalid_argument("the validation part of " + data->description + " has " + std::to_string(n) +
                                    " bytes: the window " + std::to_string(cfg.offset) + " + " +
                                    std::to_string(cfg.tokens) + " does not fit");
      bytes.assign(data->val.begin() + cfg.offset, data->val.begin() + cfg.offset + cfg.tokens);
      text_description = data->description + ", validation bytes " + std::to_string(cfg.offset) + " … " +
                         std::to_string(cfg.offset + cfg.tokens - 1);
    }
    const std::vector<int> tokens(bytes.begin(), bytes.end());
    const Mat<float> x = model->mixer_input(tokens, cfg.block);
    if (cfg.precision == Precision::Float) {
      heads = softmax_attention_heads<float>(*layer, x);
    } else {
      // The same layer in double: the model's float weights and block input, widened exactly.
      const AttentionParams<float>& p = layer->params();
      const SoftmaxAttentionLayer<double> wide(layer->config(),
                                               AttentionParams<double>{p.wq.cast<double>(), p.wk.cast<double>(),
                                                                       p.wv.cast<double>(), p.wo.cast<double>()});
      const Mat<double> x64 = x.cast<double>();
      heads = softmax_attention_heads<double>(wide, x64);
    }
    const auto view = library.view();
    const ModelInfo* info = view->find(cfg.model_id);
    const std::string label = info ? info->label.substr(0, info->label.find(" (")) : cfg.model_id;
    description = label + " · block " + std::to_string(cfg.block) + " of " + std::to_string(blocks);
    summaries.resize(heads.size());
  }

  void estimate(std::size_t h) {
    const AttentionHeadValues& in = heads[h];
    NadarayaWatson nw = nadaraya_watson(in.Q, in.K, in.V, in.kernel_scale);
    const NonparametricComparison c = compare_with_attention(nw, in.Z);
    NonparametricHeadSummary& s = summaries[h];
    s.head = static_cast<int>(h);
    s.max_abs_diff = c.max_abs_diff;
    s.max_abs_output = c.max_abs_output;
    s.effective_pairs = c.effective_pairs.empty() ? 0.0 : c.effective_pairs.back();
    s.max_weight = c.max_weight.empty() ? 0.0 : c.max_weight.back();
    if (static_cast<int>(h) != cfg.head) return;
    auto d = std::make_shared<NonparametricDetail>();
    d->weights = std::move(nw.weights);
    d->nw_output = std::move(nw.output);
    d->attention_output = in.Z;
    d->token_diff = c.token_diff;
    d->effective_pairs = c.effective_pairs;
    d->max_weight = c.max_weight;
    d->entropy = c.entropy;
    d->row_sum_err = c.row_sum_err;
    detail = std::move(d);
  }

  void finish(NonparametricView& v) {
    const long T = static_cast<long>(bytes.size());
    const int d = heads.empty() ? 0 : static_cast<int>(heads[0].Q.cols());
    detail->weights_map =
        plot::pool_max_abs(detail->weights.data(), T, T, detail->weights.cols(), kMaxBins, kMaxBins);
    v.results_generation = v.generation;
    v.description = description;
    v.text_description = text_description;
    v.bytes = bytes;
    v.T = T;
    v.d = d;
    v.blocks = blocks;
    v.heads = static_cast<int>(heads.size());
    v.shown_block = cfg.block;
    v.shown_head = cfg.head;
    v.head_summaries = summaries;
    v.max_abs_diff = v.max_rel_diff = 0.0;
    for (const auto& s : summaries) {
      v.max_abs_diff = std::max(v.max_abs_diff, s.max_abs_diff);
      v.max_rel_diff = std::max(v.max_rel_diff, s.max_abs_output > 0 ? s.max_abs_diff / s.max_abs_output : s.max_abs_diff);
    }
    v.detail = std::move(detail);
    v.state_numbers_nw = nonparametric_state_numbers(T, d);
    v.state_numbers_ttt = ttt_linear_state_numbers(d);
  }

  NonparametricConfig cfg;
  ModelLibrary& library;
  bool built = false;
  std::size_t next_head = 0;
  int blocks = 0;
  std::string description, text_description;
  std::vector<unsigned char> bytes;
  std::vector<AttentionHeadValues> heads;
  std::vector<NonparametricHeadSummary> summaries;
  std::shared_ptr<NonparametricDetail> detail;
};

NonparametricModule::NonparametricModule(std::shared_ptr<ModelLibrary> library)
    : m_library(library ? std::move(library) : std::make_shared<ModelLibrary>()) {}
NonparametricModule::~NonparametricModule() = default;

bool NonparametricModule::handle(const Command& command, ModuleContext& ctx) {
  // The previous results stay on show (marked stale by results_generation) while the new job runs.
  return start_request<NonparametricRun>(
      command, ctx, true, [&](const NonparametricRun& run, NonparametricView& v) {
        m_job.reset();
        v.config = run.config;
        validate(run.config);
        m_job = std::make_unique<Job>(run.config, *m_library);
        return "Theorem 2: block " + std::to_string(run.config.block);
      });
}

void NonparametricModule::work(ModuleContext& ctx) {
  auto v = next_view();
  m_slot.step(ctx, *v, [&] {
    const bool finished = m_job->step(*v);
    m_slot.set_progress(ctx, *v, finished ? 1.0 : m_job->progress());
    return finished;
  });
  if (!m_slot.running()) m_job.reset();
  show(std::move(v), ctx);
}

}  // namespace tttlab::lab
