#include "gui/ui_settings.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <system_error>

#include "lab/engine/resources.hpp"
#include "tttlab/io/atomic_file.hpp"

namespace tttlab::gui {
namespace fs = std::filesystem;

namespace {
// A settings file is a few lines; anything larger is not one of ours.
constexpr std::uint64_t kMaxBytes = 64 * 1024;
// Below this a window shows too little to be useful; above kMaxSide a value is not a screen size.
constexpr int kMinWidth = 640, kMinHeight = 400, kMaxSide = 32768;
}  // namespace

const char* to_string(Theme t) { return t == Theme::Light ? "light" : "dark"; }

float step_ui_scale(float scale, int dir) {
  constexpr int n = static_cast<int>(std::size(kScaleSteps));
  if (dir > 0) {
    for (int i = 0; i < n; ++i)
      if (kScaleSteps[i] > scale + 1e-3f) return kScaleSteps[i];
    return kScaleSteps[n - 1];
  }
  for (int i = n - 1; i >= 0; --i)
    if (kScaleSteps[i] < scale - 1e-3f) return kScaleSteps[i];
  return kScaleSteps[0];
}

fs::path UiSettings::default_path() { return lab::user_config_file("TTTLAB_UI_SETTINGS", "ui.json"); }

UiSettings UiSettings::load(const fs::path& path, std::string* error) {
  UiSettings s;
  std::error_code ec;
  if (!fs::exists(path, ec)) return s;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file_text(path, kMaxBytes));
    if (!j.is_object()) throw std::runtime_error("expected a JSON object");
    if (auto it = j.find("ui_scale"); it != j.end() && it->is_number()) {
      const float v = it->get<float>();
      if (std::isfinite(v)) s.ui_scale = std::clamp(v, kMinUiScale, kMaxUiScale);
    }
    if (auto it = j.find("theme"); it != j.end() && it->is_string())
      s.theme = it->get<std::string>() == "light" ? Theme::Light : Theme::Dark;
    if (auto it = j.find("window"); it != j.end() && it->is_object()) {
      const auto num = [&](const char* k, int& out) {
        auto f = it->find(k);
        if (f == it->end() || !f->is_number_integer()) return false;
        const auto v = f->get<long long>();
        if (v < -kMaxSide || v > kMaxSide) return false;
        out = static_cast<int>(v);
        return true;
      };
      int w = 0, h = 0;
      if (num("width", w) && num("height", h) && w > 0 && h > 0) {
        s.width = w;
        s.height = h;
      }
      s.has_position = num("x", s.x) && num("y", s.y);
    }
  } catch (const std::exception& e) {
    if (error) *error = path.string() + ": " + e.what() + " (using the default look)";
    return UiSettings{};
  }
  return s;
}

bool UiSettings::save(const fs::path& path, std::string* error) const {
  try {
    nlohmann::json j;
    j["ui_scale"] = ui_scale;
    j["theme"] = to_string(theme);
    if (width > 0 && height > 0) {
      j["window"] = {{"width", width}, {"height", height}};
      if (has_position) {
        j["window"]["x"] = x;
        j["window"]["y"] = y;
      }
    }
    std::error_code ec;
    if (const fs::path dir = path.parent_path(); !dir.empty() && !fs::is_directory(dir, ec)) {
      fs::create_directories(dir, ec);
      if (ec) throw std::runtime_error("cannot create the folder '" + dir.string() + "': " + ec.message());
    }
    write_file_atomic(path, j.dump(2) + "\n");
    return true;
  } catch (const std::exception& e) {
    if (error) *error = std::string("the display settings could not be saved: ") + e.what();
    return false;
  }
}

Rect fit_window(const Rect& area, int want_w, int want_h, bool has_position, int x, int y) {
  Rect r;
  r.width = std::min(std::max(want_w, std::min(kMinWidth, area.width)), area.width);
  r.height = std::min(std::max(want_h, std::min(kMinHeight, area.height)), area.height);
  if (!has_position) {
    r.x = area.x + (area.width - r.width) / 2;
    r.y = area.y + (area.height - r.height) / 2;
    return r;
  }
  r.x = std::clamp(x, area.x, area.x + area.width - r.width);
  r.y = std::clamp(y, area.y, area.y + area.height - r.height);
  return r;
}

Rect default_window(const Rect& area, float monitor_scale) {
  const float s = monitor_scale > 0.0f ? monitor_scale : 1.0f;
  const int w = std::min(static_cast<int>(std::lround(1600.0f * s)), static_cast<int>(area.width * 0.9));
  const int h = std::min(static_cast<int>(std::lround(1000.0f * s)), static_cast<int>(area.height * 0.9));
  return fit_window(area, w, h, false, 0, 0);
}

}  // namespace tttlab::gui
