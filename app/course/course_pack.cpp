// app/course/course_pack.cpp — sealing a lesson's secrets, the pack manifest, and writing a pack
// (see course_pack.hpp).
#include "course/course_pack.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <system_error>
#include <unistd.h>
#include <vector>

#include "course/lesson.hpp"
#include "lab/state/json_fields.hpp"
#include "tttlab/io/atomic_file.hpp"

namespace tttlab::course {
namespace fs = std::filesystem;

namespace {

constexpr const char* kPackFormat = "tttlab-course-pack";
constexpr int kPackVersion = 1;
constexpr std::uint64_t kMaxManifestBytes = 64 * 1024;
constexpr std::size_t kBase64LineWidth = 76;
constexpr std::string_view kSealedPrefix = " sealed:";  // after "key:" / after "|"
constexpr std::string_view kSealedChoice = "| sealed:";
constexpr std::string_view kSealedFence = "```sealed";
constexpr std::array<std::string_view, 5> kSecretKeys = {"reveal", "answer", "explain", "expect", "claim"};
constexpr std::array<std::string_view, 4> kLessonBlocks = {"predict", "check", "question", "exercise"};

// The pieces between '\n's (N newlines → N + 1 pieces): joining them with '\n' gives the text back
// exactly, '\r's and a final newline included.
std::vector<std::string> split_keep(std::string_view text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (true) {
    const auto j = text.find('\n', i);
    if (j == std::string_view::npos) {
      out.emplace_back(text.substr(i));
      return out;
    }
    out.emplace_back(text.substr(i, j - i));
    i = j + 1;
  }
}

std::string join(const std::vector<std::string>& lines) {
  std::string s;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i) s += '\n';
    s += lines[i];
  }
  return s;
}

bool is_lesson_block(const std::string& fence_kind) {
  return std::find(kLessonBlocks.begin(), kLessonBlocks.end(), fence_kind) != kLessonBlocks.end();
}

bool is_secret_key(std::string_view key) {
  return std::find(kSecretKeys.begin(), kSecretKeys.end(), key) != kSecretKeys.end();
}

// The key of a "key: value" line as the lesson parser reads it (lesson.cpp, parse_fields), or "".
std::string field_key(std::string_view raw, std::size_t* colon_at) {
  const auto colon = raw.find(':');
  if (colon == std::string_view::npos || colon == 0 || raw.front() == ' ' || raw.front() == '\t') return {};
  const std::string k = trim(raw.substr(0, colon));
  if (k.empty() || !std::all_of(k.begin(), k.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '-' || c == '_'; }))
    return {};
  *colon_at = colon;
  return k;
}

bool is_section_end(std::string_view line) { return line.starts_with("## ") || line.starts_with("# "); }

std::string seal_b64(const PackKeys& k, std::string_view text) {
  return crypto::base64_encode(crypto::seal(k.seal, k.seal_mac, text));
}

// Seals the fields of one lesson block's body (the lines between its fences).
void seal_block_body(const std::vector<std::string>& body, const PackKeys& keys, std::vector<std::string>& out) {
  std::size_t i = 0;
  while (i < body.size()) {
    std::size_t colon = 0;
    const std::string key = field_key(body[i], &colon);
    std::size_t end = i + 1;  // the field's continuation lines: up to the next key line
    while (end < body.size()) {
      std::size_t c2 = 0;
      if (!field_key(body[end], &c2).empty()) break;
      ++end;
    }
    if (key.empty() || (!is_secret_key(key) && key != "choice")) {
      for (; i < end; ++i) out.push_back(body[i]);
      continue;
    }
    std::string value = body[i].substr(colon + 1);
    for (std::size_t j = i + 1; j < end; ++j) value += "\n" + body[j];
    const std::string head = body[i].substr(0, colon + 1);
    if (key == "choice") {
      const auto bar = value.rfind('|');
      if (bar == std::string::npos) {  // malformed: left for the parser to report
        for (; i < end; ++i) out.push_back(body[i]);
        continue;
      }
      out.push_back(head + value.substr(0, bar) + "|" + std::string(kSealedPrefix) + seal_b64(keys, value.substr(bar + 1)));
    } else {
      out.push_back(head + std::string(kSealedPrefix) + seal_b64(keys, value));
    }
    i = end;
  }
}

