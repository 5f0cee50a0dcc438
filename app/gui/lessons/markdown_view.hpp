// app/gui/lessons/markdown_view.hpp — draws a parsed Markdown document (markdown.hpp) with ImGui: word
// wrapping, bold / emphasis / code spans, headings, lists, quotes, code blocks, rules and links. The
// one place the lessons' text is laid out: the course page and the lesson pane both use it.
// UI thread only.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "course/markdown.hpp"
#include "gui/lab.hpp"

struct ImFont;

namespace tttlab::gui {

// True when `font` has a glyph for every non-ASCII character of `text` (otherwise a sans font is used).
bool has_all_glyphs(ImFont* font, const std::string& text);

// Lays out one paragraph's runs from the cursor, wrapped to `width`, starting at screen x `x0`;
// advances the cursor past them. Returns the link target clicked this frame ("" if none).
std::string draw_runs(const std::vector<MdRun>& runs, float x0, float width, ImU32 color, ImFont* font);

// Draws every block of `doc` from the cursor, `width` wide. Returns the link target clicked this
// frame ("" if none); what a click does is the caller's choice.
std::string draw_markdown(const MdDocument& doc, float width);

// A short text with inline Markdown (`code`, *emphasis*, **strong**) wrapped to `width`: parsed once
// per distinct text and cached. Falls back to the plain text if it does not parse.
void draw_inline_markdown(const std::string& text, float width, ImU32 color, ImFont* font = nullptr);

}  // namespace tttlab::gui
