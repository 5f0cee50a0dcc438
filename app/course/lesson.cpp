// app/course/lesson.cpp — the lesson file parser (format in lesson.hpp).
#include "course/lesson.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "course/course_pack.hpp"
#include "course/exercise.hpp"
#include "course/experiments.hpp"
#include "lab/state/state_file.hpp"
#include "tttlab/io/limits.hpp"

namespace tttlab::course {
namespace fs = std::filesystem;

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

namespace {

constexpr std::size_t kMaxLessonBytes = 1 << 20;

// Splits text into lines, without the line ends.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t i = 0;
  while (i <= text.size()) {
    const auto j = text.find('\n', i);
    if (j == std::string_view::npos) {
      if (i < text.size()) lines.push_back(text.substr(i));
      break;
    }
    lines.push_back(text.substr(i, j - i));
    i = j + 1;
  }
  for (auto& l : lines)
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
  return lines;
}

double parse_number(std::string_view s) {
  const std::string t = trim(s);
  if (t.empty()) throw LessonError("a number is missing");
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || errno == ERANGE || !std::isfinite(v))
    throw LessonError("\"" + t + "\" is not a number");
  return v;
}

// A fenced block's fields: "key: value" lines; other lines continue the previous field.
struct Field {
  std::string key, value;
  int line = 0;
};

class Location {
 public:
  Location(const fs::path& file) : m_file(file.generic_string()) {}
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw LessonError(m_file + ":" + std::to_string(line) + ": " + what);
  }

 private:
  std::string m_file;
};

std::vector<Field> parse_fields(const std::vector<std::string_view>& lines, int first_line,
                                const std::vector<std::string>& keys, const std::string& kind,
                                const Location& at) {
  std::vector<Field> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const int ln = first_line + static_cast<int>(i);
    const std::string_view raw = lines[i];
    const auto colon = raw.find(':');
    bool is_key = false;
    if (colon != std::string_view::npos && colon > 0 && raw.front() != ' ' && raw.front() != '\t') {
      const std::string k = trim(raw.substr(0, colon));
      const bool word = std::all_of(k.begin(), k.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || c == '-' || c == '_';
      });
      if (word && !k.empty()) {
        if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
          std::string known;
          for (const auto& x : keys) known += (known.empty() ? "" : ", ") + x;
          at.fail(ln, "unknown key \"" + k + "\" in a " + kind + " block (known: " + known + ")");
        }
        out.push_back({k, trim(raw.substr(colon + 1)), ln});
        is_key = true;
      }
    }
    if (is_key) continue;
    const std::string cont = trim(raw);
    if (cont.empty()) {
      if (!out.empty()) out.back().value += "\n";
      continue;
    }
    if (out.empty()) at.fail(ln, "a " + kind + " block must start with a \"key: value\" line");
    std::string& v = out.back().value;
    if (!v.empty() && v.back() != '\n') v += ' ';
    v += cont;
  }
  for (auto& f : out) f.value = trim(f.value);
  return out;
}

const Field* find(const std::vector<Field>& m_fs, std::string_view key) {
  for (const auto& f : m_fs)
    if (f.key == key) return &f;
  return nullptr;
}

std::string required(const std::vector<Field>& m_fs, std::string_view key, const std::string& kind,
                     int line, const Location& at) {
  const Field* f = find(m_fs, key);
  if (!f || f->value.empty()) at.fail(line, "the " + kind + " block has no \"" + std::string(key) + ":\"");
  return f->value;
}

void no_duplicates(const std::vector<Field>& m_fs, const std::vector<std::string>& repeatable,
                   const Location& at) {
  // Repeatable keys are skipped before the inner loop: a hostile block of tens of thousands of
  // "choice:" lines (1 MiB allows ~65,000) would otherwise take quadratic time, a minute per file.
  // Any other key may occur once, so the inner loop runs for only a few keys before one repeats.
  for (std::size_t i = 0; i < m_fs.size(); ++i) {
    if (std::find(repeatable.begin(), repeatable.end(), m_fs[i].key) != repeatable.end()) continue;
    for (std::size_t j = 0; j < i; ++j)
      if (m_fs[i].key == m_fs[j].key)
        at.fail(m_fs[i].line, "\"" + m_fs[i].key + ":\" given twice (first on line " +
                                 std::to_string(m_fs[j].line) + ")");
  }
}

