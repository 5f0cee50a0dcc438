// tttlab/seq/lact_layer.hpp — a LaCT block behind the SequenceLayer interface (docs/MATH.md §11.10,
// "LaCT as a layer").
//
// LaCT's inner loop (tttlab/fastweight/lact.hpp: SwiGLU fast weights, the dot-product loss, large
// chunks read then learnt from, momentum, optional Muon, row renormalisation) inside the block of its
// authors' LaCTSWIGLULayer (a1600012888/LaCT, lact_llm/lact_model/layer_lact_swiglu.py at commit
// 1f84d479, the commit of tests/reference's LaCT fixtures), written from its equations and scaled
// down. Per token x [1, D] (rows, as everywhere here), with H_a attention heads of d_a = D / H_a and
// H_f fast-weight heads of d_f = D / H_f, d_h = inter_multi · d_f:
//
//   [q, k, v] = x W_qkv                           one projection [D, 3D], no bias (qkv_bias = False)
//   attention: o_a = SWA(RoPE(q), RoPE(k), v)     H_a heads, window W (= C), global positions,
//                                                 softmax scale 1/√d_a (tttlab/nn/attention.hpp)
//   fast:  q̃ = q ⊙ s_q + b_q,  k̃ = k ⊙ s_k + b_k  (qk_scale [D, 2] = [s_q s_k], qk_offset [D, 2])
//          per fast head h:  q_h = L2(silu(q̃_h)),  k_h = L2(silu(k̃_h)),  v_h = silu(v_h),
//          L2(u) = u / (‖u‖ + 1e-5) (LaCT's l2_norm), then q, k rotated by the attention's RoPE
//          (H_a heads of d_a, the same positions: the authors' ttt_nope = False)
//   rates: η = softplus(x W_lr + b_lr + softplus⁻¹(0.001))  [3·H_f]; head h takes columns 3h, 3h+1,
//          3h+2 as the rates of W0, W1, W2 (the authors' "(n_h lr_dim)" split, lr_dim = 3)
//   momentum: m = sigmoid(x W_m + b_m)  [H_f]   (use_momentum)
//   o_f,h = lact_forward(q_h, k_h, v_h, η, m; W0_h, W1_h, W2_h, C, Muon)   learnable initial fast
//           weights per head (w0, w2 [d_h, d_f], w1 [d_f, d_h])
//   n_h = RMSNorm(o_f,h) ⊙ w_norm   (per head over its d_f channels, one weight [d_f], ε = 1e-5:
//                                    fla's RMSNorm default)
//   y_f,h = n_h · silu(x W_s + b_s)_h   (learnable_ttt_scale: one scale per head and token)
//   out = (o_a + y_f) W_o
//
// Matched to the authors (their LaCTSWIGLUConfig defaults and the 760M config): one qkv projection
// without bias; no q/k RMSNorm before the attention (attn_qk_norm = False); silu on q, k and v and
// LaCT's L2 norm per fast head (qkv_silu = True, no_v_silu = False); the per-channel scale and offset
// of q and k for the fast weights only; RoPE on the attention and on the fast q and k; softplus rates
// around a base rate 1e-3 ("mamba" parameterisation) in fp64/fp32 as S; sigmoid momentum; full-rank
// learnable initial fast weights (w0_w2_low_rank = −1, the class default), inter_multi = 1; the output
// RMSNorm with its weight; the learnable per-head output scale; the sum of the two branches before
// o_proj; post-norm TTT (ttt_prenorm = False). Initialisation (LactParams::init, their
// _init_weights): every nn.Linear weight N(0, σ) with the model's initializer_range σ and zero biases
// (so the momentum starts at 0.5 and the output scale silu(≈ 0) near 0), qk_scale 1, qk_offset 0,
// w0 and w2 N(0, 1/√d_f), w1 N(0, 1/√d_h), ttt_norm.weight 1.
//
// Where this block differs, and why:
//   - Sizes: the chunk C (config; 64 by default where the authors use 2048) so that the lab's 256-token
//     windows hold several chunks; the attention window W = C, as the authors pair them.
//   - RoPE: the lab's interleaved pairing (tttlab/nn/rope.hpp) where fla's RotaryEmbedding rotates
//     halves. The two are the same rotation up to a fixed permutation of each head's channels, which
//     the learned projections absorb; trained weights do not carry over between the two.
//   - No low-rank initial weights, no fused kernels, no fp32_states (the state is in S throughout),
//     no padding masks or variable-length batches (the lab's batches are dense).
//   - Muon (config, off by default as theirs) runs Newton–Schulz in S where the authors cast to bf16.
//
// Forms: forward_train runs lact_forward over the sequence and the band attention over it; the
// streaming forward runs lact_stream (one token when decoding, any number in prefill) with a KV cache
// of the last W − 1 tokens. They are the same function (agreement to rounding in fp64:
// tests/core/test_lact_layer.cpp). backward is manual: the projections, norms, attention and RoPE by
// hand, the fast weights by lact_backward (every input, the rates, momentum and initial weights).
//
// Parameters (tensor.hpp's [in, out] storage; checkpoints store the projections as nn.Linear's
// [out, in] and the initial fast weights stacked over the heads, the authors' module names):
//   qkv.weight [D, 3D];  qk_scale, qk_offset [D, 2]
//   w0[h], w2[h] [d_h, d_f];  w1[h] [d_f, d_h]     (file: w0, w2 [H_f, d_h, d_f], w1 [H_f, d_f, d_h])
//   lr_proj.weight [D, 3·H_f], lr_proj.bias [3·H_f]
//   momentum_proj.0.weight [D, H_f], momentum_proj.0.bias [H_f]   (use_momentum)
//   ttt_scale_proj.weight [D, H_f], ttt_scale_proj.bias [H_f]
//   ttt_norm.weight [d_f];  o_proj.weight [D, D]
//
// Stream state: per fast head a LactStreamState (weights, momentum, the current chunk's keys, values
// and rates), the attention's KV cache of the last W − 1 tokens (after RoPE), the tokens read.
#pragma once

