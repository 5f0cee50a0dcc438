// app/course/handout.cpp — printable lesson pages (format in handout.hpp).
#include "course/handout.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "course/course_session.hpp"

#if defined(TTTLAB_HAVE_MD4C_HTML)
#include <md4c-html.h>
#endif

namespace tttlab::course {
namespace {

// Keeps the page's text readable where the font has no glyph, and prints in black on white.
constexpr const char* kStyle = R"css(
body { font-family: "DejaVu Serif", Georgia, serif; font-size: 11pt; line-height: 1.45; color: #000;
       max-width: 44em; margin: 2em auto; padding: 0 1em; }
header .course { font-family: "DejaVu Sans", sans-serif; font-size: 9pt; letter-spacing: 0.08em;
                 text-transform: uppercase; color: #444; }
header h1 { margin: 0.2em 0 0.1em; font-size: 20pt; }
header .goal { color: #333; font-style: italic; margin-top: 0; }
h2 { font-size: 14pt; margin-top: 1.4em; border-bottom: 1px solid #999; }
code, pre { font-family: "DejaVu Sans Mono", monospace; font-size: 9.5pt; }
pre { background: #f4f4f4; padding: 0.5em; white-space: pre-wrap; }
.block { border: 1px solid #888; border-left: 4px solid #000; padding: 0.4em 0.9em 0.7em; margin: 1.1em 0;
         break-inside: avoid; page-break-inside: avoid; }
.block .label { font-family: "DejaVu Sans", sans-serif; font-size: 8.5pt; font-weight: bold;
                letter-spacing: 0.08em; text-transform: uppercase; margin: 0.3em 0; }
.block p { margin: 0.35em 0; }
.choices { list-style: none; padding-left: 0.2em; }
.choices li { margin: 0.35em 0; }
.choices li::before { content: "\2610\00a0\00a0"; font-size: 13pt; }
.line { border-bottom: 1px solid #666; height: 1.9em; }
.hint { font-size: 9.5pt; color: #333; }
.answer { border-top: 1px dashed #666; margin-top: 0.6em; padding-top: 0.3em; }
.answer .label { color: #000; }
figure.view { margin: 1.1em 0; break-inside: avoid; page-break-inside: avoid; }
figure.view img { display: block; width: 100%; height: auto; border: 1px solid #888; }
figure.view figcaption { font-family: "DejaVu Sans", sans-serif; font-size: 8.5pt; color: #333; margin-top: 0.3em; }
figure.view.sealed { border: 1px dashed #888; padding: 0.5em 0.9em; font-style: italic; }
footer { margin-top: 2.5em; font-size: 8.5pt; color: #555; border-top: 1px solid #bbb; padding-top: 0.4em; }
@page { margin: 16mm 16mm 18mm; }
@media print { body { margin: 0; max-width: none; } a { color: #000; text-decoration: none; } }
)css";

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string markdown_html(std::string_view md) {
#if defined(TTTLAB_HAVE_MD4C_HTML)
  std::string out;
  const auto sink = [](const MD_CHAR* text, MD_SIZE size, void* user) {
    static_cast<std::string*>(user)->append(text, size);
  };
  // NOHTML: a lesson's raw HTML is shown as text, never passed into the page.
  const unsigned parser = MD_DIALECT_COMMONMARK | MD_FLAG_NOHTML;
  if (md_html(md.data(), static_cast<MD_SIZE>(md.size()), sink, &out, parser, 0) != 0)
    throw LessonError("the Markdown renderer failed");
  return out;
#else
  (void)md;
  throw LessonError("this build has no Markdown-to-HTML renderer (install libmd4c-html0-dev and rebuild)");
#endif
}

std::string block(const char* cls, const char* label, const std::string& body) {
  return std::string("<section class=\"block ") + cls + "\"><div class=\"label\">" + label + "</div>\n" + body +
         "</section>\n";
}

std::string answer(const char* label, const std::string& body) {
  return std::string("<div class=\"answer\"><div class=\"label\">") + label + "</div>\n" + body + "</div>\n";
}

std::string blank_lines(int n) {
  std::string s;
  for (int k = 0; k < n; ++k) s += "<div class=\"line\"></div>\n";
  return s;
}

std::string number_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

std::string prediction_html(const Prediction& p, bool with_answers) {
  std::string body = markdown_html(p.ask);
  if (!p.is_slider()) {
    body += "<ul class=\"choices\">\n";
    for (const auto& c : p.choices) body += "<li>" + escape(c.text) + "</li>\n";
    body += "</ul>\n";
  } else {
    body += "<p>Your value (between " + number_text(p.slider_min) + " and " + number_text(p.slider_max) +
            (p.unit.empty() ? std::string() : " " + escape(p.unit)) + "):</p>\n" + blank_lines(1);
  }
  body += "<p class=\"hint\">Why? One sentence:</p>\n" + blank_lines(2);
  if (with_answers) {
    std::string key;
    if (!p.is_slider()) {
      key += "<ul>\n";
      for (const auto& c : p.choices)
        key += "<li>" + escape(c.text) + " <em>Right when the measured " + escape(p.measure) + " is " +
               escape(c.when.text) + ".</em></li>\n";
      key += "</ul>\n";
    } else {
      key += "<p>Right within " + number_text(p.tolerance) + (p.unit.empty() ? "" : " " + escape(p.unit)) +
             " of the measured " + escape(p.measure) + ".</p>\n";
    }
    if (!p.reveal.empty()) key += markdown_html(p.reveal);
    body += answer("Answer key", key);
  }
  return block("predict", "Predict first", body);
}

std::string question_html(const Question& q, bool with_answers) {
  std::string body = markdown_html(q.ask);
  if (!q.hint.empty()) body += "<div class=\"hint\"><strong>Hint.</strong> " + markdown_html(q.hint) + "</div>\n";
  body += blank_lines(4);
  if (with_answers && !q.answer.empty()) body += answer("Answer", markdown_html(q.answer));
  return block("question", "Think about it", body);
}

std::string exercise_html(const Exercise& x, bool with_answers) {
  std::string body = markdown_html(x.ask);
  std::string form = x.is_expression() ? "a formula in " : "a number";
  for (std::size_t k = 0; k < x.var_names.size(); ++k)
    form += (k == 0 ? "" : k + 1 == x.var_names.size() ? " and " : ", ") + escape(x.var_names[k]);
  body += "<p class=\"hint\">Your answer (" + form + (x.unit.empty() ? std::string() : ", in " + escape(x.unit)) +
          "):</p>\n" + blank_lines(1);
  if (with_answers) {
    std::string key = "<p><code>" + escape(x.answer) + "</code>" + (x.unit.empty() ? "" : " " + escape(x.unit)) +
                      ", within " + (x.relative ? number_text(x.tolerance * 100) + " %" : number_text(x.tolerance)) +
                      ".</p>\n";
    if (!x.explain.empty()) key += markdown_html(x.explain);
    body += answer("Answer key", key);
  }
  return block("exercise", "Exercise", body);
}

std::string check_html(const Check& c) {
  return block("check", "The engine checks",
               markdown_html(c.claim) + "<p class=\"hint\">Measure " + escape(c.measure) + ", expected " +
                   escape(c.expect.text) + (c.depends_on_device ? " (a speed: reported, not judged)" : "") +
                   ".</p>\n");
}

bool is_heading(std::string_view line, int level) {
  const std::string marks(static_cast<std::size_t>(level), '#');
  return line.size() > marks.size() && line.substr(0, marks.size()) == marks && line[marks.size()] == ' ';
}

// The Markdown of the lesson's text parts, with the title heading dropped (the page's header shows
// it) and, for students, the "The reveal" sections dropped. `in_reveal` carries across parts (and
// across the pieces a figure splits a part into): a section runs from its level-2 heading to the next
// one, whatever blocks lie between.
std::string prose(std::string_view md, bool with_answers, bool& in_reveal) {
  std::string out;
  bool fenced = false;
  std::size_t i = 0;
  while (i < md.size()) {
    std::size_t j = md.find('\n', i);
    if (j == std::string_view::npos) j = md.size();
    const std::string_view line = md.substr(i, j - i);
    i = j + 1;
    if (line.substr(0, 3) == "```") fenced = !fenced;
    if (!fenced && is_heading(line, 1)) continue;
    if (!fenced && is_heading(line, 2)) in_reveal = is_reveal_heading(line);
    if (in_reveal && !with_answers) continue;
    out.append(line);
    out += '\n';
  }
  return out;
}

// Whether the ```experiment block that stood at (part, offset) lies in a "The reveal" section.
bool in_reveal_at(const Lesson& L, std::size_t part, std::size_t offset) {
  bool in_reveal = false;
  for (std::size_t k = 0; k < L.parts.size() && k <= part; ++k) {
    if (L.parts[k].kind != LessonPart::Kind::Markdown) continue;
    const std::string& md = L.parts[k].markdown;
    prose(k < part ? std::string_view(md) : std::string_view(md).substr(0, std::min(offset, md.size())), true,
          in_reveal);
  }
  return in_reveal;
}

bool same_scene(const std::filesystem::path& a, const std::filesystem::path& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec)) return true;
  return std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec);
}

// A relative path as an attribute value: every byte but the unreserved ones and '/' percent-encoded,
// so a file name with a space, '#' or '?' still names the file.
std::string url_path(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : path) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string figure_html(const HandoutFigure& f, const HandoutOptions& options) {
  if (f.shown) {
    const auto it = options.figure_files.find(f.experiment);
    if (it == options.figure_files.end())
      throw LessonError("no picture was made for the figure \"" + f.caption + "\"");
    return "<figure class=\"view\"><img src=\"" + escape(url_path(it->second)) + "\" alt=\"" + escape(f.caption) +
           "\">\n<figcaption>Figure: " + escape(f.caption) + "</figcaption></figure>\n";
  }
  // A sealed view in text the student reads: say where to see it. One in a left-out reveal section
  // goes with its section.
  if (f.guarded && !f.in_reveal)
    return "<figure class=\"view sealed\"><p>Figure in the app after your prediction: " + escape(f.caption) +
           ".</p></figure>\n";
  return {};
}

std::string page(const std::string& title, const std::string& body, bool with_answers) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + escape(title) +
         "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n" + body + "<footer>TTT Lab course · " +
         (with_answers ? "teacher's copy, with answers" : "student's copy") + "</footer>\n</body>\n</html>\n";
}

}  // namespace

bool handouts_available() {
#if defined(TTTLAB_HAVE_MD4C_HTML)
  return true;
#else
  return false;
#endif
}

std::string handout_file_name(const Lesson& lesson, const HandoutOptions& options) {
  return lesson.name + (options.with_answers ? "-answers.html" : ".html");
}

std::vector<HandoutFigure> handout_figures(const Lesson& L, const HandoutOptions& options) {
  const auto guarded = [&L](const std::filesystem::path& scene) {
    for (const Prediction& p : L.predictions) {
      const std::filesystem::path* asked = &L.scene;
      for (const ExtraExperiment& x : L.experiments)
        if (x.id == p.experiment) asked = &x.scene;
      if (same_scene(*asked, scene)) return true;
    }
    return false;
  };
  std::vector<HandoutFigure> out;
  HandoutFigure own;
  own.scene = L.scene;
  own.guarded = guarded(L.scene);
  own.caption = "the lesson's view (" + L.scene.filename().string() + ")";
  out.push_back(std::move(own));
  for (const ExtraExperiment& x : L.experiments) {
    HandoutFigure f;
    f.experiment = x.id;
    f.scene = x.scene;
    f.guarded = guarded(x.scene);
    f.in_reveal = in_reveal_at(L, x.part, x.offset);
    f.caption = "experiment \u201c" + x.id + "\u201d (" + x.scene.filename().string() + ")";
    out.push_back(std::move(f));
  }
  for (HandoutFigure& f : out) f.shown = options.with_answers || (!f.guarded && !f.in_reveal);
  return out;
}

std::string handout_html(const Lesson& L, const HandoutOptions& options) {
  const bool with = options.with_answers;
  const int number = course_session::lesson_number(L.name);
  std::string body = "<header>\n<div class=\"course\">TTT Lab · lesson " +
                     (number > 0 ? std::to_string(number) : escape(L.name)) +
                     (L.minutes > 0 ? " · " + std::to_string(L.minutes) + " min" : std::string()) + "</div>\n";
  body += "<h1>" + escape(L.title) + "</h1>\n";
  if (!L.goal.empty()) body += "<p class=\"goal\">" + escape(L.goal) + "</p>\n";
  body += "<p class=\"hint\">Name: ________________________________ &nbsp; Date: ______________</p>\n</header>\n";

  // The figures, and for each part the experiment blocks that stood in or before it (in text order).
  std::vector<HandoutFigure> figures;
  if (options.figures) figures = handout_figures(L, options);
  if (!figures.empty()) body += figure_html(figures.front(), options);
  const auto blocks_at = [&](std::size_t k) {
    std::vector<std::pair<std::size_t, const HandoutFigure*>> at;  // offset, figure
    for (std::size_t x = 0; x < L.experiments.size() && x + 1 < figures.size(); ++x)
      if (L.experiments[x].part == k) at.emplace_back(L.experiments[x].offset, &figures[x + 1]);
    return at;
  };

  bool in_reveal = false;
  for (std::size_t k = 0; k < L.parts.size(); ++k) {
    const LessonPart& part = L.parts[k];
    const auto here = blocks_at(k);
    if (part.kind != LessonPart::Kind::Markdown)
      for (const auto& [offset, f] : here) body += figure_html(*f, options);
    switch (part.kind) {
      case LessonPart::Kind::Markdown: {
        // The text is cut where each block stood and the figure goes in the cut.
        std::size_t from = 0;
        for (const auto& [offset, f] : here) {
          const std::size_t to = std::clamp(offset, from, part.markdown.size());
          body += markdown_html(prose(std::string_view(part.markdown).substr(from, to - from), with, in_reveal));
          body += figure_html(*f, options);
          from = to;
        }
        body += markdown_html(prose(std::string_view(part.markdown).substr(from), with, in_reveal));
        break;
      }
      case LessonPart::Kind::Prediction:
        body += prediction_html(L.predictions.at(static_cast<std::size_t>(part.index)), with);
        break;
      case LessonPart::Kind::Question:
        body += question_html(L.questions.at(static_cast<std::size_t>(part.index)), with);
        break;
      case LessonPart::Kind::Exercise:
        body += exercise_html(L.exercises.at(static_cast<std::size_t>(part.index)), with);
        break;
      case LessonPart::Kind::Check:
        if (with) body += check_html(L.checks.at(static_cast<std::size_t>(part.index)));
        break;
    }
  }
  for (const auto& [offset, f] : blocks_at(L.parts.size())) body += figure_html(*f, options);  // after the text
  return page(L.title, body, with);
}

std::string handout_index_html(const std::vector<const Lesson*>& lessons, const HandoutOptions& options) {
  std::string body = "<header>\n<div class=\"course\">TTT Lab</div>\n<h1>The course's handouts</h1>\n</header>\n<ol>\n";
  int minutes = 0;
  for (const Lesson* l : lessons) {
    body += "<li><a href=\"" + escape(handout_file_name(*l, options)) + "\">" + escape(l->title) + "</a> (" +
            std::to_string(l->minutes) + " min)</li>\n";
    minutes += l->minutes;
  }
  body += "</ol>\n<p>" + std::to_string(lessons.size()) + " lessons, " + std::to_string(minutes) + " min in all.</p>\n";
  return page("TTT Lab handouts", body, options.with_answers);
}

}  // namespace tttlab::course
