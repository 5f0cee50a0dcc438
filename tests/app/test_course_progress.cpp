// The student's course progress (app/course/progress.hpp): a round trip through the file, a missing
// file, malformed files (reported, left untouched), and a location that cannot be written (reported,
// the progress kept in memory).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>

#include "core/io/temp_dir.hpp"
#include "course/progress.hpp"

namespace tttlab::course {
namespace {

namespace fs = std::filesystem;

using tttlab::testing::TempDir;  // tests/core/io/temp_dir.hpp

using tttlab::testing::slurp;
using tttlab::testing::write;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(CourseProgress, RoundTripsThroughTheFile) {
  TempDir dir;
  const fs::path file = dir.path() / "sub" / "folder" / "progress.json";  // folders are created
  {
    ProgressStore s(file);
    EXPECT_EQ(s.error(), "");
    LessonProgress& a = s.edit("01-one-step-per-token");
    a.finished = true;
    a.predictions["gap"] = PredictionRecord{0, 0.0, true, true, 0.125, "", {}};
    LessonProgress& b = s.edit("02-mini-batches");
    b.predictions["size"] = PredictionRecord{-1, 3.5, false, false, 0.0, "", {}};
    b.predictions["nan"] = PredictionRecord{-1, 1.0, true, false, std::nan(""), "", {}};
    ASSERT_TRUE(s.save()) << s.error();
    EXPECT_EQ(s.error(), "");
    EXPECT_EQ(s.finished_count(), 1);
  }
  // Nothing but the file itself is left in the folder (the temporary was renamed over it).
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(file.parent_path())) ++entries;
  EXPECT_EQ(entries, 1);
  EXPECT_TRUE(contains(slurp(file), "\"format\": \"tttlab-course-progress\""));

  const ProgressStore r(file);
  EXPECT_EQ(r.error(), "");
  EXPECT_EQ(r.path(), file);
  EXPECT_EQ(r.finished_count(), 1);
  const LessonProgress* a = r.lesson("01-one-step-per-token");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->finished);
  ASSERT_EQ(a->predictions.count("gap"), 1u);
  const PredictionRecord& g = a->predictions.at("gap");
  EXPECT_EQ(g.choice, 0);
  EXPECT_TRUE(g.revealed);
  EXPECT_TRUE(g.right);
  EXPECT_DOUBLE_EQ(g.measured, 0.125);
  const LessonProgress* b = r.lesson("02-mini-batches");
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(b->finished);
  EXPECT_EQ(b->predictions.at("size").choice, -1);
  EXPECT_DOUBLE_EQ(b->predictions.at("size").value, 3.5);
  EXPECT_FALSE(b->predictions.at("size").revealed);
  EXPECT_TRUE(std::isnan(b->predictions.at("nan").measured)) << "a value that was not finite stays so";
  EXPECT_EQ(r.lesson("03-nothing-yet"), nullptr);
}

