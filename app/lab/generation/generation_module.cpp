#include "lab/generation/generation_module.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tttlab/model/checkpoint.hpp"
#include "tttlab/ttt/inner.hpp"

namespace tttlab::lab {

int sample_byte(const RowVec<float>& logits, double temperature, int top_k, Rng& rng,
                std::vector<std::pair<unsigned char, float>>* probs, float* chosen) {
  const int V = static_cast<int>(logits.size());
  std::vector<int> idx(static_cast<std::size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  const int k = top_k > 0 ? std::min(top_k, V) : V;
  // Ties go to the lower byte, so the order (and the sample) is the same everywhere.
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return logits(a) > logits(b) || (logits(a) == logits(b) && a < b); });
  std::vector<double> p(static_cast<std::size_t>(k));
  if (temperature <= 0) {
    p.assign(p.size(), 0.0);
    p[0] = 1.0;
  } else {
    const double m = logits(idx[0]);
    double z = 0;
    for (int i = 0; i < k; ++i) z += p[static_cast<std::size_t>(i)] = std::exp((double(logits(idx[static_cast<std::size_t>(i)])) - m) / temperature);
    for (double& x : p) x /= z;
  }
  if (probs) {
    probs->clear();
    for (int i = 0; i < std::min(k, 10); ++i)
      probs->emplace_back(static_cast<unsigned char>(idx[static_cast<std::size_t>(i)]), static_cast<float>(p[static_cast<std::size_t>(i)]));
  }
  int pick = k - 1;
  if (temperature <= 0) {
    pick = 0;
  } else {
    double u = rng.uniform();
    for (int i = 0; i < k; ++i) {
      u -= p[static_cast<std::size_t>(i)];
      if (u < 0) {
        pick = i;
        break;
      }
    }
  }
  if (chosen) *chosen = static_cast<float>(p[static_cast<std::size_t>(pick)]);
  return idx[static_cast<std::size_t>(pick)];
}

GenerationModule::~GenerationModule() = default;

bool GenerationModule::handle(const Command& command, ModuleContext& ctx) {
  if (const auto* s = std::get_if<GenerateStart>(&command)) {
    start(s->settings);
  } else if (std::holds_alternative<GenerateStop>(command)) {
    if (!m_view->running) return true;
    auto v = std::make_shared<GenerationView>(*m_view);
    v->running = false;
    m_view = std::move(v);
  } else {
    return false;
  }
  ctx.mark_dirty();
  return true;
}

void GenerationModule::start(const GenSettings& s) {
  auto v = std::make_shared<GenerationView>();
  v->settings = s;
  v->generation = ++m_generation;
  m_view = v;
  m_decoder.reset();
  m_model.reset();
  m_stream.reset();
  m_byte_ms.clear();
  m_decoded = 0;
  try {
    if (s.prompt.empty()) throw std::invalid_argument("the prompt is empty: type a few words to start from");
    if (s.prompt.size() > 4096) throw std::invalid_argument("the prompt is longer than 4096 bytes");
    if (s.max_tokens < 1 || s.max_tokens > 4096) throw std::invalid_argument("bytes to generate must be in [1, 4096]");
    if (!(s.temperature >= 0) || s.temperature > 10) throw std::invalid_argument("temperature must be in [0, 10]");
    if (s.top_k < 0 || s.top_k > 256) throw std::invalid_argument("top-k must be in [0, 256]");
    m_model = m_library->get(s.model_id);
    const ModelConfig& c = m_model->config();
    const auto lib = m_library->view();
    const ModelInfo* info = lib->find(s.model_id);
    v->model_label = info ? info->label : s.model_id;
    // Its forward gives non-finite losses (ModelLibrary::put checked it): the logits may still be
    // finite, only absurd, and every sampled byte would look like a prediction.
    if (info && !info->warning.empty()) throw NonFiniteModelError(info->warning);
    v->ttt = c.is_ttt();
    v->blocks = c.num_hidden_layers;
    v->heads = c.num_attention_heads;
    v->d = c.head_dim();
    m_rng = Rng(s.seed);
    const ComputeTarget target = m_compute->target();
    v->device = engine_thread_cpu();
    v->device_note = target.note;
    if (target.gpu) {
      if (const std::string why = target.gpu->decode_unsupported(c); why.empty()) {
        m_decoder = target.gpu->decoder(*m_model);
        v->device = m_decoder->describe();
        v->states_on_gpu = true;
      } else {
        v->device_note = "on the CPU: " + why;
      }
    }
    if (!m_decoder) m_stream = m_model->start();
    std::vector<int> prompt(s.prompt.begin(), s.prompt.end());
    for (int& t : prompt) t &= 0xff;
    m_source = model_source(*lib, s.model_id);
    m_logits = feed(prompt, true, {}, 0.0f);
    v->running = true;
    m_next_tick = Clock::now();
  } catch (const std::exception& e) {
    v->error = e.what();
    v->running = false;
    m_model.reset();
  }
}

