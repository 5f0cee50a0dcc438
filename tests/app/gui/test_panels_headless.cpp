// Every panel drawn headless (a Dear ImGui context without a window or renderer) from real engine
// snapshots; state round trips and refusal of bad settings; keyboard shortcuts turn into commands.
#include <GLFW/glfw3.h>  // key codes only (the GLFW backend indexes io.KeysDown by them)
#include <gtest/gtest.h>
#include <imgui.h>
#include <imgui_internal.h>  // ImGui::LogToBuffer: the text a frame drew

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <thread>
#include <nlohmann/json.hpp>

#include "course/classroom.hpp"
#include "lab/engine/engine.hpp"
#include "lab/engine/resources.hpp"
#include "lab/features.hpp"
#include "course/markdown.hpp"
#include "lab/state/state_file.hpp"
#include "gui/fonts.hpp"
#include "gui/panels/panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/plot/plot_export.hpp"
#include "lab/state/json_fields.hpp"
#include "gui/lab.hpp"
#include "app/gui/headless_imgui.hpp"

namespace tttlab::gui {
namespace {

using namespace std::chrono_literals;

class RecordingSink final : public CommandSink {
 public:
  void post(Command c) override { commands.push_back(std::move(c)); }
  std::vector<Command> commands;
};

class Headless : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::start_headless_imgui(ImVec2(1600, 1000));
  }
  void TearDown() override { ImGui::DestroyContext(); }

  // One frame with `panel` filling a window the size of the display; returns the vertex count.
  int frame(Panel& panel, const Snapshot& snap, CommandSink& sink) {
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImGui::GetIO().DisplaySize);
    ImGui::Begin("##content", nullptr, ImGuiWindowFlags_NoDecoration);
    panel.observe(snap);
    panel.draw(snap, sink);
    panel.shortcuts(snap, sink);
    ImGui::End();
    ImGui::Render();
    plot::exporter().process([](int, int, int, int) { return Image{}; }, ImVec2(1, 1), ImVec2(1600, 1000));
    return ImGui::GetDrawData()->TotalVtxCount;
  }
};