[[noreturn]] void bad_seal(const std::string& name, std::size_t line) {
  throw PackError(name + ":" + std::to_string(line + 1) +
                  ": a sealed text does not open with this pack's keys (the lesson or course-pack.json was "
                  "edited, or comes from another course)");
}

std::string open_b64(const PackKeys& k, std::string_view b64, const std::string& name, std::size_t line) {
  const auto bytes = crypto::base64_decode(trim(b64));
  if (!bytes) bad_seal(name, line);
  auto text = crypto::unseal(k.seal, k.seal_mac, *bytes);
  if (!text) bad_seal(name, line);
  return std::move(*text);
}

void unseal_block_body(const std::vector<std::string>& body, std::size_t first_line, const PackKeys& keys,
                       const std::string& name, std::vector<std::string>& out) {
  std::string field;  // the key of the field this line belongs to (continuation lines: the one above)
  for (std::size_t i = 0; i < body.size(); ++i) {
    const std::string& raw = body[i];
    std::size_t colon = 0;
    const std::string key = field_key(raw, &colon);
    if (!key.empty()) field = key;
    if (field == "choice") {  // its "| condition" may sit on a continuation line
      const auto at = raw.rfind(kSealedChoice);
      if (at != std::string::npos) {
        out.push_back(raw.substr(0, at) + "|" +
                      open_b64(keys, std::string_view(raw).substr(at + 1 + kSealedPrefix.size()), name, first_line + i));
        continue;
      }
    } else if (is_secret_key(key) && std::string_view(raw).substr(colon + 1).starts_with(kSealedPrefix)) {
      out.push_back(raw.substr(0, colon + 1) +
                    open_b64(keys, std::string_view(raw).substr(colon + 1 + kSealedPrefix.size()), name, first_line + i));
      continue;
    }
    out.push_back(raw);
  }
}

enum class Mode { Seal, Unseal };

// Walks a lesson's lines as the parser does: lesson blocks, ordinary code blocks (copied through),
// reveal sections and prose. The two modes differ only in what they do with a block's fields and
// with a reveal section (Seal) or a ```sealed block (Unseal).

