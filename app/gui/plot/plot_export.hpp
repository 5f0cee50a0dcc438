// app/gui/plot/plot_export.hpp — export of any plot as PNG (pixels read back from the rendered
// frame) and of its data as CSV.
//
// A plot cannot read its own pixels while the frame is being built, and the context menu that asked
// for the export covers part of it in that frame. So a PNG export is a REQUEST: the plot reports its
// screen rectangle every frame (note_rect); two frames after the request — when the menu is gone and
// the plot has hidden its hover overlay (capturing()) — the app reads the rectangle back from the
// framebuffer after rendering (process()) and writes the file. CSV is written immediately.
// Files go to directory() (the working directory by default) as tttlab_<name>_<time>.<ext>.
// UI thread only.
#pragma once

#include <imgui.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "gui/platform/window.hpp"

namespace tttlab::gui::plot {

class Exporter {
 public:
  void set_directory(std::filesystem::path dir) { m_dir = std::move(dir); }
  const std::filesystem::path& directory() const { return m_dir; }
  // A fresh file name: <directory>/tttlab_<stem>_<YYYYmmdd-HHMMSS>[_n].<ext>.
  std::filesystem::path make_path(const std::string& stem, const std::string& ext) const;

  void request_png(ImGuiID plot, const std::string& stem);
  // A plot reports where it is this frame, under its export name.
  void note_rect(ImGuiID plot, const std::string& stem, ImVec2 min, ImVec2 max);
  // Requests the plot that reported `stem` this frame; false if none did. (For "export all" style
  // commands and tests, which do not know ImGui ids.)
  bool request_png_by_name(const std::string& stem);
  // The export names reported this frame.
  std::vector<std::string> on_screen() const;
  bool capturing(ImGuiID plot) const;
  // Writes text (CSV) now and notifies; returns false on failure.
  bool save_text(const std::string& stem, const std::string& ext, const std::string& content);
  // Whole-window capture on the next frame.
  void request_window_png();

  // App side, after the frame is rendered and before it is presented: captures what is due.
  // `read(x, y, w, h)` reads framebuffer pixels (origin top-left, framebuffer pixels); `scale` maps
  // ImGui coordinates to framebuffer pixels.
  void process(const std::function<Image(int, int, int, int)>& read, ImVec2 scale, ImVec2 display);

 private:
  struct Pending {
    ImGuiID id;
    std::string stem;
    int frames_left;
    bool window;
  };
  struct Rect {
    ImGuiID id;
    std::string stem;
    ImVec2 min, max;
  };
  std::filesystem::path m_dir = ".";
  std::vector<Pending> m_pending;
  std::vector<Rect> m_rects;       // noted during the current frame
  std::vector<Rect> m_last_rects;  // noted during the previous frame
};

Exporter& exporter();

}  // namespace tttlab::gui::plot
