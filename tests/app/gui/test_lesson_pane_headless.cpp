// The lesson pane and the veil drawn headless (an ImGui context without a window) in every state a
// prediction, a question and a check go through, with classroom mode hiding hints and answers, and a
// click on "Lock in my prediction" turning into a locked prediction.
#include <gtest/gtest.h>
#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "course/lesson.hpp"
#include "course/classroom.hpp"
#include "lab/engine/snapshot.hpp"
#include "gui/fonts.hpp"
#include "gui/lessons/lesson_pane.hpp"
#include "course/lesson_session.hpp"
#include "gui/lab.hpp"
#include "app/gui/headless_imgui.hpp"

namespace tttlab::gui {
namespace {

namespace fs = std::filesystem;

using testing::NullSink;

const char* kPaneLesson = R"(---
title: Every widget
goal: Draw every part of a lesson.
duration: 15
scene: scene.tttlab
---
# 1. Every widget

Text with *emphasis*, `code` and **strong** words, long enough to wrap over several lines in a narrow
pane.

```predict
id: first
ask: Which one?
measure: max_rel_diff
choice: The first answer, which is long enough to wrap inside the pane when the pane is narrow. | <= 1e-12
choice: The second. | > 1e-12
reveal: Because *rounding*.
```

```question
ask: Why?
hint: Think of the sums.
answer: They are the same sums in another order.
```

```check
claim: They agree.
measure: max_rel_diff
expect: <= 1e-12
```

```check
claim: The dual form is faster.
measure: dual_speedup
expect: > 1
depends-on-device: yes
```

```predict
id: slider
ask: How many tokens?
measure: tokens
slider: 0 .. 100
tolerance: 1
unit: tokens
```
)";

class LessonPaneHeadless : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::start_headless_imgui(ImVec2(1280, 720));
    m_dir = fs::temp_directory_path() / ("tttlab_pane_headless_" + std::to_string(::getpid()));
    fs::create_directories(m_dir);
    std::ofstream(m_dir / "scene.tttlab") << R"({"format": "tttlab-state", "active_panel": "primal_dual",
      "panels": {"primal_dual": {"head": {"source": "toy", "text": "the moon", "d": 4, "mini_batch": 4}}}})";
    std::ofstream(m_dir / "01-every.md") << kPaneLesson;
  }
  void TearDown() override {
    ImGui::DestroyContext();
    classroom::set(ClassroomState{});
    std::error_code ec;
    fs::remove_all(m_dir, ec);
  }

  // One frame: the pane in a 460 px window (as docked at 1280 × 720), the veil beside it.
  int frame(LessonSession& s, const Snapshot& snap, CommandSink& sink, const LessonPaneHost& host) {
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(460, 720));
    ImGui::Begin("##pane", nullptr, ImGuiWindowFlags_NoDecoration);
    draw_lesson_pane(s, snap, sink, host);
    ImGui::End();
    ImGui::SetNextWindowPos(ImVec2(460, 0));
    ImGui::SetNextWindowSize(ImVec2(820, 720));
    ImGui::Begin("##view", nullptr, ImGuiWindowFlags_NoDecoration);
    draw_lesson_veil(s);
    ImGui::End();
    ImGui::Render();
    return ImGui::GetDrawData()->TotalVtxCount;
  }

  // The text one frame of the pane draws (read through ImGui's log).
  std::string drawn(LessonSession& s, const Snapshot& snap, CommandSink& sink, const LessonPaneHost& host) {
    ImGuiContext& g = *GImGui;
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(460, 4000));
    ImGui::Begin("##pane", nullptr, ImGuiWindowFlags_NoDecoration);
    g.LogBuffer.clear();
    ImGui::LogToBuffer();
    draw_lesson_pane(s, snap, sink, host);
    std::string text = g.LogBuffer.c_str();
    ImGui::LogFinish();
    ImGui::End();
    ImGui::Render();
    return text;
  }

  fs::path m_dir;
};

// A lesson opened after another starts at its top in its very first frame, wherever the pane was
// scrolled to before.
TEST_F(LessonPaneHeadless, AnOpenedLessonStartsAtItsTop) {
  const auto frame_with = [](bool from_top, float scroll_to) {
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(460, 720));
    ImGui::Begin("##host", nullptr, ImGuiWindowFlags_NoDecoration);
    begin_lesson_pane_window("##lesson_pane", ImVec2(460, 700), from_top);
    const float scroll = ImGui::GetScrollY();
    ImGui::Dummy(ImVec2(400, 5000));  // a long lesson
    if (scroll_to >= 0) ImGui::SetScrollY(scroll_to);
    ImGui::EndChild();
    ImGui::End();
    ImGui::Render();
    return scroll;
  };
  frame_with(false, -1);
  frame_with(false, 3000);  // the student scrolls to the end of a lesson
  EXPECT_FLOAT_EQ(frame_with(false, -1), 3000.0f) << "the pane keeps its place while the lesson stays";
  EXPECT_FLOAT_EQ(frame_with(true, -1), 0.0f) << "the next lesson's first frame is drawn from its top";
  EXPECT_FLOAT_EQ(frame_with(false, -1), 0.0f);
}

