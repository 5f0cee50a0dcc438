// The desktop app: window, main loop, menus, sidebar, status bar, state files, screenshots and the
// frame-time benchmark (see gui_app.hpp).
//
// Index of this file
//   [SECTION] App: construction, the frame, the main loops (interactive / screenshot / benchmark)
//   [SECTION] Layout: menu bar, sidebar, content, status bar
//   [SECTION] State files and dialogs
//   [SECTION] run_gui
#include "gui/gui_app.hpp"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <unistd.h>

#include "gui/app_requests.hpp"
#include "gui/course_menu.hpp"
#include "course/classroom.hpp"
#include "gui/dialogs.hpp"
#include "lab/engine/data_source.hpp"
#include "lab/engine/engine.hpp"
#include "lab/engine/engine_activity.hpp"
#include "gui/fonts.hpp"
#include "gui/keys.hpp"
#include "course/course_session.hpp"
#include "gui/lessons/lesson_pane.hpp"
#include "course/lesson_session.hpp"
#include "gui/notify.hpp"
#include "gui/panels/panel.hpp"
#include "gui/panels/widgets.hpp"
#include "gui/platform/host.hpp"
#include "gui/platform/window.hpp"
#include "gui/plot/plot_export.hpp"
#include "gui/plot/texture_cache.hpp"
#include "lab/state/json_fields.hpp"
#include "tttlab/io/limits.hpp"
#include "lab/state/state_file.hpp"
#include "lab/state/state_link.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"
#include "gui/ui_settings.hpp"
#include "tttlab/device.hpp"

