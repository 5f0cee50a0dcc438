// A run directory and its manifest (see tttlab/train/run_dir.hpp).
#include "tttlab/train/run_dir.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/json.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/io/sha256.hpp"

namespace tttlab {
namespace fs = std::filesystem;

namespace {

std::string quoted(const fs::path& p) { return "'" + clip(p.string(), 240) + "'"; }

// The manifest's size is a few hundred bytes; the bound only keeps a hostile one from being read whole.
constexpr std::uint64_t k_max_manifest_bytes = 1 << 20;
constexpr std::size_t k_max_manifest_entries = 4096;

// A name the run may write: one path component of printable ASCII, not "." or "..".
bool plain_name(const std::string& n) {
  if (n.empty() || n.size() > 255 || n == "." || n == "..") return false;
  return std::all_of(n.begin(), n.end(), [](char c) { return c > 0x20 && c < 0x7f && c != '/' && c != '\\'; });
}

// lstat without following links; false when the path does not exist.
bool entry_status(const fs::path& p, struct stat& st) {
  if (::lstat(p.c_str(), &st) == 0) return true;
  if (errno == ENOENT) return false;
  throw FileError("cannot inspect " + quoted(p) + ": " + std::strerror(errno));
}

// A run killed while it wrote its first manifest leaves the directory holding only the atomic
// writer's temporary file (".tttlab-run.json.tmp-PID-N"). That directory is still a new run's: the
// temporary files are removed, but only when nothing else is there, so a folder of the user's that
// happens to hold such a name is still refused whole.
void remove_unfinished_manifest(const fs::path& dir) {
  const std::string prefix = std::string(".") + k_run_manifest + ".tmp-";
  std::vector<fs::path> leftovers;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind(prefix, 0) != 0) return;
    if (!fs::is_regular_file(fs::symlink_status(e.path(), ec))) return;
    leftovers.push_back(e.path());
  }
  for (const auto& p : leftovers) fs::remove(p, ec);
}

}  // namespace

bool RunDirectory::holds_run(const fs::path& dir) {
  std::error_code ec;
  for (const char* name : {"latest", "train_config.json"})
    if (fs::exists(fs::symlink_status(dir / name, ec))) return true;
  return false;
}

RunDirectory RunDirectory::claim(const fs::path& dir) {
  if (dir.empty()) throw std::runtime_error("the run directory is an empty path");
  RunDirectory rd(dir);
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) {
    fs::create_directories(dir, ec);
    if (ec) throw FileError("cannot create the run directory " + quoted(dir) + ": " + ec.message());
    rd.write_manifest();
    return rd;
  }
  if (!fs::is_directory(st))
    throw std::runtime_error(quoted(dir) + " is not a directory: a run is written into a new or empty directory");
  if (fs::exists(fs::symlink_status(dir / k_run_manifest, ec))) {
    rd.load_manifest();
    return rd;
  }
  if (fs::exists(fs::symlink_status(dir / "latest", ec))) {
    rd.adopt_legacy();
    return rd;
  }
  remove_unfinished_manifest(dir);
  if (!fs::is_empty(dir, ec) || ec)
    throw std::runtime_error(quoted(dir) +
                             " is not empty and holds no TTT Lab run: a run is written into a new or empty "
                             "directory, so that it never mixes its files with yours (or deletes them)");
  rd.write_manifest();
  return rd;
}

RunDirectory RunDirectory::open(const fs::path& dir) {
  RunDirectory rd(dir);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dir / k_run_manifest, ec))) {
    rd.load_manifest();
  } else if (fs::exists(fs::symlink_status(dir / "latest", ec)) ||
             fs::is_regular_file(fs::symlink_status(dir / "train_config.json", ec))) {
    rd.adopt_legacy();
  } else {
    throw std::runtime_error(quoted(dir) + " holds no TTT Lab run (no " + k_run_manifest + ", no 'latest' and no "
                             "train_config.json)");
  }
  return rd;
}

void RunDirectory::load_manifest() {
  const fs::path p = m_dir / k_run_manifest;
  struct stat st {};
  if (entry_status(p, st) && S_ISLNK(st.st_mode))
    throw std::runtime_error(quoted(p) + " is a symbolic link: a run's manifest must be a regular file");
  const Json j = parse_json(read_file_text(p, k_max_manifest_bytes), p.string());
  const auto bad = [&](const std::string& why) { throw std::runtime_error(quoted(p) + " is damaged: " + why); };
  if (!j.is_object() || !j.contains("tttlab_run") || j["tttlab_run"] != 1) bad("it is not a version-1 run manifest");
  if (!j.contains("entries") || !j["entries"].is_array()) bad("'entries' must be a list of names");
  if (j["entries"].size() > k_max_manifest_entries) bad("more than " + std::to_string(k_max_manifest_entries) + " entries");
  for (const auto& e : j["entries"]) {
    if (!e.is_string() || !plain_name(e.get<std::string>())) bad("an entry is not a plain file name");
    m_entries.push_back(e.get<std::string>());
  }
  if (j.contains("train_config_sha256")) {
    if (!j["train_config_sha256"].is_string() || j["train_config_sha256"].get<std::string>().size() != 64)
      bad("'train_config_sha256' is not a SHA-256");
    m_config_sha256 = j["train_config_sha256"].get<std::string>();
  }
}

