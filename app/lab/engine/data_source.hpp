// app/lab/engine/data_source.hpp — the text the panels evaluate and train on.
//
// A source is a string that state files store:
//   "brown"    the prepared Brown corpus, data/brown/{train,val}.txt (resources.hpp: where it is found)
//   "sample"   the built-in sample corpus (resources.hpp), a few KB: enough to try things, not to learn
//   anything else: a UTF-8 text file; its first 95 % trains, the last 5 % validates (as tttlab train)
// Loaded bytes are cached per source and shared (immutable). Thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace tttlab::lab {

struct DataBytes {
  std::string source;
  std::string description;  // "Brown corpus (…/data/brown)", "built-in sample text", the file name
  std::filesystem::path dir;  // "brown": the corpus folder
  std::vector<std::uint8_t> train, val;
};

// Throws std::runtime_error with a one-line message (Brown not prepared, file missing or too short).
std::shared_ptr<const DataBytes> load_data(const std::string& source, int min_window = 2);

// Checks that `source` can be loaded without reading it: Brown is prepared, or the file exists, is a
// regular file, can be opened and is not empty. Cheap (a stat and an open), so a request can be refused
// on the engine thread before anything is created for it. Throws std::runtime_error with a one-line
// message naming the file. load_data may still refuse the content (not UTF-8 text, too short).
void check_data_source(const std::string& source);

// A student's own text for the views that read one text token by token (the stepper, the evolution):
// a UTF-8 (or ASCII) file of at most kMaxViewTextFileBytes, checked before it is read (it exists, is a
// regular file, not a folder, can be opened, is not too large), then read and held to the text rule of
// tttlab/data/text_file.hpp (no NUL byte, at most 1 % invalid UTF-8 or control bytes). The view reads
// its first `max_bytes` bytes, cut before a character that would not fit whole. Throws
// std::runtime_error with one line naming the file and saying what to do.
inline constexpr std::uintmax_t kMaxViewTextFileBytes = 1 << 20;
struct ViewText {
  std::string text;             // what the view reads
  std::uintmax_t file_bytes = 0;  // the file's size
  bool cut = false;             // the file is longer than max_bytes
};
ViewText read_view_text(const std::string& path, std::size_t max_bytes);

// "brown" if the corpus is prepared, else "sample".
std::string default_data_source();

}  // namespace tttlab::lab
