// Model weights <-> the official ttt-lm-pytorch state_dict layout (see tttlab/model/checkpoint.hpp).
//
// The walk is driven by Model::for_each_param, whose names are already the official ones except for
// the per-head inner state ("...W1[h]"), which is stacked over heads here. Each internal tensor maps to
// a file tensor by one of four rules: transposed (nn.Linear weights, stored [out, in]), depthwise conv
// ([D, K] -> [D, 1, K], Mamba-2's conv1d and DeltaNet's q/k/v_conv1d too), per-head rows with a unit middle axis (θ_lr [H, D] -> [H, 1, D], β_lr [H] ->
// [H, 1]), or as is (vectors and [H, d] norms).
#include "tttlab/model/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <map>
#include <stdexcept>
#include <set>
#include <mutex>
#include <cstdio>

#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/io/safetensors.hpp"
#include "tttlab/model/memory.hpp"

namespace tttlab {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_linear_weight(const std::string& n) {
  for (const char* s : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight", "g_proj.weight",
                        "gate_proj.weight", "up_proj.weight", "down_proj.weight", "in_proj.weight",
                        "out_proj.weight", "a_proj.weight", "b_proj.weight", "theta_proj.weight",
                        "alpha_proj.weight", "eta_proj.weight", "qkv.weight", "lr_proj.weight",
                        "momentum_proj.0.weight", "ttt_scale_proj.weight"})
    if (ends_with(n, s)) return true;
  return false;
}

bool is_conv_weight(const std::string& n) {
  return ends_with(n, "conv.conv.weight") || ends_with(n, "conv_q.weight") || ends_with(n, "conv_k.weight") ||
         ends_with(n, "conv1d.weight");
}

// "prefix.W1[3]" -> ("prefix.W1", 3); -1 when not a per-head tensor.
std::pair<std::string, int> split_head(const std::string& n) {
  const auto open = n.rfind('[');
  if (open == std::string::npos || n.back() != ']') return {n, -1};
  int head = 0;
  for (std::size_t i = open + 1; i + 1 < n.size(); ++i) {
    if (n[i] < '0' || n[i] > '9' || head > 1 << 20) return {n, -1};
    head = head * 10 + (n[i] - '0');
  }
  return {n.substr(0, open), head};
}

// The file shape of an unstacked internal tensor of shape [rows, cols] (the four rules above).
std::vector<std::int64_t> file_shape(const std::string& name, std::int64_t rows, std::int64_t cols) {
  if (is_linear_weight(name)) return {cols, rows};
  if (is_conv_weight(name) || ends_with(name, "learnable_ttt_lr_weight")) return {rows, 1, cols};
  if (ends_with(name, "learnable_ttt_lr_bias")) return {cols, 1};
  // Per-head [H, d] tensors stay two-dimensional with one head too: the official loader expects [1, d].
  if (ends_with(name, "ttt_norm_weight") || ends_with(name, "ttt_norm_bias")) return {rows, cols};
  if (rows == 1) return {cols};
  return {rows, cols};
}

// One file tensor assembled from (or scattered to) internal tensors.
struct Slot {
  std::vector<std::int64_t> shape;
  std::vector<Eigen::Map<Mat<float>>> parts;  // one per head for stacked tensors, else one
  bool transpose = false;
};

// The file layout of every tensor of `model`, in for_each_param order (heads stacked in order).
std::vector<std::pair<std::string, Slot>> layout(Model<float>& model) {
  std::vector<std::pair<std::string, Slot>> out;
  std::map<std::string, size_t> stacked;
  model.for_each_param([&](Eigen::Map<Mat<float>> m, const std::string& name) {
    const auto [base, head] = split_head(name);
    if (head >= 0) {
      auto it = stacked.find(base);
      if (it == stacked.end()) {
        Slot s;
        // [H, r, c] for W, [H, 1, c] for b (row vectors are 1 × c already)
        s.shape = {0, m.rows(), m.cols()};
        stacked[base] = out.size();
        out.emplace_back(base, std::move(s));
        it = stacked.find(base);
      }
      Slot& s = out[it->second].second;
      s.parts.push_back(m);
      s.shape[0] = static_cast<std::int64_t>(s.parts.size());
      return;
    }
    Slot s;
    s.parts.push_back(m);
    s.transpose = is_linear_weight(name);
    s.shape = file_shape(name, m.rows(), m.cols());
    out.emplace_back(name, std::move(s));
  });
  return out;
}

