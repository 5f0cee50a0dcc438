#include "gui/plot/line_plot.hpp"

#include <imgui_internal.h>  // ImRect

#include <algorithm>
#include <cmath>

#include "gui/fonts.hpp"
#include "lab/plot/csv.hpp"
#include "gui/plot/heatmap.hpp"
#include "gui/plot/plot_common.hpp"
#include "gui/plot/plot_export.hpp"
#include "lab/plot/smoothing.hpp"
#include "lab/plot/ticks.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui::plot {
namespace {

// Index of the sample nearest to x (samples sorted by x, unless the series is a scatter).
std::size_t nearest(const Series& s, double x) {
  const std::size_t n = s.y.size();
  if (n == 0) return 0;
  if (!s.line) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < n; ++i)
      if (std::abs(s.x_at(i) - x) < std::abs(s.x_at(best) - x)) best = i;
    return best;
  }
  if (s.x.empty()) {
    const double i = std::round((x - s.x0) / s.dx);
    return static_cast<std::size_t>(std::clamp(i, 0.0, static_cast<double>(n - 1)));
  }
  auto it = std::lower_bound(s.x.begin(), s.x.begin() + static_cast<std::ptrdiff_t>(n), x);
  std::size_t i = static_cast<std::size_t>(it - s.x.begin());
  if (i >= n) return n - 1;
  if (i > 0 && std::abs(s.x[i - 1] - x) <= std::abs(s.x[i] - x)) --i;
  return i;
}

// Called inside the plot's ID scope, so the key is unique per plot and stable across frames.
ImGuiID series_key(ImGuiID, const std::string& label) {
  return ImGui::GetID(("legend/" + label).c_str());
}

// Polyline through the drawable points, broken at gaps; dense data is reduced to the min/max of
// each pixel column (an honest envelope: no spike disappears).
void draw_series(ImDrawList* dl, const Series& s, std::span<const double> y, const AxisMap& xm,
                 const AxisMap& ym, ImVec2 p0, ImVec2 p1, ImU32 col, float thickness) {
  const float w = p1.x - p0.x, h = p1.y - p0.y;
  const auto px = [&](double xv) { return p0.x + static_cast<float>(xm.forward(xv)) * w; };
  const auto py = [&](double yv) { return p1.y - static_cast<float>(ym.forward(yv)) * h; };
  ImVector<ImVec2> pts;
  const auto flush = [&] {
    if (pts.Size >= 2) dl->AddPolyline(pts.Data, pts.Size, col, 0, thickness);
    if (pts.Size == 1) dl->AddCircleFilled(pts[0], thickness, col);
    pts.resize(0);
  };
  const std::size_t n = y.size();
  const bool dense = static_cast<double>(n) > 2.0 * w;
  int col_px = INT32_MIN;
  float lo = 0, hi = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double xv = s.x_at(i), yv = y[i];
    if (!xm.drawable(xv) || !ym.drawable(yv)) {
      if (dense && col_px != INT32_MIN) {
        pts.push_back(ImVec2(static_cast<float>(col_px), lo));
        if (hi != lo) pts.push_back(ImVec2(static_cast<float>(col_px), hi));
        col_px = INT32_MIN;
      }
      flush();
      continue;
    }
    const float X = px(xv), Y = py(yv);
    if (!dense) {
      pts.push_back(ImVec2(X, Y));
      continue;
    }
    const int c = static_cast<int>(std::floor(X));
    if (c != col_px) {
      if (col_px != INT32_MIN) {
        pts.push_back(ImVec2(static_cast<float>(col_px), lo));
        if (hi != lo) pts.push_back(ImVec2(static_cast<float>(col_px), hi));
      }
      col_px = c;
      lo = hi = Y;
    } else {
      lo = std::min(lo, Y);
      hi = std::max(hi, Y);
    }
  }
  if (dense && col_px != INT32_MIN) {
    pts.push_back(ImVec2(static_cast<float>(col_px), lo));
    if (hi != lo) pts.push_back(ImVec2(static_cast<float>(col_px), hi));
  }
  flush();
}

}  // namespace

