// SHA-256 from FIPS 180-4 (see tttlab/io/sha256.hpp).
#include "tttlab/io/sha256.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace tttlab {
namespace {

constexpr bool is_prime(unsigned n) {
  if (n < 2) return false;
  for (unsigned d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

template <std::size_t N>
constexpr std::array<unsigned, N> first_primes() {
  std::array<unsigned, N> p{};
  unsigned n = 2;
  for (std::size_t k = 0; k < N; ++n)
    if (is_prime(n)) p[k++] = n;
  return p;
}

// floor(x^(1/root)) for root 2 or 3, by bisection over 64-bit candidates.
constexpr std::uint64_t integer_root(unsigned __int128 x, int root) {
  std::uint64_t lo = 0, hi = std::uint64_t(1) << 40;  // (2^40)^3 exceeds every x used here
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo + 1) / 2;
    unsigned __int128 p = mid;
    for (int i = 1; i < root; ++i) p *= mid;
    if (p <= x) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// frac(p^(1/root)) · 2^32 = floor((p · 2^(32·root))^(1/root)) mod 2^32.
constexpr std::uint32_t fractional_bits(unsigned p, int root) {
  const unsigned __int128 x = static_cast<unsigned __int128>(p) << (32 * root);
  return static_cast<std::uint32_t>(integer_root(x, root));
}

constexpr std::array<std::uint32_t, 64> make_k() {
  const auto primes = first_primes<64>();
  std::array<std::uint32_t, 64> k{};
  for (std::size_t i = 0; i < 64; ++i) k[i] = fractional_bits(primes[i], 3);
  return k;
}

constexpr std::array<std::uint32_t, 8> make_h0() {
  const auto primes = first_primes<8>();
  std::array<std::uint32_t, 8> h{};
  for (std::size_t i = 0; i < 8; ++i) h[i] = fractional_bits(primes[i], 2);
  return h;
}

constexpr std::array<std::uint32_t, 64> k_round = make_k();
constexpr std::array<std::uint32_t, 8> k_init = make_h0();
// Spot checks against the values printed in FIPS 180-4 §4.2.2 and §5.3.3.
static_assert(k_round[0] == 0x428a2f98 && k_round[63] == 0xc67178f2);
static_assert(k_init[0] == 0x6a09e667 && k_init[7] == 0x5be0cd19);

std::uint32_t load_be32(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
}

}  // namespace

Sha256::Sha256() : m_h(k_init) {}

void Sha256::compress(const std::uint8_t* block) {
  std::uint32_t w[64];
  for (int t = 0; t < 16; ++t) w[t] = load_be32(block + 4 * t);
  for (int t = 16; t < 64; ++t) {
    const std::uint32_t s0 = std::rotr(w[t - 15], 7) ^ std::rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const std::uint32_t s1 = std::rotr(w[t - 2], 17) ^ std::rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  std::uint32_t a = m_h[0], b = m_h[1], c = m_h[2], d = m_h[3], e = m_h[4], f = m_h[5], g = m_h[6], h = m_h[7];
  for (int t = 0; t < 64; ++t) {
    const std::uint32_t S1 = std::rotr(e, 6) ^ std::rotr(e, 11) ^ std::rotr(e, 25);
    const std::uint32_t ch = (e & f) ^ (~e & g);
    const std::uint32_t t1 = h + S1 + ch + k_round[t] + w[t];
    const std::uint32_t S0 = std::rotr(a, 2) ^ std::rotr(a, 13) ^ std::rotr(a, 22);
    const std::uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    const std::uint32_t t2 = S0 + maj;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  m_h[0] += a, m_h[1] += b, m_h[2] += c, m_h[3] += d, m_h[4] += e, m_h[5] += f, m_h[6] += g, m_h[7] += h;
}

void Sha256::update(std::span<const std::uint8_t> data) {
  if (data.empty()) return;  // an empty span may hold a null pointer, which memcpy must not be given
  m_length += data.size();
  std::size_t i = 0;
  if (m_fill > 0) {
    const std::size_t take = std::min(data.size(), 64 - m_fill);
    std::memcpy(m_block.data() + m_fill, data.data(), take);
    m_fill += take;
    i = take;
    if (m_fill < 64) return;
    compress(m_block.data());
    m_fill = 0;
  }
  for (; i + 64 <= data.size(); i += 64) compress(data.data() + i);
  if (i < data.size()) {
    std::memcpy(m_block.data(), data.data() + i, data.size() - i);
    m_fill = data.size() - i;
  }
}

void Sha256::update(std::string_view text) {
  update(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

std::array<std::uint8_t, 32> Sha256::finish() {
  const std::uint64_t bit_length = m_length * 8;
  // Padding: 0x80, zeros up to 56 mod 64, then the 64-bit big-endian bit length.
  std::uint8_t pad[72] = {0x80};
  const std::size_t pad_len = (m_fill < 56 ? 56 - m_fill : 120 - m_fill);
  for (int i = 0; i < 8; ++i) pad[pad_len + i] = static_cast<std::uint8_t>(bit_length >> (56 - 8 * i));
  update(std::span<const std::uint8_t>(pad, pad_len + 8));
  std::array<std::uint8_t, 32> out{};
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<std::uint8_t>(m_h[i] >> (24 - 8 * j));
  *this = Sha256();
  return out;
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (const std::uint8_t b : bytes) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

std::string sha256_hex(std::span<const std::uint8_t> data) {
  Sha256 h;
  h.update(data);
  return to_hex(h.finish());
}

std::string sha256_hex(std::string_view text) {
  Sha256 h;
  h.update(text);
  return to_hex(h.finish());
}

}  // namespace tttlab
