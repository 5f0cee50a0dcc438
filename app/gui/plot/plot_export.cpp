#include "gui/plot/plot_export.hpp"

#include <chrono>
#include <ctime>
#include <fstream>

#include "gui/notify.hpp"
#include "gui/platform/host.hpp"
#include "tttlab/io/atomic_file.hpp"

namespace tttlab::gui::plot {

Exporter& exporter() {
  static Exporter e;
  return e;
}

std::filesystem::path Exporter::make_path(const std::string& stem, const std::string& ext) const {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::string safe;
  for (char c : stem) safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '_';
  const std::string base = "tttlab_" + safe + "_" + stamp;
  std::filesystem::path p = m_dir / (base + "." + ext);
  std::error_code ec;
  for (int n = 2; std::filesystem::exists(p, ec); ++n)
    p = m_dir / (base + "_" + std::to_string(n) + "." + ext);
  return p;
}

void Exporter::request_png(ImGuiID plot, const std::string& stem) {
  m_pending.push_back({plot, stem, 2, false});
}

void Exporter::request_window_png() { m_pending.push_back({0, "window", 1, true}); }

void Exporter::note_rect(ImGuiID plot, const std::string& stem, ImVec2 min, ImVec2 max) {
  m_rects.push_back({plot, stem, min, max});
}

bool Exporter::request_png_by_name(const std::string& stem) {
  for (const auto* list : {&m_rects, &m_last_rects})
    for (const auto& r : *list)
      if (r.stem == stem) {
        request_png(r.id, stem);
        return true;
      }
  return false;
}

std::vector<std::string> Exporter::on_screen() const {
  std::vector<std::string> names;
  for (const auto& r : m_rects.empty() ? m_last_rects : m_rects) names.push_back(r.stem);
  return names;
}

bool Exporter::capturing(ImGuiID plot) const {
  for (const auto& p : m_pending)
    if (p.id == plot && !p.window) return true;
  return false;
}

bool Exporter::save_text(const std::string& stem, const std::string& ext,
                         const std::string& content) {
  const auto path = make_path(stem, ext);
  try {
    write_file_atomic(path, std::string_view(content));
  } catch (const FileError& e) {
    notify(std::string("Could not save the data: ") + e.what(), true);
    return false;
  }
  host::offer_download(path);
  notify("Saved data to " + std::filesystem::absolute(path).string());
  return true;
}

void Exporter::process(const std::function<Image(int, int, int, int)>& read, ImVec2 scale,
                       ImVec2 display) {
  std::vector<Pending> keep;
  for (auto& p : m_pending) {
    if (--p.frames_left > 0) {
      keep.push_back(p);
      continue;
    }
    ImVec2 mn(0, 0), mx = display;
    bool found = p.window;
    for (const auto& r : m_rects)
      if (!p.window && r.id == p.id) {
        mn = r.min;
        mx = r.max;
        found = true;
      }
    if (!found) {
      notify("The plot to export is no longer on screen", true);
      continue;
    }
    const int x = static_cast<int>(mn.x * scale.x), y = static_cast<int>(mn.y * scale.y);
    const int w = static_cast<int>((mx.x - mn.x) * scale.x + 0.5f);
    const int h = static_cast<int>((mx.y - mn.y) * scale.y + 0.5f);
    const auto path = make_path(p.stem, "png");
    try {
      write_png(path, read(x, y, w, h));
      host::offer_download(path);
      notify("Saved image to " + std::filesystem::absolute(path).string());
    } catch (const std::exception& e) {
      notify(std::string("Could not save the image: ") + e.what(), true);
    }
  }
  m_pending = std::move(keep);
  m_last_rects = std::move(m_rects);
  m_rects.clear();
}

}  // namespace tttlab::gui::plot
