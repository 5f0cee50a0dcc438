// TrainingSession and metrics.jsonl: the same run driven twice writes byte-identical records (a fake
// clock makes the timing fields equal too); a resume truncates the metrics atomically to the
// checkpoint's step (dropping a torn last line) and continues the same curve; a failing metrics write
// is an error naming the file; the stop hook stops between steps with a checkpoint.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/io/temp_dir.hpp"
#include "core/tiny_run.hpp"
#include "core/word_corpus.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/train/session.hpp"

namespace tttlab {
namespace fs = std::filesystem;
namespace {

using testing::TempDir;

fs::path session_corpus(const fs::path& dir) { return testing::write_word_corpus(dir, 4000); }

// Seed 11, 2 threads: results are deterministic for a seed and thread count.
TrainConfig session_config(const fs::path& corpus, long steps) {
  TrainConfig c = testing::tiny_train_config(corpus, {.steps = steps, .seed = 11, .threads = 2, .eval_windows = 2});
  c.eval_every = 4;
  return c;
}

// A clock that advances 0.25 s per reading: timing fields become a function of the call sequence.
SessionOptions fake_clock() {
  SessionOptions o;
  o.clock = [t = 0.0]() mutable { return t += 0.25; };
  return o;
}

std::unique_ptr<TrainingSession> new_session(const fs::path& dir, const TrainConfig& cfg) {
  return TrainingSession::create(dir, cfg, TextData::load(cfg), {}, fake_clock());
}

std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> out;
  const std::string text = read_file_text(p);
  std::size_t b = 0;
  for (std::size_t e; (e = text.find('\n', b)) != std::string::npos; b = e + 1) out.push_back(text.substr(b, e - b));
  EXPECT_EQ(b, text.size()) << "the file ends without a newline";
  return out;
}

std::string keys_of(const Json& j) {
  std::string s;
  for (const auto& item : j.items()) s += (s.empty() ? "" : " ") + item.key();
  return s;
}

// The record without the fields that depend on when it ran.
Json without_timing(Json j) {
  j.erase("tokens_per_s");
  j.erase("elapsed_s");
  return j;
}

SessionHooks stop_after(long steps, TrainingSession*& session) {
  SessionHooks h;
  h.between_steps = [steps, &session] {
    return session->trainer().steps_done() >= steps ? SessionControl::Stop : SessionControl::Continue;
  };
  return h;
}

TEST(TrainingSession, SameRunTwiceWritesIdenticalRecords) {
  TempDir tmp;
  const TrainConfig cfg = session_config(session_corpus(tmp.path()), 10);
  for (const char* name : {"a", "b"}) {
    auto s = new_session(tmp / name, cfg);
    EXPECT_EQ(s->run(), TrainingSession::Outcome::Finished);
  }
  const std::string a = read_file_text(tmp / "a" / "metrics.jsonl");
  EXPECT_EQ(a, read_file_text(tmp / "b" / "metrics.jsonl"));

  const std::vector<Json> records = read_metrics(tmp / "a" / "metrics.jsonl");
  ASSERT_EQ(records.size(), 13u) << a;  // 10 steps, evaluations at 4, 8 and the final one at 10
  std::vector<long> eval_steps;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Json& r = records[i];
    if (r.contains("loss")) {
      EXPECT_EQ(keys_of(r), "step loss lr grad_norm skipped tokens_per_s elapsed_s");
      EXPECT_GT(r["loss"].get<double>(), 1.0);
      EXPECT_EQ(r["tokens_per_s"].get<double>(), 2 * 16 / 0.25);  // B·T tokens in one 0.25 s tick
    } else {
      eval_steps.push_back(r["step"].get<long>());
      const bool final = i + 1 == records.size();
      EXPECT_EQ(keys_of(r), final ? "step val_loss val_bpb val_targets val_accuracy val_loss_by_position"
                                  : "step val_loss val_bpb val_targets val_accuracy");
      EXPECT_NEAR(r["val_bpb"].get<double>(), r["val_loss"].get<double>() / std::log(2.0), 1e-12);
      ASSERT_TRUE(r["val_accuracy"].is_number()) << "text data measures next-byte accuracy";
      EXPECT_GE(r["val_accuracy"].get<double>(), 0.0);
      EXPECT_LE(r["val_accuracy"].get<double>(), 1.0);
      if (final) {
        EXPECT_EQ(r["val_loss_by_position"].size(), 16u);
      }
    }
  }
  EXPECT_EQ(eval_steps, (std::vector<long>{4, 8, 10}));
  EXPECT_EQ(read_file_text(tmp / "a" / "latest"), "step-0000010\n");
  EXPECT_TRUE(fs::exists(tmp / "a" / "train_config.json"));
}

