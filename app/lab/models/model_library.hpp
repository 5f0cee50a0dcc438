// app/lab/models/model_library.hpp — the language models the panels run, shared by every engine
// module: the trained model that ships in assets/, checkpoints the user opens or trains, and freshly
// initialised (untrained) models for comparison.
//
// Models are identified by strings that state files store:
//   "shipped"                          assets/models/tiny-brown (resources.hpp says where it is looked for)
//   "shipped:<name>"                   assets/models/<name>, another model that ships with the app (the
//                                      course's comparisons: TTT-MLP, the Transformer backbone, the
//                                      long-context models; assets/models/README.md lists them)
//   "file:<path>"                      a checkpoint or run directory (tttlab::load_model)
//   "random:<layer>:<backbone>:<seed>" the tiny preset with that sequence layer ("ttt-linear", "ttt-mlp",
//                                      "linear-attention", "softmax-attention") and backbone ("m", "t"),
//                                      initialised from the seed and not trained
// A model is loaded on first use and then shared, immutable (Model is const while it computes, so
// any number of modules and threads may run it at once). Variants with another inner mini-batch
// size b or η_base (ModelOverrides) are derived once and cached: same weights, the config changed;
// δ (learnable_token_idx, one entry per mini-batch position) is cut or padded with zeros.
//
// Threading: the library belongs to the engine thread (modules hold a shared_ptr to it). The
// training thread never touches it; the training module registers checkpoints on the engine thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tttlab/model/model.hpp"

namespace tttlab::lab {

inline constexpr const char* kShippedModelId = "shipped";
inline constexpr const char* kShippedModelPath = "assets/models/tiny-brown";
inline constexpr const char* kShippedModelsFolder = "assets/models";
// Not a model: a view whose model id is this follows the training: it waits for the next checkpoint
// that a training run saves after the view was asked for, then shows the newest run's checkpoints
// (ModelLibrary::newest_put) as they arrive. State files and lessons use it.
inline constexpr const char* kFollowTrainingId = "training";

// Not a model either: "shipped-run:<name>" names the checkpoints of a training run that ships with the
// app, assets/models/<name>/checkpoint-<step>/ (assets/models/README.md says which run and how it is made).
// The inner-loss curves replay them in step order, as if they followed that run while it trained, so
// that a lesson that follows a run can be taken without training it.
inline constexpr const char* kShippedRunPrefix = "shipped-run:";

// "shipped" or "shipped:<name>".
bool is_shipped_id(const std::string& id);
// "shipped-run:<name>".
bool is_shipped_run_id(const std::string& id);
struct ShippedCheckpoint {
  long step = 0;
  std::filesystem::path dir;  // config.json + model.safetensors
};
// The checkpoints of the shipped run `id` names, by step. Throws std::runtime_error with a one-line
// message when the name is not a plain folder name (as shipped_model_name), the folder is not found,
// or it holds no checkpoint.
std::vector<ShippedCheckpoint> shipped_run_checkpoints(const std::string& id);
// The <name> of a "shipped:<name>" id, "" for any other id. Throws std::runtime_error when the name
// is not a plain folder name (letters, digits, '-', '_', '.'; not "." or ".."), so an id read from a
// state file cannot reach outside assets/models.
std::string shipped_model_name(const std::string& id);

// What a panel needs to know about a model without touching it (part of the snapshot).
struct ModelInfo {
  std::string id;
  std::string label;        // "tiny-brown (shipped, trained)", "untrained TTT-MLP (seed 0)", …
  std::string path;         // checkpoint folder, empty for random models
  bool loaded = false;      // false: listed but not loaded yet (or failed: see error)
  std::string error;        // why it cannot be loaded
  std::string note;         // loaded, with a remark (e.g. no checksum recorded to verify the weights)
  // Loaded, but its forward is not finite (non_finite_model_message): a model that reached the
  // library without load_model's check, e.g. a training run's checkpoint after the run diverged.
  std::string warning;
  ModelConfig config;       // valid when loaded or config_known
  bool config_known = false;  // config read before loading (random models, shipped models' config.json)
  long params = 0;
  bool trained = false;     // from a checkpoint (shipped or file)
  // How many times put() replaced the model under this id (0: the first model it holds). A training
  // run puts each checkpoint it saves under the run's id, so a view that remembers the version it was
  // computed with knows when newer weights arrived (and follows the run: curves, stepper, evolution).
  std::uint64_t version = 0;
  long step = -1;           // the training step of these weights, where put() was told (−1: unknown)