// Files written before one-head norms were stored as [1, d] hold them as [d]: the same numbers, read
// as the [1, d] the model expects.
bool legacy_one_head_norm(const std::string& name, const std::vector<std::int64_t>& file,
                          const std::vector<std::int64_t>& want) {
  return (ends_with(name, "ttt_norm_weight") || ends_with(name, "ttt_norm_bias")) && want.size() == 2 &&
         want[0] == 1 && file.size() == 1 && file[0] == want[1];
}

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size() && i < 8; ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() > 8 ? ", ...]" : "]");
}

// The internal [rows, cols] of every parameter of a block, in Model::for_each_param order, with the
// per-head inner state once (stacked over the heads in the file). Mirrors the Model's construction;
// a test compares the result with a built Model's layout for every layer kind and variant.
struct ParamShape {
  std::string name;
  std::int64_t rows, cols;
  bool per_head = false;
  std::int64_t heads = 0;  // the stack's heads when per_head (0: num_attention_heads)
};
std::vector<ParamShape> block_params(const ModelConfig& c) {
  const std::int64_t D = c.hidden_size, F = c.intermediate_size, K = c.conv_kernel, H = c.num_attention_heads;
  const std::int64_t d = c.head_dim(), b = c.mini_batch_size;
  std::vector<ParamShape> p;
  if (c.mamba_backbone) p.insert(p.end(), {{"conv.norm.weight", 1, D}, {"conv.conv.weight", D, K}, {"conv.conv.bias", 1, D}});
  p.push_back({"seq_norm.weight", 1, D});
  const std::string m = "seq_modeling_block.";
  if (c.is_ttt()) {
    const bool shared = c.mamba_backbone, mlp = c.seq_layer == SeqLayerKind::TTTMLP;
    p.push_back({m + "q_proj.weight", D, D});
    if (!shared) p.push_back({m + "k_proj.weight", D, D});
    p.push_back({m + "v_proj.weight", D, D});
    p.push_back({m + "o_proj.weight", D, D});
    if (shared) {
      p.push_back({m + "g_proj.weight", D, D});
      p.insert(p.end(), {{m + "conv_q.weight", D, K}, {m + "conv_q.bias", 1, D}, {m + "conv_k.weight", D, K},
                         {m + "conv_k.bias", 1, D}});
    }
    p.insert(p.end(), {{m + "learnable_ttt_lr_weight", H, D}, {m + "learnable_ttt_lr_bias", 1, H},
                       {m + "learnable_token_idx", 1, b}, {m + "ttt_norm_weight", H, d}, {m + "ttt_norm_bias", H, d},
                       {m + "post_norm.weight", 1, D}, {m + "post_norm.bias", 1, D}});
    const std::int64_t h = mlp ? 4 * d : d;
    p.push_back({m + "W1", d, h, true});
    if (c.inner_bias) p.push_back({m + "b1", 1, h, true});
    if (mlp) {
      p.push_back({m + "W2", h, d, true});
      if (c.inner_bias) p.push_back({m + "b2", 1, d, true});
    }
  } else if (c.seq_layer == SeqLayerKind::Mamba2) {
    const Mamba2Config mc = c.mamba2_config();
    const std::int64_t di = mc.d_inner(), cd = mc.conv_dim(), nh = mc.heads();
    p.insert(p.end(), {{m + "in_proj.weight", D, mc.in_proj_width()}, {m + "conv1d.weight", cd, mc.d_conv},
                       {m + "conv1d.bias", 1, cd}, {m + "dt_bias", 1, nh}, {m + "A_log", 1, nh}, {m + "D", 1, nh},
                       {m + "norm.weight", 1, di}, {m + "out_proj.weight", di, D}});
  } else if (c.is_deltanet()) {
    const DeltaNetConfig dc = c.deltanet_config();
    p.insert(p.end(), {{m + "q_proj.weight", D, D}, {m + "k_proj.weight", D, D}, {m + "v_proj.weight", D, D},
                       {m + "b_proj.weight", D, H}, {m + "q_conv1d.weight", D, K}, {m + "k_conv1d.weight", D, K},
                       {m + "v_conv1d.weight", D, K}});
    if (dc.gated)
      p.insert(p.end(), {{m + "a_proj.weight", D, H}, {m + "A_log", 1, H}, {m + "dt_bias", 1, H},
                         {m + "g_proj.weight", D, D}});
    p.insert(p.end(), {{m + "o_norm.weight", 1, d}, {m + "o_proj.weight", D, D}});
  } else if (c.seq_layer == SeqLayerKind::Lact) {
    // The authors' module names; the initial fast weights stacked over the fast-weight heads.
    const LactLayerConfig lc = c.lact_config();
    const std::int64_t Hf = lc.lact_heads, df = lc.fw_head_dim(), dh = lc.fw_hidden();
    p.insert(p.end(), {{m + "qkv.weight", D, 3 * D}, {m + "qk_scale", D, 2}, {m + "qk_offset", D, 2},
                       {m + "w0", dh, df, true, Hf}, {m + "w1", df, dh, true, Hf}, {m + "w2", dh, df, true, Hf},
                       {m + "lr_proj.weight", D, 3 * Hf}, {m + "lr_proj.bias", 1, 3 * Hf},
                       {m + "momentum_proj.0.weight", D, Hf}, {m + "momentum_proj.0.bias", 1, Hf},
                       {m + "ttt_scale_proj.weight", D, Hf}, {m + "ttt_scale_proj.bias", 1, Hf},
                       {m + "ttt_norm.weight", 1, df}, {m + "o_proj.weight", D, D}});
  } else if (c.seq_layer == SeqLayerKind::Titans) {
    p.insert(p.end(), {{m + "q_proj.weight", D, D}, {m + "k_proj.weight", D, D}, {m + "v_proj.weight", D, D},
                       {m + "q_conv1d.weight", D, K}, {m + "k_conv1d.weight", D, K},
                       {m + "v_conv1d.weight", D, K}});
    for (const char* g : {"theta_proj", "alpha_proj", "eta_proj"})
      p.insert(p.end(), {{m + g + ".weight", D, H}, {m + g + ".bias", 1, H}});
    p.insert(p.end(), {{m + "ttt_norm.weight", H, d}, {m + "ttt_norm.bias", H, d}, {m + "o_norm.weight", 1, d},
                       {m + "g_proj.weight", D, D}, {m + "o_proj.weight", D, D}});
  } else {
    for (const char* n : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"}) p.push_back({m + n, D, D});
  }
  p.insert(p.end(), {{"ffn_norm.weight", 1, D}, {"mlp.gate_proj.weight", D, F}, {"mlp.up_proj.weight", D, F},
                     {"mlp.down_proj.weight", F, D}});
  return p;
}

std::vector<std::int64_t> file_shape_of(const ParamShape& p, std::int64_t heads) {
  if (p.per_head) return {p.heads > 0 ? p.heads : heads, p.rows, p.cols};
  return file_shape(p.name, p.rows, p.cols);
}

std::string config_hint(const ModelConfig& c) {
  return "config.json: " + to_string(c.seq_layer) + ", hidden_size " + std::to_string(c.hidden_size) +
         ", num_hidden_layers " + std::to_string(c.num_hidden_layers) + ", num_attention_heads " +
         std::to_string(c.num_attention_heads) + ", intermediate_size " + std::to_string(c.intermediate_size) +
         ", mini_batch_size " + std::to_string(c.mini_batch_size) + ", conv_kernel " + std::to_string(c.conv_kernel) +
         ", vocab_size " + std::to_string(c.vocab_size);
}

}  // namespace

