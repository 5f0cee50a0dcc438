// xoshiro256** with SplitMix64 seeding and Box–Muller normals (see tttlab/util/rng.hpp).
#include "tttlab/util/rng.hpp"

#include <bit>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace tttlab {

std::array<std::uint64_t, k_rng_state_words> RngState::to_words() const {
  return {s[0], s[1], s[2], s[3], has_spare ? 1u : 0u, std::bit_cast<std::uint64_t>(spare)};
}

RngState RngState::from_words(const std::array<std::uint64_t, k_rng_state_words>& words) {
  if ((words[0] | words[1] | words[2] | words[3]) == 0)
    throw std::invalid_argument("RNG state: the four generator words are all zero (corrupt state)");
  if (words[4] > 1) throw std::invalid_argument("RNG state: the has-spare word must be 0 or 1 (corrupt state)");
  RngState st;
  st.s = {words[0], words[1], words[2], words[3]};
  st.has_spare = words[4] == 1;
  st.spare = st.has_spare ? std::bit_cast<double>(words[5]) : 0.0;
  return st;
}

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Rng::Rng(std::uint64_t seed, std::uint64_t stream) {
  // Mix the stream number through SplitMix64 before combining so that neighbouring (seed, stream)
  // pairs do not produce overlapping SplitMix64 sequences.
  std::uint64_t t = stream;
  std::uint64_t x = seed ^ splitmix64(t);
  for (auto& w : m_state.s) w = splitmix64(x);
  // SplitMix64 is a bijection of its counter, so four consecutive outputs are never all zero; keep
  // the guard anyway because the generator would be stuck at zero forever.
  if ((m_state.s[0] | m_state.s[1] | m_state.s[2] | m_state.s[3]) == 0) m_state.s[0] = 1;
}

Rng::Rng(const RngState& state) { set_state(state); }

void Rng::set_state(const RngState& state) { m_state = RngState::from_words(state.to_words()); }

std::uint64_t Rng::next_u64() {
  auto& s = m_state.s;
  const std::uint64_t result = std::rotl(s[1] * 5, 7) * 9;
  const std::uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = std::rotl(s[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

float Rng::uniform_float() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }

std::uint64_t Rng::below(std::uint64_t n) {
  if (n == 0) throw std::invalid_argument("Rng::below: the range must hold at least one value (n >= 1)");
  // Lemire, "Fast random integer generation in an interval" (2019): the high word of x·n is uniform
  // on [0, n) once the low word is outside the short biased zone [0, 2^64 mod n).
  unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
  auto low = static_cast<std::uint64_t>(m);
  if (low < n) {
    const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    while (low < threshold) {
      m = static_cast<unsigned __int128>(next_u64()) * n;
      low = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::uint64_t>(m >> 64);
}

std::int64_t Rng::uniform_int(std::int64_t lo, std::int64_t hi) {
  if (lo > hi) throw std::invalid_argument("Rng::uniform_int: lo must not exceed hi");
  const std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
  const std::uint64_t off = span == UINT64_MAX ? next_u64() : below(span + 1);
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + off);
}

double Rng::normal() {
  if (m_state.has_spare) {
    m_state.has_spare = false;
    const double v = m_state.spare;
    m_state.spare = 0.0;
    return v;
  }
  // u1 ∈ (0, 1] keeps the logarithm finite.
  const double u1 = static_cast<double>((next_u64() >> 11) + 1) * 0x1.0p-53;
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * std::numbers::pi * u2;
  m_state.has_spare = true;
  m_state.spare = r * std::sin(theta);
  return r * std::cos(theta);
}

}  // namespace tttlab
