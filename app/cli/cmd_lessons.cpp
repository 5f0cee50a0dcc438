// `tttlab lessons list | check [NAME...] [--json] | measures | handout [NAME...] --out DIR [--figures]`: the
// course in lessons/ (app/course/).
//
// `check` runs every claim of the named lessons (all by default) on the engine, headless: each
// lesson's experiment is its scene (a .tttlab state whose view computes on a private engine), and each
// ```check block compares one measure of it with the claim's expectation. It prints the measured
// value beside the claim and exits 1 if any claim fails, or any lesson file is malformed. Claims that
// depend on the machine (speeds) are printed with their spread and never fail on the number alone.
// It also checks every graded exercise's key (it reads, is finite, is marked right when typed as an
// answer, and its tolerance and unit make sense) and that each lesson has at least two exercises.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "cli/commands.hpp"
#include "cli/lessons_commands.hpp"
#include "cli/validators.hpp"
#include "course/exercise.hpp"
#include "course/experiments.hpp"
#include "course/handout.hpp"
#include "course/lesson.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/limits.hpp"

namespace tttlab::cli {
namespace {

namespace fs = std::filesystem;

// Every lesson gives the student at least this many graded exercises.
constexpr std::size_t kMinExercises = 2;

struct LessonsArgs {
  std::vector<std::string> names;
  bool json = false;
  std::string dir;
  int timeout_s = 600;
  std::string out;            // handout: the folder to write into
  bool with_answers = false;  // handout: the teacher's copy
  bool figures = false;       // handout: pictures of the lessons' views
};

// A student pack (course_pack.hpp) opens like any lessons folder: its lessons are unsealed on reading.
std::optional<course::Course> open_course(const LessonsArgs& a) {
  const auto dir = lessons_folder(a.dir);
  if (!dir) return std::nullopt;
  return course::load_course(*dir);
}

// The lessons `names` names (all of them when empty), or nothing after saying which name is unknown.
std::optional<std::vector<const course::Lesson*>> named_lessons(const course::Course& c,
                                                                const std::vector<std::string>& names,
                                                                const char* command) {
  std::vector<const course::Lesson*> todo;
  bool bad_name = false;
  if (names.empty()) {
    for (const auto& l : c.lessons) todo.push_back(&l);
  }
  for (const auto& n : names) {
    if (const auto* l = c.find(n)) {
      todo.push_back(l);
    } else if (const auto* e = c.find_error(n)) {
      std::fprintf(stderr, "tttlab lessons %s: %s\n", command, printable(*e).c_str());
      bad_name = true;
    } else {
      std::fprintf(stderr, "tttlab lessons %s: no lesson \"%s\" in %s (tttlab lessons list names them)\n", command,
                   printable(n).c_str(), printable(c.dir.string()).c_str());
      bad_name = true;
    }
  }
  if (bad_name) return std::nullopt;
  return todo;
}

std::string fmt(double v) {
  char b[48];
  if (v != 0 && (std::fabs(v) < 1e-3 || std::fabs(v) >= 1e5))
    std::snprintf(b, sizeof b, "%.3e", v);
  else
    std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

void list(const LessonsArgs& a) {
  const auto c = open_course(a);
  if (!c) return set_exit_code(1);
  int total = 0;
  for (const auto& l : c->lessons) {
    std::printf("%-32s %3d min  %s\n        %s\n", printable(l.name).c_str(), l.minutes, printable(l.title).c_str(), printable(l.goal).c_str());
    total += l.minutes;
  }
  for (const auto& [f, e] : c->errors) std::printf("MALFORMED %s\n", printable(e).c_str());
  std::printf("%zu lessons, %d min in all\n", c->lessons.size(), total);
  set_exit_code(c->errors.empty() ? 0 : 1);
}

void measures() {
  for (const auto& p : course::measurable_panels()) {
    std::printf("%s\n", p.c_str());
    for (const auto& m : course::measures_of(p))
      std::printf("  %-20s %s%s\n", m.name.c_str(), m.description.c_str(),
                  m.depends_on_device ? " (depends on the device)" : "");
  }
}

void check(const LessonsArgs& a) {
  const auto c = open_course(a);
  if (!c) return set_exit_code(1);
  const auto todo = named_lessons(*c, a.names, "check");
  if (!todo) return set_exit_code(2);

  nlohmann::json out = {{"lessons", nlohmann::json::array()}};
  int lessons_failed = 0, claims_passed = 0, claims_failed = 0, exercises_passed = 0, exercises_failed = 0;
  for (const auto& [f, e] : c->errors) {  // malformed files fail (when checking everything)
    if (!a.names.empty()) continue;
    ++lessons_failed;
    if (!a.json) std::printf("MALFORMED %s\n", printable(e).c_str());
    out["lessons"].push_back({{"name", f.stem().string()}, {"passed", false}, {"error", e}, {"checks", nlohmann::json::array()}});
  }
  for (const auto* l : *todo) {
    if (!a.json) std::printf("\n%s — %s\n", printable(l->name).c_str(), printable(l->title).c_str());
    nlohmann::json lj = {{"name", l->name}, {"checks", nlohmann::json::array()}};
    bool lesson_ok = true;
    std::map<std::string, course::Measures> cache;  // experiment id → its measures
    std::map<std::string, std::string> failures;     // experiment id → why it could not run
    for (const auto& ch : l->checks) {
      nlohmann::json cj = {{"claim", ch.claim}, {"measure", ch.measure}, {"expected", ch.expect.text}};
      if (!cache.count(ch.experiment) && !failures.count(ch.experiment)) {
        const auto t0 = std::chrono::steady_clock::now();
        try {
          const fs::path& scene = l->scene_of(ch.experiment);
          cache[ch.experiment] = course::run_scene(scene, std::chrono::seconds(a.timeout_s));
          if (!a.json)
            std::printf("  (experiment %s: %.1f s)\n", printable(scene.filename().string()).c_str(),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        } catch (const std::exception& e) {
          failures[ch.experiment] = e.what();
        }
      }
      bool passed = false;
      if (failures.count(ch.experiment)) {
        cj["error"] = failures[ch.experiment];
        cj["measured"] = nullptr;
      } else {
        const auto& m = cache[ch.experiment];
        const auto it = m.find(ch.measure);
        if (it == m.end()) {
          std::string known;
          for (const auto& [k, v] : m) known += (known.empty() ? "" : ", ") + k;
          cj["error"] = l->file.generic_string() + ":" + std::to_string(ch.line) + ": the experiment has no measure \"" +
                        ch.measure + "\" (it has: " + known + ")";
          cj["measured"] = nullptr;
        } else {
          const auto& v = it->second;
          cj["measured"] = v.value;
          if (v.lo) cj["measured_min"] = *v.lo;
          if (v.hi) cj["measured_max"] = *v.hi;
          const bool holds = ch.expect.holds(v.value);
          cj["holds"] = holds;
          // A machine-dependent claim is reported, not failed on its number.
          passed = ch.depends_on_device || v.depends_on_device ? std::isfinite(v.value) : holds;
          if (ch.depends_on_device || v.depends_on_device) cj["depends_on_device"] = true;
        }
      }
      cj["passed"] = passed;
      (passed ? claims_passed : claims_failed)++;
      lesson_ok &= passed;
      if (!a.json) {
        std::string measured = cj["measured"].is_null() ? "—" : fmt(cj["measured"].get<double>());
        if (cj.contains("measured_min"))
          measured += " (" + fmt(cj["measured_min"].get<double>()) + " .. " + fmt(cj["measured_max"].get<double>()) + ")";
        const char* verdict = !passed ? "FAIL" : cj.value("depends_on_device", false) ? "report" : "ok";
        std::printf("  %-6s %s\n         %s = %s, expected %s\n", verdict, printable(ch.claim).c_str(), printable(ch.measure).c_str(),
                    measured.c_str(), printable(ch.expect.text).c_str());
        if (cj.contains("error")) std::printf("         %s\n", printable(cj["error"].get<std::string>()).c_str());
      }
      lj["checks"].push_back(std::move(cj));
    }
    // The graded exercises: their keys, checked without the engine.
    lj["exercises"] = nlohmann::json::array();
    for (const auto& x : l->exercises) {
      const std::string problem = course::audit_exercise(x);
      const bool passed = problem.empty();
      nlohmann::json xj = {{"id", x.id}, {"key", course::key_text(x)}, {"passed", passed}};
      if (!passed) xj["error"] = l->file.generic_string() + ":" + std::to_string(x.line) + ": " + problem;
      (passed ? exercises_passed : exercises_failed)++;
      lesson_ok &= passed;
      if (!a.json) {
        std::printf("  %-6s exercise %s: key %s\n", passed ? "ok" : "FAIL", printable(x.id).c_str(),
                    printable(clip(course::key_text(x), 80)).c_str());
        if (!passed) std::printf("         %s\n", printable(xj["error"].get<std::string>()).c_str());
      }
      lj["exercises"].push_back(std::move(xj));
    }
    if (l->exercises.size() < kMinExercises) {
      lesson_ok = false;
      lj["error"] = l->file.generic_string() + ": " + std::to_string(l->exercises.size()) +
                    " graded exercises; a lesson has at least " + std::to_string(kMinExercises) + " (```exercise blocks)";
      if (!a.json) std::printf("  FAIL   %s\n", printable(lj["error"].get<std::string>()).c_str());
    }
    lj["passed"] = lesson_ok;
    if (!lesson_ok) ++lessons_failed;
    out["lessons"].push_back(std::move(lj));
    std::fflush(stdout);
  }
  const int lessons_passed = static_cast<int>(out["lessons"].size()) - lessons_failed;
  if (a.json) {
    out["passed"] = lessons_failed == 0;
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("\nlessons: %d passed, %d failed; claims: %d passed, %d failed; exercises: %d passed, %d failed\n",
                lessons_passed, lessons_failed, claims_passed, claims_failed, exercises_passed, exercises_failed);
  }
  set_exit_code(lessons_failed ? 1 : 0);
}

// The figures' folder inside the handouts' folder.
constexpr const char* kFiguresDir = "figures";

// Renders every page first and writes only when all of them rendered, so a bad lesson leaves the
// folder as it was. Only the folder itself is created (its parent must exist), and only handout files,
// the index and (--figures) the pictures in its figures/ folder are written into it.
//
// --figures: the pictures are rendered into a hidden folder inside DIR first and moved into
// DIR/figures/ only when every one of them was made; a failure removes them (and DIR, when this run
// created it). A picture is made only for a figure the page shows: the student's copy never has a
// picture of a sealed view, even as a file beside the page.
void handout(const LessonsArgs& a) {
  const char* me = "tttlab lessons handout";
  if (!course::handouts_available()) {
    std::fprintf(stderr,
                 "%s: this build has no Markdown-to-HTML renderer (install libmd4c-html0-dev and rebuild)\n", me);
    return set_exit_code(1);
  }
  if (std::string why; a.figures && !views_can_render(why)) {
    std::fprintf(stderr, "%s: %s\n", me, why.c_str());
    return set_exit_code(1);
  }
  const auto c = open_course(a);
  if (!c) return set_exit_code(1);
  const auto todo = named_lessons(*c, a.names, "handout");
  if (!todo) return set_exit_code(2);

  // The pictures to make: one per scene file (two experiments on one scene share it), named after
  // the scene, "-2", "-3" … where two scenes in different folders share a name.
  struct Shot {
    fs::path scene;
    std::string name;  // the PNG's file name in figures/
  };
  std::vector<Shot> shots;
  std::vector<course::HandoutOptions> options(todo->size(), course::HandoutOptions{a.with_answers, a.figures, {}});
  if (a.figures) {
    std::error_code ec;
    for (std::size_t i = 0; i < todo->size(); ++i) {
      for (const auto& f : course::handout_figures(*(*todo)[i], options[i])) {
        if (!f.shown) continue;
        if (!fs::is_regular_file(f.scene, ec)) {
          std::fprintf(stderr, "%s: %s: the scene %s is not a file\n", me, printable((*todo)[i]->name).c_str(),
                       printable(f.scene.string()).c_str());
          return set_exit_code(1);
        }
        const Shot* same = nullptr;
        for (const Shot& s : shots)
          if (fs::equivalent(s.scene, f.scene, ec)) same = &s;
        if (!same) {
          std::string name = f.scene.stem().string();
          for (int n = 2;; ++n) {
            bool taken = false;
            for (const Shot& s : shots) taken = taken || s.name == name + ".png";
            if (!taken) break;
            name = f.scene.stem().string() + "-" + std::to_string(n);
          }
          shots.push_back({f.scene, name + ".png"});
          same = &shots.back();
        }
        options[i].figure_files[f.experiment] = std::string(kFiguresDir) + "/" + same->name;
      }
    }
  }

  std::vector<std::pair<std::string, std::string>> pages;  // file name, HTML
  try {
    for (std::size_t i = 0; i < todo->size(); ++i)
      pages.emplace_back(course::handout_file_name(*(*todo)[i], options[i]), course::handout_html(*(*todo)[i], options[i]));
  } catch (const course::LessonError& e) {
    std::fprintf(stderr, "%s: %s\n", me, printable(e.what()).c_str());
    return set_exit_code(1);
  }
  const course::HandoutOptions index_options{a.with_answers, false, {}};
  pages.emplace_back(a.with_answers ? "index-answers.html" : "index.html", course::handout_index_html(*todo, index_options));

  const fs::path dir = a.out;
  const fs::path figures = dir / kFiguresDir;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dir, ec)) && !fs::is_directory(fs::symlink_status(dir, ec))) {
    std::fprintf(stderr, "%s: %s exists and is not a folder\n", me, printable(dir.string()).c_str());
    return set_exit_code(1);
  }
  if (!shots.empty() && fs::exists(fs::symlink_status(figures, ec)) && !fs::is_directory(fs::symlink_status(figures, ec))) {
    std::fprintf(stderr, "%s: %s exists and is not a folder\n", me, printable(figures.string()).c_str());
    return set_exit_code(1);
  }
  const bool created = !fs::exists(dir, ec);
  if (created && !fs::create_directory(dir, ec)) {
    std::fprintf(stderr, "%s: cannot create the folder %s: %s\n", me, printable(dir.string()).c_str(),
                 ec ? ec.message().c_str() : "its parent folder does not exist");
    return set_exit_code(1);
  }
  try {
    for (const auto& [name, html] : pages) check_output_file(dir / name);
    if (fs::is_directory(figures, ec))
      for (const Shot& s : shots) check_output_file(figures / s.name);
  } catch (const FileError& e) {
    std::fprintf(stderr, "%s: %s\n", me, printable(e.what()).c_str());
    if (created) fs::remove(dir, ec);
    return set_exit_code(1);
  }

