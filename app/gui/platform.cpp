#include "gui/platform.hpp"

#define GLFW_INCLUDE_GLEXT
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "gui/keys.hpp"
#include "gui/plot/texture_cache.hpp"

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

  bool load() {
    GenFramebuffers = reinterpret_cast<PFNGLGENFRAMEBUFFERSPROC>(glfwGetProcAddress("glGenFramebuffers"));
    BindFramebuffer = reinterpret_cast<PFNGLBINDFRAMEBUFFERPROC>(glfwGetProcAddress("glBindFramebuffer"));
    DeleteFramebuffers =
        reinterpret_cast<PFNGLDELETEFRAMEBUFFERSPROC>(glfwGetProcAddress("glDeleteFramebuffers"));
    GenRenderbuffers =
        reinterpret_cast<PFNGLGENRENDERBUFFERSPROC>(glfwGetProcAddress("glGenRenderbuffers"));
    BindRenderbuffer =
        reinterpret_cast<PFNGLBINDRENDERBUFFERPROC>(glfwGetProcAddress("glBindRenderbuffer"));
    DeleteRenderbuffers =
        reinterpret_cast<PFNGLDELETERENDERBUFFERSPROC>(glfwGetProcAddress("glDeleteRenderbuffers"));
    RenderbufferStorage =
        reinterpret_cast<PFNGLRENDERBUFFERSTORAGEPROC>(glfwGetProcAddress("glRenderbufferStorage"));
    FramebufferRenderbuffer = reinterpret_cast<PFNGLFRAMEBUFFERRENDERBUFFERPROC>(
        glfwGetProcAddress("glFramebufferRenderbuffer"));
    CheckFramebufferStatus = reinterpret_cast<PFNGLCHECKFRAMEBUFFERSTATUSPROC>(
        glfwGetProcAddress("glCheckFramebufferStatus"));
    return GenFramebuffers && BindFramebuffer && DeleteFramebuffers && GenRenderbuffers &&
           BindRenderbuffer && DeleteRenderbuffers && RenderbufferStorage &&
           FramebufferRenderbuffer && CheckFramebufferStatus;
  }
};
FboApi g_fbo;

}  // namespace

std::unique_ptr<Window> Window::open(const WindowSpec& spec) {
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
  glfwWindowHint(GLFW_VISIBLE, spec.hidden ? GLFW_FALSE : GLFW_TRUE);
  glfwWindowHint(GLFW_SCALE_TO_MONITOR, GLFW_TRUE);
  std::unique_ptr<Window> w(new Window());
  w->spec_ = spec;
  w->window_ = glfwCreateWindow(spec.width, spec.height, spec.title.c_str(), nullptr, nullptr);
  if (!w->window_) {
    glfwTerminate();
    throw std::runtime_error("cannot create an OpenGL 3.0 window: " + g_last_glfw_error +
                             " (is a GL driver installed? Mesa's software renderer works)");
  }
  glfwMakeContextCurrent(w->window_);
  glfwSwapInterval(spec.vsync ? 1 : 0);

  if (spec.hidden) {
    if (!g_fbo.load()) throw std::runtime_error("OpenGL framebuffer objects are not available");
    g_fbo.GenFramebuffers(1, &w->fbo_);
    g_fbo.GenRenderbuffers(1, &w->color_rb_);
    g_fbo.BindRenderbuffer(GL_RENDERBUFFER, w->color_rb_);
    g_fbo.RenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, spec.width, spec.height);
    g_fbo.BindFramebuffer(GL_FRAMEBUFFER, w->fbo_);
    g_fbo.FramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER,
                                  w->color_rb_);
    if (g_fbo.CheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
      throw std::runtime_error("cannot create an offscreen framebuffer of " +
                               std::to_string(spec.width) + "x" + std::to_string(spec.height));
  }
  return w;
}

Window::~Window() {
  if (window_) {
    glfwMakeContextCurrent(window_);
    if (fbo_) g_fbo.DeleteFramebuffers(1, &fbo_);
    if (color_rb_) g_fbo.DeleteRenderbuffers(1, &color_rb_);
    glfwDestroyWindow(window_);
  }
  glfwTerminate();
}

float Window::content_scale() const {
  if (spec_.hidden) return 1.0f;  // screenshots have a fixed pixel size
  float x = 1.0f, y = 1.0f;
  glfwGetWindowContentScale(window_, &x, &y);
  return x > 0.0f ? x : 1.0f;
}

bool Window::should_close() const { return glfwWindowShouldClose(window_); }
void Window::request_close() { glfwSetWindowShouldClose(window_, GLFW_TRUE); }
void Window::set_title(const std::string& title) { glfwSetWindowTitle(window_, title.c_str()); }

void Window::framebuffer_size(int* w, int* h) const {
  if (spec_.hidden) {
    *w = spec_.width;
    *h = spec_.height;
  } else {
    glfwGetFramebufferSize(window_, w, h);
  }
}

