// A model choice turned into its configuration (see model_choice.hpp).
#include "tttlab/model/model_choice.hpp"

namespace tttlab {

ModelConfig build_model_config(const ModelChoice& o, bool backbone_given) {
  ModelConfig c = ModelConfig::preset(o.preset);
  c.seq_layer = seq_layer_from_string(o.layer);
  c.mamba_backbone = o.backbone == "m";
  // Mamba-2 is a whole Mamba block and sits in the Transformer block, and so do DeltaNet and Gated
  // DeltaNet and Titans with their own short convolutions, and LaCT's whole block: "t" unless
  // backbone "m" was asked for, which validate() then refuses with its reason.
  if (transformer_block_only(c.seq_layer) && !backbone_given) c.mamba_backbone = false;
  if (o.hidden_size) c.hidden_size = o.hidden_size;
  if (o.layers) c.num_hidden_layers = o.layers;
  if (o.heads) c.num_attention_heads = o.heads;
  if (o.intermediate_size) c.intermediate_size = o.intermediate_size;
  c.mini_batch_size = o.mini_batch;
  if (o.mamba2_d_state) c.mamba2_d_state = o.mamba2_d_state;
  if (o.mamba2_headdim) c.mamba2_headdim = o.mamba2_headdim;
  if (o.mamba2_chunk) c.mamba2_chunk_size = o.mamba2_chunk;
  if (o.deltanet_chunk) c.deltanet_chunk_size = o.deltanet_chunk;
  if (o.lact_chunk) c.lact_chunk_size = o.lact_chunk;
  if (o.lact_heads) c.lact_heads = o.lact_heads;
  c.lact_muon = o.lact_muon;
  c.ttt_base_lr = o.base_lr >= 0 ? o.base_lr : default_ttt_base_lr(c.seq_layer);
  c.scan_checkpoint_group_size = o.remat_group;
  c.inner_layer_norm = !o.no_inner_ln;
  c.inner_residual = !o.no_inner_residual;
  c.inner_bias = !o.no_inner_bias;
  c.eta_learned_gate = !o.fixed_eta;
  c.eta_token_index = !o.no_token_index;
  c.eta_token_index_learnable = !o.frozen_token_index;
  c.learnable_w0 = !o.fixed_w0;
  c.learnable_views = !o.fixed_views;
  c.validate();
  return c;
}

}  // namespace tttlab