Expectation expectation_at(const std::string& text, int line, const Location& at) {
  try {
    return Expectation::parse(text);
  } catch (const LessonError& e) {
    at.fail(line, e.what());
  }
}

bool yes_no(const Field* f, const Location& at) {
  if (!f) return false;
  if (f->value == "yes" || f->value == "true") return true;
  if (f->value == "no" || f->value == "false") return false;
  at.fail(f->line, "\"" + f->key + ":\" takes yes or no, not \"" + f->value + "\"");
}

}  // namespace

// ---- Expectation -----------------------------------------------------------------------------------

bool Expectation::holds(double v) const {
  if (!std::isfinite(v)) return false;
  switch (kind) {
    case Kind::Greater: return v > a;
    case Kind::GreaterEqual: return v >= a;
    case Kind::Less: return v < a;
    case Kind::LessEqual: return v <= a;
    case Kind::Between: return v >= a && v <= b;
  }
  return false;
}

Expectation Expectation::parse(std::string_view text) {
  Expectation e;
  e.text = trim(text);
  std::string_view s = e.text;
  if (s.empty()) throw LessonError("an expectation is missing (write e.g. \"> 0\", \"0 .. 1\" or \"1 ± 0.1\")");
  auto rest = [&](std::size_t n) { return s.substr(n); };
  if (s.starts_with(">=") || s.starts_with("≥")) {
    e.kind = Kind::GreaterEqual;
    e.a = parse_number(rest(s.starts_with(">=") ? 2 : std::string_view("≥").size()));
  } else if (s.starts_with("<=") || s.starts_with("≤")) {
    e.kind = Kind::LessEqual;
    e.a = parse_number(rest(s.starts_with("<=") ? 2 : std::string_view("≤").size()));
  } else if (s.starts_with(">")) {
    e.kind = Kind::Greater;
    e.a = parse_number(rest(1));
  } else if (s.starts_with("<")) {
    e.kind = Kind::Less;
    e.a = parse_number(rest(1));
  } else if (const auto dots = s.find(".."); dots != std::string_view::npos) {
    e.kind = Kind::Between;
    e.a = parse_number(s.substr(0, dots));
    e.b = parse_number(s.substr(dots + 2));
    if (e.b < e.a) throw LessonError("the range \"" + e.text + "\" is empty (its end is below its start)");
  } else {
    std::size_t pm = s.find("±");
    std::size_t pm_len = std::string_view("±").size();
    if (pm == std::string_view::npos) {
      pm = s.find("+-");
      pm_len = 2;
    }
    if (pm == std::string_view::npos)
      throw LessonError("\"" + e.text + "\" is not an expectation (write e.g. \"> 0\", \"<= 1e-12\", \"0 .. 1\" or \"1 ± 0.1\")");
    const double c = parse_number(s.substr(0, pm));
    const double tol = parse_number(s.substr(pm + pm_len));
    if (tol < 0) throw LessonError("the tolerance in \"" + e.text + "\" is negative");
    e.kind = Kind::Between;
    e.a = c - tol;
    e.b = c + tol;
  }
  return e;
}

bool Prediction::in_percent() const {
  for (const auto& c : choices)
    if (c.text.find('%') != std::string::npos) return true;
  return false;
}

int Prediction::right_choice(double measured) const {
  for (std::size_t i = 0; i < choices.size(); ++i)
    if (choices[i].when.holds(measured)) return static_cast<int>(i);
  return -1;
}

