#include "gui/theme.hpp"

namespace tttlab::gui {

ImVec4 clear_color() { return ImVec4(0.086f, 0.090f, 0.105f, 1.0f); }

void apply_theme(float scale) {
  ImGuiStyle& s = ImGui::GetStyle();
  s = ImGuiStyle();
  ImGui::StyleColorsDark(&s);
  s.WindowPadding = ImVec2(12, 10);
  s.FramePadding = ImVec2(8, 4);
  s.ItemSpacing = ImVec2(8, 6);
  s.ItemInnerSpacing = ImVec2(6, 4);
  s.IndentSpacing = 16;
  s.ScrollbarSize = 12;
  s.GrabMinSize = 10;
  s.WindowRounding = 0;
  s.ChildRounding = 4;
  s.FrameRounding = 3;
  s.PopupRounding = 4;
  s.ScrollbarRounding = 6;
  s.GrabRounding = 3;
  s.TabRounding = 3;
  s.WindowBorderSize = 0;
  s.ChildBorderSize = 1;
  s.FrameBorderSize = 0;
  s.PopupBorderSize = 1;
  s.ScaleAllSizes(scale);

  ImVec4* c = s.Colors;
  const auto rgb = [](int r, int g, int b, float a = 1.0f) {
    return ImVec4(r / 255.0f, g / 255.0f, b / 255.0f, a);
  };
  // The tones that recur: the window background, the rules, the blue accent (colors::kAccent) at
  // several strengths, and the header blues that tabs share.
  const auto background = [&](float a = 1.0f) { return rgb(22, 23, 27, a); };
  const auto accent = [&](float a = 1.0f) { return rgb(94, 158, 255, a); };
  const ImVec4 rule = rgb(52, 55, 64);
  const ImVec4 header_active = rgb(60, 86, 128);
  const ImVec4 transparent = rgb(0, 0, 0, 0.0f);

  c[ImGuiCol_Text] = rgb(226, 228, 233);
  c[ImGuiCol_TextDisabled] = rgb(120, 125, 136);
  c[ImGuiCol_WindowBg] = background();
  c[ImGuiCol_ChildBg] = rgb(27, 28, 33);
  c[ImGuiCol_PopupBg] = rgb(32, 34, 40, 0.98f);
  c[ImGuiCol_Border] = rule;
  c[ImGuiCol_BorderShadow] = transparent;
  c[ImGuiCol_FrameBg] = rgb(40, 43, 51);
  c[ImGuiCol_FrameBgHovered] = rgb(50, 54, 64);
  c[ImGuiCol_FrameBgActive] = rgb(58, 63, 75);
  c[ImGuiCol_TitleBg] = background();
  c[ImGuiCol_TitleBgActive] = rgb(28, 30, 36);
  c[ImGuiCol_MenuBarBg] = rgb(30, 32, 38);
  c[ImGuiCol_ScrollbarBg] = background(0.0f);
  c[ImGuiCol_ScrollbarGrab] = rgb(62, 66, 77);
  c[ImGuiCol_ScrollbarGrabHovered] = rgb(78, 83, 96);
  c[ImGuiCol_ScrollbarGrabActive] = rgb(94, 100, 115);
  c[ImGuiCol_CheckMark] = rgb(110, 168, 255);
  c[ImGuiCol_SliderGrab] = accent();
  c[ImGuiCol_SliderGrabActive] = rgb(130, 180, 255);
  c[ImGuiCol_Button] = rgb(46, 50, 60);
  c[ImGuiCol_ButtonHovered] = rgb(60, 66, 80);
  c[ImGuiCol_ButtonActive] = rgb(74, 82, 99);
  c[ImGuiCol_Header] = rgb(44, 62, 92);
  c[ImGuiCol_HeaderHovered] = rgb(52, 74, 110);
  c[ImGuiCol_HeaderActive] = header_active;
  c[ImGuiCol_Separator] = rule;
  c[ImGuiCol_SeparatorHovered] = accent(0.6f);
  c[ImGuiCol_SeparatorActive] = accent();
  c[ImGuiCol_ResizeGrip] = accent(0.15f);
  c[ImGuiCol_ResizeGripHovered] = accent(0.5f);
  c[ImGuiCol_ResizeGripActive] = accent(0.8f);
  c[ImGuiCol_Tab] = rgb(36, 39, 46);
  c[ImGuiCol_TabHovered] = header_active;
  c[ImGuiCol_TabActive] = rgb(48, 70, 105);
  c[ImGuiCol_PlotHistogram] = accent();
  c[ImGuiCol_TextSelectedBg] = accent(0.35f);
  c[ImGuiCol_ModalWindowDimBg] = rgb(0, 0, 0, 0.55f);
  c[ImGuiCol_NavHighlight] = accent();
}

}  // namespace tttlab::gui
