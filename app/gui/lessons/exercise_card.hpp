// app/gui/lessons/exercise_card.hpp — a graded exercise in the lesson pane: the question, an input box
// and "Check my answer"; after an attempt, right or wrong and the attempts so far; the explanation once
// right, or (where the teacher allows answers) after three attempts or "Show the answer". The checking
// and the record are course::ExerciseBook's. UI thread only.
#pragma once

#include "course/exercise.hpp"

namespace tttlab::gui {

void draw_exercise_card(course::ExerciseBook& book, int i, float width);

}  // namespace tttlab::gui
