// The CPU token decoder (see tttlab/model/decoder.hpp).
#include "tttlab/model/decoder.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/model.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {

TokenDecoder::~TokenDecoder() = default;

namespace {

class CpuDecoder final : public TokenDecoder {
 public:
  explicit CpuDecoder(const Model<float>& model) : m_model(model), m_stream(model.start()) {}

  DeviceKind kind() const override { return DeviceKind::CPU; }
  std::string describe() const override { return cpu_device().describe(); }

  void feed(std::span<const int> tokens, std::vector<float>& logits) override {
    if (tokens.empty()) throw std::invalid_argument("decoder: feed() needs at least one token");
    const int V = m_model.config().vocab_size;
    for (int t : tokens)
      if (t < 0 || t >= V)
        throw std::invalid_argument("decoder: token " + std::to_string(t) + " is outside 0.." +
                                    std::to_string(V - 1));
    const Mat<float> out = m_model.forward(*m_stream, tokens);
    const Eigen::Index last = out.rows() - 1;
    logits.resize(static_cast<std::size_t>(out.cols()));
    for (Eigen::Index v = 0; v < out.cols(); ++v) logits[static_cast<std::size_t>(v)] = out(last, v);
  }

  long position() const override { return m_stream->tokens; }

 private:
  const Model<float>& m_model;
  std::unique_ptr<ModelStream> m_stream;
};

}  // namespace

std::unique_ptr<TokenDecoder> make_cpu_decoder(const Model<float>& model) {
  return std::make_unique<CpuDecoder>(model);
}

int sample_token(std::span<const float> logits, double temperature, int top_k, Rng& rng) {
  const int V = static_cast<int>(logits.size());
  if (temperature <= 0) return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<int> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  int k = top_k > 0 ? std::min(top_k, V) : V;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  const double m = logits[idx[0]];
  std::vector<double> p(k);
  double z = 0;
  for (int i = 0; i < k; ++i) z += p[i] = std::exp((double(logits[idx[i]]) - m) / temperature);
  double u = rng.uniform() * z;
  for (int i = 0; i < k; ++i) {
    u -= p[i];
    if (u <= 0) return idx[i];
  }
  return idx[k - 1];
}

void GenerateOptions::validate() const {
  if (tokens < 0 || tokens > (1 << 24))
    throw std::invalid_argument("tokens must be in [0, 16777216], got " + std::to_string(tokens));
  if (!std::isfinite(temperature) || temperature < 0 || temperature > 100)
    throw std::invalid_argument("temperature must be a finite number in [0, 100], got " + std::to_string(temperature));
  if (top_k < 0 || top_k > 256) throw std::invalid_argument("top_k must be in [0, 256], got " + std::to_string(top_k));
}

std::vector<int> generate_tokens(TokenDecoder& decoder, std::span<const int> prompt, const GenerateOptions& options,
                                 const GenerateHooks& hooks) {
  options.validate();
  if (prompt.empty()) throw std::invalid_argument("the prompt must not be empty");
  const auto refuse_non_finite = [&](const std::vector<float>& row) {
    for (float x : row)
      if (!std::isfinite(x)) throw NonFiniteModelError(non_finite_model_message(options.source));
  };
  Rng rng(options.seed);
  std::vector<float> last;
  decoder.feed(prompt, last);
  refuse_non_finite(last);
  if (hooks.prefilled) hooks.prefilled();
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(options.tokens));
  for (int i = 0; i < options.tokens; ++i) {
    const int next = sample_token(last, options.temperature, options.top_k, rng);
    out.push_back(next);
    if (hooks.token) hooks.token(next);
    const int tok[1] = {next};
    const auto s0 = std::chrono::steady_clock::now();
    decoder.feed(tok, last);
    if (hooks.step_seconds)
      hooks.step_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count());
    refuse_non_finite(last);
  }
  return out;
}

}  // namespace tttlab
