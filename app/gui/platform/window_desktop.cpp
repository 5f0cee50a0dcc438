// The desktop side of window.hpp: GLFW + OpenGL 3 on X11 (or Wayland), or a headless EGL context of
// the GPU's driver (TTTLAB_GL=egl). The browser's side is window_web.cpp; CMake lists both, and each
// compiles to nothing on the other platform.
#ifndef __EMSCRIPTEN__

#include "gui/platform/window.hpp"

#define GLFW_INCLUDE_GLEXT
#include <GLFW/glfw3.h>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "gui/ui_settings.hpp"

namespace tttlab::gui {
namespace {

std::string g_last_glfw_error;

void glfw_error(int code, const char* description) {
  g_last_glfw_error = description ? description : "unknown";
  (void)code;
}

// Framebuffer-object entry points (OpenGL 3.0) are not exported by every libGL; fetch them through
// GLFW like any extension.
struct FboApi {
  PFNGLGENFRAMEBUFFERSPROC GenFramebuffers = nullptr;
  PFNGLBINDFRAMEBUFFERPROC BindFramebuffer = nullptr;
  PFNGLDELETEFRAMEBUFFERSPROC DeleteFramebuffers = nullptr;
  PFNGLGENRENDERBUFFERSPROC GenRenderbuffers = nullptr;
  PFNGLBINDRENDERBUFFERPROC BindRenderbuffer = nullptr;
  PFNGLDELETERENDERBUFFERSPROC DeleteRenderbuffers = nullptr;
  PFNGLRENDERBUFFERSTORAGEPROC RenderbufferStorage = nullptr;
  PFNGLFRAMEBUFFERRENDERBUFFERPROC FramebufferRenderbuffer = nullptr;
  PFNGLCHECKFRAMEBUFFERSTATUSPROC CheckFramebufferStatus = nullptr;

  using Loader = void* (*)(const char*);
  // `get`: the context's loader, GLFW's or (a headless context) EGL's.
  bool load(Loader get) {
    GenFramebuffers = reinterpret_cast<PFNGLGENFRAMEBUFFERSPROC>(get("glGenFramebuffers"));
    BindFramebuffer = reinterpret_cast<PFNGLBINDFRAMEBUFFERPROC>(get("glBindFramebuffer"));
    DeleteFramebuffers =
        reinterpret_cast<PFNGLDELETEFRAMEBUFFERSPROC>(get("glDeleteFramebuffers"));
    GenRenderbuffers =
        reinterpret_cast<PFNGLGENRENDERBUFFERSPROC>(get("glGenRenderbuffers"));
    BindRenderbuffer =
        reinterpret_cast<PFNGLBINDRENDERBUFFERPROC>(get("glBindRenderbuffer"));
    DeleteRenderbuffers =
        reinterpret_cast<PFNGLDELETERENDERBUFFERSPROC>(get("glDeleteRenderbuffers"));
    RenderbufferStorage =
        reinterpret_cast<PFNGLRENDERBUFFERSTORAGEPROC>(get("glRenderbufferStorage"));
    FramebufferRenderbuffer = reinterpret_cast<PFNGLFRAMEBUFFERRENDERBUFFERPROC>(
        get("glFramebufferRenderbuffer"));
    CheckFramebufferStatus = reinterpret_cast<PFNGLCHECKFRAMEBUFFERSTATUSPROC>(
        get("glCheckFramebufferStatus"));
    return GenFramebuffers && BindFramebuffer && DeleteFramebuffers && GenRenderbuffers &&
           BindRenderbuffer && DeleteRenderbuffers && RenderbufferStorage &&
           FramebufferRenderbuffer && CheckFramebufferStatus;
  }
};
FboApi g_fbo;
std::atomic<bool> g_glfw_up{false};  // post_empty_event() is a no-op without GLFW (headless EGL)

// ---- a headless EGL context (TTTLAB_GL=egl) ------------------------------------------------------------
// libEGL is opened at run time, so the program has no link dependency on it and the desktop build needs
// no EGL headers: the few types and constants used are declared here as the EGL 1.4 specification
// defines them.
using EGLDisplay = void*;
using EGLConfig = void*;
using EGLContext = void*;
using EGLSurface = void*;
using EGLint = std::int32_t;
constexpr EGLint kEglNone = 0x3038, kEglSurfaceType = 0x3033, kEglPbufferBit = 0x0001,
                 kEglRenderableType = 0x3040, kEglOpenGLBit = 0x0008, kEglRedSize = 0x3024,
                 kEglGreenSize = 0x3023, kEglBlueSize = 0x3022, kEglAlphaSize = 0x3021, kEglWidth = 0x3057,
                 kEglHeight = 0x3056, kEglOpenGLApi = 0x30A2;

struct Egl {
  void* lib = nullptr;
  EGLDisplay display = nullptr;
  EGLContext context = nullptr;
  EGLSurface surface = nullptr;
  EGLDisplay (*GetDisplay)(void*) = nullptr;
  unsigned (*Initialize)(EGLDisplay, EGLint*, EGLint*) = nullptr;
  unsigned (*ChooseConfig)(EGLDisplay, const EGLint*, EGLConfig*, EGLint, EGLint*) = nullptr;
  unsigned (*BindAPI)(unsigned) = nullptr;
  EGLContext (*CreateContext)(EGLDisplay, EGLConfig, EGLContext, const EGLint*) = nullptr;
  EGLSurface (*CreatePbufferSurface)(EGLDisplay, EGLConfig, const EGLint*) = nullptr;
  unsigned (*MakeCurrent)(EGLDisplay, EGLSurface, EGLSurface, EGLContext) = nullptr;
  unsigned (*DestroyContext)(EGLDisplay, EGLContext) = nullptr;
  unsigned (*DestroySurface)(EGLDisplay, EGLSurface) = nullptr;
  unsigned (*Terminate)(EGLDisplay) = nullptr;
  EGLint (*GetError)() = nullptr;
  void* (*GetProcAddress)(const char*) = nullptr;

