// The Training panel and runs on several GPUs, drawn headless: one row per GPU with its tokens/s and
// the total for a data-parallel run, nothing extra for a run on one device; the GPU count in the
// panel's saved state.
#include <gtest/gtest.h>
#include <imgui.h>
#include <imgui_internal.h>  // ImGui::LogToBuffer: the text a frame drew

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "lab/engine/command.hpp"
#include "lab/engine/snapshot.hpp"
#include "gui/fonts.hpp"
#include "gui/panels/panel.hpp"
#include "lab/state/json_fields.hpp"
#include "gui/lab.hpp"
#include "app/gui/headless_imgui.hpp"

namespace tttlab::gui {
namespace {

using testing::NullSink;

class TrainingPanelGpus : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::start_headless_imgui(ImVec2(1600, 1000));
    for (auto& p : make_panels())
      if (std::string(p->id()) == "training") m_panel = std::move(p);
    ASSERT_TRUE(m_panel);
  }
  void TearDown() override { ImGui::DestroyContext(); }

  // The text one frame of the panel draws for a snapshot holding `run`.
  std::string drawn(const RunView& run) {
    auto view = std::make_shared<TrainingView>();
    view->runs.push_back(std::make_shared<RunView>(run));
    Snapshot snap;
    snap.training = view;
    NullSink sink;
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImGui::GetIO().DisplaySize);
    ImGui::Begin("##content", nullptr, ImGuiWindowFlags_NoDecoration);
    ImGui::LogToBuffer();
    m_panel->observe(snap);
    m_panel->draw(snap, sink);
    const std::string text = GImGui->LogBuffer.c_str();
    ImGui::LogFinish();
    ImGui::End();
    ImGui::Render();
    return text;
  }

  static RunView running(int gpus, std::vector<double> rates) {
    RunView r;
    r.id = 1;
    r.name = "dp";
    r.state = RunState::Running;
    r.settings.gpus = gpus;
    r.settings.batch_size = 8;
    r.steps_done = 10;
    r.steps_total = 100;
    r.tokens_per_s = 500000;
    r.gpu_tokens_per_s = std::move(rates);
    return r;
  }

  std::unique_ptr<Panel> m_panel;
};

TEST_F(TrainingPanelGpus, ARunOnSeveralGpusShowsOneRowPerGpuAndTheTotal) {
  const std::string text = drawn(running(3, {204500.4, 198000, 150000}));
  EXPECT_NE(text.find("GPU 0"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU 1"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU 2"), std::string::npos) << text;
  EXPECT_EQ(text.find("GPU 3"), std::string::npos) << text;
  EXPECT_NE(text.find("204,500 tokens/s"), std::string::npos) << text;
  EXPECT_NE(text.find("150,000 tokens/s"), std::string::npos) << text;
  EXPECT_NE(text.find("all 3 GPUs"), std::string::npos) << text;
  EXPECT_NE(text.find("552,500 tokens/s"), std::string::npos) << "the total: " << text;
}

TEST_F(TrainingPanelGpus, ARunOnOneDeviceShowsNoPerGpuRows) {
  const std::string text = drawn(running(1, {}));
  EXPECT_EQ(text.find("GPU 0"), std::string::npos) << text;
  EXPECT_EQ(text.find("tokens/s"), std::string::npos) << text;
}

TEST_F(TrainingPanelGpus, BeforeTheFirstStepTheRowsAreAnnounced) {
  const std::string text = drawn(running(2, {}));
  EXPECT_NE(text.find("appears after the first step"), std::string::npos) << text;
  EXPECT_EQ(text.find("GPU 0"), std::string::npos) << text;
}

TEST(TrainingPanelGpusState, TheGpuCountIsSavedAndRead) {
  std::unique_ptr<Panel> p;
  for (auto& q : make_panels())
    if (std::string(q->id()) == "training") p = std::move(q);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->save_state()["settings"]["gpus"], 1);
  nlohmann::json j = p->save_state();
  j["settings"]["gpus"] = 4;
  p->parse_state(j, "panels.training")();
  EXPECT_EQ(p->save_state()["settings"]["gpus"], 4);
  j["settings"]["gpus"] = "x";
  try {
    p->parse_state(j, "panels.training");
    ADD_FAILURE() << "accepted gpus = \"x\"";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("panels.training.settings.gpus"), std::string::npos) << e.what();
  }
  EXPECT_EQ(p->save_state()["settings"]["gpus"], 4) << "a refused file changes nothing";
}

}  // namespace
}  // namespace tttlab::gui
