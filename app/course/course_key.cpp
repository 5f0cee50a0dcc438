// app/course/course_key.cpp — HMAC-SHA256, sealing, and the course key file (see course_key.hpp).
#include "course/course_key.hpp"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <unistd.h>

#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/sha256.hpp"

namespace tttlab::course {
namespace fs = std::filesystem;

namespace crypto {
namespace {

constexpr std::size_t kBlock = 64;  // SHA-256's block, in bytes
constexpr std::size_t kNonceBytes = 16;
constexpr std::size_t kTagBytes = 32;
constexpr std::size_t kPadTo = 16;
constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::span<const std::uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// The keystream block `counter` for `nonce`.
Digest keystream_block(const Digest& key, std::span<const std::uint8_t> nonce, std::uint32_t counter) {
  Bytes msg(nonce.begin(), nonce.end());
  for (int shift = 24; shift >= 0; shift -= 8) msg.push_back(static_cast<std::uint8_t>(counter >> shift));
  return hmac_sha256(key, msg);
}

void xor_keystream(const Digest& key, std::span<const std::uint8_t> nonce, std::span<std::uint8_t> data) {
  for (std::size_t off = 0, counter = 0; off < data.size(); off += 32, ++counter) {
    const Digest ks = keystream_block(key, nonce, static_cast<std::uint32_t>(counter));
    for (std::size_t i = 0; i < 32 && off + i < data.size(); ++i) data[off + i] ^= ks[i];
  }
}

}  // namespace

Digest sha256(std::span<const std::uint8_t> data) {
  Sha256 h;
  h.update(data);
  return h.finish();
}

Digest hmac_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> message) {
  // RFC 2104: keys longer than the block are hashed first; then H((K ^ opad) ‖ H((K ^ ipad) ‖ m)).
  std::array<std::uint8_t, kBlock> k{};
  if (key.size() > kBlock) {
    const Digest h = sha256(key);
    std::copy(h.begin(), h.end(), k.begin());
  } else {
    std::copy(key.begin(), key.end(), k.begin());
  }
  std::array<std::uint8_t, kBlock> ipad, opad;
  for (std::size_t i = 0; i < kBlock; ++i) {
    ipad[i] = k[i] ^ 0x36;
    opad[i] = k[i] ^ 0x5c;
  }
  Sha256 h;
  h.update(ipad);
  h.update(message);
  const Digest inner = h.finish();
  h.update(opad);
  h.update(inner);
  return h.finish();
}

Digest hmac_sha256(std::span<const std::uint8_t> key, std::string_view message) {
  return hmac_sha256(key, as_bytes(message));
}

Bytes random_bytes(std::size_t n) {
  std::random_device rd;  // libstdc++ on Linux: getrandom() / /dev/urandom, not a seeded PRNG
  Bytes out(n);
  for (std::size_t i = 0; i < n; i += 4) {
    const std::uint32_t r = rd();
    for (std::size_t j = 0; j < 4 && i + j < n; ++j) out[i + j] = static_cast<std::uint8_t>(r >> (8 * j));
  }
  return out;
}

std::optional<Bytes> from_hex(std::string_view hex) {
  if (hex.size() % 2) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  Bytes out(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return out;
}

std::string base64_encode(std::span<const std::uint8_t> bytes) {
  std::string s;
  s.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::uint32_t b0 = bytes[i];
    const std::uint32_t b1 = i + 1 < bytes.size() ? bytes[i + 1] : 0;
    const std::uint32_t b2 = i + 2 < bytes.size() ? bytes[i + 2] : 0;
    const std::uint32_t v = (b0 << 16) | (b1 << 8) | b2;
    s += kBase64[(v >> 18) & 63];
    s += kBase64[(v >> 12) & 63];
    s += i + 1 < bytes.size() ? kBase64[(v >> 6) & 63] : '=';
    s += i + 2 < bytes.size() ? kBase64[v & 63] : '=';
  }
  return s;
}

std::optional<Bytes> base64_decode(std::string_view text) {
  std::string clean;
  for (const char c : text)
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') clean += c;
  if (clean.size() % 4) return std::nullopt;
  Bytes out;
  out.reserve(clean.size() / 4 * 3);
  for (std::size_t i = 0; i < clean.size(); i += 4) {
    std::uint32_t v = 0;
    int pad = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      const char c = clean[i + j];
      int d;
      if (c == '=') {
        // Padding only at the end of the last group, at most two.
        if (i + 4 != clean.size() || j < 2) return std::nullopt;
        d = 0;
        ++pad;
      } else {
        if (pad) return std::nullopt;
        const char* p = std::strchr(kBase64, c);
        if (!p || c == '\0') return std::nullopt;
        d = static_cast<int>(p - kBase64);
      }
      v = (v << 6) | static_cast<std::uint32_t>(d);
    }
    out.push_back(static_cast<std::uint8_t>(v >> 16));
    if (pad < 2) out.push_back(static_cast<std::uint8_t>(v >> 8));
    if (pad < 1) out.push_back(static_cast<std::uint8_t>(v));
  }
  return out;
}