// The first committed answer and its retries survive the file; a file written before they existed
// still reads; a retry of the wrong type is reported with its place.
TEST(CourseProgress, KeepsTheFirstAnswerAndItsRetries) {
  TempDir dir;
  const fs::path file = dir.path() / "progress.json";
  {
    ProgressStore s(file);
    PredictionRecord r{1, 0.0, true, false, 0.25, "2026-03-02T14:05:09Z", {}};
    r.retries.push_back(PredictionRetry{0, 0.0, true, "2026-03-02T14:07:41Z"});
    r.retries.push_back(PredictionRetry{2, 0.0, false, "2026-03-02T14:09:00Z"});
    s.edit("08-theorem-2").predictions["rows"] = r;
    ASSERT_TRUE(s.save()) << s.error();
  }
  const ProgressStore back(file);
  ASSERT_EQ(back.error(), "");
  const PredictionRecord& r = back.lesson("08-theorem-2")->predictions.at("rows");
  EXPECT_EQ(r.choice, 1);
  EXPECT_FALSE(r.right);
  EXPECT_EQ(r.committed_at, "2026-03-02T14:05:09Z");
  ASSERT_EQ(r.retries.size(), 2u);
  EXPECT_EQ(r.retries[0].choice, 0);
  EXPECT_TRUE(r.retries[0].right);
  EXPECT_EQ(r.retries[0].at, "2026-03-02T14:07:41Z");
  EXPECT_EQ(r.retries[1].choice, 2);

  write(file, R"({"format": "tttlab-course-progress", "version": 1, "lessons": {"01-a": {"finished": false,
    "predictions": {"gap": {"choice": 0, "value": 0.0, "revealed": true, "right": true, "measured": 0.1}}}}})");
  const ProgressStore old(file);
  EXPECT_EQ(old.error(), "") << "a file without committed_at and retries still reads";
  EXPECT_EQ(old.lesson("01-a")->predictions.at("gap").committed_at, "");
  EXPECT_TRUE(old.lesson("01-a")->predictions.at("gap").retries.empty());

  write(file, R"({"format": "tttlab-course-progress", "version": 1, "lessons": {"01-a": {
    "predictions": {"gap": {"choice": 0, "retries": [{"choice": "two"}]}}}}})");
  const ProgressStore bad(file);
  EXPECT_TRUE(contains(bad.error(), "lessons.01-a.predictions.gap.retries[0].choice")) << bad.error();

  const std::string now = utc_now_iso8601();
  ASSERT_EQ(now.size(), 20u) << now;
  EXPECT_EQ(now[4], '-');
  EXPECT_EQ(now[10], 'T');
  EXPECT_EQ(now.back(), 'Z');
}

TEST(CourseProgress, AMissingFileIsAnEmptyProgress) {
  TempDir dir;
  const fs::path file = dir.path() / "never-written.json";
  ProgressStore s(file);
  EXPECT_EQ(s.error(), "");
  EXPECT_EQ(s.finished_count(), 0);
  EXPECT_EQ(s.lesson("01-one-step-per-token"), nullptr);
  EXPECT_FALSE(fs::exists(file)) << "reading creates nothing";
  s.edit("01-one-step-per-token").finished = true;
  ASSERT_TRUE(s.save()) << s.error();
  EXPECT_TRUE(fs::exists(file));
}

TEST(CourseProgress, AMalformedFileIsReportedAndLeftUntouched) {
  TempDir dir;
  const fs::path file = dir.path() / "progress.json";
  const std::string valid_prefix = R"({"format": "tttlab-course-progress", "version": 1, )";
  struct Case {
    std::string text, message;
  };
  const Case cases[] = {
      {"{\"format\": \"tttlab-course-progress\",\n \"lessons\": {", "not valid JSON"},
      {"[1, 2, 3]", "not a course progress file"},
      {R"({"format": "tttlab-state", "lessons": {}})", "not a course progress file"},
      {R"({"format": "tttlab-course-progress", "version": 7})", "newer TTT Lab"},
      {valid_prefix + R"("lessons": [1]})", "lessons: expected an object"},
      {valid_prefix + R"("lessons": {"01-a": {"finished": "yes"}}})", "lessons.01-a.finished: expected true or false"},
      {valid_prefix + R"("lessons": {"01-a": {"predictions": {"gap": {"choice": 1.5}}}}})",
       "lessons.01-a.predictions.gap.choice: expected a whole number"},
      {valid_prefix + R"("lessons": {"01-a": {"predictions": {"gap": {"measured": "big"}}}}})",
       "lessons.01-a.predictions.gap.measured: expected a number"},
      {std::string(20000, '[') + std::string(20000, ']'), "too deeply"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text.substr(0, 120));
    write(file, c.text);
    const ProgressStore s(file);
    EXPECT_TRUE(contains(s.error(), c.message)) << s.error();
    EXPECT_TRUE(contains(s.error(), file.string())) << "the error names the file: " << s.error();
    EXPECT_EQ(s.finished_count(), 0);
    EXPECT_EQ(slurp(file), c.text) << "reading never changes the file";
  }

  // A file over 1 MiB is refused without being parsed.
  write(file, valid_prefix + "\"pad\": \"" + std::string(1100000, 'x') + "\"}");
  const auto big_size = fs::file_size(file);
  {
    const ProgressStore s(file);
    EXPECT_TRUE(contains(s.error(), "progress.json")) << s.error();
    EXPECT_FALSE(s.error().empty());
    EXPECT_EQ(fs::file_size(file), big_size);
  }

  // The student's next change replaces the file; the unreadable one is kept beside it.
  const std::string broken = R"({"format": "tttlab-course-progress", "lessons": {"01-a": {"finished": 3}}})";
  write(file, broken);
  ProgressStore s(file);
  ASSERT_FALSE(s.error().empty());
  s.edit("01-a").finished = true;
  ASSERT_TRUE(s.save()) << s.error();
  EXPECT_EQ(s.error(), "") << "a successful save clears the error";
  fs::path kept = file;
  kept += ".unreadable";
  EXPECT_EQ(slurp(kept), broken);
  EXPECT_EQ(ProgressStore(file).finished_count(), 1);
}

