// Training on several GPUs from the desktop app (TrainSettings::gpus): the GPU count reaches the
// device chooser `tttlab gui` installs, a data-parallel run reports every GPU's own tokens/s in its
// RunView, settings the data-parallel backend cannot run are refused before a thread starts, and the
// count round-trips through state files (bad values refused with the field's name).
//
// No GPU is needed: the chooser here builds the same DataParallelBackend `tttlab gui` gets from
// app/cli/train_device.hpp, over CPU replicas and fake ranks on threads (train/data_parallel.hpp).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "app/engine_wait.hpp"
#include "lab/engine/engine.hpp"
#include "lab/models/model_library.hpp"
#include "lab/training/training_module.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/training/training_settings.hpp"
#include "tttlab/train/data_parallel.hpp"

namespace tttlab::lab {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using testing::wait_for;

const RunView* run_named(const Snapshot& s, const std::string& name) {
  if (!s.training) return nullptr;
  for (const auto& r : s.training->runs)
    if (r->name == name) return r.get();
  return nullptr;
}

const auto ended = [](std::string name) {
  return [name](const Snapshot& x) {
    const RunView* r = run_named(x, name);
    return r && (r->state == RunState::Finished || r->state == RunState::Failed);
  };
};

// A tiny run on the built-in sample text: the tiny preset, T = 32, a few steps.
TrainSettings tiny_run(const fs::path& runs, int gpus, int batch, long steps, std::uint64_t seed) {
  TrainSettings t;
  t.data = "sample";
  t.steps = steps;
  t.batch_size = batch;
  t.seq_len = 32;
  t.eval_every = 0;
  t.eval_windows = 2;
  t.threads = 1;
  t.seed = seed;
  t.gpus = gpus;
  t.runs_dir = runs.string();
  return t;
}

// What the chooser was asked, from the run's worker thread.
struct Asked {
  std::mutex mu;
  std::vector<std::pair<std::string, int>> calls;  // (device, gpus)
};

// The chooser of `tttlab gui` (app/gui/command.cpp) with the GPUs replaced by CPU replicas: gpus > 1
// gets a DataParallelBackend over that many replicas and fake ranks; 0 (one device) gets the CPU engine.
TrainDevices cpu_data_parallel(std::shared_ptr<Asked> asked) {
  TrainDevices d;
  d.choose = [asked](const TrainDeviceRequest& request, std::string& note) -> TrainBackendFactory {
    const int gpus = request.gpus;
    {
      std::lock_guard lk(asked->mu);
      asked->calls.emplace_back(to_string(request.device), gpus);
    }
    if (gpus == 0) return {};
    note = "CPU replicas standing in for " + std::to_string(gpus) + " GPUs";
    return [gpus](const TrainBackendContext& ctx) -> std::unique_ptr<TrainBackend> {
      std::vector<std::unique_ptr<Replica>> replicas;
      for (int r = 0; r < gpus; ++r) replicas.push_back(make_cpu_replica(ctx));
      DataParallelOptions o;
      o.layout = {gpus, 0};
      return std::make_unique<DataParallelBackend>(std::move(replicas), make_thread_group(gpus, 60.0), o, ctx);
    };
  };
  return d;
}

std::unique_ptr<Engine> training_engine(TrainDevices devices) {
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<TrainingModule>(std::make_shared<ModelLibrary>(), std::move(devices)));
  auto e = std::make_unique<Engine>(std::move(mods));
  e->start();
  return e;
}

class TempRuns {
 public:
  explicit TempRuns(const char* tag) : m_path(fs::temp_directory_path() / (std::string("tttlab_gui_gpus_") + tag)) {
    fs::remove_all(m_path);
  }
  ~TempRuns() { fs::remove_all(m_path); }
  const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

// A run with gpus = N trains data-parallel over N ranks, and its view carries one tokens/s per rank
// (each > 0), the settings' GPU count and the chooser's note. N = 3 with a batch of 4 gives uneven
// shares (2, 1, 1).
TEST(TrainingGpus, ADataParallelRunReportsEachGpusThroughput) {
  for (const int n : {2, 3}) {
    const std::uint64_t seed = 20250 + static_cast<std::uint64_t>(n);
    std::printf("[ seed     ] gpus = %d, seed = %llu\n", n, static_cast<unsigned long long>(seed));
    SCOPED_TRACE("gpus = " + std::to_string(n) + ", seed = " + std::to_string(seed));
    TempRuns runs(n == 2 ? "two" : "three");
    auto asked = std::make_shared<Asked>();
    auto e = training_engine(cpu_data_parallel(asked));
    const std::string name = "dp" + std::to_string(n);
    e->post(TrainStart{tiny_run(runs.path(), n, 4, 3, seed), name});
    const auto s = wait_for(*e, ended(name));
    const RunView* r = run_named(*s, name);
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->state, RunState::Finished) << r->message;
    EXPECT_EQ(r->steps_done, 3);
    EXPECT_EQ(r->settings.gpus, n);
    {
      std::lock_guard lk(asked->mu);
      EXPECT_EQ(asked->calls, (std::vector<std::pair<std::string, int>>{{"auto", n}}));
    }
    EXPECT_NE(r->device.find("standing in for " + std::to_string(n) + " GPUs"), std::string::npos) << r->device;
    ASSERT_EQ(r->gpu_tokens_per_s.size(), static_cast<std::size_t>(n));
    for (int g = 0; g < n; ++g) EXPECT_GT(r->gpu_tokens_per_s[static_cast<std::size_t>(g)], 0.0) << "GPU " << g;
    EXPECT_GT(r->tokens_per_s, 0.0);
    ASSERT_TRUE(r->steps);
    ASSERT_EQ(r->steps->size(), 3u);
    EXPECT_TRUE(std::isfinite((*r->steps)[2].loss));
    EXPECT_FALSE(r->checkpoint.empty()) << "a finished run saves a checkpoint";
    e.reset();
  }
}

