// `tttlab gui`: the desktop app (app/gui/), its screenshots and its frame-time benchmark.
//
//   tttlab gui                                        open the window on the inner-loop stepper
//   tttlab gui --list-panels                          panel ids, names and summaries
//   tttlab gui --screenshot out.png --frames 10 [--panel primal_dual] [--state view.tttlab]
//   tttlab gui --lesson 01                            dock lesson 01 of the course beside its view
//   tttlab gui --bench-frames 600 [--bench-idle]      UI-thread work per frame, p50 / p99, while a tiny
//                                                     model trains on the CPU (unless --bench-idle)
//
// Screenshots and benchmarks render offscreen but need an X display for the OpenGL context. On a
// machine without one, run them under a virtual X server (Mesa renders in software):
//   xvfb-run -a build/tttlab gui --screenshot out.png --frames 10
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "course/course_session.hpp"
#ifdef TTTLAB_HAVE_GUI
#include "cli/train_device.hpp"
#include "cli/validators.hpp"
#include "gui/gui_app.hpp"
#ifdef TTTLAB_HAVE_CUDA
#include "compute/cuda_compute.hpp"
#endif
#endif

namespace tttlab::cli {

void register_gui(CLI::App& app) {
  auto* cmd = app.add_subcommand("gui", "Open the desktop app (or render a screenshot / benchmark it)");
  struct Opts {
    bool list = false;
    std::string screenshot, panel, state, lesson, lessons_dir, size = "1600x1000", device = "auto", theme;
    float ui_scale = 0.0f;
    bool presenter = false;
    int frames = 10, bench = 0, settle_s = 60;
    bool bench_idle = false;
  };
  cmd->footer("Screenshots and benchmarks render offscreen but need an X display for OpenGL. Without one,\n"
              "run them under a virtual X server (Mesa renders in software, no GPU needed):\n"
              "  xvfb-run -a tttlab gui --screenshot out.png --frames 10 --panel primal_dual\n"
              "  xvfb-run -a tttlab gui --screenshot lesson.png --size 1280x720 --lesson 01");
  auto o = std::make_shared<Opts>();
  cmd->add_flag("--list-panels", o->list, "Print the panels (id, name, summary) and exit");
  auto* shot = cmd->add_option("--screenshot", o->screenshot, "Render offscreen and write this PNG")
                   ->check(non_empty_path());
  cmd->add_option("--frames", o->frames, "Frames to render before the screenshot (default 10)")
      ->check(CLI::Range(1, 100000))
      ->needs(shot);
  cmd->add_option("--wait", o->settle_s,
                  "Seconds the screenshot waits at most for the engine to finish computing the view (default 60)")
      ->check(CLI::Range(1, 86400))
      ->needs(shot);
  cmd->add_option("--panel", o->panel, "Panel to show, by id or name (see --list-panels)");
  cmd->add_option("--state", o->state, "Open this .tttlab state file at start")->check(CLI::ExistingFile);
  cmd->add_option("--lesson", o->lesson,
                  "Start a lesson of the course (by name or number, e.g. 01): its view opens with the lesson "
                  "docked beside it (see `tttlab lessons list`)");
  cmd->add_option("--bench-frames", o->bench, "Render N frames offscreen and print the UI thread's work per frame")
      ->check(CLI::Range(1, 1000000))
      ->excludes(shot);
  cmd->add_flag("--bench-idle", o->bench_idle,
                "With --bench-frames: do not train a tiny model during the benchmark (it does by default)");
  cmd->add_option("--size", o->size, "Offscreen size WIDTHxHEIGHT for --screenshot / --bench-frames");
  cmd->add_option("--lessons", o->lessons_dir,
                  "The course to open: a student pack or a lessons folder (default: $TTTLAB_LESSONS, else "
                  "lessons/ of this installation)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--ui-scale", o->ui_scale,
                  "UI scale for this run, 0.75 to 2 (default: the one saved by View → Zoom, or 1 for screenshots)")
      ->check(CLI::Range(0.75f, 2.0f));
  cmd->add_option("--theme", o->theme, "dark or light, for this run (default: the one saved by View → Theme)")
      ->check(CLI::IsMember({"dark", "light"}));
  cmd->add_flag("--presenter", o->presenter,
                "Start in presenter mode: the view (and a docked lesson) fill the window in large type");
  cmd->add_option("--device", o->device,
                  "Where the panels compute at start: auto (the GPU when there is one), cpu or gpu; the Compute "
                  "menu changes it")
      ->check(CLI::IsMember({"auto", "cpu", "gpu", "cuda"}));
  cmd->callback([o] {
#ifdef TTTLAB_HAVE_GUI
    gui::GuiOptions g;
    g.list_panels = o->list;
    g.screenshot = o->screenshot;
    g.frames = o->frames;
    g.settle_s = o->settle_s;
    g.panel = o->panel;
    g.state_file = o->state;
    g.lesson = o->lesson;
    if (!o->lessons_dir.empty()) course::course_session::set_lessons_dir(o->lessons_dir);
    g.bench_frames = o->bench;
    g.bench_train = !o->bench_idle;
    g.ui_scale = o->ui_scale;
    g.theme = o->theme;
    g.presenter = o->presenter;
    // Training runs started in the app pick their device as `tttlab train --device` does (tf32 GEMMs);
    // with several GPUs, data-parallel over that many GPUs of this machine, in this one process (as
    // `tttlab train --gpus N`). The panels use the GPU services of app/compute/ where the build has the
    // kernels.
    g.devices.train.choose = [](const TrainDeviceRequest& request, std::string& note) {
      if (request.gpus != 0) return data_parallel_backend_for(request, JobEnvironment{}, note);
      return train_backend_for(request, note);
    };
#ifdef TTTLAB_HAVE_CUDA
    g.devices.gpu = [](std::string& why_not) { return compute::make_cuda_compute(why_not); };
#endif
    g.compute = gui::parse_compute_request(o->device);
    int w = 0, h = 0;
    char x = 0;
    if (std::sscanf(o->size.c_str(), "%d%c%d", &w, &x, &h) != 3 || (x != 'x' && x != 'X') || w < 320 ||
        h < 240 || w > 8192 || h > 8192) {
      std::fprintf(stderr, "tttlab gui: --size must be WIDTHxHEIGHT between 320x240 and 8192x8192, got \"%s\"\n",
                   o->size.c_str());
      set_exit_code(2);
      return;
    }
    g.width = w;
    g.height = h;
    set_exit_code(gui::run_gui(g));
#else
    (void)o;
    std::fprintf(stderr,
                 "tttlab gui: this build has no desktop app (GLFW, Dear ImGui, stb or OpenGL were not "
                 "found when it was configured); install libglfw3-dev libimgui-dev libstb-dev and "
                 "reconfigure\n");
    set_exit_code(1);
#endif
  });
}

}  // namespace tttlab::cli