std::string transform(std::string_view text, const PackKeys& keys, Mode mode, const std::string& name) {
  const std::vector<std::string> lines = split_keep(text);
  std::vector<std::string> out;
  out.reserve(lines.size());
  std::size_t i = 0;
  const std::size_t n = lines.size();
  while (i < n) {
    const std::string& line = lines[i];
    const std::string t = trim(line);
    if (mode == Mode::Unseal && t == kSealedFence) {
      std::size_t j = i + 1;
      std::string b64;
      while (j < n && trim(lines[j]) != "```") b64 += trim(lines[j++]);
      if (j == n) bad_seal(name, i);
      out.push_back(open_b64(keys, b64, name, i));
      i = j + 1;
      continue;
    }
    if (t.starts_with("````")) {
      // A four-backtick fence is how the teachers' guide (README.md) quotes whole lesson blocks; lessons
      // never use one (the parser refuses it). Its lines are walked like prose so that the quoted
      // blocks' secrets are sealed too.
      out.push_back(line);
      ++i;
      continue;
    }
    if (t.starts_with("```")) {
      const std::string kind = trim(std::string_view(t).substr(3));
      if (is_lesson_block(kind)) {
        std::size_t j = i + 1;
        while (j < n && trim(lines[j]) != "```") ++j;
        if (j == n) {  // unclosed: left for the parser to report
          for (; i < n; ++i) out.push_back(lines[i]);
          break;
        }
        out.push_back(line);
        const std::vector<std::string> body(lines.begin() + static_cast<std::ptrdiff_t>(i + 1),
                                            lines.begin() + static_cast<std::ptrdiff_t>(j));
        if (mode == Mode::Seal)
          seal_block_body(body, keys, out);
        else
          unseal_block_body(body, i + 1, keys, name, out);
        out.push_back(lines[j]);
        i = j + 1;
        continue;
      }
      // An ordinary code block, to its closing fence as the parser reads it.
      out.push_back(line);
      for (++i; i < n; ++i) {
        out.push_back(lines[i]);
        if (trim(lines[i]).starts_with("```")) break;
      }
      ++i;
      continue;
    }
    if (mode == Mode::Seal && is_reveal_heading(line)) {
      std::size_t j = i + 1;
      bool in_fence = false;
      for (; j < n; ++j) {
        if (trim(lines[j]).starts_with("```"))
          in_fence = !in_fence;
        else if (!in_fence && is_section_end(lines[j]))
          break;
      }
      const std::vector<std::string> section(lines.begin() + static_cast<std::ptrdiff_t>(i),
                                             lines.begin() + static_cast<std::ptrdiff_t>(j));
      const std::string b64 = seal_b64(keys, join(section));
      out.emplace_back(kSealedFence);
      for (std::size_t k = 0; k < b64.size(); k += kBase64LineWidth) out.push_back(b64.substr(k, kBase64LineWidth));
      out.emplace_back("```");
      i = j;
      continue;
    }
    out.push_back(line);
    ++i;
  }
  return join(out);
}

std::string hex_field(const nlohmann::json& o, const char* key, const fs::path& file, std::size_t bytes) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_string())
    throw PackError(file.string() + ": \"" + key + "\" is missing or not a string");
  const std::string s = it->get<std::string>();
  const auto b = crypto::from_hex(s);
  if (!b || b->size() != bytes)
    throw PackError(file.string() + ": \"" + key + "\" is not " + std::to_string(bytes * 2) + " hex digits");
  return s;
}

Digest digest_of(const std::string& hex) {
  const Bytes b = *crypto::from_hex(hex);
  Digest d;
  std::copy(b.begin(), b.end(), d.begin());
  return d;
}

bool same_expectation(const Expectation& a, const Expectation& b) {
  return a.kind == b.kind && a.a == b.a && a.b == b.b && a.text == b.text;
}

}  // namespace

std::string seal_lesson_text(std::string_view text, const PackKeys& keys) {
  return transform(text, keys, Mode::Seal, "");
}

std::string unseal_lesson_text(std::string_view text, const PackKeys& keys, const std::string& name) {
  return transform(text, keys, Mode::Unseal, name);
}

std::optional<CoursePack> open_pack(const fs::path& dir) {
  const fs::path file = dir / kPackManifest;
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  std::string text;
  try {
    text = read_file_text(file, kMaxManifestBytes);
  } catch (const FileError& e) {
    throw PackError(e.what());
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw PackError(file.string() + ": not valid JSON");
  }
  if (!doc.is_object() || doc.value("format", "") != kPackFormat)
    throw PackError(file.string() + std::string(": not a course pack manifest (no \"format\": \"") + kPackFormat + "\")");
  if (!doc.contains("version") || !doc["version"].is_number_integer() || doc["version"].get<std::int64_t>() > kPackVersion)
    throw PackError(file.string() + ": a pack of another version (this build reads version " + std::to_string(kPackVersion) + ")");
  const auto keys = doc.find("keys");
  if (keys == doc.end() || !keys->is_object()) throw PackError(file.string() + ": \"keys\" is missing");
  CoursePack p;
  p.dir = dir;
  p.keys.seal = digest_of(hex_field(*keys, "seal", file, 32));
  p.keys.seal_mac = digest_of(hex_field(*keys, "seal_mac", file, 32));
  p.keys.progress = digest_of(hex_field(*keys, "progress", file, 32));
  p.keys.course_id = hex_field(doc, "course_id", file, 16);
  if (const auto c = doc.find("classroom"); c != doc.end()) {
    try {
      p.classroom = classroom::from_json(lab::FieldReader(*c, "classroom"));
    } catch (const std::exception& e) {
      throw PackError(file.string() + ": " + e.what());
    }
  }
  if (const auto l = doc.find("classroom_locked"); l != doc.end()) {
    if (!l->is_boolean()) throw PackError(file.string() + ": \"classroom_locked\" is not true or false");
    p.classroom_locked = l->get<bool>();
  }
  return p;
}

