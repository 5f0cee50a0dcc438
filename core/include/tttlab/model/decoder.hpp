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

}  // namespace tttlab
