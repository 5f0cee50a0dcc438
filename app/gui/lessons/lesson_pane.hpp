// app/gui/lessons/lesson_pane.hpp — the lesson docked beside its live view: the lesson's text, its
// predictions (choose, lock in, run the experiment, see the measurement), its questions (hint and
// answer on request, unless the teacher hid them), the engine's checks and "I have finished this
// lesson". Draws a LessonSession (lesson_session.hpp) into the current ImGui window; the app places
// that window to the left of the view. The pane draws the lesson only up to the first prediction not
// locked in (LessonSession::visible_parts), and a check's result only once the check is open. All of
// its text goes through ImGui's log when logging is on (lesson_ui::add_text), so a test can read
// what a student could see. UI thread only.
#pragma once

#include <imgui.h>

#include <filesystem>
#include <functional>
#include <string>

#include "course/lesson_session.hpp"
#include "gui/lab.hpp"

namespace tttlab::gui {

// What the pane asks of the app.
struct LessonPaneHost {
  // Opens a scene exactly as File → Open does; false when it failed (the app shows why).
  std::function<bool(const std::filesystem::path&)> open_scene;
  // Engine::quiescent() now.
  std::function<bool()> engine_quiet;
  // "×  Leave lesson".
  std::function<void()> leave;
  // Starts another lesson of the course by name ("Next lesson").
  std::function<void(const std::string&)> start_lesson;
  std::string next_lesson;        // the next lesson's name ("" at the end of the course)
  std::string next_lesson_title;
};

// Begins the child window the pane scrolls in (end it with ImGui::EndChild). `from_top`: the lesson was
// just opened, so this very frame is drawn from its top, never at the scroll position the previous
// lesson left (a second click on "Next lesson" would land on the next lesson's own end).
void begin_lesson_pane_window(const char* id, ImVec2 size, bool from_top);

// The lesson pane. Call once per frame while the lesson is docked.
void draw_lesson_pane(LessonSession& session, const Snapshot& snap, CommandSink& sink, const LessonPaneHost& host);

// What the view area shows instead of the view while a prediction not locked in asks about what it
// shows (LessonSession::veiled).
void draw_lesson_veil(const LessonSession& session);

}  // namespace tttlab::gui
