// The rows of the paper's Table 1 (see tttlab/train/ablation.hpp).
#include "tttlab/train/ablation.hpp"

#include <sstream>

namespace tttlab {

std::vector<AblationRow> table1_rows(const ModelConfig& base, int seq_len) {
  std::vector<AblationRow> rows;
  auto add = [&](const char* id, const char* name, const char* change, const ModelConfig& m,
                 const char* compare_with = "") {
    rows.push_back({id, name, change, *compare_with == '\0', m, compare_with});
  };
  ModelConfig m = base;
  m.max_position_embeddings = seq_len;

  m.seq_layer = SeqLayerKind::LinearAttention;
  m.mamba_backbone = false;
  add("1", "linear-attention", "linear attention (Theorem 1 baseline)", m);

  m.seq_layer = SeqLayerKind::TTTLinear;
  m.mini_batch_size = seq_len;
  m.learnable_w0 = false;
  m.inner_layer_norm = m.inner_residual = m.inner_bias = false;
  m.eta_learned_gate = false;
  m.eta_token_index = false;
  m.eta_token_index_learnable = false;
  m.ttt_base_lr = m.head_dim();  // λ = η_base / d = 1
  m.ttt_rope = false;
  m.ttt_post_norm = false;
  add("2", "ttt-equivalence", "TTT-Linear, b = T, W0 = 0, no LN/residual: = linear attention", m);

  m.learnable_w0 = true;
  add("3", "+learnable-W0", "+ learnable W0", m);

  m.inner_layer_norm = m.inner_residual = m.inner_bias = true;
  m.ttt_rope = true;
  m.ttt_post_norm = true;
  m.ttt_base_lr = 0.5;  // λ = 0.5/d = 1/(2d): the official gate η_base σ(0)/d at initialisation
  add("4", "+ln-residual", "+ LN and residual in f (with RoPE, post-norm); lambda to 1/(2d)", m);

  m.mini_batch_size = 16;
  m.eta_token_index = true;  // τ_i = 1/i: the mean of the mini-batch's gradients
  const ModelConfig row5 = m;
  add("5", "+mini-batch-16", "+ mini-batch TTT, b = 16, tau = 1/i (mean of the gradients)", m);

  m.eta_learned_gate = true;
  m.eta_token_index_learnable = true;
  m.ttt_base_lr = 1.0;
  add("6", "+learnable-eta", "+ learnable eta (gate and token-index offsets delta)", m);

  m.mamba_backbone = true;
  add("7", "+mamba-backbone", "+ Mamba backbone = TTT-Linear (M)", m);

  ModelConfig sum = row5;
  sum.eta_token_index = false;
  add("5a", "mini-batch-16-sum", "diagnostic, not in the chain: row 5 with tau = 1 (sum of the gradients)", sum, "5");

  ModelConfig mamba = base;
  mamba.max_position_embeddings = seq_len;
  mamba.seq_layer = SeqLayerKind::Mamba2;
  mamba.mamba_backbone = false;
  add("M2", "mamba2", "comparison, not in the chain: Mamba-2 (SSD), the paper's main baseline", mamba, "7");
  return rows;
}

std::string ablation_settings(const ModelConfig& m) {
  std::ostringstream s;
  s << to_string(m.seq_layer);
  if (m.is_ttt()) {
    s << " b=";
    if (m.mini_batch_size == m.max_position_embeddings)
      s << "T";
    else
      s << m.mini_batch_size;
    s << " tau=" << (!m.eta_token_index ? "1(sum)" : m.eta_token_index_learnable ? "1/i+delta(learned)" : "1/i(delta frozen)");
    s << " lambda=";
    if (m.eta_learned_gate)
      s << m.ttt_base_lr << "*sigmoid(x.theta+beta)/d learned";
    else
      s << m.ttt_base_lr << "/d=" << m.ttt_base_lr / m.head_dim() << " fixed";
    s << " W0=" << (m.learnable_w0 ? "learned" : "0 fixed");
    if (m.inner_layer_norm || m.inner_residual || m.inner_bias) {
      s << " ";
      const char* sep = "";
      if (m.inner_layer_norm) s << sep << "LN", sep = "+";
      if (m.inner_residual) s << sep << "res", sep = "+";
      if (m.inner_bias) s << sep << "bias";
    } else {
      s << " no-LN/res/bias";
    }
    s << (m.ttt_rope ? " rope" : " no-rope") << (m.ttt_post_norm ? " post-norm" : " no-post-norm");
  }
  s << " backbone=" << (m.mamba_backbone ? "m" : "t");
  return s.str();
}

}  // namespace tttlab
