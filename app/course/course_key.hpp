// app/course/course_key.hpp — the course key and the small cryptography a student pack needs.
//
// A course has ONE secret: a random 32-byte course key that only the teacher keeps (a file of 64 hex
// digits, mode 0600, written by `tttlab lessons pack --teacher KEYFILE`). Every other key is derived
// from it by HMAC-SHA256 under a fixed label, so knowing a derived key reveals neither the course key
// nor the other derived keys:
//
//   seal      = HMAC(course key, "seal")       encrypts the lessons' secrets in a student pack
//   seal-mac  = HMAC(course key, "seal-mac")   authenticates them (encrypt-then-MAC)
//   progress  = HMAC(course key, "progress")   signs a student's progress export
//   course id = first 16 bytes of HMAC(course key, "course-id"), in hex: names the course in a pack
//               and in every export, and lets the app recognise the course key a teacher types in
//
// The pack's manifest holds seal, seal-mac, progress and the course id (the app must have them to show
// a lesson and sign an export); never the course key. lessons/README.md says what this protects.
//
// Primitives: SHA-256 from tttlab/io/sha256.hpp (the one the checkpoints use); HMAC-SHA256 per RFC 2104; a sealed text is
// nonce (16 random bytes) ‖ ciphertext ‖ tag, where the ciphertext is the padded text XOR a keystream
// of blocks HMAC(seal, nonce ‖ counter as 4 bytes big-endian) and tag = HMAC(seal-mac, nonce ‖
// ciphertext). The text is padded to a multiple of 16 bytes (0x80 then zeros) so that short secrets
// of different lengths ("> 0", "< -0.01") seal to the same size. Randomness comes from
// std::random_device, which on Linux with libstdc++ reads the kernel's CSPRNG (getrandom /
// /dev/urandom).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tttlab/io/sha256.hpp"

namespace tttlab::course {

using Bytes = std::vector<std::uint8_t>;
using Digest = std::array<std::uint8_t, 32>;

class KeyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace crypto {

Digest sha256(std::span<const std::uint8_t> data);
Digest hmac_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> message);
Digest hmac_sha256(std::span<const std::uint8_t> key, std::string_view message);
Bytes random_bytes(std::size_t n);

using ::tttlab::to_hex;  // lowercase hex (tttlab/io/sha256.hpp)
std::optional<Bytes> from_hex(std::string_view hex);  // nullopt: odd length or a non-hex digit
std::string base64_encode(std::span<const std::uint8_t> bytes);
// Whitespace (line breaks of a wrapped block) is skipped; nullopt on any other non-alphabet character
// or bad padding.
std::optional<Bytes> base64_decode(std::string_view text);
// Compares without an early exit, so the time taken does not say how much of a tag was right.
bool equal_constant_time(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b);

// nonce ‖ ciphertext ‖ tag (see above).
Bytes seal(const Digest& enc_key, const Digest& mac_key, std::string_view text);
// nullopt: too short, or the tag does not match (a wrong key or an edited text).
std::optional<std::string> unseal(const Digest& enc_key, const Digest& mac_key, std::span<const std::uint8_t> sealed);

}  // namespace crypto

// The keys a student pack holds (derived from the course key; see above).
struct PackKeys {
  Digest seal{}, seal_mac{}, progress{};
  std::string course_id;  // 32 hex digits
};

class CourseKey {
 public:
  static CourseKey generate();
  // A file of 64 hex digits (whitespace around them allowed). Throws KeyError naming the file.
  static CourseKey read(const std::filesystem::path& file);
  // From the 64 hex digits a teacher types in; nullopt when it is not that.
  static std::optional<CourseKey> from_hex(std::string_view hex);

  // Writes the key as hex, mode 0600. Refuses (KeyError) to replace anything that exists at `file`,
  // so a course key is never overwritten by accident.
  void write(const std::filesystem::path& file) const;

  PackKeys derive() const;
  std::string hex() const;

 private:
  Digest m_key{};
};

// The key an export is signed with when there is no course pack: derived from a public label, so the
// signature only says the file was not damaged — anyone can compute it.
Digest unkeyed_progress_key();

}  // namespace tttlab::course