RowVec<float> GenerationModule::feed(const std::vector<int>& tokens, bool prompt,
                                     const std::vector<std::pair<unsigned char, float>>& top, float prob) {
  GenerationView& v = *m_view;
  const int slots = v.ttt ? v.blocks * v.heads : 0;
  std::vector<std::shared_ptr<GenToken>> out(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    out[i] = std::make_shared<GenToken>();
    out[i]->byte = static_cast<unsigned char>(tokens[i]);
    out[i]->prompt = prompt;
    out[i]->dw_norm.assign(static_cast<std::size_t>(slots), 0.0f);
    out[i]->dw.resize(static_cast<std::size_t>(slots));
  }
  if (!prompt && !out.empty()) {
    out[0]->top = top;
    out[0]->prob = prob;
  }
  if (m_decoder) {  // the GPU: logits only, the states stay on the device
    std::vector<float> l;
    m_decoder->feed(tokens, l);
    for (auto& g : out) v.tokens.push_back(std::move(g));
    const RowVec<float> row = Eigen::Map<const RowVec<float>>(l.data(), static_cast<Eigen::Index>(l.size()));
    check_finite(row);
    return row;
  }
  Mat<float> logits;
  if (v.ttt) {
    const int H = v.heads;
    logits = m_model->forward(*m_stream, tokens, [&](int block, int head, const InnerStepRecord<float>& r) {
      GenToken& g = *out[static_cast<std::size_t>(r.token)];
      const std::size_t k = static_cast<std::size_t>(block * H + head);
      g.dw[k] = r.w_after->W1 - r.w_before->W1;
      g.dw_norm[k] = g.dw[k].norm();
    });
  } else {
    logits = m_model->forward(*m_stream, tokens);
  }
  for (auto& g : out) v.tokens.push_back(std::move(g));
  check_finite(logits.row(logits.rows() - 1));
  return logits.row(logits.rows() - 1);
}

void GenerationModule::check_finite(const RowVec<float>& logits) const {
  // Sampling from NaN logits would draw the same byte forever and show it as a prediction.
  if (!logits.allFinite()) throw NonFiniteModelError(non_finite_model_message(m_source));
}

bool GenerationModule::has_work(Clock::time_point now) const { return m_view->running && now >= m_next_tick; }

std::optional<Clock::time_point> GenerationModule::next_wakeup() const {
  if (m_view->running) return m_next_tick;
  return std::nullopt;
}

void GenerationModule::work(ModuleContext& ctx) {
  m_view = std::make_shared<GenerationView>(*m_view);  // the published one stays as it was
  const GenSettings& s = m_view->settings;
  try {
    std::vector<std::pair<unsigned char, float>> top;
    float prob = 0.0f;
    const int next = sample_byte(m_logits, s.temperature, s.top_k, m_rng, &top, &prob);
    const auto t0 = Clock::now();
    m_logits = feed({next}, false, top, prob);
    m_byte_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    ++m_decoded;
    m_view->byte_time = summarize_ms(m_byte_ms, 0);
    m_view->bytes_per_second = m_view->byte_time.median_ms > 0 ? 1000.0 / m_view->byte_time.median_ms : 0.0;
    if (m_decoded >= s.max_tokens) m_view->running = false;
  } catch (const std::exception& e) {
    m_view->error = e.what();
    m_view->running = false;
  }
  const double rate = std::clamp(s.tokens_per_second, 1.0, 1e6);
  const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / rate));
  m_next_tick = std::max(m_next_tick + period, Clock::now() - period);
  ctx.mark_dirty();
}

void GenerationModule::publish(Snapshot& snapshot) const { snapshot.generation = m_view; }

}  // namespace tttlab::lab
