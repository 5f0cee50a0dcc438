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
    released_ = !down;
    return false;
  }
  if (!down) {
    released_ = true;
    return false;
  }
  if (!released_) return false;
  released_ = false;
  return true;
}

void PathDialog::open(const std::string& path) {
  open_requested_ = true;
  std::snprintf(path_, sizeof path_, "%s", path.c_str());
}

std::optional<std::string> PathDialog::draw(const char* prompt, const char* confirm_label) {
  if (open_requested_) {
    ImGui::OpenPopup(title_);
    open_requested_ = false;
  }
  ImGui::SetNextWindowPos(ImGui::GetMainViewport()->GetCenter(), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowSize(ImVec2(ImGui::GetFontSize() * 37.0f, 0), ImGuiCond_Appearing);
  if (!ImGui::BeginPopupModal(title_, nullptr, ImGuiWindowFlags_NoSavedSettings)) return std::nullopt;
  const bool appearing = ImGui::IsWindowAppearing();
  ImGui::TextUnformatted(prompt);
  if (appearing) ImGui::SetKeyboardFocusHere();
  ImGui::SetNextItemWidth(-1);
  const bool enter = ImGui::InputText("##path", path_, sizeof path_,
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
    if (ImGui::Selectable(f.c_str(), f == path_)) std::snprintf(path_, sizeof path_, "%s", f.c_str());
  ImGui::EndChild();
  const float button_w = ImGui::GetFontSize() * 6.5f;
  const bool confirmed = ImGui::Button(confirm_label, ImVec2(button_w, 0)) || enter;
  ImGui::SameLine();
  const bool escape = escape_.update(appearing, key_down(ImGuiKey_Escape));
  std::optional<std::string> result;
  if (ImGui::Button("Cancel", ImVec2(button_w, 0)) || escape) {
    ImGui::CloseCurrentPopup();
  } else if (confirmed && path_[0]) {
    ImGui::CloseCurrentPopup();
    result = path_;
  }
  ImGui::EndPopup();
  return result;
}

void ErrorDialog::show(std::string title, std::string text) {
  title_ = std::move(title);
  text_ = std::move(text);
  pending_ = true;
}

void ErrorDialog::draw() {
  if (pending_) {
    ImGui::OpenPopup("##error");
    pending_ = false;
  }
  ImGui::SetNextWindowPos(ImGui::GetMainViewport()->GetCenter(), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowSize(ImVec2(ImGui::GetFontSize() * 37.0f, 0), ImGuiCond_Appearing);
  if (!ImGui::BeginPopupModal("##error", nullptr, ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoSavedSettings))
    return;
  const bool appearing = ImGui::IsWindowAppearing();
  ImGui::PushFont(fonts().bold);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kError), "%s", title_.c_str());
  ImGui::PopFont();
  ImGui::Separator();
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextUnformatted(text_.c_str());
  ImGui::PopTextWrapPos();
  if (title_.rfind("Could not", 0) == 0) ImGui::TextDisabled("Nothing was changed.");
  // Both keys are updated every frame, so each sees its own key go up and down.
  const bool enter = enter_.update(appearing, key_down(ImGuiKey_Enter) || key_down(ImGuiKey_KeyPadEnter));
  const bool escape = escape_.update(appearing, key_down(ImGuiKey_Escape));
  if (ImGui::Button("OK", ImVec2(ImGui::GetFontSize() * 6.5f, 0)) || enter || escape) ImGui::CloseCurrentPopup();
  ImGui::EndPopup();
}

}  // namespace tttlab::gui
