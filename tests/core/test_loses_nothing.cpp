// What the program promises about files (docs/SECURITY.md), each promise tested the way a hostile
// tester broke it: a run never deletes or overwrites what it did not write, never writes through a
// link or over a device, verifies every byte and every metadata value it resumes from, and keeps only
// checkpoints whose outputs are finite. Test names start with the finding they reproduce (F01 ...).
// Seeds are fixed (TrainConfig::seed 11, printed by the configs below).
#include <gtest/gtest.h>

#include <atomic>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/io/temp_dir.hpp"
#include "core/tiny_run.hpp"
#include "core/word_corpus.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/io/safetensors.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/model/memory.hpp"
#include "tttlab/train/metrics.hpp"
#include "tttlab/train/run_dir.hpp"
#include "tttlab/train/session.hpp"
#include "tttlab/util/parallel.hpp"

namespace tttlab {
namespace fs = std::filesystem;
namespace {

using testing::TempDir;

TrainConfig tiny_config(const fs::path& corpus, long steps) {
  return testing::tiny_train_config(corpus, {.steps = steps, .seed = 11, .threads = 1, .eval_windows = 2});
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

std::string text_of(const fs::path& p) { return read_file_text(p); }

// Trains `steps` steps in a new run at `run` and saves a checkpoint after each of `save_at`.
void train_run(const fs::path& run, const TrainConfig& cfg, std::initializer_list<long> save_at) {
  auto s = TrainingSession::create(run, cfg, TextData::load(cfg));
  for (long at : save_at) {
    while (s->trainer().steps_done() < at) s->trainer().step();
    s->checkpoint();
  }
}

// ---- F01: a run deletes or overwrites nothing it did not write -----------------------------------

TEST(LosesNothing, F01_TrainIntoAFolderOfYoursIsRefused) {
  TempDir tmp;
  const fs::path corpus = testing::write_word_corpus(tmp.path(), 4000);
  const fs::path mine = tmp / "mine";
  fs::create_directories(mine / "step-00-notes");
  fs::create_directories(mine / "step-by-step");
  write_text(mine / "step-00-notes" / "a.txt", "my notes");
  write_text(mine / "metrics.jsonl", "my metrics\n");
  const TrainConfig cfg = tiny_config(corpus, 2);
  try {
    TrainingSession::create(mine, cfg, TextData::load(cfg));
    FAIL() << "a folder holding the user's files was accepted as a run directory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not empty and holds no TTT Lab run"), std::string::npos) << e.what();
  }
  EXPECT_EQ(text_of(mine / "metrics.jsonl"), "my metrics\n");
  EXPECT_EQ(text_of(mine / "step-00-notes" / "a.txt"), "my notes");
  EXPECT_TRUE(fs::is_directory(mine / "step-by-step"));
  EXPECT_FALSE(fs::exists(mine / k_run_manifest));
  // Trainer::save claims the directory the same way (tttlab ablate --out, the app).
  Trainer t(cfg, TextData::load(cfg));
  EXPECT_THROW(t.save(mine), std::runtime_error);
  EXPECT_FALSE(fs::exists(mine / "latest"));
}

// A kill while a new run writes its first manifest leaves only the writer's temporary file: the
// directory is still the run's, and training into it again starts the run (cli.kill_resume met this
// under the sanitizers, whose slower start puts more kills inside the first write).
TEST(LosesNothing, F01_ARunKilledWhileClaimingItsDirectoryCanStartAgain) {
  TempDir tmp;
  const fs::path run = tmp / "run";
  fs::create_directories(run);
  const fs::path leftover = run / (std::string(".") + k_run_manifest + ".tmp-4242-0");
  write_text(leftover, "{\"tttlab_run\": 1, \"entr");
  RunDirectory::claim(run);
  EXPECT_FALSE(fs::exists(leftover));
  EXPECT_TRUE(fs::is_regular_file(run / k_run_manifest));

  // The same temporary name beside a file of the user's: the folder is not a new run's, and
  // nothing in it is touched.
  const fs::path mine = tmp / "mine";
  fs::create_directories(mine);
  const fs::path mine_leftover = mine / (std::string(".") + k_run_manifest + ".tmp-4242-0");
  write_text(mine_leftover, "partial");
  write_text(mine / "notes.txt", "mine");
  EXPECT_THROW(RunDirectory::claim(mine), std::runtime_error);
  EXPECT_EQ(text_of(mine_leftover), "partial");
  EXPECT_EQ(text_of(mine / "notes.txt"), "mine");
  EXPECT_FALSE(fs::exists(mine / k_run_manifest));
}

TEST(LosesNothing, F01_PruningRemovesOnlyTheRunsOwnCheckpoints) {
  TempDir tmp;
  const fs::path corpus = testing::write_word_corpus(tmp.path(), 4000);
  const fs::path run = tmp / "run";
  const TrainConfig cfg = tiny_config(corpus, 6);
  auto s = TrainingSession::create(run, cfg, TextData::load(cfg));
  // Folders of the user's that sort among and after the checkpoints, made inside the run.
  fs::create_directories(run / "step-9999999-notes");
  fs::create_directories(run / "step-zzz");
  write_text(run / "step-zzz" / "keep.txt", "mine");
  for (long at = 1; at <= 5; ++at) {
    s->trainer().step();
    s->checkpoint();
    ASSERT_EQ(s->trainer().steps_done(), at);
  }
  EXPECT_TRUE(fs::is_directory(run / "step-9999999-notes"));
  EXPECT_EQ(text_of(run / "step-zzz" / "keep.txt"), "mine");
  EXPECT_TRUE(fs::exists(run / "step-0000005" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(run / "step-0000004" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(run / "step-0000003"));
  EXPECT_FALSE(fs::exists(run / "step-0000001"));
  EXPECT_EQ(text_of(run / "latest"), "step-0000005\n");
}

TEST(LosesNothing, F01_AnOlderRunWithoutAManifestIsAdoptedAndPrunedSafely) {
  TempDir tmp;
  const fs::path corpus = testing::write_word_corpus(tmp.path(), 4000);
  const fs::path run = tmp / "run";
  const TrainConfig cfg = tiny_config(corpus, 6);
  train_run(run, cfg, {1, 2});
  fs::remove(run / k_run_manifest);  // as written before manifests existed
  fs::create_directories(run / "step-0000000");  // the user's, holding no model: never adopted
  write_text(run / "step-0000000" / "keep.txt", "mine");
  auto s = TrainingSession::resume(run);
  for (long at = 3; at <= 5; ++at) {
    s->trainer().step();
    s->checkpoint();
  }
  EXPECT_EQ(text_of(run / "step-0000000" / "keep.txt"), "mine");
  EXPECT_FALSE(fs::exists(run / "step-0000001"));
  EXPECT_FALSE(fs::exists(run / "step-0000002"));
  EXPECT_TRUE(fs::exists(run / "step-0000005"));
}

// ---- F02: output paths that are not regular files are refused -----------------------------------

TEST(LosesNothing, F02_AtomicWriterRefusesFifosLinksAndDirectories) {
  TempDir tmp;
  ASSERT_EQ(::mkfifo((tmp / "fifo").c_str(), 0600), 0);
  write_text(tmp / "target.txt", "precious");
  fs::create_symlink(tmp / "target.txt", tmp / "link");
  fs::create_directories(tmp / "dir");
  for (const char* name : {"fifo", "link", "dir"}) {
    try {
      write_file_atomic(tmp / name, std::string_view("new"));
      ADD_FAILURE() << name << " was replaced";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(tmp / "fifo")));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(tmp / "link")));
  EXPECT_EQ(text_of(tmp / "target.txt"), "precious");
  EXPECT_TRUE(fs::is_directory(tmp / "dir"));
  // No temporary is left behind, and a regular file is still replaced.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path())) ++entries;
  EXPECT_EQ(entries, 4);
  write_file_atomic(tmp / "target.txt", std::string_view("new"));
  EXPECT_EQ(text_of(tmp / "target.txt"), "new");
}

// ---- F03: nothing is written outside the run directory -------------------------------------------

TEST(LosesNothing, F03_APlantedCheckpointLinkIsNotFollowed) {
  TempDir tmp;
  const fs::path corpus = testing::write_word_corpus(tmp.path(), 4000);
  const fs::path run = tmp / "run", outside = tmp / "outside";
  fs::create_directories(outside);
  const TrainConfig cfg = tiny_config(corpus, 4);
  auto s = TrainingSession::create(run, cfg, TextData::load(cfg));
  fs::create_directory_symlink(outside, run / "step-0000001");
  s->trainer().step();
  EXPECT_THROW(s->checkpoint(), FileError);
  EXPECT_TRUE(fs::is_empty(outside));
  EXPECT_FALSE(fs::exists(run / "latest"));
}

TEST(LosesNothing, F03_APlantedMetricsLinkIsNotFollowed) {
  TempDir tmp;
  const fs::path corpus = testing::write_word_corpus(tmp.path(), 4000);
  const fs::path run = tmp / "run";
  const TrainConfig cfg = tiny_config(corpus, 4);
  train_run(run, cfg, {1});
  write_text(tmp / "victim.txt", "do not truncate me\n");
  fs::remove(run / "metrics.jsonl");
  fs::create_symlink(tmp / "victim.txt", run / "metrics.jsonl");
  EXPECT_THROW(TrainingSession::resume(run), FileError);
  EXPECT_EQ(text_of(tmp / "victim.txt"), "do not truncate me\n");
  // A link in place of latest or train_config.json is refused too, and left as it is.
  fs::remove(run / "metrics.jsonl");
  write_text(run / "metrics.jsonl", "");
  fs::rename(run / "train_config.json", tmp / "config-victim.json");
  fs::create_symlink(tmp / "config-victim.json", run / "train_config.json");
  const std::string before = text_of(tmp / "config-victim.json");
  auto s = TrainingSession::resume(run);
  s->trainer().step();
  EXPECT_THROW(s->checkpoint(), FileError);
  EXPECT_EQ(text_of(tmp / "config-victim.json"), before);
}

// ---- F04: the header, the metadata and the config are verified -----------------------------------

TEST(LosesNothing, F04_SwappedTensorOffsetsFailVerification) {
  TempDir tmp;
  SafetensorsWriter w;
  w.set_checksum();
  // 100 floats first, so that both swapped offsets have the same number of digits.
  const std::vector<float> first(100, 0.5f), a(4, 1.0f), b(4, 2.0f);
  w.add("first", {100}, std::span<const float>(first));
  w.add("a", {4}, std::span<const float>(a));
  w.add("b", {4}, std::span<const float>(b));
  std::vector<std::uint8_t> bytes = w.serialize();
  ASSERT_NO_THROW(SafetensorsFile::parse(bytes, "orig"));
  std::string text(bytes.begin(), bytes.end());
  const auto pa = text.find("[400,416]"), pb = text.find("[416,432]");
  ASSERT_NE(pa, std::string::npos);
  ASSERT_NE(pb, std::string::npos);
  std::string swapped = text;
  swapped.replace(pa, 9, "[416,432]");
  swapped.replace(pb, 9, "[400,416]");
  ASSERT_EQ(swapped.size(), text.size());
  std::vector<std::uint8_t> edited(swapped.begin(), swapped.end());
  try {
    SafetensorsFile::parse(edited, "swapped");
    FAIL() << "swapped offsets loaded as verified";
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find("does not match the SHA-256"), std::string::npos) << e.what();
  }
}

