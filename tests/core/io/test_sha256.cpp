// SHA-256 against the example digests of FIPS 180-4 / NIST, including block-boundary lengths and
// incremental updates split at every position.
#include <gtest/gtest.h>

#include <string>

#include "tttlab/io/sha256.hpp"

namespace tttlab {
namespace {

TEST(Sha256, StandardExamples) {
  EXPECT_EQ(sha256_hex(std::string_view("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex(std::string_view("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(std::string_view("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShotAtEverySplit) {
  std::string msg;
  for (int i = 0; i < 130; ++i) msg.push_back(static_cast<char>('a' + i % 26));
  for (std::size_t len : {55u, 56u, 63u, 64u, 65u, 119u, 120u, 130u}) {
    const std::string m = msg.substr(0, len);
    const std::string expected = sha256_hex(std::string_view(m));
    for (std::size_t cut = 0; cut <= len; ++cut) {
      Sha256 h;
      h.update(std::string_view(m).substr(0, cut));
      h.update(std::string_view(m).substr(cut));
      ASSERT_EQ(to_hex(h.finish()), expected) << "len " << len << " cut " << cut;
    }
  }
}

TEST(Sha256, FinishResetsForTheNextMessage) {
  Sha256 h;
  h.update(std::string_view("junk"));
  (void)h.finish();
  h.update(std::string_view("abc"));
  EXPECT_EQ(to_hex(h.finish()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// An empty span (a null pointer, as an empty std::vector gives) between other parts changes nothing;
// the sanitizer build checks that no null pointer reaches memcpy.
TEST(Sha256, EmptyPartsAreNothing) {
  Sha256 h;
  h.update(std::span<const std::uint8_t>());
  h.update(std::string_view("a"));
  h.update(std::span<const std::uint8_t>());
  h.update(std::string_view("bc"));
  h.update(std::span<const std::uint8_t>());
  EXPECT_EQ(to_hex(h.finish()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace tttlab
