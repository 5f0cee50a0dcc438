// app/gui/dialogs.hpp — the app's modal dialogs: File → Open / Save state (the file browser) and the
// error message. UI thread only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gui/file_browser.hpp"

namespace tttlab::gui {

// A key that confirms or dismisses a modal counts only when it goes down while the modal is open. The
// Enter that confirmed the Open dialog is still "pressed" in the frame whose failure opens the error
// message; taken there too, it would close the message in the frame it appears. Pure: no ImGui.
class FreshKeyPress {
 public:
  // Once per frame while the modal is drawn. appearing: the modal's first frame; down: the key is held.
  // True in the frame of a press that began after the modal appeared (a key held since before must be
  // released first).
  bool update(bool appearing, bool down);

 private:
  bool m_released = false;  // the key was seen up since the modal appeared
};

// File → Open / Save state: the file browser (file_browser.hpp) in a modal, starting at the given path,
// whose field opens with that path's name selected, so typing replaces it.
class PathDialog {
 public:
  PathDialog(const char* title, BrowserMode mode, std::vector<std::string> extensions)
      : m_title(title), m_browser(mode, std::move(extensions)) {}
  // Opens the dialog at the next draw(), at `path`.
  void open(const std::string& path);
  // Draws the dialog while it is open. Returns the path when the user confirms it (Enter, a double
  // click or the button), and closes the dialog.
  std::optional<std::string> draw(const char* prompt, const char* confirm_label);

 private:
  const char* m_title;
  bool m_open_requested = false;
  BrowserState m_browser;
  FreshKeyPress m_escape;
};

// The error message. show() may be called anywhere in a frame; draw() once per frame after it.
class ErrorDialog {
 public:
  void show(std::string title, std::string text);
  void draw();
  const std::string& text() const { return m_text; }

 private:
  bool m_pending = false;
  std::string m_title, m_text;
  FreshKeyPress m_enter, m_escape;
};

}  // namespace tttlab::gui
