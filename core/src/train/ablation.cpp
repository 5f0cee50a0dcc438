// The rows of the paper's Table 1 (see tttlab/train/ablation.hpp).
#include "tttlab/train/ablation.hpp"

namespace tttlab {

std::vector<AblationRow> table1_rows(const ModelConfig& base, int seq_len) {
  std::vector<AblationRow> rows;
  ModelConfig m = base;
  m.max_position_embeddings = seq_len;

  m.seq_layer = SeqLayerKind::LinearAttention;
  m.mamba_backbone = false;
  rows.push_back({"linear-attention", "linear attention (Theorem 1 baseline)", m});

  m.seq_layer = SeqLayerKind::TTTLinear;
  m.mini_batch_size = seq_len;
  m.learnable_w0 = false;
  m.inner_layer_norm = m.inner_residual = m.inner_bias = false;
  m.eta_learned_gate = false;
  m.eta_token_index = false;
  m.ttt_base_lr = m.head_dim();  // λ = η_base / d = 1
  m.ttt_rope = false;
  m.ttt_post_norm = false;
  rows.push_back({"ttt-equivalence", "TTT-Linear, b = T, W0 = 0, no LN/residual: = linear attention", m});

  m.learnable_w0 = true;
  rows.push_back({"+learnable-W0", "+ learnable W0", m});

  m.inner_layer_norm = m.inner_residual = m.inner_bias = true;
  m.ttt_rope = true;
  m.ttt_post_norm = true;
  rows.push_back({"+ln-residual", "+ LN and residual in f (with RoPE, post-norm)", m});

  m.mini_batch_size = 16;
  rows.push_back({"+mini-batch-16", "+ mini-batch TTT, b = 16", m});

  m.eta_learned_gate = true;
  m.eta_token_index = true;
  m.ttt_base_lr = 1.0;
  rows.push_back({"+learnable-eta", "+ learnable eta (gate, token index)", m});

  m.mamba_backbone = true;
  rows.push_back({"+mamba-backbone", "+ Mamba backbone = TTT-Linear (M)", m});
  return rows;
}

}  // namespace tttlab
