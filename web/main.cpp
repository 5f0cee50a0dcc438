// web/main.cpp — the lab's entry point in the browser. The page's address says what to open, so that a
// teacher can hand out a link to an exact view:
//
//   index.html?panel=stepper            start on a panel (its id, as `tttlab gui --list-panels` prints)
//   index.html?lesson=01                dock a lesson (by number or name), with its scene
//   index.html?theme=light&scale=1.25   the look
//   index.html#state=<base64url>        a saved state (.tttlab JSON), carried in the link itself (File →
//                                       Copy link to this view writes such links)
//   index.html?check=engine             also run the engine check (web/engine_check.hpp) on a worker
//                                       thread and print its JSON on the console (the browser test;
//                                       &repeats=N times each part N times: the benchmark)
//   index.html?test=1                   also record where each button and input box is, so that the
//                                       browser test can click them (web/test_hooks.cpp)
//
// Everything else is the desktop app's code: run_gui() with the platform layer's web side
// (app/gui/platform/).
#include <emscripten.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "engine_check.hpp"
#include "test_hooks.hpp"
#include "gui/gui_app.hpp"
#include "lab/engine/late_resources.hpp"
#include "lab/state/state_file.hpp"
#include "lab/state/state_link.hpp"

namespace {

// A parameter of the page's address, from its fragment or else its query string, decoded by the
// browser's URLSearchParams; empty when absent.
EM_JS(char*, page_parameter, (const char* key), {
  const k = UTF8ToString(key);
  const fragment = new URLSearchParams(window.location.hash.substring(1));
  const query = new URLSearchParams(window.location.search);
  const value = fragment.has(k) ? fragment.get(k) : query.get(k);
  return value === null ? 0 : stringToNewUTF8(value);
});

}  // namespace

int main() {
  // The files the build packs into the page (web/CMakeLists.txt) sit at the root of its file system.
  setenv("TTTLAB_FONT_DIR", "/fonts", 0);
  setenv("TTTLAB_HOME", "/", 0);
  const auto get = [](const char* key) {
    char* raw = page_parameter(key);
    std::string value = raw ? raw : "";
    std::free(raw);
    return value;
  };

  // The shipped models that arrive after the first frame (web/late_files.js, started before main()):
  // until they are here, the engine waits for one it needs; the frame loop says when they arrived
  // (app/gui/platform/host_web.cpp).
  if (EM_ASM_INT(return Module.tttlabLate && !Module.tttlabLate.settled ? 1 : 0))
    tttlab::lab::expect_late_resources();

  tttlab::gui::GuiOptions opt;
  opt.panel = get("panel");
  opt.lesson = get("lesson");
  opt.theme = get("theme");
  if (const std::string s = get("scale"); !s.empty()) opt.ui_scale = std::strtof(s.c_str(), nullptr);
  if (const std::string link = get("state"); !link.empty()) {
    // A state in the link (lab/state/state_link.hpp): checked, then opened like a state file. A broken
    // one is said in the app's error dialog; the lab starts without it.
    try {
      tttlab::lab::write_state_file("/tmp/link.tttlab", tttlab::lab::state_from_link(link));
      opt.state_file = "/tmp/link.tttlab";
    } catch (const std::exception& e) {
      opt.startup_error = e.what();
    }
  }

  if (get("test") == "1") tttlab::web::enable_test_hooks();
  if (get("check") == "engine") {
    // On its own thread, so that the page keeps drawing while the engine works.
    const int repeats = std::clamp(std::atoi(get("repeats").c_str()), 1, 100);
    std::thread([repeats] {
      try {
        tttlab::web::EngineCheckOptions o;
        o.repeats = repeats;
        o.model_dir = "/assets/models/tiny-brown";
        o.brown_dir = "/data/brown";
        const std::string json =
            tttlab::web::run_engine_check(o, [](const std::string& line) { std::printf("engine check: %s\n", line.c_str()); });
        std::printf("TTTLAB_CHECK %s\n", json.c_str());
      } catch (const std::exception& e) {
        std::printf("TTTLAB_CHECK_FAILED %s\n", e.what());
      }
      std::fflush(stdout);
    }).detach();
  }
  return tttlab::gui::run_gui(opt);
}
