// `tttlab lessons progress FILE... --key KEYFILE [--csv OUT]`: a class's progress exports
// (app/course/progress_export.hpp), each verified with the course key, in one table.
//
// One row per export: the student, a status — ok, TAMPERED (the signature does not match: edited
// after export), unkeyed (exported without a course pack: anyone could have written it), wrong course
// (another pack's export), unreadable — the number of finished lessons, then one column per item:
//   <lesson>/<prediction id>            the first committed answer: right, wrong, or blank
//   <lesson>/<prediction id> retries    how often the student predicted again
//   <lesson>/<exercise id>              right or wrong (blank: not answered)
//   <lesson>/<exercise id> attempts
// A TAMPERED or wrong-course row shows no items: its numbers cannot be trusted. Without --csv the
// command prints a summary per student and the class's results per item. Exits 1 when a file could not
// be read (each is named on stderr), 0 otherwise; tampered files are findings, flagged in the table.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.hpp"
#include "cli/lessons_commands.hpp"
#include "cli/validators.hpp"
#include "course/course_key.hpp"
#include "course/progress_export.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/limits.hpp"

namespace tttlab::cli {
namespace {

namespace fs = std::filesystem;
using course::ExportCheck;

struct ProgressArgs {
  std::vector<std::string> files;
  std::string key, csv;
};

struct Row {
  std::string file, student;
  ExportCheck::Status status = ExportCheck::Status::Unreadable;
  int finished = 0;
  std::map<std::string, std::string> cells;  // column → value
};

const nlohmann::json* object_at(const nlohmann::json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_object() ? &*it : nullptr;
}

bool flag(const nlohmann::json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_boolean() && it->get<bool>();
}

long long count(const nlohmann::json& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end()) return 0;
  if (it->is_array()) return static_cast<long long>(it->size());
  if (it->is_number_integer()) return it->get<long long>();
  return 0;
}

// The items of one progress record (see the file comment).
void fill(Row& row, const nlohmann::json& progress, std::set<std::string>& columns) {
  const nlohmann::json* lessons = object_at(progress, "lessons");
  if (!lessons) return;
  for (const auto& [name, l] : lessons->items()) {
    if (!l.is_object()) continue;
    row.finished += flag(l, "finished") ? 1 : 0;
    if (const auto* preds = object_at(l, "predictions")) {
      for (const auto& [id, p] : preds->items()) {
        if (!p.is_object()) continue;
        const std::string col = name + "/" + id;
        row.cells[col] = flag(p, "revealed") ? (flag(p, "right") ? "right" : "wrong") : "";
        row.cells[col + " retries"] = std::to_string(count(p, "retries"));
        columns.insert(col);
        columns.insert(col + " retries");
      }
    }
    if (const auto* exs = object_at(l, "exercises")) {
      for (const auto& [id, x] : exs->items()) {
        if (!x.is_object()) continue;
        const std::string col = name + "/" + id;
        const bool answered = x.contains("answer") || x.contains("right");
        row.cells[col] = answered ? (flag(x, "right") ? "right" : "wrong") : "";
        row.cells[col + " attempts"] = std::to_string(count(x, "attempts"));
        columns.insert(col);
        columns.insert(col + " attempts");
      }
    }
  }
}

// A CSV cell: quoted when it must be; a leading = + - @ is escaped so that a spreadsheet never runs a
// student's name as a formula.
std::string csv_cell(const std::string& v) {
  std::string s = v;
  if (!s.empty() && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@')) s = "'" + s;
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (const char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

void progress(const ProgressArgs& a) {
  course::PackKeys keys;
  try {
    keys = course::CourseKey::read(a.key).derive();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tttlab lessons progress: %s\n", printable(e.what()).c_str());
    return set_exit_code(1);
  }
  std::vector<Row> rows;
  std::set<std::string> columns;
  bool unreadable = false;
  for (const auto& f : a.files) {
    const ExportCheck c = course::verify_export_file(f, keys);
    Row r;
    r.file = f;
    r.student = c.student;
    r.status = c.status;
    if (c.status == ExportCheck::Status::Unreadable) {
      unreadable = true;
      std::fprintf(stderr, "tttlab lessons progress: %s: %s\n", printable(f).c_str(), printable(c.message).c_str());
    } else if (c.status == ExportCheck::Status::Tampered || c.status == ExportCheck::Status::WrongCourse) {
      std::fprintf(stderr, "tttlab lessons progress: %s (%s): %s\n", printable(f).c_str(), printable(c.student).c_str(),
                   printable(c.message).c_str());
    } else {
      fill(r, c.progress, columns);
    }
    rows.push_back(std::move(r));
  }
  auto counted = [](const Row& r) {
    return r.status == ExportCheck::Status::Ok || r.status == ExportCheck::Status::Unkeyed;
  };

  if (!a.csv.empty()) {
    std::string out = "student,file,status,finished";
    for (const auto& c : columns) out += "," + csv_cell(c);
    out += "\n";
    for (const auto& r : rows) {
      out += csv_cell(r.student) + "," + csv_cell(r.file) + "," + course::status_name(r.status) + "," +
             (counted(r) ? std::to_string(r.finished) : std::string());
      for (const auto& c : columns) {
        const auto it = r.cells.find(c);
        out += "," + (it == r.cells.end() ? std::string() : csv_cell(it->second));
      }
      out += "\n";
    }
    try {
      write_file_atomic(a.csv, out);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tttlab lessons progress: %s\n", printable(e.what()).c_str());
      return set_exit_code(1);
    }
    std::printf("wrote %s: %zu students, %zu item columns\n", printable(a.csv).c_str(), rows.size(), columns.size());
  } else {
    std::printf("%-24s %-13s %8s %12s %8s %12s %9s\n", "student", "status", "finished", "predictions", "retries",
                "exercises", "attempts");
    for (const auto& r : rows) {
      int p_right = 0, p_done = 0, x_right = 0, x_done = 0;
      long long retries = 0, attempts = 0;
      for (const auto& [col, v] : r.cells) {
        if (col.ends_with(" retries")) {
          retries += std::atoll(v.c_str());
        } else if (col.ends_with(" attempts")) {
          attempts += std::atoll(v.c_str());
        } else {
          const bool is_exercise = r.cells.count(col + " attempts") > 0;
          if (v.empty()) continue;
          (is_exercise ? x_done : p_done)++;
          if (v == "right") (is_exercise ? x_right : p_right)++;
        }
      }
      const std::string name = clip(printable(r.student.empty() ? "(no name)" : r.student), 24);
      if (!counted(r)) {
        std::printf("%-24s %-13s %8s %12s %8s %12s %9s\n", name.c_str(), course::status_name(r.status), "—", "—", "—",
                    "—", "—");
        continue;
      }
      char pr[32], xr[32];
      std::snprintf(pr, sizeof pr, "%d/%d right", p_right, p_done);
      std::snprintf(xr, sizeof xr, "%d/%d right", x_right, x_done);
      std::printf("%-24s %-13s %8d %12s %8lld %12s %9lld\n", name.c_str(), course::status_name(r.status), r.finished,
                  pr, retries, xr, attempts);
    }
    // Per item: how the class did (trusted and unkeyed rows).
    bool header = false;
    for (const auto& c : columns) {
      if (c.ends_with(" retries") || c.ends_with(" attempts")) continue;
      int right = 0, wrong = 0, blank = 0;
      for (const auto& r : rows) {
        if (!counted(r)) continue;
        const auto it = r.cells.find(c);
        const std::string v = it == r.cells.end() ? "" : it->second;
        (v == "right" ? right : v == "wrong" ? wrong : blank)++;
      }
      if (!header) {
        std::printf("\n%-48s %6s %6s %6s\n", "item", "right", "wrong", "blank");
        header = true;
      }
      std::printf("%-48s %6d %6d %6d\n", printable(c).c_str(), right, wrong, blank);
    }
  }
  set_exit_code(unreadable ? 1 : 0);
}

}  // namespace

void register_lessons_progress(CLI::App& lessons) {
  auto args = std::make_shared<ProgressArgs>();
  auto* p = lessons.add_subcommand(
      "progress",
      "Verify students' progress exports with the course key and put the class in one table: one row per "
      "student, one column per prediction and exercise; a file edited after export is flagged TAMPERED.");
  p->add_option("files", args->files, "The exported progress files")->required();
  p->add_option("--key", args->key, "The course key (as `tttlab lessons pack --teacher` wrote it)")
      ->required()
      ->check(CLI::ExistingFile);
  p->add_option("--csv", args->csv, "Write the whole table as CSV to this file instead of printing a summary")
      ->check(non_empty_path());
  p->callback([args] { progress(*args); });
}

}  // namespace tttlab::cli
