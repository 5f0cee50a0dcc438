// tttlab/model/memory.hpp — how much memory a model will take, estimated from its config alone, so
// that loaders can refuse (tttlab/io/limits.hpp: check_memory) before they allocate.
//
// THE ESTIMATE (bytes; S = 4, the engine computes in float). It is meant to be simple and on the
// generous side (within a small factor of what is measured), not exact:
//   P           parameters, counted exactly from the config (count_params)
//   weights     S · P · copies, copies = 1 for inference, 3 + gradient buffers + 3 for training
//               (the model, AdamW's two moments, one gradient model per worker thread, and what saving
//               a checkpoint holds at its peak: two encoded copies and a margin)
//   loading     the checkpoint file's bytes plus a float copy of every tensor (transient, while loading)
//   activations S · T · n · A, for n sequences of T tokens computed at once (T: the window, the
//               model's max_position_embeddings unless the command says otherwise), where per token
//               A = L · (16·D + 4·F + per-layer term) + 3·V
//               16·D + 4·F: the block's activations kept for the backward (norms, projections,
//                           the SwiGLU's three F-wide products); 3·V: logits and their softmax;
//               per-layer term: TTT layers H·2b (the dual form's b × b matrices per mini-batch) plus
//                           H·(inner state size)/b (one state per mini-batch for the backward);
//                           softmax attention H·T (the score matrix); linear attention H·d;
//                           Mamba-2 its cache (in_proj's output, the convolution twice, dt, the scan's
//                           output, gate and norm) plus H·P·N/Q (a state per chunk) and 3·Q (the
//                           chunk's Q × Q matrices).
#pragma once

#include <cstdint>

#include "tttlab/model/config.hpp"

namespace tttlab {

// The number of parameters of a model of this config (what Model::num_params() will count), without
// building it. cfg must be valid (ModelConfig::validate()).
double count_params(const ModelConfig& cfg);

struct MemoryUse {
  long window = 0;              // T; 0: cfg.max_position_embeddings
  long sequences = 1;           // sequences computed at once
  long gradient_copies = -1;    // training: gradient models (one per thread); -1: inference
  std::uint64_t file_bytes = 0; // a checkpoint file read while loading (0: none)
};

// The estimate above, in bytes (saturating at UINT64_MAX).
std::uint64_t estimate_memory(const ModelConfig& cfg, const MemoryUse& use);

}  // namespace tttlab
