// app/lab/engine/head_inputs.hpp — the inputs of one TTT head's inner loop, from a language model or
// from the toy construction (head_config.hpp says which). Everything here is a plain value, built on
// the engine thread.
#pragma once

#include <string>
#include <vector>

#include "lab/engine/head_config.hpp"
#include "tttlab/fastweight/member_trace.hpp"
#include "tttlab/tensor.hpp"
#include "tttlab/ttt/inner.hpp"

namespace tttlab {
template <class S>
class Model;
}

namespace tttlab::lab {

class ModelLibrary;

template <class S>
struct HeadInputs {
  std::vector<unsigned char> bytes;  // the T tokens
  Mat<S> Q, K, V;                    // [T, d] test, training and label views (after convs and RoPE)
  Vec<S> lambda;                     // [T]   λ_t
  InnerHeadParams<S> params;         // γ, β [d], τ [b]
  InnerOptions options;
  InnerWeights<S> w0;                // the initial inner weights W0
  std::string description;           // "tiny-brown · block 2 · head 1" or "toy head · seed 7"
  Vec<S> alpha;                      // [T] the toy's decay gate α_t (a member other than TTT; else empty)

  long tokens() const { return static_cast<long>(bytes.size()); }
  int d() const { return static_cast<int>(Q.cols()); }
};

// The toy head for `c` (which must pass validate()). Deterministic in (c.text, c.repeat, c.seed,
// c.d, c.model, c.w0): the same config gives bit-identical inputs.
template <class S>
HeadInputs<S> make_toy_head(const HeadConfig& c);

// Every head of block `block` of `model` reading `bytes` (from the empty prefix), computed in the
// model's float and converted to S. Throws std::invalid_argument when the block does not exist or is
// not a TTT layer.
template <class S>
std::vector<HeadInputs<S>> model_layer_heads(const Model<float>& model, const std::vector<unsigned char>& bytes,
                                             int block, const std::string& model_label);

// The same heads, from inputs computed elsewhere (the GPU's forward, compute_device.hpp): sequence
// `seq` of `in` (a batch of T = bytes.size() tokens per sequence) for block `block`; the layer's own
// parameters (γ, β, W0) come from `model`.
struct GpuLayerInputs;
template <class S>
std::vector<HeadInputs<S>> model_layer_heads_from(const Model<float>& model, const std::vector<unsigned char>& bytes,
                                                  int block, const std::string& model_label, const GpuLayerInputs& in,
                                                  int seq = 0);

// The head `c` describes, either source. Throws std::invalid_argument / std::runtime_error with a
// one-line message (bad settings, model missing, block or head out of range).
template <class S>
HeadInputs<S> build_head_inputs(const HeadConfig& c, ModelLibrary& library);

// Titans' momentum η_t and LaCT's m_t on the toy head (their layers' initial σ(logit 0.9)).
inline constexpr double kMemberMomentum = 0.9;

// The inputs of the member `c` names (not TTT: c.ttt() is false) from its toy head `h`, normalised and
// gated as head_config.hpp's MEMBER paragraph says.
MemberInputs make_member_inputs(const HeadConfig& c, const HeadInputs<double>& h);

// The Theorem 1 reduction applied to already-built inputs: one mini-batch of all T tokens, W0 = 0, no
// LayerNorm, no residual, no bias, λ ≡ 1 and τ ≡ 1. The inner loop then outputs exactly
// tril(QKᵀ)V for the same Q, K, V (docs/MATH.md §9.1).
template <class S>
void reduce_to_linear_attention(HeadInputs<S>& h);

// The tokens of a config: the bytes of its text, repeated.
std::vector<unsigned char> config_bytes(const HeadConfig& c);

// A printable label for token byte `b` ("a", "␣" for space, "\n", "0xC3" for non-ASCII).
std::string token_label(unsigned char b);

}  // namespace tttlab::lab
