// tttlab/data/synthetic.hpp — synthetic sequence tasks over the byte vocabulary: multi-query
// associative recall (MQAR) and copying. They probe what a sequence layer can store in its state:
// TTT layers, linear attention and attention differ sharply on them.
//
// Both generators return TokenBatch rows of T + 1 tokens with a loss mask [B, T] that marks the
// only targets that count (the answers); everything else is context or padding. Batch k of seed s
// is a pure function of (config, B, s, k), drawn from Rng(s, stream = k), so a run resumes from the
// batch index alone. Symbols are readable characters by default, so rows print as text in the GUI.
//
// MQAR (Arora et al., "Zoology", 2023, in a compact byte layout). One row:
//
//     k1 v1 k2 v2 … kP vP  |  q1 a1 q2 a2 … qQ aQ  . . . .
//     └─ P key-value pairs ┘ sep └── Q queries, answers ─┘ padding up to T + 1 tokens
//
//   - keys: P distinct symbols drawn from `keys`; values: drawn from `values` independently (they may
//     repeat, so a value alone does not reveal its key);
//   - queries: Q distinct keys chosen among the P, in random order; a_i is the value paired with q_i;
//   - mask: 1 exactly at the Q positions t whose input is a query key q_i (target a_i), 0 elsewhere.
//   Needs 1 ≤ Q ≤ P ≤ |keys| and 2P + 1 + 2Q ≤ T + 1. Example (P = 3, Q = 2): "a4c7x1|x1a4....".
//
// COPY. One row:
//
//     x1 x2 … xL  |  x1 x2 … xL  . . . .
//
//   - L uniform in [min_len, max_len], symbols drawn uniformly (with repetition) from `alphabet`;
//   - mask: 1 at positions t = L … 2L − 1, whose targets are the copied symbols x1 … xL.
//   Needs 1 ≤ min_len ≤ max_len and 2·max_len + 1 ≤ T + 1. Example (L = 4): "dbba|dbba.....".
//
// Alphabets must hold distinct bytes; keys and values must be disjoint; the separator and the pad
// byte must differ from each other and from every symbol. A bad config throws std::invalid_argument
// with a one-line message (validate() runs it without generating).
#pragma once

#include <cstdint>
#include <string>

#include "tttlab/data/batches.hpp"

namespace tttlab {

struct MqarConfig {
  int seq_len = 64;   // T
  int num_pairs = 8;  // P
  int num_queries = 8;  // Q
  std::string keys = "abcdefghijklmnopqrstuvwxyz";
  std::string values = "0123456789";
  char separator = '|';
  char pad = '.';

  void validate() const;
};

struct CopyConfig {
  int seq_len = 64;  // T
  int min_len = 8;   // L range
  int max_len = 16;
  std::string alphabet = "abcdefghijklmnopqrstuvwxyz";
  char separator = '|';
  char pad = '.';

  void validate() const;
};

TokenBatch mqar_batch(const MqarConfig& config, int batch, std::uint64_t seed, std::uint64_t index);
TokenBatch copy_batch(const CopyConfig& config, int batch, std::uint64_t seed, std::uint64_t index);

}  // namespace tttlab
