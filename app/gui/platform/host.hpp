// app/gui/platform/host.hpp — what the app needs from the machine it runs on besides the window
// (window.hpp): the main loop, the clipboard, the pixel ratio, files in and out, and a folder that
// survives a restart. One API; host_desktop.cpp is the desktop side (GLFW, the XDG config folder),
// host_web.cpp the browser's (emscripten: animation frames, IndexedDB, downloads, a file picker).
// CMake lists both; each compiles to nothing on the other platform. Nothing else in app/gui asks
// which platform it runs on. UI thread only.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

struct GLFWwindow;

namespace tttlab::gui::host {

// Calls frame() once per displayed frame until it returns false.
//   desktop: a plain loop; returns when frame() returns false (frame() paces itself, e.g. with
//            Window::wait_events).
//   web:     one call per animation frame of the page (emscripten_set_main_loop_arg with the
//            browser's rate); it never returns, so everything frame() uses must live on the heap.
//            Before the first call it waits (frame by frame) until persistent_dir() is loaded.
//            When frame() returns false the loop is cancelled; `frame` itself is kept (never freed).
void run_main_loop(std::function<bool()> frame);

// The system clipboard, as UTF-8. In the browser, text copied in the app also goes to the page's
// clipboard (navigator.clipboard, where the browser allows it) and text pasted into the page
// (Ctrl+V) becomes the clipboard's content.
std::string clipboard_text();
void set_clipboard_text(const std::string& text);
// Wires Dear ImGui's copy and paste to the clipboard above (call after the GLFW backend's init, which
// on the desktop already did it: there a no-op).
void connect_imgui_clipboard();

// Physical pixels per CSS / screen pixel (1 on a standard screen; in the browser,
// window.devicePixelRatio).
float device_pixel_ratio();

// After the app wrote a file the user asked for (an exported plot, a saved state): in the browser the
// file only exists in the page's memory, so it is handed to the browser as a download (true). On the
// desktop it already is where the user chose: false, nothing happens.
bool offer_download(const std::filesystem::path& file);
// Whether the app's files stay inside the page unless offered as downloads (the browser): then what the
// app keeps for the user (a training run's checkpoints) needs a way out. False on the desktop.
bool files_are_downloads();

// The folder for settings, progress and recent folders that survives a restart:
//   desktop: $XDG_CONFIG_HOME/tttlab (~/.config/tttlab), as lab::user_config_dir() picks it;
//   web:     /persist, kept in the browser's IndexedDB (mounted and loaded before the first frame).
std::filesystem::path persistent_dir();
// Call after writing into persistent_dir(): in the browser the files reach IndexedDB (asynchronously,
// at the end of the frame; a few writes in one frame are stored once). Desktop: nothing to do.
void persist_sync();

// Asks the user for a file of their computer: in the browser a file picker; the chosen file is copied
// to /uploads/<name> and on_chosen(path) runs on the UI thread before a later frame. Returns false
// where the app's own file browser sees the user's files already (the desktop): use that instead.
bool request_user_file(std::function<void(const std::filesystem::path&)> on_chosen);
// Whether request_user_file() asks the user (the browser): the file browser then offers "Upload…".
bool can_request_user_file();

// The page's own address without its query and fragment (the browser), for links to a view; empty on
// the desktop, which has no address to link to.
std::string page_address();
// Shows `fragment` after the page's address ("#…"), without reloading, so the address bar holds the
// link to the view too. Desktop: nothing.
void set_page_fragment(const std::string& fragment);

// The view has drawn what the engine computed for it, the first time after the start. The browser says
// so on the page's console ("TTTLAB_SETTLED <ms>"), for the browser test; the desktop does nothing.
void view_settled();

// Files dropped on the window (desktop) or the page (browser: the browser copies them into its
// memory, under /.glfw_dropped_files). watch_dropped_files() once per window; the app takes them each
// frame, oldest first.
void watch_dropped_files(GLFWwindow* window);
std::vector<std::filesystem::path> take_dropped_files();

}  // namespace tttlab::gui::host