#include "tttlab/seq/sequence_layer.hpp"
#include "tttlab/util/rng.hpp"

namespace tttlab {

struct LactLayerConfig {
  int width = 64;            // D
  int attn_heads = 4;        // H_a (d_a = D / H_a, even: RoPE)
  int lact_heads = 2;        // H_f (d_f = D / H_f)
  int inter_multi = 1;       // d_h = inter_multi · d_f
  int chunk_size = 64;       // C
  int window = 64;           // W (the model passes C)
  bool use_momentum = true;  // the authors' default
  bool use_muon = false;     // the authors' default
  double rope_theta = 1e4;
  double base_lr = 1e-3;   // the rates' softplus offset softplus⁻¹(base_lr)
  double norm_eps = 1e-5;  // ttt_norm's ε
  int attn_head_dim() const { return attn_heads > 0 ? width / attn_heads : 0; }
  int fw_head_dim() const { return lact_heads > 0 ? width / lact_heads : 0; }
  int fw_hidden() const { return inter_multi * fw_head_dim(); }
  void validate() const;  // throws std::invalid_argument with a one-line message
};

template <class S>
struct LactParams {
  Mat<S> qkv;                  // [D, 3D]
  Mat<S> qk_scale, qk_offset;  // [D, 2]
  Mat<S> w0, w1, w2;           // heads stacked in rows: [H_f·d_h, d_f], [H_f·d_f, d_h], like w0
  Mat<S> lr_proj;              // [D, 3·H_f]
  RowVec<S> lr_bias;           // [3·H_f]
  Mat<S> momentum_proj;        // [D, H_f] (use_momentum; empty otherwise)
  RowVec<S> momentum_bias;     // [H_f]
  Mat<S> scale_proj;           // [D, H_f]
  RowVec<S> scale_bias;        // [H_f]
  RowVec<S> ttt_norm;          // [d_f]
  Mat<S> o_proj;               // [D, D]
  // The initialisation above; `std` is the projections' standard deviation. Draws from `rng` in a
  // fixed order: qkv, lr_proj, momentum_proj, ttt_scale_proj, w0, w2, w1, o_proj.
  static LactParams init(const LactLayerConfig& cfg, double std, Rng& rng);
  static LactParams zeros(const LactLayerConfig& cfg);
};

template <class S>
class LactLayer final : public SequenceLayer<S> {
 public:
  LactLayer(LactLayerConfig cfg, LactParams<S> params);
  std::string name() const override { return "lact"; }
  int width() const override { return m_cfg.width; }
  std::unique_ptr<SequenceState> start() const override;
  Mat<S> forward(SequenceState& state, ConstMatRef<S> x) const override;
  using SequenceLayer<S>::forward;
  std::unique_ptr<LayerCache> forward_train(ConstMatRef<S> x, Mat<S>& y) const override;
  void backward(const LayerCache& cache, ConstMatRef<S> dY, SequenceLayer<S>& grads,
                Mat<S>& dx) const override;
  std::unique_ptr<SequenceLayer<S>> zeros_like() const override;
  void for_each_param(const ParamVisitor<S>& f) override;
  // The projections (qkv, rates, momentum, scale, o_proj), the band attention (Q Kᵀ and P V over at
  // most W keys per token), and per fast head the chunk's read f_W(q) (3 products of d_f · d_h per
  // token) and update: f_W(k) and the three weight gradients (6 more per token).
  double forward_flops(long T) const override;
  const LactParams<S>& params() const { return m_params; }
  const LactLayerConfig& config() const { return m_cfg; }

 private:
  LactLayerConfig m_cfg;
  LactParams<S> m_params;
};

}  // namespace tttlab