// Replaces the first `from` in the file with `to` (same length), keeping every other byte.
void edit_file(const fs::path& p, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  std::vector<std::uint8_t> bytes = read_file_bytes(p);
  std::string s(bytes.begin(), bytes.end());
  const auto at = s.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << p;
  s.replace(at, from.size(), to);
  std::vector<std::uint8_t> out(s.begin(), s.end());
  fs::remove(p);
  write_file_atomic(p, std::span<const std::uint8_t>(out));
}

TEST(LosesNothing, F04_EditedTrainStateMetadataIsRefused) {
  TempDir tmp;
  const fs::path corpus = testing::write_word_corpus(tmp.path(), 4000);
  const TrainConfig cfg = tiny_config(corpus, 4);
  // Each edit keeps the file's length and its JSON valid: only the digest can tell.
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"\"sampler_seed\":\"11\"", "\"sampler_seed\":\"12\""},
      {"\"tttlab_step\":\"2\"", "\"tttlab_step\":\"3\""},
      {"\\\"steps\\\": 4", "\\\"steps\\\": 9"},
      {"\\\"batch_size\\\": 2", "\\\"batch_size\\\": 9"},
  };
  for (const auto& [from, to] : edits) {
    const fs::path run = tmp / ("run" + std::to_string(&from - &edits[0].first));
    train_run(run, cfg, {2});
    edit_file(run / "step-0000002" / "train_state.safetensors", from, to);
    try {
      TrainingSession::resume(run);
      ADD_FAILURE() << "resumed after the edit " << from << " -> " << to;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("SHA-256"), std::string::npos) << e.what();
    }
  }
}

