// tttlab/seq/deltanet_layer.hpp — DeltaNet and Gated DeltaNet blocks behind the SequenceLayer
// interface (docs/MATH.md §11.8).
//
// The block of flash-linear-attention's DeltaNet / GatedDeltaNet layers as the papers describe it (Yang
// et al. 2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length"; Yang, Kautz
// and Hatamizadeh 2025, "Gated Delta Networks"), with H heads of d = D / H for q, k and v alike. Per
// token x [1, D] (rows, as everywhere here):
//
//   q, k, v = silu(conv_q(x W_q)), silu(conv_k(x W_k)), silu(conv_v(x W_v))   depthwise causal
//                                  convolutions of width K = conv_kernel, no bias (FLA's ShortConvolution)
//   per head h:  q̂ = q_h / sqrt(‖q_h‖² + ε_l2) / √d,   k̂ = k_h / sqrt(‖k_h‖² + ε_l2),   ε_l2 = 1e-6
//   β_t = sigmoid(x W_β)                                                       [H]
//   gated only:  g_t = −exp(A_log) ⊙ softplus(x W_a + dt_bias),  α_t = exp(g_t)   [H] (Mamba-2's decay)
//   o_h = the inner loop of tttlab/fastweight/matrix_rules.hpp (DeltaNet, or GatedDeltaNet with α),
//         from S_0 = 0, read after write: o_t = q̂_t S_t
//   n_h = RMSNorm(o_h) ⊙ w_norm  (per head over its d channels, one weight [d] shared by the heads,
//                                 ε = the model's rms_norm_eps)
//   gated:    y = n ⊙ silu(x W_g);   ungated: y = n
//   out = y W_o
//
// Forms: forward_train uses the chunked (UT) form in chunks of chunk_size tokens; streaming forward
// uses the primal form for one token (decoding) and the chunked form, continuing the carried state, for
// several (prefill, evaluation). They are the same function (agreement to rounding in fp64:
// tests/core/test_deltanet_layer.cpp). backward is manual: the projections, convolutions and norms by
// hand, the inner loop by matrix_rule_backward (docs/MATH.md §11.4).
//
// Parameters (tensor.hpp's [in, out] storage; checkpoint code transposes the projections to nn.Linear's
// [out, in]), with FLA's names:
//   q_proj.weight, k_proj.weight, v_proj.weight [D, D]; b_proj.weight [D, H]
//   q_conv1d.weight, k_conv1d.weight, v_conv1d.weight [D, K] (file: [D, 1, K])
//   gated only: a_proj.weight [D, H], A_log [H], dt_bias [H], g_proj.weight [D, D]
//   o_norm.weight [d];  o_proj.weight [D, D]
// Initialisation (DeltaNetParams::init): projections N(0, σ) with the model's initializer_range σ; the
// convolutions PyTorch's Conv1d default U(±1/√K); A_log and dt_bias Mamba-2's (mamba2_init_A_log,
// mamba2_init_dt_bias: A ∈ U[1, 16], softplus(dt_bias) ∈ exp U[log 0.001, log 0.1]); o_norm.weight 1.
//
// Stream state: the last K−1 inputs of each convolution ([K−1, D] each, before the convolution) and
// S_h [d, d] of every head.
#pragma once

#include <vector>

#include "tttlab/seq/sequence_layer.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {

struct DeltaNetConfig {
  int width = 64;          // D
  int heads = 4;           // H (d = D / H)
  int conv_kernel = 4;     // K
  int chunk_size = 64;     // C of the chunked form
  bool gated = false;      // Gated DeltaNet (decay α, output gate) or DeltaNet
  double norm_eps = 1e-6;  // the output RMSNorm's ε
  double l2_eps = 1e-6;    // ε of the L2 normalisation of q and k (FLA's l2norm default)
  int head_dim() const { return heads > 0 ? width / heads : 0; }
  void validate() const;  // throws std::invalid_argument with a one-line message
};

template <class S>
struct DeltaNetParams {
  Mat<S> q_proj, k_proj, v_proj;  // [D, D]
  Mat<S> b_proj;                  // [D, H]
  Mat<S> q_conv, k_conv, v_conv;  // [D, K]
  Mat<S> a_proj;                  // [D, H]   (gated only; empty otherwise)
  RowVec<S> A_log, dt_bias;       // [H]      (gated only)
  Mat<S> g_proj;                  // [D, D]   (gated only)
  RowVec<S> o_norm;               // [d]
  Mat<S> o_proj;                  // [D, D]
  // The initialisation above; `std` is the projections' standard deviation. Draws from `rng` in a
  // fixed order (q, k, v, b projections, the three convolutions, then for the gated block a_proj,
  // A_log, dt_bias, g_proj, and last o_proj).
  static DeltaNetParams init(const DeltaNetConfig& cfg, double std, Rng& rng);
  static DeltaNetParams zeros(const DeltaNetConfig& cfg);
};

enum class DeltaNetForm { Primal, Chunked };

template <class S>
class DeltaNetLayer final : public SequenceLayer<S> {
 public:
  DeltaNetLayer(DeltaNetConfig cfg, DeltaNetParams<S> params);
  std::string name() const override { return m_cfg.gated ? "gated-deltanet" : "deltanet"; }
  int width() const override { return m_cfg.width; }
  std::unique_ptr<SequenceState> start() const override;
  // Streams: the primal form for one token, the chunked form for several.
  Mat<S> forward(SequenceState& state, ConstMatRef<S> x) const override;
  // Streams with the given form.
  Mat<S> forward(SequenceState& state, ConstMatRef<S> x, DeltaNetForm form) const;
  using SequenceLayer<S>::forward;
  // The chunked form from the empty prefix.
  std::unique_ptr<LayerCache> forward_train(ConstMatRef<S> x, Mat<S>& y) const override;
  void backward(const LayerCache& cache, ConstMatRef<S> dY, SequenceLayer<S>& grads,
                Mat<S>& dx) const override;
  std::unique_ptr<SequenceLayer<S>> zeros_like() const override;
  void for_each_param(const ParamVisitor<S>& f) override;
  // The projections, the convolutions, and per head the chunked form's products: per chunk of C
  // tokens K Kᵀ and Q Kᵀ (2·C·d per token), the UT solve (C² / 2 per token), W and Ũ (2·C·d), the
  // state's read, write and correction (3·d² per token).
  double forward_flops(long T) const override;
  const DeltaNetParams<S>& params() const { return m_params; }
  const DeltaNetConfig& config() const { return m_cfg; }

 private:
  DeltaNetConfig m_cfg;
  DeltaNetParams<S> m_params;
};

}  // namespace tttlab
