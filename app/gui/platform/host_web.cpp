// The browser's side of host.hpp (emscripten). The page's main thread is the UI thread: it must never
// block (the browser forbids waiting there), so everything asynchronous on the JavaScript side (loading
// IndexedDB, reading a chosen or pasted file) leaves its result in Module.tttlab and the frame loop
// picks it up at the start of a later frame. JavaScript reads the wasm heap only through emscripten's
// string helpers or a fresh view of the memory (the heap may have grown on another thread).
// Linking needs -lidbfs.js (the persistent folder) and -sUSE_GLFW=3; without IndexedDB the settings
// last until the page closes. Compiled only by emscripten; the desktop's side is host_desktop.cpp.
#ifdef __EMSCRIPTEN__

#include "gui/platform/host.hpp"

#include <emscripten.h>
#include <emscripten/html5.h>
#include <imgui.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "lab/engine/late_resources.hpp"
#include "lab/engine/resources.hpp"

namespace tttlab::gui::host {
namespace {

namespace fs = std::filesystem;

// Set up once: the persistent folder (/persist on IndexedDB, loaded asynchronously), the page's paste
// events, and a last save of /persist when the tab is hidden or closed.
EM_JS(void, tttlab_host_js_init, (), {
  if (Module.tttlab) return;
  var t = {persistReady: false, syncing: false, syncAgain: false, uploads: [], pasted: null};
  Module.tttlab = t;
  t.sync = function() {
    if (!t.persistReady) return;
    if (t.syncing) { t.syncAgain = true; return; }
    t.syncing = true;
    try {
      FS.syncfs(false, function(err) {
        t.syncing = false;
        if (err) console.warn('TTT Lab: could not store /persist in IndexedDB: ' + err);
        if (t.syncAgain) { t.syncAgain = false; t.sync(); }
      });
    } catch (e) {
      t.syncing = false;
    }
  };
  try {
    try { FS.mkdir('/persist'); } catch (e) {}
    FS.mount(IDBFS, {}, '/persist');
    FS.syncfs(true, function(err) {
      if (err) console.warn('TTT Lab: could not load your saved settings and progress from IndexedDB: ' + err);
      t.persistReady = true;
    });
  } catch (e) {
    console.warn('TTT Lab: no IndexedDB storage (' + e + '); settings and progress last until the page closes');
    t.persistReady = true;
  }
  document.addEventListener('paste', function(ev) {
    var text = ev.clipboardData ? ev.clipboardData.getData('text/plain') : "";
    if (text) t.pasted = text;
  });
  document.addEventListener('visibilitychange', function() {
    if (document.visibilityState === 'hidden') t.sync();
  });
});

EM_JS(int, tttlab_host_js_persist_ready, (), { return Module.tttlab && Module.tttlab.persistReady ? 1 : 0; });
EM_JS(void, tttlab_host_js_sync, (), { if (Module.tttlab) Module.tttlab.sync(); });

// Text pasted into the page since the last call: its UTF-8 size + 1, then the text itself.
EM_JS(int, tttlab_host_js_pasted_size, (), {
  var t = Module.tttlab;
  return t && t.pasted !== null ? lengthBytesUTF8(t.pasted) + 1 : 0;
});
EM_JS(void, tttlab_host_js_take_pasted, (char* out, int size), {
  stringToUTF8(Module.tttlab.pasted, out, size);
  Module.tttlab.pasted = null;
});

EM_JS(void, tttlab_host_js_write_clipboard, (const char* text), {
  var s = UTF8ToString(text);
  if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(s).catch(function() {});
});

// Hands `size` bytes at `data` to the browser as a download named `name`.
EM_JS(void, tttlab_host_js_download, (const char* name, const std::uint8_t* data, int size), {
  var bytes = new Uint8Array(wasmMemory.buffer, data, size).slice();  // a copy: Blob takes no shared memory
  var url = URL.createObjectURL(new Blob([bytes], {type: 'application/octet-stream'}));
  var a = document.createElement('a');
  a.href = url;
  a.download = UTF8ToString(name);
  a.style.display = 'none';
  document.body.appendChild(a);
  a.click();
  setTimeout(function() { URL.revokeObjectURL(url); a.remove(); }, 10000);
});

// A file picker; the chosen file is copied to /uploads/<name> and its path queued.
EM_JS(void, tttlab_host_js_pick_file, (), {
  var input = document.createElement('input');
  input.type = 'file';
  input.onchange = function() {
    var file = input.files && input.files[0];
    if (!file) return;
    var reader = new FileReader();
    reader.onload = function() {
      try {
        try { FS.mkdir('/uploads'); } catch (e) {}
        var path = '/uploads/' + file.name.split('/').join('_');
        FS.writeFile(path, new Uint8Array(reader.result));
        Module.tttlab.uploads.push(path);
      } catch (e) {
        console.warn('TTT Lab: could not copy ' + file.name + ' into the page: ' + e);
      }
    };
    reader.onerror = function() { console.warn('TTT Lab: could not read ' + file.name + ': ' + reader.error); };
    reader.readAsArrayBuffer(file);
  };
  input.click();
});
EM_JS(int, tttlab_host_js_upload_size, (), {
  var t = Module.tttlab;
  return t && t.uploads.length ? lengthBytesUTF8(t.uploads[0]) + 1 : 0;
});
EM_JS(void, tttlab_host_js_take_upload, (char* out, int size), {
  stringToUTF8(Module.tttlab.uploads.shift(), out, size);
});

// The files that arrive after the lab opened (web/late_files.js): once they have settled, their error
// ("" when they all arrived), handed over once; null before that and after.
EM_JS(char*, tttlab_host_js_take_late_files, (), {
  var late = Module.tttlabLate;
  if (!late || !late.settled || late.told) return 0;
  late.told = true;
  return stringToNewUTF8(late.error);
});

EM_JS(char*, tttlab_host_js_page_address, (), {
  return stringToNewUTF8(window.location.origin + window.location.pathname);
});
EM_JS(void, tttlab_host_js_set_fragment, (const char* fragment), {
  history.replaceState(null, "", "#" + UTF8ToString(fragment));
});

// Takes a string that JavaScript left behind (size: its UTF-8 size + 1, 0 for none).
template <class Take>
std::string take_js_string(int size, Take take) {
  std::string s(static_cast<std::size_t>(size), '\0');
  take(s.data(), size);
  s.resize(s.find('\0'));
  return s;
}

std::string g_clipboard;
std::function<void(const fs::path&)> g_on_upload;  // the latest request wins (a cancelled picker says nothing)
bool g_sync_requested = false;
double g_last_sync_ms = 0.0;
// Files written off the UI thread (a training run's checkpoints, the course progress) reach
// IndexedDB by this periodic store as well; an unchanged folder costs one IndexedDB read.
constexpr double kSyncEveryMs = 15000.0;

void loop_tick(void* arg) {
  auto& frame = *static_cast<std::function<bool()>*>(arg);
  if (!tttlab_host_js_persist_ready()) return;  // the settings are still loading
  if (const int n = tttlab_host_js_pasted_size(); n > 0)
    g_clipboard = take_js_string(n, tttlab_host_js_take_pasted);
  while (const int n = tttlab_host_js_upload_size()) {
    const fs::path path = take_js_string(n, tttlab_host_js_take_upload);
    if (auto on_upload = std::exchange(g_on_upload, {})) on_upload(path);
  }
  if (char* late_error = tttlab_host_js_take_late_files()) {
    lab::late_resources_settled(late_error);
    std::free(late_error);
  }
  if (!frame()) {
    emscripten_cancel_main_loop();
    tttlab_host_js_sync();
    return;
  }
  static bool s_first = true;
  if (std::exchange(s_first, false)) {
    // The page's load time as a user sees it, for the browser test and the web benchmark: milliseconds
    // from the navigation to the end of the first frame.
    EM_ASM(console.log("TTTLAB_FIRST_FRAME " + performance.now().toFixed(1)));
    // Now the files that were left out of the first download (web/late_files.js).
    EM_ASM(if (Module.tttlabLate && Module.tttlabLate.start) Module.tttlabLate.start(););
  }
  const double now = emscripten_get_now();
  if (g_sync_requested || now - g_last_sync_ms > kSyncEveryMs) {
    g_sync_requested = false;
    g_last_sync_ms = now;
    tttlab_host_js_sync();
  }
}

}  // namespace

void run_main_loop(std::function<bool()> frame) {
  tttlab_host_js_init();
  g_last_sync_ms = emscripten_get_now();
  // Never freed: the browser keeps calling it after this call's stack is gone.
  auto* kept = new std::function<bool()>(std::move(frame));
  emscripten_set_main_loop_arg(loop_tick, kept, 0 /* the browser's animation frames */, 1);
}

std::string clipboard_text() { return g_clipboard; }
void set_clipboard_text(const std::string& text) {
  g_clipboard = text;
  tttlab_host_js_write_clipboard(text.c_str());
}
void connect_imgui_clipboard() {
  ImGuiIO& io = ImGui::GetIO();
  io.SetClipboardTextFn = [](void*, const char* text) { set_clipboard_text(text ? text : ""); };
  io.GetClipboardTextFn = [](void*) { return g_clipboard.c_str(); };
  io.ClipboardUserData = nullptr;
}

float device_pixel_ratio() {
  const double ratio = emscripten_get_device_pixel_ratio();
  return ratio > 0.0 ? static_cast<float>(ratio) : 1.0f;
}

bool offer_download(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return false;
  tttlab_host_js_download(file.filename().string().c_str(), reinterpret_cast<const std::uint8_t*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  return true;
}

bool files_are_downloads() { return true; }

fs::path persistent_dir() { return lab::user_config_dir(); }
void persist_sync() { g_sync_requested = true; }

bool request_user_file(std::function<void(const fs::path&)> on_chosen) {
  g_on_upload = std::move(on_chosen);
  tttlab_host_js_pick_file();
  return true;
}
bool can_request_user_file() { return true; }

std::string page_address() {
  char* raw = tttlab_host_js_page_address();
  std::string address = raw ? raw : "";
  std::free(raw);
  return address;
}
void set_page_fragment(const std::string& fragment) { tttlab_host_js_set_fragment(fragment.c_str()); }
void view_settled() { EM_ASM(console.log("TTTLAB_SETTLED " + performance.now().toFixed(1))); }

}  // namespace tttlab::gui::host

#endif  // __EMSCRIPTEN__
