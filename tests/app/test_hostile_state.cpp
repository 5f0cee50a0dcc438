// Hostile state files (docs/SECURITY.md): bounded messages that name the file, special files refused without
// blocking, and a state file naming a hostile checkpoint refused before the model is allocated.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/io/temp_dir.hpp"
#include "core/tiny_run.hpp"
#include "lab/models/model_library.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/safetensors.hpp"
#include "tttlab/model/checkpoint.hpp"

namespace tttlab::lab {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HostileStateFile, MessagesAreBoundedAndNameTheFile) {
  const std::string text = "{\"format\": \"tttlab-state\", \"version\": \"" + std::string(1 << 20, 'v') + "\"}";
  const std::string e = error_of([&] { parse_state(text, "long.tttlab"); });
  EXPECT_EQ(e.rfind("long.tttlab: version: expected an integer", 0), 0u) << e.substr(0, 200);
  EXPECT_LT(e.size(), 200u);
  const std::string arr = "{\"format\": \"tttlab-state\", \"version\": [" + std::string(60, '[') + std::string(60, ']') + "]}";
  const std::string a = error_of([&] { parse_state(arr, "arr.tttlab"); });
  EXPECT_NE(a.find("got an array of 1 entries"), std::string::npos) << a;
}

TEST(HostileStateFile, SpecialFilesAreRefusedWithoutBlocking) {
  testing::TempDir dir;
  const fs::path fifo = dir / "view.tttlab";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(error_of([&] { read_state_file(fifo); }).find("FIFO"), std::string::npos);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  EXPECT_NE(error_of([] { read_state_file("/dev/zero"); }).find("character device"), std::string::npos);
}

TEST(HostileStateFile, AHostileCheckpointIsRefusedBeforeItIsAllocated) {
  testing::TempDir dir;
  ModelConfig c = testing::tiny_model({.intermediate = 16});
  Model<float> m(c, 1);
  save_model_safetensors(m, dir / "model.safetensors");
  c.mini_batch_size = 60000;  // the size bomb of the issue: δ would be [60000], the dual form 60000²
  write_file_atomic(dir / "config.json", c.to_json());
  ModelLibrary lib;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { lib.open_checkpoint(dir.path()); });
  EXPECT_NE(e.find("learnable_token_idx"), std::string::npos) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  // The shipped-style file without a checksum loads, with the note kept for the app.
  c.mini_batch_size = 4;
  write_file_atomic(dir / "config.json", c.to_json());
  SafetensorsWriter w;
  for (const auto& t : state_dict(m)) w.add(t.name, t.shape, std::span<const float>(t.data));
  w.write(dir / "model.safetensors");
  const std::string id = lib.open_checkpoint(dir.path());
  const ModelInfo* info = lib.view()->find(id);
  ASSERT_NE(info, nullptr);
  EXPECT_NE(info->note.find("no SHA-256"), std::string::npos) << info->note;
}

}  // namespace
}  // namespace tttlab::lab
