// app/gui/course_menu.hpp — the course's teacher/student entries of the menus: File → Export
// progress… (asks the student's name or ID once, stored in the progress file), File → Open course
// pack…, and the classroom toggle, which a course pack may lock (course/classroom.hpp) until the
// teacher types the course key. UI thread only.
#pragma once

#include <string>

#include "gui/dialogs.hpp"

namespace tttlab::gui {

class CourseMenu {
 public:
  void file_menu_items();       // inside the open File menu
  void classroom_menu_items(bool* show_settings);  // inside the open View menu
  void toggle_classroom();      // Ctrl+Shift+K: refused with a message while locked
  void draw();                  // the dialogs, once per frame

 private:
  void start_export();
  void export_to(const std::string& path);

  PathDialog m_export_dialog{"Export progress", BrowserMode::SaveFile, {".json"}};
  PathDialog m_pack_dialog{"Open course pack", BrowserMode::ChooseFolder, {}};
  bool m_ask_name = false, m_ask_key = false;
  bool m_export_after_name = false;  // the name was asked for by Export progress…
  char m_name[201] = "";
  char m_key[160] = "";
  std::string m_key_error;
  FreshKeyPress m_escape;
};

}  // namespace tttlab::gui
