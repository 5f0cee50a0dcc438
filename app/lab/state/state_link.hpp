// app/lab/state/state_link.hpp — a state (state_file.hpp) carried in a link: the fragment
// "state=<base64url of the compact JSON>" of the browser build's address (web/main.cpp reads it;
// File → Copy link to this view writes it), so that a teacher can hand out a link to an exact view.
//
// base64url is RFC 4648 §5 without padding: the characters A–Z a–z 0–9 - _ survive every mail client
// and chat that would mangle + / = or JSON's quotes. Decoding also accepts + / and trailing = (links
// pasted by hand), and nothing else.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace tttlab::lab {

// The largest state a link may carry, decoded. Browsers keep addresses of a few MB; a state is a few
// kB, so this refuses only links that are not states.
inline constexpr std::size_t kMaxLinkStateBytes = 256 * 1024;

std::string base64url_encode(const std::string& bytes);
// Throws StateError naming what is wrong (a character outside the alphabet, a bad length, too long).
std::string base64url_decode(const std::string& text);

// "state=<base64url>" for a state document (make_state's envelope).
std::string state_link_fragment(const nlohmann::json& state);
// The state of a link's fragment value (what follows "state="): decoded and checked like a state file
// (parse_state). Throws StateError, with a message for the student, on anything else.
nlohmann::json state_from_link(const std::string& value);

}  // namespace tttlab::lab