const fs::path& Lesson::scene_of(const std::string& experiment) const {
  if (experiment.empty()) return scene;
  for (const auto& x : experiments)
    if (x.id == experiment) return x.scene;
  throw LessonError(file.generic_string() + ": no experiment \"" + experiment + "\"");
}

// ---- the parser ------------------------------------------------------------------------------------

namespace {

Lesson parse_unescaped(std::string_view text, const fs::path& file) {
  const Location at(file);
  Lesson L;
  L.file = file;
  L.name = file.stem().string();
  const auto lines = split_lines(text);
  if (lines.empty() || trim(lines[0]) != "---")
    at.fail(1, "a lesson starts with its front matter: a line \"---\", then title:, goal:, duration:, scene:, then \"---\"");

  // Front matter.
  std::size_t i = 1;
  std::vector<std::string_view> fm;
  while (i < lines.size() && trim(lines[i]) != "---") fm.push_back(lines[i++]);
  if (i == lines.size()) at.fail(1, "the front matter has no closing \"---\" line");
  const auto front = parse_fields(fm, 2, {"title", "goal", "duration", "scene"}, "front matter", at);
  no_duplicates(front, {}, at);
  L.title = required(front, "title", "front matter", 1, at);
  L.goal = required(front, "goal", "front matter", 1, at);
  {
    const Field* d = find(front, "duration");
    if (!d) at.fail(1, "the front matter has no \"duration:\" (minutes, e.g. \"duration: 25\")");
    std::string v = d->value;
    if (v.ends_with("min")) v = trim(v.substr(0, v.size() - 3));
    double m = 0;
    try {
      m = parse_number(v);
    } catch (const LessonError&) {
      at.fail(d->line, "duration: takes minutes, e.g. \"25\" or \"25 min\", not \"" + d->value + "\"");
    }
    if (m < 1 || m > 600 || m != std::floor(m)) at.fail(d->line, "duration: must be whole minutes, 1 to 600");
    L.minutes = static_cast<int>(m);
  }
  {
    const std::string s = required(front, "scene", "front matter", 1, at);
    L.scene = file.parent_path() / s;
    if (fs::path(s).extension() != lab::kStateExtension)
      at.fail(find(front, "scene")->line, "scene: names a .tttlab state file, not \"" + s + "\"");
  }
  ++i;  // past the closing ---

  // Body: Markdown with fenced blocks of our four kinds cut out.
  std::string md;
  auto flush_markdown = [&] {
    if (trim(md).empty()) {
      md.clear();
      return;
    }
    LessonPart p;
    p.kind = LessonPart::Kind::Markdown;
    p.markdown = std::move(md);
    L.parts.push_back(std::move(p));
    md.clear();
  };
  std::vector<std::pair<std::string, int>> experiment_refs;  // (id, line) to resolve at the end
  for (; i < lines.size(); ++i) {
    const int ln = static_cast<int>(i) + 1;
    const std::string t = trim(lines[i]);
    std::string kind;
    if (t.starts_with("```")) kind = trim(std::string_view(t).substr(3));
    const bool ours = kind == "predict" || kind == "check" || kind == "question" || kind == "experiment" ||
                      kind == "exercise";
    if (!ours) {
      if (t.starts_with("```") && !kind.empty() && kind.find_first_of(" {") == std::string::npos &&
          kind != "text" && kind != "sh" && kind != "json" && kind != "math" && kind != "cpp" &&
          kind != "python" && kind != "console" && kind != "bash") {
        // A typo of one of ours ("```predcit") would silently become code: refuse unknown kinds.
        at.fail(ln, "unknown block \"```" + kind + "\" (lesson blocks: predict, check, question, exercise, experiment; "
                    "code blocks: text, sh, bash, console, json, math, cpp, python)");
      }
      if (t.starts_with("```")) {  // an ordinary code block: copy it through to its end
        md += std::string(lines[i]) + "\n";
        for (++i; i < lines.size(); ++i) {
          md += std::string(lines[i]) + "\n";
          if (trim(lines[i]).starts_with("```")) break;
        }
        continue;
      }
      md += std::string(lines[i]) + "\n";
      continue;
    }
    std::vector<std::string_view> body;
    std::size_t j = i + 1;
    while (j < lines.size() && trim(lines[j]) != "```") body.push_back(lines[j++]);
    if (j == lines.size()) at.fail(ln, "the ```" + kind + " block is not closed by a line \"```\"");
    const int first = ln + 1;
    if (kind == "predict") {
      const auto f = parse_fields(body, first,
                                  {"id", "ask", "experiment", "measure", "choice", "slider", "tolerance",
                                   "unit", "reveal"},
                                  "predict", at);
      no_duplicates(f, {"choice"}, at);
      Prediction p;
      p.line = ln;
      p.id = find(f, "id") ? find(f, "id")->value : "predict-" + std::to_string(L.predictions.size() + 1);
      p.ask = required(f, "ask", "predict", ln, at);
      p.measure = required(f, "measure", "predict", ln, at);
      if (const Field* e = find(f, "experiment")) {
        p.experiment = e->value;
        experiment_refs.emplace_back(e->value, e->line);
      }
      if (const Field* r = find(f, "reveal")) p.reveal = r->value;
      if (const Field* u = find(f, "unit")) p.unit = u->value;
      for (const auto& c : f) {
        if (c.key != "choice") continue;
        const auto bar = c.value.rfind('|');
        if (bar == std::string::npos)
          at.fail(c.line, "a choice is \"text | condition\", e.g. \"choice: It falls. | < 0\"");
        Choice ch;
        ch.text = trim(std::string_view(c.value).substr(0, bar));
        if (ch.text.empty()) at.fail(c.line, "the choice has no text before \"|\"");
        ch.when = expectation_at(c.value.substr(bar + 1), c.line, at);
        p.choices.push_back(std::move(ch));
      }
      if (p.in_percent()) {
        std::size_t k = 0;
        for (const auto& c : f) {
          if (c.key != "choice") continue;
          const Expectation& w = p.choices[k++].when;
          const bool two = w.kind == Expectation::Kind::Between;
          if (std::abs(w.a) > 1 || (two && std::abs(w.b) > 1))
            at.fail(c.line, "the choices are written in percent, so the measure must be a fraction: write the "
                            "condition as a fraction (\"> 0.4\" for more than 40 %)");
        }
      }
      const Field* s = find(f, "slider");
      if (s && !p.choices.empty()) at.fail(s->line, "a prediction is either choices or a slider, not both");
      if (!s && p.choices.size() < 2) at.fail(ln, "a prediction needs at least two \"choice:\" lines, or a \"slider:\"");
      if (s) {
        const Expectation r = expectation_at(s->value, s->line, at);
        if (r.kind != Expectation::Kind::Between || r.b <= r.a)
          at.fail(s->line, "slider: takes a range \"min .. max\"");
        p.slider_min = r.a;
        p.slider_max = r.b;
        const Field* tol = find(f, "tolerance");
        if (!tol) at.fail(ln, "a slider prediction needs \"tolerance:\" (how close counts as right)");
        try {
          p.tolerance = parse_number(tol->value);
        } catch (const LessonError& e) {
          at.fail(tol->line, std::string("tolerance: ") + e.what());
        }
        if (p.tolerance <= 0) at.fail(tol->line, "tolerance: must be positive");
      } else if (const Field* tol = find(f, "tolerance")) {
        at.fail(tol->line, "tolerance: belongs to a slider prediction");
      }
      for (const auto& q : L.predictions)
        if (q.id == p.id) at.fail(ln, "two predictions have the id \"" + p.id + "\"");
      flush_markdown();
      L.parts.push_back({LessonPart::Kind::Prediction, {}, static_cast<int>(L.predictions.size())});
      L.predictions.push_back(std::move(p));
    } else if (kind == "check") {
      const auto f = parse_fields(body, first, {"claim", "experiment", "measure", "expect", "depends-on-device"},
                                  "check", at);
      no_duplicates(f, {}, at);
      Check c;
      c.line = ln;
      c.claim = required(f, "claim", "check", ln, at);
      c.measure = required(f, "measure", "check", ln, at);
      c.expect = expectation_at(required(f, "expect", "check", ln, at), find(f, "expect")->line, at);
      c.depends_on_device = yes_no(find(f, "depends-on-device"), at);
      if (const Field* e = find(f, "experiment")) {
        c.experiment = e->value;
        experiment_refs.emplace_back(e->value, e->line);
      }
      flush_markdown();
      L.parts.push_back({LessonPart::Kind::Check, {}, static_cast<int>(L.checks.size())});
      L.checks.push_back(std::move(c));
    } else if (kind == "question") {
      const auto f = parse_fields(body, first, {"ask", "hint", "answer"}, "question", at);
      no_duplicates(f, {}, at);
      Question q;
      q.line = ln;
      q.ask = required(f, "ask", "question", ln, at);
      q.hint = required(f, "hint", "question", ln, at);
      q.answer = required(f, "answer", "question", ln, at);
      flush_markdown();
      L.parts.push_back({LessonPart::Kind::Question, {}, static_cast<int>(L.questions.size())});
      L.questions.push_back(std::move(q));
    } else if (kind == "exercise") {
      const auto f = parse_fields(body, first, {"id", "ask", "answer", "tolerance", "unit", "vars", "explain"},
                                  "exercise", at);
      no_duplicates(f, {}, at);
      Exercise x;
      x.line = ln;
      x.id = find(f, "id") ? find(f, "id")->value : "exercise-" + std::to_string(L.exercises.size() + 1);
      x.ask = required(f, "ask", "exercise", ln, at);
      x.answer = required(f, "answer", "exercise", ln, at);
      x.explain = required(f, "explain", "exercise", ln, at);
      if (const Field* u = find(f, "unit")) x.unit = u->value;
      if (const Field* tol = find(f, "tolerance")) {
        try {
          parse_tolerance(tol->value, x);
        } catch (const LessonError& e) {
          at.fail(tol->line, e.what());
        }
      }
      if (const Field* v = find(f, "vars")) {
        try {
          parse_vars(v->value, x);
        } catch (const LessonError& e) {
          at.fail(v->line, e.what());
        }
      }
      try {
        prepare_key(x);  // the key reads, and is finite at every point of vars:
      } catch (const LessonError& e) {
        at.fail(find(f, "answer")->line, e.what());
      }
      for (const auto& y : L.exercises)
        if (y.id == x.id) at.fail(ln, "two exercises have the id \"" + x.id + "\"");
      flush_markdown();
      L.parts.push_back({LessonPart::Kind::Exercise, {}, static_cast<int>(L.exercises.size())});
      L.exercises.push_back(std::move(x));
    } else {  // experiment
      const auto f = parse_fields(body, first, {"id", "scene"}, "experiment", at);
      no_duplicates(f, {}, at);
      ExtraExperiment x;
      x.line = ln;
      x.part = L.parts.size();  // the pending Markdown, when there is any, becomes this part
      x.offset = md.size();
      x.id = required(f, "id", "experiment", ln, at);
      const std::string s = required(f, "scene", "experiment", ln, at);
      if (fs::path(s).extension() != lab::kStateExtension)
        at.fail(find(f, "scene")->line, "scene: names a .tttlab state file, not \"" + s + "\"");
      x.scene = file.parent_path() / s;
      for (const auto& y : L.experiments)
        if (y.id == x.id) at.fail(ln, "two experiments have the id \"" + x.id + "\"");
      L.experiments.push_back(std::move(x));
    }
    i = j;
  }
  flush_markdown();
  for (const auto& [id, line] : experiment_refs) {
    // A named reference for the lambda: capturing a structured binding needs clang 16 (the fuzz build
    // uses Debian's clang 14).
    const std::string& wanted = id;
    const bool known = std::any_of(L.experiments.begin(), L.experiments.end(),
                                   [&](const ExtraExperiment& x) { return x.id == wanted; });
    if (!known) at.fail(line, "experiment: \"" + id + "\" is not defined by an ```experiment block of this lesson");
  }
  if (L.predictions.empty()) at.fail(1, "a lesson asks for at least one prediction (a ```predict block)");
  if (L.checks.empty()) at.fail(1, "a lesson states at least one claim the engine checks (a ```check block)");
  return L;
}

}  // namespace

