// tttlab/model/checkpoint.hpp — model weights in the official ttt-lm-pytorch layout.
//
// model.safetensors holds exactly the state_dict of ttt-lm-pytorch's TTTForCausalLM for the same
// config (docs/MATH.md §8.4): the same names and shapes, nn.Linear weights as [out, in] (our [in, out]
// transposed), convs as [D, 1, K], learnable_ttt_lr_weight as [H, 1, D], the inner state W1/b1 (and
// W2/b2) stacked over heads as [H, d_in, d_out] / [H, 1, d_out], and the tied head stored again as
// lm_head.weight so that a strict load_state_dict finds it. Tensors of our own variants (the attention
// baselines' q/k/v/o projections) keep names of the same pattern. dtype F32.
//
// Reading refuses, with a one-line message naming the file and tensor: a missing or extra tensor, a
// wrong shape, a non-finite value, and everything the safetensors reader refuses (truncation, ...).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tttlab/model/model.hpp"

namespace tttlab {

class SafetensorsWriter;
class SafetensorsFile;

struct NamedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> data;  // row-major in `shape`
};

// The official state_dict of `model` (copies).
std::vector<NamedTensor> state_dict(Model<float>& model);
// Loads a state_dict into `model` (whose config must match); throws std::runtime_error naming the
// tensor on any mismatch.
void load_state_dict(Model<float>& model, const std::vector<NamedTensor>& tensors, const std::string& source);

// model.safetensors (with the given metadata) and its reverse.
// `bf16` stores every tensor as bfloat16 (half the size; what the shipped asset model uses) instead of
// F32. Loading converts either to float.
void save_model_safetensors(Model<float>& model, const std::filesystem::path& path,
                            const std::vector<std::pair<std::string, std::string>>& metadata = {},
                            bool bf16 = false);
void load_model_safetensors(Model<float>& model, const std::filesystem::path& path);

}  // namespace tttlab