// The lesson stops after the first prediction not locked in; "Predict again" keeps the first answer,
// and the card says what it was and how many retries followed.
TEST_F(LessonPaneHeadless, ReadsOnOnlyPastLockedPredictionsAndShowsTheFirstAnswer) {
  const course::Lesson L = course::read_lesson(m_dir / "01-every.md");
  LessonSession s(L, nullptr);
  NullSink sink;
  const Snapshot snap;
  LessonPaneHost host;
  host.open_scene = [](const fs::path&) { return true; };
  ImGui::GetIO().DisplaySize = ImVec2(1280, 4000);  // nothing clipped: everything drawn is logged
  // Compared without whitespace: the log separates the words it is given with spaces and newlines.
  const auto squeeze = [](std::string x) {
    x.erase(std::remove_if(x.begin(), x.end(), [](unsigned char c) { return std::isspace(c) != 0; }), x.end());
    return x;
  };
  const auto has = [&](const std::string& text, const char* part) {
    return squeeze(text).find(squeeze(part)) != std::string::npos;
  };

  std::string t = drawn(s, snap, sink, host);
  EXPECT_TRUE(has(t, "Which one?"));
  EXPECT_TRUE(has(t, "Lock in your prediction to read on."));
  EXPECT_FALSE(has(t, "Why?")) << "the question after the prediction waits";
  EXPECT_FALSE(has(t, "How many tokens?")) << "so does the next prediction";

  s.choose(0, 1);
  ASSERT_TRUE(s.lock(0));
  t = drawn(s, snap, sink, host);
  EXPECT_TRUE(has(t, "Why?"));
  EXPECT_TRUE(has(t, "How many tokens?"));
  EXPECT_FALSE(has(t, "Lock in your prediction to read on.")) << "the slider is the last part: nothing waits for it";
  EXPECT_FALSE(has(t, "Your first prediction"));

  course::Measures m;
  m["max_rel_diff"] = course::Measurement{1e-16, std::nullopt, std::nullopt, false};
  m["dual_speedup"] = course::Measurement{1.4, 1.1, 1.9, true};
  m["tokens"] = course::Measurement{8, std::nullopt, std::nullopt, false};
  s.apply_measures("", m);
  s.forget(0);
  t = drawn(s, snap, sink, host);
  EXPECT_TRUE(has(t, "Your first prediction: The second. (not right)")) << t;
  EXPECT_FALSE(has(t, "Why?")) << "predicting again hides what follows again";
  s.choose(0, 0);
  ASSERT_TRUE(s.lock(0));
  s.apply_measures("", m);
  t = drawn(s, snap, sink, host);
  EXPECT_TRUE(has(t, "Your first prediction: The second. (not right)")) << t;
  EXPECT_TRUE(has(t, "1 retry")) << t;
  EXPECT_EQ(s.record(0).choice, 1);
  ASSERT_EQ(s.record(0).retries.size(), 1u);
  EXPECT_TRUE(s.record(0).retries[0].right);
}

TEST_F(LessonPaneHeadless, DrawsEveryStateAndLocksOnClick) {
  const course::Lesson L = course::read_lesson(m_dir / "01-every.md");
  LessonSession s(L, nullptr);
  NullSink sink;
  const Snapshot snap;
  int opened = 0;
  bool left = false;
  LessonPaneHost host;
  host.open_scene = [&](const fs::path&) {
    ++opened;
    return true;
  };
  host.engine_quiet = [] { return false; };
  host.leave = [&] { left = true; };
  host.start_lesson = [](const std::string&) {};
  host.next_lesson = "02-next";
  host.next_lesson_title = "The next one";

  EXPECT_GT(frame(s, snap, sink, host), 1000);

  // Click the first choice, then "Lock in my prediction", scanning down the pane for them.
  ImGuiIO& io = ImGui::GetIO();
  const auto click_at = [&](ImVec2 p) {
    io.MousePos = p;
    io.MouseDown[0] = true;
    frame(s, snap, sink, host);
    io.MouseDown[0] = false;
    frame(s, snap, sink, host);
  };
  bool chose = false;
  for (float y = 100; y < 700 && !chose; y += 6) {
    click_at(ImVec2(200, y));
    chose = s.prediction(0).choice == 0;
  }
  ASSERT_TRUE(chose) << "clicking the first choice's row chooses it";
  EXPECT_FALSE(s.prediction(0).locked);
  for (float y = 100; y < 700 && !s.prediction(0).locked; y += 6) click_at(ImVec2(110, y));
  EXPECT_TRUE(s.prediction(0).locked) << "the lock button locks the prediction in";
  EXPECT_TRUE(s.veiled()) << "the slider further on asks about the same view";

  // Locked: "Run the experiment" asks the app to open the scene.
  for (float y = 100; y < 700 && opened == 0; y += 6) click_at(ImVec2(130, y));
  EXPECT_EQ(opened, 1) << "running the experiment opens the lesson's scene";
  EXPECT_TRUE(s.running());
  frame(s, snap, sink, host);  // the spinner
  s.cancel_run();

  // Revealed, with the device-dependent check measured; hints and answers shown, then hidden by the
  // teacher.
  course::Measures m;
  m["max_rel_diff"] = course::Measurement{1e-16, std::nullopt, std::nullopt, false};
  m["dual_speedup"] = course::Measurement{1.4, 1.1, 1.9, true};
  m["tokens"] = course::Measurement{8, std::nullopt, std::nullopt, false};
  s.apply_measures("", m);
  s.show_hint(0, true);
  s.show_answer(0, true);
  EXPECT_GT(frame(s, snap, sink, host), 1000);
  ClassroomState room;
  room.enabled = true;
  room.allow_hints = false;
  room.allow_answers = false;
  classroom::set(room);
  EXPECT_GT(frame(s, snap, sink, host), 1000);
  EXPECT_FALSE(left);
  EXPECT_EQ(sink.posted, 0) << "drawing posts nothing while no run waits";
}

}  // namespace
}  // namespace tttlab::gui
