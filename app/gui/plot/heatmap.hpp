// app/gui/plot/heatmap.hpp — matrices as colour grids with a colour bar (ImDrawList based).
//
// Signed data uses the diverging map with a range symmetric around 0 (so white always means 0 and
// equal colours on both sides mean equal magnitudes); magnitudes use the sequential map, optionally
// on a log colour scale (differences spanning 1e−16 … 1e−12). Hovering a cell shows its row, column
// and value (and anything `tooltip` adds, e.g. the formula with the values plugged in); cells large
// enough print their value. Large matrices come in pre-pooled (pooling.hpp) and the hover says which
// source range a bin covers. Right-click exports PNG and CSV (of the source data, not the pixels).
#pragma once

#include <imgui.h>

#include <functional>
#include <string>
#include <vector>

#include "lab/plot/pooling.hpp"
#include "gui/lab.hpp"

namespace tttlab::gui::plot {

enum class Palette { Diverging, Sequential };

// A borrowed row-major matrix of doubles or floats.
struct MatrixView {
  const double* d = nullptr;
  const float* f = nullptr;
  long rows = 0, cols = 0, stride = 0;

  static MatrixView of(const double* p, long r, long c, long stride) { return {p, nullptr, r, c, stride}; }
  static MatrixView of(const float* p, long r, long c, long stride) { return {nullptr, p, r, c, stride}; }
  static MatrixView of(const PooledMatrix& m) { return of(m.values.data(), m.rows, m.cols, m.cols); }
  double at(long i, long j) const { return d ? d[i * stride + j] : f[i * stride + j]; }
  bool empty() const { return rows <= 0 || cols <= 0 || (!d && !f); }
};

struct Heatmap {
  const char* id = "heatmap";
  std::string title;
  std::string subtitle;            // e.g. "[16 × 16]"; the colour range is appended where it fits
  std::string export_name;         // file stem (default: id)
  MatrixView m;
  const PooledMatrix* pooled = nullptr;  // when set, m must be MatrixView::of(*pooled)
  Palette palette = Palette::Diverging;
  bool log_color = false;          // sequential only
  double log_span = 1e12;          // log colour: the range covers at most max/log_span … max
  double limit = 0.0;              // > 0: fixed range (±limit, or [0, limit]); else from the data
  ImVec2 size{200.0f, 200.0f};     // the whole block: title, map, colour bar
  float max_cell = 26.0f;          // cells never grow beyond this (px)
  bool square = true;              // square cells (else the map fills the size)
  bool colorbar = true;
  bool show_values = true;         // print values into cells that are large enough
  // Cells that are zero by construction (a causal mask): printed blank, so that a "0" always means a
  // computed value that rounds to zero, never a masked one. Source coordinates; unused when bins pool.
  std::function<bool(long row, long col)> masked;
  std::string row_name = "row", col_name = "col";
  std::function<std::string(long)> row_label, col_label;  // e.g. the token of a row
  std::vector<long> row_lines, col_lines;  // separators before these source rows / columns
  std::vector<long> diagonal_blocks;       // outline squares [s_k, s_{k+1}) on the diagonal (starts)
  bool show_range = true;                  // append "±limit" to the subtitle (diverging) where it fits
  long highlight_row = -1, highlight_col = -1;
  std::function<void(long row, long col, double value)> tooltip;  // extra tooltip lines
};

struct HeatmapResult {
  bool hovered = false;
  long row = -1, col = -1;  // hovered source cell (first of its bin when pooled)
  bool clicked = false;
  double limit = 0.0;       // the colour range used
};

HeatmapResult heatmap(const Heatmap& h);

// Measures a line of text in the font it will be drawn with (px).
using TextMeasure = std::function<float(const std::string&)>;
// `text`, cut at a code point and ended with "…" where it is wider than `width`.
std::string clip_to_width(const std::string& text, float width, const TextMeasure& measure);
// `text` broken into lines no wider than `width`, at spaces; a word wider than `width` on its own is
// clipped with "…". Empty text gives no lines.
std::vector<std::string> wrap_to_width(const std::string& text, float width, const TextMeasure& measure);
// The subtitle line of a heat-map `width` wide: the colour range ("±0.538") is appended only where it
// fits (the colour bar shows the range too), and a subtitle wider than the block is clipped, so the
// line never runs into the block beside it.
std::string subtitle_line(const std::string& subtitle, const std::string& range, float width,
                          const TextMeasure& measure);

// The largest |value| (diverging) or value (sequential) of a matrix, for sharing one colour range
// between several heat-maps. Non-finite values are ignored; returns 0 for an empty matrix.
double max_abs(const MatrixView& m);

}  // namespace tttlab::gui::plot
