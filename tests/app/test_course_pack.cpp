// The student pack (app/course/course_pack.hpp), the progress export (progress_export.hpp) and the
// locked classroom mode: the real lessons are packed and no secret is left in clear text in any file of
// the pack; the pack reads back to exactly the teacher's lessons; a failed pack leaves nothing; an
// export verifies, and an edited one, another course's or a damaged file is named for what it is.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/io/temp_dir.hpp"
#include "course/classroom.hpp"
#include "course/course_pack.hpp"
#include "course/course_session.hpp"
#include "course/progress_export.hpp"

namespace tttlab::course {
namespace {

namespace fs = std::filesystem;
using tttlab::testing::TempDir;

const fs::path kLessons = fs::path(TTTLAB_SOURCE_DIR) / "lessons";

using tttlab::testing::slurp;
using tttlab::testing::write;

// Runs of whitespace as one space: a secret wrapped over several lines is still found.
std::string squash(std::string_view s) {
  std::string out;
  bool space = false;
  for (const char c : s) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// The paragraphs of every "## The reveal" section of a lesson file, as the author wrote them.
std::vector<std::string> reveal_paragraphs(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line, para;
  bool inside = false;
  auto flush = [&] {
    if (inside && squash(para).size() >= 20) out.push_back(squash(para));
    para.clear();
  };
  while (std::getline(in, line)) {
    if (line.starts_with("## ") || line.starts_with("# ")) {
      flush();
      inside = line.starts_with("## The reveal");
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos || line.starts_with("```")) {
      flush();
      continue;
    }
    para += line + "\n";
  }
  flush();
  return out;
}

struct Secret {
  std::string where, text;  // text: as it would appear in a file, whitespace squashed
  bool line_end = false;    // a short one ("| < 3", "expect: > 0"): found only where a line ends with it
};

// Every secret of the teacher's course, taken from parsing the originals.
std::vector<Secret> secrets_of(const Course& c) {
  std::vector<Secret> out;
  for (const Lesson& l : c.lessons) {
    for (const Prediction& p : l.predictions) {
      if (!p.reveal.empty()) out.push_back({l.name + "/" + p.id + " reveal", squash(p.reveal)});
      for (const Choice& ch : p.choices) out.push_back({l.name + "/" + p.id + " range", squash("| " + ch.when.text), true});
    }
    for (const Question& q : l.questions) out.push_back({l.name + " answer", squash(q.answer)});
    for (const Exercise& x : l.exercises) {
      out.push_back({l.name + "/" + x.id + " key", squash("answer: " + x.answer), true});
      if (!x.explain.empty()) out.push_back({l.name + "/" + x.id + " explanation", squash(x.explain)});
    }
    for (const Check& ch : l.checks) {
      out.push_back({l.name + " claim", squash(ch.claim)});
      out.push_back({l.name + " expect", squash("expect: " + ch.expect.text), true});
    }
    for (const auto& para : reveal_paragraphs(slurp(l.file))) out.push_back({l.name + " reveal section", para});
  }
  return out;
}

struct File {
  std::string name, text;        // whitespace squashed
  std::vector<std::string> lines;  // each squashed
  bool has(const Secret& s) const {
    if (!s.line_end) return text.find(s.text) != std::string::npos;
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.ends_with(s.text); });
  }
};

// Every file of a folder.
std::vector<File> files_of(const fs::path& dir) {
  std::vector<File> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string raw = slurp(e.path());
    File f{e.path().filename().string(), squash(raw), {}};
    std::istringstream in(raw);
    for (std::string line; std::getline(in, line);) f.lines.push_back(squash(line));
    out.push_back(std::move(f));
  }
  return out;
}

