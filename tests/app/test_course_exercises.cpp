// Graded exercises (app/course/exercise.hpp): the ```exercise block parsed strictly, numeric and
// expression answers marked (right, wrong, inside and outside the tolerance, unreadable input), the
// attempts recorded in the progress file, and every shipped lesson's exercises.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/io/temp_dir.hpp"
#include "course/exercise.hpp"
#include "course/lesson.hpp"
#include "course/progress.hpp"

namespace tttlab::course {
namespace {

namespace fs = std::filesystem;
using tttlab::testing::TempDir;

const std::string kHead = "---\ntitle: T\ngoal: G\nduration: 5\nscene: s.tttlab\n---\n";
const std::string kRest =
    "```predict\nask: a\nmeasure: m\nchoice: x | > 0\nchoice: y | <= 0\n```\n"
    "```check\nclaim: c\nmeasure: m\nexpect: > 0\n```\n";

Lesson with_exercise(const std::string& block) {
  return parse_lesson(kHead + "Text.\n\n```exercise\n" + block + "```\n" + kRest, "lessons/x.md");
}

Exercise exercise(const std::string& block) {
  const Lesson L = with_exercise(block);
  EXPECT_EQ(L.exercises.size(), 1u);
  return L.exercises.at(0);
}

Mark::Kind mark(const Exercise& e, const std::string& typed) { return mark_answer(e, typed).kind; }

TEST(CourseExercise, ParsesNumberAndExpressionBlocks) {
  const Lesson L = parse_lesson(kHead +
                                    "```exercise\nid: size\nask: How many numbers at d = 32?\nanswer: 8352\n"
                                    "tolerance: 0.5\nexplain: 8·32² + 5·32.\n```\n"
                                    "Between.\n\n"
                                    "```exercise\nask: And in d?\nanswer: 8*d^2 + 5*d\nvars: d = 32; d = 8\n"
                                    "tolerance: 2 %\nunit: numbers\nexplain: Count W1, W2,\n  b1, b2 and LN.\n```\n" +
                                    kRest,
                                "lessons/x.md");
  ASSERT_EQ(L.exercises.size(), 2u);
  const Exercise& a = L.exercises[0];
  EXPECT_EQ(a.id, "size");
  EXPECT_FALSE(a.is_expression());
  EXPECT_FALSE(a.relative);
  EXPECT_DOUBLE_EQ(a.tolerance, 0.5);
  EXPECT_DOUBLE_EQ(key_value(a), 8352.0);
  EXPECT_EQ(a.line, 7);
  const Exercise& b = L.exercises[1];
  EXPECT_EQ(b.id, "exercise-2");
  EXPECT_TRUE(b.is_expression());
  EXPECT_TRUE(b.relative);
  EXPECT_DOUBLE_EQ(b.tolerance, 0.02);
  EXPECT_EQ(b.unit, "numbers");
  EXPECT_EQ(b.explain, "Count W1, W2, b1, b2 and LN.");
  ASSERT_EQ(b.var_names, std::vector<std::string>{"d"});
  ASSERT_EQ(b.points.size(), 2u);  // two given: none derived
  EXPECT_DOUBLE_EQ(key_value(b, 1), 8 * 64 + 40);
  // The parts: text, exercise, text, exercise, then the prediction and the check.
  ASSERT_GE(L.parts.size(), 4u);
  EXPECT_EQ(L.parts[0].kind, LessonPart::Kind::Exercise);
  EXPECT_EQ(L.parts[0].index, 0);
  EXPECT_EQ(L.parts[2].kind, LessonPart::Kind::Exercise);
  EXPECT_EQ(L.parts[2].index, 1);
}

TEST(CourseExercise, OnePointGetsTwoMoreSoALuckyFormulaFails) {
  const Exercise e = exercise("ask: a\nanswer: 8*d^2 + 5*d\nvars: d = 32\nexplain: e\n");
  EXPECT_EQ(e.points.size(), 3u);
  EXPECT_EQ(mark(e, "8*d^2 + 5*d"), Mark::Kind::Right);
  EXPECT_EQ(mark(e, "8352"), Mark::Kind::Wrong);       // the number at d = 32, but not a formula
  EXPECT_EQ(mark(e, "261*d"), Mark::Kind::Wrong);      // equal at d = 32 only
  EXPECT_EQ(mark(e, "d*(8*d + 5)"), Mark::Kind::Right);
}

TEST(CourseExercise, MalformedBlocksNameFileAndLine) {
  struct Case {
    std::string block, expect_in_message;
  };
  // The block starts on line 9 of the file; its first field is line 10.
  const std::vector<Case> cases = {
      {"ask: a\nexplain: e\n", "x.md:9: the exercise block has no \"answer:\""},
      {"answer: 1\nexplain: e\n", "x.md:9: the exercise block has no \"ask:\""},
      {"ask: a\nanswer: 1\n", "no \"explain:\""},
      {"ask: a\nanswer: 1\nexplain: e\nhint: h\n", "x.md:13: unknown key \"hint\""},
      {"ask: a\nanswer: 1\ntolerance: wide\nexplain: e\n", "x.md:12: tolerance: takes a positive number"},
      {"ask: a\nanswer: 1\ntolerance: -1\nexplain: e\n", "x.md:12: tolerance:"},
      {"ask: a\nanswer: 1\ntolerance: 150 %\nexplain: e\n", "x.md:12: tolerance:"},
      {"ask: a\nanswer: 4*d^2 +\nvars: d = 32\nexplain: e\n", "x.md:11: answer: \"4*d^2 +\" cannot be evaluated"},
      {"ask: a\nanswer: ((d)\nvars: d = 32\nexplain: e\n", "x.md:11: answer:"},
      {"ask: a\nanswer: 1/(d-32)\nvars: d = 32\nexplain: e\n", "no finite number"},
      {"ask: a\nanswer: ln(d)\nvars: d = -1\nexplain: e\n", "x.md:11: answer:"},
      {"ask: a\nanswer: 4*x\nvars: d = 32\nexplain: e\n", "\"x\" is not"},
      {"ask: a\nanswer: twelve\nexplain: e\n", "x.md:11: answer: \"twelve\" is not a finite number"},
      {"ask: a\nanswer: 1/0\nexplain: e\n", "not a finite number"},
      {"ask: a\nanswer: d\nvars: d 32\nexplain: e\n", "x.md:12: vars: \"d 32\" is not \"name = value\""},
      {"ask: a\nanswer: d\nvars: d = 1; T = 2\nexplain: e\n", "x.md:12: vars: every point gives the same variables"},
      {"ask: a\nanswer: d\nvars: d = x\nexplain: e\n", "vars: the value of d is not a number"},
      {"ask: a\nask: b\nanswer: 1\nexplain: e\n", "\"ask:\" given twice"},
      {"ask: a\nanswer: d\nvars: " + [] {
         std::string v = "d = 1";
         for (int k = 2; k <= 17; ++k) v += "; d = " + std::to_string(k);
         return v;
       }() + "\nexplain: e\n",
       "x.md:12: vars: at most 16 points"},
  };
  for (const auto& c : cases) {
    try {
      with_exercise(c.block);
      ADD_FAILURE() << "accepted:\n" << c.block;
    } catch (const LessonError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect_in_message), std::string::npos)
          << "message: " << e.what() << "\nexpected to contain: " << c.expect_in_message;
      EXPECT_EQ(std::string(e.what()).rfind("lessons/x.md:", 0), 0u) << e.what();
    }
  }
  // Two exercises with one id.
  EXPECT_THROW(parse_lesson(kHead + "```exercise\nid: a\nask: q\nanswer: 1\nexplain: e\n```\n"
                                    "```exercise\nid: a\nask: q\nanswer: 2\nexplain: e\n```\n" + kRest,
                            "lessons/x.md"),
               LessonError);
}