bool equal_constant_time(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  if (a.size() != b.size()) return false;
  std::uint8_t diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

Bytes seal(const Digest& enc_key, const Digest& mac_key, std::string_view text) {
  Bytes out = random_bytes(kNonceBytes);
  Bytes body(text.begin(), text.end());
  body.push_back(0x80);
  while (body.size() % kPadTo) body.push_back(0);
  xor_keystream(enc_key, std::span(out.data(), kNonceBytes), body);
  out.insert(out.end(), body.begin(), body.end());
  const Digest tag = hmac_sha256(mac_key, out);
  out.insert(out.end(), tag.begin(), tag.end());
  return out;
}

std::optional<std::string> unseal(const Digest& enc_key, const Digest& mac_key, std::span<const std::uint8_t> sealed) {
  if (sealed.size() < kNonceBytes + kPadTo + kTagBytes || (sealed.size() - kNonceBytes - kTagBytes) % kPadTo)
    return std::nullopt;
  const auto signed_part = sealed.first(sealed.size() - kTagBytes);
  const Digest tag = hmac_sha256(mac_key, signed_part);
  if (!equal_constant_time(tag, sealed.last(kTagBytes))) return std::nullopt;
  Bytes body(signed_part.begin() + kNonceBytes, signed_part.end());
  xor_keystream(enc_key, sealed.first(kNonceBytes), body);
  while (!body.empty() && body.back() == 0) body.pop_back();
  if (body.empty() || body.back() != 0x80) return std::nullopt;
  body.pop_back();
  return std::string(body.begin(), body.end());
}

}  // namespace crypto

CourseKey CourseKey::generate() {
  CourseKey k;
  const Bytes r = crypto::random_bytes(k.m_key.size());
  std::copy(r.begin(), r.end(), k.m_key.begin());
  return k;
}

std::optional<CourseKey> CourseKey::from_hex(std::string_view hex) {
  while (!hex.empty() && std::isspace(static_cast<unsigned char>(hex.front()))) hex.remove_prefix(1);
  while (!hex.empty() && std::isspace(static_cast<unsigned char>(hex.back()))) hex.remove_suffix(1);
  const auto b = crypto::from_hex(hex);
  if (!b || b->size() != 32) return std::nullopt;
  CourseKey k;
  std::copy(b->begin(), b->end(), k.m_key.begin());
  return k;
}

CourseKey CourseKey::read(const fs::path& file) {
  std::string text;
  try {
    text = read_file_text(file, 4096);
  } catch (const FileError& e) {
    throw KeyError(std::string("the course key: ") + e.what());
  }
  const auto k = from_hex(text);
  if (!k) throw KeyError(file.string() + " is not a course key (64 hex digits, as `tttlab lessons pack --teacher` writes)");
  return *k;
}

void CourseKey::write(const fs::path& file) const {
  // O_EXCL: an existing file (or a link planted there) is never replaced; 0600: only the teacher reads it.
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    const int err = errno;
    if (err == EEXIST)
      throw KeyError(file.string() + " exists: a course key is never overwritten (choose another name, or "
                                     "re-pack the same course with --key)");
    throw KeyError("cannot write the course key '" + file.string() + "': " + std::strerror(err));
  }
  const std::string text = hex() + "\n";
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(file.c_str());
      throw KeyError("cannot write the course key '" + file.string() + "': " + std::strerror(err));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(file.c_str());
    throw KeyError("cannot write the course key '" + file.string() + "': " + std::strerror(err));
  }
}

PackKeys CourseKey::derive() const {
  PackKeys k;
  k.seal = crypto::hmac_sha256(m_key, "seal");
  k.seal_mac = crypto::hmac_sha256(m_key, "seal-mac");
  k.progress = crypto::hmac_sha256(m_key, "progress");
  const Digest id = crypto::hmac_sha256(m_key, "course-id");
  k.course_id = crypto::to_hex(std::span(id.data(), 16));
  return k;
}

std::string CourseKey::hex() const { return crypto::to_hex(m_key); }

Digest unkeyed_progress_key() {
  static constexpr std::string_view kLabel = "tttlab unkeyed progress export: anyone can compute this key";
  return crypto::hmac_sha256(std::span<const std::uint8_t>(), kLabel);
}

}  // namespace tttlab::course
