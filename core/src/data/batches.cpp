// Random training windows and fixed validation windows (see tttlab/data/batches.hpp).
#include "tttlab/data/batches.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "tttlab/util/rng.hpp"

namespace tttlab {
namespace {

void check_shape(const char* who, std::size_t n, int batch, int seq_len) {
  if (batch < 1) throw std::invalid_argument(std::string(who) + ": batch size must be at least 1");
  if (seq_len < 1) throw std::invalid_argument(std::string(who) + ": sequence length must be at least 1");
  if (n < static_cast<std::size_t>(seq_len) + 1)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(n) + " tokens are too few for sequence length " +
                                std::to_string(seq_len) + " (a window needs T + 1 = " + std::to_string(seq_len + 1) + ")");
}

void append_window(TokenBatch& b, std::span<const std::uint8_t> data, std::size_t start) {
  for (int t = 0; t <= b.seq_len; ++t) b.tokens.push_back(data[start + static_cast<std::size_t>(t)]);
  b.starts.push_back(static_cast<std::int64_t>(start));
}

}  // namespace

std::int64_t TokenBatch::counted_targets() const {
  if (mask.empty()) return static_cast<std::int64_t>(batch) * seq_len;
  std::int64_t n = 0;
  for (auto m : mask) n += m != 0;
  return n;
}

RandomWindowSampler::RandomWindowSampler(std::span<const std::uint8_t> data, int batch, int seq_len, std::uint64_t seed)
    : m_data(data), m_batch(batch), m_seq_len(seq_len), m_state{seed, 0} {
  check_shape("random window sampler", data.size(), batch, seq_len);
}

TokenBatch RandomWindowSampler::batch_at(std::uint64_t index) const {
  Rng rng(m_state.seed, index);
  TokenBatch b;
  b.batch = m_batch;
  b.seq_len = m_seq_len;
  b.tokens.reserve(static_cast<std::size_t>(m_batch) * (m_seq_len + 1));
  for (int r = 0; r < m_batch; ++r) append_window(b, m_data, rng.below(valid_starts()));
  return b;
}

TokenBatch RandomWindowSampler::next() { return batch_at(m_state.next_batch++); }

SequentialWindows::SequentialWindows(std::span<const std::uint8_t> data, int batch, int seq_len, std::int64_t max_windows)
    : m_data(data), m_batch(batch), m_seq_len(seq_len) {
  check_shape("validation windows", data.size(), batch, seq_len);
  m_windows = static_cast<std::int64_t>((data.size() - 1) / static_cast<std::size_t>(seq_len));
  if (max_windows > 0 && max_windows < m_windows) m_windows = max_windows;
}

TokenBatch SequentialWindows::batch_at(std::int64_t index) const {
  if (index < 0 || index >= batches())
    throw std::out_of_range("validation windows: batch " + std::to_string(index) + " of " + std::to_string(batches()));
  TokenBatch b;
  b.seq_len = m_seq_len;
  const std::int64_t first = index * m_batch;
  const std::int64_t last = std::min(first + m_batch, m_windows);
  b.batch = static_cast<int>(last - first);
  b.tokens.reserve(static_cast<std::size_t>(b.batch) * (m_seq_len + 1));
  for (std::int64_t w = first; w < last; ++w) append_window(b, m_data, static_cast<std::size_t>(w) * m_seq_len);
  return b;
}

bool SequentialWindows::next(TokenBatch& out) {
  if (m_position >= batches()) return false;
  out = batch_at(m_position++);
  return true;
}

void SequentialWindows::set_position(std::int64_t next_batch) {
  if (next_batch < 0 || next_batch > batches())
    throw std::out_of_range("validation windows: position " + std::to_string(next_batch) + " outside 0.." +
                            std::to_string(batches()));
  m_position = next_batch;
}

}  // namespace tttlab