bool same_lesson(const Lesson& a, const Lesson& b, std::string* why) {
  auto differ = [&](const std::string& what) {
    if (why) *why = a.name + ": " + what + " differs";
    return false;
  };
  if (a.name != b.name || a.title != b.title || a.goal != b.goal || a.minutes != b.minutes) return differ("the front matter");
  if (a.scene.filename() != b.scene.filename()) return differ("the scene");
  if (a.parts.size() != b.parts.size()) return differ("the number of parts");
  for (std::size_t i = 0; i < a.parts.size(); ++i)
    if (a.parts[i].kind != b.parts[i].kind || a.parts[i].markdown != b.parts[i].markdown || a.parts[i].index != b.parts[i].index)
      return differ("part " + std::to_string(i + 1));
  if (a.predictions.size() != b.predictions.size()) return differ("the number of predictions");
  for (std::size_t i = 0; i < a.predictions.size(); ++i) {
    const Prediction &p = a.predictions[i], &q = b.predictions[i];
    if (p.id != q.id || p.ask != q.ask || p.experiment != q.experiment || p.measure != q.measure ||
        p.slider_min != q.slider_min || p.slider_max != q.slider_max || p.tolerance != q.tolerance || p.unit != q.unit ||
        p.reveal != q.reveal || p.line != q.line || p.choices.size() != q.choices.size())
      return differ("prediction " + p.id);
    for (std::size_t c = 0; c < p.choices.size(); ++c)
      if (p.choices[c].text != q.choices[c].text || !same_expectation(p.choices[c].when, q.choices[c].when))
        return differ("prediction " + p.id + " choice " + std::to_string(c + 1));
  }
  if (a.questions.size() != b.questions.size()) return differ("the number of questions");
  for (std::size_t i = 0; i < a.questions.size(); ++i) {
    const Question &p = a.questions[i], &q = b.questions[i];
    if (p.ask != q.ask || p.hint != q.hint || p.answer != q.answer || p.line != q.line)
      return differ("question " + std::to_string(i + 1));
  }
  if (a.checks.size() != b.checks.size()) return differ("the number of checks");
  for (std::size_t i = 0; i < a.checks.size(); ++i) {
    const Check &p = a.checks[i], &q = b.checks[i];
    if (p.claim != q.claim || p.experiment != q.experiment || p.measure != q.measure ||
        !same_expectation(p.expect, q.expect) || p.depends_on_device != q.depends_on_device || p.line != q.line)
      return differ("check " + std::to_string(i + 1));
  }
  if (a.exercises.size() != b.exercises.size()) return differ("the number of exercises");
  for (std::size_t i = 0; i < a.exercises.size(); ++i) {
    const Exercise &p = a.exercises[i], &q = b.exercises[i];
    if (p.id != q.id || p.ask != q.ask || p.answer != q.answer || p.tolerance != q.tolerance ||
        p.relative != q.relative || p.unit != q.unit || p.var_names != q.var_names || p.points != q.points ||
        p.explain != q.explain || p.line != q.line)
      return differ("exercise " + p.id);
  }
  if (a.experiments.size() != b.experiments.size()) return differ("the number of experiments");
  for (std::size_t i = 0; i < a.experiments.size(); ++i)
    if (a.experiments[i].id != b.experiments[i].id || a.experiments[i].scene.filename() != b.experiments[i].scene.filename() ||
        a.experiments[i].line != b.experiments[i].line)
      return differ("experiment " + a.experiments[i].id);
  return true;
}

