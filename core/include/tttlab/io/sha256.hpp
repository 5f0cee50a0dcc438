// tttlab/io/sha256.hpp — SHA-256 (FIPS 180-4), for manifests and checkpoint integrity checks.
//
// Written from the standard. The round constants and initial hash values are not typed in: they are
// computed at compile time from their definition (the first 32 bits of the fractional parts of the
// cube roots of the first 64 primes, and of the square roots of the first 8 primes), and the tests
// check the digests of the standard's examples.
//
//   Sha256 h; h.update(a); h.update(b); auto digest = h.finish();   // incremental
//   std::string hex = sha256_hex(bytes);                             // one shot, lowercase hex
//
// Threading: a Sha256 object is not shared; distinct objects are independent.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tttlab {

class Sha256 {
 public:
  Sha256();
  void update(std::span<const std::uint8_t> data);
  void update(std::string_view text);
  // Returns the digest; the object is then reset for a new message.
  std::array<std::uint8_t, 32> finish();

 private:
  std::array<std::uint32_t, 8> m_h;
  std::array<std::uint8_t, 64> m_block{};
  std::size_t m_fill = 0;
  std::uint64_t m_length = 0;  // message length in bytes
  void compress(const std::uint8_t* block);
};

std::string to_hex(std::span<const std::uint8_t> bytes);
std::string sha256_hex(std::span<const std::uint8_t> data);
std::string sha256_hex(std::string_view text);

}  // namespace tttlab
