// tttlab/seq/attention_layers.hpp — the baselines of the TTT paper behind the SequenceLayer interface.
//
// LinearAttentionLayer: y = o_proj( concat_h tril(Q_h K_hᵀ) V_h ), Q = x·Wq, K = x·Wk, V = x·Wv, no
//   normalisation, no RoPE. It is exactly TTTLayer with TTTLayerConfig::linear_attention_equivalent and
//   W0 = 0 (Theorem 1 of the paper, docs/MATH.md §9.1): tests check the two agree to rounding.
//   Stream state: the running sums S_h = Σ_s k_sᵀ v_s ([d, d] per head).
// SoftmaxAttentionLayer: the Transformer baseline, y = o_proj( concat_h softmax_causal(Q_h K_hᵀ/√d) V_h )
//   with RoPE (interleaved pairs, GLOBAL positions t) on Q and K. Stream state: the KV cache.
//
// Parameters (names as in ttt-lm-pytorch's attention modules): q_proj, k_proj, v_proj, o_proj, each
// [D, D] stored [in, out] (tensor.hpp), initialised N(0, 0.02).
#pragma once

#include <functional>

#include "tttlab/seq/sequence_layer.hpp"

namespace tttlab {

struct AttentionConfig {
  int width = 64;            // D
  int heads = 4;             // H, head dim d = D / H
  bool rope = true;          // softmax attention only: RoPE on Q, K with global positions
  double rope_theta = 1e4;
  void validate() const;     // throws std::invalid_argument with a one-line message
};

template <class S>
struct AttentionParams {
  Mat<S> wq, wk, wv, wo;  // [D, D]
  static AttentionParams init(const AttentionConfig& cfg, const std::function<double()>& normal);
  static AttentionParams zeros(const AttentionConfig& cfg);
};

template <class S>
class LinearAttentionLayer final : public SequenceLayer<S> {
 public:
  LinearAttentionLayer(AttentionConfig cfg, AttentionParams<S> params);
  std::string name() const override { return "linear-attention"; }
  int width() const override { return m_cfg.width; }
  std::unique_ptr<SequenceState> start() const override;
  Mat<S> forward(SequenceState& state, ConstMatRef<S> x) const override;
  using SequenceLayer<S>::forward;
  std::unique_ptr<LayerCache> forward_train(ConstMatRef<S> x, Mat<S>& y) const override;
  void backward(const LayerCache& cache, ConstMatRef<S> dY, SequenceLayer<S>& grads,
                Mat<S>& dx) const override;
  std::unique_ptr<SequenceLayer<S>> zeros_like() const override;
  void for_each_param(const ParamVisitor<S>& f) override;
  double forward_flops(long T) const override;  // 4 projections + per head 2·T·d (QKᵀ, AV: causal half)
  const AttentionParams<S>& params() const { return m_params; }
  const AttentionConfig& config() const { return m_cfg; }

 private:
  AttentionConfig m_cfg;
  AttentionParams<S> m_params;
};

template <class S>
class SoftmaxAttentionLayer final : public SequenceLayer<S> {
 public:
  SoftmaxAttentionLayer(AttentionConfig cfg, AttentionParams<S> params);
  std::string name() const override { return "softmax-attention"; }
  int width() const override { return m_cfg.width; }
  std::unique_ptr<SequenceState> start() const override;
  Mat<S> forward(SequenceState& state, ConstMatRef<S> x) const override;
  using SequenceLayer<S>::forward;
  std::unique_ptr<LayerCache> forward_train(ConstMatRef<S> x, Mat<S>& y) const override;
  void backward(const LayerCache& cache, ConstMatRef<S> dY, SequenceLayer<S>& grads,
                Mat<S>& dx) const override;
  std::unique_ptr<SequenceLayer<S>> zeros_like() const override;
  void for_each_param(const ParamVisitor<S>& f) override;
  double forward_flops(long T) const override;
  const AttentionParams<S>& params() const { return m_params; }
  const AttentionConfig& config() const { return m_cfg; }

  // For probes (the app's Theorem 2 view, docs/MATH.md §9.2): the layer's inner values for x [T, D]
  // read from the empty prefix (global positions 0 … T−1), computed by the same code as
  // forward_train. Q and K are after RoPE, Z is the attention output before o_proj; each is [T, D]
  // with head h in columns h·d … (h+1)·d − 1. Returned by value; the layer is not changed.
  struct Trace {
    Mat<S> Q, K, V, Z;
  };
  Trace trace(ConstMatRef<S> x) const;

 private:
  AttentionConfig m_cfg;
  AttentionParams<S> m_params;
};

}  // namespace tttlab