void Window::begin_render(float r, float g, float b) {
  int w = 0, h = 0;
  framebuffer_size(&w, &h);
  if (fbo_) g_fbo.BindFramebuffer(GL_FRAMEBUFFER, fbo_);
  glViewport(0, 0, w, h);
  glClearColor(r, g, b, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
}

Image Window::read_pixels(int x, int y, int w, int h) const {
  int fw = 0, fh = 0;
  framebuffer_size(&fw, &fh);
  // Clip to the framebuffer.
  const int x0 = std::max(0, x), y0 = std::max(0, y);
  const int x1 = std::min(fw, x + w), y1 = std::min(fh, y + h);
  Image img;
  if (x1 <= x0 || y1 <= y0) return img;
  img.width = x1 - x0;
  img.height = y1 - y0;
  img.rgba.resize(static_cast<std::size_t>(img.width) * img.height * 4);
  if (fbo_)
    g_fbo.BindFramebuffer(GL_FRAMEBUFFER, fbo_);
  else
    glReadBuffer(GL_BACK);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  // GL's origin is bottom-left: read the band, then flip the rows.
  glReadPixels(x0, fh - y1, img.width, img.height, GL_RGBA, GL_UNSIGNED_BYTE, img.rgba.data());
  const std::size_t row = static_cast<std::size_t>(img.width) * 4;
  std::vector<unsigned char> tmp(row);
  for (int i = 0; i < img.height / 2; ++i) {
    unsigned char* a = img.rgba.data() + row * i;
    unsigned char* b = img.rgba.data() + row * (img.height - 1 - i);
    std::copy(a, a + row, tmp.data());
    std::copy(b, b + row, a);
    std::copy(tmp.data(), tmp.data() + row, b);
  }
  for (std::size_t i = 3; i < img.rgba.size(); i += 4) img.rgba[i] = 255;  // opaque
  return img;
}

void Window::present() {
  if (spec_.hidden)
    glFlush();
  else
    glfwSwapBuffers(window_);
}

void Window::post_empty_event() { glfwPostEmptyEvent(); }
void Window::wait_events(double timeout) { glfwWaitEventsTimeout(timeout); }
void Window::poll_events() { glfwPollEvents(); }

void install_gl_textures() {
  plot::TextureApi api;
  api.create = [](int w, int h, const unsigned char* rgba) {
    GLint previous = 0;
    glGetIntegerv(GL_TEXTURE_BINDING_2D, &previous);
    GLuint tex = 0;
    glGenTextures(1, &tex);
    glBindTexture(GL_TEXTURE_2D, tex);
    // Nearest: a cell is a cell, never blurred into its neighbours.
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba);
    glBindTexture(GL_TEXTURE_2D, static_cast<GLuint>(previous));
    return reinterpret_cast<ImTextureID>(static_cast<std::uintptr_t>(tex));
  };
  api.destroy = [](ImTextureID id) {
    const GLuint tex = static_cast<GLuint>(reinterpret_cast<std::uintptr_t>(id));
    glDeleteTextures(1, &tex);
  };
  plot::set_texture_api(std::move(api));
}

void write_png(const std::filesystem::path& path, const Image& img) {
  if (img.width <= 0 || img.height <= 0) throw std::runtime_error("nothing to write (empty image)");
  if (!stbi_write_png(path.string().c_str(), img.width, img.height, 4, img.rgba.data(),
                      img.width * 4))
    throw std::runtime_error("cannot write " + path.string() + " (does the folder exist?)");
}

// ---- keys.hpp ----------------------------------------------------------------------------------------
// The GLFW backend of Dear ImGui 1.86 indexes io.KeysDown by GLFW key code.

namespace {
int glfw_key(Key k) {
  switch (k) {
    case Key::Space: return GLFW_KEY_SPACE;
    case Key::Left: return GLFW_KEY_LEFT;
    case Key::Right: return GLFW_KEY_RIGHT;
    case Key::Up: return GLFW_KEY_UP;
    case Key::Down: return GLFW_KEY_DOWN;
    case Key::Home: return GLFW_KEY_HOME;
    case Key::End: return GLFW_KEY_END;
    case Key::PageUp: return GLFW_KEY_PAGE_UP;
    case Key::PageDown: return GLFW_KEY_PAGE_DOWN;
    case Key::Enter: return GLFW_KEY_ENTER;
    case Key::Escape: return GLFW_KEY_ESCAPE;
    case Key::F1: return GLFW_KEY_F1;
    case Key::F5: return GLFW_KEY_F5;
    case Key::F12: return GLFW_KEY_F12;
    case Key::B: return GLFW_KEY_B;
    case Key::E: return GLFW_KEY_E;
    case Key::K: return GLFW_KEY_K;
    case Key::L: return GLFW_KEY_L;
    case Key::O: return GLFW_KEY_O;
    case Key::Q: return GLFW_KEY_Q;
    case Key::R: return GLFW_KEY_R;
    case Key::S: return GLFW_KEY_S;
    default: return GLFW_KEY_1 + (static_cast<int>(k) - static_cast<int>(Key::N1));
  }
}
}  // namespace

bool key_pressed(Key k, bool repeat) { return ImGui::IsKeyPressed(glfw_key(k), repeat); }
bool ctrl_down() { return ImGui::GetIO().KeyCtrl; }
bool shift_down() { return ImGui::GetIO().KeyShift; }
bool shortcuts_enabled() { return !ImGui::GetIO().WantTextInput; }

}  // namespace tttlab::gui
