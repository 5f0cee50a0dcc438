// The lessons' Markdown model (md4c), the shipped lessons themselves, and classroom-mode settings.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "course/classroom.hpp"
#include "lab/engine/resources.hpp"
#include "course/markdown.hpp"
#include "lab/state/json_fields.hpp"
#include "lab/state/state_file.hpp"

namespace tttlab::course {
namespace {

std::string text_of(const MdBlock& b) {
  std::string s;
  for (const auto& r : b.runs) s += r.text;
  return s;
}

TEST(Markdown, BlocksSpansAndLinks) {
  const MdDocument d = parse_markdown(
      "# Title here\n\nA **bold** and *soft* `code` [view](a.tttlab) line\nwrapped.\n\n"
      "- one\n- two\n  1. inner\n\n> quoted\n\n    code line 1\n    code line 2\n\n---\n\n## Sub &amp; more\n");
  EXPECT_EQ(d.title, "Title here");
  ASSERT_GE(d.blocks.size(), 8u);
  EXPECT_EQ(d.blocks[0].kind, MdBlockKind::Heading);
  EXPECT_EQ(d.blocks[0].level, 1);
  const MdBlock& p = d.blocks[1];
  EXPECT_EQ(p.kind, MdBlockKind::Paragraph);
  EXPECT_EQ(text_of(p), "A bold and soft code view line wrapped.");
  bool bold = false, em = false, code = false, link = false;
  for (const auto& r : p.runs) {
    bold |= r.strong && r.text == "bold";
    em |= r.em && r.text == "soft";
    code |= r.code && r.text == "code";
    link |= r.link == "a.tttlab" && r.text == "view";
  }
  EXPECT_TRUE(bold && em && code && link);
  EXPECT_EQ(d.links, std::vector<std::string>{"a.tttlab"});
  EXPECT_EQ(d.blocks[2].kind, MdBlockKind::ListItem);
  EXPECT_EQ(text_of(d.blocks[2]), "one");
  EXPECT_EQ(d.blocks[2].number, 0);
  EXPECT_EQ(d.blocks[4].kind, MdBlockKind::ListItem);
  EXPECT_EQ(d.blocks[4].level, 2);
  EXPECT_EQ(d.blocks[4].number, 1);
  EXPECT_EQ(d.blocks[5].kind, MdBlockKind::Quote);
  EXPECT_EQ(d.blocks[6].kind, MdBlockKind::Code);
  EXPECT_EQ(text_of(d.blocks[6]), "code line 1\ncode line 2");
  EXPECT_EQ(d.blocks[7].kind, MdBlockKind::Rule);
  EXPECT_EQ(text_of(d.blocks.back()), "Sub & more");
}

// The shipped lessons' well-formedness (scenes included) is CourseLesson.ShippedLessonsAreWellFormed.

TEST(Classroom, HidesOnlyWhileEnabledAndRoundTrips) {
  ClassroomState s;
  s.hidden = {"training.settings", "inner_stepper.source"};
  classroom::set(s);
  EXPECT_TRUE(classroom::visible("training.settings")) << "nothing is hidden while the mode is off";
  s.enabled = true;
  classroom::set(s);
  EXPECT_FALSE(classroom::visible("training.settings"));
  EXPECT_TRUE(classroom::visible("training.view"));
  const nlohmann::json j = nlohmann::json::parse(classroom::to_json(s).dump());
  EXPECT_EQ(classroom::from_json(FieldReader(j, "classroom")), s);
  const nlohmann::json bad = nlohmann::json::parse(R"({"hidden": ["ok", 3]})");
  try {
    classroom::from_json(FieldReader(bad, "classroom"));
    ADD_FAILURE();
  } catch (const lab::StateError& e) {
    EXPECT_NE(std::string(e.what()).find("classroom.hidden[1]"), std::string::npos) << e.what();
  }
  classroom::set(ClassroomState{});
}

}  // namespace
}  // namespace tttlab::course
