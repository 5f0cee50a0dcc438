// tttlab/data/batches.hpp — training and validation batches of byte windows.
//
// A TokenBatch holds B rows of T + 1 consecutive tokens, row-major [B, T+1]: row b feeds the model
// inputs tokens[b, 0..T−1] and is scored on targets tokens[b, 1..T] (next-token prediction; target t
// is the token after input t). An optional loss mask [B, T] says which targets count (synthetic
// tasks score only their answers); an empty mask means every target counts.
//
// TRAINING: RandomWindowSampler draws B windows with start positions uniform over all N − T valid
// starts 0 .. N − T − 1 of an N-token array (with replacement, independently per row and per batch).
// Batch k of seed s is a pure function of (data, B, T, s, k): it uses its own generator
// Rng(s, stream = k). The sampler's whole state is therefore {seed, index of the next batch}:
// SamplerState, serialisable as two uint64 words, and resuming from it reproduces the exact batches
// an uninterrupted run would have seen. batch_at(k) gives any batch without advancing.
//
// VALIDATION: SequentialWindows cuts the array into W = ⌊(N − 1) / T⌋ windows that overlap by one
// token, window w = tokens [w·T, w·T + T] (T + 1 tokens), so every target position 1 .. W·T is scored
// exactly once and the split is the same for every model and run. The last N − 1 − W·T targets
// (fewer than T) are not scored. max_windows > 0 keeps only the first windows (cheaper, still fixed).
// Batches are windows in order, B per batch; the last batch may have fewer rows. The position (the
// next batch index) is the state.
//
// Data ownership: both classes keep a view of the caller's token array, which must outlive them and
// not change. Not thread-safe on one object; batch_at is const and may run concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "tttlab/data/tokenizer.hpp"

namespace tttlab {

struct TokenBatch {
  int batch = 0;                      // B (rows actually present)
  int seq_len = 0;                    // T
  std::vector<Token> tokens;          // [B, T+1] row-major
  std::vector<std::uint8_t> mask;     // [B, T] 1 = target counts; empty = all count
  std::vector<std::int64_t> starts;   // [B] offset of each row in the source array (−1 for synthetic rows)

  Token at(int b, int t) const { return tokens[static_cast<std::size_t>(b) * (seq_len + 1) + t]; }
  Token input(int b, int t) const { return at(b, t); }
  Token target(int b, int t) const { return at(b, t + 1); }
  bool counts(int b, int t) const { return mask.empty() || mask[static_cast<std::size_t>(b) * seq_len + t] != 0; }
  std::int64_t counted_targets() const;
  std::span<const Token> row(int b) const {
    return {tokens.data() + static_cast<std::size_t>(b) * (seq_len + 1), static_cast<std::size_t>(seq_len + 1)};
  }
};

struct SamplerState {
  std::uint64_t seed = 0;
  std::uint64_t next_batch = 0;
  std::array<std::uint64_t, 2> to_words() const { return {seed, next_batch}; }
  static SamplerState from_words(const std::array<std::uint64_t, 2>& w) { return {w[0], w[1]}; }
  friend bool operator==(const SamplerState&, const SamplerState&) = default;
};

class RandomWindowSampler {
 public:
  // batch ≥ 1, seq_len ≥ 1, data.size() ≥ seq_len + 1; otherwise std::invalid_argument saying which.
  RandomWindowSampler(std::span<const std::uint8_t> data, int batch, int seq_len, std::uint64_t seed);

  TokenBatch next();                             // batch `state().next_batch`, then advance
  TokenBatch batch_at(std::uint64_t index) const;  // any batch, no state change
  SamplerState state() const { return m_state; }
  void set_state(const SamplerState& state) { m_state = state; }
  std::uint64_t valid_starts() const { return m_data.size() - static_cast<std::size_t>(m_seq_len); }
  int batch_size() const { return m_batch; }
  int seq_len() const { return m_seq_len; }

 private:
  std::span<const std::uint8_t> m_data;
  int m_batch, m_seq_len;
  SamplerState m_state;
};

class SequentialWindows {
 public:
  // batch ≥ 1, seq_len ≥ 1, data.size() ≥ seq_len + 1; max_windows ≤ 0 means all.
  SequentialWindows(std::span<const std::uint8_t> data, int batch, int seq_len, std::int64_t max_windows = 0);

  std::int64_t windows() const { return m_windows; }
  std::int64_t batches() const { return (m_windows + m_batch - 1) / m_batch; }
  std::int64_t scored_targets() const { return m_windows * m_seq_len; }

  TokenBatch batch_at(std::int64_t index) const;  // 0 ≤ index < batches()
  // Fills `out` with the next batch and advances; false (out untouched) after the last one.
  bool next(TokenBatch& out);
  std::int64_t position() const { return m_position; }
  void set_position(std::int64_t next_batch);  // 0 ≤ next_batch ≤ batches()
  void reset() { m_position = 0; }

 private:
  std::span<const std::uint8_t> m_data;
  int m_batch, m_seq_len;
  std::int64_t m_windows = 0;
  std::int64_t m_position = 0;
};

}  // namespace tttlab
