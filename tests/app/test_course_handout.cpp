// The printable handouts (course/handout.hpp): the student's copy of every shipped lesson gives no
// answer away, and the teacher's copy has each answer that the student's lacks.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "course/handout.hpp"
#include "course/lesson.hpp"

namespace tttlab::course {
namespace {

namespace fs = std::filesystem;

// A stretch of `text` that reaches the page unchanged: the longest run without Markdown or HTML
// specials, trimmed. Empty when no run of 16 characters exists (such a text is not probed).
std::string probe(const std::string& text) {
  const std::string specials = "*_`[]()<>&\"'|\\\n#~$";
  std::string best, cur;
  for (char c : text) {
    if (specials.find(c) != std::string::npos) {
      if (cur.size() > best.size()) best = cur;
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (cur.size() > best.size()) best = cur;
  while (!best.empty() && best.front() == ' ') best.erase(best.begin());
  while (!best.empty() && best.back() == ' ') best.pop_back();
  return best.size() >= 16 ? best : std::string();
}

// The first paragraph under "## The reveal" in the lesson's text ("" when it has none).
std::string reveal_paragraph(const Lesson& L) {
  for (const auto& part : L.parts) {
    if (part.kind != LessonPart::Kind::Markdown) continue;
    const auto at = part.markdown.find("## The reveal");
    if (at == std::string::npos) continue;
    std::size_t b = part.markdown.find_first_not_of('\n', part.markdown.find('\n', at));
    if (b == std::string::npos) return {};
    const std::size_t e = part.markdown.find("\n\n", b);
    return part.markdown.substr(b, e == std::string::npos ? std::string::npos : e - b);
  }
  return {};
}

TEST(CourseHandout, StudentCopyHasNoAnswerAndTeacherCopyHasThem) {
  if (!handouts_available()) GTEST_SKIP() << "built without md4c's HTML renderer";
  const Course c = load_course(fs::path(TTTLAB_SOURCE_DIR) / "lessons");
  ASSERT_TRUE(c.errors.empty());
  ASSERT_GE(c.lessons.size(), 15u);
  int probed = 0;
  for (const Lesson& L : c.lessons) {
    SCOPED_TRACE(L.name);
    const std::string student = handout_html(L, {false});
    const std::string teacher = handout_html(L, {true});
    // Every secret: absent from the student's copy, present in the teacher's.
    const auto secret = [&](const std::string& text, const char* what) {
      const std::string p = probe(text);
      if (p.empty()) return;
      ++probed;
      EXPECT_EQ(student.find(p), std::string::npos) << what << " in the student's copy: " << p;
      EXPECT_NE(teacher.find(p), std::string::npos) << what << " missing from the teacher's copy: " << p;
    };
    for (const auto& p : L.predictions) {
      secret(p.reveal, "a reveal");
      EXPECT_NE(student.find(probe(p.ask).empty() ? std::string("Predict first") : probe(p.ask)), std::string::npos)
          << "the prediction's question is missing";
      for (const auto& ch : p.choices)
        EXPECT_EQ(student.find("Right when the measured " + p.measure + " is " + ch.when.text), std::string::npos);
    }
    for (const auto& q : L.questions) secret(q.answer, "an answer");
    for (const auto& x : L.exercises) {
      secret(x.explain, "an exercise's explanation");
      EXPECT_EQ(student.find("<code>" + x.answer + "</code>"), std::string::npos) << "an exercise's key";
      EXPECT_NE(teacher.find(x.answer), std::string::npos) << "an exercise's key missing from the teacher's copy";
    }
    for (const auto& ch : L.checks) secret(ch.claim, "a check's claim");
    secret(reveal_paragraph(L), "the reveal section");
    EXPECT_NE(student.find("student's copy"), std::string::npos);
    EXPECT_NE(teacher.find("teacher's copy"), std::string::npos);
  }
  EXPECT_GT(probed, 150) << "the test probed too few secrets to mean anything";
}

TEST(CourseHandout, RawHtmlInALessonIsEscaped) {
  if (!handouts_available()) GTEST_SKIP() << "built without md4c's HTML renderer";
  const std::string text =
      "---\ntitle: T <b>x</b>\ngoal: G\nduration: 5\nscene: 01-one-step-per-token.tttlab\n---\n# 1. T\n\n"
      "Some <script>alert(1)</script> text.\n\n"
      "```predict\nask: Rank?\nmeasure: final_rank\nchoice: <i>low</i> | < 2\nchoice: high | >= 2\n```\n"
      "```check\nclaim: The rank <u>stays</u> low.\nmeasure: final_rank\nexpect: < 2\n```\n"
      "```question\nask: Why <img src=x onerror=alert(1)>?\nhint: Think.\nanswer: Because.\n```\n";
  // Anchored in lessons/ for its scene (a shipped one); the file itself is never read.
  const Lesson L = parse_lesson(text, fs::path(TTTLAB_SOURCE_DIR) / "lessons" / "01-t.md");
  const std::string html = handout_html(L, {true});
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>x"), std::string::npos);
  EXPECT_EQ(html.find("<i>low"), std::string::npos);
  EXPECT_EQ(html.find("<u>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  EXPECT_NE(html.find("Because."), std::string::npos);
}

TEST(CourseHandout, IndexLinksEveryPageAndSumsTheMinutes) {
  if (!handouts_available()) GTEST_SKIP() << "built without md4c's HTML renderer";
  const Course c = load_course(fs::path(TTTLAB_SOURCE_DIR) / "lessons");
  std::vector<const Lesson*> all;
  int minutes = 0;
  for (const auto& l : c.lessons) {
    all.push_back(&l);
    minutes += l.minutes;
  }
  const std::string index = handout_index_html(all, {false});
  for (const auto* l : all) EXPECT_NE(index.find("href=\"" + l->name + ".html\""), std::string::npos) << l->name;
  EXPECT_NE(index.find(std::to_string(minutes) + " min in all"), std::string::npos);
  EXPECT_EQ(handout_file_name(*all.front(), {true}), all.front()->name + "-answers.html");
}

}  // namespace
}  // namespace tttlab::course
