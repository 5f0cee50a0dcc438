// tttlab/ttt/layer.hpp — a full TTT layer: TTT-Linear or TTT-MLP, Transformer or Mamba backbone form.
//
// Forward of one sequence x [T, D] (the layer input, already RMS-normed by the block), following the
// official ttt-lm-pytorch `TTTLinear`/`TTTMLP` modules (docs/MATH.md §2–§5, §8.1):
//
//   1. Projections.  Transformer form (share_qk = false): XQ = x·Wq, XK = x·Wk.
//                    Mamba form (share_qk = true): u = x·Wq, XQ = conv_q(u), XK = conv_k(u), two
//                    depthwise causal convs of width conv_kernel with bias.       XV = x·Wv always.
//   2. RoPE on XQ and XK per head, interleaved pairs, position = t mod b (restarts every mini-batch).
//   3. η: λ_{h,t} = η_base·σ(x_t·θ_h + β_h)/d, τ_i = max(1/i + δ_i, 0)  (tttlab/ttt/eta.hpp).
//   4. The inner loop per head (tttlab/ttt/inner.hpp): O_h = Q_h + LN(Z̄_h).
//   5. Output path: y = o_proj( gate( post_norm( concat_h O_h ) ) ), gate(z) = gelu(x·Wg) ⊙ z when
//      use_gate (Mamba backbone), identity otherwise; post_norm is a full-width LayerNorm (ε post_norm_eps).
//
// Parameters (TTTLayerParams) carry the official names in comments; all linear maps are [in, out]
// (tensor.hpp). The layer is a stream (sequence_layer.hpp): its state holds the conv history, the
// token count, and one InnerState per head, so a dual-form prefill can be continued one token at a
// time by the primal form from wherever it stopped (mid-mini-batch included).
#pragma once

#include <functional>
#include <vector>

#include "tttlab/nn/gelu_gate.hpp"
#include "tttlab/seq/sequence_layer.hpp"
#include "tttlab/ttt/eta.hpp"
#include "tttlab/ttt/inner.hpp"

namespace tttlab {

enum class TTTForm { Dual, Primal };

struct TTTLayerConfig {
  int width = 64;            // D (hidden_size)
  int heads = 4;             // H (num_attention_heads); head dim d = D / H
  InnerOptions inner;        // inner model, mini-batch b, LN / residual / bias toggles
  EtaOptions eta;            // η_base (ttt_base_lr), gate, token-index scaling
  bool share_qk = false;     // Mamba form: shared Q/K projection + conv_q, conv_k
  int conv_kernel = 4;       // width of conv_q / conv_k (conv_kernel)
  bool use_gate = false;     // Mamba form: gelu(x·Wg) ⊙ · before o_proj (use_gate)
  bool rope = true;          // RoPE on Q, K with positions t mod b
  double rope_theta = 1e4;   // rope_theta
  bool post_norm = true;     // full-width LayerNorm on the concatenated heads
  double post_norm_eps = 1e-6;  // its ε (ModelConfig::ttt_ln_eps, like inner.ln_eps)
  int checkpoint_group = 0;  // training: mini-batches per remat group of the inner loop (0: keep all)

  int head_dim() const { return heads > 0 ? width / heads : 0; }
  // Throws std::invalid_argument with a one-line message naming the bad field.
  void validate() const;

  // The Theorem 1 configuration (docs/MATH.md §9.1): one mini-batch of T tokens, no LN, no residual, no
  // bias, fixed η with τ ≡ 1 and λ ≡ 1, no RoPE, no post-norm, no gate. With W0 = 0 the layer computes
  // plain causal linear attention: o_proj(concat_h tril(Q_h K_hᵀ) V_h).
  static TTTLayerConfig linear_attention_equivalent(int width, int heads, int seq_len);
};

template <class S>
struct TTTLayerParams {
  Mat<S> wq, wk, wv, wo, wg;           // [D, D]: q_proj, k_proj (unused if share_qk), v_proj, o_proj, g_proj
  Mat<S> conv_q_w, conv_k_w;           // [D, K]: conv_q.weight, conv_k.weight ([D, 1, K] in PyTorch)
  RowVec<S> conv_q_b, conv_k_b;        // [D]
  Mat<S> lr_w;                         // θ_lr [H, D]: learnable_ttt_lr_weight ([H, 1, D])
  RowVec<S> lr_b;                      // β_lr [H]: learnable_ttt_lr_bias ([H, 1])
  RowVec<S> token_idx_offset;          // δ [b]: learnable_token_idx
  Mat<S> ttt_norm_w, ttt_norm_b;       // γ, β [H, d]: ttt_norm_weight, ttt_norm_bias
  RowVec<S> post_norm_w, post_norm_b;  // [D]: post_norm.weight, post_norm.bias
  std::vector<InnerWeights<S>> W0;     // per head: W1 [d, d|4d], b1, (W2, b2) — the learned initial state

