// app/gui/engine/rng.hpp — a seeded random source whose numbers are the same on every platform.
//
// std::normal_distribution (and the other std distributions) are implementation-defined, so the same
// seed gives different numbers with libstdc++, libc++ and MSVC. A saved .tttlab state must reproduce
// its view anywhere, so the app draws from std::mt19937_64 (fully specified by the standard) and
// turns the bits into uniforms and normals itself (53-bit uniforms, Box–Muller normals).
//
// Threading: one Rng per thread; not synchronised.
#pragma once

#include <cstdint>
#include <random>

namespace tttlab::gui {

class Rng {
 public:
  // `stream` separates independent uses of one user seed (embedding, projections, …): changing the
  // size of one tensor then does not shift the numbers of another.
  explicit Rng(std::uint64_t seed, std::uint64_t stream = 0);

  std::uint64_t next_u64() { return gen_(); }
  double uniform();  // in the open interval (0, 1)
  double normal();   // standard normal N(0, 1)

 private:
  std::mt19937_64 gen_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// SplitMix64 finaliser: spreads (seed, stream) over the whole 64-bit seed space.
std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t stream);

}  // namespace tttlab::gui
