// The pictures of `tttlab lessons handout --figures` (lessons_commands.hpp): each lesson view is
// rendered by the app's own offscreen screenshot, `tttlab gui --screenshot` (app/gui/), run as a child
// process of this same executable. The command line may not include the GUI (the app's layering), and a
// child per view also keeps one view's failure from taking the handout command down with it.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/lessons_commands.hpp"

extern char** environ;

namespace tttlab::cli {
namespace {

namespace fs = std::filesystem;

// The picture of a view: the app's window at the smallest size the course is written for, in the light
// theme (a dark page wastes toner and prints muddy). The app waits for the engine to finish what the
// frames asked for before it captures, so a few frames suffice.
constexpr const char* kFigureSize = "1280x720";
constexpr const char* kFigureFrames = "4";
// The longest the app waits for the engine to finish a view before it captures it anyway, as long as
// `tttlab lessons check` lets one experiment run: the heaviest views (lesson 12's evaluation at
// T = 2048) take over a minute on two cores.
constexpr const char* kFigureWaitSeconds = "600";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The last non-empty lines of a file (the child's stderr), joined with "; ".
std::string tail_lines(const fs::path& file, std::size_t n) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  std::string out;
  for (std::size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
    out += (out.empty() ? "" : "; ") + lines[i];
  return out;
}

// Runs `args` (args[0] an absolute path) in the folder `cwd`, with stdout discarded and stderr into
// `log` (an absolute path); the environment is this process's less TTTLAB_PROGRESS, so a screenshot
// never reads a student's progress file. Returns the exit status (128 + the signal when it was killed).
int run_child(const std::vector<std::string>& args, const fs::path& cwd, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW,
                                   0644);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "TTTLAB_PROGRESS=", 16) != 0) envp.push_back(*e);
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waiting for the renderer: ") + std::strerror(errno));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace

bool views_can_render(std::string& why_not) {
#if !defined(TTTLAB_HAVE_GUI)
  why_not = "this build has no desktop app to render the views with (GLFW, Dear ImGui, stb or OpenGL were not "
            "found when it was configured); leave out --figures for pages without figures";
  return false;
#else
  if (env("TTTLAB_GL") == "egl") return true;  // a headless EGL context needs no display (gui/platform/window.hpp)
  if (env("DISPLAY").empty() && env("WAYLAND_DISPLAY").empty()) {
    why_not = "--figures renders each lesson's view with OpenGL, which needs a display, and none is set "
              "(DISPLAY). On a machine without a screen run it under a virtual X server: "
              "xvfb-run -a tttlab lessons handout … --figures; or leave out --figures for pages without figures";
    return false;
  }
  std::error_code ec;
  if (fs::read_symlink("/proc/self/exe", ec).empty()) {
    why_not = "cannot find this program's own file (/proc/self/exe) to render the views with";
    return false;
  }
  return true;
#endif
}

void render_view(const fs::path& scene, const fs::path& png, std::string* notes) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (exe.empty()) throw std::runtime_error("cannot find this program's own file (/proc/self/exe)");
  const fs::path out = fs::absolute(png, ec);
  const fs::path log = out.string() + ".log";
  // Run beside the scene and open it by its file name: the app's status bar shows the path it opened,
  // and a printed page should not show the teacher's folders.
  const fs::path where = fs::absolute(scene, ec).parent_path();
  const int status = run_child({exe.string(), "gui", "--screenshot", out.string(), "--state", scene.filename().string(),
                                "--size", kFigureSize, "--frames", kFigureFrames, "--wait", kFigureWaitSeconds,
                                "--theme", "light"},
                               where, log);
  const std::string said = tail_lines(log, 3);
  fs::remove(log, ec);
  if (status != 0 || !fs::is_regular_file(png, ec)) {
    std::string why = said.empty() ? "the renderer exited with status " + std::to_string(status) : said;
    throw std::runtime_error("cannot render the view of " + scene.filename().string() + ": " + why +
                             " (--figures needs a display: run it under xvfb-run -a, or leave out --figures)");
  }
  if (notes) *notes = said;
}

}  // namespace tttlab::cli
