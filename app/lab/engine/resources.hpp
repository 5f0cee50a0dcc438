// app/lab/engine/resources.hpp — where the app finds what ships with it (the trained model, the
// lessons) and the data a user prepared (the Brown corpus), and built-in texts for when neither is
// there.
//
// A file that ships in the repository (assets/…, lessons/…) is looked up under these roots, in order:
//   $TTTLAB_HOME (if set), the executable's parent folder (build/tttlab → the repository root), the
//   executable's folder, ../share/tttlab next to the executable (an install), the working directory.
// So `build/tttlab gui` finds assets/models/tiny-brown from any working directory, and an installed
// copy finds its share folder. Data (data/brown) is looked up under the same roots.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tttlab::lab {

// The roots above that exist, without duplicates.
std::vector<std::filesystem::path> resource_roots();
// The first root holding `relative` (a file or folder). `looked_in` (optional) receives the
// candidates tried, for an error message.
std::optional<std::filesystem::path> find_resource(const std::filesystem::path& relative,
                                                   std::string* looked_in = nullptr);

// The folder of the user's files that outlive a run: $XDG_CONFIG_HOME/tttlab (a relative
// XDG_CONFIG_HOME is ignored, as the XDG spec says), else ~/.config/tttlab, else (no home) empty. In
// the browser: /persist, the folder the page keeps in IndexedDB (app/gui/platform/host.hpp).
std::filesystem::path user_config_dir();

// Where the app keeps one of the user's files (the course progress, the UI settings): the path in
// the environment variable `override_env` when set, else user_config_dir()/<name>, else, with no
// home, "tttlab-<name>" in the working directory.
std::filesystem::path user_config_file(const char* override_env, const std::string& name);

// data/brown with train.txt and val.txt, or nothing.
std::optional<std::filesystem::path> find_brown_dir();

// Built-in texts: short, original English passages (written for this app), so every panel has
// something to read when no corpus was prepared.
struct SampleText {
  const char* name;
  const char* text;
};
const std::vector<SampleText>& sample_texts();
// All sample texts joined (a few KB): the fallback corpus for evaluation and the benchmark run.
const std::string& sample_corpus();

}  // namespace tttlab::lab