// A run keeps its two newest checkpoints; keep_checkpoints = 0 keeps every one (what a shipped run's
// recipe exports from, assets/models/README.md), and the weights are the same either way.
TEST(TrainingSession, KeepCheckpointsZeroKeepsEveryCheckpoint) {
  TempDir tmp;
  TrainConfig cfg = session_config(session_corpus(tmp.path()), 6);
  cfg.checkpoint_every = 2;
  SessionOptions all = fake_clock();
  all.keep_checkpoints = 0;
  EXPECT_EQ(TrainingSession::create(tmp / "all", cfg, TextData::load(cfg), {}, all)->run(),
            TrainingSession::Outcome::Finished);
  EXPECT_EQ(new_session(tmp / "two", cfg)->run(), TrainingSession::Outcome::Finished);
  for (const char* step : {"step-0000002", "step-0000004", "step-0000006"})
    EXPECT_TRUE(fs::exists(tmp / "all" / step / "model.safetensors")) << step;
  EXPECT_FALSE(fs::exists(tmp / "two" / "step-0000002"));
  EXPECT_TRUE(fs::exists(tmp / "two" / "step-0000004" / "model.safetensors"));
  EXPECT_EQ(read_file_text(tmp / "all" / "step-0000006" / "model.safetensors"),
            read_file_text(tmp / "two" / "step-0000006" / "model.safetensors"));
}

TEST(TrainingSession, StopHookStopsBetweenStepsWithACheckpoint) {
  TempDir tmp;
  TrainConfig cfg = session_config(session_corpus(tmp.path()), 50);
  cfg.eval_every = 0;
  auto s = new_session(tmp / "run", cfg);
  TrainingSession* session = s.get();
  SessionHooks hooks = stop_after(3, session);
  long checkpoints = 0;
  hooks.on_checkpoint = [&](long step, const fs::path& ck) {
    ++checkpoints;
    EXPECT_EQ(step, 3);
    EXPECT_EQ(ck.filename(), "step-0000003");
  };
  EXPECT_EQ(s->run(hooks), TrainingSession::Outcome::Stopped);
  EXPECT_EQ(s->trainer().steps_done(), 3);
  EXPECT_EQ(checkpoints, 1);
  EXPECT_EQ(s->checkpoint_step(), 3);
  EXPECT_EQ(read_file_text(tmp / "run" / "latest"), "step-0000003\n");
  const std::vector<Json> records = read_metrics(s->metrics_path());
  ASSERT_EQ(records.size(), 3u) << "three step records and no evaluation when stopped";
  for (const Json& r : records) EXPECT_TRUE(r.contains("loss"));

  // request_stop() works the same way, here from inside a step's report.
  auto r = TrainingSession::resume(tmp / "run", {}, fake_clock());
  TrainingSession* rs = r.get();
  SessionHooks h2;
  h2.on_step = [rs](const StepReport& rep, double, double) {
    if (rep.step == 5) rs->request_stop();
  };
  EXPECT_EQ(r->run(h2), TrainingSession::Outcome::Stopped);
  EXPECT_EQ(r->trainer().steps_done(), 5);
  EXPECT_EQ(read_file_text(tmp / "run" / "latest"), "step-0000005\n");
}