TEST(CourseExercise, NumbersAreReadAsStudentsWriteThem) {
  std::string why;
  EXPECT_DOUBLE_EQ(*read_student_number("1056", "", &why), 1056);
  EXPECT_DOUBLE_EQ(*read_student_number("1,056", "", &why), 1056);
  EXPECT_DOUBLE_EQ(*read_student_number("1,234,567.5", "", &why), 1234567.5);
  EXPECT_DOUBLE_EQ(*read_student_number("1 056", "", &why), 1056);
  EXPECT_DOUBLE_EQ(*read_student_number("1.05e3", "", &why), 1050);
  EXPECT_DOUBLE_EQ(*read_student_number("0,5", "", &why), 0.5);
  EXPECT_DOUBLE_EQ(*read_student_number("\xE2\x88\x92" "2.5", "", &why), -2.5);  // the Unicode minus
  EXPECT_DOUBLE_EQ(*read_student_number("8.3 %", "%", &why), 8.3);
  EXPECT_DOUBLE_EQ(*read_student_number("8.3%", "%", &why), 8.3);
  EXPECT_DOUBLE_EQ(*read_student_number("1.95 bits/byte", "bits/byte", &why), 1.95);
  EXPECT_DOUBLE_EQ(*read_student_number("2^10", "", &why), 1024);  // a calculation
  EXPECT_DOUBLE_EQ(*read_student_number("8*32\xC2\xB2 + 5*32", "", &why), 8352);  // ² is read as ^2
  for (const char* bad : {"abc", "", "   ", "nan", "inf", "0x10", "1,2,3", "(2+3", "1.2.3"}) {
    why.clear();
    EXPECT_FALSE(read_student_number(bad, "", &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  why.clear();
  EXPECT_FALSE(read_student_number("8.3 %", "", &why));
  EXPECT_NE(why.find("not a percentage"), std::string::npos) << why;
  why.clear();
  EXPECT_FALSE(read_student_number("(2+3", "", &why));
  EXPECT_NE(why.find("parenthesis"), std::string::npos) << why;
}

TEST(CourseExercise, NumericAnswersWithinTheTolerance) {
  const Exercise rel = exercise("ask: a\nanswer: 8352\nexplain: e\n");  // default: 1 %
  EXPECT_TRUE(rel.relative);
  EXPECT_DOUBLE_EQ(rel.tolerance, 0.01);
  EXPECT_EQ(mark(rel, "8352"), Mark::Kind::Right);
  EXPECT_EQ(mark(rel, "8,352"), Mark::Kind::Right);
  EXPECT_EQ(mark(rel, "8400"), Mark::Kind::Right);   // 0.57 % off
  EXPECT_EQ(mark(rel, "8300"), Mark::Kind::Right);   // 0.62 % off
  EXPECT_EQ(mark(rel, "8450"), Mark::Kind::Wrong);   // 1.2 % off
  EXPECT_EQ(mark(rel, "8256"), Mark::Kind::Wrong);   // 1.15 % off
  EXPECT_EQ(mark(rel, "-8352"), Mark::Kind::Wrong);
  EXPECT_EQ(mark(rel, "abc"), Mark::Kind::Unreadable);

  const Exercise abs = exercise("ask: a\nanswer: 0.5\ntolerance: 0.01\nexplain: e\n");
  EXPECT_EQ(mark(abs, "0.5"), Mark::Kind::Right);
  EXPECT_EQ(mark(abs, "0.509"), Mark::Kind::Right);
  EXPECT_EQ(mark(abs, "0.491"), Mark::Kind::Right);
  EXPECT_EQ(mark(abs, "0.52"), Mark::Kind::Wrong);
  EXPECT_EQ(mark(abs, "0.48"), Mark::Kind::Wrong);

  const Exercise pct = exercise("ask: a\nanswer: 8.3\nunit: %\ntolerance: 0.1\nexplain: e\n");
  EXPECT_EQ(mark(pct, "8.3 %"), Mark::Kind::Right);
  EXPECT_EQ(mark(pct, "8.35"), Mark::Kind::Right);
  EXPECT_EQ(mark(pct, "0.083"), Mark::Kind::Wrong);  // a fraction, not the percentage asked for
  EXPECT_EQ(key_text(pct), "8.3 %");
}

TEST(CourseExercise, ExpressionAnswersAtEveryPoint) {
  const Exercise e =
      exercise("ask: a\nanswer: 2*T*d + d^2\nvars: d = 32, T = 2048; d = 8, T = 64\ntolerance: 0.1 %\nexplain: e\n");
  EXPECT_EQ(e.points.size(), 2u);
  EXPECT_EQ(mark(e, "2*T*d + d^2"), Mark::Kind::Right);
  EXPECT_EQ(mark(e, "d*(2*T + d)"), Mark::Kind::Right);
  EXPECT_EQ(mark(e, "d \xC3\x97 (2 \xC3\x97 T + d)"), Mark::Kind::Right);  // × for a product
  EXPECT_EQ(mark(e, "2*T*d"), Mark::Kind::Wrong);        // off by d² (0.8 % at the first point)
  EXPECT_EQ(mark(e, "2*T*d + d^2 + 1"), Mark::Kind::Right);  // within 0.1 % at both points
  EXPECT_EQ(mark(e, "2*T*d + d^2 + 40"), Mark::Kind::Wrong); // 4 % off at the second point
  EXPECT_EQ(mark(e, "sqrt(d^4) + 2*exp(ln(T))*d"), Mark::Kind::Right);
  EXPECT_EQ(mark(e, "2*T*d + d^2 + log(1)"), Mark::Kind::Right);

  struct Bad {
    const char* typed;
    const char* says;
  };
  for (const Bad& b : {Bad{"abc", "\"abc\" is not"}, Bad{"(2*T*d + d^2", "parenthesis"},
                       Bad{"2*T*d + d^2)", "parenthesis"}, Bad{"2d*T", "*"}, Bad{"2*T*d +", "stops"},
                       Bad{"", "Type an answer"}, Bad{"d = 3", "without \"=\""}, Bad{"1/(d-d)", "finite"}}) {
    const Mark m = mark_answer(e, b.typed);
    EXPECT_EQ(m.kind, Mark::Kind::Unreadable) << b.typed;
    EXPECT_NE(m.message.find(b.says), std::string::npos) << b.typed << " → " << m.message;
  }
}

TEST(CourseExercise, AuditFindsUnsoundKeys) {
  EXPECT_EQ(audit_exercise(exercise("ask: a\nanswer: 8352\nexplain: e\n")), "");
  EXPECT_EQ(audit_exercise(exercise("ask: a\nanswer: 8*d^2 + 5*d\nvars: d = 32\nexplain: e\n")), "");
  EXPECT_NE(audit_exercise(exercise("ask: a\nanswer: 0\nexplain: e\n")).find("relative tolerance"), std::string::npos);
  EXPECT_EQ(audit_exercise(exercise("ask: a\nanswer: 0\ntolerance: 0.01\nexplain: e\n")), "");
  EXPECT_NE(audit_exercise(exercise("ask: a\nanswer: 0.5\ntolerance: 1\nexplain: e\n")).find("so wide"),
            std::string::npos);
  EXPECT_EQ(audit_exercise(exercise("ask: a\nanswer: 0.9\nunit: %\ntolerance: 0.01\nexplain: e\n")), "");
  EXPECT_EQ(audit_exercise(exercise("ask: a\nanswer: 1.95\nunit: bits/byte\nexplain: e\n")), "");
  EXPECT_NE(audit_exercise(exercise("ask: a\nanswer: 0.083\nunit: %\nexplain: e\n")).find("fraction"),
            std::string::npos);
  EXPECT_NE(audit_exercise(exercise("ask: a\nanswer: 2*d\nvars: d = 3\nunit: m\nexplain: e\n")).find("unit belongs"),
            std::string::npos);
  EXPECT_NE(audit_exercise(exercise("ask: a\nanswer: d - d + 3\nvars: d = 4\nexplain: e\n")).find("same value"),
            std::string::npos);
}

TEST(CourseExercise, AttemptsAreRecordedAndRestored) {
  const TempDir dir;
  const fs::path file = dir.path() / "progress.json";
  const Lesson L = parse_lesson(kHead + "```exercise\nid: n\nask: q\nanswer: 8352\nexplain: e\n```\n"
                                        "```exercise\nid: f\nask: q\nanswer: 8*d^2\nvars: d = 32\nexplain: e\n```\n" +
                                    kRest,
                                "lessons/01-x.md");
  {
    ProgressStore store(file);
    ExerciseBook book(L.exercises, L.name, &store);
    ASSERT_EQ(book.size(), 2u);
    // Unreadable input is not an attempt.
    book.input(0) = "abc";
    EXPECT_EQ(book.check(0).kind, Mark::Kind::Unreadable);
    EXPECT_EQ(book.state(0).attempts, 0);
    EXPECT_FALSE(book.state(0).message.empty());
    EXPECT_EQ(store.lesson(L.name), nullptr);  // nothing recorded
    // Wrong, then right.
    book.input(0) = "8000";
    EXPECT_EQ(book.check(0).kind, Mark::Kind::Wrong);
    EXPECT_TRUE(book.state(0).message.empty());
    EXPECT_FALSE(book.explained(0, true));
    book.input(0) = "8,352";
    EXPECT_EQ(book.check(0).kind, Mark::Kind::Right);
    EXPECT_FALSE(book.can_check(0));
    EXPECT_TRUE(book.explained(0, false));  // right: explained even where answers are hidden
    // Right at once.
    book.input(1) = "8*d^2";
    EXPECT_EQ(book.check(1).kind, Mark::Kind::Right);
  }
  {
    ProgressStore store(file);
    EXPECT_EQ(store.error(), "");
    const LessonProgress* lp = store.lesson("01-x");
    ASSERT_NE(lp, nullptr);
    const ExerciseRecord& n = lp->exercises.at("n");
    EXPECT_EQ(n.answer, "8,352");
    EXPECT_TRUE(n.right);
    EXPECT_EQ(n.attempts, 2);
    EXPECT_FALSE(n.first_right);
    EXPECT_EQ(n.at.size(), 20u);  // 2026-11-28T23:41:16Z
    EXPECT_EQ(n.at.back(), 'Z');
    const ExerciseRecord& f = lp->exercises.at("f");
    EXPECT_TRUE(f.first_right);
    EXPECT_EQ(f.attempts, 1);
    ExerciseBook book(L.exercises, L.name, &store);
    EXPECT_EQ(book.state(0).attempts, 2);
    EXPECT_TRUE(book.state(0).right);
    EXPECT_EQ(book.state(0).input, "8,352");
    EXPECT_TRUE(book.state(1).first_right);
  }
}

TEST(CourseExercise, TheExplanationOpensAfterThreeAttemptsOrOnRequest) {
  const Exercise e = exercise("ask: q\nanswer: 12\nexplain: e\n");
  ExerciseBook book({e, e}, "x", nullptr);
  for (int k = 0; k < ExerciseBook::kAttemptsBeforeExplain; ++k) {
    EXPECT_FALSE(book.explained(0, true)) << k;
    book.input(0) = std::to_string(20 + k);
    EXPECT_EQ(book.check(0).kind, Mark::Kind::Wrong);
  }
  EXPECT_TRUE(book.explained(0, true));
  EXPECT_FALSE(book.explained(0, false));  // the teacher hides the answers
  EXPECT_FALSE(book.state(0).first_right);
  EXPECT_TRUE(book.can_check(0));          // still allowed to find it
  book.show_answer(1);
  EXPECT_TRUE(book.explained(1, true));
  EXPECT_FALSE(book.can_check(1));         // seen the answer: no more checking
  book.input(1) = "12";
  book.check(1);
  EXPECT_EQ(book.state(1).attempts, 0);
}

TEST(CourseExercise, OldProgressFilesWithoutExercisesStillRead) {
  const TempDir dir;
  const fs::path file = dir.path() / "old.json";
  {
    std::FILE* f = std::fopen(file.string().c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const std::string old = R"({"format": "tttlab-course-progress", "version": 1, "lessons": {"01-a": {"finished": true,
        "predictions": {"p": {"choice": 1, "value": 0.0, "revealed": true, "right": true, "measured": 2.0}}}}})";
    std::fwrite(old.data(), 1, old.size(), f);
    std::fclose(f);
  }
  ProgressStore s(file);
  EXPECT_EQ(s.error(), "");
  ASSERT_NE(s.lesson("01-a"), nullptr);
  EXPECT_TRUE(s.lesson("01-a")->exercises.empty());
  // A damaged exercise record is reported by name.
  {
    std::FILE* f = std::fopen(file.string().c_str(), "wb");
    const std::string bad = R"({"format": "tttlab-course-progress", "lessons": {"01-a": {"exercises": {"e": {"attempts": "two"}}}}})";
    std::fwrite(bad.data(), 1, bad.size(), f);
    std::fclose(f);
  }
  ProgressStore t(file);
  EXPECT_NE(t.error().find("lessons.01-a.exercises.e.attempts"), std::string::npos) << t.error();
}

// Every shipped lesson gives at least two graded exercises, and every key is sound.
TEST(CourseExercise, ShippedLessonsHaveSoundExercises) {
  const Course c = load_course(fs::path(TTTLAB_SOURCE_DIR) / "lessons");
  for (const auto& [f, e] : c.errors) ADD_FAILURE() << e;
  ASSERT_GE(c.lessons.size(), 16u);
  int expressions = 0;
  for (const auto& L : c.lessons) {
    EXPECT_GE(L.exercises.size(), 2u) << L.name;
    for (const auto& x : L.exercises) {
      EXPECT_EQ(audit_exercise(x), "") << L.name << ": " << x.id;
      expressions += x.is_expression() ? 1 : 0;
    }
  }
  EXPECT_GE(expressions, 5);
}

}  // namespace
}  // namespace tttlab::course