std::vector<TensorShape> checkpoint_tensor_shapes(const ModelConfig& cfg) {
  cfg.validate();
  std::vector<TensorShape> out;
  out.push_back({"model.embed_tokens.weight", file_shape("model.embed_tokens.weight", cfg.vocab_size, cfg.hidden_size)});
  const std::vector<ParamShape> block = block_params(cfg);
  for (int i = 0; i < cfg.num_hidden_layers; ++i) {
    const std::string pre = "model.layers." + std::to_string(i) + ".";
    for (const ParamShape& p : block) out.push_back({pre + p.name, file_shape_of(p, cfg.num_attention_heads)});
  }
  out.push_back({"model.norm.weight", file_shape("model.norm.weight", 1, cfg.hidden_size)});
  return out;
}

void check_checkpoint_header(const ModelConfig& cfg, const SafetensorsFile& header) {
  const std::string src = clip(header.source(), 240);
  auto fail = [&](const std::string& msg) { throw SafetensorsError("'" + src + "': " + msg); };
  const std::vector<TensorShape> expected = checkpoint_tensor_shapes(cfg);
  std::map<std::string, const TensorShape*> want;
  for (const auto& t : expected) want.emplace(t.name, &t);
  const std::vector<std::int64_t> embed_shape = expected.front().shape;
  for (const TensorEntry& e : header.tensors()) {
    if (e.dtype != DType::F32 && e.dtype != DType::F64 && e.dtype != DType::BF16)
      fail("tensor '" + clip(e.name) + "' has dtype " + std::string(dtype_name(e.dtype)) +
           "; model weights must be F32, F64 or BF16");
    if (e.name == "lm_head.weight") {
      if (e.shape != embed_shape)
        fail("tensor 'lm_head.weight' has shape " + shape_str(e.shape) + ", but the head is tied to the embedding " +
             shape_str(embed_shape) + " (it must equal model.embed_tokens.weight, or be absent)");
      continue;
    }
    const auto it = want.find(e.name);
    if (it == want.end())
      fail("unexpected tensor '" + clip(e.name) + "' (" + config_hint(cfg) + "; does the config match the weights?)");
    if (e.shape != it->second->shape && !legacy_one_head_norm(e.name, e.shape, it->second->shape))
      fail("tensor '" + clip(e.name) + "' has shape " + shape_str(e.shape) + ", but " + config_hint(cfg) +
           " implies " + shape_str(it->second->shape));
  }
  for (const auto& t : expected)
    if (!header.find(t.name))
      fail("tensor '" + t.name + "' is missing (" + config_hint(cfg) + "; is this a checkpoint of this model?)");
}