namespace tttlab::gui {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// CPU time this thread has used, in ms: the UI thread's own work, without the time the scheduler
// gave other threads and processes (wall time includes that on a loaded machine).
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// Ctrl+1 … Ctrl+9 switch to the first nine panels; the others have no key.
constexpr std::size_t kPanelKeys = 9;

// The folded sidebar's label of a panel: a few letters that fit its strip.
std::string short_name(const std::string& id, const std::string& name) {
  static const std::pair<const char*, const char*> kShort[] = {
      {"inner_stepper", "Step"}, {"evolution", "Evo"},   {"inner_curves", "Loss"}, {"minibatch", "b"},
      {"primal_dual", "P/D"},    {"nonparametric", "NW"}, {"recall", "Rec"},       {"training", "Train"},
      {"evaluation", "Eval"},    {"generation", "Gen"},   {"lessons", "Les"}};
  for (const auto& [key, label] : kShort)
    if (id == key) return label;
  return name.substr(0, 3);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double idx = p * static_cast<double>(v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(idx);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (idx - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

// ---- [SECTION] App -----------------------------------------------------------------------------------

class App {
 public:
  App(const GuiOptions& opt, std::unique_ptr<Window> window)
      : m_opt(opt),
        m_window(std::move(window)),
        m_engine(make_engine_modules(opt.devices)),
        m_panels(make_panels()) {}
  ~App();

  // The look to start with; persist: changes are saved to the user's display settings (interactive).
  void set_look(const UiSettings& look, bool persist, bool presenter) {
    m_look = look;
    m_save_look = persist;
    m_presenter = presenter;
  }
  int init();
  // One frame of the interactive window: events, frame, render. False once the window should close
  // (the window's size and place are saved then). host::run_main_loop drives it.
  bool step();
  int run_screenshot();
  int run_benchmark();

 private:
  void frame();
  void render();
  void draw_main();
  void draw_menu_bar();
  void draw_sidebar(float width);
  void draw_sidebar_strip();
  void draw_content(float width, float height);
  void draw_status_bar();
  void draw_dialogs();
  void draw_shortcut_help();
  void global_shortcuts();
  // The look: UI scale, theme, presenter mode. A change marks the style and fonts for a rebuild, done
  // by apply_look() at the start of the next frame (never while ImGui is drawing with the old fonts).
  float effective_scale() const;
  void set_ui_scale(float scale);
  void set_theme(Theme theme);
  void set_presenter(bool on);
  void apply_look();
  void save_look();
  bool open_state(const fs::path& path);
  bool save_state(const fs::path& path);
  nlohmann::json current_state() const;  // what Save state writes: every panel's settings and the view
  void report_when_settled();
  void copy_view_link();
  void set_active(std::size_t i);
  // Sends a panel's settings to the engine the first time it is shown (or after a state file loads):
  // panels the user never opens cost no engine time.
  void ensure_synced(std::size_t i);
  void draw_classroom_dialog();
  void watch_engine_events();
  // Files dropped on the window (or the page): a state file opens like File → Open, a checkpoint or
  // run folder joins the model lists; any other file's folder joins the file browser's Recent folders,
  // where the panel that reads it finds it.
  void take_dropped_files();
  std::size_t find_panel(const std::string& id_or_name) const;
  void update_title();
  // The course: a lesson docked beside its view (lessons/lesson_pane.hpp).
  bool start_lesson(const std::string& name);  // opens its scene and docks it; false if it failed
  void dock_lesson(const course::Lesson& lesson);
  void leave_lesson();
  // Opens a lesson's scene like File → Open, but leaves the view unsaved (Ctrl+S then asks for a
  // file) so that saving never overwrites the lesson's own file. keep_classroom: the classroom
  // settings stay as they are (an experiment run inside a lesson must not undo the teacher's choice).
  bool open_lesson_scene(const fs::path& path, bool keep_classroom = false);
  bool lesson_veiled() const;

  GuiOptions m_opt;
  std::unique_ptr<Window> m_window;
  Engine m_engine;
  std::vector<std::unique_ptr<Panel>> m_panels;
  std::size_t m_active = 0;
  std::vector<bool> m_synced;
  std::shared_ptr<const Snapshot> m_snap;
  std::uint64_t m_library_event = 0, m_training_event = 0;
  bool m_show_classroom = false;
  bool m_imgui_ready = false;
  UiSettings m_look;
  bool m_save_look = false;
  bool m_look_dirty = false;
  // report_when_settled(): frames in a row that showed the engine's finished, unchanged snapshot.
  bool m_settled_reported = false;
  int m_settled_frames = 0;
  std::uint64_t m_settled_version = 0;
  bool m_presenter = false;
  float m_content_scale = 1.0f;

  // The docked lesson. The session outlives leaving (Ctrl+L brings it back with its state).
  std::unique_ptr<LessonSession> m_lesson;
  int m_lesson_generation = 0;  // the course's generation when m_lesson was made
  bool m_lesson_docked = false;
  bool m_lesson_to_top = false;  // the lesson was (re)opened: its pane starts at the top, not where the last one was
  bool m_sidebar_wide = false;            // while a lesson is docked the sidebar is a strip unless widened
  // A state file named a lesson: docked at the start of the next frame (or at the end of init), never
  // in the middle of drawing the pane that opened the file. load_scene: the file had no view of its own.
  struct PendingDock {
    std::string name;
    bool load_scene = false;
    std::optional<ClassroomState> classroom;  // the file's own, which wins over the scene's
  };
  std::optional<PendingDock> m_pending_dock;
  void take_pending_dock();

  // Dialogs
  PathDialog m_open_dialog{"Open state", BrowserMode::OpenFile, {kStateExtension}},
      m_save_dialog{"Save state", BrowserMode::SaveFile, {kStateExtension}};
  ErrorDialog m_error;
  CourseMenu m_course_menu;  // Export progress…, Open course pack…, the classroom lock
  bool m_show_help = false, m_show_about = false;
  // File → Open / Save as: the dialog opens on the current file (Save: a default name).
  void show_open_dialog() { m_open_dialog.open(m_state_path.string()); }
  void show_save_dialog() { m_save_dialog.open(m_state_path.empty() ? "view.tttlab" : m_state_path.string()); }
  fs::path m_state_path;

  // Frame timing (UI thread's own work: snapshot, panels, ImGui::Render).
  double m_ui_ms = 0.0, m_ui_cpu_ms = 0.0, m_gl_ms = 0.0;
  std::vector<double> m_ui_samples, m_ui_cpu_samples, m_gl_samples;
  bool m_collect = false;
};

App::~App() {
  m_engine.set_publish_callback({});
  m_engine.stop();  // before the window (and GLFW) go away: the callback posts GLFW events
  if (m_imgui_ready) {
    plot::release_textures();
    ImGui_ImplOpenGL3_Shutdown();
    if (!m_window->headless()) ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
  }
}

int App::init() {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // the layout is fixed; state lives in .tttlab files
  io.ConfigFlags |= ImGuiConfigFlags_NavEnableKeyboard;
  m_content_scale = m_window->content_scale();
  apply_look();
  if (!m_window->headless()) {
    ImGui_ImplGlfw_InitForOpenGL(m_window->handle(), true);
    host::connect_imgui_clipboard();
  } else {
    // No GLFW backend (a headless EGL context): map ImGui's keys to the GLFW codes keys.hpp reads, as
    // the backend would; no key is ever pressed.
    const int map[][2] = {{ImGuiKey_Tab, GLFW_KEY_TAB},         {ImGuiKey_LeftArrow, GLFW_KEY_LEFT},
                          {ImGuiKey_RightArrow, GLFW_KEY_RIGHT}, {ImGuiKey_UpArrow, GLFW_KEY_UP},
                          {ImGuiKey_DownArrow, GLFW_KEY_DOWN},   {ImGuiKey_PageUp, GLFW_KEY_PAGE_UP},
                          {ImGuiKey_PageDown, GLFW_KEY_PAGE_DOWN}, {ImGuiKey_Home, GLFW_KEY_HOME},
                          {ImGuiKey_End, GLFW_KEY_END},           {ImGuiKey_Insert, GLFW_KEY_INSERT},
                          {ImGuiKey_Delete, GLFW_KEY_DELETE},     {ImGuiKey_Backspace, GLFW_KEY_BACKSPACE},
                          {ImGuiKey_Space, GLFW_KEY_SPACE},       {ImGuiKey_Enter, GLFW_KEY_ENTER},
                          {ImGuiKey_Escape, GLFW_KEY_ESCAPE},     {ImGuiKey_KeyPadEnter, GLFW_KEY_KP_ENTER},
                          {ImGuiKey_A, GLFW_KEY_A},               {ImGuiKey_C, GLFW_KEY_C},
                          {ImGuiKey_V, GLFW_KEY_V},               {ImGuiKey_X, GLFW_KEY_X},
                          {ImGuiKey_Y, GLFW_KEY_Y},               {ImGuiKey_Z, GLFW_KEY_Z}};
    for (const auto& [imgui_key, glfw_key] : map) io.KeyMap[imgui_key] = glfw_key;
  }
  ImGui_ImplOpenGL3_Init(Window::glsl_version());
  install_gl_textures();
  m_imgui_ready = true;
  set_notifications_visible(m_opt.screenshot.empty());
  // Screenshots and benchmarks never show (or change) a student's course progress: a fresh one, unless
  // $TTTLAB_PROGRESS names a file on purpose.
  if (!m_opt.screenshot.empty() || m_opt.bench_frames > 0) {
    const char* env = std::getenv("TTTLAB_PROGRESS");
    course_session::set_progress_path(env && *env ? fs::path(env)
                                                  : fs::temp_directory_path() /
                                                        ("tttlab-offscreen-" + std::to_string(::getpid())) /
                                                        "course-progress.json");
  }

  if (!m_opt.panel.empty()) {
    const auto i = find_panel(m_opt.panel);
    if (i == m_panels.size()) {
      std::string known;
      for (const auto& p : m_panels) known += std::string(known.empty() ? "" : ", ") + p->id();
      std::fprintf(stderr, "tttlab gui: unknown panel \"%s\" (known: %s)\n", clip(m_opt.panel).c_str(),
                   known.c_str());
      return 2;
    }
    m_active = i;
  }
  m_synced.assign(m_panels.size(), false);
  const bool interactive = m_opt.screenshot.empty() && m_opt.bench_frames == 0;
  if (interactive) host::watch_dropped_files(m_window->handle());
  if (!m_opt.startup_error.empty()) m_error.show("Could not open the link", m_opt.startup_error);
  if (!m_opt.state_file.empty()) {
    if (!open_state(m_opt.state_file) && !interactive) {
      std::fprintf(stderr, "tttlab gui: %s\n", printable(m_error.text()).c_str());
      return 1;
    }
    take_pending_dock();
  }
  if (!m_opt.lesson.empty()) {
    if (!start_lesson(m_opt.lesson) && !interactive) {
      std::fprintf(stderr, "tttlab gui: %s\n", printable(m_error.text()).c_str());
      return 1;
    }
    take_pending_dock();
  }
  if (!m_opt.panel.empty() && (!m_opt.state_file.empty() || !m_opt.lesson.empty()))
    m_active = find_panel(m_opt.panel);  // --panel wins over the file and the lesson
  ensure_synced(m_active);
  m_engine.post(LibraryLoad{kShippedModelId});
  m_engine.post(SetComputeDevice{m_opt.compute});
  m_engine.set_publish_callback([] { Window::post_empty_event(); });
  m_engine.start();
  update_title();
  return 0;
}

std::size_t App::find_panel(const std::string& key) const {
  const auto lower = [](std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  for (std::size_t i = 0; i < m_panels.size(); ++i)
    if (lower(key) == m_panels[i]->id() || lower(key) == lower(m_panels[i]->name())) return i;
  return m_panels.size();
}

void App::set_active(std::size_t i) {
  if (i >= m_panels.size() || i == m_active) return;
  m_active = i;
  ensure_synced(i);
  update_title();
}

void App::ensure_synced(std::size_t i) {
  if (i >= m_panels.size() || m_synced[i]) return;
  m_synced[i] = true;
  m_panels[i]->sync(m_engine);
}

void App::watch_engine_events() {
  if (m_snap->library && m_snap->library->event != m_library_event) {
    m_library_event = m_snap->library->event;
    if (!m_snap->library->error.empty()) {
      m_error.show("Could not open the model", m_snap->library->error);
    } else if (!m_snap->library->opened_id.empty()) {
      notify("Opened " + m_snap->library->opened_id.substr(m_snap->library->opened_id.find(':') + 1) +
             ": it is in every model list now");
    }
  }
  if (m_snap->training && m_snap->training->event != m_training_event) {
    m_training_event = m_snap->training->event;
    if (!m_snap->training->error.empty()) {
      m_error.show("Training", m_snap->training->error);
    }
  }
  if (auto req = take_open_state_request()) open_state(*req);
  take_dropped_files();
  if (auto name = course_session::take_start_request()) start_lesson(*name);
  take_pending_dock();
}

void App::update_title() {
  std::string t = std::string("TTT Lab — ") + m_panels[m_active]->name();
  if (m_lesson_docked && m_lesson) t += " — lesson: " + m_lesson->lesson().title;
  if (!m_state_path.empty()) t += " — " + m_state_path.filename().string();
  // The lesson's title and the file's name come from files: no control byte reaches the title bar.
  m_window->set_title(printable(t));
}

float App::effective_scale() const {
  // Presenter mode reads from the back of a room: one scale step (25 %) above the chosen one.
  constexpr float kPresenterStep = 1.25f;
  return m_content_scale * m_look.ui_scale * (m_presenter ? kPresenterStep : 1.0f);
}

void App::apply_look() {
  m_look_dirty = false;
  const float s = effective_scale();
  apply_theme(s, m_look.theme);
  load_fonts(s);
  // Fonts are baked into a texture at one pixel size: rebuilt at the new size, text stays sharp
  // where scaling the old texture would blur it.
  if (m_imgui_ready) {
    ImGui_ImplOpenGL3_DestroyFontsTexture();
    ImGui_ImplOpenGL3_CreateFontsTexture();
  }
}

void App::save_look() {
  if (!m_save_look) return;
  int x = 0, y = 0, w = 0, h = 0;
  if (m_window->placement(&x, &y, &w, &h)) {
    m_look.x = x;
    m_look.y = y;
    m_look.width = w;
    m_look.height = h;
    m_look.has_position = true;
  }
  std::string error;
  if (!m_look.save(UiSettings::default_path(), &error))
    notify(error, true);
  else
    host::persist_sync();
}

void App::set_ui_scale(float scale) {
  scale = std::clamp(scale, kMinUiScale, kMaxUiScale);
  if (std::abs(scale - m_look.ui_scale) < 1e-4f) return;
  m_look.ui_scale = scale;
  m_look_dirty = true;
  save_look();
  char b[64];
  std::snprintf(b, sizeof b, "UI scale %.0f %%", 100.0f * scale);
  notify(b);
}

void App::set_theme(Theme theme) {
  if (theme == m_look.theme) return;
  m_look.theme = theme;
  m_look_dirty = true;
  save_look();
}

void App::set_presenter(bool on) {
  if (on == m_presenter) return;
  m_presenter = on;
  m_look_dirty = true;
  if (on) notify("Presenter mode: Esc or F11 leaves it");
}

void App::frame() {
  if (m_look_dirty) apply_look();
  ImGui_ImplOpenGL3_NewFrame();
  if (m_window->headless())
    ImGui::GetIO().DeltaTime = 1.0f / 60.0f;  // no GLFW clock (a headless EGL context): a steady 60 fps
  else
    ImGui_ImplGlfw_NewFrame();
  if (m_window->spec().hidden) {
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(static_cast<float>(m_window->spec().width),
                            static_cast<float>(m_window->spec().height));
    io.DisplayFramebufferScale = ImVec2(1, 1);
  }
  const auto t0 = Clock::now();
  const double cpu0 = thread_cpu_ms();
  ImGui::NewFrame();
  m_snap = m_engine.snapshot();  // the one snapshot this frame reads
  for (auto& p : m_panels) p->observe(*m_snap);
  watch_engine_events();
  draw_main();
  draw_dialogs();
  draw_classroom_dialog();
  m_course_menu.draw();
  draw_shortcut_help();
  draw_notifications();
  global_shortcuts();
  ImGui::Render();
  m_ui_ms = ms_since(t0);
  m_ui_cpu_ms = thread_cpu_ms() - cpu0;
}

void App::render() {
  const auto t0 = Clock::now();
  const ImVec4 c = clear_color();
  m_window->begin_render(c.x, c.y, c.z);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  const ImGuiIO& io = ImGui::GetIO();
  plot::exporter().process(
      [&](int x, int y, int w, int h) { return m_window->read_pixels(x, y, w, h); },
      io.DisplayFramebufferScale, io.DisplaySize);
  if (m_collect) glFinish();  // benchmark: charge the GL work to this frame
  m_gl_ms = ms_since(t0);
  if (m_collect) {
    m_ui_samples.push_back(m_ui_ms);
    m_ui_cpu_samples.push_back(m_ui_cpu_ms);
    m_gl_samples.push_back(m_gl_ms);
  }
  m_window->present();
}

bool App::step() {
  if (m_window->should_close()) {
    save_look();  // the window's last size and place
    return false;
  }
  // Sleep until input or a new snapshot (the engine's publish callback posts an empty event);
  // the timeout keeps the status bar and notifications ticking. (The browser paces frames itself.)
  if (!m_window->wait_events(0.25)) return true;  // the browser: nothing new to draw
  if (m_window->iconified()) return true;
  frame();
  render();
  report_when_settled();
  // While something animates (hover, playback), keep frames coming at the display rate.
  if (ImGui::IsAnyItemActive() || ImGui::GetIO().MouseDelta.x != 0 || ImGui::GetIO().MouseDelta.y != 0 ||
      m_look_dirty)
    Window::post_empty_event();
  return true;
}

// The first time the engine has finished what the view asked for and three frames showed the same
// snapshot (the screenshot mode's rule), the host is told: the browser test then knows the panel
// shows its results, however slow the machine.
void App::report_when_settled() {
  if (m_settled_reported) return;
  const std::uint64_t version = m_engine.snapshot()->version;
  m_settled_frames = m_engine.settled() && version == m_settled_version ? m_settled_frames + 1 : 0;
  m_settled_version = version;
  if (m_settled_frames >= 3) {
    m_settled_reported = true;
    host::view_settled();
  }
}

void App::take_dropped_files() {
  std::vector<fs::path> opened;  // model folders already opened from this drop
  for (const fs::path& path : host::take_dropped_files()) {
    if (path.extension() == kStateExtension) {
      open_state(path);
      continue;
    }
    std::error_code ec;
    const bool folder = fs::is_directory(path, ec);
    // A checkpoint (config.json + model.safetensors, dropped as its folder or as its files, which the
    // browser puts side by side) or a run directory opens like "Open a checkpoint folder…": it joins
    // every model list, or the error dialog says why not.
    const fs::path model_dir = folder ? path : path.parent_path();
    const bool model_file = path.extension() == ".safetensors" || path.filename() == "config.json";
    if (model_file || (folder && (fs::exists(path / "config.json", ec) || fs::exists(path / "metrics.jsonl", ec) ||
                                     fs::exists(path / "latest", ec)))) {
      if (std::find(opened.begin(), opened.end(), model_dir) == opened.end()) {
        opened.push_back(model_dir);
        m_engine.post(LibraryOpen{model_dir.string()});
      }
      continue;
    }
    recent_folders().remember(folder ? path : path.parent_path());
    notify("Received " + printable(path.filename().string()) + (folder ? " (a folder)" : "") + ": it is in " +
           printable((folder ? path : path.parent_path()).string()) +
           ", listed under Recent folders in the file browser of the panel that reads it");
  }
}

int App::run_screenshot() {
  for (int i = 0; i < m_opt.frames; ++i) {
    m_window->poll_events();
    frame();
    render();
  }
  // Let the engine finish what the frames asked for, then draw until the picture is stable.
  const auto t0 = Clock::now();
  std::uint64_t seen = 0;
  int stable = 0;
  while (stable < 3 && ms_since(t0) < 1000.0 * m_opt.settle_s) {
    const bool idle = m_engine.settled();
    const auto v = m_engine.snapshot()->version;
    stable = idle && v == seen ? stable + 1 : 0;
    seen = v;
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    m_window->poll_events();
    frame();
    render();
  }
  if (stable < 3)
    std::fprintf(stderr, "tttlab gui: the engine was still busy after %d s; capturing anyway\n", m_opt.settle_s);
  m_window->poll_events();
  frame();
  const ImVec4 c = clear_color();
  m_window->begin_render(c.x, c.y, c.z);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  const Image img = m_window->read_pixels(0, 0, m_window->spec().width, m_window->spec().height);
  try {
    write_png(m_opt.screenshot, img);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tttlab gui: %s\n", printable(e.what()).c_str());
    return 1;
  }
  std::printf("wrote %s (%dx%d, panel %s)\n", printable(m_opt.screenshot).c_str(), img.width, img.height,
              m_panels[m_active]->id());
  return 0;
}

int App::run_benchmark() {
  // Drive the stepper so the UI draws a changing snapshot every frame, as during playback, and (unless
  // --bench-idle) train a tiny model at the same time, as the issue's benchmark asks.
  m_engine.post(StepperSetSpeed{240.0, true});
  m_engine.post(StepperTransport{StepperOp::Play, 0});
  if (m_opt.bench_train) {
    TrainSettings t;
    t.device = DeviceRequest::CPU;  // the benchmark's question: a CPU run competing with the UI thread
    t.preset = "tiny";
    t.data = default_data_source();
    t.steps = 100000;
    t.batch_size = 4;
    t.seq_len = 64;
    t.threads = 1;
    t.eval_every = 0;
    t.runs_dir = (fs::temp_directory_path() / "tttlab-bench-runs").string();
    m_engine.post(TrainStart{t, "bench"});
  }
  const int warmup = std::min(30, m_opt.bench_frames);
  for (int i = 0; i < warmup; ++i) {
    m_window->poll_events();
    frame();
    render();
  }
  m_collect = true;
  std::uint64_t last = 0, distinct = 0;
  const auto t0 = Clock::now();
  for (int i = 0; i < m_opt.bench_frames; ++i) {
    m_window->poll_events();
    frame();
    if (m_snap->version != last) ++distinct;
    last = m_snap->version;
    render();
  }
  const double wall = ms_since(t0);
  m_collect = false;
  int fw = 0, fh = 0;
  m_window->framebuffer_size(&fw, &fh);
  const char* renderer = reinterpret_cast<const char*>(glGetString(GL_RENDERER));
  std::printf("tttlab gui --bench-frames %d  (panel %s, %dx%d offscreen, GL renderer: %s)\n",
              m_opt.bench_frames, m_panels[m_active]->id(), fw, fh, renderer ? renderer : "?");
  std::printf("UI thread work per frame (snapshot + panels + ImGui::Render), thread CPU time: p50 %.3f ms  "
              "p99 %.3f ms  max %.3f ms\n",
              percentile(m_ui_cpu_samples, 0.5), percentile(m_ui_cpu_samples, 0.99), percentile(m_ui_cpu_samples, 1.0));
  std::printf("the same, wall-clock (includes time other threads and processes held the CPU): p50 %.3f ms  "
              "p99 %.3f ms  max %.3f ms\n",
              percentile(m_ui_samples, 0.5), percentile(m_ui_samples, 0.99), percentile(m_ui_samples, 1.0));
  std::printf("GL submit + finish per frame:                               p50 %.3f ms  p99 %.3f ms\n",
              percentile(m_gl_samples, 0.5), percentile(m_gl_samples, 0.99));
  std::printf("%d frames in %.0f ms (%.0f frames/s, no vsync); %llu distinct engine snapshots drawn\n",
              m_opt.bench_frames, wall, 1000.0 * m_opt.bench_frames / wall,
              static_cast<unsigned long long>(distinct));
  if (m_opt.bench_train) {
    long steps = 0;
    double rate = 0;
    std::string state = "not started";
    if (m_snap->training)
      for (const auto& r : m_snap->training->runs) {
        steps = r->steps_done;
        rate = r->tokens_per_s;
        state = r->message.empty() ? to_string(r->state) : r->message;
      }
    std::printf("meanwhile a tiny model trained on the CPU (B = 4, T = 64, 1 thread): %ld steps, %.0f tokens/s (%s)\n",
                steps, rate, state.c_str());
    for (const auto& r : m_snap->training ? m_snap->training->runs : std::vector<std::shared_ptr<const RunView>>{}) {
      m_engine.post(TrainControl{r->id, TrainOp::Remove});
      std::error_code ec;
      fs::remove_all(r->dir, ec);
    }
    m_engine.wait_quiescent(std::chrono::seconds(30));
  }
  return 0;
}

// ---- [SECTION] Layout ----------------------------------------------------------------------------------

void App::draw_main() {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(vp->WorkPos);
  ImGui::SetNextWindowSize(vp->WorkSize);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
  ImGui::Begin("##main", nullptr,
               ImGuiWindowFlags_NoDecoration | (m_presenter ? 0 : ImGuiWindowFlags_MenuBar) |
                   ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImGui::PopStyleVar();
  if (m_presenter) {
    // Presenter mode: no menus, sidebar or status bar; the view (and a docked lesson) fill the window.
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    draw_content(avail.x, avail.y);
    ImGui::End();
    return;
  }
  draw_menu_bar();

  const float status_h = ImGui::GetFrameHeight() + 2.0f;
  const float em = ImGui::GetFontSize() / 15.0f;
  // While a lesson is docked the sidebar folds to a strip (panel numbers), so that the lesson and its
  // view both fit beside each other on a 1280 × 720 screen.
  const bool strip = m_lesson_docked && m_lesson && !m_sidebar_wide;
  const float sidebar_w = (strip ? 52.0f : 214.0f) * em;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(0, 0));
  if (strip) ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(6, 10));
  ImGui::PushStyleColor(ImGuiCol_ChildBg, colors::kSidebarBg.vec4());
  ImGui::BeginChild("##sidebar", ImVec2(sidebar_w, avail.y - status_h), false,
                    ImGuiWindowFlags_AlwaysUseWindowPadding);
  ImGui::PopStyleVar(strip ? 2 : 1);
  if (strip)
    draw_sidebar_strip();
  else
    draw_sidebar(sidebar_w);
  ImGui::EndChild();
  ImGui::PopStyleColor();
  ImGui::SameLine();
  draw_content(avail.x - sidebar_w, avail.y - status_h);
  draw_status_bar();
  ImGui::End();
}

void App::draw_content(float width, float height) {
  if (!m_lesson_docked || !m_lesson) {
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(14, 10));
    ImGui::BeginChild("##content", ImVec2(width, height), false, ImGuiWindowFlags_AlwaysUseWindowPadding);
    ImGui::PopStyleVar();
    m_panels[m_active]->draw(*m_snap, m_engine);
    ImGui::EndChild();
    return;
  }
  // The lesson on the left (about 36 % of the width, at least ~330 px, scrolling on its own), its live
  // view on the right.
  const float em = ImGui::GetFontSize() / 15.0f;
  const float pane_w = std::floor(std::clamp(width * 0.36f, std::min(330.0f * em, width * 0.6f), width * 0.6f));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
  ImGui::BeginChild("##content", ImVec2(width, height), false,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImGui::PopStyleVar();

  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(18, 12));
  ImGui::PushStyleColor(ImGuiCol_ChildBg, colors::kPaneBg.vec4());
  begin_lesson_pane_window("##lesson_pane", ImVec2(pane_w, height), m_lesson_to_top);
  m_lesson_to_top = false;
  ImGui::PopStyleColor();
  ImGui::PopStyleVar();
  LessonPaneHost host;
  host.open_scene = [this](const fs::path& p) { return open_lesson_scene(p, true); };
  host.engine_quiet = [this] { return m_engine.quiescent(); };
  host.leave = [this] { leave_lesson(); };
  // Deferred to the next frame: starting a lesson replaces the session this pane is drawing.
  host.start_lesson = [](const std::string& name) { course_session::request_start(name); };
  {
    const auto& lessons = course_session::get().course.lessons;
    for (std::size_t i = 0; i + 1 < lessons.size(); ++i)
      if (lessons[i].name == m_lesson->lesson().name) {
        host.next_lesson = lessons[i + 1].name;
        host.next_lesson_title = lessons[i + 1].title;
      }
  }
  draw_lesson_pane(*m_lesson, *m_snap, m_engine, host);
  ImGui::EndChild();

  ImGui::SameLine(0, 0);
  const ImVec2 edge = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddLine(edge, ImVec2(edge.x, edge.y + height), colors::kDivider, 1.0f);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(14, 10));
  ImGui::BeginChild("##live_view", ImVec2(0, height), false, ImGuiWindowFlags_AlwaysUseWindowPadding);
  ImGui::PopStyleVar();
  if (m_lesson && lesson_veiled())
    draw_lesson_veil(*m_lesson);
  else
    m_panels[m_active]->draw(*m_snap, m_engine);
  ImGui::EndChild();
  ImGui::EndChild();
}

void App::draw_menu_bar() {
  if (!ImGui::BeginMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open state…", "Ctrl+O")) show_open_dialog();
    if (ImGui::MenuItem("Save state", "Ctrl+S")) {
      if (m_state_path.empty())
        show_save_dialog();
      else
        save_state(m_state_path);
    }
    if (ImGui::MenuItem("Save state as…", "Ctrl+Shift+S")) show_save_dialog();
    if (!host::page_address().empty() && ImGui::MenuItem("Copy link to this view")) copy_view_link();
    ImGui::Separator();
    m_course_menu.file_menu_items();
    ImGui::Separator();
    if (ImGui::MenuItem("Export window as PNG", "F12")) plot::exporter().request_window_png();
    ImGui::TextDisabled("Plots: right-click a plot to export it");
    ImGui::TextDisabled("Files go to %s", fs::absolute(plot::exporter().directory()).string().c_str());
    ImGui::Separator();
    if (ImGui::MenuItem("Quit", "Ctrl+Q")) m_window->request_close();
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    m_course_menu.classroom_menu_items(&m_show_classroom);
    ImGui::Separator();
    if (ImGui::MenuItem("Zoom in", "Ctrl+=", false, m_look.ui_scale < kMaxUiScale))
      set_ui_scale(step_ui_scale(m_look.ui_scale, +1));
    if (ImGui::MenuItem("Zoom out", "Ctrl+\xE2\x88\x92", false, m_look.ui_scale > kMinUiScale))
      set_ui_scale(step_ui_scale(m_look.ui_scale, -1));
    if (ImGui::MenuItem("Actual size", "Ctrl+0", false, m_look.ui_scale != 1.0f)) set_ui_scale(1.0f);
    ImGui::TextDisabled("UI scale %.0f %%", 100.0f * m_look.ui_scale);
    if (ImGui::BeginMenu("Theme")) {
      if (ImGui::MenuItem("Dark", nullptr, m_look.theme == Theme::Dark)) set_theme(Theme::Dark);
      if (ImGui::MenuItem("Light", nullptr, m_look.theme == Theme::Light)) set_theme(Theme::Light);
      ImGui::EndMenu();
    }
    if (ImGui::MenuItem("Presenter mode", "F11", m_presenter)) set_presenter(!m_presenter);
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Compute")) {
    // One device for every panel that computes; a change applies to the next computation.
    const ComputeView* cv = m_snap && m_snap->compute ? m_snap->compute.get() : nullptr;
    const ComputeRequest now = cv ? cv->request : m_opt.compute;
    const bool gpu_ok = cv && cv->gpu_available;
    if (ImGui::MenuItem("Automatic: the GPU when there is one", nullptr, now == ComputeRequest::Auto))
      m_engine.post(SetComputeDevice{ComputeRequest::Auto});
    if (ImGui::MenuItem("CPU", nullptr, now == ComputeRequest::CPU)) m_engine.post(SetComputeDevice{ComputeRequest::CPU});
    if (ImGui::MenuItem("GPU", nullptr, now == ComputeRequest::GPU, gpu_ok))
      m_engine.post(SetComputeDevice{ComputeRequest::GPU});
    ImGui::Separator();
    ImGui::TextDisabled("Computing on: %s", cv ? cv->active.c_str() : "…");
    if (cv && !cv->gpu_available) ImGui::TextDisabled("%s", cv->gpu_build ? cv->note.c_str() : "This build has no GPU kernels");
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Panels", !(classroom::state().enabled && classroom::state().hide_panel_list))) {
    for (std::size_t i = 0; i < m_panels.size(); ++i) {
      char sc[32] = "";
      if (i < kPanelKeys) std::snprintf(sc, sizeof sc, "Ctrl+%zu", i + 1);
      if (ImGui::MenuItem(m_panels[i]->name(), sc, i == m_active)) set_active(i);
    }
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Help")) {
    if (ImGui::MenuItem("Keyboard shortcuts", "F1")) m_show_help = true;
    if (ImGui::MenuItem("About TTT Lab")) m_show_about = true;
    ImGui::EndMenu();
  }
  ImGui::EndMenuBar();
}

void App::draw_sidebar(float width) {
  ImGui::PushFont(fonts().large);
  ImGui::TextUnformatted("TTT Lab");
  ImGui::PopFont();
  if (m_lesson_docked && m_lesson) {
    ImGui::SameLine(width - ImGui::GetStyle().WindowPadding.x - ImGui::GetFrameHeight() * 1.2f);
    if (ImGui::Button("\xC2\xAB", ImVec2(ImGui::GetFrameHeight() * 1.2f, 0))) m_sidebar_wide = false;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Fold the sidebar: more room for the lesson and its view");
  }
  ImGui::PushStyleColor(ImGuiCol_Text, colors::kTextDim);
  ImGui::PushFont(fonts().small);
  ImGui::TextWrapped("Test-Time Training layers, computed live by the TTT engine.");
  ImGui::PopFont();
  ImGui::PopStyleColor();
  ImGui::Dummy(ImVec2(0, 8));

  const bool locked = classroom::state().enabled && classroom::state().hide_panel_list;
  widgets::section_label(locked ? "CLASSROOM" : "PANELS");
  for (std::size_t i = 0; i < m_panels.size() && !locked; ++i) {
    // Names only: numbers here read as the course's lesson numbers. The first nine have Ctrl+N.
    if (ImGui::Selectable(m_panels[i]->name(), i == m_active, 0, ImVec2(0, ImGui::GetFrameHeight())))
      set_active(i);
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      ImGui::PushTextWrapPos(ImGui::GetFontSize() * 28.0f);
      ImGui::TextUnformatted(m_panels[i]->summary());
      if (i < kPanelKeys) ImGui::TextDisabled("Ctrl+%zu", i + 1);
      ImGui::PopTextWrapPos();
      ImGui::EndTooltip();
    }
  }

  if (locked) {
    ImGui::PushFont(fonts().small);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kAccent), "● %s", m_panels[m_active]->name());
    ImGui::TextDisabled("Classroom mode: the teacher chose this view.");
    ImGui::PopFont();
  }
  ImGui::Dummy(ImVec2(0, 10));
  widgets::section_label("ENGINE");
  const EngineActivity activity = engine_activity(*m_snap, m_engine.quiescent());
  ImGui::PushFont(fonts().small);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(activity.busy() ? colors::kGood : colors::kTextDim), "● %s",
                     activity.word());
  if (activity.state == EngineActivity::State::Working) {
    ImGui::SameLine();
    ImGui::TextDisabled("%.0f ms/s busy", m_snap->stats.busy_ms_last_second);
  }
  ImGui::TextDisabled("snapshot #%llu", static_cast<unsigned long long>(m_snap->version));
  ImGui::PopFont();
  for (const ActivityItem& item : activity.items) {
    ImGui::PushID(item.label.c_str());
    ImGui::PushFont(fonts().small);
    ImGui::TextWrapped("%s", item.label.c_str());
    ImGui::PopFont();
    // The bar takes what the Cancel button leaves of the row, so the button is never cut off.
    const float cancel_w = item.cancel ? ImGui::CalcTextSize("Cancel").x + 2.0f * ImGui::GetStyle().FramePadding.x +
                                             ImGui::GetStyle().ItemSpacing.x
                                       : 0.0f;
    ImGui::ProgressBar(static_cast<float>(item.progress), ImVec2(ImGui::GetContentRegionAvail().x - cancel_w, 0));
    if (item.cancel) {
      ImGui::SameLine();
      if (ImGui::SmallButton("Cancel")) m_engine.post(CancelJob{item.cancel});
    }
    ImGui::PopID();
  }
  if (activity.items.empty()) {
    ImGui::PushFont(fonts().small);
    ImGui::TextDisabled("nothing running");
    ImGui::PopFont();
  }

  // Keep the hint at the bottom of the sidebar.
  const float hint_h = 2.0f * ImGui::GetTextLineHeightWithSpacing();
  if (ImGui::GetContentRegionAvail().y > hint_h)
    ImGui::SetCursorPosY(ImGui::GetCursorPosY() + ImGui::GetContentRegionAvail().y - hint_h);
  ImGui::PushFont(fonts().small);
  ImGui::TextDisabled("F1  keyboard shortcuts");
  ImGui::TextDisabled("Ctrl+S  save this view");
  ImGui::PopFont();
}