TEST(TrainingSession, ResumeTruncatesTornMetricsToTheCheckpointAndContinuesTheCurve) {
  TempDir tmp;
  const TrainConfig cfg = session_config(session_corpus(tmp.path()), 12);
  new_session(tmp / "straight", cfg)->run();

  {
    auto s = new_session(tmp / "cut", cfg);
    TrainingSession* session = s.get();
    ASSERT_EQ(s->run(stop_after(6, session)), TrainingSession::Outcome::Stopped);
  }
  // What a crash after the checkpoint leaves: records of steps 7 and 8, then half a line.
  const std::vector<std::string> straight = lines_of(tmp / "straight" / "metrics.jsonl");
  const fs::path metrics = tmp / "cut" / "metrics.jsonl";
  std::string text = read_file_text(metrics);
  const std::size_t kept_bytes = text.size();
  text += straight[7] + "\n" + straight[8] + "\n" + straight[9] + "\n" + "{\"step\":9,\"loss\":2.7";
  write_file_atomic(metrics, std::string_view(text));
  ASSERT_EQ(read_metrics(metrics).size(), 10u);  // 8 steps, the evaluation at 4, and (step 8's) at 8

  auto r = TrainingSession::resume(tmp / "cut", {}, fake_clock());
  EXPECT_EQ(r->trainer().steps_done(), 6);
  EXPECT_EQ(read_file_text(metrics).size(), kept_bytes) << "records after step 6 and the torn line are gone";
  EXPECT_EQ(lines_of(metrics).size(), 7u);  // steps 1..6 and the evaluation at 4
  for (const auto& e : fs::directory_iterator(tmp / "cut"))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "temporary left: " << e.path();
  EXPECT_EQ(r->run(), TrainingSession::Outcome::Finished);

  // The continued curve is the uninterrupted one (timing fields aside).
  const std::vector<Json> a = read_metrics(tmp / "straight" / "metrics.jsonl");
  const std::vector<Json> b = read_metrics(metrics);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(without_timing(a[i]), without_timing(b[i])) << "record " << i;
}

TEST(TrainingSession, StaleTemporariesAreRemovedOnOpen) {
  TempDir tmp;
  const TrainConfig cfg = session_config(session_corpus(tmp.path()), 2);
  new_session(tmp / "run", cfg)->run();
  write_file_atomic(tmp / "run" / ".latest.tmp-123-4", std::string_view("step-0000001\n"));
  write_file_atomic(tmp / "run" / "step-0000002" / ".model.safetensors.tmp-9-9", std::string_view("x"));
  write_file_atomic(tmp / "run" / "notes.txt", std::string_view("mine"));
  EXPECT_EQ(remove_stale_temporaries(tmp / "run"), 2);
  EXPECT_TRUE(fs::exists(tmp / "run" / "notes.txt"));
  EXPECT_FALSE(fs::exists(tmp / "run" / ".latest.tmp-123-4"));
}

// ---- write failures ----------------------------------------------------------------------------