std::vector<NamedTensor> state_dict(Model<float>& model) {
  std::vector<NamedTensor> out;
  for (auto& [name, slot] : layout(model)) {
    NamedTensor t{name, slot.shape, {}};
    for (auto& part : slot.parts) {
      if (slot.transpose) {
        const Mat<float> tr = part.transpose();
        t.data.insert(t.data.end(), tr.data(), tr.data() + tr.size());
      } else {
        t.data.insert(t.data.end(), part.data(), part.data() + part.size());
      }
    }
    out.push_back(std::move(t));
    if (out.back().name == "model.embed_tokens.weight") {
      // The tied LM head, stored again so that a strict load_state_dict finds it.
      NamedTensor head = out.back();
      head.name = "lm_head.weight";
      out.push_back(std::move(head));
    }
  }
  return out;
}

void load_state_dict(Model<float>& model, const std::vector<NamedTensor>& tensors, const std::string& source) {
  std::map<std::string, const NamedTensor*> by_name;
  for (const auto& t : tensors) by_name[t.name] = &t;
  auto fail = [&](const std::string& msg) { throw std::runtime_error("'" + clip(source, 240) + "': " + msg); };
  size_t used = 0;
  for (auto& [name, slot] : layout(model)) {
    auto it = by_name.find(name);
    if (it == by_name.end()) fail("tensor '" + name + "' is missing (is this a checkpoint of this model?)");
    const NamedTensor& t = *it->second;
    if (t.shape != slot.shape && !legacy_one_head_norm(name, t.shape, slot.shape))
      fail("tensor '" + name + "' has shape " + shape_str(t.shape) + ", the model needs " + shape_str(slot.shape));
    for (float v : t.data)
      if (!std::isfinite(v)) fail("tensor '" + name + "' holds a non-finite value");
    size_t offset = 0;
    for (auto& part : slot.parts) {
      const Eigen::Index n = part.size();
      if (slot.transpose)
        part = Eigen::Map<const Mat<float>>(t.data.data() + offset, part.cols(), part.rows()).transpose();
      else
        part = Eigen::Map<const Mat<float>>(t.data.data() + offset, part.rows(), part.cols());
      offset += static_cast<size_t>(n);
    }
    ++used;
  }
  // The LM head is tied to the embedding: stored again only so that a strict load_state_dict finds it.
  // Present, it must be that same matrix; a copy that differs is a damaged or foreign file.
  if (const auto head = by_name.find("lm_head.weight"); head != by_name.end()) {
    const NamedTensor& h = *head->second;
    const auto emb = by_name.find("model.embed_tokens.weight");
    if (emb == by_name.end() || h.shape != emb->second->shape)
      fail("tensor 'lm_head.weight' has shape " + shape_str(h.shape) +
           ", but the head is tied to the embedding (it must equal model.embed_tokens.weight, or be absent)");
    for (float v : h.data)
      if (!std::isfinite(v)) fail("tensor 'lm_head.weight' holds a non-finite value");
    if (h.data != emb->second->data)
      fail("tensor 'lm_head.weight' differs from model.embed_tokens.weight, but the head is tied to the embedding "
           "(a damaged file, or a model with an untied head, which TTT Lab does not support)");
    ++used;
  }
  if (used != by_name.size()) {
    for (const auto& t : tensors) {
      bool known = t.name == "lm_head.weight";
      for (auto& [name, slot] : layout(model)) known = known || name == t.name;
      if (!known) fail("unexpected tensor '" + clip(t.name) + "' (does the config match the weights?)");
    }
  }
}