// The sidebar folded while a lesson is docked: the panel numbers, and whether the engine works.
void App::draw_sidebar_strip() {
  const float w = ImGui::GetContentRegionAvail().x;
  if (ImGui::Button("\xC2\xBB", ImVec2(w, 0))) m_sidebar_wide = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("Show the sidebar");
  ImGui::Dummy(ImVec2(0, 10));
  const bool locked = classroom::state().enabled && classroom::state().hide_panel_list;
  ImGui::PushStyleVar(ImGuiStyleVar_SelectableTextAlign, ImVec2(0.5f, 0.5f));
  for (std::size_t i = 0; i < m_panels.size() && !locked; ++i) {
    // A short name, not a number: numbers beside a lesson read as lesson numbers.
    ImGui::PushID(static_cast<int>(i));
    ImGui::PushFont(fonts().small);
    if (ImGui::Selectable(short_name(m_panels[i]->id(), m_panels[i]->name()).c_str(), i == m_active, 0,
                          ImVec2(w, ImGui::GetFrameHeight())))
      set_active(i);
    ImGui::PopFont();
    ImGui::PopID();
    if (ImGui::IsItemHovered()) {
      if (i < kPanelKeys)
        ImGui::SetTooltip("%s  (Ctrl+%zu)", m_panels[i]->name(), i + 1);
      else
        ImGui::SetTooltip("%s", m_panels[i]->name());
    }
  }
  ImGui::PopStyleVar();
  ImGui::Dummy(ImVec2(0, 10));
  const EngineActivity activity = engine_activity(*m_snap, m_engine.quiescent());
  const char* dot = "\xE2\x97\x8F";
  ImGui::SetCursorPosX(ImGui::GetCursorPosX() + (w - ImGui::CalcTextSize(dot).x) * 0.5f);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(activity.busy() ? colors::kGood : colors::kTextDim), "%s", dot);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", activity.sentence().c_str());
}

