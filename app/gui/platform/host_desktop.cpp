// The desktop side of host.hpp: a plain loop, GLFW's clipboard, the XDG config folder. The files the
// user saves are already where they chose, so there is nothing to download or to upload.
#ifndef __EMSCRIPTEN__

#include "gui/platform/host.hpp"

#include <GLFW/glfw3.h>

#include <utility>

#include "lab/engine/resources.hpp"

namespace tttlab::gui::host {

void run_main_loop(std::function<bool()> frame) {
  while (frame()) {
  }
}

// GLFW 3.3 reads and writes the clipboard without a window (the argument is ignored).
std::string clipboard_text() {
  const char* s = glfwGetClipboardString(nullptr);
  return s ? s : "";
}
void set_clipboard_text(const std::string& text) { glfwSetClipboardString(nullptr, text.c_str()); }
void connect_imgui_clipboard() {}  // ImGui's GLFW backend connects GLFW's clipboard itself

float device_pixel_ratio() { return 1.0f; }  // GLFW reports the monitor's scale (Window::content_scale)

bool offer_download(const std::filesystem::path&) { return false; }
bool files_are_downloads() { return false; }

std::filesystem::path persistent_dir() { return lab::user_config_dir(); }
void persist_sync() {}

std::string page_address() { return ""; }
void view_settled() {}
void set_page_fragment(const std::string&) {}

bool request_user_file(std::function<void(const std::filesystem::path&)>) { return false; }
bool can_request_user_file() { return false; }

}  // namespace tttlab::gui::host

#endif  // !__EMSCRIPTEN__
