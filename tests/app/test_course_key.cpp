// The course key's cryptography (app/course/course_key.hpp): HMAC-SHA256 against RFC 4231's test
// vectors, base64 against RFC 4648's, sealing (round trip, every kind of damage refused, the same text
// sealing differently each time), and the key file (mode 0600, never overwritten, bad files named).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <sys/stat.h>

#include "core/io/temp_dir.hpp"
#include "course/course_key.hpp"

namespace tttlab::course {
namespace {

namespace fs = std::filesystem;
using tttlab::testing::TempDir;

Bytes repeat(std::uint8_t b, std::size_t n) { return Bytes(n, b); }
Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }

struct Rfc4231Case {
  Bytes key, data;
  std::string hmac;  // hex; test case 5 is truncated to 128 bits
};

TEST(CourseKey, HmacSha256MatchesRfc4231) {
  Bytes key4;
  for (int i = 1; i <= 25; ++i) key4.push_back(static_cast<std::uint8_t>(i));
  const std::vector<Rfc4231Case> cases = {
      {repeat(0x0b, 20), text("Hi There"), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {text("Jefe"), text("what do ya want for nothing?"),
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {repeat(0xaa, 20), repeat(0xdd, 50), "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {key4, repeat(0xcd, 50), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {repeat(0x0c, 20), text("Test With Truncation"), "a3b6167473100ee06e0c796c2955552b"},
      {repeat(0xaa, 131), text("Test Using Larger Than Block-Size Key - Hash Key First"),
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {repeat(0xaa, 131),
       text("This is a test using a larger than block-size key and a larger than block-size data. The key needs "
            "to be hashed before being used by the HMAC algorithm."),
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Digest d = crypto::hmac_sha256(cases[i].key, cases[i].data);
    EXPECT_EQ(crypto::to_hex(d).substr(0, cases[i].hmac.size()), cases[i].hmac) << "RFC 4231 test case " << i + 1;
  }
}

TEST(CourseKey, Sha256OfTheEmptyString) {
  EXPECT_EQ(crypto::to_hex(crypto::sha256({})), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(CourseKey, Base64MatchesRfc4648AndRefusesGarbage) {
  const std::pair<const char*, const char*> vectors[] = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, b64] : vectors) {
    EXPECT_EQ(crypto::base64_encode(text(plain)), b64);
    const auto back = crypto::base64_decode(b64);
    ASSERT_TRUE(back) << b64;
    EXPECT_EQ(std::string(back->begin(), back->end()), plain);
  }
  EXPECT_TRUE(crypto::base64_decode("Zm9v\nYmFy"));  // wrapped lines
  EXPECT_FALSE(crypto::base64_decode("Zm9"));         // not a multiple of 4
  EXPECT_FALSE(crypto::base64_decode("Zm!v"));        // not the alphabet
  EXPECT_FALSE(crypto::base64_decode("Z===")) << "at most two padding characters";
  EXPECT_FALSE(crypto::base64_decode("Zg==Zm9v")) << "padding only at the end";
}

TEST(CourseKey, HexRoundTripsAndRefusesOddOrNonHex) {
  const Bytes b = {0x00, 0x7f, 0x80, 0xff};
  EXPECT_EQ(crypto::to_hex(b), "007f80ff");
  EXPECT_EQ(*crypto::from_hex("007F80ff"), b);
  EXPECT_FALSE(crypto::from_hex("abc"));
  EXPECT_FALSE(crypto::from_hex("zz"));
}

TEST(CourseKey, SealRoundTripsAndRefusesEveryChange) {
  const PackKeys k = CourseKey::generate().derive();
  const std::string secrets[] = {"", "> 0", "0.95 .. 1", "a reveal\nover two lines\r\n", std::string(1000, 'x')};
  for (const auto& s : secrets) {
    const Bytes sealed = crypto::seal(k.seal, k.seal_mac, s);
    EXPECT_EQ((sealed.size() - 16 - 32) % 16, 0u);
    const auto back = crypto::unseal(k.seal, k.seal_mac, sealed);
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, s);
    // Any flipped bit — nonce, ciphertext or tag — is refused.
    for (std::size_t i = 0; i < sealed.size(); i += 7) {
      Bytes bad = sealed;
      bad[i] ^= 0x01;
      EXPECT_FALSE(crypto::unseal(k.seal, k.seal_mac, bad)) << "byte " << i;
    }
    Bytes cut = sealed;
    cut.resize(cut.size() - 16);
    EXPECT_FALSE(crypto::unseal(k.seal, k.seal_mac, cut));
  }
  // Short secrets of different lengths seal to the same size; the same text seals differently each
  // time (a fresh nonce), so equal answers do not show as equal ciphertexts.
  EXPECT_EQ(crypto::seal(k.seal, k.seal_mac, "> 0").size(), crypto::seal(k.seal, k.seal_mac, "-0.01 .. 0.01").size());
  EXPECT_NE(crypto::seal(k.seal, k.seal_mac, "> 0"), crypto::seal(k.seal, k.seal_mac, "> 0"));
  // Another course's keys open nothing.
  const PackKeys other = CourseKey::generate().derive();
  EXPECT_FALSE(crypto::unseal(other.seal, other.seal_mac, crypto::seal(k.seal, k.seal_mac, "> 0")));
  // The ciphertext is not the text.
  const Bytes sealed = crypto::seal(k.seal, k.seal_mac, "the answer is 42");
  EXPECT_EQ(std::string(sealed.begin(), sealed.end()).find("answer"), std::string::npos);
}

TEST(CourseKey, DerivedKeysAreDistinctAndStable) {
  const auto key = CourseKey::from_hex(std::string(64, 'a'));
  ASSERT_TRUE(key);
  const PackKeys a = key->derive(), b = key->derive();
  EXPECT_EQ(a.seal, b.seal);
  EXPECT_EQ(a.course_id, b.course_id);
  EXPECT_EQ(a.course_id.size(), 32u);
  EXPECT_NE(a.seal, a.seal_mac);
  EXPECT_NE(a.seal, a.progress);
  EXPECT_NE(a.progress, unkeyed_progress_key());
  // Derived = HMAC(course key, label).
  const Bytes raw = *crypto::from_hex(std::string(64, 'a'));
  EXPECT_EQ(a.progress, crypto::hmac_sha256(raw, "progress"));
  EXPECT_NE(CourseKey::generate().hex(), CourseKey::generate().hex());
}

TEST(CourseKey, KeyFileIsPrivateAndNeverOverwritten) {
  TempDir dir;
  const fs::path f = dir.path() / "course.key";
  const CourseKey k = CourseKey::generate();
  k.write(f);
  struct stat st{};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(CourseKey::read(f).hex(), k.hex());
  try {
    CourseKey::generate().write(f);
    FAIL() << "an existing key file was replaced";
  } catch (const KeyError& e) {
    EXPECT_NE(std::string(e.what()).find("never overwritten"), std::string::npos) << e.what();
  }
  EXPECT_EQ(CourseKey::read(f).hex(), k.hex());

  const fs::path bad = dir.path() / "bad.key";
  std::ofstream(bad) << "not a key\n";
  try {
    (void)CourseKey::read(bad);
    FAIL();
  } catch (const KeyError& e) {
    EXPECT_NE(std::string(e.what()).find("not a course key"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)CourseKey::read(dir.path() / "missing.key"), KeyError);
  EXPECT_FALSE(CourseKey::from_hex(std::string(62, 'a')));
}

}  // namespace
}  // namespace tttlab::course
