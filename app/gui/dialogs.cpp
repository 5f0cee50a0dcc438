#include "gui/dialogs.hpp"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "gui/fonts.hpp"
#include "lab/state/state_file.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {

namespace fs = std::filesystem;

namespace {

bool key_down(ImGuiKey key) { return ImGui::IsKeyDown(ImGui::GetKeyIndex(key)); }

}  // namespace

bool FreshKeyPress::update(bool appearing, bool down) {
  if (appearing) {
    m_released = !down;
    return false;
  }
  if (!down) {
    m_released = true;
    return false;
  }
  if (!m_released) return false;
  m_released = false;
  return true;
}

void PathDialog::open(const std::string& path) {
  m_open_requested = true;
  std::snprintf(m_path, sizeof m_path, "%s", path.c_str());
}

std::optional<std::string> PathDialog::draw(const char* prompt, const char* confirm_label) {
  if (m_open_requested) {
    ImGui::OpenPopup(m_title);
    m_open_requested = false;
  }
  ImGui::SetNextWindowPos(ImGui::GetMainViewport()->GetCenter(), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowSize(ImVec2(ImGui::GetFontSize() * 37.0f, 0), ImGuiCond_Appearing);
  if (!ImGui::BeginPopupModal(m_title, nullptr, ImGuiWindowFlags_NoSavedSettings)) return std::nullopt;
  const bool appearing = ImGui::IsWindowAppearing();
  ImGui::TextUnformatted(prompt);
  if (appearing) ImGui::SetKeyboardFocusHere();
  ImGui::SetNextItemWidth(-1);
  const bool enter = ImGui::InputText("##path", m_path, sizeof m_path,
                                      ImGuiInputTextFlags_EnterReturnsTrue | ImGuiInputTextFlags_AutoSelectAll);
  // The state files in the working directory, for one-click picking.
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(".", ec))
    if (e.path().extension() == kStateExtension) found.push_back(e.path().filename().string());
  std::sort(found.begin(), found.end());
  ImGui::TextDisabled("In %s:", fs::absolute(".").lexically_normal().string().c_str());
  ImGui::BeginChild("##files", ImVec2(0, ImGui::GetFontSize() * 8.0f), true);
  if (found.empty()) ImGui::TextDisabled("(no .tttlab files)");
  for (const auto& f : found)
    if (ImGui::Selectable(f.c_str(), f == m_path)) std::snprintf(m_path, sizeof m_path, "%s", f.c_str());
  ImGui::EndChild();
  const float button_w = ImGui::GetFontSize() * 6.5f;
  const bool confirmed = ImGui::Button(confirm_label, ImVec2(button_w, 0)) || enter;
  ImGui::SameLine();
  const bool escape = m_escape.update(appearing, key_down(ImGuiKey_Escape));
  std::optional<std::string> result;
  if (ImGui::Button("Cancel", ImVec2(button_w, 0)) || escape) {
    ImGui::CloseCurrentPopup();
  } else if (confirmed && m_path[0]) {
    ImGui::CloseCurrentPopup();
    result = m_path;
  }
  ImGui::EndPopup();
  return result;
}

void ErrorDialog::show(std::string title, std::string text) {
  m_title = std::move(title);
  m_text = std::move(text);
  m_pending = true;
}

void ErrorDialog::draw() {
  if (m_pending) {
    ImGui::OpenPopup("##error");
    m_pending = false;
  }
  ImGui::SetNextWindowPos(ImGui::GetMainViewport()->GetCenter(), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowSize(ImVec2(ImGui::GetFontSize() * 37.0f, 0), ImGuiCond_Appearing);
  if (!ImGui::BeginPopupModal("##error", nullptr, ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoSavedSettings))
    return;
  const bool appearing = ImGui::IsWindowAppearing();
  ImGui::PushFont(fonts().bold);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kError), "%s", m_title.c_str());
  ImGui::PopFont();
  ImGui::Separator();
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextUnformatted(m_text.c_str());
  ImGui::PopTextWrapPos();
  if (m_title.rfind("Could not", 0) == 0) ImGui::TextDisabled("Nothing was changed.");
  // Both keys are updated every frame, so each sees its own key go up and down.
  const bool enter = m_enter.update(appearing, key_down(ImGuiKey_Enter) || key_down(ImGuiKey_KeyPadEnter));
  const bool escape = m_escape.update(appearing, key_down(ImGuiKey_Escape));
  if (ImGui::Button("OK", ImVec2(ImGui::GetFontSize() * 6.5f, 0)) || enter || escape) ImGui::CloseCurrentPopup();
  ImGui::EndPopup();
}

}  // namespace tttlab::gui
