// The graded-exercise card drawn headless (an ImGui context without a window) in every state: empty,
// unreadable input, wrong, right, the answer shown, and with the teacher hiding the answers; and a
// click on "Check my answer" marking the typed answer.
#include <gtest/gtest.h>
#include <imgui.h>

#include "app/gui/headless_imgui.hpp"
#include "course/classroom.hpp"
#include "course/exercise.hpp"
#include "course/lesson.hpp"
#include "gui/lessons/exercise_card.hpp"

namespace tttlab::gui {
namespace {

using course::ClassroomState;
namespace classroom = course::classroom;

const char* kLesson = R"(---
title: Exercises
goal: Draw the exercise card.
duration: 5
scene: scene.tttlab
---
```exercise
id: formula
ask: Write the state size of a TTT-MLP head as a formula in d.
answer: 8*d^2 + 5*d
vars: d = 32
explain: 4d² + 4d + 4d² + d.
```

```exercise
id: number
ask: And at d = 32?
answer: 8352
unit: numbers
tolerance: 0.5
explain: 8 · 1,024 + 160.
```

```predict
ask: a
measure: m
choice: x | > 0
choice: y | <= 0
```

```check
claim: c
measure: m
expect: > 0
```
)";

class ExerciseCardHeadless : public ::testing::Test {
 protected:
  void SetUp() override { testing::start_headless_imgui(ImVec2(1280, 720)); }
  void TearDown() override {
    ImGui::DestroyContext();
    classroom::set(ClassroomState{});
  }
  int frame(course::ExerciseBook& book) {
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(460, 720));
    ImGui::Begin("##pane", nullptr, ImGuiWindowFlags_NoDecoration);
    for (int i = 0; i < static_cast<int>(book.size()); ++i) draw_exercise_card(book, i, 440);
    ImGui::End();
    ImGui::Render();
    return ImGui::GetDrawData()->TotalVtxCount;
  }
};

TEST_F(ExerciseCardHeadless, DrawsEveryStateAndChecksOnClick) {
  const course::Lesson L = course::parse_lesson(kLesson, "lessons/01-x.md");
  course::ExerciseBook book(L.exercises, L.name, nullptr);
  EXPECT_GT(frame(book), 500);

  // Type an answer, then click "Check my answer", scanning down the first card for the button (to
  // the right of the input box).
  book.input(0) = "d*(8*d + 5)";
  ImGuiIO& io = ImGui::GetIO();
  for (float y = 20; y < 300 && book.state(0).attempts == 0; y += 4) {
    io.MousePos = ImVec2(390, y);
    io.MouseDown[0] = true;
    frame(book);
    io.MouseDown[0] = false;
    frame(book);
  }
  EXPECT_EQ(book.state(0).attempts, 1) << "clicking the button checks the answer";
  EXPECT_TRUE(book.state(0).right);
  EXPECT_TRUE(book.state(0).first_right);
  EXPECT_GT(frame(book), 500);

  // Unreadable, then wrong three times: the explanation opens; the teacher can hide it.
  book.input(1) = "abc";
  book.check(1);
  EXPECT_FALSE(book.state(1).message.empty());
  EXPECT_GT(frame(book), 500);
  for (const char* wrong : {"8000", "8,000", "1.05e3"}) {
    book.input(1) = wrong;
    EXPECT_EQ(book.check(1).kind, course::Mark::Kind::Wrong);
    EXPECT_GT(frame(book), 500);
  }
  EXPECT_TRUE(book.explained(1, true));
  ClassroomState room;
  room.enabled = true;
  room.allow_answers = false;
  classroom::set(room);
  EXPECT_FALSE(book.explained(1, classroom::answers_allowed()));
  EXPECT_GT(frame(book), 500);
  classroom::set(ClassroomState{});
  book.show_answer(1);
  EXPECT_FALSE(book.can_check(1));
  EXPECT_GT(frame(book), 500);
}

}  // namespace
}  // namespace tttlab::gui