void App::draw_status_bar() {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float w = ImGui::GetWindowWidth(), h = ImGui::GetFrameHeight() + 2.0f;
  dl->AddRectFilled(p, ImVec2(p.x + w, p.y + h), colors::kStatusBg);
  dl->AddLine(p, ImVec2(p.x + w, p.y), colors::kRule);
  ImGui::SetCursorScreenPos(ImVec2(p.x + 10.0f, p.y + 3.0f));
  ImGui::PushFont(fonts().small);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "%s",
                     m_state_path.empty() ? "unsaved view" : m_state_path.string().c_str());
  const std::string& note = last_notification();
  if (!note.empty()) {
    ImGui::SameLine(0, 24);
    ImGui::TextDisabled("%s", note.c_str());
  }
  // Which device the panels compute on (the Compute menu changes it).
  const std::string device = m_snap && m_snap->compute && !m_snap->compute->active.empty()
                                 ? "computing on " + m_snap->compute->active
                                 : std::string("CPU engine (Eigen)");
  char right[320];
  std::snprintf(right, sizeof right, "%sUI %.2f ms/frame   %.0f fps   %s",
                classroom::state().enabled ? "CLASSROOM MODE   " : "", m_ui_ms, ImGui::GetIO().Framerate,
                device.c_str());
  const float rw = ImGui::CalcTextSize(right).x;
  ImGui::SameLine(w - rw - 12.0f);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kTextDim), "%s", right);
  ImGui::PopFont();
}

