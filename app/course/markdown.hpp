// app/course/markdown.hpp — the lessons' Markdown (CommonMark via md4c) as a small document model
// that the Lessons panel lays out with ImGui. No drawing here: parsing and the model are unit-tested.
//
// Supported: headings, paragraphs, bullet and numbered lists (nested), block quotes, fenced and
// indented code, rules, and inline strong / emphasis / code spans / links. A lesson (app/course/lesson.hpp)
// is rendered from these, one Markdown part at a time.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tttlab::course {

struct MdRun {
  std::string text;
  bool strong = false, em = false, code = false;
  std::string link;  // target of the enclosing link, empty when none
};

enum class MdBlockKind { Heading, Paragraph, ListItem, Code, Quote, Rule };

struct MdBlock {
  MdBlockKind kind = MdBlockKind::Paragraph;
  int level = 0;   // heading level 1–6; list nesting depth (1 = top) for list items
  int number = 0;  // ordered list items: the item number; 0 for bullets
  std::vector<MdRun> runs;
};

struct MdDocument {
  std::string title;                // text of the first level-1 heading
  std::vector<MdBlock> blocks;
  std::vector<std::string> links;   // every link target, in order
};

// Throws std::runtime_error if md4c refuses the text.
MdDocument parse_markdown(std::string_view text);

}  // namespace tttlab::course
