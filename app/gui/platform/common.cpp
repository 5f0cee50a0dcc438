// What both sides of the platform layer share: GL textures for the plots, PNG files, the keys of
// keys.hpp (Dear ImGui's GLFW backend indexes io.KeysDown by GLFW key code on the desktop and in the
// browser) and the queue of dropped files (GLFW's drop callback, which emscripten's GLFW also calls).
#include "gui/platform/host.hpp"
#include "gui/platform/window.hpp"

#ifdef __EMSCRIPTEN__
#define GLFW_INCLUDE_ES3  // WebGL2's entry points
#else
#define GLFW_INCLUDE_GLEXT
#endif
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gui/keys.hpp"
#include "gui/plot/texture_cache.hpp"
#include "tttlab/io/atomic_file.hpp"

namespace tttlab::gui {

Image read_gl_pixels(int x, int y, int w, int h, int fw, int fh) {
  // Clip to the framebuffer.
  const int x0 = std::max(0, x), y0 = std::max(0, y);
  const int x1 = std::min(fw, x + w), y1 = std::min(fh, y + h);
  Image img;
  if (x1 <= x0 || y1 <= y0) return img;
  img.width = x1 - x0;
  img.height = y1 - y0;
  img.rgba.resize(static_cast<std::size_t>(img.width) * img.height * 4);
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
  // Encoded in memory, then written by the atomic writer, which checks every write: stb's own file
  // writer ignores failed writes, so a full disk left a truncated PNG reported as written.
  std::vector<std::uint8_t> png;
  const auto append = [](void* context, void* data, int size) {
    auto* out = static_cast<std::vector<std::uint8_t>*>(context);
    const auto* bytes = static_cast<const std::uint8_t*>(data);
    out->insert(out->end(), bytes, bytes + size);
  };
  if (!stbi_write_png_to_func(append, &png, img.width, img.height, 4, img.rgba.data(), img.width * 4) || png.empty())
    throw std::runtime_error("cannot encode the image as PNG");
  write_file_atomic(path, std::span<const std::uint8_t>(png));
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
    case Key::F11: return GLFW_KEY_F11;
    case Key::F12: return GLFW_KEY_F12;
    case Key::N0: return GLFW_KEY_0;
    case Key::Equal: return GLFW_KEY_EQUAL;
    case Key::Minus: return GLFW_KEY_MINUS;
    case Key::KeypadAdd: return GLFW_KEY_KP_ADD;
    case Key::KeypadSubtract: return GLFW_KEY_KP_SUBTRACT;
    case Key::Keypad0: return GLFW_KEY_KP_0;
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

namespace tttlab::gui::host {
namespace {
std::mutex g_drop_mutex;
std::vector<std::filesystem::path> g_dropped;

void on_drop(GLFWwindow*, int count, const char** paths) {
  const std::lock_guard lock(g_drop_mutex);
  for (int i = 0; i < count; ++i)
    if (paths[i] && *paths[i]) g_dropped.emplace_back(paths[i]);
}
}  // namespace

void watch_dropped_files(GLFWwindow* window) {
  if (window) glfwSetDropCallback(window, on_drop);
}

std::vector<std::filesystem::path> take_dropped_files() {
  const std::lock_guard lock(g_drop_mutex);
  return std::exchange(g_dropped, {});
}

}  // namespace tttlab::gui::host