TEST(LosesNothing, F04_AModelAndATrainStateFromDifferentStepsAreRefused) {
  TempDir tmp;
  const fs::path corpus = testing::write_word_corpus(tmp.path(), 4000);
  const fs::path run = tmp / "run";
  const TrainConfig cfg = tiny_config(corpus, 4);
  train_run(run, cfg, {1, 2});
  fs::copy_file(run / "step-0000001" / "model.safetensors", run / "step-0000002" / "model.safetensors",
                fs::copy_options::overwrite_existing);
  try {
    TrainingSession::resume(run);
    FAIL() << "a step-1 model resumed with a step-2 train state";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("inconsistent"), std::string::npos) << e.what();
  }
  // The folder's name is checked too.
  TempDir tmp2;
  const fs::path run2 = tmp2 / "run";
  train_run(run2, cfg, {2});
  fs::rename(run2 / "step-0000002", run2 / "step-0000003");
  write_text(run2 / "latest", "step-0000003\n");
  EXPECT_THROW(TrainingSession::resume(run2), std::runtime_error);
}

TEST(LosesNothing, F04_AFlagFlippedInConfigJsonIsRefused) {
  TempDir tmp;
  const fs::path corpus = testing::write_word_corpus(tmp.path(), 4000);
  const fs::path run = tmp / "run";
  train_run(run, tiny_config(corpus, 2), {2});
  const fs::path cfg = run / "step-0000002" / "config.json";
  std::string text = text_of(cfg);
  const std::string flag = "\"tttlab_inner_residual\": true";
  const auto at = text.find(flag);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, flag.size(), "\"tttlab_inner_residual\": false");
  fs::remove(cfg);
  write_file_atomic(cfg, std::string_view(text));
  try {
    load_model(run / "step-0000002");
    FAIL() << "a flipped config.json flag loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("inner_residual"), std::string::npos) << e.what();
  }
  EXPECT_THROW(TrainingSession::resume(run), std::runtime_error);
}

