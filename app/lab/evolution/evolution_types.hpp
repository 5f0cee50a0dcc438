// app/lab/evolution/evolution_types.hpp — the hidden state W_t of one head over a whole sequence.
//
// The head (head_config.hpp: any block and head of a model, TTT-Linear or TTT-MLP, or a toy head) runs
// in the primal form over the whole text; for every token the module keeps W_t and its summaries:
// the drift ‖W_t − W_0‖_F, ‖W_t‖_F and the singular values of W_t and of W_t − W_0 (for TTT-MLP, of
// both layers' matrices).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lab/engine/head_config.hpp"
#include "tttlab/tensor.hpp"

namespace tttlab::lab {

struct EvolutionStep {
  Mat<float> w1, w2;                 // W1_t [d, d|4d] and (MLP) W2_t [4d, d]
  double drift1 = 0, drift2 = 0;     // ‖W_t − W_0‖_F per matrix
  double norm1 = 0, norm2 = 0;       // ‖W_t‖_F
  double loss_before = 0, loss_after = 0;
  std::vector<float> sv1, sv2;       // singular values of W1_t, W2_t (descending)
  std::vector<float> dsv1, dsv2;     // singular values of W1_t − W1_0, W2_t − W2_0
};

struct EvolutionView {
  HeadConfig config;
  std::uint64_t generation = 0;
  std::string error;
  std::string description;
  std::string device;       // where the head's inputs were computed, in words
  std::string device_note;  // why the CPU although a GPU is in use, or ""
  std::vector<unsigned char> bytes;
  int d = 0;
  int mini_batch = 0;
  bool mlp = false;
  std::shared_ptr<const EvolutionStep> w0;  // W_0 (drifts 0)
  std::vector<std::shared_ptr<const EvolutionStep>> steps;  // tokens 0 .. computed−1
  bool done = false;
  // Following a training run (MODEL source): the library version and training step of the weights
  // (step −1: not a run's checkpoint), and how many times newer weights arrived since the config was set.
  std::uint64_t model_version = 0;
  long model_step = -1;
  int reloads = 0;
  long tokens() const { return static_cast<long>(bytes.size()); }
};

struct EvolutionConfigure {
  HeadConfig config;
};

}  // namespace tttlab::lab
