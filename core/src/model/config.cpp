// Model configuration, presets and config.json (see tttlab/model/config.hpp).
#include "tttlab/model/config.hpp"

#include <cmath>
#include <stdexcept>
#include <string_view>

#include "tttlab/io/json.hpp"
#include "tttlab/io/limits.hpp"

namespace tttlab {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument("model config: " + msg); }

}  // namespace

std::string to_string(SeqLayerKind k) {
  switch (k) {
    case SeqLayerKind::TTTLinear: return "ttt-linear";
    case SeqLayerKind::TTTMLP: return "ttt-mlp";
    case SeqLayerKind::LinearAttention: return "linear-attention";
    case SeqLayerKind::SoftmaxAttention: return "softmax-attention";
    case SeqLayerKind::Mamba2: return "mamba2";
    case SeqLayerKind::DeltaNet: return "deltanet";
    case SeqLayerKind::GatedDeltaNet: return "gated-deltanet";
    case SeqLayerKind::Titans: return "titans";
    case SeqLayerKind::Lact: return "lact";
  }
  return "?";
}

const std::vector<SeqLayerKind>& seq_layer_kinds() {
  static const std::vector<SeqLayerKind> kinds = {
      SeqLayerKind::TTTLinear, SeqLayerKind::TTTMLP,   SeqLayerKind::LinearAttention,
      SeqLayerKind::SoftmaxAttention, SeqLayerKind::Mamba2, SeqLayerKind::DeltaNet,
      SeqLayerKind::GatedDeltaNet, SeqLayerKind::Titans, SeqLayerKind::Lact};
  return kinds;
}

std::vector<std::string> seq_layer_names() {
  std::vector<std::string> names;
  for (SeqLayerKind k : seq_layer_kinds()) names.push_back(to_string(k));
  return names;
}

bool transformer_block_only(SeqLayerKind k) {
  return k == SeqLayerKind::Mamba2 || k == SeqLayerKind::DeltaNet || k == SeqLayerKind::GatedDeltaNet ||
         k == SeqLayerKind::Titans || k == SeqLayerKind::Lact;
}

SeqLayerKind seq_layer_from_string(const std::string& s) {
  for (SeqLayerKind k : seq_layer_kinds())
    if (s == to_string(k)) return k;
  bad("unknown layer '" + clip(s, 40) +
      "' (expected ttt-linear, ttt-mlp, linear-attention, softmax-attention, mamba2, deltanet, "
      "gated-deltanet, titans or lact)");
}

std::string gpu_kernels_missing(SeqLayerKind) { return {}; }

std::string gpu_decoder_missing(SeqLayerKind k) { return gpu_kernels_missing(k); }