TEST(LosesNothing, F04_AnEditedTrainConfigJsonIsRefusedBeforeTheFirstCheckpoint) {
  TempDir tmp;
  const fs::path corpus = testing::write_word_corpus(tmp.path(), 4000);
  const fs::path run = tmp / "run";
  const TrainConfig cfg = tiny_config(corpus, 4);
  { auto s = TrainingSession::create(run, cfg, TextData::load(cfg)); }  // killed before its first save
  std::string text = text_of(run / "train_config.json");
  const auto at = text.find("\"steps\": 4");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 10, "\"steps\": 900000000");
  fs::remove(run / "train_config.json");
  write_file_atomic(run / "train_config.json", std::string_view(text));
  EXPECT_THROW(TrainingSession::resume(run), std::runtime_error);
}

// ---- F07: a thread that cannot start is an error, not std::terminate --------------------------------

long status_kib(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::string(key).size()));
  return -1;
}

TEST(LosesNothing, F07_ThreadsThatCannotStartGiveAClearError) {
#if defined(TTTLAB_UNDER_SANITIZERS)  // CMakeLists.txt, tttlab_test_program
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: an address-space limit cannot be set "
                  "under it (the Release build runs this test)";
#endif
  // A child process whose address space has room for a few thread stacks (8 MiB each), not 64.
  const long vm_kib = status_kib("VmSize:");
  ASSERT_GT(vm_kib, 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct rlimit lim {};
    ::getrlimit(RLIMIT_AS, &lim);
    std::vector<char> keep(1);
    lim.rlim_cur = static_cast<rlim_t>(vm_kib) * 1024 + (32ull << 20);
    int code = 3;
    if (::setrlimit(RLIMIT_AS, &lim) == 0) {
      try {
        run_parallel(64, [&](int) { keep[0] = 1; });
        code = 2;  // every thread started: the limit did not bite
      } catch (const std::runtime_error& e) {
        code = std::string(e.what()).find("cannot start worker thread") != std::string::npos ? 0 : 4;
      } catch (...) {
        code = 5;
      }
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child did not exit normally (signal " << WTERMSIG(status) << ")";
  const int code = WEXITSTATUS(status);
  if (code == 2) GTEST_SKIP() << "64 threads started within 32 MiB more address space on this machine";
  EXPECT_EQ(code, 0);
}

// A started worker that runs out of memory is reported like a thread that cannot start: a plain
// error naming the worker and the remedy, after every thread has been joined.
TEST(LosesNothing, F07_AWorkerOutOfMemoryIsAPlainError) {
  std::atomic<int> ran{0};
  try {
    run_parallel(4, [&](int i) {
      ++ran;
      if (i == 2) throw std::bad_alloc();
    });
    FAIL() << "the bad_alloc of worker 3 was swallowed";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("worker thread 3 of 4 ran out of memory"), std::string::npos) << what;
    EXPECT_NE(what.find("--threads 1"), std::string::npos) << what;
  }
  EXPECT_EQ(ran.load(), 4) << "every worker ran to its end before the error was reported";
}

// ---- F09: the training estimate covers writing a checkpoint ---------------------------------------

TEST(LosesNothing, F09_TrainingMemoryEstimateCoversCheckpointSaving) {
#if defined(TTTLAB_UNDER_SANITIZERS)  // CMakeLists.txt, tttlab_test_program
  GTEST_SKIP() << "AddressSanitizer's shadow memory and quarantine are not the program's: measured in the Release build";
#endif
  TempDir tmp;
  // A model large enough that its tensors, not the program, dominate the peak.
  const TrainConfig cfg = testing::tiny_train_config(
      "copy", {.steps = 2, .batch = 1, .seq_len = 16, .lr = TrainConfig{}.lr, .seed = 11, .threads = 1},
      {.hidden = 512, .heads = 8, .layers = 4, .intermediate = 1024, .mini_batch = 8});
  const std::uint64_t estimate =
      estimate_memory(cfg.model, MemoryUse{.window = cfg.seq_len, .sequences = 1, .gradient_copies = 1});
  // The peak of this process from here on: reset the high-water mark (Linux: clear_refs 5).
  { std::ofstream("/proc/self/clear_refs") << "5"; }
  const long base = status_kib("VmRSS:");
  ASSERT_GT(base, 0);
  {
    Trainer t(cfg, TextData::load(cfg));
    t.step();
    t.save(tmp / "run");
  }
  const long peak = status_kib("VmHWM:");
  if (peak < base) GTEST_SKIP() << "this kernel does not reset VmHWM";
  const double used = double(peak - base) * 1024.0;
  std::printf("parameters %.0f, estimate %.1f MiB, measured peak %.1f MiB\n", count_params(cfg.model),
              double(estimate) / (1 << 20), used / (1 << 20));
  EXPECT_GE(double(estimate), used);
}

// ---- F10: a checkpoint is kept only when its outputs are finite -----------------------------------

// Finite weights grown huge, as a diverging run grows them: the SwiGLU's gate and up projections
// times 1e25 each make products near 1e50, past float's range, so the forward gives infinities and NaN.
void grow_mlp_weights(Model<float>& m) {
  int grown = 0;
  m.for_each_param([&](Eigen::Map<Mat<float>> p, const std::string& name) {
    if (name.find("gate_proj") != std::string::npos || name.find("up_proj") != std::string::npos) {
      p *= 1e25f;
      ++grown;
    }
  });
  ASSERT_GT(grown, 0);
}

TEST(LosesNothing, F10_ACheckpointWhoseOutputsAreNotFiniteIsNotSaved) {
  TempDir tmp;
  const fs::path corpus = testing::write_word_corpus(tmp.path(), 4000);
  const fs::path run = tmp / "run";
  const TrainConfig cfg = tiny_config(corpus, 4);
  auto s = TrainingSession::create(run, cfg, TextData::load(cfg));
  s->trainer().step();
  s->checkpoint();
  s->trainer().step();
  grow_mlp_weights(s->trainer().model());
  ASSERT_FALSE(s->trainer().non_finite_state());
  EXPECT_FALSE(s->trainer().outputs_finite());
  try {
    s->checkpoint();
    FAIL() << "a checkpoint with non-finite outputs was saved";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite outputs"), std::string::npos) << e.what();
  }
  EXPECT_EQ(text_of(run / "latest"), "step-0000001\n");
  EXPECT_NO_THROW(load_model(run));
}

TEST(LosesNothing, F10_F11_ModelsWhoseForwardOverflowsAreRefusedOnLoad) {
  TempDir tmp;
  const fs::path corpus = testing::write_word_corpus(tmp.path(), 4000);
  const TrainConfig cfg = tiny_config(corpus, 2);
  Trainer t(cfg, TextData::load(cfg));
  grow_mlp_weights(t.model());
  fs::create_directories(tmp / "m");
  write_file_atomic(tmp / "m" / "config.json", cfg.model.to_json());
  save_model_safetensors(t.model(), tmp / "m" / "model.safetensors");
  try {
    load_model(tmp / "m");
    FAIL() << "a model with non-finite outputs loaded";
  } catch (const NonFiniteModelError& e) {
    EXPECT_EQ(std::string(e.what()), non_finite_model_message((tmp / "m").string()));
  }
}

// ---- F13: the data is found again, and checked ----------------------------------------------------

TEST(LosesNothing, F13_DataPathIsAbsoluteAndChangedDataIsRefused) {
  TempDir tmp;
  const fs::path corpus = testing::write_word_corpus(tmp.path(), 4000);
  const fs::path run = tmp / "run";
  TrainConfig cfg = tiny_config(corpus, 4);
  const fs::path old_cwd = fs::current_path();
  fs::current_path(corpus.parent_path());
  cfg.data = corpus.filename().string();  // relative, as typed
  train_run(run, cfg, {2});
  fs::current_path(old_cwd);
  const TrainConfig saved = TrainConfig::from_json(text_of(run / "train_config.json"));
  EXPECT_TRUE(fs::path(saved.data).is_absolute()) << saved.data;
  EXPECT_EQ(saved.data_sha256.size(), 64u);
  EXPECT_NO_THROW(TrainingSession::resume(run));  // from another working directory
  // The same file, changed by one byte.
  std::string text = text_of(corpus);
  text[10] = text[10] == 'a' ? 'b' : 'a';
  fs::remove(corpus);
  write_file_atomic(corpus, std::string_view(text));
  try {
    TrainingSession::resume(run);
    FAIL() << "resumed on changed data";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not the data this run started with"), std::string::npos) << e.what();
  }
}

// ---- F15: a full disk never leaves a torn metrics line ---------------------------------------------

TEST(LosesNothing, F15_AFailedMetricsAppendLeavesNoTornLine) {
  TempDir tmp;
  const fs::path p = tmp / "metrics.jsonl";
  MetricsLog log(p, MetricsLog::Mode::Fresh);
  log.append(metrics_event_record(1, "note", "first"));
  const auto before = fs::file_size(p);
  // A file-size limit just past the current end: the next line is written in part, then EFBIG, the
  // same short write a full disk gives.
  ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit old {};
  ::getrlimit(RLIMIT_FSIZE, &old);
  struct rlimit lim = old;
  lim.rlim_cur = before + 10;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
  bool threw = false;
  try {
    log.append(metrics_event_record(2, "note", std::string(200, 'x')));
  } catch (const std::exception& e) {
    threw = true;
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  EXPECT_TRUE(threw);
  EXPECT_EQ(fs::file_size(p), before);
  const std::string text = text_of(p);
  EXPECT_EQ(text.back(), '\n');
}

// ---- F16: `latest` names a checkpoint and nothing else ----------------------------------------------

TEST(LosesNothing, F16_LatestWithANulByteOrACarriageReturnIsRefusedAndShown) {
  TempDir tmp;
  const fs::path corpus = testing::write_word_corpus(tmp.path(), 4000);
  const fs::path run = tmp / "run";
  train_run(run, tiny_config(corpus, 2), {1});
  for (const std::string& bad : {std::string("step-0000001\0/../../x", 21), std::string("step-0000001\r\n"),
                                 std::string("step-0000001\x1b]0;owned\x07\n")}) {
    fs::remove(run / "latest");
    write_text(run / "latest", bad);
    try {
      resolve_checkpoint(run);
      ADD_FAILURE() << "accepted latest = " << printable(bad);
    } catch (const std::runtime_error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("is damaged"), std::string::npos) << m;
      EXPECT_NE(m.find("step-0000001\\"), std::string::npos) << "the message does not show the bytes: " << m;
      for (char c : m) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << "raw control byte in: " << printable(m);
    }
  }
}

// ---- F12: what is printed from a file cannot drive the terminal ------------------------------------

TEST(LosesNothing, F12_PrintableEscapesControlBytes) {
  EXPECT_EQ(printable("plain text, ünïcode ✓"), "plain text, ünïcode ✓");
  EXPECT_EQ(printable(std::string("a\x1b]0;title\x07z")), "a\\x1b]0;title\\x07z");
  EXPECT_EQ(printable(std::string("\r\n\t\x7f")), "\\r\\n\\t\\x7f");
  EXPECT_EQ(printable(std::string("\xc2\x9b" "2J")), "\\u009b2J");  // C1 CSI
  EXPECT_EQ(printable(std::string("\xff\xc3")), "\\xff\\xc3");      // not UTF-8
  EXPECT_EQ(printable(std::string("\0x", 2)), "\\x00x");
  EXPECT_EQ(clip(std::string("\x1b[2J") + std::string(100, 'a'), 10), "\\x1b[2Jaaaaaa… (104 bytes)");
}

// ---- Also: one-head models in the official layout; shipped models carry a digest -----------------

TEST(LosesNothing, OneHeadNormsAreStoredAsOneByD) {
  const ModelConfig c = testing::tiny_model({.heads = 1, .positions = 16});
  Model<float> m(c, 3);
  bool seen = false;
  for (const NamedTensor& t : state_dict(m))
    if (t.name.find("ttt_norm_weight") != std::string::npos || t.name.find("ttt_norm_bias") != std::string::npos) {
      EXPECT_EQ(t.shape, (std::vector<std::int64_t>{1, 16})) << t.name;
      seen = true;
    }
  EXPECT_TRUE(seen);
  // Files written before hold [16]: still read, to the same numbers.
  std::vector<NamedTensor> legacy = state_dict(m);
  for (NamedTensor& t : legacy)
    if (t.name.find("ttt_norm_") != std::string::npos) t.shape = {16};
  Model<float> back(c, 4);
  load_state_dict(back, legacy, "legacy");
  EXPECT_EQ(state_dict(back)[5].data, state_dict(m)[5].data);
}

TEST(LosesNothing, EveryShippedModelCarriesAVerifiedDigest) {
  const fs::path models = fs::path(TTTLAB_REFERENCE_DIR) / ".." / ".." / "assets" / "models";
  int checked = 0;
  for (const auto& e : fs::directory_iterator(models)) {
    if (!fs::exists(e.path() / "model.safetensors")) continue;
    CheckpointLoadInfo info;
    ASSERT_NO_THROW(load_model(e.path(), ModelLoadOptions{.info = &info})) << e.path();
    EXPECT_TRUE(info.checksum_verified) << e.path();
    EXPECT_TRUE(info.header_verified) << e.path();
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

}  // namespace
}  // namespace tttlab
