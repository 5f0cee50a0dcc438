// app/gui/panels/widgets.hpp — small widgets shared by the panels (section headers, help markers,
// metric cards, the toy-head settings editor, the token strip). UI thread only.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gui/file_browser.hpp"
#include "lab/engine/command.hpp"
#include "lab/engine/head_config.hpp"
#include "lab/models/model_library.hpp"
#include "lab/engine/snapshot.hpp"
#include "gui/lab.hpp"

namespace tttlab::gui::widgets {

// "INPUT" style small caps header with a rule.
void section_label(const char* text);
// A "(?)" that shows `text` on hover.
void help_marker(const char* text);
// A dim paragraph (wrapped).
void note(const char* text);
// A view's warning (e.g. non_finite_model_message) in the warning colour, wrapped; nothing when empty.
void warning(const std::string& text);
// For a view whose model is a training run's checkpoint (step ≥ 0; nothing otherwise), one line:
// "Following the training run: weights of step 120 · reloaded 6 times as checkpoints arrived".
// `replay`: the checkpoints are a shipped run's, replayed (the inner-loss curves' "Use the shipped run").
void follow_line(long step, int reloads, bool reloading = false, bool replay = false);
// Where a view's numbers were computed ("Computed on: GPU: NVIDIA H100 …"), and in the warning colour
// why the CPU although a GPU was chosen (`note`, if any). Wraps; nothing when both are empty.
void device_line(const std::string& device, const std::string& note);
// For a panel that always computes on the CPU: "Computed on: CPU (…)", and, when the user chose a GPU
// that is there, why this panel stays on the CPU (`why`, one sentence).
void cpu_only_line(const Snapshot& snap, const char* why);
// A labelled number with a caption, in a framed box `width` wide. A label too long for the box ends in
// "…" (the whole label shows on hover); the caption is clipped to the box, so pass one that fits (see
// fit()) whenever it ends in a number.
void metric(const char* label, const std::string& value, const std::string& caption, ImU32 value_color,
            float width);

// Edits which head runs and on what (head_config.hpp): the source (a trained model's block and head, or
// a toy head), the text, and the toy head's own settings. Returns true when a change is complete
// (slider released, text field left, box ticked) so callers send one command per edit, not one per
// pixel of drag.
struct HeadEditorOptions {
  HeadLimits limits;
  bool lock_reduction = false;  // the linear-attention reduction fixes most settings: show them disabled
  const LibraryView* library = nullptr;  // the models to choose from
  CommandSink* sink = nullptr;           // for "Open a checkpoint…"
  const char* panel = "";                // classroom ids: "<panel>.source", "<panel>.text", "<panel>.inner"
  bool show_block_head = true;           // block/head pickers (the primal-vs-dual panel uses them for its maps)
};
bool head_editor(HeadConfig& c, const HeadEditorOptions& opt);
// For a member other than TTT: what its q, k, v, β and α are on the toy head, in one paragraph.
std::string member_inputs_note(const HeadConfig& c);
// The name of the state matrix the views draw as layer `layer` (0 or 1): TTT "W" (MLP: "W₁", "W₂"), a
// matrix member "S", Titans "M" and "S" (its memory and momentum), LaCT "W₀" and "W₁".
std::string state_matrix_name(const HeadConfig& c, bool mlp, int layer);

// A label column of this width, then the control: the layout of every settings column.
float label_width();
// Label on the left, control filling the rest of the row (call right before the control).
void row(const char* label, const char* help = nullptr);

// A "Smoothing" row: the EMA weight of a view's plots, from "off" (0) to `max`.
void smoothing_row(double& smoothing, float max);
// A seed typed in and confirmed with Enter; returns true when `seed` changed that way.
bool seed_input(std::uint64_t& seed);

// Call right before a combo placed by row(): when `preview` (the choice it shows) is wider than the
// combo beside its label, the combo moves to the next line at the column's full width, so the name is
// not cut.
void combo_room(const std::string& preview);
// A combo of the library's models. `ttt_only` disables models without an inner loop. The last entry
// opens a folder prompt and posts LibraryOpen (the opened model joins the list). Returns true when
// the choice changed.
bool model_combo(const char* id, std::string& model_id, const LibraryView* library, bool ttt_only, CommandSink* sink);
// One dim line: the chosen model's summary or why it cannot be used.
void model_summary_line(const std::string& model_id, const LibraryView* library);

// "Your text": a button that opens a student's own text file (data_source.hpp, read_view_text) for a view
// that reads one text, its name while it is the text, and why a file was refused (`error`, kept by the
// panel). On a file read, `text_file` names it and head.text is its first bytes: returns true. Drawn where
// the classroom shows "<panel>.text".
bool own_text_file(const char* panel, std::string& text_file, HeadConfig& head, const HeadLimits& limits,
                   std::string& error);

// A data source picker (data_source.hpp): Brown, the sample text, or a file. Returns true on change.
bool data_combo(const char* id, std::string& source);

// A modal file browser (file_browser.hpp) for a path, starting at `out`; returns true (and fills `out`)
// when confirmed. A folder (a checkpoint, a run directory) unless `mode` says otherwise; `extensions`
// filters the files listed. Open it with ImGui::OpenPopup(title) from the same ID scope.
bool path_prompt(const char* title, const char* explanation, std::string& out,
                 BrowserMode mode = BrowserMode::ChooseFolder, const std::vector<std::string>& extensions = {});

// Text input bound to a std::string; returns true when the edit is complete.
bool input_string(const char* id, std::string& s, bool multiline = false, float height = 0.0f);

// A list of whole numbers as a text field shows it ("4, 8, 16"), and back: `text` (commas or spaces)
// into `out` when it is 1 to `max_items` increasing numbers from 1 to `max_value`; false (out
// untouched) otherwise.
std::string join_ints(const std::vector<int>& v);
bool parse_increasing_ints(const std::string& text, std::size_t max_items, int max_value, std::vector<int>& out);

// Token t of `bytes` in quotes for labels ("'a'", "'⏎'"); empty when t is out of range.
std::string quoted_token(const std::vector<unsigned char>& bytes, long t);

// The input as a strip of token cells, wrapped to the available width, grouped by mini-batch.
// `cursor` is highlighted, tokens ≥ `computed` are dimmed. Returns the clicked token or −1.
long token_strip(const std::vector<unsigned char>& bytes, int mini_batch, long cursor, long computed,
                 float max_height);

// The state of a panel's engine job on one line: a progress bar with Cancel while it runs, the error
// when it failed, "cancelled", or nothing when done. `running_note` follows the bar.
void job_status(JobOutcome outcome, double progress, const std::string& error, const Snapshot& snap,
                CommandSink& sink, const char* running_note = nullptr);

// `text` wrapped to the available width in the error colour; nothing when it is empty.
void error_text(const std::string& text);

// The colour of series i (Okabe–Ito, colour-blind safe), for runs and models.
ImU32 series_color(int i);

// The panel's title with a one-line dim explanation beside it, or wrapped under it when the view is too
// narrow for both on one line.
void panel_title(const char* title, const char* explanation);

// Narrow layouts. Beside a docked lesson a view gets about 450–770 px of a 1280 px window; below this
// width the panels switch to their narrow layout (cards two per row, plots stacked, shorter titles).
// The width is for the regular font at UI scale 1 (15 px) and grows with the font: at a larger UI
// scale or in presenter mode the same text needs more pixels.
constexpr float kNarrowView = 700.0f;
constexpr float kRegularFontPx = 15.0f;
inline bool narrow_view(float view_width) { return view_width < kNarrowView * ImGui::GetFontSize() / kRegularFontPx; }
// `wide` when it fits in `width` pixels of `font` (the current font by default), else `narrow`: for
// titles and captions that would otherwise be cut (a cut number reads as a different number).
const std::string& fit(const std::string& wide, const std::string& narrow, float width, ImFont* font = nullptr);
// SameLine(0, spacing) when `next_text` (in the current font) still fits on this line, else a new line:
// for a dim detail that follows a line's main text.
void same_line_if_fits(const char* next_text, float spacing);
// The width of each of `per_row` boxes side by side with `gap` between them, filling the available width.
float box_width(int per_row, float gap);

// The layout most panels share: a column of controls 20 em wide on the left, the view filling the
// rest. Each part is drawn in its own child window, so either can scroll on its own.
// fold_when_narrow: where the panel is narrow the controls start folded (a panel whose view is empty
// until a control is used keeps them open).
void controls_and_view(const std::function<void()>& controls, const std::function<void()>& view,
                       bool fold_when_narrow = true);

// Two radio buttons on one line, `label_a` then `label_b`, setting `value` to `a` or `b` (a value
// other than `b` shows as `a`). Returns true when either was clicked.
template <class T>
bool choice_pair(const char* label_a, const T& a, const char* label_b, const T& b, T& value) {
  int chosen = value == b ? 1 : 0;
  bool clicked = ImGui::RadioButton(label_a, &chosen, 0);
  ImGui::SameLine();
  clicked |= ImGui::RadioButton(label_b, &chosen, 1);
  value = chosen == 0 ? a : b;
  return clicked;
}

// Transport button with a glyph; returns true when clicked.
bool icon_button(const char* glyph, const char* tooltip, bool active = false);

}  // namespace tttlab::gui::widgets