PlotResult line_plot(const LinePlot& p) {
  PlotResult result;
  const Fonts& f = fonts();
  ImGui::PushID(p.id);
  const ImGuiID id = ImGui::GetID("##plot");
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 pos = ImGui::GetCursorScreenPos();
  ImVec2 size = p.size;
  if (size.x <= 0.0f) size.x = ImGui::GetContentRegionAvail().x;
  const float small_h = f.small->FontSize;

  // Which series are shown (legend toggles live in ImGui's per-window storage).
  ImGuiStorage* store = ImGui::GetStateStorage();
  std::vector<bool> visible(p.series.size());
  for (std::size_t i = 0; i < p.series.size(); ++i)
    visible[i] = !store->GetBool(series_key(id, p.series[i].label), false);

  // Smoothed copies (cheap: a few thousand points at most).
  const bool smoothing = p.smoothing > 0.0;
  std::vector<std::vector<double>> smooth(p.series.size());
  for (std::size_t i = 0; i < p.series.size(); ++i)
    if (smoothing && p.series[i].smooth) smooth[i] = ema_smooth(p.series[i].y, p.smoothing);

  // Ranges.
  RangeFitter fx(p.x_scale), fy(p.y_scale);
  for (std::size_t i = 0; i < p.series.size(); ++i) {
    if (!visible[i]) continue;
    const auto& s = p.series[i];
    for (std::size_t k = 0; k < s.y.size(); ++k) {
      fx.add(s.x_at(k));
      fy.add(s.y[k]);
    }
  }
  const Range xr = p.x_range ? *p.x_range : fx.range(p.x_pad);
  const Range yr = p.y_range ? *p.y_range : fy.range(0.06);
  const AxisMap xm{p.x_scale, xr.lo, xr.hi}, ym{p.y_scale, yr.lo, yr.hi};

  // Layout: title (+ y label) on top, then the legend where it has no room beside them, y tick labels
  // left, x ticks and label below. The legend's placement is decided first: it takes lines from the
  // plot's height when it goes above the frame, and inside the frame it would cover the data.
  float top = pos.y;
  // A title wider than the plot is cut with "…": on a narrow screen it would run into its neighbour.
  const std::string title = clip_to_width(p.title, size.x, [&](const std::string& t) { return text_size(f.bold, t.c_str()).x; });
  // A y label wider than the plot wraps (a cut label reads as a different quantity).
  const std::vector<std::string> y_lines =
      wrap_to_width(p.y_label, size.x, [&](const std::string& t) { return text_size(f.small, t.c_str()).x; });
  const bool show_legend = p.legend && !p.series.empty();
  std::vector<float> entry_w(p.series.size());
  float legend_w = 0.0f;
  for (std::size_t i = 0; i < p.series.size(); ++i) {
    entry_w[i] = 22.0f + text_size(f.small, p.series[i].label.c_str()).x;
    legend_w += entry_w[i] + 14.0f;
  }
  legend_w = std::max(0.0f, legend_w - 14.0f);
  const float title_w = p.title.empty() ? 0.0f : text_size(f.bold, title.c_str()).x;
  const float y_label_w = y_lines.empty() ? 0.0f : text_size(f.small, y_lines.back().c_str()).x;
  // Where it fits, the legend goes on the title line, else on the y label's last line, else on lines of
  // its own above the frame: beside the data, never over it.
  const bool legend_on_title = show_legend && !p.title.empty() && legend_w + title_w + 24.0f < size.x;
  const bool legend_on_y_label =
      show_legend && !legend_on_title && !y_lines.empty() && legend_w + y_label_w + 24.0f < size.x;
  // Legend lines of their own: entries wrapped to the plot's width, each line right-aligned.
  std::vector<std::vector<std::size_t>> legend_rows;
  if (show_legend && !legend_on_title && !legend_on_y_label) {
    float x = 0.0f;
    for (std::size_t i = 0; i < p.series.size(); ++i) {
      if (legend_rows.empty() || (x > 0.0f && x + entry_w[i] > size.x)) {
        legend_rows.emplace_back();
        x = 0.0f;
      }
      legend_rows.back().push_back(i);
      x += entry_w[i] + 14.0f;
    }
  }
  if (!p.title.empty()) {
    dl->AddText(f.bold, f.bold->FontSize, ImVec2(pos.x, top), colors::kText, title.c_str());
    top += f.bold->FontSize + 2.0f;
  }
  float y_label_last_top = top;
  for (const auto& line : y_lines) {
    y_label_last_top = top;
    dl->AddText(f.small, small_h, ImVec2(pos.x, top), colors::kTextDim, line.c_str());
    top += small_h + 2.0f;
  }
  if (!y_lines.empty()) top += 2.0f;
  const float legend_rows_top = top;
  top += static_cast<float>(legend_rows.size()) * (small_h + 3.0f);
  // The top tick label is centred on the frame's top edge: half a line of room keeps it off the text above.
  if (top > pos.y) top += std::floor(small_h * 0.5f);
  const float plot_h_guess = size.y - (top - pos.y) - 2.0f * small_h - 10.0f;
  const int y_budget = std::clamp(static_cast<int>(plot_h_guess / (2.4f * small_h)), 2, 8);
  const auto yticks = ticks_for(ym, y_budget);
  float label_w = 0.0f;
  for (const auto& t : yticks)
    if (t.major) label_w = std::max(label_w, text_size(f.small, t.label.c_str()).x);
  const float left = label_w + 8.0f;
  // The x label wraps too: centred under a narrow plot, one long line would run into the plot beside it.
  const std::vector<std::string> x_lines =
      wrap_to_width(p.x_label, size.x, [&](const std::string& t) { return text_size(f.small, t.c_str()).x; });
  const float bottom = small_h + 4.0f + static_cast<float>(x_lines.size()) * (small_h + 2.0f) + (x_lines.empty() ? 0.0f : 2.0f);
  const ImVec2 p0(pos.x + left, top), p1(pos.x + size.x - 6.0f, pos.y + size.y - bottom);
  const float w = std::max(1.0f, p1.x - p0.x), h = std::max(1.0f, p1.y - p0.y);
  const int x_budget = std::clamp(static_cast<int>(w / 70.0f), 2, 12);
  const auto xticks = ticks_for(xm, x_budget);
  const auto X = [&](double v) { return p0.x + static_cast<float>(xm.forward(v)) * w; };
  const auto Y = [&](double v) { return p1.y - static_cast<float>(ym.forward(v)) * h; };

  // Interaction item over the plot area.
  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton("##plot", ImVec2(w, h));
  const bool hovered = ImGui::IsItemHovered();
  const bool active = ImGui::IsItemActive();
  const std::string stem = p.export_name.empty() ? p.id : p.export_name;
  exporter().note_rect(id, stem, pos, ImVec2(pos.x + size.x, pos.y + size.y));
  const bool capturing = exporter().capturing(id);
  export_menu(id, stem, [&] {
    std::vector<CsvColumn> cols;
    for (std::size_t i = 0; i < p.series.size(); ++i) {
      const auto& s = p.series[i];
      if (s.y.empty()) continue;
      CsvColumn xc{"x", {}};
      for (std::size_t k = 0; k < s.y.size(); ++k) xc.values.push_back(s.x_at(k));
      if (cols.empty() || cols.front().values != xc.values) {
        xc.header = cols.empty() ? (p.x_label.empty() ? "x" : p.x_label) : s.label + " (x)";
        cols.push_back(std::move(xc));
      }
      cols.push_back({s.label, {s.y.begin(), s.y.end()}});
      if (!smooth[i].empty())
        cols.push_back({s.label + " (EMA " + csv_number(p.smoothing) + ")", smooth[i]});
    }
    return columns_to_csv(cols);
  });

  // Background, grid, ticks.
  dl->AddRectFilled(p0, p1, colors::kPlotBg);
  // Tick labels closer than a line apart would print over each other (a log axis on a short plot):
  // the decades are labelled first, then any other label where it has room.
  std::vector<std::pair<float, const Tick*>> y_labels;
  for (const auto& t : yticks) {
    if (!ym.drawable(t.value)) continue;
    const float y = std::round(Y(t.value)) + 0.5f;
    if (y < p0.y - 0.5f || y > p1.y + 0.5f) continue;
    dl->AddLine(ImVec2(p0.x, y), ImVec2(p1.x, y), t.major ? colors::kGrid : colors::kGridMinor);
    if (t.major) y_labels.emplace_back(y, &t);
  }
  const auto decade = [&](const Tick& t) {
    if (p.y_scale != ScaleKind::Log10 || !(t.value > 0.0)) return false;
    const double e = std::log10(t.value);
    return std::abs(e - std::round(e)) < 1e-9;
  };
  std::stable_partition(y_labels.begin(), y_labels.end(), [&](const auto& l) { return decade(*l.second); });
  std::vector<float> placed_y;
  for (const auto& [y, t] : y_labels) {
    const float yy = y;
    if (std::any_of(placed_y.begin(), placed_y.end(), [&](float o) { return std::abs(o - yy) < small_h + 1.0f; }))
      continue;
    placed_y.push_back(y);
    text_at(dl, f.small, ImVec2(p0.x - 5.0f, y), 1.0f, 0.5f, colors::kTextDim, t->label.c_str());
  }
  float last_label_right = -1e9f;
  for (const auto& t : xticks) {
    if (!xm.drawable(t.value)) continue;
    const float x = std::round(X(t.value)) + 0.5f;
    if (x < p0.x - 0.5f || x > p1.x + 0.5f) continue;
    dl->AddLine(ImVec2(x, p0.y), ImVec2(x, p1.y), t.major ? colors::kGrid : colors::kGridMinor);
    if (t.major) {
      const ImVec2 ts = text_size(f.small, t.label.c_str());
      if (x - ts.x * 0.5f > last_label_right + 6.0f) {
        text_at(dl, f.small, ImVec2(x, p1.y + 3.0f), 0.5f, 0.0f, colors::kTextDim, t.label.c_str());
        last_label_right = x + ts.x * 0.5f;
      }
    }
  }
  for (std::size_t i = 0; i < x_lines.size(); ++i) {
    // Centred under the frame where it fits there, else under the whole block.
    const float lw = text_size(f.small, x_lines[i].c_str()).x;
    const float cx = std::max(pos.x + lw * 0.5f, std::min((p0.x + p1.x) * 0.5f, pos.x + size.x - lw * 0.5f));
    text_at(dl, f.small, ImVec2(cx, p1.y + small_h + 6.0f + static_cast<float>(i) * (small_h + 2.0f)), 0.5f, 0.0f,
            colors::kTextDim, x_lines[i].c_str());
  }

  dl->PushClipRect(p0, p1, true);
  // Markers and cursor under the data. Markers closer than 6 px would only hatch the plot grey:
  // then they are left out (the cursor stays).
  const bool markers_fit = static_cast<float>(p.markers.size()) * 6.0f < w;
  for (const auto& m : markers_fit ? p.markers : std::vector<VLine>{}) {
    if (!xm.drawable(m.x) || m.x < xr.lo || m.x > xr.hi) continue;
    const float x = std::round(X(m.x)) + 0.5f;
    if (m.dashed)
      dashed_line(dl, ImVec2(x, p0.y), ImVec2(x, p1.y), m.color, 4.0f, 3.0f);
    else
      dl->AddLine(ImVec2(x, p0.y), ImVec2(x, p1.y), m.color);
  }
  if (p.cursor && xm.drawable(*p.cursor)) {
    const float x = std::round(X(*p.cursor)) + 0.5f;
    dl->AddLine(ImVec2(x, p0.y), ImVec2(x, p1.y), colors::kCursor, 1.5f);
  }
  bool any = false;
  std::vector<ImRect> label_boxes;  // point labels drawn so far
  for (std::size_t i = 0; i < p.series.size(); ++i) {
    if (!visible[i] || p.series[i].y.empty()) continue;
    any = true;
    const auto& s = p.series[i];
    if (!s.line) {
    } else if (!smooth[i].empty()) {
      draw_series(dl, s, s.y, xm, ym, p0, p1, with_alpha(s.color, 0.35f), 1.0f);
      draw_series(dl, s, smooth[i], xm, ym, p0, p1, s.color, s.thickness);
    } else {
      draw_series(dl, s, s.y, xm, ym, p0, p1, s.color, s.thickness);
    }
    if (s.markers || s.point_label) {
      for (std::size_t k = 0; k < s.y.size(); ++k) {
        if (!xm.drawable(s.x_at(k)) || !ym.drawable(s.y[k])) continue;
        const ImVec2 pt(X(s.x_at(k)), Y(s.y[k]));
        if (s.markers) {
          dl->AddCircleFilled(pt, s.thickness + 2.2f, s.color);
          dl->AddCircle(pt, s.thickness + 2.2f, colors::kPointOutline);
        }
        if (s.point_label) {
          const std::string lbl = s.point_label(k);
          if (!lbl.empty()) {
            // Right of the point and above it where that stays inside the frame and clear of the labels
            // already drawn, else below it, else to its left; a label with no free place is left out
            // (the hover read-out still names the point): two labels drawn over each other read as one.
            const ImVec2 ts = text_size(f.small, lbl.c_str());
            for (int place = 0; place < 4; ++place) {
              const bool to_left = place >= 2, below = place % 2 == 1;
              const ImVec2 a(to_left ? pt.x - 6.0f - ts.x : pt.x + 6.0f, below ? pt.y + 3.0f : pt.y - 3.0f - ts.y);
              const ImRect box(a, ImVec2(a.x + ts.x, a.y + ts.y));
              if (box.Min.x < p0.x + 1.0f || box.Max.x > p1.x - 2.0f || box.Min.y < p0.y + 1.0f || box.Max.y > p1.y - 1.0f)
                continue;
              if (std::any_of(label_boxes.begin(), label_boxes.end(), [&](const ImRect& o) { return o.Overlaps(box); }))
                continue;
              label_boxes.push_back(box);
              dl->AddText(f.small, small_h, ImVec2(std::floor(a.x), std::floor(a.y)), with_alpha(s.color, 0.95f),
                          lbl.c_str());
              break;
            }
          }
        }
      }
    }
  }
  dl->PopClipRect();
  dl->AddRect(p0, p1, colors::kPlotFrame);
  if (!any)
    text_at(dl, f.small, ImVec2((p0.x + p1.x) * 0.5f, (p0.y + p1.y) * 0.5f), 0.5f, 0.5f,
            colors::kTextFaint, p.empty_text.c_str());

  // Legend entries (right-aligned on their line); click one to hide/show its series.
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const bool mouse_in_block = ImGui::IsWindowHovered() && mouse.x >= pos.x && mouse.x < pos.x + size.x &&
                              mouse.y >= pos.y && mouse.y < pos.y + size.y;
  const auto legend_line = [&](const std::vector<std::size_t>& entries, float y) {
    float line_w = 0.0f;
    for (std::size_t i : entries) line_w += entry_w[i] + 14.0f;
    float x = pos.x + size.x - std::max(0.0f, line_w - 14.0f);
    for (std::size_t i : entries) {
      const float ew = entry_w[i];
      const ImVec2 e0(x - 2.0f, y - 1.0f), e1(x + ew + 2.0f, y + small_h + 1.0f);
      const bool over = mouse_in_block && mouse.x >= e0.x && mouse.x < e1.x && mouse.y >= e0.y && mouse.y < e1.y;
      if (over) {
        dl->AddRectFilled(e0, e1, colors::kHoverTint, 2.0f);
        ImGui::SetTooltip("Click to %s this series", visible[i] ? "hide" : "show");
        if (ImGui::IsMouseClicked(ImGuiMouseButton_Left))
          store->SetBool(series_key(id, p.series[i].label), visible[i]);
      }
      const ImU32 c = visible[i] ? p.series[i].color : colors::kTextFaint;
      dl->AddLine(ImVec2(x, y + small_h * 0.5f + 1.0f), ImVec2(x + 16.0f, y + small_h * 0.5f + 1.0f), c, 2.5f);
      dl->AddText(f.small, small_h, ImVec2(x + 22.0f, y), visible[i] ? colors::kText : colors::kTextFaint,
                  p.series[i].label.c_str());
      x += ew + 14.0f;
    }
  };
  if (legend_on_title || legend_on_y_label) {
    std::vector<std::size_t> all(p.series.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    legend_line(all, legend_on_title ? pos.y + (f.bold->FontSize - small_h) * 0.5f : y_label_last_top);
  }
  for (std::size_t r = 0; r < legend_rows.size(); ++r)
    legend_line(legend_rows[r], legend_rows_top + static_cast<float>(r) * (small_h + 3.0f));

  // Crosshair, hover read-out and scrubbing.
  if (hovered && !capturing) {
    const double hx = xm.inverse((mouse.x - p0.x) / w);
    const double hy = ym.inverse((p1.y - mouse.y) / h);
    result.hovered = true;
    result.hover_x = hx;
    dl->AddLine(ImVec2(mouse.x, p0.y), ImVec2(mouse.x, p1.y), colors::kCrosshair);
    dl->AddLine(ImVec2(p0.x, mouse.y), ImVec2(p1.x, mouse.y), colors::kCrosshair);
    const std::string yl = format_value(hy, 3);
    const ImVec2 ys = text_size(f.small, yl.c_str());
    dl->AddRectFilled(ImVec2(p0.x - ys.x - 8.0f, mouse.y - ys.y * 0.5f - 1.0f),
                      ImVec2(p0.x, mouse.y + ys.y * 0.5f + 1.0f), colors::kChipHover, 2.0f);
    text_at(dl, f.small, ImVec2(p0.x - 4.0f, mouse.y), 1.0f, 0.5f, colors::kText, yl.c_str());

    ImGui::BeginTooltip();
    bool header = false;
    for (std::size_t i = 0; i < p.series.size(); ++i) {
      const auto& s = p.series[i];
      if (!visible[i] || s.y.empty()) continue;
      const std::size_t k = nearest(s, hx);
      if (!header) {
        const double sx = s.x_at(k);
        ImGui::PushFont(f.bold);
        ImGui::TextUnformatted(p.x_format ? p.x_format(sx).c_str()
                                          : (p.x_label + " = " + format_value(sx, 5)).c_str());
        ImGui::PopFont();
        header = true;
      }
      const ImVec2 pt(X(s.x_at(k)), Y(s.y[k]));
      if (xm.drawable(s.x_at(k)) && ym.drawable(s.y[k]))
        dl->AddCircleFilled(pt, 3.5f, s.color);
      ImGui::ColorButton("##c", ImGui::ColorConvertU32ToFloat4(s.color),
                         ImGuiColorEditFlags_NoTooltip | ImGuiColorEditFlags_NoBorder,
                         ImVec2(small_h * 0.8f, small_h * 0.8f));
      ImGui::SameLine();
      if (!smooth[i].empty())
        ImGui::Text("%s  %s   (EMA %s)", s.label.c_str(), format_value(s.y[k], 5).c_str(),
                    format_value(smooth[i][k], 5).c_str());
      else
        ImGui::Text("%s  %s", s.label.c_str(), format_value(s.y[k], 5).c_str());
    }
    if (!header) ImGui::TextDisabled("%s", p.empty_text.c_str());
    ImGui::EndTooltip();
  }
  if (active && ImGui::IsMouseDown(ImGuiMouseButton_Left))
    result.drag_x = xm.inverse(std::clamp((mouse.x - p0.x) / w, 0.0f, 1.0f));

  ImGui::SetCursorScreenPos(pos);
  ImGui::Dummy(size);
  ImGui::PopID();
  return result;
}

}  // namespace tttlab::gui::plot
