// app/course/progress.cpp — the student's progress file (see progress.hpp).
//
// Reading is all-or-nothing: a file that is not exactly what this build writes (bad JSON, another
// format, a newer version, a field of the wrong type) leaves the progress empty, sets error() and is
// not touched on disk. Before the student's next change replaces such a file, it is copied once to
// "<file>.unreadable", so even a file another tool damaged is never lost silently.
#include "course/progress.hpp"

#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <system_error>

#include "lab/engine/resources.hpp"
#include "tttlab/io/atomic_file.hpp"

namespace tttlab::course {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "tttlab-course-progress";
constexpr int kVersion = 1;
constexpr std::uint64_t kMaxBytes = 1u << 20;  // a course's progress is a few KB
constexpr int kMaxDepth = 16;                  // the format is 7 levels deep

// A malformed field: the message names it ("lessons.01-x.finished: expected true or false").
struct Bad : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char* type_name(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "true/false";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::object: return "an object";
    default: return "a number";
  }
}

[[noreturn]] void expected(const std::string& where, const char* what, const nlohmann::json& got) {
  throw Bad(where + ": expected " + what + ", found " + type_name(got));
}

bool read_bool(const nlohmann::json& o, const char* key, const std::string& where) {
  const auto it = o.find(key);
  if (it == o.end()) return false;
  if (!it->is_boolean()) expected(where + "." + key, "true or false", *it);
  return it->get<bool>();
}

// A number; null stands for a value that was not finite when it was written (JSON has no NaN).
double read_number(const nlohmann::json& o, const char* key, const std::string& where) {
  const auto it = o.find(key);
  if (it == o.end()) return 0.0;
  if (it->is_null()) return std::nan("");
  if (!it->is_number()) expected(where + "." + key, "a number", *it);
  return it->get<double>();
}

std::string read_string(const nlohmann::json& o, const char* key, const std::string& where) {
  const auto it = o.find(key);
  if (it == o.end()) return {};
  if (!it->is_string()) expected(where + "." + key, "a string", *it);
  return it->get<std::string>();
}

int read_attempts(const nlohmann::json& o, const std::string& where) {
  const auto it = o.find("attempts");
  if (it == o.end()) return 0;
  if (!it->is_number_integer()) expected(where + ".attempts", "a whole number", *it);
  const auto v = it->get<std::int64_t>();
  if (v < 0 || v > 1000000) throw Bad(where + ".attempts: " + std::to_string(v) + " is not a count of attempts");
  return static_cast<int>(v);
}

int read_choice(const nlohmann::json& o, const std::string& where) {
  const auto it = o.find("choice");
  if (it == o.end()) return -1;
  if (!it->is_number_integer()) expected(where + ".choice", "a whole number", *it);
  const auto v = it->get<std::int64_t>();
  if (v < -1 || v > 1000) throw Bad(where + ".choice: " + std::to_string(v) + " is not a choice (−1 … 1000)");
  return static_cast<int>(v);
}

std::map<std::string, LessonProgress> parse(const std::string& text, std::string* student = nullptr) {
  const auto depth_cap = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxDepth) throw Bad("nests arrays and objects too deeply: not a progress file");
    return true;
  };
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text, depth_cap);
  } catch (const nlohmann::json::exception& e) {  // also out_of_range: a number beyond a double
    std::string what = e.what();  // "[json.exception.parse_error.101] parse error at line 3, …"
    if (const auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    throw Bad("not valid JSON: " + what);
  }
  if (!doc.is_object()) throw Bad("not a course progress file (the top level is not an object)");
  const auto fmt = doc.find("format");
  if (fmt == doc.end() || !fmt->is_string() || fmt->get<std::string>() != kFormat)
    throw Bad(std::string("not a course progress file (missing \"format\": \"") + kFormat + "\")");
  if (const auto v = doc.find("version"); v != doc.end()) {
    if (!v->is_number_integer()) expected("version", "a whole number", *v);
    if (v->get<std::int64_t>() > kVersion)
      throw Bad("written by a newer TTT Lab (version " + std::to_string(v->get<std::int64_t>()) +
                ", this build reads up to " + std::to_string(kVersion) + ")");
  }
  if (const auto s = doc.find("student"); s != doc.end()) {
    if (!s->is_string()) expected("student", "a string", *s);
    if (student) *student = s->get<std::string>();
  }
  std::map<std::string, LessonProgress> out;
  const auto lessons = doc.find("lessons");
  if (lessons == doc.end()) return out;
  if (!lessons->is_object()) expected("lessons", "an object", *lessons);
  for (const auto& [name, l] : lessons->items()) {
    const std::string where = "lessons." + name;
    if (!l.is_object()) expected(where, "an object", l);
    LessonProgress lp;
    lp.finished = read_bool(l, "finished", where);
    if (const auto preds = l.find("predictions"); preds != l.end()) {
      if (!preds->is_object()) expected(where + ".predictions", "an object", *preds);
      for (const auto& [id, p] : preds->items()) {
        const std::string pw = where + ".predictions." + id;
        if (!p.is_object()) expected(pw, "an object", p);
        PredictionRecord r;
        r.choice = read_choice(p, pw);
        r.value = read_number(p, "value", pw);
        r.revealed = read_bool(p, "revealed", pw);
        r.right = read_bool(p, "right", pw);
        r.measured = read_number(p, "measured", pw);
        r.committed_at = read_string(p, "committed_at", pw);
        if (const auto retries = p.find("retries"); retries != p.end()) {
          if (!retries->is_array()) expected(pw + ".retries", "an array", *retries);
          for (std::size_t k = 0; k < retries->size(); ++k) {
            const nlohmann::json& t = (*retries)[k];
            const std::string tw = pw + ".retries[" + std::to_string(k) + "]";
            if (!t.is_object()) expected(tw, "an object", t);
            PredictionRetry retry;
            retry.choice = read_choice(t, tw);
            retry.value = read_number(t, "value", tw);
            retry.right = read_bool(t, "right", tw);
            retry.at = read_string(t, "at", tw);
            r.retries.push_back(std::move(retry));
          }
        }
        lp.predictions.emplace(id, std::move(r));
      }
    }
    if (const auto exs = l.find("exercises"); exs != l.end()) {
      if (!exs->is_object()) expected(where + ".exercises", "an object", *exs);
      for (const auto& [id, x] : exs->items()) {
        const std::string xw = where + ".exercises." + id;
        if (!x.is_object()) expected(xw, "an object", x);
        ExerciseRecord r;
        r.answer = read_string(x, "answer", xw);
        r.right = read_bool(x, "right", xw);
        r.attempts = read_attempts(x, xw);
        r.first_right = read_bool(x, "first_right", xw);
        r.at = read_string(x, "at", xw);
        lp.exercises.emplace(id, std::move(r));
      }
    }
    out.emplace(name, std::move(lp));
  }
  return out;
}

