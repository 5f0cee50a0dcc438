// tttlab/model/config.hpp — the configuration of a byte-level language model (docs/MATH.md §8.3).
//
// Field names follow the official PyTorch TTTConfig wherever the concept exists (hidden_size,
// num_attention_heads, num_hidden_layers, intermediate_size, mini_batch_size, ttt_layer_type,
// ttt_base_lr, use_gate, share_qk, pre_conv, conv_kernel, rope_theta, vocab_size, ...): config.json in a
// checkpoint uses exactly these keys. Concepts of our own (the attention baselines, the paper's simpler
// variants) use keys prefixed "tttlab_".
//
// Mamba-2 (seq_layer = Mamba2) is a whole Mamba block of its own (in_proj, its convolution, the SSD
// scan, a gated norm, out_proj) and sits in the Transformer block ("t" backbone); validate() refuses the
// "m" backbone with it, whose pre-conv and gate are the TTT paper's copy of what that block already has.
//
// DeltaNet and Gated DeltaNet (seq_layer = DeltaNet, GatedDeltaNet; tttlab/seq/deltanet_layer.hpp) are
// likewise whole blocks with their own short convolutions (and, gated, their own output gate), so they
// sit in the Transformer block too; they take their heads from num_attention_heads, their convolution
// width from conv_kernel, their output norm's ε from rms_norm_eps and their chunk from
// deltanet_chunk_size. They train, evaluate and decode on the CPU and the GPU.
//
// Titans (seq_layer = Titans; tttlab/seq/titans_layer.hpp) is a whole block of the same shape around
// Titans' memory: heads from num_attention_heads, convolution width from conv_kernel, the memory's
// mini-batch from mini_batch_size, its LayerNorm ε from tttlab_ttt_ln_eps, the output norm's ε from
// rms_norm_eps. It trains, evaluates and decodes on the CPU and the GPU.
//
// LaCT (seq_layer = Lact; tttlab/seq/lact_layer.hpp) is its authors' whole block: sliding-window
// attention and SwiGLU fast weights sharing one qkv projection, in the Transformer block. Attention
// heads from num_attention_heads, fast-weight heads from lact_heads, the chunk C and the attention
// window from lact_chunk_size, Muon from lact_muon, RoPE's θ from rope_theta. It trains, evaluates
// and decodes on the GPU too (without Muon: kernels/src/model/lact_layer.cpp, decode_cuda.cpp).
//
// Backbones: "t" (Transformer: separate Q/K projections, no pre-conv, no gate) and "m" (Mamba-style:
// pre-conv, shared Q/K projection with conv_q/conv_k, GELU gate), i.e. share_qk = use_gate = pre_conv =
// (backbone == m), as in ttt-lm-jax's TTTLinear/TTTMLP vs TTTLinearBase/TTTMLPBase.
#pragma once

#include <string>
#include <vector>

#include "tttlab/seq/attention_layers.hpp"
#include "tttlab/seq/deltanet_layer.hpp"
#include "tttlab/seq/lact_layer.hpp"
#include "tttlab/seq/mamba2_layer.hpp"
#include "tttlab/seq/titans_layer.hpp"
#include "tttlab/ttt/layer.hpp"

