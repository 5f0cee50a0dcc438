// Model weights <-> the official ttt-lm-pytorch state_dict layout (see tttlab/model/checkpoint.hpp).
//
// The walk is driven by Model::for_each_param, whose names are already the official ones except for
// the per-head inner state ("...W1[h]"), which is stacked over heads here. Each internal tensor maps to
// a file tensor by one of four rules: transposed (nn.Linear weights, stored [out, in]), depthwise conv
// ([D, K] -> [D, 1, K]), per-head rows with a unit middle axis (θ_lr [H, D] -> [H, 1, D], β_lr [H] ->
// [H, 1]), or as is (vectors and [H, d] norms).
#include "tttlab/model/checkpoint.hpp"

#include <cmath>
#include <map>
#include <stdexcept>

#include "tttlab/io/safetensors.hpp"

namespace tttlab {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_linear_weight(const std::string& n) {
  for (const char* s : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight", "g_proj.weight",
                        "gate_proj.weight", "up_proj.weight", "down_proj.weight"})
    if (ends_with(n, s)) return true;
  return false;
}

bool is_conv_weight(const std::string& n) {
  return ends_with(n, "conv.conv.weight") || ends_with(n, "conv_q.weight") || ends_with(n, "conv_k.weight");
}

// "prefix.W1[3]" -> ("prefix.W1", 3); -1 when not a per-head tensor.
std::pair<std::string, int> split_head(const std::string& n) {
  const auto open = n.rfind('[');
  if (open == std::string::npos || n.back() != ']') return {n, -1};
  return {n.substr(0, open), std::stoi(n.substr(open + 1, n.size() - open - 2))};
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
    if (is_linear_weight(name)) {
      s.transpose = true;
      s.shape = {m.cols(), m.rows()};
    } else if (is_conv_weight(name)) {
      s.shape = {m.rows(), 1, m.cols()};
    } else if (ends_with(name, "learnable_ttt_lr_weight")) {
      s.shape = {m.rows(), 1, m.cols()};
    } else if (ends_with(name, "learnable_ttt_lr_bias")) {
      s.shape = {m.cols(), 1};
    } else if (m.rows() == 1) {
      s.shape = {m.cols()};
    } else {
      s.shape = {m.rows(), m.cols()};
    }
    out.emplace_back(name, std::move(s));
  });
  return out;
}

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

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
  auto fail = [&](const std::string& msg) { throw std::runtime_error("'" + source + "': " + msg); };
  size_t used = 0;
  for (auto& [name, slot] : layout(model)) {
    auto it = by_name.find(name);
    if (it == by_name.end()) fail("tensor '" + name + "' is missing (is this a checkpoint of this model?)");
    const NamedTensor& t = *it->second;
    if (t.shape != slot.shape)
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
  if (by_name.count("lm_head.weight")) ++used;
  if (used != by_name.size()) {
    for (const auto& t : tensors) {
      bool known = t.name == "lm_head.weight";
      for (auto& [name, slot] : layout(model)) known = known || name == t.name;
      if (!known) fail("unexpected tensor '" + t.name + "' (does the config match the weights?)");
    }
  }
}

void save_model_safetensors(Model<float>& model, const std::filesystem::path& path,
                            const std::vector<std::pair<std::string, std::string>>& metadata, bool bf16) {
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  for (const auto& [k, v] : metadata) w.set_metadata(k, v);
  for (const auto& t : state_dict(model))
    w.add(t.name, t.shape, std::span<const float>(t.data), bf16 ? DType::BF16 : DType::F32);
  w.write(path);
}

void load_model_safetensors(Model<float>& model, const std::filesystem::path& path) {
  const SafetensorsFile f = SafetensorsFile::read(path);
  std::vector<NamedTensor> tensors;
  for (const auto& e : f.tensors()) {
    // Weights are floating point; an integer tensor here is a damaged or foreign file.
    if (e.dtype == DType::U8 || e.dtype == DType::I64)
      throw SafetensorsError("safetensors file '" + path.string() + "': tensor '" + e.name + "' has dtype " +
                             std::string(dtype_name(e.dtype)) + "; model weights must be F32, F64 or BF16");
    tensors.push_back({e.name, e.shape, f.to_f32(e.name)});
  }
  load_state_dict(model, tensors, path.string());
}

}  // namespace tttlab
