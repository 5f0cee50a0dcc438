// fuzz_run_dir: a real run directory (a tiny model trained two steps, with a checkpoint) in which one
// file is mutated, then resumed as `tttlab train --resume` does (TrainingSession::resume), trained one
// step and checkpointed.
//
// Input: byte 0 picks the file (train_state.safetensors, model.safetensors, config.json of the
// checkpoint, the run's train_config.json, latest, tttlab-run.json); byte 1 bit 0 asks to cut the file
// at the first edit's offset; then edits of 5 bytes each (a 32-bit offset, taken modulo the file's
// size, and the byte XORed in). Mutating a real file reaches far deeper than bytes from nothing.
//
// Contract checked (docs/SECURITY.md): resuming either throws a documented error, or succeeds only
// when the mutation cannot have changed the run: a changed train state or model file never resumes
// (their SHA-256 covers every byte), and a changed config.json resumes only when it still parses to
// the same model. After a successful resume, one step and a checkpoint complete.
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/tiny_run.hpp"
#include "fuzz_check.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/model/config.hpp"
#include "tttlab/train/run_dir.hpp"
#include "tttlab/train/session.hpp"

namespace {

using namespace tttlab;
namespace fs = std::filesystem;

struct Template {
  fs::path root, run, work;
};

// Made once per process: a run of a tiny TTT-Linear model on the synthetic copy task (no data file).
const Template& make_template() {
  static const Template t = [] {
    Template x;
    x.root = fs::temp_directory_path() / ("tttlab-fuzz-run-" + std::to_string(::getpid()));
    fs::remove_all(x.root);
    x.run = x.root / "template";
    x.work = x.root / "work";
    const TrainConfig c = testing::tiny_train_config(
        "copy", {.steps = 4, .lr = TrainConfig{}.lr, .seed = 11, .threads = 1, .eval_windows = 2});
    auto s = TrainingSession::create(x.run, c, TextData::load(c));
    s->trainer().step();
    s->trainer().step();
    s->checkpoint();
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(fs::temp_directory_path() / ("tttlab-fuzz-run-" + std::to_string(::getpid())), ec);
    });
    return x;
  }();
  return t;
}

const char* const k_files[] = {"step-0000002/train_state.safetensors", "step-0000002/model.safetensors",
                               "step-0000002/config.json", "train_config.json", "latest", k_run_manifest};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const Template& t = make_template();
  std::error_code ec;
  fs::remove_all(t.work, ec);
  fs::copy(t.run, t.work, fs::copy_options::recursive);

  const std::string rel = k_files[data[0] % std::size(k_files)];
  const fs::path target = t.work / rel;
  std::vector<std::uint8_t> bytes = read_file_bytes(target);
  const std::vector<std::uint8_t> original = bytes;
  const bool cut = data[1] & 1;
  bool first = true;
  for (std::size_t i = 2; i + 5 <= size && !bytes.empty(); i += 5) {
    std::uint32_t off = 0;
    std::memcpy(&off, data + i, 4);
    off %= static_cast<std::uint32_t>(bytes.size());
    if (first && cut) bytes.resize(off);
    first = false;
    if (off < bytes.size()) bytes[off] ^= data[i + 4];
  }
  fs::remove(target);
  write_file_atomic(target, std::span<const std::uint8_t>(bytes));
  const bool changed = bytes != original;

  std::unique_ptr<TrainingSession> s;
  try {
    s = TrainingSession::resume(t.work);
  } catch (const std::runtime_error&) {
    // Every refusal is one of the documented errors (FileError, SafetensorsError, JsonError,
    // MemoryLimitError, ... all runtime_error) or a config's invalid_argument; anything else, a
    // std::bad_alloc or a library's own exception, escapes and is a finding.
    return 0;
  } catch (const std::invalid_argument&) {
    return 0;
  }
  if (changed && (rel.find("safetensors") != std::string::npos))
    tttlab::fuzz::check_failed("a changed checkpoint file resumed", __FILE__, __LINE__);
  if (changed && rel == "step-0000002/config.json") {
    const ModelConfig before = ModelConfig::from_json(std::string(original.begin(), original.end()), "before");
    const ModelConfig after = ModelConfig::from_json(std::string(bytes.begin(), bytes.end()), "after");
    FUZZ_CHECK(before.to_json() == after.to_json());
  }
  FUZZ_CHECK(s->trainer().steps_done() == 2);
  s->trainer().step();
  s->checkpoint();
  FUZZ_CHECK(fs::exists(t.work / "step-0000003" / "model.safetensors"));
  return 0;
}
