// app/lab/recall/recall_types.hpp — the recall lab: how many key-value pairs a state of width d can
// store and give back, for every memory of recall::Memory at equal width: TTT-Linear, TTT-MLP, linear
// attention, softmax attention, Mamba-2, DeltaNet, Gated DeltaNet, Titans and LaCT (core:
// tttlab/analysis/recall.hpp; the maths in docs/MATH.md §9.4). Every memory is computed; the panel
// plots the ones the student ticks.
//
// Two results:
//   accuracy   for every P of the list, the fraction of the P pairs each memory answers right after
//              reading all of them, over `sequences` episodes (episode s of P pairs is
//              recall::make_episode(P, seed, s); the embedding is recall::Embedding(d, seed));
//   map        the forgetting map of one memory at P = map_pairs: entry (t, i), i ≤ t, is the
//              fraction of episodes in which pair i is recalled right after pair t was read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lab/engine/job.hpp"
#include "lab/primal_dual/primal_dual_types.hpp"  // JobOutcome
#include "tttlab/analysis/recall.hpp"

namespace tttlab::lab {

struct RecallSettings {
  int width = 32;                                // d
  std::vector<int> pairs = {4, 8, 16, 32, 64, 128};  // P, increasing, each in [1, 160]
  int sequences = 16;                            // episodes per P (and for the map)
  std::uint64_t seed = 0;                        // episodes, embedding, TTT-MLP's W₁
  std::string map_memory = "ttt_linear";         // recall::memory_id of the map's memory
  int map_pairs = 64;                            // P of the forgetting map, in [2, 160]
  double eta_linear = 1.0;                       // TTT-Linear's step η, in (0, 2)
  double mamba_decay = recall::kMambaDecay;      // Mamba-2's decay a per pair, in (0, 1]
  bool operator==(const RecallSettings&) const = default;
};

struct RecallView : JobView {
  RecallSettings settings;
  double eta_mlp = 0, softmax_beta = 0;        // the fixed constants, for the legend
  recall::MemoryParams params;                 // every memory's parameters, as run
  // accuracy[memory][j]: the fraction right at P = settings.pairs[j] over the episodes done
  // (memory in recall::Memory order, all recall::kMemories of them); episodes_done[j] of
  // settings.sequences.
  std::vector<std::vector<double>> accuracy;
  std::vector<int> episodes_done;
  // state_size[memory][j]: numbers held after settings.pairs[j] pairs.
  std::vector<std::vector<double>> state_size;
  // The forgetting map, [map_pairs × map_pairs] row-major, means over map_episodes_done episodes.
  std::vector<double> map;
  int map_episodes_done = 0;
  bool complete() const { return outcome == JobOutcome::Done; }
};

// Compute the lab for these settings (cancels the computation in progress).
struct RecallRun {
  RecallSettings settings;
};

}  // namespace tttlab::lab