void App::global_shortcuts() {
  if (!shortcuts_enabled()) return;
  if (ctrl_down()) {
    if (shift_down() && key_pressed(Key::K, false)) {
      m_course_menu.toggle_classroom();
      return;
    }
    if (key_pressed(Key::L, false)) {
      if (m_lesson_docked)
        leave_lesson();
      else if (m_lesson) {
        const std::string name = m_lesson->lesson().name;  // the course may have been reloaded since
        if (const course::Lesson* l = course_session::get().course.find(name))
          dock_lesson(*l);
        else
          notify("That lesson can no longer be read: the course page says why");
      } else {
        set_active(find_panel("lessons"));
        notify("Choose a lesson on the course page: it opens beside its view");
      }
      return;
    }
    if (key_pressed(Key::O, false)) show_open_dialog();
    if (key_pressed(Key::S, false)) {
      if (shift_down() || m_state_path.empty())
        show_save_dialog();
      else
        save_state(m_state_path);
    }
    if (key_pressed(Key::Q, false)) m_window->request_close();
    if (key_pressed(Key::Equal) || key_pressed(Key::KeypadAdd)) set_ui_scale(step_ui_scale(m_look.ui_scale, +1));
    if (key_pressed(Key::Minus) || key_pressed(Key::KeypadSubtract))
      set_ui_scale(step_ui_scale(m_look.ui_scale, -1));
    if (key_pressed(Key::N0, false) || key_pressed(Key::Keypad0, false)) set_ui_scale(1.0f);
    const bool locked = classroom::state().enabled && classroom::state().hide_panel_list;
    for (std::size_t i = 0; i < m_panels.size() && i < 9 && !locked; ++i)
      if (key_pressed(static_cast<Key>(static_cast<int>(Key::N1) + static_cast<int>(i)), false))
        set_active(i);
    return;
  }
  if (key_pressed(Key::F1, false)) m_show_help = !m_show_help;
  if (key_pressed(Key::F11, false)) set_presenter(!m_presenter);
  if (key_pressed(Key::F12, false)) plot::exporter().request_window_png();
  if (ImGui::IsPopupOpen("", ImGuiPopupFlags_AnyPopupId)) return;
  // Escape closes what was opened last: the shortcut help, then presenter mode.
  if (key_pressed(Key::Escape, false) && (m_show_help || m_presenter)) {
    if (m_show_help)
      m_show_help = false;
    else
      set_presenter(false);
    return;
  }
  if (lesson_veiled()) return;  // the view is not shown yet: its keys wait too
  m_panels[m_active]->shortcuts(*m_snap, m_engine);
}

