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
// Figures (`--figures`): a picture of the view of each of the lesson's experiments, its own scene
// under the header (the lesson opens with it), each ```experiment block's where the block stands. They
// are sealed as the app seals the live view: a view that a prediction asks about (LessonSession::
// veiled) stays out of the student's copy, which says "Figure in the app after your prediction"
// instead, and so does a figure whose block lies in a "The reveal" section the student's copy leaves
// out. The pictures themselves are rendered by the caller (the app's offscreen screenshots); this file
// only decides which ones a page shows and places them.
//
// The lesson's Markdown is turned into HTML by md4c's HTML renderer, with raw HTML in the lesson
// escaped rather than passed through, so a lesson cannot put script or markup into the page.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "course/lesson.hpp"

namespace tttlab::course {

struct HandoutOptions {
  bool with_answers = false;
  // Place the lesson's figures (or, in the student's copy, the line that stands for a sealed one).
  bool figures = false;
  // The picture of each figure the page shows (handout_figures, `shown`), by experiment id ("" = the
  // lesson's scene): a path relative to the page, e.g. "figures/03-the-learning-rate.png".
  std::map<std::string, std::string> figure_files;
};

// The view of one of the lesson's experiments, as a handout's figure.
struct HandoutFigure {
  std::string experiment;       // "" = the lesson's own scene
  std::filesystem::path scene;  // the .tttlab state file whose view the picture shows
  // A prediction asks about this view (its experiment, or another that opens the same scene file): the
  // app veils it until the prediction is locked in, so the student's copy leaves it out.
  bool guarded = false;
  // The ```experiment block stands in a "The reveal" section (which the student's copy leaves out).
  bool in_reveal = false;
  bool shown = false;           // the page with these options shows the picture itself
  std::string caption;          // names the experiment and its scene file
};

// The lesson's figures, its own scene first, then its ```experiment blocks in the order of the text,
// with `shown` for the copy `options` asks for (the figure_files are not read).
std::vector<HandoutFigure> handout_figures(const Lesson& lesson, const HandoutOptions& options);

// The page of one lesson. Throws LessonError when the Markdown renderer is not available (a build
// without md4c's HTML renderer) or fails, or when options.figures is set and a figure the page shows
// has no picture in options.figure_files.
std::string handout_html(const Lesson& lesson, const HandoutOptions& options);

// An index page that links the handouts of `lessons` (file names as handout_file_name gives them).
std::string handout_index_html(const std::vector<const Lesson*>& lessons, const HandoutOptions& options);

// "<lesson name>.html", or "<lesson name>-answers.html" for the teacher's version, so both can sit in
// one folder.
std::string handout_file_name(const Lesson& lesson, const HandoutOptions& options);

// Whether this build can render handouts (md4c's HTML renderer was found at configure time).
bool handouts_available();

}  // namespace tttlab::course
