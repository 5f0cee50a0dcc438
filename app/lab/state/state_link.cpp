#include "lab/state/state_link.hpp"

#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"

namespace tttlab::lab {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-' || c == '+') return 62;
  if (c == '_' || c == '/') return 63;
  return -1;
}

}  // namespace

std::string base64url_encode(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  unsigned buffer = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    buffer = (buffer << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kAlphabet[(buffer >> bits) & 63];
    }
  }
  if (bits > 0) out += kAlphabet[(buffer << (6 - bits)) & 63];
  return out;
}

std::string base64url_decode(const std::string& text) {
  std::size_t end = text.size();
  while (end > 0 && text[end - 1] == '=') --end;
  if (end % 4 == 1) throw StateError("the link's state is cut short (its length is not that of base64url text)");
  if (end / 4 * 3 > kMaxLinkStateBytes)
    throw StateError("the link's state is longer than " + std::to_string(kMaxLinkStateBytes / 1024) +
                     " kB: it is not a state");
  std::string out;
  out.reserve(end / 4 * 3 + 2);
  unsigned buffer = 0;
  int bits = 0;
  for (std::size_t i = 0; i < end; ++i) {
    const int v = sextet(text[i]);
    if (v < 0)
      throw StateError("the link's state has a character base64url does not use at position " + std::to_string(i + 1));
    buffer = (buffer << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xff);
    }
  }
  return out;
}

std::string state_link_fragment(const nlohmann::json& state) { return "state=" + base64url_encode(state.dump()); }

nlohmann::json state_from_link(const std::string& value) { return parse_state(base64url_decode(value), "the link"); }

}  // namespace tttlab::lab