// ---- [SECTION] State files and dialogs -----------------------------------------------------------------

bool App::open_state(const fs::path& path) {
  try {
    KeyLog keys;
    mark_envelope_keys(keys);
    const nlohmann::json doc = read_state_file(path);
    const FieldReader top(doc, "");
    const FieldReader panels = top.object("panels");
    std::vector<std::function<void()>> apply;
    for (const auto& p : m_panels) {
      if (!panels.has(p->id())) continue;
      apply.push_back(p->parse_state(doc["panels"][p->id()], std::string("panels.") + p->id()));
    }
    std::size_t active = m_active;
    if (const auto a = top.string("active_panel", 64, ""); !a.empty()) {
      active = find_panel(a);
      if (active == m_panels.size()) throw StateError("active_panel: unknown panel \"" + a + "\"");
    }
    const ClassroomState room = classroom::from_json(top.object("classroom"));
    // "lesson": the lesson docked beside this view (a name or number of the course).
    std::string lesson_name;
    if (const auto key = top.string("lesson", 128, ""); !key.empty()) {
      const CourseSession& cs = course_session::get();
      const course::Lesson* l = cs.course.find(key);
      if (!l)
        throw StateError("lesson: no lesson \"" + key + "\" in the course" +
                         (cs.error.empty() ? std::string() : " (" + cs.error + ")"));
      lesson_name = l->name;
    }
    // "compute": the device the panels compute on (auto, cpu or gpu); absent: unchanged.
    std::optional<ComputeRequest> compute;
    if (const auto c = top.string("compute", 16, ""); !c.empty()) {
      try {
        compute = parse_compute_request(c);
      } catch (const std::invalid_argument& e) {
        throw StateError(std::string("compute: ") + e.what());
      }
    }
    for (auto& f : apply) f();
    classroom::set(room);
    if (compute) m_engine.post(SetComputeDevice{*compute});  // before the panels' requests below
    // The panels the file set up are re-synced when shown (the active one now).
    for (std::size_t i = 0; i < m_panels.size(); ++i)
      if (panels.has(m_panels[i]->id()) || m_synced[i]) m_synced[i] = false;
    m_active = active;
    ensure_synced(m_active);
    // Which of the lesson's experiments the view shows now (one of its scenes, opened by the lesson or
    // with File → Open) decides whether the view is veiled.
    if (m_lesson) m_lesson->scene_opened(path);
    m_state_path = path;
    update_title();
    notify("Opened " + printable(path.string()));
    // Keys no setting reads (a typo, a setting of another version) are named, not ignored in silence.
    for (const std::string& n : keys.notes(doc, path.string())) {
      std::fprintf(stderr, "tttlab gui: note: %s\n", n.c_str());
      notify(n);
    }
    if (!lesson_name.empty())
      m_pending_dock = PendingDock{lesson_name, !doc.contains("panels") && !doc.contains("active_panel"),
                                  doc.contains("classroom") ? std::optional<ClassroomState>(room) : std::nullopt};
    return true;
  } catch (const StateError& e) {
    m_error.show("Could not open the state file", e.what());
    return false;
  }
}

