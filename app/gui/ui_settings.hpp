// app/gui/ui_settings.hpp — how the app looks on this machine: the UI scale, the theme and the window's
// last size and position. Unlike a .tttlab state file (a view, shared with others), these belong to
// the screen they were chosen on, so they live in one small JSON file of the user's configuration:
// $XDG_CONFIG_HOME/tttlab/ui.json (~/.config/… when XDG_CONFIG_HOME is unset; $TTTLAB_UI_SETTINGS
// names another file):
//
//   { "ui_scale": 1.25, "theme": "light", "window": { "x": 40, "y": 30, "width": 1400, "height": 900 } }
//
// Every key is optional; a missing, unreadable or out-of-range value keeps its default, so a broken
// file never keeps the app from opening (the reason goes to stderr once). Screenshots and benchmarks
// neither read nor write it: their pictures must not depend on the machine's last session.
#pragma once

#include <filesystem>
#include <string>

namespace tttlab::gui {

enum class Theme { Dark, Light };

const char* to_string(Theme t);

// UI scale steps (Ctrl + = / Ctrl + − walk them; Ctrl + 0 returns to 100 %).
inline constexpr float kScaleSteps[] = {0.75f, 0.85f, 1.0f, 1.1f, 1.25f, 1.5f, 1.75f, 2.0f};
inline constexpr float kMinUiScale = 0.75f, kMaxUiScale = 2.0f;
// The next step above (dir > 0) or below (dir < 0) `scale`, clamped to the ends.
float step_ui_scale(float scale, int dir);

struct UiSettings {
  float ui_scale = 1.0f;
  Theme theme = Theme::Dark;
  // The window's last placement in screen coordinates; width 0: never saved (the app picks one).
  int x = 0, y = 0, width = 0, height = 0;
  bool has_position = false;

  static std::filesystem::path default_path();
  // Reads `path`; absent → defaults. `error` gets a one-line reason when the file exists but cannot be
  // used (the defaults are returned then).
  static UiSettings load(const std::filesystem::path& path, std::string* error = nullptr);
  // Writes atomically, creating the folder; false and `error` on failure.
  bool save(const std::filesystem::path& path, std::string* error = nullptr) const;
};

// A window placement that fits a monitor's work area (screen coordinates): at most the work area,
// at least a usable minimum where the area allows it, moved inside it when the saved position would
// put part of it off screen; without a saved position, centred.
struct Rect {
  int x = 0, y = 0, width = 0, height = 0;
};
Rect fit_window(const Rect& work_area, int want_w, int want_h, bool has_position, int x, int y);
// The default size on a work area: 90 % of it, capped at 1600 × 1000 times the monitor's scale.
Rect default_window(const Rect& work_area, float monitor_scale);

}  // namespace tttlab::gui