  bool ttt() const { return loaded && config.is_ttt(); }
  std::string layer_name() const;  // "TTT-Linear", "TTT-MLP", "linear attention", "softmax attention"
  // "TTT-Linear · Mamba backbone · 4 blocks × 4 heads, d = 32, b = 16 · 0.47 M parameters"
  std::string summary() const;
};

struct LibraryView {
  std::uint64_t generation = 0;
  std::vector<ModelInfo> models;  // the shipped model first, then opened checkpoints, then random ones
  const ModelInfo* find(const std::string& id) const;
};

// Changes applied to a model's config (0 = keep the model's own value).
struct ModelOverrides {
  int mini_batch = 0;    // b
  double base_lr = 0.0;  // η_base
  bool operator==(const ModelOverrides&) const = default;
  bool any() const { return mini_batch > 0 || base_lr > 0.0; }
};

// The config of model `id` where it can be read without loading the model (any thread: it reads a
// small file at most): shipped models and checkpoint folders with a config.json, and random ids.
// Nothing for other ids, or when the file is missing or unreadable (loading reports that).
std::optional<ModelConfig> config_without_loading(const std::string& id);

// The tiny preset with another layer kind/backbone, as random model ids use it.
std::string random_model_id(const std::string& layer, bool mamba, std::uint64_t seed);

class ModelLibrary {
 public:
  ModelLibrary();

  // Lists "shipped", every other folder of assets/models as "shipped:<name>" (not loaded yet) and two
  // untrained TTT models.
  // The model `id`, loaded on first use. Throws std::runtime_error with a one-line message (unknown
  // id, missing files, a bad checkpoint, invalid overrides).
  std::shared_ptr<const Model<float>> get(const std::string& id, const ModelOverrides& overrides = {});
  // Adds a checkpoint (run directory or checkpoint directory) and returns its id; throws as get().
  std::string open_checkpoint(const std::filesystem::path& dir);
  // Registers a model built elsewhere (e.g. a training run's checkpoint, `step` its training step);
  // replaces one of that id and then raises its version (ModelInfo::version) by one.
  void put(const std::string& id, const std::string& label, const std::string& path,
           std::shared_ptr<const Model<float>> model, bool trained, long step = -1);
  // The id of the newest put() ("" before any): the training run whose checkpoint arrived last, and
  // how many put()s there were. The inner-loss curves resolve the model id kFollowTrainingId to it.
  const std::string& newest_put() const { return m_newest_put; }
  std::uint64_t puts() const { return m_puts; }

  // Increases whenever the list or a model's state changes.
  std::uint64_t generation() const { return m_generation; }
  std::shared_ptr<const LibraryView> view();

 private:
  struct Entry {
    ModelInfo info;
    std::shared_ptr<const Model<float>> model;
    std::map<std::pair<int, double>, std::shared_ptr<const Model<float>>> variants;
  };
  Entry& entry(const std::string& id);  // creates listed-but-unloaded entries for known ids
  void load(Entry& e);
  void list_shipped();  // an entry for every model folder of assets/models

  std::vector<std::unique_ptr<Entry>> m_entries;
  std::uint64_t m_generation = 1;
  std::shared_ptr<const LibraryView> m_view;
  std::uint64_t m_view_generation = 0;
  std::string m_newest_put;
  std::uint64_t m_puts = 0;
  std::uint64_t m_late_generation = 0;  // late_resources_generation() when the shipped models were listed
};

// What non_finite_model_message names for model `id`: its folder where it has one, else its label (the
// id itself when the library does not list it).
std::string model_source(const LibraryView& view, const std::string& id);

// Values a float model cannot hold: not finite, or beyond float's range. Views that compute in double
// on a float model's inputs would otherwise show an overflowed forward as 1e54 instead of infinity.
bool beyond_float(double x);
template <class Derived>
bool any_beyond_float(const Eigen::DenseBase<Derived>& m) {
  for (Eigen::Index c = 0; c < m.cols(); ++c)
    for (Eigen::Index r = 0; r < m.rows(); ++r)
      if (beyond_float(static_cast<double>(m(r, c)))) return true;
  return false;
}

// A copy of `m` with the config changed by `o` (same weights; δ cut or zero-padded to the new b).
std::unique_ptr<Model<float>> derive_model(const Model<float>& m, const ModelOverrides& o);

}  // namespace tttlab::lab
