// app/gui/plot/line_plot.hpp — line plots drawn with ImDrawList (ImPlot is not available).
//
//   plot::LinePlot p;
//   p.id = "losses"; p.title = "Inner losses"; p.y_label = "ℓ = ½‖f(k) − v‖²";
//   p.x_label = "token t"; p.smoothing = 0.6; p.markers = boundaries; p.cursor = t;
//   p.series.push_back({"ℓ(W₀; xₜ)", ys, {}, 0, 1, colors::kLossInitial});
//   auto r = plot::line_plot(p);            // r.drag_x: where the user clicks/drags (scrubbing)
//
// Features: linear or log axes with 1-2-5 ticks; raw series drawn faint under their EMA when
// smoothing is on (both always visible: smoothing never hides the data); vertical markers (dashed)
// and a cursor line; a legend whose entries toggle series; a crosshair with a tooltip listing every
// series' raw and smoothed value at the hovered x, recomputed every frame from the current data (so
// it stays live while the data changes); right-click export to PNG and CSV.
// Series data is borrowed for the call only; the plot keeps no copy.
#pragma once

#include <imgui.h>

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lab/plot/scale.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui::plot {

struct Series {
  std::string label;
  std::span<const double> y;
  std::span<const double> x;  // empty: x_i = x0 + i·dx
  double x0 = 0.0, dx = 1.0;
  ImU32 color = IM_COL32(230, 159, 0, 255);
  bool smooth = true;          // apply the plot's smoothing to this series
  float thickness = 1.6f;
  bool line = true;            // connect the samples
  bool markers = false;        // a dot on every sample (with line = false: a scatter plot)
  // A short label drawn next to each sample (e.g. "b = 4"); empty strings draw nothing.
  std::function<std::string(std::size_t)> point_label;

  double x_at(std::size_t i) const { return x.empty() ? x0 + dx * static_cast<double>(i) : x[i]; }
};

// A line series starting at x = x0 with step dx (the common case, without field-by-field setup).
inline Series line(std::string label, std::span<const double> y, ImU32 color, bool smooth = true, double x0 = 0.0,
                   double dx = 1.0) {
  Series s;
  s.label = std::move(label);
  s.y = y;
  s.x0 = x0;
  s.dx = dx;
  s.color = color;
  s.smooth = smooth;
  return s;
}
// A series with explicit x values.
inline Series xy(std::string label, std::span<const double> x, std::span<const double> y, ImU32 color,
                 bool smooth = false) {
  Series s = line(std::move(label), y, color, smooth);
  s.x = x;
  return s;
}

struct VLine {
  double x = 0.0;
  ImU32 color = colors::kMarker;
  bool dashed = true;
};

struct LinePlot {
  const char* id = "plot";
  std::string title;
  std::string y_label;   // shown under the title (ImGui cannot rotate text)
  std::string x_label;
  std::string export_name;  // file stem for exports (default: id)
  ImVec2 size{-1.0f, 220.0f};  // width ≤ 0: the available width
  ScaleKind x_scale = ScaleKind::Linear;
  ScaleKind y_scale = ScaleKind::Linear;
  std::optional<Range> x_range, y_range;  // fixed; otherwise fitted to the data
  double x_pad = 0.0;                     // fitted x range: padding as a share of its width (scatter plots)
  double smoothing = 0.0;                 // EMA weight in [0, 0.999]
  std::vector<Series> series;
  std::vector<VLine> markers;
  std::optional<double> cursor;           // highlighted x (drawn solid, accent colour)
  std::function<std::string(double)> x_format;  // hover header / cursor label, e.g. "t = 37 'o'"
  bool legend = true;
  std::string empty_text = "no data yet";
};

// A plot with what every plot names: its id, the file stem of its exports, its title, the axis labels
// and its size. The caller sets the rest (scales, series, markers).
inline LinePlot titled(const char* id, std::string export_name, std::string title, std::string y_label,
                       std::string x_label, ImVec2 size) {
  LinePlot p;
  p.id = id;
  p.export_name = std::move(export_name);
  p.title = std::move(title);
  p.y_label = std::move(y_label);
  p.x_label = std::move(x_label);
  p.size = size;
  return p;
}

struct PlotResult {
  bool hovered = false;
  std::optional<double> hover_x;
  std::optional<double> drag_x;  // x under the mouse while the left button is held on the plot
};

PlotResult line_plot(const LinePlot& plot);

}  // namespace tttlab::gui::plot