  if (!shots.empty()) {
    const fs::path staging = dir / (".figures-" + std::to_string(::getpid()));
    const auto give_up = [&](const std::string& why) {
      std::fprintf(stderr, "%s: %s\n", me, printable(why).c_str());
      fs::remove_all(staging, ec);
      if (created) fs::remove(dir, ec);  // only when still empty
      set_exit_code(1);
    };
    fs::remove_all(staging, ec);  // left by an interrupted run that had this process id
    if (!fs::create_directory(staging, ec))
      return give_up("cannot create a folder in " + dir.string() + (ec ? ": " + ec.message() : std::string()));
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t k = 0; k < shots.size(); ++k) {
      const auto t = std::chrono::steady_clock::now();
      std::string notes;
      try {
        render_view(shots[k].scene, staging / shots[k].name, &notes);
      } catch (const std::exception& e) {
        return give_up(e.what());
      }
      std::printf("figure %zu/%zu: %s (%.1f s)\n", k + 1, shots.size(), printable(shots[k].name).c_str(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
      if (!notes.empty()) std::printf("  note: %s\n", printable(notes).c_str());
      std::fflush(stdout);
    }
    if (!fs::is_directory(figures, ec) && !fs::create_directory(figures, ec))
      return give_up("cannot create the folder " + figures.string() + ": " + ec.message());
    for (const Shot& s : shots) {
      fs::rename(staging / s.name, figures / s.name, ec);  // within one folder tree: atomic
      if (ec) return give_up("cannot move a figure into " + figures.string() + ": " + ec.message());
    }
    fs::remove_all(staging, ec);
    std::printf("rendered %zu figure%s in %.1f s\n", shots.size(), shots.size() == 1 ? "" : "s",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  try {
    for (const auto& [name, html] : pages) write_file_atomic(dir / name, html);
  } catch (const FileError& e) {
    std::fprintf(stderr, "%s: %s\n", me, printable(e.what()).c_str());
    return set_exit_code(1);
  }
  std::printf("wrote %zu handout%s (%s)%s and %s into %s\n", todo->size(), todo->size() == 1 ? "" : "s",
              a.with_answers ? "teacher's copies, with answers" : "students' copies, without answers",
              shots.empty() ? "" : (", " + std::to_string(shots.size()) + " figure" + (shots.size() == 1 ? "" : "s")).c_str(),
              pages.back().first.c_str(), printable(dir.string()).c_str());
  set_exit_code(0);
}

}  // namespace

void register_lessons(CLI::App& app) {
  auto args = std::make_shared<LessonsArgs>();
  auto* cmd = app.add_subcommand(
      "lessons", "The course: list the lessons, check what they claim on the engine, pack it for students, "
                 "collect their progress.");
  cmd->require_subcommand(1);
  cmd->add_option("--dir", args->dir,
                  "The lessons folder or a student pack (default: $TTTLAB_LESSONS, else lessons/ of this installation)")
      ->check(non_empty_path());

  auto* l = cmd->add_subcommand("list", "Every lesson with its duration, title and goal.");
  l->callback([args] { list(*args); });

  auto* c = cmd->add_subcommand(
      "check",
      "Run each lesson's experiment headless on the engine and compare every claim of the lesson with "
      "the measured value. Exits 1 if a claim fails or a lesson file is malformed.");
  c->add_option("names", args->names, "Lessons to check, by name or number (default: all)");
  c->add_flag("--json", args->json,
              "Print {\"lessons\": [{\"name\", \"passed\", \"checks\": [{\"claim\", \"measured\", \"expected\", "
              "\"passed\"}], \"exercises\": [{\"id\", \"key\", \"passed\"}]}]}");
  c->add_option("--timeout", args->timeout_s, "Seconds one experiment may take before it fails")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  c->callback([args] { check(*args); });

  auto* h = cmd->add_subcommand(
      "handout",
      "Write a printable HTML page per lesson into a folder: the text, the predictions and questions with room "
      "to answer, and no answers (--with-answers: the teacher's copy, with every answer, reveal and check; "
      "--figures: with pictures of the lesson's views).");
  h->footer("--figures renders each view with the app (OpenGL). On a machine without a display:\n"
            "  xvfb-run -a tttlab lessons handout 03 --out week1 --figures\n"
            "The student's copy leaves out the picture of every view a prediction asks about (\"Figure in the app\n"
            "after your prediction\") and of every view in a \"The reveal\" section; --with-answers includes them.");
  h->add_option("names", args->names, "Lessons, by name or number (default: all)");
  h->add_option("--out", args->out, "The folder to write into (created if missing; its parent must exist)")
      ->required()
      ->check(non_empty_path());
  h->add_flag("--with-answers", args->with_answers, "The teacher's copy: answers, reveals and the engine's checks");
  h->add_flag("--figures", args->figures,
              "Also a picture of each lesson's views (its scene and its experiments), computed by the engine and "
              "rendered by the app into DIR/figures/, placed where the lesson shows them. A view a prediction asks "
              "about is in the teacher's copy only. Needs a display: run under xvfb-run -a on a machine without one");
  h->callback([args] { handout(*args); });

  auto* m = cmd->add_subcommand("measures", "The measures each view offers to lesson predictions and checks.");
  m->callback([] { measures(); });

  register_lessons_pack(*cmd, std::shared_ptr<std::string>(args, &args->dir));  // --dir, read when a command runs
  register_lessons_progress(*cmd);
}

}  // namespace tttlab::cli