int write_student_pack(const PackOptions& o, const CourseKey& key) {
  std::error_code ec;
  if (!fs::is_directory(o.source, ec)) throw PackError(o.source.string() + " is not a folder");
  if (fs::exists(o.source / kPackManifest, ec))
    throw PackError(o.source.string() + " is already a student pack: pack the teacher's lessons folder");
  const fs::path out = fs::absolute(o.out, ec);
  if (fs::exists(fs::symlink_status(out, ec))) {
    if (!fs::is_directory(fs::symlink_status(out, ec)) || !fs::is_empty(out, ec))
      throw PackError(out.string() + " exists and is not an empty folder: the pack goes into a new folder");
  }
  const fs::path parent = out.parent_path();
  if (!fs::is_directory(parent, ec)) throw PackError(parent.string() + " does not exist: create it first");

  const Course source = load_course(o.source);
  if (!source.errors.empty())
    throw PackError("the course has a malformed lesson, fix it before packing: " + source.errors.front().second);
  if (source.lessons.empty()) throw PackError(o.source.string() + " has no lessons");

  std::string temp_name = ".";
  temp_name += out.filename().string();
  temp_name += ".packing-" + std::to_string(::getpid());
  const fs::path temp = parent / temp_name;
  fs::remove_all(temp, ec);
  fs::create_directory(temp, ec);
  if (ec) throw PackError("cannot create '" + temp.string() + "': " + ec.message());
  try {
    const PackKeys keys = key.derive();
    std::vector<fs::path> files;
    for (fs::directory_iterator it(o.source, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (n.starts_with(".") || !it->is_regular_file()) continue;  // hidden files and folders stay home
      files.push_back(it->path());
    }
    if (ec) throw PackError("cannot list '" + o.source.string() + "': " + ec.message());
    for (const auto& f : files) {
      std::string bytes = read_file_text(f, 64ull << 20);
      if (f.extension() == ".md") bytes = seal_lesson_text(bytes, keys);
      write_file_atomic(temp / f.filename(), bytes);
    }
    nlohmann::json manifest = {{"format", kPackFormat},
                               {"version", kPackVersion},
                               {"course_id", keys.course_id},
                               {"keys",
                                {{"seal", crypto::to_hex(keys.seal)},
                                 {"seal_mac", crypto::to_hex(keys.seal_mac)},
                                 {"progress", crypto::to_hex(keys.progress)}}},
                               {"classroom_locked", o.lock_classroom}};
    if (o.classroom) manifest["classroom"] = classroom::to_json(*o.classroom);
    write_file_atomic(temp / kPackManifest, manifest.dump(2) + "\n");

    // Read back: every lesson of the pack must unseal to exactly the teacher's.
    const Course packed = load_course(temp);
    if (!packed.errors.empty()) throw PackError("the packed course does not read back: " + packed.errors.front().second);
    if (packed.lessons.size() != source.lessons.size()) throw PackError("the packed course lost a lesson");
    for (std::size_t i = 0; i < packed.lessons.size(); ++i) {
      std::string why;
      if (!same_lesson(source.lessons[i], packed.lessons[i], &why)) throw PackError("the packed course does not read back: " + why);
    }
    if (fs::exists(out, ec)) fs::remove(out, ec);  // the empty folder the pack replaces
    fs::rename(temp, out, ec);
    if (ec) throw PackError("cannot move the pack into '" + out.string() + "': " + ec.message());
  } catch (const std::exception& e) {
    std::error_code ignore;
    fs::remove_all(temp, ignore);
    if (dynamic_cast<const PackError*>(&e)) throw;
    throw PackError(e.what());
  }
  return static_cast<int>(source.lessons.size());
}

}  // namespace tttlab::course
