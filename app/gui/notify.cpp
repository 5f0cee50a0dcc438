#include "gui/notify.hpp"

#include <imgui.h>

#include <deque>

#include "gui/fonts.hpp"
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
// Short-lived: the status bar keeps the last note for as long as it is wanted.
constexpr double kLifetime = 3.5;

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
  // Only the newest note, small and half see-through, in the bottom-left corner just above the status
  // bar: the views keep their plots on the right, and the status bar keeps the last note readable after
  // the toast has gone.
  const Note& note = g_notes.back();
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  const float pad = ImGui::GetStyle().WindowPadding.x;
  const double age = now - note.born;
  const float alpha = static_cast<float>(age > kLifetime - 0.5 ? (kLifetime - age) / 0.5 : 1.0);
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + pad, vp->WorkPos.y + vp->WorkSize.y - 1.6f * ImGui::GetFrameHeight()),
                          ImGuiCond_Always, ImVec2(0.0f, 1.0f));
  ImGui::PushStyleVar(ImGuiStyleVar_Alpha, alpha);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowRounding, 4.0f);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(8.0f, 5.0f));
  ImGui::PushStyleColor(ImGuiCol_WindowBg, colors::kToast.vec4());
  ImGui::Begin("##note", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoFocusOnAppearing | ImGuiWindowFlags_NoNav | ImGuiWindowFlags_NoInputs);
  ImGui::PushStyleColor(ImGuiCol_Text, note.error ? colors::kError : colors::kText);
  if (fonts().small) ImGui::PushFont(fonts().small);
  ImGui::PushTextWrapPos(ImGui::GetFontSize() * 26.0f);
  ImGui::TextUnformatted(note.text.c_str());
  ImGui::PopTextWrapPos();
  if (fonts().small) ImGui::PopFont();
  ImGui::PopStyleColor();
  ImGui::End();
  ImGui::PopStyleColor();
  ImGui::PopStyleVar(3);
}

}  // namespace tttlab::gui
