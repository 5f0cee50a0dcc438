// app/course/exercise.cpp — graded exercises (see exercise.hpp).
#include "course/exercise.hpp"

#include <muParser.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "course/progress.hpp"

namespace tttlab::course {
namespace {

constexpr std::size_t kMaxPoints = 16;  // comparison points an exercise may give in vars:

// Built into a new string: GCC 12 warns (wrongly, -Wrestrict) about std::string::replace inlined here.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (s.substr(i, from.size()) == from) {
      out += to;
      i += from.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

// What students type that muParser does not: the Unicode minus, × and · for a product, ² and ³.
std::string normalize(std::string_view text) {
  std::string s = trim(text);
  s = replace_all(s, "\xE2\x88\x92", "-");  // −
  s = replace_all(s, "\xC3\x97", "*");      // ×
  s = replace_all(s, "\xC2\xB7", "*");      // ·
  s = replace_all(s, "\xC2\xB2", "^2");     // ²
  s = replace_all(s, "\xC2\xB3", "^3");     // ³
  return s;
}

std::string list_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool is_name(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// Evaluates `expr` with the variables `names` set to `point`. On failure: nullopt and a message for
// students in `why`.
std::optional<double> evaluate(const std::string& expr, const std::vector<std::string>& names,
                               const std::vector<double>& point, std::string* why) {
  if (expr.empty()) {
    *why = "Type an answer first.";
    return std::nullopt;
  }
  if (expr.find('=') != std::string::npos) {
    *why = "Write only the answer, without \"=\".";
    return std::nullopt;
  }
  if (expr.find(',') != std::string::npos) {
    *why = "Write one expression, without commas (a decimal point is written 1.5).";
    return std::nullopt;
  }
  std::vector<double> values = point;  // muParser reads variables through pointers
  mu::Parser p;
  try {
    for (std::size_t k = 0; k < names.size(); ++k) p.DefineVar(names[k], &values[k]);
    p.SetExpr(expr);
    const double v = p.Eval();
    if (!std::isfinite(v)) {
      *why = "This gives no finite number (a division by zero, or the root or logarithm of a negative "
             "number?).";
      return std::nullopt;
    }
    return v;
  } catch (const mu::Parser::exception_type& e) {
    const std::string token = e.GetToken();
    switch (e.GetCode()) {
      case mu::ecUNASSIGNABLE_TOKEN:
        *why = "\"" + token + "\" is not a number, an operator, a function" +
               (names.empty() ? std::string() : " or one of the variables (" + list_names(names) + ")") + ".";
        break;
      case mu::ecUNEXPECTED_VAR:
      case mu::ecUNEXPECTED_VAL:
      case mu::ecUNEXPECTED_FUN:
        *why = "Something is missing before \"" + token + "\": write every product with *, e.g. 4*d, not 4d.";
        break;
      case mu::ecMISSING_PARENS: *why = "A parenthesis is opened but never closed."; break;
      case mu::ecUNEXPECTED_PARENS: *why = "A parenthesis does not match: count the ( and the )."; break;
      case mu::ecUNEXPECTED_EOF: *why = "The answer stops in the middle: something is missing at its end."; break;
      case mu::ecUNEXPECTED_OPERATOR: *why = "An operator is out of place near \"" + token + "\"."; break;
      default: *why = "The app cannot read this: " + std::string(e.GetMsg()) + "."; break;
    }
    return std::nullopt;
  }
}

bool within(const Exercise& e, double got, double want) {
  const double tol = e.relative ? e.tolerance * std::fabs(want) : e.tolerance;
  // A hair of slack for the last bit of a double (an exact key typed exactly stays right).
  return std::fabs(got - want) <= tol + 1e-12 * std::max(1.0, std::fabs(want));
}

// Strips a trailing unit (and "%") from a typed number. False with `why` when a % is typed for an
// answer that is not in %.
bool strip_unit(std::string& s, const std::string& unit, std::string* why) {
  if (!unit.empty() && s.size() > unit.size() && s.ends_with(unit)) {
    s = trim(std::string_view(s).substr(0, s.size() - unit.size()));
    return true;
  }
  if (s.ends_with("%") && unit != "%") {
    *why = "This answer is not a percentage: write it without %.";
    return false;
  }
  return true;
}

// A plain number: sign, digits, thousands commas or a decimal comma, a point, an exponent.
std::optional<double> plain_number(std::string s) {
  std::erase(s, ' ');
  const auto commas = std::count(s.begin(), s.end(), ',');
  if (commas > 0) {
    // Thousands commas: every comma is followed by exactly three digits, and all come before any point.
    const std::size_t point = std::min(s.find('.'), s.find_first_of("eE"));
    bool thousands = true;
    for (std::size_t p = s.find(','); p != std::string::npos; p = s.find(',', p + 1)) {
      if (p > point || p == 0 || !std::isdigit(static_cast<unsigned char>(s[p - 1]))) thousands = false;
      std::size_t digits = 0;
      while (p + 1 + digits < s.size() && std::isdigit(static_cast<unsigned char>(s[p + 1 + digits]))) ++digits;
      if (digits != 3) thousands = false;
    }
    if (thousands) {
      std::erase(s, ',');
    } else if (commas == 1 && s.find('.') == std::string::npos) {
      std::replace(s.begin(), s.end(), ',', '.');  // a decimal comma: "0,5"
    } else {
      return std::nullopt;
    }
  }
  if (s.empty()) return std::nullopt;
  // Only what a number is made of: strtod alone would also take "inf", "nan" and hex.
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'))
      return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

// ---- reading the block --------------------------------------------------------------------------

void parse_tolerance(std::string_view text, Exercise& e) {
  std::string s = trim(text);
  const bool relative = s.ends_with("%");
  if (relative) s = trim(std::string_view(s).substr(0, s.size() - 1));
  const auto v = plain_number(s);
  if (!v || *v <= 0 || (relative && *v >= 100))
    throw LessonError("tolerance: takes a positive number (absolute, e.g. \"0.01\") or a percentage below 100 "
                      "(relative, e.g. \"2 %\"), not \"" + trim(text) + "\"");
  e.relative = relative;
  e.tolerance = relative ? *v / 100.0 : *v;
}

void parse_vars(std::string_view text, Exercise& e) {
  e.var_names.clear();
  e.points.clear();
  std::string all(text);
  std::size_t start = 0;
  while (start <= all.size()) {
    const std::size_t semi = std::min(all.find(';', start), all.size());
    const std::string point_text = trim(std::string_view(all).substr(start, semi - start));
    start = semi + 1;
    if (point_text.empty()) throw LessonError("vars: has an empty point (write e.g. \"d = 32, T = 2048; d = 8, T = 64\")");
    std::vector<std::string> names;
    std::vector<double> values;
    std::size_t s = 0;
    while (s <= point_text.size()) {
      const std::size_t comma = std::min(point_text.find(',', s), point_text.size());
      const std::string item = trim(std::string_view(point_text).substr(s, comma - s));
      s = comma + 1;
      const auto eq = item.find('=');
      if (eq == std::string::npos) throw LessonError("vars: \"" + item + "\" is not \"name = value\"");
      const std::string name = trim(std::string_view(item).substr(0, eq));
      const auto value = plain_number(trim(std::string_view(item).substr(eq + 1)));
      if (!is_name(name)) throw LessonError("vars: \"" + name + "\" is not a variable name (letters, digits, _)");
      if (!value) throw LessonError("vars: the value of " + name + " is not a number");
      if (std::find(names.begin(), names.end(), name) != names.end())
        throw LessonError("vars: " + name + " is given twice in one point");
      names.push_back(name);
      values.push_back(*value);
    }
    if (e.var_names.empty()) {
      e.var_names = names;
    } else if (names != e.var_names) {
      throw LessonError("vars: every point gives the same variables in the same order (" + list_names(e.var_names) +
                        ")");
    }
    e.points.push_back(std::move(values));
    // Each point costs the parser a pass over the key and every answer: a few points do the job, and
    // a hostile file of thousands would slow every check down.
    if (e.points.size() > kMaxPoints)
      throw LessonError("vars: at most " + std::to_string(kMaxPoints) + " points (separated by \";\")");
  }
}

void prepare_key(Exercise& e) {
  std::string why;
  if (!e.is_expression()) {
    std::string key = normalize(e.answer);
    if (!strip_unit(key, e.unit, &why)) throw LessonError("answer: " + why);
    auto v = plain_number(key);
    if (!v) v = evaluate(key, {}, {}, &why);
    if (!v) throw LessonError("answer: \"" + e.answer + "\" is not a finite number (" + why + ")");
    e.points = {{*v}};  // a number key keeps its value as its only "point"
    return;
  }
  const std::string key = normalize(e.answer);
  for (const auto& p : e.points)
    if (!evaluate(key, e.var_names, p, &why)) {
      std::string at;
      for (std::size_t k = 0; k < p.size(); ++k) {
        char b[64];
        std::snprintf(b, sizeof b, "%s%s = %g", k ? ", " : "", e.var_names[k].c_str(), p[k]);
        at += b;
      }
      throw LessonError("answer: \"" + e.answer + "\" cannot be evaluated at " + at + ": " + why);
    }
  if (e.points.size() == 1) {
    // Two more points, off the integers, so that no lucky coincidence at one point passes.
    for (const auto& [scale, shift] : {std::pair{1.37, 0.61}, std::pair{0.73, 1.19}}) {
      std::vector<double> q = e.points.front();
      for (double& x : q) x = x * scale + shift;
      if (evaluate(key, e.var_names, q, &why)) e.points.push_back(std::move(q));
    }
  }
}

double key_value(const Exercise& e, std::size_t point) {
  if (!e.is_expression()) return e.points.empty() ? std::nan("") : e.points.front().front();
  std::string why;
  const auto v = evaluate(normalize(e.answer), e.var_names, e.points.at(point), &why);
  return v ? *v : std::nan("");
}

std::string key_text(const Exercise& e) {
  if (e.is_expression()) return e.answer;
  char b[48];
  std::snprintf(b, sizeof b, "%.6g", key_value(e));
  std::string s = b;
  if (!e.unit.empty()) s += " " + e.unit;
  return s;
}

std::string audit_exercise(const Exercise& e) {
  Exercise x = e;
  try {
    x.points.clear();
    if (e.is_expression()) x.points.assign(e.points.begin(), e.points.begin() + 1);
    if (e.is_expression() && x.points.empty()) return "an expression answer needs vars:";
    prepare_key(x);
  } catch (const LessonError& err) {
    return err.what();
  }
  for (std::size_t k = 0; k < (e.is_expression() ? e.points.size() : 1); ++k)
    if (!std::isfinite(key_value(e, k))) return "the key is not finite at a comparison point";
  if (e.is_expression() && e.points.size() < 2)
    return "an expression answer is compared at fewer than 2 points (add points to vars:)";
  const Mark self = mark_answer(e, e.answer);
  if (self.kind != Mark::Kind::Right)
    return "the key itself, typed as an answer, is not marked right" +
           (self.message.empty() ? std::string() : " (" + self.message + ")");
  const double key = key_value(e);
  if (e.relative && key == 0) return "a relative tolerance on a key of 0 accepts only exactly 0: give an absolute one";
  if (!e.is_expression() && key != 0 && within(e, 0.0, key))
    return "the tolerance is so wide that 0 would be marked right";
  if (e.is_expression() && !e.unit.empty())
    return "a unit belongs to a number answer; an expression answer has none";
  // A share written as a fraction under "%": with a relative tolerance nothing shows the slip, so it
  // is refused; a small percentage on purpose takes an absolute tolerance.
  if (!e.is_expression() && e.unit == "%" && e.relative && key != 0 && std::fabs(key) < 1)
    return "the unit is % but the key looks like a fraction (" + e.answer +
           "): write it in percent, or give an absolute tolerance";
  if (!e.is_expression() && !e.unit.empty()) {
    // A student may type the unit after the number ("8.3 %"): the key written that way is right too.
    char b[48];
    std::snprintf(b, sizeof b, "%.17g", key);
    const std::string with_unit = std::string(b) + " " + e.unit;
    if (mark_answer(e, with_unit).kind != Mark::Kind::Right)
      return "the key typed with its unit (\"" + with_unit + "\") is not marked right: is the unit \"" + e.unit +
             "\" one a student can type after a number?";
  }
  if (e.is_expression()) {
    // The key must depend on its variables: a constant would make the "expression" a number.
    bool varies = false;
    for (std::size_t k = 1; k < e.points.size(); ++k)
      if (!within(e, key_value(e, k), key_value(e, 0))) varies = true;
    if (!varies) return "the key has the same value at every comparison point: make it a number answer";
  }
  return {};
}

// ---- marking ------------------------------------------------------------------------------------

std::optional<double> read_student_number(std::string_view text, const std::string& unit, std::string* why) {
  std::string s = normalize(text);
  if (s.empty()) {
    *why = "Type an answer first.";
    return std::nullopt;
  }
  if (!strip_unit(s, unit, why)) return std::nullopt;
  if (const auto v = plain_number(s)) return v;
  std::string calc_why;
  if (s.find(',') == std::string::npos)
    if (const auto v = evaluate(s, {}, {}, &calc_why)) return v;
  std::string msg = "\"";
  msg += trim(text);
  msg += "\" is not a number the app can read (write e.g. 1056, 1,056, 1.05e3";
  if (unit == "%") msg += " or 8.3 %";
  msg += ")";
  // A calculation that failed says why; a word ("abc") needs no parser's detail.
  if (!calc_why.empty() && s.find_first_of("()+*/^") != std::string::npos) {
    msg += ": ";
    msg += calc_why;
  } else {
    msg += ".";
  }
  *why = msg;
  return std::nullopt;
}

Mark mark_answer(const Exercise& e, std::string_view typed) {
  Mark m;
  if (!e.is_expression()) {
    const auto v = read_student_number(typed, e.unit, &m.message);
    if (!v) return m;
    m.kind = within(e, *v, key_value(e)) ? Mark::Kind::Right : Mark::Kind::Wrong;
    return m;
  }
  const std::string expr = normalize(typed);
  bool right = true;
  for (std::size_t k = 0; k < e.points.size(); ++k) {
    const auto v = evaluate(expr, e.var_names, e.points[k], &m.message);
    if (!v) return m;
    right = right && within(e, *v, key_value(e, k));
  }
  m.kind = right ? Mark::Kind::Right : Mark::Kind::Wrong;
  return m;
}

// ---- the student's work -------------------------------------------------------------------------

ExerciseBook::ExerciseBook(std::vector<Exercise> exercises, std::string lesson_name, ProgressStore* progress)
    : m_exercises(std::move(exercises)), m_lesson(std::move(lesson_name)), m_progress(progress) {
  m_states.resize(m_exercises.size());
  const LessonProgress* lp = m_progress ? m_progress->lesson(m_lesson) : nullptr;
  if (!lp) return;
  for (std::size_t i = 0; i < m_exercises.size(); ++i) {
    const auto it = lp->exercises.find(m_exercises[i].id);
    if (it == lp->exercises.end()) continue;
    const ExerciseRecord& r = it->second;
    ExerciseState& s = m_states[i];
    s.answer = r.answer;
    s.input = r.answer;
    s.attempts = r.attempts;
    s.right = r.right;
    s.first_right = r.first_right;
  }
}

bool ExerciseBook::can_check(int i) const {
  const ExerciseState& s = state(i);
  return !s.right && !s.shown;
}

Mark ExerciseBook::check(int i) {
  ExerciseState& s = m_states.at(static_cast<std::size_t>(i));
  if (!can_check(i)) return Mark{s.right ? Mark::Kind::Right : Mark::Kind::Wrong, {}};
  const Mark m = mark_answer(exercise(i), s.input);
  if (m.kind == Mark::Kind::Unreadable) {
    s.message = m.message;
    return m;
  }
  s.message.clear();
  s.answer = trim(s.input);
  ++s.attempts;
  s.right = m.kind == Mark::Kind::Right;
  if (s.attempts == 1) s.first_right = s.right;
  record(i);
  return m;
}

void ExerciseBook::show_answer(int i) { m_states.at(static_cast<std::size_t>(i)).shown = true; }

bool ExerciseBook::explained(int i, bool answers_allowed) const {
  const ExerciseState& s = state(i);
  return s.right || (answers_allowed && (s.shown || s.attempts >= kAttemptsBeforeExplain));
}

void ExerciseBook::record(int i) {
  if (!m_progress) return;
  const ExerciseState& s = state(i);
  ExerciseRecord& r = m_progress->edit(m_lesson).exercises[exercise(i).id];
  r.answer = s.answer;
  r.right = s.right;
  r.attempts = s.attempts;
  r.first_right = s.first_right;
  r.at = utc_now_iso8601();
  m_progress->save();
}

}  // namespace tttlab::course
