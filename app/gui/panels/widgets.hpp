// app/gui/panels/widgets.hpp — small widgets shared by the panels (section headers, help markers,
// metric cards, the toy-head settings editor, the token strip). UI thread only.
#pragma once

#include <imgui.h>

#include <functional>
#include <string>
#include <vector>

#include "gui/engine/head_config.hpp"

namespace tttlab::gui::widgets {

// "INPUT" style small caps header with a rule.
void section_label(const char* text);
// A "(?)" that shows `text` on hover.
void help_marker(const char* text);
// A dim paragraph (wrapped).
void note(const char* text);
// A labelled number with a caption, in a framed box `width` wide.
void metric(const char* label, const std::string& value, const std::string& caption, ImU32 value_color,
            float width);

// Edits a toy head's settings. Returns true when a change is complete (slider released, text field
// left, box ticked) so callers send one command per edit, not one per pixel of drag.
struct HeadEditorOptions {
  HeadLimits limits;
  bool lock_reduction = false;  // the linear-attention reduction fixes most settings: show them disabled
};
bool head_editor(HeadConfig& c, const HeadEditorOptions& opt);

// The input as a strip of token cells, wrapped to the available width, grouped by mini-batch.
// `cursor` is highlighted, tokens ≥ `computed` are dimmed. Returns the clicked token or −1.
long token_strip(const std::vector<unsigned char>& bytes, int mini_batch, long cursor, long computed,
                 float max_height);

// Transport button with a glyph; returns true when clicked.
bool icon_button(const char* glyph, const char* tooltip, bool active = false);

}  // namespace tttlab::gui::widgets
