// MQAR and copy task generators (see tttlab/data/synthetic.hpp).
#include "tttlab/data/synthetic.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <vector>

#include "tttlab/util/rng.hpp"

namespace tttlab {
namespace {

[[noreturn]] void bad(const char* task, const std::string& what) {
  throw std::invalid_argument(std::string(task) + ": " + what);
}

// Distinct bytes, no separator/pad, and (when `used` is given) disjoint from bytes already used.
void check_alphabet(const char* task, const char* name, const std::string& a, char sep, char pad,
                    std::array<bool, 256>& used) {
  if (a.empty()) bad(task, std::string(name) + " alphabet is empty");
  for (const char c : a) {
    const auto b = static_cast<unsigned char>(c);
    if (c == sep || c == pad) bad(task, std::string(name) + " alphabet contains the separator or the pad byte");
    if (used[b]) bad(task, std::string(name) + " alphabet repeats a byte or shares one with another alphabet");
    used[b] = true;
  }
}

// Draws k distinct positions of [0, n) in random order (partial Fisher–Yates).
std::vector<int> distinct_sample(Rng& rng, int n, int k) {
  std::vector<int> idx(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = i;
  for (int i = 0; i < k; ++i) {
    const int j = i + static_cast<int>(rng.below(static_cast<std::uint64_t>(n - i)));
    std::swap(idx[static_cast<std::size_t>(i)], idx[static_cast<std::size_t>(j)]);
  }
  idx.resize(static_cast<std::size_t>(k));
  return idx;
}

TokenBatch empty_batch(int batch, int seq_len, char pad) {
  if (batch < 1) throw std::invalid_argument("synthetic task: batch size must be at least 1");
  TokenBatch b;
  b.batch = batch;
  b.seq_len = seq_len;
  b.tokens.assign(static_cast<std::size_t>(batch) * (seq_len + 1), static_cast<unsigned char>(pad));
  b.mask.assign(static_cast<std::size_t>(batch) * seq_len, 0);
  b.starts.assign(static_cast<std::size_t>(batch), -1);
  return b;
}

Token sym(const std::string& alphabet, std::size_t i) { return static_cast<unsigned char>(alphabet[i]); }

}  // namespace

void MqarConfig::validate() const {
  const char* task = "MQAR";
  if (seq_len < 1) bad(task, "sequence length must be at least 1");
  if (num_pairs < 1) bad(task, "the number of key-value pairs must be at least 1");
  if (num_queries < 1 || num_queries > num_pairs)
    bad(task, "the number of queries must be between 1 and the number of pairs (" + std::to_string(num_pairs) + ")");
  if (separator == pad) bad(task, "the separator and the pad byte must differ");
  std::array<bool, 256> used{};
  check_alphabet(task, "key", keys, separator, pad, used);
  check_alphabet(task, "value", values, separator, pad, used);
  if (static_cast<std::size_t>(num_pairs) > keys.size())
    bad(task, std::to_string(num_pairs) + " pairs need as many distinct keys, but the key alphabet has " +
                  std::to_string(keys.size()));
  const int need = 2 * num_pairs + 1 + 2 * num_queries;
  if (need > seq_len + 1)
    bad(task, std::to_string(num_pairs) + " pairs and " + std::to_string(num_queries) + " queries need " +
                  std::to_string(need) + " tokens, more than T + 1 = " + std::to_string(seq_len + 1) +
                  "; raise the sequence length or lower the pairs/queries");
}

void CopyConfig::validate() const {
  const char* task = "copy task";
  if (seq_len < 1) bad(task, "sequence length must be at least 1");
  if (min_len < 1 || min_len > max_len) bad(task, "lengths must satisfy 1 <= min_len <= max_len");
  if (separator == pad) bad(task, "the separator and the pad byte must differ");
  std::array<bool, 256> used{};
  check_alphabet(task, "symbol", alphabet, separator, pad, used);
  if (2 * max_len + 1 > seq_len + 1)
    bad(task, "copying up to " + std::to_string(max_len) + " symbols needs " + std::to_string(2 * max_len + 1) +
                  " tokens, more than T + 1 = " + std::to_string(seq_len + 1));
}

TokenBatch mqar_batch(const MqarConfig& c, int batch, std::uint64_t seed, std::uint64_t index) {
  c.validate();
  TokenBatch b = empty_batch(batch, c.seq_len, c.pad);
  Rng rng(seed, index);
  const int P = c.num_pairs, Q = c.num_queries, T = c.seq_len;
  for (int r = 0; r < batch; ++r) {
    Token* row = b.tokens.data() + static_cast<std::size_t>(r) * (T + 1);
    std::uint8_t* mask = b.mask.data() + static_cast<std::size_t>(r) * T;
    const std::vector<int> key_idx = distinct_sample(rng, static_cast<int>(c.keys.size()), P);
    std::vector<Token> vals(static_cast<std::size_t>(P));
    for (int i = 0; i < P; ++i) {
      vals[static_cast<std::size_t>(i)] = sym(c.values, rng.below(c.values.size()));
      row[2 * i] = sym(c.keys, static_cast<std::size_t>(key_idx[static_cast<std::size_t>(i)]));
      row[2 * i + 1] = vals[static_cast<std::size_t>(i)];
    }
    int pos = 2 * P;
    row[pos++] = static_cast<unsigned char>(c.separator);
    for (const int pair : distinct_sample(rng, P, Q)) {
      row[pos] = row[2 * pair];
      row[pos + 1] = vals[static_cast<std::size_t>(pair)];
      mask[pos] = 1;  // input: the query key; target: its value
      pos += 2;
    }
  }
  return b;
}

TokenBatch copy_batch(const CopyConfig& c, int batch, std::uint64_t seed, std::uint64_t index) {
  c.validate();
  TokenBatch b = empty_batch(batch, c.seq_len, c.pad);
  Rng rng(seed, index);
  const int T = c.seq_len;
  for (int r = 0; r < batch; ++r) {
    Token* row = b.tokens.data() + static_cast<std::size_t>(r) * (T + 1);
    std::uint8_t* mask = b.mask.data() + static_cast<std::size_t>(r) * T;
    const int L = static_cast<int>(rng.uniform_int(c.min_len, c.max_len));
    for (int i = 0; i < L; ++i) row[i] = sym(c.alphabet, rng.below(c.alphabet.size()));
    row[L] = static_cast<unsigned char>(c.separator);
    for (int i = 0; i < L; ++i) {
      row[L + 1 + i] = row[i];
      mask[L + i] = 1;  // input at L + i predicts the copied symbol at L + 1 + i
    }
  }
  return b;
}

}  // namespace tttlab
