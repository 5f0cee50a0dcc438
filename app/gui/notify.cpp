#include "gui/notify.hpp"

#include <imgui.h>

#include <deque>

#include "gui/theme.hpp"

namespace tttlab::gui {
namespace {

struct Note {
  std::string text;
  bool error;
  double born;
};
std::deque<Note> g_notes;
std::string g_last;
bool g_visible = true;
constexpr double kLifetime = 5.0;

}  // namespace

void notify(std::string message, bool error) {
  g_last = message;
  g_notes.push_back({std::move(message), error, ImGui::GetCurrentContext() ? ImGui::GetTime() : 0.0});
  while (g_notes.size() > 4) g_notes.pop_front();
}

const std::string& last_notification() { return g_last; }
void set_notifications_visible(bool visible) { g_visible = visible; }

void draw_notifications() {
  const double now = ImGui::GetTime();
  while (!g_notes.empty() && now - g_notes.front().born > kLifetime) g_notes.pop_front();
  if (g_notes.empty() || !g_visible) return;
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  const float pad = ImGui::GetStyle().WindowPadding.x;
  float y = vp->WorkPos.y + vp->WorkSize.y - 2.5f * ImGui::GetFrameHeight();
  int i = 0;
  for (auto it = g_notes.rbegin(); it != g_notes.rend(); ++it, ++i) {
    const double age = now - it->born;
    const float alpha = static_cast<float>(age > kLifetime - 0.5 ? (kLifetime - age) / 0.5 : 1.0);
    ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x - pad, y), ImGuiCond_Always,
                            ImVec2(1.0f, 1.0f));
    ImGui::SetNextWindowBgAlpha(0.92f * alpha);
    char name[32];
    std::snprintf(name, sizeof name, "##note%d", i);
    ImGui::PushStyleVar(ImGuiStyleVar_Alpha, alpha);
    ImGui::PushStyleVar(ImGuiStyleVar_WindowRounding, 4.0f);
    ImGui::Begin(name, nullptr,
                 ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_AlwaysAutoResize |
                     ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoFocusOnAppearing |
                     ImGuiWindowFlags_NoNav | ImGuiWindowFlags_NoInputs);
    ImGui::PushStyleColor(ImGuiCol_Text, it->error ? colors::kError : colors::kText);
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 40.0f);
    ImGui::TextUnformatted(it->text.c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
    y -= ImGui::GetWindowHeight() + 6.0f;
    ImGui::End();
    ImGui::PopStyleVar(2);
  }
}

}  // namespace tttlab::gui
