// A training run that cannot start says why, naming the file, and leaves nothing on disk: a text that
// cannot be opened is refused before any directory is made, and a start that fails after its run
// directory was made removes it (and the runs folder it made).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include "app/engine_wait.hpp"
#include "core/io/temp_dir.hpp"
#include "lab/engine/data_source.hpp"
#include "lab/engine/engine.hpp"
#include "lab/models/model_library.hpp"
#include "lab/training/training_module.hpp"

namespace tttlab::lab {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::wait_for;

TrainSettings small_run(const fs::path& runs_dir, const std::string& data) {
  TrainSettings t;
  t.data = data;
  t.steps = 2;
  t.batch_size = 2;
  t.seq_len = 32;
  t.eval_every = 0;
  t.eval_windows = 1;
  t.threads = 1;
  t.runs_dir = runs_dir.string();
  return t;
}

std::unique_ptr<Engine> training_engine(TrainDevices devices = {}) {
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(
      std::make_unique<TrainingModule>(std::make_shared<ModelLibrary>(), std::move(devices)));
  auto e = std::make_unique<Engine>(std::move(mods));
  e->start();
  return e;
}

bool ended(const Snapshot& s, const std::string& name) {
  if (!s.training) return false;
  for (const auto& r : s.training->runs)
    if (r->name == name) return r->state == RunState::Failed || r->state == RunState::Finished;
  return false;
}

const RunView* run_named(const Snapshot& s, const std::string& name) {
  for (const auto& r : s.training->runs)
    if (r->name == name) return r.get();
  return nullptr;
}

TEST(FailedStart, CheckDataSourceNamesTheFileAndSaysWhatIsWrong) {
  TempDir tmp;
  const auto message = [](const std::string& source) {
    try {
      check_data_source(source);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string missing = (tmp / "no-such-text.txt").string();
  EXPECT_NE(message(missing).find("no-such-text.txt"), std::string::npos) << message(missing);
  EXPECT_NE(message(missing).find("No such file"), std::string::npos) << message(missing);
  EXPECT_NE(message(tmp.path().string()).find("not a regular file"), std::string::npos)
      << message(tmp.path().string());
  std::ofstream(tmp / "empty.txt").close();
  EXPECT_NE(message((tmp / "empty.txt").string()).find("is empty"), std::string::npos);
  std::ofstream(tmp / "ok.txt") << "some text";
  EXPECT_EQ(message((tmp / "ok.txt").string()), "");
  EXPECT_EQ(message("sample"), "");
  EXPECT_NE(message("").find("no text file"), std::string::npos);
}

TEST(FailedStart, AMissingTextIsRefusedNamingTheFileAndMakesNoDirectory) {
  TempDir tmp;
  const fs::path runs = tmp / "runs";
  auto e = training_engine();
  e->post(TrainStart{small_run(runs, (tmp / "missing-corpus.txt").string()), "missing"});
  const auto s =
      wait_for(*e, [](const Snapshot& x) { return x.training && !x.training->error.empty(); });
  EXPECT_NE(s->training->error.find("missing-corpus.txt"), std::string::npos) << s->training->error;
  EXPECT_NE(s->training->error.find("Cannot start"), std::string::npos) << s->training->error;
  EXPECT_TRUE(s->training->runs.empty());
  EXPECT_FALSE(fs::exists(runs)) << "a refused start must not make the runs folder";

  // The refusal stays on show until a run starts.
  e->post(TrainStart{small_run(runs, "sample"), "good"});
  const auto s2 = wait_for(*e, [](const Snapshot& x) { return ended(x, "good"); });
  EXPECT_EQ(run_named(*s2, "good")->state, RunState::Finished) << run_named(*s2, "good")->message;
  EXPECT_TRUE(s2->training->error.empty()) << s2->training->error;
  EXPECT_TRUE(fs::exists(runs / "good" / "metrics.jsonl"));
}

TEST(FailedStart, ABinaryTextFailsTheRunNamingTheFileAndMakesNoDirectory) {
  TempDir tmp;
  const fs::path runs = tmp / "runs";
  {
    std::ofstream bin(tmp / "picture.bin", std::ios::binary);
    for (int i = 0; i < 4096; ++i) bin.put(static_cast<char>(i % 7 == 0 ? 0 : i));
  }
  auto e = training_engine();
  e->post(TrainStart{small_run(runs, (tmp / "picture.bin").string()), "binary"});
  const auto s = wait_for(*e, [](const Snapshot& x) { return ended(x, "binary"); });
  const RunView* r = run_named(*s, "binary");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->state, RunState::Failed);
  EXPECT_NE(r->message.find("picture.bin"), std::string::npos) << r->message;
  EXPECT_NE(r->message.find("binary"), std::string::npos) << r->message;
  EXPECT_FALSE(fs::exists(runs / "binary"));
  EXPECT_FALSE(fs::exists(runs));
}

// The backend is made while the session is created, after the run directory was claimed: a backend
// that refuses fails the start at the latest point a start can fail.
TEST(FailedStart, AStartThatFailsAfterItsDirectoryWasMadeRemovesIt) {
  TempDir tmp;
  TrainDevices devices;
  devices.choose = [](const TrainDeviceRequest&, std::string&) -> TrainBackendFactory {
    return [](const TrainBackendContext&) -> std::unique_ptr<TrainBackend> {
      throw std::runtime_error("this backend refuses every model");
    };
  };
  auto e = training_engine(devices);

  // A runs folder the start made itself goes too.
  const fs::path made = tmp / "made" / "runs";
  e->post(TrainStart{small_run(made, "sample"), "refused"});
  auto s = wait_for(*e, [](const Snapshot& x) { return ended(x, "refused"); });
  const RunView* r = run_named(*s, "refused");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->state, RunState::Failed);
  EXPECT_NE(r->message.find("this backend refuses every model"), std::string::npos) << r->message;
  EXPECT_FALSE(fs::exists(made / "refused"));
  EXPECT_FALSE(fs::exists(made)) << "the runs folder the failed start made is removed";
  EXPECT_TRUE(fs::exists(tmp / "made")) << "only what the start made is removed";

  // A runs folder that was there stays, with what else it holds.
  const fs::path kept = tmp / "kept";
  fs::create_directories(kept / "an-older-run");
  e->post(TrainStart{small_run(kept, "sample"), "refused-too"});
  s = wait_for(*e, [](const Snapshot& x) { return ended(x, "refused-too"); });
  EXPECT_EQ(run_named(*s, "refused-too")->state, RunState::Failed);
  EXPECT_FALSE(fs::exists(kept / "refused-too"));
  EXPECT_TRUE(fs::exists(kept / "an-older-run"));
}

}  // namespace
}  // namespace tttlab::lab
