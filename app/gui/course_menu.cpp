#include "gui/course_menu.hpp"

#include <imgui.h>

#include <cstdio>
#include <filesystem>

#include "course/classroom.hpp"
#include "course/course_session.hpp"
#include "course/progress_export.hpp"
#include "gui/notify.hpp"
#include "gui/platform/host.hpp"
#include "tttlab/build_config.hpp"

namespace tttlab::gui {

namespace fs = std::filesystem;
namespace classroom = course::classroom;
namespace course_session = course::course_session;
using course::ClassroomState;

namespace {

constexpr const char* kNamePopup = "Your name";
constexpr const char* kKeyPopup = "Unlock classroom mode";
constexpr const char* kLockedTip =
    "Your teacher set classroom mode for this course; it stays on. (Teachers: View → Unlock classroom mode…)";

// "Ada L. (2b)" → "progress-Ada-L-2b.json": a default file name without spaces or slashes.
std::string default_export_name(const std::string& student) {
  std::string s = "progress-";
  bool dash = false;
  for (const char c : student) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (keep) {
      if (dash && s.back() != '-') s += '-';
      s += c;
      dash = false;
    } else {
      dash = true;
    }
  }
  if (s.back() == '-') s.pop_back();
  return s + ".json";
}

}  // namespace

void CourseMenu::file_menu_items() {
  if (ImGui::MenuItem("Export progress…")) start_export();
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("One signed file with your answers, retries and times, to hand in to your teacher");
  if (ImGui::MenuItem("Your name or ID…")) {
    m_export_after_name = false;
    m_ask_name = true;
  }
  if (ImGui::MenuItem("Open course pack…")) {
    const auto dir = course_session::lessons_dir();
    m_pack_dialog.open(dir ? dir->string() : "");
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("A course folder your teacher gave you (tttlab lessons pack)");
}

void CourseMenu::classroom_menu_items(bool* show_settings) {
  const bool locked = classroom::locked();
  ClassroomState room = classroom::state();
  if (ImGui::MenuItem("Classroom mode", "Ctrl+Shift+K", room.enabled, !locked)) {
    room.enabled = !room.enabled;
    classroom::set(room);
  }
  if (locked && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) ImGui::SetTooltip("%s", kLockedTip);
  if (ImGui::MenuItem("Classroom settings…", nullptr, false, !locked)) *show_settings = true;
  if (locked && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) ImGui::SetTooltip("%s", kLockedTip);
  if (locked && ImGui::MenuItem("Unlock classroom mode…")) {
    m_key[0] = '\0';
    m_key_error.clear();
    m_ask_key = true;
  }
}

void CourseMenu::toggle_classroom() {
  if (classroom::locked()) {
    notify("Classroom mode is set by your teacher for this course and stays on");
    return;
  }
  ClassroomState room = classroom::state();
  room.enabled = !room.enabled;
  classroom::set(room);
  notify(room.enabled ? "Classroom mode on: the chosen controls are hidden" : "Classroom mode off");
}

void CourseMenu::start_export() {
  auto& cs = course_session::get();
  if (cs.progress->student().empty()) {
    m_export_after_name = true;
    m_ask_name = true;
    return;
  }
  m_export_dialog.open(default_export_name(cs.progress->student()));
}

void CourseMenu::export_to(const std::string& path) {
  auto& cs = course_session::get();
  try {
    // Whatever is in memory reaches the file first: the export reads the file as it is on disk.
    if (!cs.progress->save()) throw std::runtime_error(cs.progress->error());
    course::export_progress(cs.progress->path(), cs.progress->student(), cs.pack ? &*cs.pack : nullptr,
                            TTTLAB_VERSION_STRING, path);
    host::persist_sync();  // the progress file itself was saved first
    host::offer_download(path);
    notify("Saved your progress to " + fs::absolute(path).string() +
           (cs.pack ? "" : " (not signed for a course: the lessons are not a course pack)"));
  } catch (const std::exception& e) {
    notify(std::string("Your progress was not exported: ") + e.what(), true);
  }
}

void CourseMenu::draw() {
  if (auto path = m_export_dialog.draw("Save your progress as", "Export")) export_to(*path);
  if (auto dir = m_pack_dialog.draw("The course folder", "Open")) {
    std::error_code ec;
    if (!fs::is_directory(*dir, ec)) {
      notify(*dir + " is not a folder", true);
    } else {
      course_session::set_lessons_dir(*dir);
      const auto& cs = course_session::get();
      if (!cs.error.empty())
        notify(cs.error, true);
      else
        notify("Opened the course in " + *dir + (cs.pack ? " (a course pack)" : ""));
    }
  }

  if (m_ask_name) {
    ImGui::OpenPopup(kNamePopup);
    const std::string& now = course_session::get().progress->student();
    std::snprintf(m_name, sizeof m_name, "%s", now.c_str());
    m_ask_name = false;
  }
  ImGui::SetNextWindowPos(ImGui::GetMainViewport()->GetCenter(), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  if (ImGui::BeginPopupModal(kNamePopup, nullptr, ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings)) {
    const bool appearing = ImGui::IsWindowAppearing();
    ImGui::TextUnformatted("Your name or student ID, as your teacher should see it on your progress:");
    if (appearing) ImGui::SetKeyboardFocusHere();
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 24);
    const bool enter = ImGui::InputText("##name", m_name, sizeof m_name, ImGuiInputTextFlags_EnterReturnsTrue);
    std::string name = m_name;
    while (!name.empty() && name.back() == ' ') name.pop_back();
    while (!name.empty() && name.front() == ' ') name.erase(name.begin());
    ImGui::BeginDisabled(name.empty());
    const bool ok = ImGui::Button("OK") || (enter && !name.empty());
    ImGui::EndDisabled();
    ImGui::SameLine();
    const bool cancel = ImGui::Button("Cancel") || m_escape.update(appearing, ImGui::IsKeyDown(ImGui::GetKeyIndex(ImGuiKey_Escape)));
    if (ok) {
      auto& cs = course_session::get();
      cs.progress->set_student(name);
      if (!cs.progress->save()) notify("Your name was not saved: " + cs.progress->error(), true);
      ImGui::CloseCurrentPopup();
      if (m_export_after_name) m_export_dialog.open(default_export_name(name));
      m_export_after_name = false;
    } else if (cancel) {
      m_export_after_name = false;
      ImGui::CloseCurrentPopup();
    }
    ImGui::EndPopup();
  }

  if (m_ask_key) {
    ImGui::OpenPopup(kKeyPopup);
    m_ask_key = false;
  }
  ImGui::SetNextWindowPos(ImGui::GetMainViewport()->GetCenter(), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  if (ImGui::BeginPopupModal(kKeyPopup, nullptr, ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings)) {
    const bool appearing = ImGui::IsWindowAppearing();
    ImGui::TextUnformatted("For the teacher: the course key (the 64 hex digits in the key file of `tttlab lessons pack --teacher`).");
    if (appearing) ImGui::SetKeyboardFocusHere();
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 36);
    const bool enter = ImGui::InputText("##key", m_key, sizeof m_key,
                                        ImGuiInputTextFlags_EnterReturnsTrue | ImGuiInputTextFlags_Password);
    if (!m_key_error.empty()) ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s", m_key_error.c_str());
    const bool ok = ImGui::Button("Unlock") || enter;
    ImGui::SameLine();
    const bool cancel = ImGui::Button("Cancel") || m_escape.update(appearing, ImGui::IsKeyDown(ImGui::GetKeyIndex(ImGuiKey_Escape)));
    if (ok) {
      if (classroom::unlock(m_key)) {
        notify("Classroom mode unlocked until the app is closed");
        ImGui::CloseCurrentPopup();
      } else {
        m_key_error = "That is not this course's key.";
      }
    } else if (cancel) {
      ImGui::CloseCurrentPopup();
    }
    if (ok || cancel) m_key[0] = '\0';
    ImGui::EndPopup();
  }
}

}  // namespace tttlab::gui
