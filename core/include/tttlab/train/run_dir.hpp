// tttlab/train/run_dir.hpp — a run directory, and the one rule for everything written into it.
//
// A run directory is the directory the user named (`tttlab train --out RUN`, the app's Training panel,
// `tttlab ablate --out`). The program writes only inside it, never through a symbolic link, and keeps a
// manifest of what it wrote, RUN/tttlab-run.json:
//   {"tttlab_run": 1, "entries": ["train_config.json", "metrics.jsonl", "step-0000500", "latest", ...],
//    "train_config_sha256": "<SHA-256 of train_config.json as last written>"}
// Only entries of the manifest are ever replaced or removed: pruning old checkpoints removes the
// step-NNNNNNN directories the manifest lists and nothing else, so a user's own `step-notes/` or
// `metrics.jsonl` in a folder that was not a run is never touched.
//
// Claiming a directory (RunDirectory::claim) accepts
//   - a path that does not exist (created, with its parents),
//   - an empty directory,
//   - a run: a directory holding the manifest,
//   - a run written before manifests existed (a `latest` file; open() also takes one that holds only
//     train_config.json): its checkpoint directories (step-NNNNNNN holding model.safetensors) and its
//     run files are adopted;
// and refuses anything else (a directory with other files, a file, a link inside the run) with a
// one-line message that says why, before anything is written.
//
// Every path the run writes (file(), checkpoint_dir()) is checked to be inside RUN and not a symbolic
// link or a non-regular file (a device, a FIFO). The manifest is written atomically; an entry is
// recorded before it is created, so a crash leaves at most a listed entry that does not exist yet.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tttlab/model/checkpoint.hpp"  // checkpoint_name, checkpoint_step_of

namespace tttlab {

inline constexpr const char* k_run_manifest = "tttlab-run.json";


class RunDirectory {
 public:
  // See above. Throws std::runtime_error (or FileError) naming the directory and the reason.
  static RunDirectory claim(const std::filesystem::path& dir);
  // A directory that holds a run (manifest or a legacy run, as above); throws otherwise.
  static RunDirectory open(const std::filesystem::path& dir);
  // True when `dir` holds a run: a `latest` file or a train_config.json (a directory claimed with
  // nothing written yet, a manifest alone, does not).
  static bool holds_run(const std::filesystem::path& dir);

  const std::filesystem::path& path() const { return m_dir; }

  // RUN/name for a file the run writes, recorded in the manifest. Refuses a name that is not a plain
  // file name, and an existing entry that is a symbolic link or not a regular file.
  std::filesystem::path file(const std::string& name);
  // RUN/step-NNNNNNN, recorded and created (an existing one must be a real directory, not a link).
  std::filesystem::path checkpoint_dir(long step);
  // Removes the checkpoint directories the manifest lists, except the `keep` newest by step and the one
  // `latest` names; never anything the manifest does not list.
  void prune_checkpoints(std::size_t keep);
  // Records the SHA-256 of train_config.json's text (checked by verify_train_config on resume).
  void set_train_config_digest(const std::string& text);
  // Throws when a digest is recorded and `text` does not match it (train_config.json was edited).
  void verify_train_config(const std::string& text) const;
  bool lists(const std::string& name) const;
  const std::vector<std::string>& entries() const { return m_entries; }

 private:
  explicit RunDirectory(std::filesystem::path dir) : m_dir(std::move(dir)) {}
  void record(const std::string& name);
  void write_manifest() const;
  void load_manifest();
  void adopt_legacy();

  std::filesystem::path m_dir;
  std::vector<std::string> m_entries;
  std::string m_config_sha256;
};

}  // namespace tttlab
