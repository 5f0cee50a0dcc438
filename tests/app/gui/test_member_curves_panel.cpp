// The Inner-loss curves panel with a member other than TTT: its state file carries the member and the
// toy heads' settings, and a real view of LaCT's curves is drawn naming the member, its inner loss and
// what each chunk's update did.
#include <gtest/gtest.h>
#include <imgui.h>
#include <imgui_internal.h>  // ImGui::LogToBuffer: the text a frame drew

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/gui/headless_imgui.hpp"
#include "gui/lab.hpp"
#include "gui/panels/panel.hpp"
#include "lab/engine/engine.hpp"
#include "lab/features.hpp"
#include "lab/inner_curves/curves_module.hpp"
#include "lab/state/json_fields.hpp"

namespace tttlab::gui {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Panel> mcp_curves_panel() {
  for (auto& p : make_panels())
    if (std::string(p->id()) == lab::kInnerCurvesId) return std::move(p);
  return nullptr;
}

TEST(MemberCurvesPanel, AMemberRoundTripsAndItsViewNamesTheMemberAndItsLoss) {
  auto p = mcp_curves_panel();
  ASSERT_TRUE(p) << "the inner-curves panel is not registered";
  const nlohmann::json saved = p->save_state();
  EXPECT_EQ(saved["member"], "ttt") << "TTT by default";
  nlohmann::json changed = saved;
  changed["member"] = "lact";
  changed["data"] = "sample";
  changed["seq_len"] = 40;
  changed["sequences"] = 1;
  changed["toy_d"] = 6;
  changed["toy_heads"] = 2;
  changed["toy_mini_batch"] = 8;
  p->parse_state(changed, "panels.inner_curves")();
  EXPECT_EQ(p->save_state(), changed);

  // The panel's own request, computed by the engine, then drawn.
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<CurvesModule>());
  Engine engine(std::move(mods));
  p->sync(engine);
  engine.start();
  ASSERT_TRUE(engine.wait_quiescent(60s));
  const auto snap = engine.snapshot();
  ASSERT_TRUE(snap->curves);
  ASSERT_EQ(snap->curves->outcome, JobOutcome::Done) << snap->curves->error;
  EXPECT_EQ(snap->curves->member, "lact");

  testing::start_headless_imgui(ImVec2(1400, 900));
  std::string text;
  for (int i = 0; i < 3; ++i) {
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImGui::GetIO().DisplaySize);
    ImGui::Begin("##content", nullptr, ImGuiWindowFlags_NoDecoration);
    ImGui::LogToBuffer();
    p->observe(*snap);
    p->draw(*snap, engine);
    text = GImGui->LogBuffer.c_str();
    ImGui::LogFinish();
    ImGui::End();
    ImGui::Render();
  }
  ImGui::DestroyContext();
  for (const char* want : {"LaCT", "f(kₜ)", "toy heads", "C = 8", "t = 8", "TOY HEADS", "Chunk C"})
    EXPECT_NE(text.find(want), std::string::npos) << want << " is not drawn:\n" << text;
  EXPECT_EQ(text.find("MODEL AND DATA"), std::string::npos) << "no model runs a member's curves";
}

}  // namespace
}  // namespace tttlab::gui