TEST(CoursePack, NoSecretOfTheCourseIsLeftInClearText) {
  const Course source = load_course(kLessons);
  ASSERT_TRUE(source.errors.empty());
  ASSERT_GE(source.lessons.size(), 15u);
  TempDir dir;
  const CourseKey key = CourseKey::generate();
  EXPECT_EQ(write_student_pack({kLessons, dir.path() / "pack", {}, false}, key), static_cast<int>(source.lessons.size()));

  const auto secrets = secrets_of(source);
  ASSERT_GT(secrets.size(), 300u);
  std::set<std::string> kinds;
  for (const auto& s : secrets) kinds.insert(s.where.substr(s.where.rfind(' ') + 1));
  EXPECT_EQ(kinds, (std::set<std::string>{"reveal", "range", "answer", "claim", "expect", "section", "key", "explanation"}));
  // The search finds every secret in the teacher's folder (so it would find a leak) …
  const auto originals = files_of(kLessons);
  for (const auto& s : secrets) {
    bool found = false;
    for (const auto& f : originals) found = found || f.has(s);
    EXPECT_TRUE(found) << s.where << ": \"" << s.text << "\" not found in the originals";
  }
  // … and none in any file of the pack.
  const auto packed = files_of(dir.path() / "pack");
  ASSERT_EQ(packed.size(), originals.size() + 1) << "every file, plus course-pack.json";
  for (const auto& s : secrets)
    for (const auto& f : packed) EXPECT_FALSE(f.has(s)) << s.where << " in clear text in " << f.name << ": \"" << s.text << "\"";
  // The course key itself is nowhere in the pack.
  for (const auto& f : packed) EXPECT_EQ(f.text.find(key.hex()), std::string::npos) << f.name;
}

TEST(CoursePack, APackReadsBackToExactlyTheTeachersLessons) {
  const Course source = load_course(kLessons);
  TempDir dir;
  write_student_pack({kLessons, dir.path() / "pack", {}, false}, CourseKey::generate());
  const Course packed = load_course(dir.path() / "pack");
  EXPECT_TRUE(packed.errors.empty()) << packed.errors.front().second;
  ASSERT_EQ(packed.lessons.size(), source.lessons.size());
  for (std::size_t i = 0; i < source.lessons.size(); ++i) {
    std::string why;
    EXPECT_TRUE(same_lesson(source.lessons[i], packed.lessons[i], &why)) << why;
    EXPECT_FALSE(source.lessons[i].predictions.empty());
    EXPECT_EQ(packed.lessons[i].predictions.front().reveal, source.lessons[i].predictions.front().reveal);
  }
  // same_lesson sees a difference.
  Lesson changed = source.lessons[0];
  changed.questions.at(0).answer += " (edited)";
  std::string why;
  EXPECT_FALSE(same_lesson(source.lessons[0], changed, &why));
  EXPECT_NE(why.find("question 1"), std::string::npos) << why;
}

TEST(CoursePack, SealingIsATextTransformThatUnsealsByteForByte) {
  const PackKeys keys = CourseKey::generate().derive();
  for (const auto& e : fs::directory_iterator(kLessons)) {
    if (e.path().extension() != ".md") continue;
    const std::string text = slurp(e.path());
    const std::string sealed = seal_lesson_text(text, keys);
    EXPECT_EQ(unseal_lesson_text(sealed, keys, e.path().filename().string()), text) << e.path();
  }
  // Wrapped fields, CRLF line ends, a choice whose condition is on a continuation line, a reveal
  // section holding a code block with a "## " line, and ordinary code blocks are all kept exactly.
  const std::string tricky =
      "---\r\ntitle: T\r\n---\r\n```predict\r\nask: Which?\r\nchoice: One\r\n  | > 0\r\nreveal: It is\r\n  "
      "wrapped.\r\n\r\n```\r\n```text\r\nreveal: not a field here\r\n```\r\n## The reveal\r\nSecret.\r\n```text\r\n## "
      "not a heading\r\n```\r\nMore secret.\r\n## Next\r\nOpen text.\r\n";
  const std::string sealed = seal_lesson_text(tricky, keys);
  EXPECT_EQ(unseal_lesson_text(sealed, keys, "t.md"), tricky);
  for (const char* gone : {"> 0", "wrapped.", "Secret.", "More secret.", "not a heading"})
    EXPECT_EQ(sealed.find(gone), std::string::npos) << gone;
  for (const char* kept : {"choice: One", "reveal: not a field here", "## Next\r\nOpen text.", "ask: Which?"})
    EXPECT_NE(sealed.find(kept), std::string::npos) << kept;
  // Another course's keys, or an edited sealed text, are refused with the line.
  try {
    (void)unseal_lesson_text(sealed, CourseKey::generate().derive(), "t.md");
    FAIL();
  } catch (const PackError& e) {
    EXPECT_NE(std::string(e.what()).find("t.md:"), std::string::npos) << e.what();
  }
}

