// app/gui/gui_app.hpp — entry points of the desktop app, used by `tttlab gui` (app/gui/command.cpp).
//
//   tttlab gui                                  the window, on the inner-loop stepper
//   tttlab gui --list-panels                    panel ids and names (no window needed)
//   tttlab gui --screenshot F.png --frames N [--panel ID] [--state F.tttlab] [--size WxH]
//                                               renders N frames offscreen, waits for the engine to
//                                               finish what those frames asked for, writes a PNG
//   tttlab gui --lesson 01                      docks a lesson of the course beside its view (its scene)
//   tttlab gui --bench-frames N                 per-frame UI-thread work time, p50/p99
//   tttlab gui --ui-scale 1.5 --theme light [--presenter]   the look, for this run (screenshots too)
// Screenshots and benchmarks render into an offscreen framebuffer but still need an X display for
// the OpenGL context; on a machine without one use `xvfb-run -a tttlab gui --screenshot …`.
#pragma once

#include <string>

#include "lab/engine/compute_device.hpp"
#include "gui/lab.hpp"

namespace tttlab::gui {

struct GuiOptions {
  bool list_panels = false;
  std::string screenshot;   // PNG path; empty: interactive
  int frames = 10;          // frames rendered before the screenshot
  int settle_s = 60;        // then at most this long for the engine to finish what they asked for
  std::string panel;        // panel id or name to start on
  std::string state_file;   // .tttlab to open at start
  std::string lesson;       // lesson to dock at start, by name or number ("01"): opens its scene too
  int bench_frames = 0;     // > 0: benchmark mode
  bool bench_train = true;  // benchmark while a tiny model trains (false: --bench-idle)
  int width = 1600, height = 1000;  // screenshots and benchmarks; the window fits the monitor
  // The look. Interactive: absent values come from the user's display settings (ui_settings.hpp), and
  // changes made in the View menu are saved there. Screenshots and benchmarks never read or write them.
  float ui_scale = 0.0f;  // 0: the saved one (1 for screenshots)
  std::string theme;      // "dark", "light"; empty: the saved one (dark for screenshots)
  bool presenter = false; // start in presenter mode
  // Where the panels and training runs may compute (compute_device.hpp); empty: the CPU only.
  ComputeDevices devices;
  ComputeRequest compute = ComputeRequest::Auto;  // the device the panels start on (the Compute menu)
  // Shown in the error dialog once the window is up: what the caller could not open for the user (the
  // browser: a link whose state is broken).
  std::string startup_error;
};

// Runs the app; returns the process exit status (0 ok, 1 failure, 2 bad usage). Prints errors as
// one line on stderr.
int run_gui(const GuiOptions& options);

}  // namespace tttlab::gui