void RunDirectory::adopt_legacy() {
  // A run written before manifests: its own files and the checkpoints that hold a model. A user's
  // folder named like a checkpoint but holding no model is left out, and so never pruned.
  std::error_code ec;
  for (const char* name : {"train_config.json", "metrics.jsonl", "latest"})
    if (fs::is_regular_file(fs::symlink_status(m_dir / name, ec))) m_entries.emplace_back(name);
  for (const auto& e : fs::directory_iterator(m_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (checkpoint_step_of(name) && fs::is_directory(fs::symlink_status(e.path(), ec)) &&
        fs::is_regular_file(fs::symlink_status(e.path() / "model.safetensors", ec)))
      m_entries.push_back(name);
  }
  std::sort(m_entries.begin(), m_entries.end());
  write_manifest();
}

void RunDirectory::write_manifest() const {
  Json j = Json::object();
  j["tttlab_run"] = 1;
  j["entries"] = m_entries;
  if (!m_config_sha256.empty()) j["train_config_sha256"] = m_config_sha256;
  write_file_atomic(m_dir / k_run_manifest, dump_json(j, 2) + "\n");
}

bool RunDirectory::lists(const std::string& name) const {
  return std::find(m_entries.begin(), m_entries.end(), name) != m_entries.end();
}

void RunDirectory::record(const std::string& name) {
  if (lists(name)) return;
  m_entries.push_back(name);
  write_manifest();
}

fs::path RunDirectory::file(const std::string& name) {
  if (!plain_name(name)) throw std::invalid_argument("a run file name must be a plain name, got '" + clip(name) + "'");
  const fs::path p = m_dir / name;
  check_output_file(p);  // the atomic writer's own rule: no link, nothing but a regular file
  record(name);
  return p;
}

fs::path RunDirectory::checkpoint_dir(long step) {
  const std::string name = checkpoint_name(step);
  const fs::path p = m_dir / name;
  struct stat st {};
  if (entry_status(p, st)) {
    if (S_ISLNK(st.st_mode))
      throw FileError("refusing to write the checkpoint into " + quoted(p) +
                      ": it is a symbolic link, and a run writes nothing outside its directory");
    if (!S_ISDIR(st.st_mode)) throw FileError("refusing to write the checkpoint into " + quoted(p) + ": it is not a directory");
    if (!lists(name))
      throw FileError("refusing to write the checkpoint into " + quoted(p) +
                      ": the directory exists but this run did not create it");
  }
  record(name);
  if (::mkdir(p.c_str(), 0777) != 0 && errno != EEXIST)
    throw FileError("cannot create the checkpoint directory " + quoted(p) + ": " + std::strerror(errno));
  return p;
}

void RunDirectory::prune_checkpoints(std::size_t keep) {
  std::string latest;
  try {
    latest = read_file_text(m_dir / "latest", 256);
  } catch (const FileError&) {
  }
  while (!latest.empty() && (latest.back() == '\n')) latest.pop_back();
  std::vector<std::pair<long, std::string>> listed;
  for (const auto& name : m_entries)
    if (const auto step = checkpoint_step_of(name)) listed.emplace_back(*step, name);
  std::sort(listed.begin(), listed.end());
  if (listed.size() <= keep) return;
  bool changed = false;
  for (std::size_t i = 0; i + keep < listed.size(); ++i) {
    const std::string& name = listed[i].second;
    if (name == latest) continue;
    std::error_code ec;
    // remove_all removes a symbolic link itself, never what it points to.
    fs::remove_all(m_dir / name, ec);
    if (ec) continue;  // kept in the manifest: pruned again next time
    m_entries.erase(std::find(m_entries.begin(), m_entries.end(), name));
    changed = true;
  }
  if (changed) write_manifest();
}

void RunDirectory::set_train_config_digest(const std::string& text) {
  m_config_sha256 = sha256_hex(std::string_view(text));
  write_manifest();
}

void RunDirectory::verify_train_config(const std::string& text) const {
  if (m_config_sha256.empty()) return;
  if (sha256_hex(std::string_view(text)) != m_config_sha256)
    throw std::runtime_error(quoted(m_dir / "train_config.json") +
                             " was changed after the run wrote it (its SHA-256 does not match the run's manifest); "
                             "resuming would train a different run than the one started");
}

}  // namespace tttlab
