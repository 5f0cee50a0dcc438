// The memory estimate of a model (see tttlab/model/memory.hpp).
#include "tttlab/model/memory.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tttlab {

double count_params(const ModelConfig& c) {
  const double D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size,
               H = c.num_attention_heads;
  const double K = c.conv_kernel, b = c.mini_batch_size, d = c.head_dim();
  double block = D /*seq_norm*/ + D /*ffn_norm*/ + 3 * D * F /*SwiGLU*/;
  if (c.mamba_backbone) block += D + D * K + D;  // pre-conv: norm, kernel, bias
  if (c.is_ttt()) {
    // Projections q, v, o (k unless shared), g (gate), the shared-projection convs, θ_lr, β_lr, δ,
    // the inner LayerNorm γ/β, the post-norm, and W0 per head.
    block += 3 * D * D + (c.mamba_backbone ? 0 : D * D) + (c.mamba_backbone ? D * D : 0);
    if (c.mamba_backbone) block += 2 * (D * K + D);
    block += H * D + H + b + 2 * H * d + 2 * D;
    const double hidden = c.seq_layer == SeqLayerKind::TTTMLP ? 4 * d : d;
    block += H * d * hidden + (c.inner_bias ? H * hidden : 0);
    if (c.seq_layer == SeqLayerKind::TTTMLP) block += H * hidden * d + (c.inner_bias ? H * d : 0);
  } else if (c.seq_layer == SeqLayerKind::Mamba2) {
    // in_proj, conv1d weight and bias, dt_bias, A_log, D, the gated norm, out_proj.
    const Mamba2Config m = c.mamba2_config();
    const double di = m.d_inner(), cd = m.conv_dim(), nh = m.heads();
    block += D * m.in_proj_width() + cd * m.d_conv + cd + 3 * nh + di + di * D;
  } else if (c.is_deltanet()) {
    // q, k, v, o projections, β's projection, the three convolutions, the output norm; gated: the
    // decay's projection, A_log, dt_bias and the gate's projection.
    block += 4 * D * D + D * H + 3 * D * K + d;
    if (c.seq_layer == SeqLayerKind::GatedDeltaNet) block += D * H + 2 * H + D * D;
  } else if (c.seq_layer == SeqLayerKind::Lact) {
    // qkv, o projections, qk_scale and qk_offset, the initial fast weights (3 per head), the rates',
    // momentum's and output scale's projections with biases, the output norm.
    const LactLayerConfig l = c.lact_config();
    const double Hf = l.lact_heads, df = l.fw_head_dim(), dh = l.fw_hidden();
    block += 4 * D * D + 4 * D + Hf * 3 * df * dh + 5 * (D * Hf + Hf) + df;
  } else if (c.seq_layer == SeqLayerKind::Titans) {
    // q, k, v, g, o projections, the three convolutions, θ, α, η's projections and biases, the
    // memory's LayerNorm per head, the output norm.
    block += 5 * D * D + 3 * D * K + 3 * (D * H + H) + 2 * H * d + d;
  } else {
    block += 4 * D * D;
  }
  return V * D + c.num_hidden_layers * block + D;
}

std::uint64_t estimate_memory(const ModelConfig& c, const MemoryUse& use) {
  const double S = 4;
  const double P = count_params(c);
  const double D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size,
               H = c.num_attention_heads;
  const double d = c.head_dim(), b = c.mini_batch_size;
  const double T = use.window > 0 ? double(use.window) : double(c.max_position_embeddings);
  // Training: the model, AdamW's two moments and the gradient models, plus what writing a checkpoint
  // holds at its peak (the state_dict's float copy and its encoded bytes, or the two moments encoded,
  // with a copy's margin for the finite-output check and the allocator).
  const double copies = use.gradient_copies < 0 ? 1.0 : 3.0 + double(use.gradient_copies) + 3.0;
  double layer = 0;
  if (c.is_ttt()) {
    const double state = c.seq_layer == SeqLayerKind::TTTMLP ? 8 * d * d + 5 * d : d * d + d;
    layer = H * 2 * std::min(b, T) + H * state / std::min(b, T);
  } else if (c.seq_layer == SeqLayerKind::Mamba2) {
    // The cache beyond the block's 16·D: in_proj's output, the convolution before and after silu, dt,
    // the scan's output, the gate and the norm; one state per head per chunk of Q tokens; the chunk's
    // Q × Q matrices.
    const Mamba2Config m = c.mamba2_config();
    const double di = m.d_inner(), cd = m.conv_dim(), nh = m.heads(), Q = m.chunk_size;
    layer = m.in_proj_width() + 2 * cd + nh + 3 * di + nh * m.headdim * m.d_state / std::min(Q, T) +
            3 * std::min(Q, T);
  } else if (c.is_deltanet()) {
    // The cache beyond the block's 16·D: the projections, the convolutions before and after silu, the
    // normalised q and k, the inner loop's output, the norm, the gate and o_proj's input (13·D), β and
    // α (3·H); the backward's T + 1 states of d × d (matrix_rule_backward keeps them all, for one head
    // at a time; counted in every block, an upper bound).
    layer = 13 * D + 3 * H + d * d;
  } else if (c.seq_layer == SeqLayerKind::Lact) {
    // The cache beyond the block's 16·D: q, k, v, their rotations, scaled, silu'd and normalised
    // copies, the fast weights' output, the norm and o_proj's input (15·D), the rates, momentum and
    // scale (5·H_f); the backward's fast weights of every chunk (3·d_f·d_h per head per chunk of C
    // tokens) and the attention's band (W per head).
    const LactLayerConfig l = c.lact_config();
    const double Hf = l.lact_heads, C = l.chunk_size;
    layer = 15 * D + 5 * Hf + Hf * 3 * l.fw_head_dim() * l.fw_hidden() / std::min(C, T) +
            H * std::min(C, T);
  } else if (c.seq_layer == SeqLayerKind::Titans) {
    // The cache beyond the block's 16·D: the projections, the convolutions before and after silu, the
    // normalised q and k, the memory's output, the norm, the gate and o_proj's input (15·D), θ, α, η
    // (3·H); the backward's memory and momentum of d × d entering each mini-batch
    // (titans_backward_chunked keeps them, for one head at a time; counted in every block, an upper
    // bound).
    layer = 15 * D + 3 * H + 2 * d * d / std::max(1.0, b);
  } else if (c.seq_layer == SeqLayerKind::SoftmaxAttention) {
    layer = H * T;
  } else {
    layer = H * d;
  }
  const double per_token = c.num_hidden_layers * (16 * D + 4 * F + layer) + 3 * V;
  const double bytes = S * P * copies + (use.file_bytes ? double(use.file_bytes) + S * P : 0.0) +
                       S * T * double(std::max(1L, use.sequences)) * per_token;
  if (!(bytes < 1.8e19)) return std::numeric_limits<std::uint64_t>::max();
  return static_cast<std::uint64_t>(bytes);
}

}  // namespace tttlab