nlohmann::json App::current_state() const {
  nlohmann::json panels = nlohmann::json::object();
  for (const auto& p : m_panels) panels[p->id()] = p->save_state();
  nlohmann::json doc = make_state(m_panels[m_active]->id(), std::move(panels));
  doc["classroom"] = classroom::to_json(classroom::state());
  if (m_snap && m_snap->compute) doc["compute"] = to_string(m_snap->compute->request);
  if (m_lesson_docked && m_lesson) doc["lesson"] = m_lesson->lesson().name;
  return doc;
}

// The browser: the view as a link (lab/state/state_link.hpp), copied and shown in the address bar, so
// a teacher can hand out exactly this view.
void App::copy_view_link() {
  const std::string fragment = state_link_fragment(current_state());
  host::set_clipboard_text(host::page_address() + "#" + fragment);
  host::set_page_fragment(fragment);
  notify("Copied a link to this view (" + std::to_string(fragment.size() / 1024 + 1) +
         " kB): whoever opens it sees the same panels and settings");
}

bool App::save_state(const fs::path& path) {
  try {
    fs::path target = path;
    if (target.extension().empty()) target += kStateExtension;
    const nlohmann::json doc = current_state();
    write_state_file(target, doc);
    host::persist_sync();  // when the state was saved into the persistent folder
    host::offer_download(target);
    m_state_path = target;
    update_title();
    notify("Saved view to " + fs::absolute(target).string());
    return true;
  } catch (const StateError& e) {
    m_error.show("Could not save the state file", e.what());
    return false;
  }
}

// ---- [SECTION] The course: a lesson docked beside its view ---------------------------------------------

bool App::open_lesson_scene(const fs::path& path, bool keep_classroom) {
  const ClassroomState room = classroom::state();
  const bool ok = open_state(path);
  if (keep_classroom) classroom::set(room);
  m_pending_dock.reset();  // a lesson's scene never re-docks (or re-opens) a lesson itself
  if (ok) {
    m_state_path.clear();
    update_title();
  }
  return ok;
}

bool App::start_lesson(const std::string& name) {
  const CourseSession& cs = course_session::get();
  const course::Lesson* found = cs.course.find(name);
  if (!found) {
    // A lesson file that does not parse: its error names the file and the line.
    if (const std::string* error = cs.course.find_error(name)) {
      m_error.show("Could not start the lesson", "The lesson cannot be read: " + *error);
      return false;
    }
    std::string known;
    for (const auto& l : cs.course.lessons) known += (known.empty() ? "" : ", ") + l.name;
    m_error.show("Could not start the lesson",
                "There is no lesson \"" + clip(name) + "\" in the course" +
                    (!known.empty() ? " (its lessons: " + known + ")." : cs.error.empty() ? std::string(".") : ": " + cs.error));
    return false;
  }
  const course::Lesson lesson = *found;
  const bool ok = lesson.scene.empty() || open_lesson_scene(lesson.scene);
  dock_lesson(lesson);
  return ok;
}

void App::dock_lesson(const course::Lesson& lesson) {
  CourseSession& cs = course_session::get();
  if (!m_lesson || m_lesson->lesson().name != lesson.name || m_lesson_generation != cs.generation) {
    m_lesson = std::make_unique<LessonSession>(lesson, cs.progress.get());
    m_lesson_generation = cs.generation;
  }
  m_lesson_docked = true;
  m_lesson_to_top = true;
  m_sidebar_wide = false;
  cs.open_lesson = lesson.name;
  update_title();
}

void App::leave_lesson() {
  m_lesson_docked = false;
  course_session::get().open_lesson.clear();
  update_title();
}

void App::take_pending_dock() {
  if (!m_pending_dock) return;
  const PendingDock d = *m_pending_dock;
  m_pending_dock.reset();
  if (d.load_scene) {
    start_lesson(d.name);
    if (d.classroom) classroom::set(*d.classroom);
    return;
  }
  if (const course::Lesson* l = course_session::get().course.find(d.name)) dock_lesson(*l);
}

bool App::lesson_veiled() const {
  return m_lesson_docked && m_lesson && m_lesson->veiled() && std::string(m_panels[m_active]->id()) != "lessons";
}