nlohmann::json to_json(const std::map<std::string, LessonProgress>& lessons, const std::string& student) {
  nlohmann::json ls = nlohmann::json::object();
  for (const auto& [name, lp] : lessons) {
    nlohmann::json preds = nlohmann::json::object();
    for (const auto& [id, r] : lp.predictions) {
      nlohmann::json retries = nlohmann::json::array();
      for (const PredictionRetry& t : r.retries)
        retries.push_back({{"choice", t.choice}, {"value", t.value}, {"right", t.right}, {"at", t.at}});
      preds[id] = {{"choice", r.choice},
                   {"value", r.value},  // NaN and ±∞ are written as null
                   {"revealed", r.revealed},
                   {"right", r.right},
                   {"measured", r.measured},
                   {"committed_at", r.committed_at},
                   {"retries", std::move(retries)}};
    }
    nlohmann::json exs = nlohmann::json::object();
    for (const auto& [id, r] : lp.exercises)
      exs[id] = {{"answer", r.answer},
                 {"right", r.right},
                 {"attempts", r.attempts},
                 {"first_right", r.first_right},
                 {"at", r.at}};
    ls[name] = {{"finished", lp.finished}, {"predictions", std::move(preds)}, {"exercises", std::move(exs)}};
  }
  nlohmann::json doc = {{"format", kFormat}, {"version", kVersion}, {"lessons", std::move(ls)}};
  if (!student.empty()) doc["student"] = student;
  return doc;
}

bool readable(const fs::path& path) {
  try {
    parse(read_file_text(path, kMaxBytes));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string utc_now_iso8601() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

fs::path ProgressStore::default_path() { return lab::user_config_file("TTTLAB_PROGRESS", "course-progress.json"); }

ProgressStore::ProgressStore(fs::path path) : m_path(std::move(path)) {
  try {
    std::error_code ec;
    const auto st = fs::status(m_path, ec);
    if (!fs::exists(st)) return;  // not written yet: an empty progress
    if (fs::is_directory(st)) {
      m_error = m_path.string() + " is a folder, not a progress file";
      return;
    }
    const std::string text = read_file_text(m_path, kMaxBytes);  // FileError names the file
    m_lessons = parse(text, &m_student);
  } catch (const Bad& e) {
    m_lessons.clear();
    m_student.clear();
    m_error = m_path.string() + ": " + e.what();
  } catch (const std::exception& e) {
    m_lessons.clear();
    m_error = e.what();
  }
}

const LessonProgress* ProgressStore::lesson(const std::string& name) const {
  const auto it = m_lessons.find(name);
  return it == m_lessons.end() ? nullptr : &it->second;
}

LessonProgress& ProgressStore::edit(const std::string& name) { return m_lessons[name]; }

bool ProgressStore::save() {
  try {
    std::error_code ec;
    const fs::path dir = m_path.parent_path();
    if (!dir.empty() && !fs::is_directory(dir, ec)) {
      fs::create_directories(dir, ec);
      if (ec) throw FileError("cannot create the folder '" + dir.string() + "': " + ec.message());
    }
    // After a failure (m_error set), the file on disk may be one this store could not read: it is
    // kept beside the new one. (Checked only then, so a normal save reads nothing.)
    if (!m_error.empty() && fs::is_regular_file(m_path, ec) && !readable(m_path)) {
      fs::path keep = m_path;
      keep += ".unreadable";
      fs::copy_file(m_path, keep, fs::copy_options::overwrite_existing, ec);
      if (ec) throw FileError("cannot keep a copy of the unreadable '" + m_path.string() + "' as '" +
                              keep.string() + "': " + ec.message());
    }
    // A student's typed answer that is not valid UTF-8 is written with U+FFFD rather than lost.
    write_file_atomic(m_path,
                      to_json(m_lessons, m_student).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    m_error.clear();
    return true;
  } catch (const std::exception& e) {
    m_error = std::string("your progress could not be saved: ") + e.what();
    return false;
  }
}

int ProgressStore::finished_count() const {
  int n = 0;
  for (const auto& [name, lp] : m_lessons) n += lp.finished ? 1 : 0;
  return n;
}

}  // namespace tttlab::course