TEST(CourseProgress, AFolderIsNotAProgressFile) {
  TempDir dir;
  const ProgressStore s(dir.path());
  EXPECT_TRUE(contains(s.error(), "is a folder")) << s.error();
}

TEST(CourseProgress, AnUnwritableLocationKeepsTheProgressInMemory) {
  TempDir dir;
  // A regular file where the folder should be: no one, root included, can create files under it.
  const fs::path blocker = dir.path() / "not-a-folder";
  write(blocker, "x");
  const fs::path file = blocker / "tttlab" / "progress.json";
  ProgressStore s(file);
  EXPECT_EQ(s.error(), "") << "a missing file is not an error";
  s.edit("01-a").finished = true;
  s.edit("01-a").predictions["gap"] = PredictionRecord{2, 0.0, true, false, -0.5, "", {}};
  EXPECT_FALSE(s.save());
  EXPECT_TRUE(contains(s.error(), "could not be saved")) << s.error();
  EXPECT_TRUE(contains(s.error(), blocker.string())) << s.error();
  // Everything the student did is still there and is written once the location works.
  ASSERT_NE(s.lesson("01-a"), nullptr);
  EXPECT_TRUE(s.lesson("01-a")->finished);
  EXPECT_EQ(s.lesson("01-a")->predictions.at("gap").choice, 2);
  EXPECT_EQ(s.finished_count(), 1);
  fs::remove(blocker);
  ASSERT_TRUE(s.save()) << s.error();
  EXPECT_EQ(s.error(), "");
  const ProgressStore r(file);
  ASSERT_NE(r.lesson("01-a"), nullptr);
  EXPECT_EQ(r.lesson("01-a")->predictions.at("gap").choice, 2);
}

TEST(CourseProgress, DefaultPathFollowsTheEnvironment) {
  const auto saved = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  const auto restore = [](const char* name, const std::optional<std::string>& v) {
    if (v)
      ::setenv(name, v->c_str(), 1);
    else
      ::unsetenv(name);
  };
  const auto progress = saved("TTTLAB_PROGRESS"), xdg = saved("XDG_CONFIG_HOME"), home = saved("HOME");
  ::unsetenv("TTTLAB_PROGRESS");
  ::setenv("XDG_CONFIG_HOME", "/xdg/config", 1);
  EXPECT_EQ(ProgressStore::default_path(), fs::path("/xdg/config/tttlab/course-progress.json"));
  ::unsetenv("XDG_CONFIG_HOME");
  ::setenv("HOME", "/home/student", 1);
  EXPECT_EQ(ProgressStore::default_path(), fs::path("/home/student/.config/tttlab/course-progress.json"));
  ::setenv("XDG_CONFIG_HOME", "relative/ignored", 1);
  EXPECT_EQ(ProgressStore::default_path(), fs::path("/home/student/.config/tttlab/course-progress.json"));
  ::setenv("TTTLAB_PROGRESS", "/somewhere/mine.json", 1);
  EXPECT_EQ(ProgressStore::default_path(), fs::path("/somewhere/mine.json"));
  restore("TTTLAB_PROGRESS", progress);
  restore("XDG_CONFIG_HOME", xdg);
  restore("HOME", home);
}

}  // namespace
}  // namespace tttlab::course
