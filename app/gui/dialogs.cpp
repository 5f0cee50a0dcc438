#include "gui/dialogs.hpp"

#include <imgui.h>


#include "gui/fonts.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui {

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
  m_browser.start(path);
}

std::optional<std::string> PathDialog::draw(const char* prompt, const char* confirm_label) {
  if (m_open_requested) {
    ImGui::OpenPopup(m_title);
    m_open_requested = false;
  }
  ImGui::SetNextWindowPos(ImGui::GetMainViewport()->GetCenter(), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowSize(ImVec2(ImGui::GetFontSize() * 40.0f, 0), ImGuiCond_Appearing);
  if (!ImGui::BeginPopupModal(m_title, nullptr, ImGuiWindowFlags_NoSavedSettings)) return std::nullopt;
  const bool appearing = ImGui::IsWindowAppearing();
  ImGui::TextUnformatted(prompt);
  const bool escape = m_escape.update(appearing, key_down(ImGuiKey_Escape));
  const BrowserResult r = draw_browser(m_browser, confirm_label, appearing, escape);
  if (r.cancelled || r.chosen) ImGui::CloseCurrentPopup();
  ImGui::EndPopup();
  return r.chosen;
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
