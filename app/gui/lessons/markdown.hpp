// app/gui/lessons/markdown.hpp — the lessons' Markdown (CommonMark via md4c) as a small document model
// that the Lessons panel lays out with ImGui. No drawing here: parsing and the model are unit-tested.
//
// Supported: headings, paragraphs, bullet and numbered lists (nested), block quotes, fenced and
// indented code, rules, and inline strong / emphasis / code spans / links. Links to a .tttlab file
// are "open this view" actions; other links are shown with their target.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tttlab::gui {

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

// A lesson: a Markdown file of lessons/ and the view it opens.
struct Lesson {
  std::filesystem::path file;
  std::string title;
  MdDocument doc;
  std::filesystem::path state;  // the first .tttlab link, resolved next to the lesson (empty: none)
};

// Every *.md file of `dir` except README.md, sorted by file name. Unreadable files become a lesson
// whose text says why (the panel never fails on them).
std::vector<Lesson> load_lessons(const std::filesystem::path& dir);

}  // namespace tttlab::gui