// The FileError message of `f` ("" and a test failure when it throws none).
template <class F>
std::string file_error_of(F&& f) {
  try {
    f();
  } catch (const FileError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no FileError";
  return {};
}

// A file-size limit just past the file's end gives the short write and the error (EFBIG) that a full
// disk gives (ENOSPC), for root too; /dev/full, which once stood in for a full disk, is now refused
// before anything is written, as every device at an output path is (docs/SECURITY.md).
struct FileSizeLimit {
  struct rlimit old {};
  explicit FileSizeLimit(rlim_t bytes) {
    ::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit lim = old;
    lim.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~FileSizeLimit() { ::setrlimit(RLIMIT_FSIZE, &old); }
};

TEST(MetricsLog, AFullDiskIsAnErrorNamingTheFile) {
  TempDir tmp;
  MetricsLog log(tmp / "metrics.jsonl", MetricsLog::Mode::Fresh);
  std::string msg;
  {
    FileSizeLimit limit(0);
    msg = file_error_of([&] { log.append(metrics_event_record(1, "test", "x")); });
  }
  EXPECT_NE(msg.find("cannot append to '" + (tmp / "metrics.jsonl").string() + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("File too large"), std::string::npos) << msg;
  if (fs::exists("/dev/full")) {
    msg = file_error_of([&] { MetricsLog("/dev/full", MetricsLog::Mode::Append); });
    EXPECT_NE(msg.find("'/dev/full': it is not a regular file"), std::string::npos) << msg;
  }
}

TEST(TrainingSession, MetricsWriteFailuresAreErrorsNamingTheFile) {
  TempDir tmp;
  const TrainConfig cfg = session_config(session_corpus(tmp.path()), 4);
  // A directory where metrics.jsonl should be: the folder is not empty and holds no run, so it is
  // refused before anything is written.
  fs::create_directories(tmp / "dir_in_the_way" / "metrics.jsonl");
  std::string msg;
  try {
    new_session(tmp / "dir_in_the_way", cfg);
  } catch (const std::runtime_error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("dir_in_the_way' is not empty"), std::string::npos) << msg;

  // metrics.jsonl on a full disk: the first step's record fails, for root too.
  {
    auto s = new_session(tmp / "full", cfg);
    FileSizeLimit limit(0);
    msg = file_error_of([&] { s->run(); });
  }
  EXPECT_NE(msg.find("full/metrics.jsonl"), std::string::npos) << msg;
  EXPECT_NE(msg.find("File too large"), std::string::npos) << msg;

  // A read-only run directory: resuming cannot rewrite metrics.jsonl. Root ignores permissions.
  if (::geteuid() == 0) {
    std::printf("read-only case skipped: running as root, which ignores file permissions\n");
    return;
  }
  {
    auto s = new_session(tmp / "ro", cfg);
    TrainingSession* session = s.get();
    s->run(stop_after(2, session));
  }
  fs::permissions(tmp / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  msg = file_error_of([&] { TrainingSession::resume(tmp / "ro", {}, fake_clock()); });
  fs::permissions(tmp / "ro", fs::perms::owner_all);
  EXPECT_NE(msg.find("ro/metrics.jsonl"), std::string::npos) << msg;
}

// ---- the schema ---------------------------------------------------------------------------------

TEST(Metrics, NonFiniteNumbersAreWrittenAsNull) {
  StepReport r;
  r.step = 3;
  r.loss = NAN;
  r.grad_norm = INFINITY;
  r.skipped = true;
  const std::string line = dump_json(metrics_step_record(r, 10.0, 1.5));
  EXPECT_EQ(line,
            "{\"step\":3,\"loss\":null,\"lr\":0.0,\"grad_norm\":null,\"skipped\":true,\"tokens_per_s\":10.0,\"elapsed_s\":1.5}");
  EvalReport ev;
  ev.step = 4;
  ev.loss = NAN;
  ev.loss_by_position = {1.0, NAN};
  EXPECT_EQ(dump_json(metrics_eval_record(ev, true)),
            "{\"step\":4,\"val_loss\":null,\"val_bpb\":0.0,\"val_targets\":0,\"val_accuracy\":null,"
            "\"val_loss_by_position\":[1.0,null]}");
  ev.accuracy_measured = true;
  ev.accuracy = 0.5;
  EXPECT_EQ(metrics_eval_record(ev, false)["val_accuracy"].get<double>(), 0.5);
  EXPECT_EQ(dump_json(metrics_event_record(7, "skipped_step", "gradient not finite")),
            "{\"step\":7,\"event\":\"skipped_step\",\"message\":\"gradient not finite\"}");
}

TEST(Metrics, TruncationKeepsCompleteRecordsUpToTheStep) {
  TempDir tmp;
  const fs::path p = tmp / "metrics.jsonl";
  write_file_atomic(p, std::string_view("{\"step\":1,\"loss\":1}\nnot json\n{\"step\":2,\"event\":\"x\",\"message\":\"\"}\n"
                                        "{\"loss\":3}\n{\"step\":3,\"loss\":3}\n{\"step\":2,\"val_loss\":1}\n{\"step\":4"));
  EXPECT_EQ(read_metrics(p).size(), 4u);
  EXPECT_EQ(read_metrics(p, 2).size(), 3u);
  EXPECT_EQ(truncate_metrics(p, 2), 3);
  EXPECT_EQ(read_file_text(p), "{\"step\":1,\"loss\":1}\n{\"step\":2,\"event\":\"x\",\"message\":\"\"}\n{\"step\":2,\"val_loss\":1}\n");
  EXPECT_EQ(truncate_metrics(tmp / "absent.jsonl", 5), 0);
  EXPECT_FALSE(fs::exists(tmp / "absent.jsonl"));
}

}  // namespace
}  // namespace tttlab