void save_model_safetensors(Model<float>& model, const std::filesystem::path& path,
                            const std::vector<std::pair<std::string, std::string>>& metadata, bool bf16) {
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.set_checksum();  // verified on load; ignored by other readers
  // The model's config, covered by the digest: config.json beside the weights must say the same.
  w.set_metadata(k_config_metadata_key, model.config().to_json());
  for (const auto& [k, v] : metadata) w.set_metadata(k, v);
  for (const auto& t : state_dict(model))
    w.add(t.name, t.shape, std::span<const float>(t.data), bf16 ? DType::BF16 : DType::F32);
  w.write(path);
}

std::string non_finite_model_message(const std::string& source) {
  return "the model in '" + clip(source, 240) +
         "' gives non-finite outputs (NaN or infinity): its weights are damaged or its training diverged; use an "
         "earlier checkpoint";
}

void check_finite_forward(const Model<float>& model, const std::string& source) {
  static constexpr std::string_view probe =
      "The quick brown fox jumps over the lazy dog, and the dog sleeps on. It was a bright cold day.";
  const int window = std::max(1, std::min(k_finite_probe_bytes, model.config().max_position_embeddings));
  std::vector<int> tokens(static_cast<std::size_t>(window) + 1);
  const int vocab = model.config().vocab_size;  // bytes, folded into a smaller vocabulary
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<unsigned char>(probe[i % probe.size()]) % vocab;
  Vec<float> pos;
  const CrossEntropyStats st = model.eval_sequence(tokens, {}, &pos);
  if (!std::isfinite(st.loss_sum) || !pos.allFinite()) throw NonFiniteModelError(non_finite_model_message(source));
}

void load_model_safetensors(Model<float>& model, const std::filesystem::path& path, CheckpointLoadInfo* info) {
  // The header first: names, dtypes and shapes against the model's config, before the data is read.
  const SafetensorsFile header = SafetensorsFile::read_header(path, k_checkpoint_max_header);
  check_checkpoint_header(model.config(), header);
  const SafetensorsFile f = SafetensorsFile::read(path, header.file_size());
  if (const std::string* recorded = f.metadata_value(k_config_metadata_key)) {
    // Verified with the file: the config the weights were saved with. A config.json that says
    // otherwise (a flag flipped, a size changed) describes another model.
    const ModelConfig saved = ModelConfig::from_json(*recorded, path.string() + " (" + k_config_metadata_key + ")");
    if (saved.to_json() != model.config().to_json()) {
      const Json a = parse_json(saved.to_json(), "saved"), b = parse_json(model.config().to_json(), "given");
      std::string field;
      for (const auto& [k, v] : a.items())
        if (!b.contains(k) || b[k] != v) {
          field = k;
          break;
        }
      throw std::runtime_error("'" + clip(path.string(), 240) + "': config.json differs from the config the weights "
                               "were saved with (field '" + clip(field) + "'): the checkpoint was changed after it "
                               "was written");
    }
  }
  std::vector<NamedTensor> tensors;
  for (const auto& e : f.tensors()) tensors.push_back({e.name, e.shape, f.to_f32(e.name)});
  load_state_dict(model, tensors, path.string());
  if (info) {
    info->checksum_verified = f.checksum_verified();
    info->header_verified = f.header_verified();
    info->note.clear();
    if (!f.checksum_verified())
      info->note = "'" + clip(path.string(), 240) +
                   "' records no SHA-256 checksum (written by another tool or an older TTT Lab): loaded with "
                   "the structural checks only";
    else if (!f.header_verified())
      info->note = "'" + clip(path.string(), 240) +
                   "' records a SHA-256 of its tensor data only (an older TTT Lab): its header and metadata "
                   "are checked for structure but not verified";
  }
}