TEST_F(Headless, EveryPanelDrawsRealSnapshotsAndEmptyOnes) {
  namespace fs = std::filesystem;
  const fs::path runs = fs::temp_directory_path() / "tttlab_headless_runs";
  fs::remove_all(runs);
  Engine engine(make_engine_modules());
  auto panels = make_panels();
  ASSERT_EQ(panels.size(), 13u);
  for (auto& p : panels) p->sync(engine);
  // Small jobs, so the test stays quick: a short sample-text evaluation and sweep, and a training run.
  EvalSettings ev;
  ev.data = "sample";
  ev.seq_len = 64;
  ev.windows = 2;
  engine.post(EvaluationRun{ev});
  SweepSettings sw;
  sw.data = "sample";
  sw.seq_len = 16;
  sw.windows = 1;
  engine.post(SweepRun{sw, false});
  CurvesSettings cv;
  cv.data = "sample";
  cv.seq_len = 32;
  cv.sequences = 1;
  engine.post(CurvesRun{cv});
  TrainSettings tr;
  tr.data = "sample";
  tr.steps = 3;
  tr.batch_size = 2;
  tr.seq_len = 32;
  tr.eval_every = 1;
  tr.eval_windows = 1;
  tr.runs_dir = runs.string();
  engine.post(TrainStart{tr, "headless"});
  GenSettings gen;
  gen.max_tokens = 40;
  gen.tokens_per_second = 1e6;
  engine.post(GenerateStart{gen});
  LatencySettings lat;
  lat.layers = {"ttt-linear", "softmax-attention"};
  lat.max_context = 128;
  lat.repeats = 1;
  lat.decode_tokens = 2;
  engine.post(LatencyRun{lat});
  engine.start();
  std::shared_ptr<const Snapshot> snap;
  for (int i = 0; i < 6000; ++i) {  // until every job is done and the run has finished
    ASSERT_TRUE(engine.wait_quiescent(60s));
    snap = engine.snapshot();
    if (snap->training && !snap->training->runs.empty() &&
        snap->training->runs[0]->state == RunState::Finished && snap->generation && !snap->generation->running)
      break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(snap->stepper && snap->primal_dual && snap->evolution && snap->curves && snap->minibatch &&
              snap->training && snap->evaluation && snap->generation && snap->library);
  EXPECT_GT(snap->stepper->computed(), 0);
  EXPECT_EQ(snap->primal_dual->outcome, JobOutcome::Done);
  EXPECT_EQ(snap->curves->outcome, JobOutcome::Done);
  EXPECT_EQ(snap->evaluation->outcome, JobOutcome::Done);
  EXPECT_EQ(snap->minibatch->outcome, JobOutcome::Done);
  ASSERT_TRUE(snap->recall);
  EXPECT_EQ(snap->recall->outcome, JobOutcome::Done);
  ASSERT_TRUE(snap->latency);
  EXPECT_EQ(snap->latency->outcome, JobOutcome::Done);
  ASSERT_TRUE(snap->designer);
  EXPECT_EQ(snap->designer->outcome, JobOutcome::Done);
  ASSERT_TRUE(snap->nonparametric);
  EXPECT_EQ(snap->nonparametric->outcome, JobOutcome::Done);
  ASSERT_EQ(snap->training->runs.size(), 1u);
  EXPECT_EQ(snap->training->runs[0]->state, RunState::Finished);

  RecordingSink sink;
  const Snapshot empty;  // no module views yet: panels must draw nothing, not crash
  for (auto& p : panels) {
    SCOPED_TRACE(p->id());
    int verts = 0;
    for (int i = 0; i < 3; ++i) verts = frame(*p, *snap, sink);
    EXPECT_GT(verts, 3000) << "a real snapshot should draw plots, heat-maps or text";
    frame(*p, empty, sink);
  }
  EXPECT_TRUE(sink.commands.empty()) << "drawing without input must not send commands";
  engine.stop();
  fs::remove_all(runs);
}

TEST_F(Headless, ClassroomModeHidesTheChosenControls) {
  Engine engine(make_engine_modules());
  auto panels = make_panels();
  panels[0]->sync(engine);
  engine.start();
  ASSERT_TRUE(engine.wait_quiescent(30s));
  const auto snap = engine.snapshot();
  RecordingSink sink;
  for (int i = 0; i < 2; ++i) frame(*panels[0], *snap, sink);
  const int all = frame(*panels[0], *snap, sink);
  ClassroomState room;
  room.enabled = true;
  for (const auto& c : panels[0]->classroom_controls()) room.hidden.insert(c.id);
  classroom::set(room);
  for (int i = 0; i < 2; ++i) frame(*panels[0], *snap, sink);
  const int fewer = frame(*panels[0], *snap, sink);
  room.enabled = false;
  classroom::set(room);
  const int again = frame(*panels[0], *snap, sink);
  classroom::set(ClassroomState{});
  EXPECT_LT(fewer, all - 1000) << "the hidden controls are not drawn";
  EXPECT_NEAR(again, all, all * 0.05) << "switching the mode off shows them again";
  // Every control id names its panel.
  for (const auto& p : panels)
    for (const auto& c : p->classroom_controls())
      EXPECT_EQ(std::string(c.id).rfind(std::string(p->id()) + ".", 0), 0u) << c.id;
}

TEST_F(Headless, PanelsShowRejectedSettingsInsteadOfFailing) {
  Engine engine(make_engine_modules());
  engine.start();
  HeadConfig bad;
  bad.text.clear();
  engine.post(StepperConfigure{bad, 0});
  PrimalDualConfig pd;
  pd.head.source = HeadSource::Toy;
  pd.head.d = 500;
  engine.post(PrimalDualRun{pd});
  ASSERT_TRUE(engine.wait_quiescent(30s));
  const auto snap = engine.snapshot();
  EXPECT_FALSE(snap->stepper->error.empty());
  EXPECT_EQ(snap->primal_dual->outcome, JobOutcome::Failed);
  RecordingSink sink;
  for (auto& p : make_panels())
    for (int i = 0; i < 2; ++i) EXPECT_GT(frame(*p, *snap, sink), 0);
}

TEST_F(Headless, ShortcutsBecomeCommands) {
  Engine engine(make_engine_modules());
  engine.start();
  auto panels = make_panels();
  Panel& stepper = *panels[0];
  ASSERT_STREQ(stepper.id(), "inner_stepper");
  stepper.sync(engine);
  ASSERT_TRUE(engine.wait_quiescent(30s));
  const auto snap = engine.snapshot();
  RecordingSink sink;
  frame(stepper, *snap, sink);
  ImGuiIO& io = ImGui::GetIO();
  const auto press = [&](int key, bool shift) {
    io.KeysDown[key] = true;
    io.KeyShift = shift;
    frame(stepper, *snap, sink);
    io.KeysDown[key] = false;
    io.KeyShift = false;
    frame(stepper, *snap, sink);
  };
  press(GLFW_KEY_SPACE, false);
  press(GLFW_KEY_RIGHT, false);
  press(GLFW_KEY_RIGHT, true);
  press(GLFW_KEY_HOME, false);
  std::vector<StepperOp> ops;
  for (const auto& c : sink.commands)
    if (const auto* t = std::get_if<StepperTransport>(&c)) ops.push_back(t->op);
  EXPECT_EQ(ops, (std::vector<StepperOp>{StepperOp::TogglePlay, StepperOp::StepForward, StepperOp::NextMiniBatch,
                                         StepperOp::ToStart}));
}

// The registry lists one panel per lab feature, and the panel is the feature's: its id, name and summary
// come from lab/features.cpp, and its settings read what a lesson's scene reads.
TEST(PanelState, EveryFeatureHasOnePanel) {
  const auto panels = make_panels();
  for (const Feature& f : features()) {
    SCOPED_TRACE(f.id);
    const auto n = std::count_if(panels.begin(), panels.end(), [&](const auto& p) { return std::string(p->id()) == f.id; });
    ASSERT_EQ(n, 1);
    const auto& p = *std::find_if(panels.begin(), panels.end(), [&](const auto& q) { return std::string(q->id()) == f.id; });
    EXPECT_STREQ(p->name(), f.name);
    EXPECT_STREQ(p->summary(), f.summary);
    // What the panel saves is a valid entry for the headless scene reader too.
    const nlohmann::json saved = p->save_state();
    const nlohmann::json others = nlohmann::json::object();
    EXPECT_NO_THROW((void)f.scene(FieldReader(saved, std::string("panels.") + f.id), FieldReader(others, "panels")));
  }
}

TEST(PanelState, EveryPanelRoundTripsItsSettings) {
  for (auto& p : make_panels()) {
    SCOPED_TRACE(p->id());
    const nlohmann::json saved = p->save_state();
    p->parse_state(saved, std::string("panels.") + p->id())();
    EXPECT_EQ(p->save_state(), saved);
    if (!saved.contains("head")) continue;
    nlohmann::json changed = saved;
    changed["head"]["seed"] = 12345;
    changed["head"]["d"] = 8;
    changed["head"]["block"] = 2;
    p->parse_state(changed, std::string("panels.") + p->id())();
    EXPECT_EQ(p->save_state()["head"]["seed"], 12345);
    EXPECT_EQ(p->save_state()["head"]["d"], 8);
    EXPECT_EQ(p->save_state()["head"]["block"], 2);
    p->parse_state(saved, "p")();
    EXPECT_EQ(p->save_state(), saved);
  }
}

TEST(PanelState, EveryLessonsStateFileAppliesToThePanels) {
  const auto dir = find_resource("lessons");
  ASSERT_TRUE(dir);
  auto panels = make_panels();
  int files = 0;
  std::vector<std::filesystem::path> scenes;  // every lesson's scene and extra experiment
  for (const auto& e : std::filesystem::directory_iterator(*dir))
    if (e.path().extension() == ".tttlab") scenes.push_back(e.path());
  std::sort(scenes.begin(), scenes.end());
  for (const auto& scene : scenes) {
    SCOPED_TRACE(scene.string());
    const nlohmann::json doc = read_state_file(scene);
    for (auto& p : panels)
      if (doc["panels"].contains(p->id())) {
        EXPECT_NO_THROW(p->parse_state(doc["panels"][p->id()], p->id())());
      }
    if (doc.contains("classroom")) {
      EXPECT_NO_THROW(classroom::from_json(FieldReader(doc["classroom"], "classroom")));
    }
    ++files;
  }
  EXPECT_GE(files, 3);
}

TEST(PanelState, BadSettingsAreRefusedWithTheFieldAndChangeNothing) {
  auto panels = make_panels();
  const auto expect_error = [](Panel& p, const char* json, const char* needle) {
    try {
      p.parse_state(nlohmann::json::parse(json), std::string("panels.") + p.id());
      ADD_FAILURE() << "accepted " << json;
    } catch (const StateError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const auto by_id = [&](const char* id) -> Panel& {
    for (auto& p : panels)
      if (std::string(p->id()) == id) return *p;
    throw std::logic_error(id);
  };
  Panel& stepper = by_id("inner_stepper");
  Panel& pd = by_id("primal_dual");
  const auto before = stepper.save_state();
  expect_error(stepper, R"({"head": {"d": 1000}})", "panels.inner_stepper.head.d");
  expect_error(stepper, R"({"head": {"text": ""}})", "panels.inner_stepper.head: the input text is empty");
  expect_error(stepper, R"({"view": {"colours": "rainbow"}})", "panels.inner_stepper.view.colours");
  expect_error(stepper, R"({"cursor": "ten"})", "panels.inner_stepper.cursor");
  expect_error(stepper, R"([1, 2, 3])", "expected an object");
  expect_error(pd, R"({"timing_reps": 0})", "panels.primal_dual.timing_reps");
  expect_error(pd, R"({"precision": "half"})", "panels.primal_dual.precision");
  expect_error(by_id("evolution"), R"({"head": {"text": ""}})", "panels.evolution.head: the input text is empty");
  expect_error(by_id("inner_curves"), R"({"sequences": 0})", "panels.inner_curves.sequences");
  expect_error(by_id("minibatch"), R"({"mode": "guess"})", "panels.minibatch.mode");
  expect_error(by_id("training"), R"({"settings": {"layer": "rnn"}})", "panels.training.settings.layer");
  expect_error(by_id("training"), R"({"runs": [1]})", "panels.training.runs[0]");
  expect_error(by_id("evaluation"), R"({"models": []})", "panels.evaluation.models");
  expect_error(by_id("generation"), R"({"prompt": ""})", "panels.generation.prompt");
  expect_error(by_id("generation"), R"({"temperature": -1})", "panels.generation.temperature");
  EXPECT_EQ(stepper.save_state(), before);
}

TEST(PanelState, ABlockOrHeadTheModelLacksIsRefusedAndChangesNothing) {
  // The shipped tiny-brown has 4 blocks of 4 heads: block 9 is refused while the file loads, so the
  // view never shows one block on its slider while the engine reports another.
  for (auto& p : make_panels()) {
    const std::string id = p->id();
    const std::string path = "panels." + id;
    const bool nonparametric = id == "nonparametric";
    if (!nonparametric && !p->save_state().contains("head")) continue;
    SCOPED_TRACE(id);
    const nlohmann::json before = p->save_state();
    const auto refused = [&](const nlohmann::json& settings, const std::string& message) {
      try {
        p->parse_state(settings, path);
        ADD_FAILURE() << "accepted " << settings.dump();
      } catch (const StateError& e) {
        EXPECT_EQ(std::string(e.what()), path + message);
      }
      EXPECT_EQ(p->save_state(), before);
    };
    if (nonparametric) {
      refused({{"model_id", "random:softmax-attention:t:0"}, {"block", 9}},
              ".block: block 9 does not exist: the model has 4 blocks (0 … 3)");
      refused({{"model_id", "random:softmax-attention:t:0"}, {"attention_head", 4}},
              ".attention_head: head 4 does not exist: the model has 4 heads (0 … 3)");
      continue;
    }
    refused({{"head", {{"source", "model"}, {"model_id", "shipped"}, {"block", 9}}}},
            ".head.block: block 9 does not exist: the model has 4 blocks (0 … 3)");
    refused({{"head", {{"source", "model"}, {"model_id", "shipped"}, {"head", 4}}}},
            ".head.head: head 4 does not exist: the model has 4 heads (0 … 3)");
    EXPECT_NO_THROW(p->parse_state({{"head", {{"source", "model"}, {"model_id", "shipped"}, {"block", 3}}}}, path));
  }
}

}  // namespace
}  // namespace tttlab::gui

namespace tttlab::gui {
namespace {

// The block slider shows the block the settings name, even one the model lacks (the engine's error
// names it too), never the model's last block in its place.
TEST_F(Headless, TheBlockSliderShowsTheBlockTheSettingsName) {
  LibraryView library;
  ModelInfo shipped;
  shipped.id = kShippedModelId;
  shipped.loaded = true;
  shipped.config = ModelConfig::preset("tiny");
  ASSERT_EQ(shipped.config.num_hidden_layers, 4);
  library.models.push_back(shipped);
  widgets::HeadEditorOptions opt;
  opt.library = &library;
  const auto shown = [&](int block) {
    HeadConfig c;
    c.block = block;
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(400, 1000));
    ImGui::Begin("##controls", nullptr, ImGuiWindowFlags_NoDecoration);
    ImGui::LogToBuffer();
    widgets::head_editor(c, opt);
    const std::string text = GImGui->LogBuffer.c_str();
    ImGui::LogFinish();
    ImGui::End();
    ImGui::Render();
    return text;
  };
  EXPECT_NE(shown(2).find("block 2"), std::string::npos);
  const std::string nine = shown(9);
  EXPECT_NE(nine.find("block 9"), std::string::npos) << nine;
  EXPECT_EQ(nine.find("block 3"), std::string::npos) << nine;
}

TEST_F(Headless, PlotExportReadsTheRectangleOfThePlotAfterTwoFrames) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "tttlab_export_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  plot::exporter().set_directory(dir);

  Engine engine(make_engine_modules());
  auto panels = make_panels();
  panels[0]->sync(engine);
  engine.start();
  ASSERT_TRUE(engine.wait_quiescent(30s));
  const auto snap = engine.snapshot();
  RecordingSink sink;
  const auto draw = [&](std::vector<std::array<int, 4>>* reads) {
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImGui::GetIO().DisplaySize);
    ImGui::Begin("##content", nullptr, ImGuiWindowFlags_NoDecoration);
    panels[0]->draw(*snap, sink);
    ImGui::End();
    ImGui::Render();
    plot::exporter().process(
        [&](int x, int y, int w, int h) {
          reads->push_back({x, y, w, h});
          Image img;
          img.width = w;
          img.height = h;
          img.rgba.assign(static_cast<std::size_t>(w) * h * 4, 128);
          return img;
        },
        ImVec2(2, 2), ImVec2(3200, 2000));  // framebuffer scale 2: pixels = 2 × ImGui units
  };
  std::vector<std::array<int, 4>> reads;
  draw(&reads);
  const auto names = plot::exporter().on_screen();
  EXPECT_NE(std::find(names.begin(), names.end(), "inner_losses"), names.end());
  ASSERT_TRUE(plot::exporter().request_png_by_name("inner_losses"));
  EXPECT_FALSE(plot::exporter().request_png_by_name("no_such_plot"));
  draw(&reads);
  EXPECT_TRUE(reads.empty()) << "the capture waits a frame so menus and hover marks are gone";
  draw(&reads);
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_GT(reads[0][2], 600);  // the loss plot is wide…
  EXPECT_GT(reads[0][3], 300);  // …and at least 150 units tall, at scale 2
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].extension(), ".png");
  EXPECT_NE(files[0].filename().string().find("tttlab_inner_losses_"), std::string::npos);
  EXPECT_TRUE(plot::exporter().save_text("inner_losses", "csv", "t,loss\n0,1\n"));
  fs::remove_all(dir);
  plot::exporter().set_directory(".");
}

}  // namespace
}  // namespace tttlab::gui