  template <class F>
  void sym(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    if (!f) throw std::runtime_error(std::string("libEGL.so.1 lacks ") + name);
  }
  std::string error(const char* what) const {
    char b[96];
    std::snprintf(b, sizeof b, "%s failed (EGL error 0x%04x)", what, GetError ? unsigned(GetError()) : 0u);
    return b;
  }

  // A pbuffer-backed OpenGL context on the default display (a GPU driver's EGL needs no X server).
  void open(int w, int h) {
    lib = dlopen("libEGL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw std::runtime_error("TTTLAB_GL=egl: cannot open libEGL.so.1 (install libegl1 and a GL driver)");
    sym(GetDisplay, "eglGetDisplay");
    sym(Initialize, "eglInitialize");
    sym(ChooseConfig, "eglChooseConfig");
    sym(BindAPI, "eglBindAPI");
    sym(CreateContext, "eglCreateContext");
    sym(CreatePbufferSurface, "eglCreatePbufferSurface");
    sym(MakeCurrent, "eglMakeCurrent");
    sym(DestroyContext, "eglDestroyContext");
    sym(DestroySurface, "eglDestroySurface");
    sym(Terminate, "eglTerminate");
    sym(GetError, "eglGetError");
    sym(GetProcAddress, "eglGetProcAddress");
    display = GetDisplay(nullptr);  // EGL_DEFAULT_DISPLAY
    EGLint major = 0, minor = 0;
    if (!display || !Initialize(display, &major, &minor)) {
      // Without a window system the default display may not initialise: take the first GPU as an EGL
      // device (EGL_EXT_device_enumeration + EGL_EXT_platform_device), as headless GPU servers do.
      using QueryDevices = unsigned (*)(EGLint, void**, EGLint*);
      using PlatformDisplay = EGLDisplay (*)(unsigned, void*, const EGLint*);
      const auto query = reinterpret_cast<QueryDevices>(GetProcAddress("eglQueryDevicesEXT"));
      const auto platform = reinterpret_cast<PlatformDisplay>(GetProcAddress("eglGetPlatformDisplayEXT"));
      void* devices[4] = {};
      EGLint n = 0;
      constexpr unsigned kEglPlatformDevice = 0x313F;
      display = nullptr;
      if (query && platform && query(4, devices, &n) && n > 0) display = platform(kEglPlatformDevice, devices[0], nullptr);
      if (!display || !Initialize(display, &major, &minor))
        throw std::runtime_error("TTTLAB_GL=egl: " + error("eglInitialize") + " (no EGL driver or device found)");
    }
    const EGLint attrs[] = {kEglSurfaceType, kEglPbufferBit, kEglRenderableType, kEglOpenGLBit, kEglRedSize, 8,
                            kEglGreenSize, 8, kEglBlueSize, 8, kEglAlphaSize, 8, kEglNone};
    EGLConfig config = nullptr;
    EGLint n = 0;
    if (!ChooseConfig(display, attrs, &config, 1, &n) || n < 1)
      throw std::runtime_error("TTTLAB_GL=egl: " + error("eglChooseConfig") + ": no RGBA8 OpenGL pbuffer config");
    const EGLint pb[] = {kEglWidth, w, kEglHeight, h, kEglNone};
    surface = CreatePbufferSurface(display, config, pb);
    if (!surface) throw std::runtime_error("TTTLAB_GL=egl: " + error("eglCreatePbufferSurface"));
    if (!BindAPI(kEglOpenGLApi)) throw std::runtime_error("TTTLAB_GL=egl: " + error("eglBindAPI(OpenGL)"));
    context = CreateContext(display, config, nullptr, nullptr);
    if (!context) throw std::runtime_error("TTTLAB_GL=egl: " + error("eglCreateContext"));
    if (!MakeCurrent(display, surface, surface, context))
      throw std::runtime_error("TTTLAB_GL=egl: " + error("eglMakeCurrent"));
  }
  void close() {
    if (display) {
      MakeCurrent(display, nullptr, nullptr, nullptr);
      if (context) DestroyContext(display, context);
      if (surface) DestroySurface(display, surface);
      Terminate(display);
    }
    if (lib) dlclose(lib);
  }
};

bool want_egl(const WindowSpec& spec) {
  const char* gl = std::getenv("TTTLAB_GL");
  return spec.hidden && gl && std::string(gl) == "egl";
}

}  // namespace

void Window::make_fbo() {
  const FboApi::Loader glfw_loader = [](const char* n) { return reinterpret_cast<void*>(glfwGetProcAddress(n)); };
  if (!g_fbo.load(m_egl ? static_cast<Egl*>(m_egl)->GetProcAddress : glfw_loader))
    throw std::runtime_error("OpenGL framebuffer objects are not available");
  g_fbo.GenFramebuffers(1, &m_fbo);
  g_fbo.GenRenderbuffers(1, &m_color_rb);
  g_fbo.BindRenderbuffer(GL_RENDERBUFFER, m_color_rb);
  g_fbo.RenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, m_spec.width, m_spec.height);
  g_fbo.BindFramebuffer(GL_FRAMEBUFFER, m_fbo);
  g_fbo.FramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, m_color_rb);
  if (g_fbo.CheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
    throw std::runtime_error("cannot create an offscreen framebuffer of " + std::to_string(m_spec.width) + "x" +
                             std::to_string(m_spec.height));
}

std::unique_ptr<Window> Window::open(const WindowSpec& spec) {
  if (want_egl(spec)) {
    std::unique_ptr<Window> w(new Window());
    w->m_spec = spec;
    auto egl = std::make_unique<Egl>();
    try {
      egl->open(spec.width, spec.height);
    } catch (...) {
      egl->close();
      throw;
    }
    w->m_egl = egl.release();
    w->make_fbo();
    return w;
  }
  glfwSetErrorCallback(glfw_error);
  if (!glfwInit()) {
    const char* display = std::getenv("DISPLAY");
    const char* wayland = std::getenv("WAYLAND_DISPLAY");
    if ((!display || !*display) && (!wayland || !*wayland))
      throw std::runtime_error(
          "no display to open a window on (DISPLAY is not set). For screenshots and benchmarks on a "
          "machine without a screen, run it under a virtual X server: xvfb-run -a tttlab gui …");
    throw std::runtime_error("cannot initialise GLFW: " + g_last_glfw_error);
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  // Shown only once placed, so it never flashes at a size or place that does not fit.
  glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  std::unique_ptr<Window> w(new Window());
  w->m_spec = spec;
  Rect place{0, 0, spec.width, spec.height};
  bool placed = false;
  if (spec.fit_to_monitor && !spec.hidden) {
    // The size is chosen here from the work area (the screen less panels and docks), so GLFW must not
    // scale it again by the monitor's content scale.
    glfwWindowHint(GLFW_SCALE_TO_MONITOR, GLFW_FALSE);
    if (GLFWmonitor* monitor = glfwGetPrimaryMonitor()) {
      Rect area;
      glfwGetMonitorWorkarea(monitor, &area.x, &area.y, &area.width, &area.height);
      float sx = 1.0f, sy = 1.0f;
      glfwGetMonitorContentScale(monitor, &sx, &sy);
      if (area.width > 0 && area.height > 0) {
        place = spec.width > 0 && spec.height > 0
                    ? fit_window(area, spec.width, spec.height, spec.has_position, spec.x, spec.y)
                    : default_window(area, sx);
        placed = true;
      }
    }
    if (!placed && (place.width <= 0 || place.height <= 0)) place = Rect{0, 0, 1280, 720};
  } else {
    glfwWindowHint(GLFW_SCALE_TO_MONITOR, GLFW_TRUE);
  }
  w->m_window = glfwCreateWindow(place.width, place.height, spec.title.c_str(), nullptr, nullptr);
  if (!w->m_window) {
    glfwTerminate();
    throw std::runtime_error("cannot create an OpenGL 3.0 window: " + g_last_glfw_error +
                             " (is a GL driver installed? Mesa's software renderer works)");
  }
  if (placed) glfwSetWindowPos(w->m_window, place.x, place.y);
  if (!spec.hidden) glfwShowWindow(w->m_window);
  glfwMakeContextCurrent(w->m_window);
  glfwSwapInterval(spec.vsync ? 1 : 0);
  g_glfw_up = true;
  if (spec.hidden) w->make_fbo();
  return w;
}

Window::~Window() {
  if (m_egl) {
    auto* egl = static_cast<Egl*>(m_egl);
    if (m_fbo) g_fbo.DeleteFramebuffers(1, &m_fbo);
    if (m_color_rb) g_fbo.DeleteRenderbuffers(1, &m_color_rb);
    egl->close();
    delete egl;
    return;
  }
  g_glfw_up = false;
  if (m_window) {
    glfwMakeContextCurrent(m_window);
    if (m_fbo) g_fbo.DeleteFramebuffers(1, &m_fbo);
    if (m_color_rb) g_fbo.DeleteRenderbuffers(1, &m_color_rb);
    glfwDestroyWindow(m_window);
  }
  glfwTerminate();
}

float Window::content_scale() const {
  if (m_spec.hidden) return 1.0f;  // screenshots have a fixed pixel size
  float x = 1.0f, y = 1.0f;
  glfwGetWindowContentScale(m_window, &x, &y);
  return x > 0.0f ? x : 1.0f;
}

const char* Window::glsl_version() { return "#version 130"; }

bool Window::iconified() const { return m_window && glfwGetWindowAttrib(m_window, GLFW_ICONIFIED); }

bool Window::should_close() const { return m_window ? glfwWindowShouldClose(m_window) : false; }
void Window::request_close() {
  if (m_window) glfwSetWindowShouldClose(m_window, GLFW_TRUE);
}
bool Window::placement(int* x, int* y, int* w, int* h) const {
  if (!m_window || m_spec.hidden) return false;
  glfwGetWindowPos(m_window, x, y);
  glfwGetWindowSize(m_window, w, h);
  return *w > 0 && *h > 0;
}

void Window::set_title(const std::string& title) {
  if (m_window) glfwSetWindowTitle(m_window, title.c_str());
}

void Window::framebuffer_size(int* w, int* h) const {
  if (m_spec.hidden) {
    *w = m_spec.width;
    *h = m_spec.height;
  } else {
    glfwGetFramebufferSize(m_window, w, h);
  }
}

void Window::begin_render(float r, float g, float b) {
  int w = 0, h = 0;
  framebuffer_size(&w, &h);
  if (m_fbo) g_fbo.BindFramebuffer(GL_FRAMEBUFFER, m_fbo);
  glViewport(0, 0, w, h);
  glClearColor(r, g, b, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
}

Image Window::read_pixels(int x, int y, int w, int h) const {
  int fw = 0, fh = 0;
  framebuffer_size(&fw, &fh);
  if (m_fbo)
    g_fbo.BindFramebuffer(GL_FRAMEBUFFER, m_fbo);
  else
    glReadBuffer(GL_BACK);
  return read_gl_pixels(x, y, w, h, fw, fh);
}

void Window::present() {
  if (m_spec.hidden)
    glFlush();
  else
    glfwSwapBuffers(m_window);
}

void Window::post_empty_event() {
  if (g_glfw_up) glfwPostEmptyEvent();
}
bool Window::wait_events(double timeout) {
  if (m_window) glfwWaitEventsTimeout(timeout);
  return true;
}
void Window::poll_events() {
  if (m_window) glfwPollEvents();
}

}  // namespace tttlab::gui

#endif  // !__EMSCRIPTEN__