void App::draw_dialogs() {
  const ImVec2 center = ImGui::GetMainViewport()->GetCenter();
  if (const auto path = m_open_dialog.draw("Open a .tttlab state file:", "Open")) open_state(*path);
  if (const auto path = m_save_dialog.draw("Save the panel settings and seeds to a .tttlab file:", "Save"))
    save_state(*path);
  // After the file dialogs: an error they cause opens in this frame (dialogs.hpp says why its keys wait).
  m_error.draw();

  if (m_show_about) {
    ImGui::OpenPopup("About TTT Lab");
    m_show_about = false;
  }
  ImGui::SetNextWindowPos(center, ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  if (ImGui::BeginPopupModal("About TTT Lab", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::TextUnformatted("TTT Lab 0.1.0");
    ImGui::TextDisabled("An interactive lab for Test-Time Training layers (Sun et al., ICML 2025).");
    ImGui::TextDisabled("Dear ImGui %s · GLFW %s · OpenGL: %s", ImGui::GetVersion(), glfwGetVersionString(),
                        reinterpret_cast<const char*>(glGetString(GL_VERSION)));
    if (ImGui::Button("Close", ImVec2(100, 0))) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
}

void App::draw_classroom_dialog() {
  if (!m_show_classroom) return;
  ImGui::SetNextWindowPos(ImGui::GetMainViewport()->GetCenter(), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowSize(ImVec2(ImGui::GetFontSize() * 36.0f, ImGui::GetFontSize() * 34.0f), ImGuiCond_Appearing);
  if (ImGui::Begin("Classroom mode", &m_show_classroom, ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoCollapse)) {
    ClassroomState room = classroom::state();
    bool changed = ImGui::Checkbox("Classroom mode is on (Ctrl+Shift+K)", &room.enabled);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("Tick the controls students should not see, set up the view, and save it with File → Save "
                        "state: the file remembers the choice and reopens in classroom mode.");
    ImGui::PopTextWrapPos();
    changed |= ImGui::Checkbox("Hide the panel list (students stay on the saved panel)", &room.hide_panel_list);
    widgets::section_label("LESSONS");
    changed |= ImGui::Checkbox("Students may open the hints of the lessons' questions", &room.allow_hints);
    changed |= ImGui::Checkbox("Students may open the answers of the lessons' questions", &room.allow_answers);
    ImGui::Separator();
    ImGui::BeginChild("##controls", ImVec2(0, 0), false);
    for (const auto& p : m_panels) {
      const auto controls = p->classroom_controls();
      if (controls.empty()) continue;
      widgets::section_label(p->name());
      for (const auto& c : controls) {
        bool hide = room.hidden.count(c.id) > 0;
        if (ImGui::Checkbox(c.label, &hide)) {
          if (hide)
            room.hidden.insert(c.id);
          else
            room.hidden.erase(c.id);
          changed = true;
        }
      }
    }
    ImGui::EndChild();
    if (changed) classroom::set(room);
  }
  ImGui::End();
}

void App::draw_shortcut_help() {
  if (!m_show_help) return;
  ImGui::SetNextWindowPos(ImGui::GetMainViewport()->GetCenter(), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowSize(ImVec2(480, 0), ImGuiCond_Appearing);
  if (ImGui::Begin("Keyboard shortcuts", &m_show_help,
                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_AlwaysAutoResize)) {
    const auto table = [](const char* title, const std::vector<ShortcutHelp>& rows) {
      widgets::section_label(title);
      if (ImGui::BeginTable(title, 2, ImGuiTableFlags_SizingFixedFit)) {
        for (const auto& r : rows) {
          ImGui::TableNextRow();
          ImGui::TableNextColumn();
          ImGui::PushFont(fonts().mono);
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kAccent), "%s", r.keys);
          ImGui::PopFont();
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(r.action);
        }
        ImGui::EndTable();
      }
    };
    table("APP", {{"Ctrl+O", "open a state file"},
                  {"Ctrl+= / Ctrl+\xE2\x88\x92", "larger / smaller UI (Ctrl+0: 100 %)"},
                  {"F11", "presenter mode (Esc leaves)"},
                  {"Ctrl+Shift+K", "classroom mode on / off"},
                  {"Ctrl+L", "show / hide the lesson beside the view"},
                  {"Ctrl+S", "save the view (Ctrl+Shift+S: save as)"},
                  {"Ctrl+1 … 9", "switch panel"},
                  {"F12", "export the window as PNG"},
                  {"F1", "this help (Esc closes)"},
                  {"Ctrl+Q", "quit"}});
    ImGui::Dummy(ImVec2(0, 6));
    const auto rows = m_panels[m_active]->shortcut_help();
    if (!rows.empty()) table(m_panels[m_active]->name(), rows);
  }
  ImGui::End();
}

}  // namespace

// ---- [SECTION] run_gui ---------------------------------------------------------------------------------

namespace {

// Opens the window and the app and runs a screenshot or a benchmark (their exit status), or, for the
// interactive window, hands the app to `*interactive` and returns -1. Also the exit status of
// --list-panels and of bad options.
int open_app(const GuiOptions& opt, std::unique_ptr<App>* interactive) {
  if (opt.list_panels) {
    for (const auto& p : make_panels()) std::printf("%-14s %-24s %s\n", p->id(), p->name(), p->summary());
    return 0;
  }
  if (!opt.panel.empty()) {  // checked before a window (and a display) is needed
    bool known = false;
    std::string ids;
    for (const auto& p : make_panels()) {
      std::string name = p->name();
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string key = opt.panel;
      for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      known = known || key == p->id() || key == name;
      ids += std::string(ids.empty() ? "" : ", ") + p->id();
    }
    if (!known) {
      std::fprintf(stderr, "tttlab gui: unknown panel \"%s\" (known: %s)\n", clip(opt.panel).c_str(), ids.c_str());
      return 2;
    }
  }
  WindowSpec spec;
  spec.width = opt.width;
  spec.height = opt.height;
  spec.hidden = !opt.screenshot.empty() || opt.bench_frames > 0;
  spec.vsync = !spec.hidden;
  // The look: an interactive window starts as the user left it (ui_settings.hpp); screenshots and
  // benchmarks start from the defaults, so their pictures do not depend on this machine's last session.
  UiSettings look;
  if (!spec.hidden) {
    std::string error;
    look = UiSettings::load(UiSettings::default_path(), &error);
    if (!error.empty()) std::fprintf(stderr, "tttlab gui: note: %s\n", printable(error).c_str());
    error.clear();
    recent_folders().use_file(RecentFolders::default_path(), &error);  // the file browser's Recent folders
    if (!error.empty()) std::fprintf(stderr, "tttlab gui: note: %s\n", printable(error).c_str());
    spec.fit_to_monitor = true;
    spec.width = look.width;
    spec.height = look.height;
    spec.has_position = look.has_position;
    spec.x = look.x;
    spec.y = look.y;
  }
  if (opt.ui_scale > 0.0f) look.ui_scale = std::clamp(opt.ui_scale, kMinUiScale, kMaxUiScale);
  if (!opt.theme.empty()) look.theme = opt.theme == "light" ? Theme::Light : Theme::Dark;
  std::unique_ptr<Window> window;
  try {
    window = Window::open(spec);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tttlab gui: %s\n", printable(e.what()).c_str());
    return 1;
  }
  auto app = std::make_unique<App>(opt, std::move(window));
  app->set_look(look, !spec.hidden, opt.presenter);
  if (const int rc = app->init(); rc != 0) return rc;
  if (!opt.screenshot.empty()) return app->run_screenshot();
  if (opt.bench_frames > 0) return app->run_benchmark();
  *interactive = std::move(app);  // run_gui's main loop drives it
  return -1;
}

}  // namespace

int run_gui(const GuiOptions& opt) {
  if (opt.list_panels) return open_app(opt, nullptr);
  if (!opt.screenshot.empty() || opt.bench_frames > 0) return open_app(opt, nullptr);
  // The interactive window. In the browser run_main_loop never returns and the stack of this call is
  // abandoned, so the app lives on the heap, owned by the loop's frame function (which the browser's
  // side keeps forever: the app is never destroyed there, and nothing waits for its engine to stop).
  // It is made in the first frame: in the browser the persistent folder (its settings) is loaded then.
  struct Session {
    GuiOptions opt;
    std::unique_ptr<App> app;
    int rc = 0;
  };
  auto session = std::make_shared<Session>();
  session->opt = opt;
  host::run_main_loop([session] {
    if (!session->app) {
      const int rc = open_app(session->opt, &session->app);
      if (rc >= 0) {
        session->rc = rc;
        return false;
      }
    }
    return session->app->step();
  });
  return session->rc;
}

}  // namespace tttlab::gui
