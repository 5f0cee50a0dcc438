// app/course/handout.hpp — a printable page per lesson, for a class that works on paper beside the app
// (`tttlab lessons handout`).
//
// A handout is one self-contained HTML file (its style sheet inline, nothing fetched) that a browser
// prints on A4 or Letter: the lesson's title, goal and duration, its text, every prediction as a
// question with boxes to tick or a line to write the value on, and every question with room to answer.
// The student's version leaves out everything that gives an answer away: each prediction's reveal and
// the ranges that make a choice right, the questions' answers, the exercises' keys and explanations,
// the engine's checks (their claims state the results) and the "The reveal" sections. The teacher's version (with_answers) keeps them all,
// each marked as an answer.
//
// The lesson's Markdown is turned into HTML by md4c's HTML renderer, with raw HTML in the lesson
// escaped rather than passed through, so a lesson cannot put script or markup into the page.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "course/lesson.hpp"

namespace tttlab::course {

struct HandoutOptions {
  bool with_answers = false;
};

// The page of one lesson. Throws LessonError when the Markdown renderer is not available (a build
// without md4c's HTML renderer) or fails.
std::string handout_html(const Lesson& lesson, const HandoutOptions& options);

// An index page that links the handouts of `lessons` (file names as handout_file_name gives them).
std::string handout_index_html(const std::vector<const Lesson*>& lessons, const HandoutOptions& options);

// "<lesson name>.html", or "<lesson name>-answers.html" for the teacher's version, so both can sit in
// one folder.
std::string handout_file_name(const Lesson& lesson, const HandoutOptions& options);

// Whether this build can render handouts (md4c's HTML renderer was found at configure time).
bool handouts_available();

}  // namespace tttlab::course
