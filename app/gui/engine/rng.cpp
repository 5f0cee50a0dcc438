#include "gui/engine/rng.hpp"

#include <cmath>
#include <numbers>

namespace tttlab::gui {

std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Rng::Rng(std::uint64_t seed, std::uint64_t stream) : gen_(mix_seed(seed, stream)) {}

double Rng::uniform() {
  // The top 53 bits, centred in their interval so that 0 is never returned (log(0) in Box–Muller).
  return (static_cast<double>(gen_() >> 11) + 0.5) * 0x1.0p-53;
}

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double r = std::sqrt(-2.0 * std::log(uniform()));
  const double phi = 2.0 * std::numbers::pi * uniform();
  spare_ = r * std::sin(phi);
  has_spare_ = true;
  return r * std::cos(phi);
}

}  // namespace tttlab::gui
