#include "lab/engine/resources.hpp"

#include <cstdlib>
#include <system_error>

namespace tttlab::lab {
namespace fs = std::filesystem;

std::vector<fs::path> resource_roots() {
  std::vector<fs::path> candidates;
  if (const char* home = std::getenv("TTTLAB_HOME"); home && *home) candidates.emplace_back(home);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && !exe.empty()) {
    const fs::path dir = exe.parent_path();
    candidates.push_back(dir.parent_path());
    candidates.push_back(dir);
    candidates.push_back(dir.parent_path() / "share" / "tttlab");
  }
  candidates.push_back(fs::current_path(ec));
  std::vector<fs::path> roots;
  for (auto& c : candidates) {
    if (c.empty() || !fs::is_directory(c, ec)) continue;
    const fs::path canon = fs::weakly_canonical(c, ec);
    bool dup = false;
    for (const auto& r : roots) dup = dup || r == canon;
    if (!dup) roots.push_back(canon);
  }
  return roots;
}

std::optional<fs::path> find_resource(const fs::path& relative, std::string* looked_in) {
  std::error_code ec;
  for (const auto& root : resource_roots()) {
    const fs::path p = root / relative;
    if (looked_in) *looked_in += (looked_in->empty() ? "" : ", ") + p.string();
    if (fs::exists(p, ec)) return p;
  }
  return std::nullopt;
}

fs::path user_config_dir() {
#ifdef __EMSCRIPTEN__
  return "/persist";  // the page's IndexedDB-backed folder; the browser has no home folder
#else
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x && fs::path(x).is_absolute())
    return fs::path(x) / "tttlab";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".config" / "tttlab";
  return {};
#endif
}

fs::path user_config_file(const char* override_env, const std::string& name) {
  if (const char* p = std::getenv(override_env); p && *p) return fs::path(p);
  const fs::path dir = user_config_dir();
  if (dir.empty()) return fs::path("tttlab-" + name);
  return dir / name;
}

std::optional<fs::path> find_brown_dir() {
  std::error_code ec;
  for (const auto& root : resource_roots()) {
    const fs::path p = root / "data" / "brown";
    if (fs::exists(p / "train.txt", ec) && fs::exists(p / "val.txt", ec)) return p;
  }
  return std::nullopt;
}

const std::vector<SampleText>& sample_texts() {
  static const std::vector<SampleText> texts = {
      {"The lighthouse keeper",
       "Every evening the keeper climbed the stairs of the old lighthouse, counted the steps, and lit the "
       "lamp. He counted them again on the way down. There were always one hundred and twelve steps, and "
       "he was always glad when the number came out the same, because the sea changed every night and "
       "the stairs did not."},
      {"A letter home",
       "Dear Mother, the weather here has been fine and the work is going well. We start at seven in the "
       "morning and stop at five in the afternoon. On Sundays we walk down to the river and watch the "
       "boats. I have saved a little money and hope to send some of it to you next month. Your loving son."},
      {"Repetition",
       "the cat sat on the mat. the cat sat on the mat. the cat sat on the mat. the cat sat on the mat."},
      {"How a state learns",
       "A recurrent layer reads a sequence one token at a time and keeps what it has seen in a hidden "
       "state. In a test-time training layer the hidden state is itself a small model, and reading a "
       "token means taking one step of gradient descent on it. The more the text repeats itself, the "
       "better the state predicts what comes next."},
      {"Market day",
       "On market day the square filled early. Farmers brought eggs, apples and cheese; the baker brought "
       "bread still warm from the oven. By noon most of the stalls were empty, and by two o'clock the "
       "square was quiet again except for the pigeons."},
  };
  return texts;
}

const std::string& sample_corpus() {
  static const std::string corpus = [] {
    std::string s;
    for (int round = 0; round < 6; ++round)
      for (const auto& t : sample_texts()) {
        s += t.text;
        s += "\n\n";
      }
    return s;
  }();
  return corpus;
}

}  // namespace tttlab::lab
