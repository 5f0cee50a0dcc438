// A state carried in a link (lab/state/state_link.hpp): what File → Copy link to this view writes, the
// browser's page opens exactly; anything else in the link is refused with a message, never opened.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"
#include "lab/state/state_link.hpp"

namespace tttlab::lab {
namespace {

TEST(StateLink, Base64urlMatchesTheRfcVectorsWithoutPadding) {
  // RFC 4648 §10, with base64url's alphabet and no padding.
  EXPECT_EQ(base64url_encode(""), "");
  EXPECT_EQ(base64url_encode("f"), "Zg");
  EXPECT_EQ(base64url_encode("fo"), "Zm8");
  EXPECT_EQ(base64url_encode("foo"), "Zm9v");
  EXPECT_EQ(base64url_encode("foob"), "Zm9vYg");
  EXPECT_EQ(base64url_encode("fooba"), "Zm9vYmE");
  EXPECT_EQ(base64url_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64url_encode("\xfb\xff"), "-_8");  // the two characters where base64url differs
  EXPECT_EQ(base64url_decode("Zm9vYmE="), "fooba");  // padding and + / as pasted by hand
  EXPECT_EQ(base64url_decode("+/8"), "\xfb\xff");
}

TEST(StateLink, EveryByteStringRoundTrips) {
  const unsigned seed = 3802;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int n = 0; n < 300; ++n) {
    std::string bytes(static_cast<std::size_t>(n), '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
    ASSERT_EQ(base64url_decode(base64url_encode(bytes)), bytes) << "length " << n;
  }
}

TEST(StateLink, AViewsLinkOpensTheSameState) {
  nlohmann::json panels = {{"inner_stepper", {{"speed", 8.0}, {"text", "Ünïcode ‖W‖ \"quoted\""}}}};
  const nlohmann::json state = make_state("inner_stepper", panels);
  const std::string fragment = state_link_fragment(state);
  ASSERT_EQ(fragment.rfind("state=", 0), 0u);
  EXPECT_EQ(fragment.find_first_not_of(
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", 6),
            std::string::npos)
      << "a link carries only base64url's characters";
  EXPECT_EQ(state_from_link(fragment.substr(6)), state);
}

TEST(StateLink, ALinkThatIsNotAStateIsRefusedWithAMessage) {
  const auto message = [](const std::string& value) {
    try {
      state_from_link(value);
    } catch (const StateError& e) {
      return std::string(e.what());
    }
    return std::string("(opened)");
  };
  EXPECT_NE(message("abc$def").find("character base64url does not use at position 4"), std::string::npos);
  EXPECT_NE(message("Zm9vY").find("cut short"), std::string::npos);
  EXPECT_NE(message(std::string(400 * 1024, 'A')).find("longer than 256 kB"), std::string::npos);
  // Valid base64url, but not a state: the state file's own checks speak.
  EXPECT_NE(message(base64url_encode("{\"format\": \"something-else\"}")).find("the link"), std::string::npos);
  EXPECT_NE(message(base64url_encode("not json at all")), "(opened)");
}

}  // namespace
}  // namespace tttlab::lab