namespace fs = std::filesystem;

std::string checkpoint_name(long step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%07ld", step);
  return buf;
}

std::optional<long> checkpoint_step_of(const std::string& name) {
  if (name.rfind("step-", 0) != 0) return std::nullopt;
  const std::string digits = name.substr(5);
  if (digits.size() < 7 || digits.size() > 18) return std::nullopt;
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  return std::stol(digits);
}

fs::path resolve_checkpoint(const fs::path& dir) {
  if (dir.empty()) throw std::runtime_error("no checkpoint given: the path is empty");
  const std::string shown = clip(dir.string(), 240);
  std::error_code ec;
  if (fs::exists(dir / "model.safetensors", ec)) return dir;
  if (!fs::exists(dir, ec)) throw std::runtime_error("'" + shown + "' does not exist");
  if (!fs::exists(dir / "latest", ec))
    throw std::runtime_error("'" + shown + "' holds no checkpoint (no model.safetensors and no 'latest' file)");
  std::string name = read_file_text(dir / "latest", 256);
  if (!name.empty() && name.back() == '\n') name.pop_back();
  // Exactly a checkpoint name: a NUL byte, a carriage return or a path can never get through.
  if (!checkpoint_step_of(name))
    throw std::runtime_error("'" + clip((dir / "latest").string(), 240) +
                             "' is damaged: it must name a checkpoint such as step-0000500, but holds '" +
                             clip(name, 60) + "'");
  const fs::path ck = dir / name;
  if (!fs::exists(ck / "model.safetensors", ec))
    throw std::runtime_error("checkpoint '" + clip(ck.string(), 240) + "' named by 'latest' is missing");
  return ck;
}

namespace {

std::mutex g_note_mutex;
std::function<void(const std::string&)> g_note_handler;

void report_note(const std::string& note) {
  std::function<void(const std::string&)> handler;
  {
    std::lock_guard<std::mutex> lock(g_note_mutex);
    handler = g_note_handler;
    static std::set<std::string> said;  // once per file and process: the shipped model loads often
    if (!handler && !said.insert(note).second) return;
  }
  if (handler) handler(note);
  else std::fprintf(stderr, "tttlab: note: %s\n", note.c_str());
}

}  // namespace

void set_checkpoint_note_handler(std::function<void(const std::string&)> handler) {
  std::lock_guard<std::mutex> lock(g_note_mutex);
  g_note_handler = std::move(handler);
}

std::unique_ptr<Model<float>> load_model(const fs::path& dir) { return load_model(dir, ModelLoadOptions{}); }

std::unique_ptr<Model<float>> load_model(const fs::path& dir, const ModelLoadOptions& options) {
  const fs::path ck = resolve_checkpoint(dir);
  const fs::path cfg_path = ck / "config.json", weights = ck / "model.safetensors";
  const ModelConfig cfg = ModelConfig::from_json(read_file_text(cfg_path, 1 << 20), cfg_path.string());
  // Before anything is allocated for the model: the weights' header against the config, then the
  // memory the model will take against what the machine (or TTTLAB_MAX_MEMORY) allows.
  const SafetensorsFile header = SafetensorsFile::read_header(weights, k_checkpoint_max_header);
  check_checkpoint_header(cfg, header);
  check_memory(estimate_memory(cfg, MemoryUse{.window = options.window, .sequences = options.sequences,
                                              .file_bytes = header.file_size()}),
               "the model in '" + clip(ck.string(), 240) + "' (" +
                   std::to_string(static_cast<long long>(count_params(cfg))) + " parameters, windows of " +
                   std::to_string(options.window > 0 ? options.window : cfg.max_position_embeddings) + " bytes)");
  auto model = std::make_unique<Model<float>>(cfg, 0);
  CheckpointLoadInfo info;
  load_model_safetensors(*model, weights, &info);
  check_finite_forward(*model, ck.string());
  if (options.info) *options.info = info;
  else if (!info.note.empty()) report_note(info.note);
  return model;
}

}  // namespace tttlab
