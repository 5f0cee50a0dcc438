// A Dear ImGui context for drawing panels with no window or renderer: the app's theme and fonts, the
// font atlas built (as the renderer does at start-up, else the first frame asserts), no imgui.ini
// written. Fixtures call start_headless_imgui in SetUp and ImGui::DestroyContext in TearDown.
#pragma once

#include <imgui.h>

#include "gui/fonts.hpp"
#include "gui/theme.hpp"
#include "lab/engine/command.hpp"

namespace tttlab::testing {

inline void start_headless_imgui(ImVec2 display) {
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;  // as the OpenGL 3 renderer: > 64k vertices
  io.DisplaySize = display;
  io.DeltaTime = 1.0f / 60.0f;
  gui::apply_theme(1.0f);
  gui::load_fonts(1.0f);
  unsigned char* px = nullptr;
  int w = 0, h = 0;
  io.Fonts->GetTexDataAsRGBA32(&px, &w, &h);
}

// Where a panel drawn without an engine posts its commands: they are only counted.
class NullSink final : public lab::CommandSink {
 public:
  void post(lab::Command) override { ++posted; }
  int posted = 0;
};

}  // namespace tttlab::testing
