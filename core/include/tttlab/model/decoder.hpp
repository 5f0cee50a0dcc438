// tttlab/model/decoder.hpp — token-by-token decoding of one sequence, on any device.
//
// A TokenDecoder holds the streaming state of ONE sequence (batch 1) through a Model<float>: it is fed
// tokens in order and returns the logits after the last one, never re-running the prefix. Two
// implementations exist: the CPU engine (make_cpu_decoder, here) and the CUDA decoder
// (tttlab/kernels/decode_cuda.hpp, in tttlab_kernels). `tttlab generate` and `tttlab bench` pick one
// through a DecoderFactory, so app code never names a device-specific type. Sampling stays with the
// caller, on the host, from the float logits: greedy decoding picks the same byte on every device
// whenever the devices' argmax agree.
//
// OWNERSHIP: a decoder keeps a reference to (CPU) or a copy of (CUDA) the model's parameters; the
// Model must outlive every decoder made from it either way (the CUDA decoder reads the model's
// configuration only at construction, but callers should not rely on that).
// THREADING: one decoder is used from one thread at a time; distinct decoders of one Model may run
// on distinct threads (Model::forward is const).
//
// This header includes neither Eigen nor CUDA headers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tttlab/device.hpp"

namespace tttlab {

template <class S>
class Model;

class TokenDecoder {
 public:
  virtual ~TokenDecoder();
  // Where it computes.
  virtual DeviceKind kind() const = 0;
  // One line for people, e.g. "CPU (Eigen 3.4, 2 threads)" or "CUDA: NVIDIA H100 80GB HBM3, ...".
  virtual std::string describe() const = 0;
  // Feeds tokens (at least one, each in [0, vocab_size); std::invalid_argument otherwise) in order,
  // continuing the stream, and writes the logits [vocab_size] after the LAST of them into `logits`
  // (resized). The prefix is never run again.
  virtual void feed(std::span<const int> tokens, std::vector<float>& logits) = 0;
  // Tokens fed so far.
  virtual long position() const = 0;
};

// The CPU engine: Model::start() once, then Model::forward(stream, tokens) per feed() (one token: the
// primal step; several: the dual form, as Model::forward does). Keeps a reference to `model`, which
// must outlive the decoder.
std::unique_ptr<TokenDecoder> make_cpu_decoder(const Model<float>& model);

// Makes a decoder for a model (the model outlives it). May throw std::invalid_argument for a model
// the device does not support.
using DecoderFactory = std::function<std::unique_ptr<TokenDecoder>(const Model<float>&)>;

// ---- Sampling: `tttlab generate` and the Python module (python/) draw bytes by this one rule ----
class Rng;

// Draws a token from `logits` at `temperature` (0: greedy, the first of equal maxima) among the
// `top_k` most likely (0: all): softmax((logit − max) / temperature) in double, one rng.uniform().
int sample_token(std::span<const float> logits, double temperature, int top_k, Rng& rng);

struct GenerateOptions {
  int tokens = 200;          // tokens to generate, in [0, 2^24]
  double temperature = 0.8;  // finite, in [0, 100]; 0: greedy
  int top_k = 0;             // in [0, 256]; 0: all
  std::uint64_t seed = 0;    // the sampling Rng's seed
  // Names the model in the refusal of non-finite logits (non_finite_model_message).
  std::string source;
  // Throws std::invalid_argument naming the field ("temperature must be ...") when one is out of range.
  void validate() const;
};

// What generate_tokens reports as it goes (each optional): `prefilled` once the prompt is fed (and
// its logits found finite), `token` for each sampled token before it is fed, `step_seconds` with the
// wall time of each generated token's feed.
struct GenerateHooks {
  std::function<void()> prefilled;
  std::function<void(int)> token;
  std::function<void(double)> step_seconds;
};

// Feeds `prompt` (at least one token) to `decoder`, then samples options.tokens tokens, each fed
// back, and returns them (the prompt not included). Throws NonFiniteModelError
// (tttlab/model/checkpoint.hpp) when the logits after a feed are not finite: sampling from them would
// give arbitrary bytes. Only the last position's logits come back from a feed; a non-finite weight
// makes every later position non-finite too.
std::vector<int> generate_tokens(TokenDecoder& decoder, std::span<const int> prompt, const GenerateOptions& options,
                                 const GenerateHooks& hooks = {});

}  // namespace tttlab