TEST(CoursePack, AnEditedPackSaysWhichLessonCannotBeRead) {
  TempDir dir;
  const fs::path pack = dir.path() / "pack";
  write_student_pack({kLessons, pack, {}, false}, CourseKey::generate());
  const fs::path lesson = pack / "01-one-step-per-token.md";
  std::string text = slurp(lesson);
  const auto at = text.find("sealed:");
  ASSERT_NE(at, std::string::npos);
  text[at + 10] = text[at + 10] == 'A' ? 'B' : 'A';
  write(lesson, text);
  const Course c = load_course(pack);
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_NE(c.errors[0].second.find("01-one-step-per-token.md:"), std::string::npos) << c.errors[0].second;
  EXPECT_NE(c.errors[0].second.find("does not open"), std::string::npos) << c.errors[0].second;
}

TEST(CoursePack, AFailedPackLeavesNothing) {
  TempDir dir;
  const CourseKey key = CourseKey::generate();
  // A folder that is not empty is refused and left alone.
  fs::create_directory(dir.path() / "busy");
  write(dir.path() / "busy" / "notes.txt", "mine");
  EXPECT_THROW(write_student_pack({kLessons, dir.path() / "busy", {}, false}, key), PackError);
  EXPECT_EQ(slurp(dir.path() / "busy" / "notes.txt"), "mine");
  // A course with a malformed lesson: nothing is written, no temporary folder is left.
  const fs::path src = dir.path() / "src";
  fs::create_directory(src);
  fs::copy_file(kLessons / "01-one-step-per-token.md", src / "01-one-step-per-token.md");
  fs::copy_file(kLessons / "01-one-step-per-token.tttlab", src / "01-one-step-per-token.tttlab");
  write(src / "02-broken.md", "---\ntitle: x\n---\n");
  EXPECT_THROW(write_student_pack({src, dir.path() / "out", {}, false}, key), PackError);
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"busy", "src"}));
  // An empty folder is filled; a pack is not packed again.
  fs::remove(src / "02-broken.md");
  fs::create_directory(dir.path() / "empty");
  EXPECT_EQ(write_student_pack({src, dir.path() / "empty", {}, false}, key), 1);
  EXPECT_TRUE(open_pack(dir.path() / "empty"));
  EXPECT_THROW(write_student_pack({dir.path() / "empty", dir.path() / "again", {}, false}, key), PackError);
}

TEST(CoursePack, TheManifestCarriesTheDerivedKeysAndTheClassroomNotTheCourseKey) {
  TempDir dir;
  const CourseKey key = CourseKey::generate();
  ClassroomState room;
  room.enabled = true;
  room.hidden = {"training.settings"};
  room.allow_answers = false;
  write_student_pack({kLessons, dir.path() / "pack", room, true}, key);
  const auto pack = open_pack(dir.path() / "pack");
  ASSERT_TRUE(pack);
  EXPECT_EQ(pack->keys.course_id, key.derive().course_id);
  EXPECT_EQ(pack->keys.progress, key.derive().progress);
  ASSERT_TRUE(pack->classroom);
  EXPECT_EQ(*pack->classroom, room);
  EXPECT_TRUE(pack->classroom_locked);
  EXPECT_FALSE(open_pack(kLessons)) << "the teacher's folder is no pack";
  write(dir.path() / "pack" / kPackManifest, "{\"format\": \"tttlab-course-pack\", \"version\": 1}");
  EXPECT_THROW(open_pack(dir.path() / "pack"), PackError);
}

