// app/gui/platform/window.hpp — the window, the OpenGL context and pixel read-back: one API with a
// desktop side (window_desktop.cpp: GLFW + OpenGL 3, X11 or a headless EGL context) and a web side
// (window_web.cpp: emscripten's GLFW on the page's canvas + WebGL2). common.cpp holds what both
// share (textures, PNG, keys). The other host services (main loop, clipboard, files) are in host.hpp.
//
// Two ways to show frames on the desktop (the web has only the first):
//   visible window   the interactive app; frames go to the window's back buffer.
//   hidden window    screenshots and benchmarks; frames go to an offscreen framebuffer object of an
//                    exact size, so the result does not depend on the screen, the window manager
//                    or whether parts of the window are covered. It needs an X display for the GL
//                    context (without one, run under `xvfb-run -a`: Mesa renders in software) — or,
//                    with TTTLAB_GL=egl, no display at all: a headless EGL context of the GPU's
//                    driver (libEGL.so.1, opened at run time), e.g. on a GPU server.
// UI thread only, except post_empty_event().
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

struct GLFWwindow;

namespace tttlab::gui {

struct WindowSpec {
  int width = 1600;
  int height = 1000;
  bool hidden = false;  // offscreen rendering into a framebuffer object of width × height
  // A visible window that fits the primary monitor's work area: width × height (a saved size; 0 × 0:
  // 90 % of the work area, at most 1600 × 1000 times the monitor's scale) clamped to the work area,
  // at (x, y) when has_position and that fits, else centred (ui_settings.hpp, fit_window).
  bool fit_to_monitor = false;
  bool has_position = false;
  int x = 0, y = 0;
  bool vsync = true;
  std::string title = "TTT Lab";
};

// An RGBA8 image, rows top to bottom.
struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgba;
};

class Window {
 public:
  // Creates the window and context; throws std::runtime_error with an actionable message (e.g. no
  // display: "run it as `xvfb-run -a tttlab gui …`"; a hidden window in the browser: not available).
  static std::unique_ptr<Window> open(const WindowSpec& spec);
  ~Window();

  GLFWwindow* handle() const { return m_window; }  // null for a headless EGL context
  bool headless() const { return m_egl != nullptr; }
  const WindowSpec& spec() const { return m_spec; }
  // The GLSL version line ImGui's OpenGL 3 backend compiles its shaders with ("#version 130" for
  // OpenGL 3.0, "#version 300 es" for WebGL2).
  static const char* glsl_version();
  // The monitor's content scale (1 on a standard-DPI screen, 2 on a 200 % HiDPI screen; in the
  // browser, the page's device pixel ratio).
  float content_scale() const;
  // Minimised: nothing is drawn (a browser tab is never minimised; it stops the frames itself).
  bool iconified() const;
  bool should_close() const;
  void request_close();
  void set_title(const std::string& title);
  // The window's position and size in screen coordinates (false for offscreen and headless windows).
  bool placement(int* x, int* y, int* w, int* h) const;
  // Framebuffer size in pixels (the offscreen size for hidden windows).
  void framebuffer_size(int* w, int* h) const;

  // Bind the render target of this frame (the offscreen FBO for hidden windows), set the viewport
  // and clear it.
  void begin_render(float r, float g, float b);
  // Read a rectangle of the frame just rendered (pixels, origin top-left), before present().
  Image read_pixels(int x, int y, int w, int h) const;
  void present();

  // Wakes wait_events() from any thread (used when the engine publishes a snapshot).
  static void post_empty_event();
  // Whether to draw a frame now. Desktop: sleeps until input, post_empty_event() or the timeout, then
  // true. Browser: the page calls every animation frame and the main thread must never sleep, so it
  // answers at once: true after input, a resize, post_empty_event() or `timeout_seconds` since the
  // last true, else false. An idle page then draws 4 frames a second instead of 60, which leaves the
  // CPU (and software WebGL, which takes several cores) to the engine.
  bool wait_events(double timeout_seconds);
  void poll_events();

 private:
  Window() = default;
  WindowSpec m_spec;
  GLFWwindow* m_window = nullptr;
  void* m_egl = nullptr;  // the EGL display, context and library of a headless window (window_desktop.cpp)
  unsigned m_fbo = 0, m_color_rb = 0;
#ifdef __EMSCRIPTEN__
  double m_last_wake_ms = -1e300;  // when wait_events() last said to draw
#endif
  void make_fbo();
};

// Reads a rectangle (origin top-left, clipped) of the bound read framebuffer of size fw × fh; both
// sides' read_pixels (common.cpp).
Image read_gl_pixels(int x, int y, int w, int h, int fw, int fh);

// Installs the OpenGL implementation of plot::TextureApi (call with the context current).
void install_gl_textures();

// Writes `img` as PNG, atomically (tttlab/io/atomic_file.hpp: the target is complete or as it was);
// throws std::runtime_error (FileError naming the file and the system's reason) on failure.
void write_png(const std::filesystem::path& path, const Image& img);

}  // namespace tttlab::gui