  // Initialisation of docs/MATH.md §8.5: projections, θ_lr and W0 ~ N(0, 0.02); biases, β_lr, δ = 0;
  // γ = 1, β = 0; post-norm 1/0; convs N(0, 1/K) (lecun-normal for a depthwise kernel of fan-in K).
  // `normal` returns independent N(0, 1) draws.
  static TTTLayerParams init(const TTTLayerConfig& cfg, const std::function<double()>& normal);
  // Throws if any shape does not match cfg.
  void check_shapes(const TTTLayerConfig& cfg) const;
  // All zeros, with the shapes of cfg (the container for gradients).
  static TTTLayerParams zeros(const TTTLayerConfig& cfg);
  // Applies f(param, name) to every tensor that exists for cfg, with its official PyTorch name
  // (relative to the layer, e.g. "q_proj.weight", "W1"); per-head W0 tensors are visited head by
  // head as "W1[h]", "b1[h]", ... Used by optimisers, checkpoints and gradient checks.
  // The Map views the parameter's own (contiguous, row-major) storage.
  void for_each(const TTTLayerConfig& cfg,
                const std::function<void(Eigen::Map<Mat<S>>, const std::string&)>& f);
};

// State of one sequence: conv history of u (Mamba form), and the inner state of each head.
template <class S>
struct TTTLayerState : SequenceState {
  Mat<S> conv_history;              // [K−1, D], last inputs of conv_q/conv_k (zeros at start)
  std::vector<InnerState<S>> heads; // one per head
};

// Everything the layer computes before the inner loop, for tests, probes and the GUI.
template <class S>
struct TTTLayerInputs {
  Mat<S> XQ, XK, XV;            // [T, D] after convs and RoPE; head h is columns h·d..
  std::vector<Vec<S>> lambda;   // per head, λ [T]
  Vec<S> tau;                   // τ [b]
};

// What the training forward keeps for the backward (activations of one sequence).
template <class S>
struct TTTLayerCache : LayerCache {
  Mat<S> x;                    // [T, D] layer input
  Mat<S> u;                    // [T, D] shared projection (Mamba form)
  TTTLayerInputs<S> in;        // XQ, XK, XV after RoPE, λ, τ
  Mat<S> O;                    // [T, D] concatenated head outputs
  Mat<S> Y;                    // [T, D] after the post-norm (before the gate)
  GeluGateCache<S> gate;       // x·Wg and gelu(x·Wg) (Mamba backbone)
};

// Called by the primal form for every (head, token).
template <class S>
using TTTLayerObserver = std::function<void(int head, const InnerStepRecord<S>&)>;

template <class S>
class TTTLayer final : public SequenceLayer<S> {
 public:
  TTTLayer(TTTLayerConfig cfg, TTTLayerParams<S> params);  // validates both

  std::string name() const override;
  int width() const override { return m_cfg.width; }
  std::unique_ptr<SequenceState> start() const override;
  // Dual form (the fast path).
  Mat<S> forward(SequenceState& state, ConstMatRef<S> x) const override;
  using SequenceLayer<S>::forward;

  // Either form, with an optional observer (primal only). `state` must come from start().
  Mat<S> forward(TTTLayerState<S>& state, ConstMatRef<S> x, TTTForm form,
                 const TTTLayerObserver<S>& observer = {}) const;

  // Step 1–3 only: projections, convs, RoPE, η. Advances the conv history of `state` (a copy is fine
  // for inspection). Positions for RoPE continue from state.tokens.
  TTTLayerInputs<S> inputs(TTTLayerState<S>& state, ConstMatRef<S> x) const;

  // Training: a whole sequence from the fresh state in the dual form, keeping what backward needs.
  Mat<S> forward_train(ConstMatRef<S> x, TTTLayerCache<S>& cache) const;
  // Given dY = ∂L/∂y [T, D], ADDS every parameter gradient to `grads` (shaped as zeros(cfg)) and
  // writes dx [T, D]. The inner loop is rematerialised in groups of config().checkpoint_group.
  void backward(const TTTLayerCache<S>& cache, ConstMatRef<S> dY, TTTLayerParams<S>& grads,
                Mat<S>& dx) const;

  // SequenceLayer's training interface (the same, through the base types).
  std::unique_ptr<LayerCache> forward_train(ConstMatRef<S> x, Mat<S>& y) const override;
  void backward(const LayerCache& cache, ConstMatRef<S> dY, SequenceLayer<S>& grads,
                Mat<S>& dx) const override;
  std::unique_ptr<SequenceLayer<S>> zeros_like() const override;
  void for_each_param(const ParamVisitor<S>& f) override { m_params.for_each(m_cfg, f); }
  // Per token: 2D² per projection (q, [k], v, o, [g]) + per head the inner loop: TTT-Linear
  // 6d² + 4bd, TTT-MLP (hidden h) 14dh + 4bd + 4bh (docs/MATH.md §4.4, §5 count them).
  double forward_flops(long T) const override;

  const TTTLayerConfig& config() const { return m_cfg; }
  const TTTLayerParams<S>& params() const { return m_params; }
  TTTLayerParams<S>& mutable_params() { return m_params; }

 private:
  TTTLayerConfig m_cfg;
  TTTLayerParams<S> m_params;
};

}  // namespace tttlab