// ---- the progress a teacher collects -----------------------------------------------------------------

const char* kProgress = R"({"format": "tttlab-course-progress", "version": 1, "student": "Ada",
  "lessons": {"01-one-step-per-token": {"finished": true, "predictions": {"gap": {"choice": 0, "value": 0.0,
    "revealed": true, "right": true, "measured": 0.2, "committed_at": "2026-11-28T10:00:00Z",
    "retries": [{"choice": 1, "value": 0, "right": false, "at": "2026-11-28T10:05:00Z"}]}},
    "exercises": {"rank": {"answer": "32", "right": true, "attempts": 2, "first_right": false,
                           "at": "2026-11-28T10:10:00Z"}},
    "a_field_from_a_newer_app": [1, 2, 3]}}})";

CoursePack pack_of(const CourseKey& key) {
  CoursePack p;
  p.keys = key.derive();
  return p;
}

TEST(ProgressExport, SignsTheWholeRecordAndDetectsAnEdit) {
  TempDir dir;
  const CourseKey key = CourseKey::generate();
  const CoursePack pack = pack_of(key);
  write(dir.path() / "progress.json", kProgress);
  export_progress(dir.path() / "progress.json", "Ada L.", &pack, "1.2.3", dir.path() / "ada.json");
  const ExportCheck ok = verify_export_file(dir.path() / "ada.json", key.derive());
  EXPECT_EQ(ok.status, ExportCheck::Status::Ok) << ok.message;
  EXPECT_EQ(ok.student, "Ada L.");
  EXPECT_EQ(ok.app_version, "1.2.3");
  EXPECT_EQ(ok.progress, nlohmann::json::parse(kProgress)) << "the record as it is, unknown fields included";

  // A student turns a wrong retry into a right one by hand.
  std::string text = slurp(dir.path() / "ada.json");
  const auto at = text.find("\"right\": false");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 14, "\"right\": true");
  write(dir.path() / "edited.json", text);
  const ExportCheck bad = verify_export_file(dir.path() / "edited.json", key.derive());
  EXPECT_EQ(bad.status, ExportCheck::Status::Tampered);
  EXPECT_STREQ(status_name(bad.status), "TAMPERED");
  // Re-indenting the file is not an edit: the signature is over the canonical text.
  write(dir.path() / "compact.json", nlohmann::json::parse(slurp(dir.path() / "ada.json")).dump());
  EXPECT_EQ(verify_export_file(dir.path() / "compact.json", key.derive()).status, ExportCheck::Status::Ok);
  // Another course's key: wrong course.
  EXPECT_EQ(verify_export_file(dir.path() / "ada.json", CourseKey::generate().derive()).status,
            ExportCheck::Status::WrongCourse);
}

TEST(ProgressExport, WithoutAPackTheExportSaysItIsUnkeyed) {
  TempDir dir;
  write(dir.path() / "progress.json", kProgress);
  export_progress(dir.path() / "progress.json", "Bo", nullptr, "1.2.3", dir.path() / "bo.json");
  const auto doc = nlohmann::json::parse(slurp(dir.path() / "bo.json"));
  EXPECT_EQ(doc["signed"], "unkeyed");
  const PackKeys course = CourseKey::generate().derive();
  EXPECT_EQ(verify_export_file(dir.path() / "bo.json", course).status, ExportCheck::Status::Unkeyed);
  std::string text = slurp(dir.path() / "bo.json");
  text.replace(text.find("\"Bo\""), 4, "\"Cy\"");
  write(dir.path() / "edited.json", text);
  EXPECT_EQ(verify_export_file(dir.path() / "edited.json", course).status, ExportCheck::Status::Tampered);
  // No progress yet: an empty record; no name: refused with a reason.
  export_progress(dir.path() / "none.json", "Bo", nullptr, "1.2.3", dir.path() / "empty.json");
  EXPECT_TRUE(nlohmann::json::parse(slurp(dir.path() / "empty.json"))["progress"]["lessons"].empty());
  EXPECT_THROW(export_progress(dir.path() / "progress.json", "", nullptr, "1", dir.path() / "x.json"), std::runtime_error);
  EXPECT_FALSE(fs::exists(dir.path() / "x.json"));
}

