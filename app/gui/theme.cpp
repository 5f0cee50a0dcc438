#include "gui/theme.hpp"

#include <array>

namespace tttlab::gui {
namespace {

using colors::Role;
constexpr int kRoles = static_cast<int>(Role::Count);
using Palette = std::array<ImU32, kRoles>;

constexpr Palette make_dark() {
  Palette p{};
  const auto set = [&p](Role r, ImU32 c) { p[static_cast<int>(r)] = c; };
  set(Role::Text, IM_COL32(226, 228, 233, 255));
  set(Role::TextDim, IM_COL32(150, 155, 166, 255));
  set(Role::TextFaint, IM_COL32(105, 110, 122, 255));
  set(Role::Accent, IM_COL32(94, 158, 255, 255));
  set(Role::Warning, IM_COL32(240, 180, 70, 255));
  set(Role::Error, IM_COL32(240, 100, 90, 255));
  set(Role::Good, IM_COL32(90, 200, 140, 255));
  set(Role::SidebarBg, IM_COL32(27, 28, 33, 255));
  set(Role::PaneBg, IM_COL32(30, 32, 38, 255));
  set(Role::StatusBg, IM_COL32(30, 32, 38, 255));
  set(Role::Rule, IM_COL32(52, 55, 64, 255));
  set(Role::Divider, IM_COL32(58, 62, 72, 255));
  set(Role::Link, IM_COL32(120, 176, 255, 255));
  set(Role::Emphasis, IM_COL32(236, 206, 140, 255));
  set(Role::CodeBg, IM_COL32(45, 49, 58, 255));
  set(Role::CodeText, IM_COL32(210, 214, 222, 255));
  set(Role::CardBg, IM_COL32(32, 34, 40, 255));
  set(Role::CardEdge, IM_COL32(52, 55, 64, 255));
  set(Role::Track, IM_COL32(40, 43, 51, 255));
  set(Role::TrackFill, IM_COL32(58, 80, 118, 255));
  set(Role::ChipA, IM_COL32(44, 48, 58, 255));
  set(Role::ChipB, IM_COL32(36, 39, 47, 255));
  set(Role::ChipHover, IM_COL32(70, 78, 95, 255));
  set(Role::ChipSelected, IM_COL32(58, 110, 200, 255));
  set(Role::OnChipSelected, IM_COL32(255, 255, 255, 255));
  set(Role::ButtonOn, IM_COL32(64, 102, 166, 255));
  set(Role::PlotBg, IM_COL32(30, 32, 37, 255));
  set(Role::PlotFrame, IM_COL32(70, 75, 86, 255));
  set(Role::Grid, IM_COL32(56, 60, 69, 255));
  set(Role::GridMinor, IM_COL32(42, 45, 52, 255));
  set(Role::Marker, IM_COL32(120, 126, 140, 170));
  set(Role::Cursor, IM_COL32(94, 158, 255, 230));
  set(Role::Crosshair, IM_COL32(200, 204, 214, 120));
  set(Role::LegendBg, IM_COL32(22, 23, 27, 215));
  set(Role::HoverTint, IM_COL32(255, 255, 255, 18));
  set(Role::PointOutline, IM_COL32(20, 21, 25, 200));
  set(Role::CellSeparator, IM_COL32(20, 22, 26, 200));
  set(Role::CellHighlight, IM_COL32(255, 255, 255, 230));
  set(Role::BlockOutline, IM_COL32(110, 118, 135, 200));
  set(Role::Missing, IM_COL32(128, 128, 128, 255));
  set(Role::Ghost, IM_COL32(125, 130, 142, 170));
  set(Role::Toast, IM_COL32(38, 41, 49, 235));
  set(Role::LossInitial, IM_COL32(153, 153, 153, 255));
  set(Role::LossBefore, IM_COL32(230, 159, 0, 255));
  set(Role::LossAfter, IM_COL32(86, 180, 233, 255));
  set(Role::Primal, IM_COL32(230, 159, 0, 255));
  set(Role::Dual, IM_COL32(86, 180, 233, 255));
  set(Role::NormW, IM_COL32(0, 158, 115, 255));
  set(Role::NormDW, IM_COL32(204, 121, 167, 255));
  set(Role::Mamba2, IM_COL32(213, 94, 0, 255));
  return p;
}

// On white the light Okabe–Ito tones (orange, sky blue) lose contrast: the same hues, darker, so thin
// lines and small text keep at least about 3:1 against the plot background.
constexpr Palette make_light() {
  Palette p{};
  const auto set = [&p](Role r, ImU32 c) { p[static_cast<int>(r)] = c; };
  set(Role::Text, IM_COL32(28, 31, 38, 255));
  set(Role::TextDim, IM_COL32(84, 90, 102, 255));
  set(Role::TextFaint, IM_COL32(120, 126, 138, 255));
  set(Role::Accent, IM_COL32(22, 96, 200, 255));
  set(Role::Warning, IM_COL32(168, 100, 0, 255));
  set(Role::Error, IM_COL32(192, 48, 38, 255));
  set(Role::Good, IM_COL32(16, 128, 80, 255));
  set(Role::SidebarBg, IM_COL32(236, 238, 242, 255));
  set(Role::PaneBg, IM_COL32(246, 247, 249, 255));
  set(Role::StatusBg, IM_COL32(232, 234, 238, 255));
  set(Role::Rule, IM_COL32(200, 204, 212, 255));
  set(Role::Divider, IM_COL32(190, 194, 202, 255));
  set(Role::Link, IM_COL32(22, 96, 200, 255));
  set(Role::Emphasis, IM_COL32(150, 84, 0, 255));
  set(Role::CodeBg, IM_COL32(232, 234, 238, 255));
  set(Role::CodeText, IM_COL32(40, 44, 52, 255));
  set(Role::CardBg, IM_COL32(255, 255, 255, 255));
  set(Role::CardEdge, IM_COL32(200, 204, 212, 255));
  set(Role::Track, IM_COL32(222, 225, 231, 255));
  set(Role::TrackFill, IM_COL32(150, 184, 236, 255));
  set(Role::ChipA, IM_COL32(226, 230, 237, 255));
  set(Role::ChipB, IM_COL32(240, 242, 246, 255));
  set(Role::ChipHover, IM_COL32(200, 210, 228, 255));
  set(Role::ChipSelected, IM_COL32(40, 100, 200, 255));
  set(Role::OnChipSelected, IM_COL32(255, 255, 255, 255));
  set(Role::ButtonOn, IM_COL32(150, 188, 242, 255));
  set(Role::PlotBg, IM_COL32(255, 255, 255, 255));
  set(Role::PlotFrame, IM_COL32(170, 175, 186, 255));
  set(Role::Grid, IM_COL32(218, 221, 227, 255));
  set(Role::GridMinor, IM_COL32(236, 238, 242, 255));
  set(Role::Marker, IM_COL32(110, 116, 130, 170));
  set(Role::Cursor, IM_COL32(22, 96, 200, 230));
  set(Role::Crosshair, IM_COL32(60, 64, 74, 120));
  set(Role::LegendBg, IM_COL32(255, 255, 255, 225));
  set(Role::HoverTint, IM_COL32(0, 0, 0, 16));
  set(Role::PointOutline, IM_COL32(255, 255, 255, 220));
  set(Role::CellSeparator, IM_COL32(255, 255, 255, 200));
  set(Role::CellHighlight, IM_COL32(20, 20, 24, 230));
  set(Role::BlockOutline, IM_COL32(90, 96, 110, 200));
  set(Role::Missing, IM_COL32(160, 160, 160, 255));
  set(Role::Ghost, IM_COL32(120, 126, 138, 170));
  set(Role::Toast, IM_COL32(250, 250, 252, 240));
  set(Role::LossInitial, IM_COL32(118, 118, 118, 255));
  set(Role::LossBefore, IM_COL32(204, 120, 0, 255));
  set(Role::LossAfter, IM_COL32(0, 114, 178, 255));
  set(Role::Primal, IM_COL32(204, 120, 0, 255));
  set(Role::Dual, IM_COL32(0, 114, 178, 255));
  set(Role::NormW, IM_COL32(0, 136, 98, 255));
  set(Role::NormDW, IM_COL32(178, 82, 140, 255));
  set(Role::Mamba2, IM_COL32(184, 80, 0, 255));
  return p;
}

constexpr Palette kDark = make_dark();
constexpr Palette kLight = make_light();
Theme g_theme = Theme::Dark;
const Palette* g_palette = &kDark;

}  // namespace

ImU32 colors::resolve(Role r) { return (*g_palette)[static_cast<int>(r)]; }

Theme current_theme() { return g_theme; }

ImVec4 clear_color() {
  return g_theme == Theme::Light ? ImVec4(0.94f, 0.945f, 0.955f, 1.0f) : ImVec4(0.086f, 0.090f, 0.105f, 1.0f);
}

void apply_theme(float scale, Theme theme) {
  g_theme = theme;
  g_palette = theme == Theme::Light ? &kLight : &kDark;
  const bool light = theme == Theme::Light;
  ImGuiStyle& s = ImGui::GetStyle();
  s = ImGuiStyle();
  if (light)
    ImGui::StyleColorsLight(&s);
  else
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
  s.FrameBorderSize = light ? 1.0f : 0.0f;  // light frames need an edge to stand off a light page
  s.PopupBorderSize = 1;
  s.ScaleAllSizes(scale);

  ImVec4* c = s.Colors;
  const auto rgb = [](int r, int g, int b, float a = 1.0f) {
    return ImVec4(r / 255.0f, g / 255.0f, b / 255.0f, a);
  };
  const auto role = [](colors::Color k, float a = 1.0f) {
    ImVec4 v = k.vec4();
    v.w *= a;
    return v;
  };
  const ImVec4 transparent = rgb(0, 0, 0, 0.0f);
  const auto accent = [&](float a = 1.0f) { return role(colors::kAccent, a); };
  if (light) {
    // The tones that recur: a pale grey page, white fields, the blue accent at several strengths.
    const auto background = [&](float a = 1.0f) { return rgb(240, 241, 244, a); };
    const ImVec4 rule = role(colors::kRule);
    c[ImGuiCol_Text] = role(colors::kText);
    c[ImGuiCol_TextDisabled] = role(colors::kTextFaint);
    c[ImGuiCol_WindowBg] = background();
    c[ImGuiCol_ChildBg] = rgb(246, 247, 249);
    c[ImGuiCol_PopupBg] = rgb(252, 252, 253, 0.98f);
    c[ImGuiCol_Border] = rule;
    c[ImGuiCol_BorderShadow] = transparent;
    c[ImGuiCol_FrameBg] = rgb(255, 255, 255);
    c[ImGuiCol_FrameBgHovered] = rgb(232, 238, 248);
    c[ImGuiCol_FrameBgActive] = rgb(218, 228, 246);
    c[ImGuiCol_TitleBg] = background();
    c[ImGuiCol_TitleBgActive] = rgb(226, 229, 235);
    c[ImGuiCol_MenuBarBg] = rgb(228, 231, 236);
    c[ImGuiCol_ScrollbarBg] = background(0.0f);
    c[ImGuiCol_ScrollbarGrab] = rgb(196, 200, 208);
    c[ImGuiCol_ScrollbarGrabHovered] = rgb(172, 178, 188);
    c[ImGuiCol_ScrollbarGrabActive] = rgb(150, 156, 168);
    c[ImGuiCol_CheckMark] = accent();
    c[ImGuiCol_SliderGrab] = accent(0.85f);
    c[ImGuiCol_SliderGrabActive] = accent();
    c[ImGuiCol_Button] = rgb(226, 229, 235);
    c[ImGuiCol_ButtonHovered] = rgb(206, 216, 234);
    c[ImGuiCol_ButtonActive] = rgb(184, 202, 232);
    c[ImGuiCol_Header] = rgb(210, 224, 246);
    c[ImGuiCol_HeaderHovered] = rgb(196, 214, 242);
    c[ImGuiCol_HeaderActive] = rgb(176, 200, 240);
    c[ImGuiCol_Separator] = rule;
    c[ImGuiCol_SeparatorHovered] = accent(0.6f);
    c[ImGuiCol_SeparatorActive] = accent();
    c[ImGuiCol_ResizeGrip] = accent(0.15f);
    c[ImGuiCol_ResizeGripHovered] = accent(0.5f);
    c[ImGuiCol_ResizeGripActive] = accent(0.8f);
    c[ImGuiCol_Tab] = rgb(226, 229, 235);
    c[ImGuiCol_TabHovered] = rgb(196, 214, 242);
    c[ImGuiCol_TabActive] = rgb(210, 224, 246);
    c[ImGuiCol_TableHeaderBg] = rgb(228, 231, 236);
    c[ImGuiCol_TableBorderStrong] = rgb(190, 194, 202);
    c[ImGuiCol_TableBorderLight] = rgb(214, 218, 224);
    c[ImGuiCol_TableRowBgAlt] = rgb(0, 0, 0, 0.03f);
    c[ImGuiCol_PlotHistogram] = accent();
    c[ImGuiCol_TextSelectedBg] = accent(0.25f);
    c[ImGuiCol_ModalWindowDimBg] = rgb(40, 44, 52, 0.35f);
    c[ImGuiCol_NavHighlight] = accent();
    return;
  }
  // The tones that recur: the window background, the rules, the blue accent (colors::kAccent) at
  // several strengths, and the header blues that tabs share.
  const auto background = [&](float a = 1.0f) { return rgb(22, 23, 27, a); };
  const ImVec4 rule = rgb(52, 55, 64);
  const ImVec4 header_active = rgb(60, 86, 128);

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