Lesson parse_lesson(std::string_view text, const fs::path& file) {
  // What is printed on a terminal or set as a window title (`lessons list`, `lessons check`, the
  // app's title bar) is escaped once here: control bytes in a lesson file cannot reach a terminal.
  try {
    Lesson L = parse_unescaped(text, file);
    L.name = printable(L.name);
    L.title = printable(L.title);
    L.goal = printable(L.goal);
    for (Check& c : L.checks) {
      c.claim = printable(c.claim);
      c.expect.text = printable(c.expect.text);
    }
    return L;
  } catch (const LessonError& e) {
    throw LessonError(printable(e.what()));
  }
}

namespace {

Lesson read_unescaped(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw LessonError(file.generic_string() + ": not a readable file");
  const auto size = fs::file_size(file, ec);
  if (ec) throw LessonError(file.generic_string() + ": " + ec.message());
  if (size > kMaxLessonBytes)
    throw LessonError(file.generic_string() + ": " + std::to_string(size) + " bytes; a lesson is at most 1 MiB");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw LessonError(file.generic_string() + ": cannot be opened");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) throw LessonError(file.generic_string() + ": read error");
  // In a student pack the secrets are sealed on disk; the parser reads the clear text.
  try {
    if (const auto pack = open_pack(file.parent_path()))
      return parse_lesson(unseal_lesson_text(ss.str(), pack->keys, file.generic_string()), file);
  } catch (const PackError& e) {
    throw LessonError(e.what());
  }
  return parse_lesson(ss.str(), file);
}

}  // namespace

