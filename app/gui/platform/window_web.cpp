// The browser's side of window.hpp: emscripten's GLFW (3.2) draws on the page's canvas with a WebGL2
// context (OpenGL ES 3.0, hence "#version 300 es" shaders). The canvas fills the space the page's
// stylesheet gives it, in physical pixels (its CSS size × the device pixel ratio), and follows it when
// the browser window is resized or zoomed. There is no offscreen mode (screenshots and benchmarks are
// the desktop app's), no EGL and no X display. Compiled only by emscripten; the desktop's side is
// window_desktop.cpp.
#ifdef __EMSCRIPTEN__

#include "gui/platform/window.hpp"

#define GLFW_INCLUDE_ES3
#include <GLFW/glfw3.h>
#include <emscripten.h>
#include <emscripten/html5.h>
#include <imgui.h>

#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tttlab::gui {
namespace {

std::string g_web_glfw_error;

void web_glfw_error(int, const char* description) { g_web_glfw_error = description ? description : "unknown"; }

// The canvas's size on the page in CSS pixels (0 before the page has laid it out). Values, not
// pointers: nothing here touches the wasm heap from JavaScript.
EM_JS(double, tttlab_canvas_css_width, (), {
  var c = Module['canvas'];
  return c && c.getBoundingClientRect ? c.getBoundingClientRect().width : 0;
});
EM_JS(double, tttlab_canvas_css_height, (), {
  var c = Module['canvas'];
  return c && c.getBoundingClientRect ? c.getBoundingClientRect().height : 0;
});

// The canvas's pixel size for its CSS size, or false when the page has not laid it out yet.
bool canvas_pixels(int* w, int* h) {
  const double cw = tttlab_canvas_css_width(), ch = tttlab_canvas_css_height();
  if (cw < 1.0 || ch < 1.0) return false;
  const double ratio = emscripten_get_device_pixel_ratio();
  *w = static_cast<int>(std::lround(cw * ratio));
  *h = static_cast<int>(std::lround(ch * ratio));
  // emscripten's glfwSetWindowSize asks for fullscreen when the size equals the screen's; a page
  // that fills the whole screen must not do that on every frame.
  if (EM_ASM_INT({ return screen.width; }) == *w && EM_ASM_INT({ return screen.height; }) == *h) --*h;
  return true;
}

// Keeps the drawing buffer at the canvas's CSS size × pixel ratio (checked every frame: a resize, a
// zoom or a move to another screen all show up here, and the check is two layout reads).
// Returns whether the canvas changed size.
bool fit_canvas(GLFWwindow* window) {
  int w = 0, h = 0;
  if (!window || !canvas_pixels(&w, &h)) return false;
  int cw = 0, ch = 0;
  glfwGetWindowSize(window, &cw, &ch);
  if (cw == w && ch == h) return false;
  glfwSetWindowSize(window, w, h);
  return true;
}

// Input the page received since the last call (pointer, keys, wheel, touch, focus, paste, drop):
// counted by listeners on the window, installed at the first call, ahead of the GLFW library's own.
// The wheel over the canvas is also added up, in notches, positive upwards and leftwards as Dear ImGui
// counts them (100 pixels, 3 lines or 1/80 page a notch, as emscripten's own conversion has it).
EM_JS(int, tttlab_take_page_input, (), {
  if (!Module.tttlabInput) {
    Module.tttlabInput = { count: 1, wheelX: 0, wheelY: 0 };
    ["mousemove", "mousedown", "mouseup", "wheel", "keydown", "keyup", "touchstart", "touchmove", "touchend",
     "focus", "blur", "paste", "drop", "dragover", "resize"].forEach(function(type) {
      window.addEventListener(type, function() { Module.tttlabInput.count++; }, { capture: true, passive: true });
    });
    window.addEventListener("wheel", function(e) {
      if (e.target !== Module['canvas']) return;
      var notch = e.deltaMode === 1 ? 1 / 3 : (e.deltaMode === 2 ? 80 : 1 / 100);
      Module.tttlabInput.wheelX -= e.deltaX * notch;
      Module.tttlabInput.wheelY -= e.deltaY * notch;
    }, { capture: true, passive: true });
  }
  var n = Module.tttlabInput.count;
  Module.tttlabInput.count = 0;
  return n;
});
// The wheel's notches since the last call: axis 0 horizontal, 1 vertical.
EM_JS(double, tttlab_take_wheel, (int axis), {
  var t = Module.tttlabInput;
  if (!t) return 0;
  var v = axis ? t.wheelY : t.wheelX;
  if (axis) t.wheelY = 0; else t.wheelX = 0;
  return v;
});

std::atomic<bool> g_woken{true};  // post_empty_event() since the last frame

}  // namespace

