// tttlab/seq/titans_layer.hpp — a Titans block behind the SequenceLayer interface (docs/MATH.md
// §11.9).
//
// Titans' memory (tttlab/fastweight/titans.hpp: flash-linear-attention's linear memory with momentum,
// weight decay and per-token rates, gradients at the mini-batch's start) inside the block the delta
// rules use (tttlab/seq/deltanet_layer.hpp), with H heads of d = D / H. FLA ships the inner loop only,
// no layer, so the block is ours. Per token x [1, D] (rows, as everywhere here):
//
//   q, k, v = silu(conv_q(x W_q)), silu(conv_k(x W_k)), silu(conv_v(x W_v))   depthwise causal
//                                 convolutions of width K = conv_kernel, no bias (as DeltaNet's)
//   per head h:  q̂ = q_h / sqrt(‖q_h‖² + ε_l2),  k̂ = k_h / sqrt(‖k_h‖² + ε_l2),  ε_l2 = 1e-6 (no 1/√d:
//                the memory's output LayerNorm makes the read's scale immaterial)
//   θ_t = sigmoid(x W_θ + b_θ) / d    the inner rate; the 1/d offsets the D·g of FLA's step
//   α_t = sigmoid(x W_α + b_α)        the forgetting (weight decay)
//   η_t = sigmoid(x W_η + b_η)        the momentum                              all [H]
//   o_h = titans_chunked(q̂, k̂, v, w_h, b_h, θ, α, η; M_0 = 0, mini-batch b, ε_ln)
//         with the memory's LayerNorm weight and bias w_h, b_h [d] per head
//   n_h = RMSNorm(o_h) ⊙ w_norm (per head over its d channels, one weight [d] shared by the heads)
//   y = n ⊙ silu(x W_g);  out = y W_o
//
// Forms: forward_train uses the chunked form (one chunk per mini-batch); streaming forward uses the
// primal form for one token (decoding) and the chunked form, continuing the carried state, for
// several (prefill, evaluation). They are the same function (agreement to rounding in fp64:
// tests/core/test_titans_layer.cpp). backward is manual: the projections, convolutions and norms by
// hand, the memory by titans_backward_chunked (titans_backward's gradients, a mini-batch at a time).
//
// Parameters (tensor.hpp's [in, out] storage; checkpoints store the projections as nn.Linear's
// [out, in]):
//   q_proj.weight, k_proj.weight, v_proj.weight [D, D]
//   q_conv1d.weight, k_conv1d.weight, v_conv1d.weight [D, K] (file: [D, 1, K])
//   theta_proj.weight, alpha_proj.weight, eta_proj.weight [D, H]; their .bias [H]
//   ttt_norm.weight, ttt_norm.bias [H, d] (the memory's LayerNorm)
//   o_norm.weight [d];  g_proj.weight [D, D];  o_proj.weight [D, D]
// Initialisation (TitansParams::init): projections N(0, σ) with the model's initializer_range σ; the
// convolutions PyTorch's Conv1d default U(±1/√K); b_θ = logit(0.1), b_α = logit(0.01),
// b_η = logit(0.9) (a small rate, little forgetting, momentum 0.9 at the start); ttt_norm 1 and 0;
// o_norm 1.
//
// Stream state: the last K−1 inputs of each convolution ([K−1, D] each, before the convolution) and
// each head's TitansState (memory, momentum, the mini-batch's start memory, tokens read).
#pragma once

#include <vector>

#include "tttlab/seq/sequence_layer.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {

struct TitansLayerConfig {
  int width = 64;          // D
  int heads = 4;           // H (d = D / H)
  int conv_kernel = 4;     // K
  int mini_batch = 16;     // b: gradients at the mini-batch's start memory (FLA's chunk_size)
  double ln_eps = 1e-6;    // the memory's LayerNorm ε (FLA's default)
  double norm_eps = 1e-6;  // the output RMSNorm's ε
  double l2_eps = 1e-6;    // ε of the L2 normalisation of q and k
  int head_dim() const { return heads > 0 ? width / heads : 0; }
  void validate() const;  // throws std::invalid_argument with a one-line message
};

template <class S>
struct TitansParams {
  Mat<S> q_proj, k_proj, v_proj;               // [D, D]
  Mat<S> q_conv, k_conv, v_conv;               // [D, K]
  Mat<S> theta_proj, alpha_proj, eta_proj;     // [D, H]
  RowVec<S> theta_bias, alpha_bias, eta_bias;  // [H]
  Mat<S> ln_weight, ln_bias;                   // [H, d]
  RowVec<S> o_norm;                            // [d]
  Mat<S> g_proj;                               // [D, D]
  Mat<S> o_proj;                               // [D, D]
  // The initialisation above; `std` is the projections' standard deviation. Draws from `rng` in a
  // fixed order (q, k, v projections, the three convolutions, θ, α, η projections, g_proj, o_proj).
  static TitansParams init(const TitansLayerConfig& cfg, double std, Rng& rng);
  static TitansParams zeros(const TitansLayerConfig& cfg);
};

enum class TitansForm { Primal, Chunked };

template <class S>
class TitansLayer final : public SequenceLayer<S> {
 public:
  TitansLayer(TitansLayerConfig cfg, TitansParams<S> params);
  std::string name() const override { return "titans"; }
  int width() const override { return m_cfg.width; }
  std::unique_ptr<SequenceState> start() const override;
  // Streams: the primal form for one token, the chunked form for several.
  Mat<S> forward(SequenceState& state, ConstMatRef<S> x) const override;
  // Streams with the given form.
  Mat<S> forward(SequenceState& state, ConstMatRef<S> x, TitansForm form) const;
  using SequenceLayer<S>::forward;
  // The chunked form from the empty prefix.
  std::unique_ptr<LayerCache> forward_train(ConstMatRef<S> x, Mat<S>& y) const override;
  void backward(const LayerCache& cache, ConstMatRef<S> dY, SequenceLayer<S>& grads,
                Mat<S>& dx) const override;
  std::unique_ptr<SequenceLayer<S>> zeros_like() const override;
  void for_each_param(const ParamVisitor<S>& f) override;
  // The projections and convolutions, and per head the chunked form's products: per mini-batch of b
  // tokens k M (d² per token), Q Kᵀ and the weighted sum (2·b·d per token), the reads q M_p, q S_p
  // and the end state's three d × d updates (5·d² per token).
  double forward_flops(long T) const override;
  const TitansParams<S>& params() const { return m_params; }
  const TitansLayerConfig& config() const { return m_cfg; }

 private:
  TitansLayerConfig m_cfg;
  TitansParams<S> m_params;
};

}  // namespace tttlab
