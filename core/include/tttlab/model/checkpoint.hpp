// tttlab/model/checkpoint.hpp — model weights in the official ttt-lm-pytorch layout.
//
// model.safetensors holds exactly the state_dict of ttt-lm-pytorch's TTTForCausalLM for the same
// config (docs/MATH.md §8.4): the same names and shapes, nn.Linear weights as [out, in] (our [in, out]
// transposed), convs as [D, 1, K], learnable_ttt_lr_weight as [H, 1, D], the inner state W1/b1 (and
// W2/b2) stacked over heads as [H, d_in, d_out] / [H, 1, d_out], and the tied head stored again as
// lm_head.weight so that a strict load_state_dict finds it. Tensors of our own variants (the attention
// baselines' q/k/v/o projections) keep names of the same pattern. dtype F32.
//
// Saving records, in the safetensors __metadata__ (which PyTorch and the official loader ignore), the
// model's config ("tttlab_config", the text of config.json) and a SHA-256 of the whole file
// ("tttlab_sha256"; io/safetensors.hpp: INTEGRITY), which covers that config, the header and the data.
// Loading refuses a config.json that differs from the recorded config.
//
// Reading checks, in this order, and refuses with a one-line message naming the file and the tensor:
//   1. the header alone (at most k_checkpoint_max_header bytes; the data is not read yet): every tensor
//      the config implies is present with the shape the config implies (checkpoint_tensor_shapes), no
//      other tensor is, every dtype is F32, F64 or BF16, and lm_head.weight, when present, has the
//      embedding's shape;
//   2. the whole file: everything the safetensors reader refuses (truncation, overlaps, ...) and the
//      recorded SHA-256 when there is one (a file without one, e.g. from another tool, loads; the
//      CheckpointLoadInfo says so);
//   3. the values: every tensor finite, and lm_head.weight, when present, equal to
//      model.embed_tokens.weight (the head is tied: equal to the embedding, or absent).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <memory>
#include <functional>
#include <stdexcept>
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
// What loading found beyond success.
struct CheckpointLoadInfo {
  bool checksum_verified = false;  // a recorded SHA-256 matched the file
  bool header_verified = false;    // ... and covered the header and metadata (io/safetensors.hpp)
  std::string note;                // one line for the user when there was none to verify; else empty
};
inline constexpr std::uint64_t k_checkpoint_max_header = 16ull << 20;
inline constexpr const char* k_config_metadata_key = "tttlab_config";

void load_model_safetensors(Model<float>& model, const std::filesystem::path& path,
                            CheckpointLoadInfo* info = nullptr);

// The tensors (names and file shapes, lm_head.weight excluded) that model.safetensors holds for
// `cfg`, computed from the config alone (no model is built). Throws what cfg.validate() throws.
struct TensorShape {
  std::string name;
  std::vector<std::int64_t> shape;
};
std::vector<TensorShape> checkpoint_tensor_shapes(const ModelConfig& cfg);
// Step 1 above, on a header read with SafetensorsFile::read_header. Throws SafetensorsError.
void check_checkpoint_header(const ModelConfig& cfg, const SafetensorsFile& header);

// ---- One rule for every reader: a model whose forward is not finite is refused ----
// Finite weights do not make a finite model: weights grown huge by a diverging run overflow in the
// forward. Every command and panel that reads a model refuses such a model with the same message.
class NonFiniteModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// "the model in 'SOURCE' gives non-finite outputs (NaN or infinity): its weights are damaged or its
// training diverged; use an earlier checkpoint"
std::string non_finite_model_message(const std::string& source);
// Runs `model` on a fixed probe text (k_finite_probe_bytes bytes of English, fewer when the model's
// window is shorter) and throws NonFiniteModelError with the message above when a loss is not
// finite. load_model does this for every model it returns.
inline constexpr int k_finite_probe_bytes = 64;
void check_finite_forward(const Model<float>& model, const std::string& source);

// ---- Checkpoint directories and loading a model from one ----
// "step-0000500": the directory name of the checkpoint of `step`.
std::string checkpoint_name(long step);
// The step of a checkpoint directory name ("step-" and 7 or more digits, nothing else); nothing otherwise.
std::optional<long> checkpoint_step_of(const std::string& name);

// Where a run directory's newest checkpoint lives (RUN/<latest>), or RUN itself when it holds a
// model.safetensors directly. Throws std::runtime_error with a clear message when there is none.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& dir);

// Loads config.json + model.safetensors of a checkpoint directory (as resolve_checkpoint finds it).
// Before allocating the model it reads config.json (at most 1 MiB; ModelConfig::from_json validates it)
// and the weights' header only, checks the header against the config (checkpoint.hpp), and checks the
// memory estimate (model/memory.hpp) for `window` and `sequences` against the budget (io/limits.hpp:
// the machine's available memory or TTTLAB_MAX_MEMORY). Then the weights are read and verified
// (checksum, finiteness, the tied head). Only regular files are read. Errors are one line naming the
// file. A checkpoint without a checksum loads with a note: into options.info when given, else to the
// note handler (below).
struct ModelLoadOptions {
  long window = 0;                      // bytes per window the command computes (0: max_position_embeddings)
  long sequences = 1;                   // windows computed at once
  CheckpointLoadInfo* info = nullptr;   // receives the checksum status and the note
};
std::unique_ptr<Model<float>> load_model(const std::filesystem::path& dir);
std::unique_ptr<Model<float>> load_model(const std::filesystem::path& dir, const ModelLoadOptions& options);
// Where load_model's notes go when the caller did not ask for them: by default one line on stderr,
// "tttlab: note: ...", once per distinct note and process. An empty handler restores the default.
void set_checkpoint_note_handler(std::function<void(const std::string&)> handler);

}  // namespace tttlab