const char* Window::glsl_version() { return "#version 300 es"; }

std::unique_ptr<Window> Window::open(const WindowSpec& spec) {
  if (spec.hidden)
    throw std::runtime_error(
        "screenshots and benchmarks render offscreen, which the browser version does not do: run them "
        "with the desktop app (tttlab gui --screenshot …)");
  glfwSetErrorCallback(web_glfw_error);
  if (!glfwInit()) throw std::runtime_error("cannot initialise GLFW in the browser: " + g_web_glfw_error);
  // WebGL2 = OpenGL ES 3.0 (the page is linked for WebGL 2 only).
  glfwWindowHint(GLFW_CLIENT_API, GLFW_OPENGL_ES_API);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  std::unique_ptr<Window> w(new Window());
  w->m_spec = spec;
  int pw = spec.width > 0 ? spec.width : 1280, ph = spec.height > 0 ? spec.height : 720;
  canvas_pixels(&pw, &ph);
  w->m_window = glfwCreateWindow(pw, ph, spec.title.c_str(), nullptr, nullptr);
  if (!w->m_window) {
    glfwTerminate();
    throw std::runtime_error("cannot create a WebGL2 context" +
                             (g_web_glfw_error.empty() ? std::string() : ": " + g_web_glfw_error) +
                             " (this browser does not offer WebGL2, or it is turned off)");
  }
  glfwMakeContextCurrent(w->m_window);
  // No glfwSwapInterval: in the browser it sets the main loop's timing, and the loop
  // (host::run_main_loop) already runs once per animation frame.
  return w;
}

Window::~Window() {
  if (m_window) glfwDestroyWindow(m_window);
  glfwTerminate();
}

float Window::content_scale() const {
  const double ratio = emscripten_get_device_pixel_ratio();
  return ratio > 0.0 ? static_cast<float>(ratio) : 1.0f;
}

bool Window::iconified() const { return false; }  // a hidden tab gets no animation frames at all

bool Window::should_close() const { return m_window ? glfwWindowShouldClose(m_window) : false; }
void Window::request_close() {
  if (m_window) glfwSetWindowShouldClose(m_window, GLFW_TRUE);
}

// The page places the canvas; there is no window position to remember.
bool Window::placement(int*, int*, int*, int*) const { return false; }

void Window::set_title(const std::string& title) {
  if (m_window) glfwSetWindowTitle(m_window, title.c_str());
}

void Window::framebuffer_size(int* w, int* h) const { glfwGetFramebufferSize(m_window, w, h); }

void Window::begin_render(float r, float g, float b) {
  int w = 0, h = 0;
  framebuffer_size(&w, &h);
  glViewport(0, 0, w, h);
  glClearColor(r, g, b, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
}

// Read in the same animation frame as the drawing, before the browser composites the canvas and
// clears its drawing buffer (the context is not created with preserveDrawingBuffer, which would cost
// a copy every frame): the app reads between rendering and present(), as on the desktop.
Image Window::read_pixels(int x, int y, int w, int h) const {
  int fw = 0, fh = 0;
  framebuffer_size(&fw, &fh);
  return read_gl_pixels(x, y, w, h, fw, fh);
}

void Window::present() {}  // the browser shows the canvas when the animation frame ends

void Window::post_empty_event() { g_woken = true; }
bool Window::wait_events(double timeout) {
  const bool resized = fit_canvas(m_window);
  const bool input = tttlab_take_page_input() > 0;
  const bool woken = g_woken.exchange(false);
  const double now = emscripten_get_now();
  if (!resized && !input && !woken && now - m_last_wake_ms < 1000.0 * timeout) return false;
  m_last_wake_ms = now;
  // emscripten 3.1.6's GLFW passes the page's wheel event on unconverted (pixels, positive downwards)
  // where Dear ImGui expects notches, positive upwards: one notch of a mouse wheel threw a pane to its far
  // end, the wrong way. The wheel since the last frame, counted in notches, replaces what it added.
  if (ImGui::GetCurrentContext()) {
    ImGuiIO& io = ImGui::GetIO();
    io.MouseWheelH = static_cast<float>(tttlab_take_wheel(0));
    io.MouseWheel = static_cast<float>(tttlab_take_wheel(1));
  }
  return true;
}
void Window::poll_events() { fit_canvas(m_window); }

}  // namespace tttlab::gui

#endif  // __EMSCRIPTEN__