void ModelConfig::validate() const {
  auto positive = [](int v, const char* name) {
    if (v <= 0) bad(std::string(name) + " must be positive, got " + std::to_string(v));
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(mini_batch_size, "mini_batch_size");
  positive(conv_kernel, "conv_kernel");
  positive(max_position_embeddings, "max_position_embeddings");
  // Upper bounds far above any model this lab trains, so that a hostile config.json cannot make a
  // loader compute sizes, names or allocations from absurd numbers (the memory estimate then decides
  // whether a model within them fits; tttlab/model/memory.hpp).
  auto at_most = [](int v, int cap, const char* name) {
    if (v > cap) bad(std::string(name) + " must be at most " + std::to_string(cap) + ", got " + std::to_string(v));
  };
  at_most(vocab_size, k_max_vocab_size, "vocab_size");
  at_most(hidden_size, k_max_hidden_size, "hidden_size");
  at_most(intermediate_size, k_max_intermediate_size, "intermediate_size");
  at_most(num_hidden_layers, k_max_layers, "num_hidden_layers");
  at_most(mini_batch_size, k_max_mini_batch, "mini_batch_size");
  at_most(conv_kernel, k_max_conv_kernel, "conv_kernel");
  at_most(max_position_embeddings, k_max_positions, "max_position_embeddings");
  if (hidden_size % num_attention_heads != 0)
    bad("num_attention_heads (" + std::to_string(num_attention_heads) + ") must divide hidden_size (" +
        std::to_string(hidden_size) + ")");
  if (head_dim() % 2 != 0 && ((is_ttt() && ttt_rope) || seq_layer == SeqLayerKind::SoftmaxAttention ||
                              seq_layer == SeqLayerKind::Lact))
    bad("RoPE needs an even head dim, got " + std::to_string(head_dim()));
  if (!(ttt_base_lr >= 0)) bad("ttt_base_lr must be >= 0");
  if (!(rms_norm_eps > 0)) bad("rms_norm_eps must be positive");
  if (!(ttt_ln_eps > 0)) bad("tttlab_ttt_ln_eps must be positive");
  if (!(initializer_range >= 0)) bad("initializer_range must be >= 0");
  if (scan_checkpoint_group_size < 0) bad("scan_checkpoint_group_size must be >= 0");
  if (!std::isfinite(ttt_base_lr) || !std::isfinite(rope_theta) || !(rope_theta > 0) || !std::isfinite(rms_norm_eps) ||
      !std::isfinite(ttt_ln_eps) || !std::isfinite(initializer_range))
    bad("ttt_base_lr, rope_theta, rms_norm_eps, tttlab_ttt_ln_eps and initializer_range must be finite (rope_theta positive)");
  if (!learnable_views && !is_ttt()) bad("tttlab_learnable_views = false (fixed views) is a TTT-layer variant");
  if (seq_layer == SeqLayerKind::Mamba2) {
    if (mamba_backbone)
      bad("mamba2 is a whole Mamba block and uses the Transformer backbone (t); the Mamba-style backbone (m) "
          "would add a second convolution and gate around it");
    positive(mamba2_d_state, "tttlab_mamba2_d_state");
    positive(mamba2_d_conv, "tttlab_mamba2_d_conv");
    positive(mamba2_expand, "tttlab_mamba2_expand");
    positive(mamba2_headdim, "tttlab_mamba2_headdim");
    positive(mamba2_chunk_size, "tttlab_mamba2_chunk_size");
    at_most(mamba2_d_state, k_max_hidden_size, "tttlab_mamba2_d_state");
    at_most(mamba2_d_conv, k_max_conv_kernel, "tttlab_mamba2_d_conv");
    at_most(mamba2_expand, 64, "tttlab_mamba2_expand");
    at_most(mamba2_chunk_size, k_max_mini_batch, "tttlab_mamba2_chunk_size");
    const long d_inner = long(mamba2_expand) * hidden_size;
    if (d_inner % mamba2_headdim != 0)
      bad("tttlab_mamba2_headdim (" + std::to_string(mamba2_headdim) + ") must divide d_inner = " +
          "tttlab_mamba2_expand * hidden_size (" + std::to_string(d_inner) + ")");
  }
  if (is_deltanet()) {
    if (mamba_backbone)
      bad(to_string(seq_layer) + " is a whole block with its own short convolutions and uses the Transformer "
          "backbone (t); the Mamba-style backbone (m) would add a second convolution and gate around it");
    positive(deltanet_chunk_size, "tttlab_deltanet_chunk_size");
    at_most(deltanet_chunk_size, k_max_mini_batch, "tttlab_deltanet_chunk_size");
  }
  if (seq_layer == SeqLayerKind::Titans && mamba_backbone)
    bad("titans is a whole block with its own short convolutions and uses the Transformer backbone (t); "
        "the Mamba-style backbone (m) would add a second convolution and gate around it");
  if (seq_layer == SeqLayerKind::Lact) {
    if (mamba_backbone)
      bad("lact is a whole block (window attention and fast weights) and uses the Transformer backbone (t); "
          "the Mamba-style backbone (m) would add a convolution and gate around it");
    positive(lact_chunk_size, "tttlab_lact_chunk_size");
    at_most(lact_chunk_size, k_max_mini_batch, "tttlab_lact_chunk_size");
    positive(lact_heads, "tttlab_lact_heads");
    if (hidden_size % lact_heads != 0)
      bad("tttlab_lact_heads (" + std::to_string(lact_heads) + ") must divide hidden_size (" +
          std::to_string(hidden_size) + ")");
  }
}

bool ModelConfig::trains(const std::string& name) const {
  if (learnable_views) return true;
  // The views of the self-supervised task: "model.layers.<i>.seq_modeling_block.<param>".
  static constexpr std::string_view kBlock = ".seq_modeling_block.";
  const auto at = name.find(kBlock);
  if (at == std::string::npos) return true;
  const std::string_view p = std::string_view(name).substr(at + kBlock.size());
  return !(p == "q_proj.weight" || p == "k_proj.weight" || p == "v_proj.weight" || p == "conv_q.weight" ||
           p == "conv_q.bias" || p == "conv_k.weight" || p == "conv_k.bias");
}

TTTLayerConfig ModelConfig::ttt_layer_config() const {
  TTTLayerConfig c;
  c.width = hidden_size;
  c.heads = num_attention_heads;
  c.inner.model = seq_layer == SeqLayerKind::TTTMLP ? InnerModel::MLP : InnerModel::Linear;
  c.inner.mini_batch = mini_batch_size;
  c.inner.layer_norm = inner_layer_norm;
  c.inner.residual = inner_residual;
  c.inner.bias = inner_bias;
  c.eta.base_lr = ttt_base_lr;
  c.eta.gate = eta_learned_gate ? EtaGate::Learned : EtaGate::Fixed;
  c.eta.token_index = eta_token_index;
  c.eta.token_index_learnable = eta_token_index_learnable;
  c.share_qk = c.use_gate = mamba_backbone;
  c.conv_kernel = conv_kernel;
  c.rope = ttt_rope;
  c.rope_theta = rope_theta;
  c.post_norm = ttt_post_norm;
  c.inner.ln_eps = ttt_ln_eps;
  c.post_norm_eps = ttt_ln_eps;
  c.checkpoint_group = scan_checkpoint_group_size;
  return c;
}

AttentionConfig ModelConfig::attention_config() const {
  return AttentionConfig{hidden_size, num_attention_heads, true, rope_theta};
}

Mamba2Config ModelConfig::mamba2_config() const {
  Mamba2Config c;
  c.width = hidden_size;
  c.d_state = mamba2_d_state;
  c.d_conv = mamba2_d_conv;
  c.expand = mamba2_expand;
  c.headdim = mamba2_headdim;
  c.chunk_size = mamba2_chunk_size;
  return c;
}

DeltaNetConfig ModelConfig::deltanet_config() const {
  DeltaNetConfig c;
  c.width = hidden_size;
  c.heads = num_attention_heads;
  c.conv_kernel = conv_kernel;
  c.chunk_size = deltanet_chunk_size;
  c.gated = seq_layer == SeqLayerKind::GatedDeltaNet;
  c.norm_eps = rms_norm_eps;
  return c;
}

TitansLayerConfig ModelConfig::titans_config() const {
  TitansLayerConfig c;
  c.width = hidden_size;
  c.heads = num_attention_heads;
  c.conv_kernel = conv_kernel;
  c.mini_batch = mini_batch_size;
  c.ln_eps = ttt_ln_eps;
  c.norm_eps = rms_norm_eps;
  return c;
}

LactLayerConfig ModelConfig::lact_config() const {
  LactLayerConfig c;
  c.width = hidden_size;
  c.attn_heads = num_attention_heads;
  c.lact_heads = lact_heads;
  c.chunk_size = c.window = lact_chunk_size;
  c.use_muon = lact_muon;
  c.rope_theta = rope_theta;
  return c;
}

ModelConfig ModelConfig::preset(const std::string& name) {
  ModelConfig c;
  if (name == "tiny") {
    c.hidden_size = 128, c.num_hidden_layers = 4, c.num_attention_heads = 4, c.intermediate_size = 384;
    c.max_position_embeddings = 256;
  } else if (name == "small") {
    c.hidden_size = 384, c.num_hidden_layers = 6, c.num_attention_heads = 6, c.intermediate_size = 1024;
    c.max_position_embeddings = 512;
  } else if (name == "125m") {
    c.hidden_size = 768, c.num_hidden_layers = 12, c.num_attention_heads = 12, c.intermediate_size = 2048;
    c.max_position_embeddings = 2048;
  } else {
    bad("unknown preset '" + clip(name, 40) + "' (expected tiny, small or 125m)");
  }
  return c;
}

std::vector<std::string> ModelConfig::preset_names() { return {"tiny", "small", "125m"}; }

std::string ModelConfig::to_json() const {
  Json j = Json::object();
  j["architectures"] = Json::array({"TTTForCausalLM"});
  j["model_type"] = "ttt";
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = max_position_embeddings;
  j["initializer_range"] = initializer_range;
  j["rms_norm_eps"] = rms_norm_eps;
  j["tttlab_ttt_ln_eps"] = ttt_ln_eps;
  j["use_cache"] = true;
  j["pad_token_id"] = nullptr;
  j["bos_token_id"] = nullptr;
  j["eos_token_id"] = nullptr;
  j["pretraining_tp"] = 1;
  j["tie_word_embeddings"] = true;
  j["rope_theta"] = rope_theta;
  j["use_gate"] = mamba_backbone;
  j["share_qk"] = mamba_backbone;
  j["pre_conv"] = mamba_backbone;
  j["conv_kernel"] = conv_kernel;
  j["ttt_layer_type"] = seq_layer == SeqLayerKind::TTTMLP ? "mlp" : "linear";
  j["ttt_base_lr"] = ttt_base_lr;
  j["mini_batch_size"] = mini_batch_size;
  j["scan_checkpoint_group_size"] = scan_checkpoint_group_size;
  j["tttlab_seq_layer"] = to_string(seq_layer);
  j["tttlab_inner_layer_norm"] = inner_layer_norm;
  j["tttlab_inner_residual"] = inner_residual;
  j["tttlab_inner_bias"] = inner_bias;
  j["tttlab_eta_learned_gate"] = eta_learned_gate;
  j["tttlab_eta_token_index"] = eta_token_index;
  j["tttlab_eta_token_index_learnable"] = eta_token_index_learnable;
  j["tttlab_learnable_w0"] = learnable_w0;
  j["tttlab_learnable_views"] = learnable_views;
  j["tttlab_ttt_rope"] = ttt_rope;
  j["tttlab_ttt_post_norm"] = ttt_post_norm;
  j["tttlab_mamba2_d_state"] = mamba2_d_state;
  j["tttlab_mamba2_d_conv"] = mamba2_d_conv;
  j["tttlab_mamba2_expand"] = mamba2_expand;
  j["tttlab_mamba2_headdim"] = mamba2_headdim;
  j["tttlab_mamba2_chunk_size"] = mamba2_chunk_size;
  j["tttlab_deltanet_chunk_size"] = deltanet_chunk_size;
  if (seq_layer == SeqLayerKind::Lact) {  // only LaCT's files carry its keys
    j["tttlab_lact_chunk_size"] = lact_chunk_size;
    j["tttlab_lact_heads"] = lact_heads;
    j["tttlab_lact_muon"] = lact_muon;
  }
  return j.dump(2) + "\n";
}

ModelConfig ModelConfig::from_json(const std::string& text, const std::string& source) {
  ModelConfig c;
  try {
    const Json j = parse_json(text, source);
    const JsonFields f(j, source);
    // Integers are bounded so that sizes computed from them cannot overflow before validate().
    auto get_int = [&](const char* key, int& out) {
      int x = out;
      if (f.read(key, x) && (x < -(1 << 30) || x > (1 << 30))) f.fail(key, "is out of range");
      out = x;
    };
    get_int("vocab_size", c.vocab_size);
    get_int("hidden_size", c.hidden_size);
    get_int("intermediate_size", c.intermediate_size);
    get_int("num_hidden_layers", c.num_hidden_layers);
    get_int("num_attention_heads", c.num_attention_heads);
    get_int("max_position_embeddings", c.max_position_embeddings);
    get_int("mini_batch_size", c.mini_batch_size);
    get_int("conv_kernel", c.conv_kernel);
    get_int("scan_checkpoint_group_size", c.scan_checkpoint_group_size);
    get_int("tttlab_mamba2_d_state", c.mamba2_d_state);
    get_int("tttlab_mamba2_d_conv", c.mamba2_d_conv);
    get_int("tttlab_mamba2_expand", c.mamba2_expand);
    get_int("tttlab_mamba2_headdim", c.mamba2_headdim);
    get_int("tttlab_mamba2_chunk_size", c.mamba2_chunk_size);
    get_int("tttlab_deltanet_chunk_size", c.deltanet_chunk_size);
    get_int("tttlab_lact_chunk_size", c.lact_chunk_size);
    get_int("tttlab_lact_heads", c.lact_heads);
    f.read("tttlab_lact_muon", c.lact_muon);
    f.read("ttt_base_lr", c.ttt_base_lr);
    f.read("rope_theta", c.rope_theta);
    f.read("rms_norm_eps", c.rms_norm_eps);
    f.read("tttlab_ttt_ln_eps", c.ttt_ln_eps);
    f.read("initializer_range", c.initializer_range);
    bool use_gate = true, share_qk = true, pre_conv = true;
    f.read("use_gate", use_gate);
    f.read("share_qk", share_qk);
    f.read("pre_conv", pre_conv);
    if (use_gate != share_qk || share_qk != pre_conv)
      bad("use_gate, share_qk and pre_conv must be all true (Mamba backbone) or all false (Transformer)");
    c.mamba_backbone = share_qk;
    std::string ttt_type = "linear";
    if (f.read("ttt_layer_type", ttt_type) && ttt_type != "linear" && ttt_type != "mlp")
      f.fail("ttt_layer_type", "must be \"linear\" or \"mlp\", got \"" + clip(ttt_type, 40) + "\"");
    c.seq_layer = ttt_type == "mlp" ? SeqLayerKind::TTTMLP : SeqLayerKind::TTTLinear;
    std::string layer;
    if (f.read("tttlab_seq_layer", layer)) c.seq_layer = seq_layer_from_string(layer);
    f.read("tttlab_inner_layer_norm", c.inner_layer_norm);
    f.read("tttlab_inner_residual", c.inner_residual);
    f.read("tttlab_inner_bias", c.inner_bias);
    f.read("tttlab_eta_learned_gate", c.eta_learned_gate);
    f.read("tttlab_eta_token_index", c.eta_token_index);
    f.read("tttlab_eta_token_index_learnable", c.eta_token_index_learnable);
    f.read("tttlab_learnable_w0", c.learnable_w0);
    f.read("tttlab_learnable_views", c.learnable_views);
    f.read("tttlab_ttt_rope", c.ttt_rope);
    f.read("tttlab_ttt_post_norm", c.ttt_post_norm);
    if (const Json* v = f.find("tie_word_embeddings"); v && !(v->is_boolean() && v->get<bool>()))
      f.fail("tie_word_embeddings", "must be true (only tied embeddings are supported)");
  } catch (const JsonError& e) {
    throw std::invalid_argument(std::string("model config: ") + e.what());
  }
  c.validate();
  return c;
}

}  // namespace tttlab
