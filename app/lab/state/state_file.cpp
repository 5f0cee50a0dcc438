#include "lab/state/state_file.hpp"

#include <sstream>
#include <system_error>

#include "lab/state/json_fields.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/limits.hpp"

namespace tttlab::lab {

namespace fs = std::filesystem;

nlohmann::json parse_state(const std::string& text, const std::string& source) {
  // A state file is a few levels deep; a hostile one nested thousands deep would build a value whose
  // recursive destruction or printing exhausts the stack, so nesting is capped while parsing.
  constexpr int kMaxDepth = 64;
  const auto depth_cap = [&source](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxDepth)
      throw StateError(source + " nests arrays and objects more than " + std::to_string(kMaxDepth) +
                       " levels deep: not a TTT Lab state file");
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text, depth_cap);
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number too large for a double ("1e999") is an out_of_range (406),
    // which escaped every caller's catch of StateError (found by fuzz_state_file).
    // e.what() is "[json.exception.parse_error.101] parse error at line 3, column 5: …"; keep the
    // part after the bracketed id.
    std::string what = e.what();
    if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    throw StateError(source + " is not valid JSON: " + clip(what, 200));
  }
  if (!j.is_object())
    throw StateError(source + " is not a TTT Lab state file (the top level is not an object)");
  auto f = j.find("format");
  if (f == j.end() || !f->is_string() || f->get<std::string>() != kStateFormat)
    throw StateError(source + " is not a TTT Lab state file (missing \"format\": \"" +
                     std::string(kStateFormat) + "\")");
  // The envelope's messages name the file too ("x.tttlab: version: expected an integer ...").
  try {
    FieldReader r(j, "");
    const auto version = r.integer("version", 1, 1'000'000, kStateVersion);
    if (version > kStateVersion)
      throw StateError(source + " was written by a newer TTT Lab (state version " +
                       std::to_string(version) + ", this build reads up to " +
                       std::to_string(kStateVersion) + ")");
    r.string("active_panel", 64, "");
    r.object("panels");  // must be an object when present
  } catch (const StateError& e) {
    const std::string what = e.what();
    if (what.rfind(source, 0) == 0) throw;
    throw StateError(source + ": " + what);
  }
  return j;
}

nlohmann::json read_state_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw StateError(clip(path.string(), 240) + ": no such file");
  if (fs::is_directory(path, ec)) throw StateError(clip(path.string(), 240) + " is a directory, not a state file");
  // Only a regular file of at most 16 MiB is read: a FIFO would block the app forever, a device
  // (/dev/zero) never ends (tttlab::read_file_text refuses both, without blocking).
  std::string text;
  try {
    text = read_file_text(path, 16u << 20);
  } catch (const FileError& e) {
    throw StateError(e.what());
  }
  return parse_state(text, clip(path.string(), 240));
}

void write_state_file(const fs::path& path, const nlohmann::json& state) {
  if (path.empty()) throw StateError("no file name given");
  // The one atomic writer (tttlab/io/atomic_file.hpp): a complete file or the old one, and never
  // through a link or over a device at the chosen path.
  try {
    write_file_atomic(path, state.dump(2) + "\n");
  } catch (const FileError& e) {
    throw StateError(e.what());
  }
}

void mark_envelope_keys(KeyLog& log) {
  log.mark("format");
  log.mark("app");
}

nlohmann::json make_state(const std::string& active_panel, nlohmann::json panels) {
  return {{"format", kStateFormat},
          {"version", kStateVersion},
          {"app", "tttlab 0.1.0"},
          {"active_panel", active_panel},
          {"panels", std::move(panels)}};
}

}  // namespace tttlab::lab