Lesson read_lesson(const fs::path& file) {
  try {
    return read_unescaped(file);
  } catch (const LessonError& e) {
    throw LessonError(printable(e.what()));
  }
}


namespace {

// Whether `key` names the lesson `name`: the name itself, or its number prefix ("3" or "03").
bool names_lesson(const std::string& name, std::string_view key, bool by_number) {
  if (!by_number) return name == key;
  const auto dash = name.find('-');
  if (dash == std::string::npos) return false;
  const std::string num = name.substr(0, dash);
  if (num == key) return true;
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
         key.size() < 6 && std::atoi(num.c_str()) == std::atoi(std::string(key).c_str());
}

}  // namespace

const Lesson* Course::find(std::string_view name) const {
  for (const bool by_number : {false, true})
    for (const auto& l : lessons)
      if (names_lesson(l.name, name, by_number)) return &l;
  return nullptr;
}

const std::string* Course::find_error(std::string_view name) const {
  for (const bool by_number : {false, true})
    for (const auto& [file, message] : errors)
      if (file.extension() == ".md" && names_lesson(file.stem().string(), name, by_number)) return &message;
  return nullptr;
}

Course load_course(const fs::path& dir) {
  Course c;
  c.dir = dir;
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path p = it->path();
    const std::string n = p.filename().string();
    if (p.extension() != ".md" || n == "README.md" || n == "COURSE.md") continue;
    files.push_back(p);
  }
  if (ec) {
    c.errors.emplace_back(dir, clip(dir.generic_string(), 240) + ": cannot list the folder: " + ec.message());
    return c;
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    try {
      c.lessons.push_back(read_lesson(f));
    } catch (const LessonError& e) {
      c.errors.emplace_back(f, e.what());
    }
  }
  return c;
}

}  // namespace tttlab::course