namespace tttlab {

// Upper bounds that validate() enforces (besides positivity and consistency): far above the models of
// this lab (the paper's 125M shape: D = 768, 12 blocks, T = 2048), they keep every size computed from
// a config.json small enough to compute exactly, before any allocation.
inline constexpr int k_max_vocab_size = 1 << 20;
inline constexpr int k_max_hidden_size = 1 << 16;
inline constexpr int k_max_intermediate_size = 1 << 18;
inline constexpr int k_max_layers = 1 << 12;
inline constexpr int k_max_mini_batch = 1 << 16;
inline constexpr int k_max_conv_kernel = 1 << 10;
inline constexpr int k_max_positions = 1 << 20;

enum class SeqLayerKind {
  TTTLinear,
  TTTMLP,
  LinearAttention,
  SoftmaxAttention,
  Mamba2,
  DeltaNet,
  GatedDeltaNet,
  Titans,
  Lact
};

// "ttt-linear", "ttt-mlp", "linear-attention", "softmax-attention", "mamba2", "deltanet",
// "gated-deltanet", "titans", "lact"
std::string to_string(SeqLayerKind k);
SeqLayerKind seq_layer_from_string(const std::string& s);  // std::invalid_argument if unknown
// Every layer, in the order above: the one list that option checks and loops over layers read.
const std::vector<SeqLayerKind>& seq_layer_kinds();
std::vector<std::string> seq_layer_names();  // to_string of each, in the same order
// Layers that are a whole block of their own (short convolutions, gate, norm inside): they sit in the
// Transformer backbone only; the Mamba-style backbone (m) would wrap a second convolution and gate
// around them, and ModelConfig::validate refuses it.
bool transformer_block_only(SeqLayerKind k);

// Why no device but the CPU can run a model of this layer at all (empty where GPU kernels exist):
// every layer has them now (the function stays, so that a layer added on the CPU first has its one
// place to say so). One line without advice (callers add what to type instead), for
// `--device cuda` to stop with before anything is allocated or a GPU is looked for.
std::string gpu_kernels_missing(SeqLayerKind k);
// Likewise for the GPU decoder (generation, `bench --latency`): every layer has one now; a model
// whose shape the decoder does not take is refused by kernels::cuda_decode_unsupported.
std::string gpu_decoder_missing(SeqLayerKind k);

// The official η_base for a layer: 1.0 for TTT-Linear (and the layers without an inner loop), 0.1
// for TTT-MLP, whose larger inner model takes smaller steps.
inline double default_ttt_base_lr(SeqLayerKind k) { return k == SeqLayerKind::TTTMLP ? 0.1 : 1.0; }

struct ModelConfig {
  int vocab_size = 256;           // bytes
  int hidden_size = 128;          // D
  int intermediate_size = 384;    // F (SwiGLU)
  int num_hidden_layers = 4;      // L
  int num_attention_heads = 4;    // H
  SeqLayerKind seq_layer = SeqLayerKind::TTTLinear;
  bool mamba_backbone = true;     // "m": pre_conv, share_qk, use_gate; "t": none of them
  int mini_batch_size = 16;       // b
  double ttt_base_lr = 1.0;       // η_base (official: default_ttt_base_lr(seq_layer))
  int conv_kernel = 4;
  double rope_theta = 1e4;
  double rms_norm_eps = 1e-6;     // ε of every RMSNorm of the model
  double ttt_ln_eps = 1e-6;       // ε of the TTT layer's LayerNorms: the inner LN and the post-norm
                                  // (official value; TttOptions::ln_eps on the GPU)
  double initializer_range = 0.02;
  int max_position_embeddings = 256;  // the training sequence length T
  int scan_checkpoint_group_size = 0; // inner-loop remat group (mini-batches); 0 keeps every state
  // The paper's simpler variants (all true / learned = the official layer).
  bool inner_layer_norm = true;
  bool inner_residual = true;
  bool inner_bias = true;
  bool eta_learned_gate = true;   // λ = η_base σ(xθ+β)/d (true) or η_base/d (false)
  bool eta_token_index = true;    // τ_i = max(1/i + δ_i, 0) (true) or 1 (false)
  bool eta_token_index_learnable = true;  // δ trained (true) or frozen at its initial 0, τ_i = 1/i
                                          // (false; the mean of the mini-batch's gradients)
  bool learnable_w0 = true;       // W0 trained from N(0, 0.02) (true) or fixed at 0 (false)
  bool learnable_views = true;    // the self-supervised task's views θ_K, θ_V, θ_Q (q_proj, k_proj,
                                  // v_proj and, on the "m" backbone, conv_q and conv_k) trained (true)
                                  // or kept at their random initialisation (false: a fixed task;
                                  // TTT layers only, CPU training only)
  bool ttt_rope = true;           // RoPE on the TTT layer's Q, K (positions t mod b)
  bool ttt_post_norm = true;      // the TTT layer's post-norm (off in the Theorem 1 equivalence rows)
  // Mamba-2 (tttlab/seq/mamba2_layer.hpp), the reference's names. d_state N = 64 where the reference's
  // default is 128: each head's state is then P × N = 64 × 64, the size of a TTT-Linear head's W at
  // the 125m preset (d = 64), so the two recurrent states compare like for like, at half the CPU cost.
  // chunk_size 64 where the reference's is 256: the lab's sequences are 256 tokens at the tiny preset,
  // and the intra-chunk work grows with Q.
  int mamba2_d_state = 64;
  int mamba2_d_conv = 4;
  int mamba2_expand = 2;
  int mamba2_headdim = 64;
  int mamba2_chunk_size = 64;
  // DeltaNet and Gated DeltaNet: the chunk length C of the chunked (UT) form in training and
  // evaluation (FLA's chunk kernels use 64).
  int deltanet_chunk_size = 64;
  // LaCT: the chunk C of its fast weights and its attention window (the authors' 2048 scaled down so
  // that a 256-token window holds several chunks), the fast weights' heads (the authors use 4 at
  // D = 1536; 2 keeps heads of 64 at the tiny preset), and Muon (off, as the authors' default).
  int lact_chunk_size = 64;
  int lact_heads = 2;
  bool lact_muon = false;

  bool is_ttt() const { return seq_layer == SeqLayerKind::TTTLinear || seq_layer == SeqLayerKind::TTTMLP; }
  bool is_deltanet() const {
    return seq_layer == SeqLayerKind::DeltaNet || seq_layer == SeqLayerKind::GatedDeltaNet;
  }
  int head_dim() const { return num_attention_heads > 0 ? hidden_size / num_attention_heads : 0; }
  // Whether the outer loop trains the parameter of this state_dict name (Model::for_each_param's
  // names). Every parameter is trained except the views when learnable_views is false; trainers
  // leave the others out of the optimiser, so they keep their initial values exactly (no decay).
  bool trains(const std::string& param_name) const;
  // Throws std::invalid_argument with a one-line message naming the field: a non-positive size, a size
  // above the k_max_* bounds above, heads not dividing hidden_size, an odd head dim with RoPE, a negative
  // or non-finite rate, epsilon or range, a Mamba-2 headdim not dividing expand · hidden_size, or
  // Mamba-2, DeltaNet, Gated DeltaNet, Titans or LaCT on the "m" backbone.
  void validate() const;
  TTTLayerConfig ttt_layer_config() const;
  AttentionConfig attention_config() const;
  Mamba2Config mamba2_config() const;
  DeltaNetConfig deltanet_config() const;
  TitansLayerConfig titans_config() const;
  LactLayerConfig lact_config() const;

  // Presets: "tiny" (~1M parameters, CPU), "small" (~10–30M, GPU), "125m" (the paper's shape with a
  // byte vocabulary, for benchmarks). The layer kind and backbone are set separately.
  static ModelConfig preset(const std::string& name);
  static std::vector<std::string> preset_names();

  // config.json: official TTTConfig keys plus tttlab_* keys. from_json refuses unknown layer types,
  // wrong types and bad values with a message naming the key (and `source`, the file).
  std::string to_json() const;
  static ModelConfig from_json(const std::string& text, const std::string& source = "config.json");
};

}  // namespace tttlab
