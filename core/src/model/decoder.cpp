// The CPU token decoder (see tttlab/model/decoder.hpp).
#include "tttlab/model/decoder.hpp"

#include <stdexcept>
#include <string>

#include "tttlab/model/model.hpp"

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

}  // namespace tttlab