TEST(ProgressExport, BadFilesAreNamedForWhatTheyAre) {
  TempDir dir;
  const PackKeys course = CourseKey::generate().derive();
  auto check = [&](const std::string& content, const std::string& expect) {
    write(dir.path() / "f.json", content);
    const ExportCheck c = verify_export_file(dir.path() / "f.json", course);
    EXPECT_EQ(c.status, ExportCheck::Status::Unreadable);
    EXPECT_NE(c.message.find(expect), std::string::npos) << c.message;
  };
  check("this is not json", "not JSON");
  check(R"({"format": "tttlab-course-progress", "version": 1})", "not a progress export");
  check(R"({"format": "tttlab-progress-export", "version": 99, "progress": {}})", "another version");
  check(std::string(200000, '[') + std::string(200000, ']'), "too deeply");
  check(std::string(5 << 20, ' '), "more than the limit");
}

// ---- classroom mode locked by a pack ---------------------------------------------------------------

TEST(ClassroomLock, AStudentCannotUndoItTheCourseKeyCan) {
  const CourseKey key = CourseKey::generate();
  ClassroomState teacher;
  teacher.enabled = true;
  teacher.hidden = {"training.settings"};
  teacher.allow_answers = false;
  classroom::lock(teacher, key.derive().course_id);
  EXPECT_TRUE(classroom::locked());
  EXPECT_TRUE(classroom::state().enabled);
  ClassroomState off;  // what the menu, Ctrl+Shift+K or a state file would ask for
  classroom::set(off);
  EXPECT_TRUE(classroom::state().enabled);
  EXPECT_FALSE(classroom::visible("training.settings"));
  EXPECT_FALSE(classroom::answers_allowed());
  EXPECT_FALSE(classroom::unlock(CourseKey::generate().hex())) << "another course's key";
  EXPECT_FALSE(classroom::unlock("not hex"));
  EXPECT_TRUE(classroom::locked());
  EXPECT_TRUE(classroom::unlock(key.hex()));
  EXPECT_FALSE(classroom::locked());
  classroom::set(off);
  EXPECT_FALSE(classroom::state().enabled);
  EXPECT_TRUE(classroom::answers_allowed());
}

TEST(ClassroomLock, TheAppOpensAPackAndAppliesItsLock) {
  TempDir dir;
  const CourseKey key = CourseKey::generate();
  ClassroomState room;
  room.hidden = {"training.settings"};
  write_student_pack({kLessons, dir.path() / "pack", room, true}, key);
  course_session::set_progress_path(dir.path() / "progress.json");
  course_session::set_lessons_dir(dir.path() / "pack");
  const CourseSession& cs = course_session::get();
  EXPECT_TRUE(cs.error.empty()) << cs.error;
  ASSERT_TRUE(cs.pack);
  EXPECT_EQ(cs.pack->keys.course_id, key.derive().course_id);
  EXPECT_GE(cs.course.lessons.size(), 15u);
  EXPECT_TRUE(cs.course.errors.empty());
  EXPECT_TRUE(classroom::locked());
  EXPECT_TRUE(classroom::state().enabled) << "a locked pack turns classroom mode on";
  EXPECT_FALSE(classroom::visible("training.settings"));
  // Another course (the teacher's folder) is not locked.
  course_session::set_lessons_dir(kLessons);
  EXPECT_FALSE(course_session::get().pack);
  EXPECT_FALSE(classroom::locked());
  classroom::set(ClassroomState{});
}

}  // namespace
}  // namespace tttlab::course
