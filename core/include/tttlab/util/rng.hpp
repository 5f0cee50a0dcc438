// tttlab/util/rng.hpp — the engine's own random number generator: small, fast, deterministic.
//
// Every random choice the engine makes (initialisation, data sampling, synthetic tasks, sampling
// tokens) goes through Rng so that a run is a pure function of its seeds on every platform and
// standard library: std::mt19937 is portable but std::normal_distribution and
// std::uniform_int_distribution are not (libstdc++, libc++ and MSVC give different numbers).
//
// Generator: xoshiro256** (Blackman and Vigna, "Scrambled linear pseudorandom number generators",
// ACM TOMS 2021), written here from the published description: 256 bits of state, period 2^256 − 1,
// passes BigCrush; the state must never be all zero. Seeding expands a 64-bit seed (and an optional
// stream number) into the 256-bit state with SplitMix64, as the authors recommend.
//
// Derived draws (all defined here, bit for bit, so results do not depend on the standard library):
//   uniform()          double in [0, 1): the top 53 bits of one output times 2^−53.
//   uniform_float()    float in [0, 1): the top 24 bits times 2^−24.
//   below(n)           integer in [0, n), exactly uniform (Lemire's multiply-and-reject).
//   uniform_int(a, b)  integer in [a, b] inclusive.
//   normal()           N(0, 1) by the Box–Muller transform: two uniforms u1 ∈ (0, 1], u2 ∈ [0, 1)
//                      give r = √(−2 ln u1), θ = 2π u2 and the pair (r cos θ, r sin θ); the second
//                      value is kept and returned by the next call. The only library functions used
//                      are log, sqrt, cos and sin of IEEE doubles.
//
// State: RngState is plain data (the four words, plus the cached Box–Muller value) and converts
// to and from k_rng_state_words uint64 words for checkpoints. Restoring a state reproduces the
// stream exactly, including a pending normal value.
//
// Threading: an Rng is a value type with no shared state; use one per thread (e.g. one stream per
// thread via Rng(seed, stream)).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace tttlab {

inline constexpr std::size_t k_rng_state_words = 6;

// The full state of an Rng. `spare` is meaningful only when `has_spare` is true.
struct RngState {
  std::array<std::uint64_t, 4> s{};
  bool has_spare = false;
  double spare = 0.0;

  // Words: s[0..3], has_spare (0 or 1), the bit pattern of spare.
  std::array<std::uint64_t, k_rng_state_words> to_words() const;
  // Throws std::invalid_argument for an all-zero generator state or a has_spare word other than 0/1
  // (a corrupt checkpoint), never produces an invalid generator.
  static RngState from_words(const std::array<std::uint64_t, k_rng_state_words>& words);

  friend bool operator==(const RngState&, const RngState&) = default;
};

// One step of SplitMix64 (Steele, Lea and Flood 2014): advances `x` and returns a mixed output.
// Also useful as a cheap hash of 64-bit integers.
std::uint64_t splitmix64(std::uint64_t& x);

class Rng {
 public:
  // Stream 0 of `seed`. Rng(s, k) for distinct k are unrelated generators (the stream number is
  // mixed into the SplitMix64 seed), handy for per-thread or per-batch generators.
  explicit Rng(std::uint64_t seed = 0, std::uint64_t stream = 0);
  explicit Rng(const RngState& state);

  std::uint64_t next_u64();
  double uniform();
  float uniform_float();
  // n ≥ 1 (n = 0 throws std::invalid_argument).
  std::uint64_t below(std::uint64_t n);
  // lo ≤ hi (otherwise std::invalid_argument); the full int64 range is allowed.
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);
  double normal();
  double normal(double mean, double stddev) { return mean + stddev * normal(); }

  RngState state() const { return m_state; }
  void set_state(const RngState& state);

 private:
  RngState m_state;
};

}  // namespace tttlab
