// The small models and training runs the core tests build: sizes that train in milliseconds on one
// core yet keep two heads, more than one mini-batch per window and (for the larger one) two blocks,
// so that every path of the model is exercised. Written as designated initialisers, a test names
// only the sizes it cares about; every field it leaves out keeps the value written here, and every
// field not listed here keeps ModelConfig's or TrainConfig's own default.
#pragma once

#include <cstdint>
#include <filesystem>

#include "tttlab/model/config.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab::testing {

// A model's sizes. The defaults are the one-block, 16-wide model of the session tests.
struct TinyModel {
  int hidden = 16;
  int heads = 2;
  int layers = 1;
  int intermediate = 32;
  int mini_batch = 4;
  int positions = ModelConfig{}.max_position_embeddings;
  SeqLayerKind seq_layer = SeqLayerKind::TTTLinear;
  bool mamba = true;
};

// The two-block, 32-wide model with mini-batches of 8 that the trainer tests train for longer.
inline const TinyModel kSmallModel{.hidden = 32, .layers = 2, .intermediate = 64, .mini_batch = 8};

inline ModelConfig tiny_model(const TinyModel& m = {}) {
  ModelConfig c;
  c.hidden_size = m.hidden;
  c.num_attention_heads = m.heads;
  c.num_hidden_layers = m.layers;
  c.intermediate_size = m.intermediate;
  c.mini_batch_size = m.mini_batch;
  c.max_position_embeddings = m.positions;
  c.seq_layer = m.seq_layer;
  c.mamba_backbone = m.mamba;
  return c;
}

// The inner learning rate the official models use: 1.0 for TTT-Linear, 0.1 for TTT-MLP.
inline double official_base_lr(SeqLayerKind kind) { return kind == SeqLayerKind::TTTMLP ? 0.1 : 1.0; }

// A run's sizes; every test names its own seed.
struct TinyRun {
  long steps = 0;
  int batch = 2;
  int seq_len = 16;
  double lr = 1e-2;
  std::uint64_t seed = 0;
  int threads = 1;
  int eval_windows = TrainConfig{}.eval_windows;
};

// A run of `model` on `corpus` (a text file, or a synthetic task's name), its position table exactly
// the training window (as the app's presets have it).
inline TrainConfig tiny_train_config(const std::filesystem::path& corpus, const TinyRun& run,
                                     const TinyModel& model = {}) {
  TrainConfig c;
  c.model = tiny_model(model);
  c.model.max_position_embeddings = run.seq_len;
  c.data = corpus.string();
  c.steps = run.steps;
  c.batch_size = run.batch;
  c.seq_len = run.seq_len;
  c.lr = run.lr;
  c.seed = run.seed;
  c.threads = run.threads;
  c.eval_windows = run.eval_windows;
  return c;
}

}  // namespace tttlab::testing
