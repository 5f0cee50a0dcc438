// app/lab/state/state_file.hpp — the .tttlab state file: the panel settings and seeds that reproduce
// a view, as JSON.
//
//   {
//     "format": "tttlab-state",      required, identifies the file
//     "version": 1,                  files from a newer version are refused with a clear message
//     "active_panel": "inner_stepper",
//     "compute": "auto",             where the panels compute: auto, cpu or gpu (optional)
//     "panels": { "<panel id>": { …that panel's settings… }, … }
//   }
//
// Reading is strict about structure and types (StateError with the field path) and tolerant about
// absence (missing settings keep their defaults), so hand-written minimal files work.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace tttlab::lab {

class KeyLog;

inline constexpr const char* kStateFormat = "tttlab-state";
inline constexpr int kStateVersion = 1;
inline constexpr const char* kStateExtension = ".tttlab";

// Parses and checks the envelope (format, version, panels is an object). Throws StateError.
nlohmann::json parse_state(const std::string& text, const std::string& source_name);
// Reads a file (at most 16 MiB) and parses it. Throws StateError (missing, unreadable, invalid).
nlohmann::json read_state_file(const std::filesystem::path& path);
// Writes atomically (temporary file + rename), pretty-printed. Throws StateError.
void write_state_file(const std::filesystem::path& path, const nlohmann::json& state);
// Marks the envelope's keys that no setting reads ("format", "app") as read in `log`.
void mark_envelope_keys(KeyLog& log);
// The envelope around the panels' settings.
nlohmann::json make_state(const std::string& active_panel, nlohmann::json panels);

}  // namespace tttlab::lab
