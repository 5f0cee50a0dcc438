#include "lab/engine/data_source.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>

#include "lab/engine/resources.hpp"
#include "tttlab/data/text_file.hpp"
#include "tttlab/io/atomic_file.hpp"

namespace tttlab::lab {
namespace fs = std::filesystem;

std::string default_data_source() { return find_brown_dir() ? "brown" : "sample"; }

void check_data_source(const std::string& source) {
  if (source == "sample") return;
  if (source == "brown") {
    if (!find_brown_dir())
      throw std::runtime_error("the Brown corpus is not prepared (data/brown/train.txt and val.txt were not "
                               "found): run `bash scripts/setup.sh`, or choose the sample text or a file");
    return;
  }
  if (source.empty()) throw std::runtime_error("no text file is chosen: choose the Brown corpus, the sample text or a file");
  std::uint64_t size = 0;
  try {
    size = regular_file_size(source);  // opens it: missing, a folder and unreadable all fail here
  } catch (const std::exception& e) {
    throw std::runtime_error(e.what());
  }
  if (size == 0) throw std::runtime_error("the text file '" + source + "' is empty: choose a file with text in it");
}

ViewText read_view_text(const std::string& path, std::size_t max_bytes) {
  const std::string name = "'" + path + "'";
  if (path.empty()) throw std::runtime_error("no text file is chosen");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw std::runtime_error("the text file " + name + " does not exist");
  if (fs::is_directory(st)) throw std::runtime_error(name + " is a folder: choose a text file");
  ViewText v;
  try {
    v.file_bytes = regular_file_size(path);  // opens it: not a regular file and unreadable fail here
  } catch (const std::exception& e) {
    throw std::runtime_error(e.what());
  }
  if (v.file_bytes > kMaxViewTextFileBytes)
    throw std::runtime_error(name + " is too large for this view: " + std::to_string(v.file_bytes) +
                             " bytes, at most " + std::to_string(kMaxViewTextFileBytes) +
                             " (the view reads only its first " + std::to_string(max_bytes) +
                             " bytes): choose a shorter file or copy a passage into one");
  TextRead r;
  try {
    r = read_text_file(path, kMaxViewTextFileBytes);
  } catch (const std::exception& e) {
    throw std::runtime_error(e.what());
  }
  if (r.problem) throw std::runtime_error(*r.problem);
  if (auto problem = text_problem(compute_text_stats(r.bytes), path)) throw std::runtime_error(*problem);
  std::size_t n = std::min(r.bytes.size(), max_bytes);
  if (n < r.bytes.size()) {
    v.cut = true;
    while (n > 0 && (r.bytes[n] & 0xC0) == 0x80) --n;  // not inside a UTF-8 character
  }
  v.text.assign(r.bytes.begin(), r.bytes.begin() + static_cast<std::ptrdiff_t>(n));
  if (v.text.empty()) throw std::runtime_error(name + " has no whole character in its first bytes");
  return v;
}

std::shared_ptr<const DataBytes> load_data(const std::string& source, int min_window) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const DataBytes>> cache;
  std::lock_guard lk(mu);
  std::shared_ptr<const DataBytes> d;
  if (auto it = cache.find(source); it != cache.end()) {
    d = it->second;
  } else {
    auto n = std::make_shared<DataBytes>();
    n->source = source;
    TextLoadOptions opt;
    opt.seq_len = 0;
    if (source == "brown") {
      const auto dir = find_brown_dir();
      if (!dir)
        throw std::runtime_error("the Brown corpus is not prepared (data/brown/train.txt and val.txt were not "
                                 "found): run `bash scripts/setup.sh`, or choose the sample text or a file");
      n->train = load_text_file(*dir / "train.txt", opt).bytes;
      n->val = load_text_file(*dir / "val.txt", opt).bytes;
      std::error_code ec;
      const fs::path rel = dir->lexically_relative(fs::current_path(ec));  // symlinks kept as they are
      const bool inside = !ec && !rel.empty() && rel.string().rfind("..", 0) != 0;
      n->description = "Brown corpus (" + (inside ? rel : *dir).string() + ")";
      n->dir = *dir;
    } else if (source == "sample") {
      const std::string& s = sample_corpus();
      const std::size_t n_val = s.size() / 5;
      n->train.assign(s.begin(), s.end() - static_cast<std::ptrdiff_t>(n_val));
      n->val.assign(s.end() - static_cast<std::ptrdiff_t>(n_val), s.end());
      n->description = "built-in sample text (" + std::to_string(s.size()) + " bytes)";
    } else {
      std::vector<std::uint8_t> bytes;
      try {
        bytes = load_text_file(source, opt).bytes;
      } catch (const std::exception& e) {
        throw std::runtime_error(e.what());
      }
      const std::size_t n_val = std::max<std::size_t>(bytes.size() / 20, 1);
      n->val.assign(bytes.end() - static_cast<std::ptrdiff_t>(n_val), bytes.end());
      bytes.resize(bytes.size() - n_val);
      n->train = std::move(bytes);
      n->description = source;
    }
    d = n;
    cache.emplace(source, d);
  }
  if (d->val.size() < static_cast<std::size_t>(min_window) + 1 ||
      d->train.size() < static_cast<std::size_t>(min_window) + 1)
    throw std::runtime_error(d->description + " is too short for windows of " + std::to_string(min_window) +
                             " bytes (validation part: " + std::to_string(d->val.size()) +
                             " bytes): use a longer text or a shorter sequence length");
  return d;
}

}  // namespace tttlab::lab
