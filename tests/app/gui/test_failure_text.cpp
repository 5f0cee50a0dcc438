// Failures are drawn as text in the panel, not only in a tooltip: a training start refused for a missing
// text, a run that failed, and a job-style panel's failed job all show their reason where it is read.
#include <gtest/gtest.h>
#include <imgui.h>
#include <imgui_internal.h>  // ImGui::LogToBuffer: the text a frame drew

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "app/engine_wait.hpp"
#include "app/gui/headless_imgui.hpp"
#include "core/io/temp_dir.hpp"
#include "gui/lab.hpp"
#include "gui/panels/panel.hpp"
#include "lab/engine/engine.hpp"
#include "lab/evaluation/evaluation_types.hpp"
#include "lab/features.hpp"
#include "lab/models/model_library.hpp"
#include "lab/training/training_module.hpp"

namespace tttlab::gui {
namespace {

using testing::NullSink;

class FailureText : public ::testing::Test {
 protected:
  void SetUp() override { testing::start_headless_imgui(ImVec2(1600, 1000)); }
  void TearDown() override { ImGui::DestroyContext(); }

  // The text one frame of `panel` draws from `snap` (the second frame: the first lays out).
  std::string drawn(Panel& panel, const Snapshot& snap) {
    NullSink sink;
    std::string text;
    for (int i = 0; i < 2; ++i) {
      ImGui::NewFrame();
      ImGui::SetNextWindowPos(ImVec2(0, 0));
      ImGui::SetNextWindowSize(ImGui::GetIO().DisplaySize);
      ImGui::Begin("##content", nullptr, ImGuiWindowFlags_NoDecoration);
      ImGui::LogToBuffer();
      panel.observe(snap);
      panel.draw(snap, sink);
      text = GImGui->LogBuffer.c_str();
      ImGui::LogFinish();
      ImGui::End();
      ImGui::Render();
    }
    return text;
  }

  std::unique_ptr<Panel> panel(const char* id) {
    for (auto& p : make_panels())
      if (std::string(p->id()) == id) return std::move(p);
    ADD_FAILURE() << "no panel " << id;
    return nullptr;
  }
};

TEST_F(FailureText, TheTrainingPanelShowsWhyAStartWasRefused) {
  testing::TempDir tmp;
  std::vector<std::unique_ptr<EngineModule>> mods;
  mods.push_back(std::make_unique<TrainingModule>(std::make_shared<ModelLibrary>()));
  Engine engine(std::move(mods));
  engine.start();
  TrainSettings t;
  t.data = (tmp / "missing-corpus.txt").string();
  t.runs_dir = (tmp / "runs").string();
  engine.post(TrainStart{t, "missing"});
  const auto snap = testing::wait_for(
      engine, [](const Snapshot& s) { return s.training && !s.training->error.empty(); });
  auto p = panel(kTrainingId);
  ASSERT_TRUE(p);
  const std::string text = drawn(*p, *snap);
  EXPECT_NE(text.find("missing-corpus.txt"), std::string::npos) << text;
  EXPECT_NE(text.find("Cannot start"), std::string::npos) << text;
}

TEST_F(FailureText, TheTrainingPanelShowsAFailedRunsReason) {
  auto run = std::make_shared<RunView>();
  run->id = 1;
  run->name = "broken";
  run->state = RunState::Failed;
  run->message = "cannot read 'notes/essay.txt': No such file or directory";
  auto view = std::make_shared<TrainingView>();
  view->runs.push_back(run);
  Snapshot snap;
  snap.training = view;
  auto p = panel(kTrainingId);
  ASSERT_TRUE(p);
  const std::string text = drawn(*p, snap);
  EXPECT_NE(
      text.find("Run broken failed: cannot read 'notes/essay.txt': No such file or directory"),
      std::string::npos)
      << text;
}

TEST_F(FailureText, AJobStylePanelShowsItsFailedJobsReason) {
  auto view = std::make_shared<EvaluationView>();
  view->outcome = JobOutcome::Failed;
  view->error = "cannot read 'notes/essay.txt': No such file or directory";
  Snapshot snap;
  snap.evaluation = view;
  auto p = panel(kEvaluationId);
  ASSERT_TRUE(p);
  const std::string text = drawn(*p, snap);
  EXPECT_NE(text.find("Cannot run: cannot read 'notes/essay.txt'"), std::string::npos) << text;
}

// Opening a state whose stepper or evolution reads a text file that is gone fails with the file's name,
// as File → Open shows it, instead of quietly using the text saved beside it.
TEST_F(FailureText, OpeningAStateWhoseTextFileIsGoneNamesTheFile) {
  testing::TempDir tmp;
  for (const char* id : {kInnerStepperId, kEvolutionId}) {
    SCOPED_TRACE(id);
    auto p = panel(id);
    ASSERT_TRUE(p);
    nlohmann::json settings = p->save_state();
    settings["text_file"] = (tmp / "essay-gone.txt").string();
    try {
      p->parse_state(settings, std::string("panels.") + id);
      ADD_FAILURE() << "the state must be refused";
    } catch (const std::exception& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("essay-gone.txt"), std::string::npos) << m;
      EXPECT_NE(m.find("does not exist"), std::string::npos) << m;
    }
  }
}

}  // namespace
}  // namespace tttlab::gui
