// The printable handouts (course/handout.hpp): the student's copy of every shipped lesson gives no
// answer away, and the teacher's copy has each answer that the student's lacks.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "course/handout.hpp"
#include "course/lesson.hpp"
#include "course/lesson_session.hpp"

namespace tttlab::course {
namespace {

namespace fs = std::filesystem;

// The student's copy (with_answers false) or the teacher's, without figures.
HandoutOptions copy(bool with_answers) {
  HandoutOptions o;
  o.with_answers = with_answers;
  return o;
}

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
    const std::string student = handout_html(L, copy(false));
    const std::string teacher = handout_html(L, copy(true));
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

// Counts the non-overlapping occurrences of `what` in `text`.
std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

TEST(CourseHandout, FiguresStandWhereTheirBlocksStoodAndSealedViewsStayOutOfTheStudentsCopy) {
  if (!handouts_available()) GTEST_SKIP() << "built without md4c's HTML renderer";
  const std::string text =
      "---\ntitle: T\ngoal: G\nduration: 5\nscene: 01-one-step-per-token.tttlab\n---\n# 1. T\n\nIntro text.\n\n"
      "```predict\nid: rank\nask: Rank?\nmeasure: final_rank\nchoice: low | < 2\nchoice: high | >= 2\n```\n\n"
      "Before the wide view.\n\n"
      "```experiment\nid: wide\nscene: 01-one-step-per-token-b16.tttlab\n```\n\n"
      "After the wide view.\n\n"
      "```experiment\nid: again\nscene: 01-one-step-per-token.tttlab\n```\n"
      "```question\nask: Which way?\nhint: Think.\nanswer: Because.\n```\n"
      "## The reveal\n\nRevealed text.\n\n"
      "```check\nclaim: The rank is high.\nmeasure: final_rank\nexpect: >= 2\n```\n"
      "```experiment\nid: late\nscene: 01-one-step-per-token-b16.tttlab\n```\n";
  const Lesson L = parse_lesson(text, fs::path(TTTLAB_SOURCE_DIR) / "lessons" / "01-t.md");
  HandoutOptions student{false, true, {}};
  const auto figures = handout_figures(L, student);
  ASSERT_EQ(figures.size(), 4u);
  // The lesson's own view: a prediction asks about it. "again" opens the same scene file: the same
  // picture, sealed too. "wide" no prediction asks about. "late" stands in the reveal section.
  EXPECT_EQ(figures[0].experiment, "");
  EXPECT_TRUE(figures[0].guarded);
  EXPECT_FALSE(figures[0].shown);
  EXPECT_EQ(figures[1].experiment, "wide");
  EXPECT_FALSE(figures[1].guarded);
  EXPECT_FALSE(figures[1].in_reveal);
  EXPECT_TRUE(figures[1].shown);
  EXPECT_EQ(figures[2].experiment, "again");
  EXPECT_TRUE(figures[2].guarded);
  EXPECT_FALSE(figures[2].shown);
  EXPECT_EQ(figures[3].experiment, "late");
  EXPECT_FALSE(figures[3].guarded);
  EXPECT_TRUE(figures[3].in_reveal);
  EXPECT_FALSE(figures[3].shown);

  // A page that shows a figure without its picture is refused, not printed with a hole.
  EXPECT_THROW(handout_html(L, student), LessonError);
  student.figure_files = {{"wide", "figures/wide view.png"}};
  const std::string page = handout_html(L, student);
  EXPECT_EQ(count(page, "<img"), 1u);
  const auto img = page.find("<img src=\"figures/wide%20view.png\"");
  ASSERT_NE(img, std::string::npos) << "the picture's path is percent-encoded";
  EXPECT_LT(page.find("Before the wide view."), img);
  EXPECT_GT(page.find("After the wide view."), img);
  EXPECT_NE(page.find("Figure: experiment \u201cwide\u201d (01-one-step-per-token-b16.tttlab)"), std::string::npos);
  EXPECT_EQ(count(page, "Figure in the app after your prediction"), 2u) << "the lesson's view and \"again\"";
  EXPECT_LT(page.find("Figure in the app after your prediction: the lesson's view"), page.find("Intro text."));
  EXPECT_EQ(page.find("\u201clate\u201d"), std::string::npos) << "the reveal section's figure goes with it";

  HandoutOptions teacher{true, true, {}};
  for (const auto& f : handout_figures(L, teacher)) {
    EXPECT_TRUE(f.shown) << f.experiment;
    teacher.figure_files[f.experiment] = "figures/" + (f.experiment.empty() ? std::string("own") : f.experiment) + ".png";
  }
  const std::string key = handout_html(L, teacher);
  EXPECT_EQ(count(key, "<img"), 4u);
  EXPECT_EQ(count(key, "Figure in the app after your prediction"), 0u);
  EXPECT_LT(key.find("src=\"figures/own.png\""), key.find("Intro text."));
  EXPECT_GT(key.find("src=\"figures/late.png\""), key.find("Revealed text."));
  EXPECT_GT(key.find("src=\"figures/again.png\""), key.find("After the wide view."));
  EXPECT_LT(key.find("src=\"figures/again.png\""), key.find("Which way?"));

  // Without figures, the pages are as before: no figure at all.
  EXPECT_EQ(handout_html(L, copy(false)).find("<figure"), std::string::npos);
  EXPECT_EQ(handout_html(L, copy(true)).find("<figure"), std::string::npos);
}

// The handout seals at least what the app veils: every view of a shipped lesson that the lesson pane
// veils before any prediction is locked in is a guarded figure, absent from the student's copy.
TEST(CourseHandout, TheStudentsCopyHasNoPictureOfAViewTheAppVeils) {
  if (!handouts_available()) GTEST_SKIP() << "built without md4c's HTML renderer";
  const Course c = load_course(fs::path(TTTLAB_SOURCE_DIR) / "lessons");
  ASSERT_TRUE(c.errors.empty());
  int guarded = 0, open = 0;
  for (const Lesson& L : c.lessons) {
    SCOPED_TRACE(L.name);
    HandoutOptions student{false, true, {}};
    const auto figures = handout_figures(L, student);
    ASSERT_EQ(figures.size(), L.experiments.size() + 1);
    for (const auto& f : figures) {
      if (f.shown) student.figure_files[f.experiment] = "figures/" + L.name + "-" + f.experiment + ".png";
    }
    const std::string page = handout_html(L, student);
    for (const auto& f : figures) {
      LessonSession by_id(L, nullptr);
      by_id.view_opened(f.experiment);
      LessonSession by_scene(L, nullptr);
      by_scene.scene_opened(f.scene);
      if (by_id.veiled() || by_scene.veiled()) {
        EXPECT_TRUE(f.guarded) << "the app veils " << f.caption;
      }
      if (f.guarded) {
        EXPECT_FALSE(f.shown) << f.caption;
        ++guarded;
      } else if (f.shown) {
        ++open;
        EXPECT_NE(page.find("src=\"" + student.figure_files[f.experiment] + "\""), std::string::npos) << f.caption;
      }
    }
    EXPECT_EQ(count(page, "<img"), student.figure_files.size());
  }
  EXPECT_GT(guarded, 10) << "the course's predictions guard its views";
  EXPECT_GT(open, 0) << "some views no prediction asks about are in the student's copy";
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
  const std::string html = handout_html(L, copy(true));
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
  const std::string index = handout_index_html(all, copy(false));
  for (const auto* l : all) EXPECT_NE(index.find("href=\"" + l->name + ".html\""), std::string::npos) << l->name;
  EXPECT_NE(index.find(std::to_string(minutes) + " min in all"), std::string::npos);
  EXPECT_EQ(handout_file_name(*all.front(), copy(true)), all.front()->name + "-answers.html");
}

}  // namespace
}  // namespace tttlab::course