// A single-device run shows no per-GPU rates (the panel draws nothing extra for it).
TEST(TrainingGpus, ASingleDeviceRunHasNoPerGpuRates) {
  const std::uint64_t seed = 7;
  std::printf("[ seed     ] seed = %llu\n", static_cast<unsigned long long>(seed));
  TempRuns runs("one");
  auto asked = std::make_shared<Asked>();
  auto e = training_engine(cpu_data_parallel(asked));
  e->post(TrainStart{tiny_run(runs.path(), 1, 2, 2, seed), "single"});
  const auto s = wait_for(*e, ended("single"));
  const RunView* r = run_named(*s, "single");
  ASSERT_EQ(r->state, RunState::Finished) << r->message;
  EXPECT_EQ(r->settings.gpus, 1);
  EXPECT_TRUE(r->gpu_tokens_per_s.empty());
  EXPECT_GT(r->tokens_per_s, 0.0);
  std::lock_guard lk(asked->mu);
  EXPECT_EQ(asked->calls, (std::vector<std::pair<std::string, int>>{{"auto", 0}}));
}

// Settings no data-parallel run can have are refused when Start is pressed, with the reason; without
// a chooser (a build without the CUDA kernels) a run on several GPUs fails with a clear message.
TEST(TrainingGpus, ImpossibleGpuSettingsAreRefusedWithTheReason) {
  TempRuns runs("refused");
  auto e = training_engine(cpu_data_parallel(std::make_shared<Asked>()));
  const auto refused = [&](TrainSettings t, const std::string& needle) {
    const std::uint64_t before = e->snapshot()->training ? e->snapshot()->training->event : 0;
    e->post(TrainStart{t, "refused"});
    const auto s = wait_for(*e, [&](const Snapshot& x) { return x.training && x.training->event > before; });
    EXPECT_NE(s->training->error.find(needle), std::string::npos) << s->training->error;
    EXPECT_EQ(run_named(*s, "refused"), nullptr);
  };
  TrainSettings t = tiny_run(runs.path(), 2, 4, 2, 1);
  t.device = DeviceRequest::CPU;
  refused(t, "not CPU");
  refused(tiny_run(runs.path(), 4, 3, 2, 1), "4 GPUs need a batch of at least 4 sequences");
  refused(tiny_run(runs.path(), 0, 4, 2, 1), "GPUs must be between 1 and 1024");
  refused(tiny_run(runs.path(), 1025, 4, 2, 1), "GPUs must be between 1 and 1024");
  e.reset();

  auto bare = training_engine({});
  bare->post(TrainStart{tiny_run(runs.path(), 2, 4, 2, 1), "no-kernels"});
  const auto s = wait_for(*bare, ended("no-kernels"));
  const RunView* r = run_named(*s, "no-kernels");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->state, RunState::Failed);
  EXPECT_NE(r->message.find("2 GPUs"), std::string::npos) << r->message;
  EXPECT_NE(r->message.find("CUDA kernels"), std::string::npos) << r->message;
}

std::string state_error(const nlohmann::json& settings) {
  try {
    train_settings_from(FieldReader(settings, "panels.training.settings"), TrainSettings{});
  } catch (const StateError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TrainingGpusState, TheGpuCountRoundTripsThroughStateFiles) {
  TrainSettings t;
  t.gpus = 3;
  t.device = DeviceRequest::CUDA;
  t.batch_size = 12;
  const nlohmann::json j = to_json(t);
  ASSERT_TRUE(j.contains("gpus"));
  EXPECT_EQ(j["gpus"], 3);
  // Through the file's text, as File → Save state and Open do.
  const nlohmann::json back = nlohmann::json::parse(j.dump(2));
  const TrainSettings read = train_settings_from(FieldReader(back, "panels.training.settings"), TrainSettings{});
  EXPECT_EQ(read.gpus, 3);
  EXPECT_EQ(read, t);
  // Files written before the setting existed read as one device.
  nlohmann::json old = j;
  old.erase("gpus");
  EXPECT_EQ(train_settings_from(FieldReader(old, "panels.training.settings"), TrainSettings{}).gpus, 1);
}

TEST(TrainingGpusState, BadGpuCountsAreRefusedNamingTheField) {
  nlohmann::json j = to_json(TrainSettings{});
  for (const nlohmann::json& bad : {nlohmann::json(0), nlohmann::json(5000), nlohmann::json("x"),
                                    nlohmann::json(-1), nlohmann::json(2.5)}) {
    SCOPED_TRACE(bad.dump());
    j["gpus"] = bad;
    const std::string err = state_error(j);
    EXPECT_NE(err.find("panels.training.settings.gpus"), std::string::npos) << err;
    EXPECT_NE(err.find("1"), std::string::npos) << err;
  }
  // Several GPUs on the CPU device are refused too, naming the field.
  j["gpus"] = 2;
  j["device"] = "cpu";
  const std::string err = state_error(j);
  EXPECT_NE(err.find("panels.training.settings.gpus"), std::string::npos) << err;
  EXPECT_NE(err.find("cpu"), std::string::npos) << err;
  j["device"] = "auto";
  EXPECT_EQ(state_error(j), "(no error)");
}

}  // namespace
}  // namespace tttlab::lab
