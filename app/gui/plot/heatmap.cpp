#include "gui/plot/heatmap.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gui/fonts.hpp"
#include "lab/plot/colormap.hpp"
#include "lab/plot/csv.hpp"
#include "gui/plot/plot_common.hpp"
#include "gui/plot/plot_export.hpp"
#include "gui/plot/texture_cache.hpp"
#include "lab/plot/ticks.hpp"
#include "gui/lab.hpp"
#include "gui/theme.hpp"

namespace tttlab::gui::plot {

double max_abs(const MatrixView& m) {
  double a = 0.0;
  for (long i = 0; i < m.rows; ++i)
    for (long j = 0; j < m.cols; ++j) {
      const double v = m.at(i, j);
      if (std::isfinite(v)) a = std::max(a, std::abs(v));
    }
  return a;
}

namespace {

struct ColorScale {
  Palette palette;
  bool log;
  double lo, hi;  // sequential: [lo, hi]; diverging: [−hi, hi]

  double unit(double v) const {
    if (palette == Palette::Diverging) return hi > 0 ? v / hi : 0.0;
    if (log) {
      if (!(v > 0)) return 0.0;
      return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    }
    return hi > lo ? (v - lo) / (hi - lo) : 0.0;
  }
  ImU32 color(double v) const {
    if (std::isnan(v)) return colors::kMissing;
    return palette == Palette::Diverging ? diverging_u32(unit(v)) : sequential_u32(unit(v));
  }
};

}  // namespace

std::string clip_to_width(const std::string& text, float width, const TextMeasure& measure) {
  if (measure(text) <= width) return text;
  const std::string ellipsis = "\xE2\x80\xA6";
  std::string s = text;
  while (!s.empty() && measure(s + ellipsis) > width) {
    unsigned char last = 0;
    do {  // one whole code point: its continuation bytes, then its first byte
      last = static_cast<unsigned char>(s.back());
      s.pop_back();
    } while (!s.empty() && (last & 0xC0) == 0x80);
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s + ellipsis;
}

std::vector<std::string> wrap_to_width(const std::string& text, float width, const TextMeasure& measure) {
  std::vector<std::string> lines;
  std::string line;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t space = text.find(' ', i);
    const std::string word = text.substr(i, space == std::string::npos ? std::string::npos : space - i);
    i = space == std::string::npos ? text.size() : space + 1;
    if (word.empty()) continue;
    const std::string joined = line.empty() ? word : line + " " + word;
    if (line.empty() || measure(joined) <= width) {
      line = joined;
    } else {
      lines.push_back(clip_to_width(line, width, measure));
      line = word;
    }
  }
  if (!line.empty()) lines.push_back(clip_to_width(line, width, measure));
  return lines;
}

std::string subtitle_line(const std::string& subtitle, const std::string& range, float width,
                          const TextMeasure& measure) {
  if (!range.empty()) {
    const std::string with_range = subtitle.empty() ? range : subtitle + "   " + range;
    if (measure(with_range) <= width) return with_range;
  }
  return clip_to_width(subtitle, width, measure);
}

HeatmapResult heatmap(const Heatmap& h) {
  HeatmapResult res;
  const Fonts& f = fonts();
  ImGui::PushID(h.id);
  const ImGuiID id = ImGui::GetID("##map");
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 pos = ImGui::GetCursorScreenPos();
  const float small_h = f.small->FontSize;
  const MatrixView& m = h.m;

  // Colour range.
  ColorScale cs{h.palette, h.log_color && h.palette == Palette::Sequential, 0.0, 1.0};
  double data_max = 0.0, data_min_pos = 0.0;
  for (long i = 0; i < m.rows; ++i)
    for (long j = 0; j < m.cols; ++j) {
      const double v = m.at(i, j);
      if (!std::isfinite(v)) continue;
      data_max = std::max(data_max, h.palette == Palette::Diverging ? std::abs(v) : v);
      if (v > 0 && (data_min_pos == 0.0 || v < data_min_pos)) data_min_pos = v;
    }
  cs.hi = h.limit > 0 ? h.limit : (data_max > 0 ? data_max : 1.0);
  if (cs.log) cs.lo = std::max(data_min_pos > 0 ? data_min_pos : cs.hi * 1e-6, cs.hi / std::max(10.0, h.log_span));
  if (cs.log && cs.lo >= cs.hi) cs.lo = cs.hi / 10.0;
  res.limit = cs.hi;

  // Title lines.
  float top = pos.y;
  const auto measure_in = [](ImFont* font) {
    return [font](const std::string& s) { return text_size(font, s.c_str()).x; };
  };
  // A title or subtitle wider than the block wraps onto a second line (a cut title reads as another
  // quantity); the colour range joins the subtitle only where the whole line fits.
  for (const auto& line : wrap_to_width(h.title, h.size.x, measure_in(f.bold))) {
    dl->AddText(f.bold, f.bold->FontSize, ImVec2(pos.x, top), colors::kText, line.c_str());
    top += f.bold->FontSize + 1.0f;
  }
  {
    const std::string range =
        h.palette == Palette::Diverging && h.show_range ? "±" + format_value(cs.hi, 3) : std::string();
    const std::string sub = subtitle_line(h.subtitle, range, h.size.x, measure_in(f.small));
    const std::vector<std::string> lines =
        measure_in(f.small)(h.subtitle) <= h.size.x ? std::vector<std::string>{sub}
                                                    : wrap_to_width(h.subtitle, h.size.x, measure_in(f.small));
    for (const auto& line : lines) {
      if (line.empty()) continue;
      dl->AddText(f.small, small_h, ImVec2(pos.x, top), colors::kTextDim, line.c_str());
      top += small_h + 3.0f;
    }
  }

  // Colour-bar axis and its labels (measured first: they set the width the map can use).
  AxisMap bar_axis;
  if (h.palette == Palette::Diverging)
    bar_axis = {ScaleKind::Linear, -cs.hi, cs.hi};
  else if (cs.log)
    bar_axis = {ScaleKind::Log10, cs.lo, cs.hi};
  else
    bar_axis = {ScaleKind::Linear, 0.0, cs.hi};
  // A short bar is labelled at its ends (and 0), a tall one with nice ticks.
  const auto bar_labels = [&](float bar_h) {
    if (bar_h >= 100.0f) {
      // Nice ticks, unless fewer than two of them fall inside the range (a range of ±0.19 gets only
      // "0.0" from steps of 0.2): a bar must show its range, so then its ends are labelled instead.
      auto nice = ticks_for(bar_axis, std::clamp(static_cast<int>(bar_h / (2.2f * small_h)), 2, 5));
      const auto inside = std::count_if(nice.begin(), nice.end(), [&](const Tick& t) {
        return t.major && t.value >= bar_axis.lo - 1e-12 * std::abs(bar_axis.lo) &&
               t.value <= bar_axis.hi + 1e-12 * std::abs(bar_axis.hi);
      });
      if (inside >= 2) return nice;
    }
    std::vector<Tick> t;
    if (h.palette == Palette::Diverging) {
      t.push_back({-cs.hi, true, format_value(-cs.hi, 2)});
      if (bar_h >= 3.0f * small_h) t.push_back({0.0, true, "0"});
      t.push_back({cs.hi, true, format_value(cs.hi, 2)});
    } else {
      t.push_back({cs.log ? cs.lo : 0.0, true, cs.log ? format_value(cs.lo, 2) : "0"});
      t.push_back({cs.hi, true, format_value(cs.hi, 2)});
    }
    return t;
  };
  const float est_h = std::max(40.0f, h.size.y - (top - pos.y));
  float label_w = 0.0f;
  for (const auto& t : bar_labels(est_h))
    if (t.major) label_w = std::max(label_w, text_size(f.small, t.label.c_str()).x);
  label_w = std::max(label_w, text_size(f.small, format_value(-cs.hi, 2).c_str()).x);

  // Map geometry.
  const float bar_w = h.colorbar ? 8.0f + 10.0f + 5.0f + label_w + 2.0f : 0.0f;
  const float avail_w = std::max(8.0f, h.size.x - bar_w);
  const float avail_h = std::max(8.0f, h.size.y - (top - pos.y));
  float cw = m.cols > 0 ? avail_w / static_cast<float>(m.cols) : 1.0f;
  float ch = m.rows > 0 ? avail_h / static_cast<float>(m.rows) : 1.0f;
  if (h.square) cw = ch = std::min({cw, ch, h.max_cell});
  else {
    cw = std::min(cw, h.max_cell);
    ch = std::min(ch, h.max_cell);
  }
  const ImVec2 p0(pos.x, top);
  const ImVec2 p1(p0.x + cw * static_cast<float>(std::max(1L, m.cols)),
                  p0.y + ch * static_cast<float>(std::max(1L, m.rows)));

  ImGui::SetCursorScreenPos(p0);
  ImGui::InvisibleButton("##map", ImVec2(std::max(1.0f, p1.x - p0.x), std::max(1.0f, p1.y - p0.y)));
  const bool hovered = ImGui::IsItemHovered();
  res.clicked = ImGui::IsItemClicked();
  const ImVec2 block_max(std::max(p1.x + bar_w, pos.x + 1.0f), std::max(p1.y, pos.y + 1.0f) + 2.0f);
  exporter().note_rect(id, h.export_name.empty() ? h.id : h.export_name, pos, block_max);
  const bool capturing = exporter().capturing(id);
  export_menu(id, h.export_name.empty() ? h.id : h.export_name, [&] {
    std::vector<std::string> rl, cl;
    if (h.row_label && !h.pooled)
      for (long i = 0; i < m.rows; ++i) rl.push_back(h.row_label(i));
    if (h.col_label && !h.pooled)
      for (long j = 0; j < m.cols; ++j) cl.push_back(h.col_label(j));
    std::vector<double> dense(static_cast<std::size_t>(m.rows * m.cols));
    for (long i = 0; i < m.rows; ++i)
      for (long j = 0; j < m.cols; ++j) dense[static_cast<std::size_t>(i * m.cols + j)] = m.at(i, j);
    std::string corner = h.row_name + "\\" + h.col_name;
    if (h.pooled) corner += " (pooled bins: max |value|)";
    return matrix_to_csv(dense.data(), m.rows, m.cols, m.cols, rl, cl, corner);
  });

  if (m.empty()) {
    dl->AddRectFilled(p0, ImVec2(pos.x + h.size.x - bar_w, pos.y + h.size.y), colors::kPlotBg);
    text_at(dl, f.small, ImVec2(pos.x + (h.size.x - bar_w) * 0.5f, pos.y + h.size.y * 0.5f), 0.5f,
            0.5f, colors::kTextFaint, "—");
  } else {
    // Cells: maps of 256 cells or more as one cached texture (nearest-neighbour: crisp cells), the
    // rest as rectangles (adjacent rectangles share edges exactly: no hairline gaps). A pooled map is
    // identified by its pooling id; any other map by a hash of its values, so a texture is rebuilt
    // exactly when the picture changes (a 32 × 32 map costs 4 vertices instead of 4096 per frame).
    ImTextureID tex = nullptr;
    if (m.rows * m.cols >= 256 && plot::textures_available()) {
      std::uint64_t key = 1469598103934665603ull;  // FNV-1a
      const auto mix = [&key](std::uint64_t x) {
        for (int b = 0; b < 8; ++b) {
          key ^= (x >> (8 * b)) & 0xFF;
          key *= 1099511628211ull;
        }
      };
      if (h.pooled) {
        mix(h.pooled->id);
      } else {
        mix(static_cast<std::uint64_t>(m.rows) << 32 | static_cast<std::uint64_t>(m.cols));
        for (long i = 0; i < m.rows; ++i)
          for (long j = 0; j < m.cols; ++j) {
            const double v = m.at(i, j);
            std::uint64_t vb = 0;
            std::memcpy(&vb, &v, sizeof vb);
            mix(vb);
          }
      }
      std::uint64_t bits = 0;
      static_assert(sizeof bits == sizeof cs.hi);
      std::memcpy(&bits, &cs.hi, sizeof bits);
      key ^= bits + (static_cast<std::uint64_t>(cs.log) << 1) + static_cast<std::uint64_t>(h.palette);
      tex = cached_texture(id, key, static_cast<int>(m.cols), static_cast<int>(m.rows), [&](std::vector<unsigned char>& px) {
        for (long i = 0; i < m.rows; ++i)
          for (long j = 0; j < m.cols; ++j) {
            const ImU32 c = cs.color(m.at(i, j));
            unsigned char* q = &px[static_cast<std::size_t>((i * m.cols + j) * 4)];
            q[0] = c & 0xFF;
            q[1] = (c >> 8) & 0xFF;
            q[2] = (c >> 16) & 0xFF;
            q[3] = 255;
          }
      });
    }
    if (tex) {
      dl->AddImage(tex, p0, p1);
    } else {
      for (long i = 0; i < m.rows; ++i) {
        const float y0 = p0.y + ch * static_cast<float>(i), y1 = y0 + ch;
        for (long j = 0; j < m.cols; ++j) {
          const float x0 = p0.x + cw * static_cast<float>(j);
          dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x0 + cw, y1), cs.color(m.at(i, j)));
        }
      }
    }
    // Values in large cells.
    if (h.show_values && cw >= 38.0f && ch >= small_h + 4.0f) {
      for (long i = 0; i < m.rows; ++i)
        for (long j = 0; j < m.cols; ++j) {
          const double v = m.at(i, j);
          if (h.masked && !(h.pooled && h.pooled->pooled()) && h.masked(i, j)) continue;
          // Two digits where they fit, else one ("3e−4"), else "≈0" for a value too small to see on the
          // colour scale: a small computed value is never left blank beside masked cells.
          std::string s = format_value(v, 2);
          if (text_size(f.small, s.c_str()).x > cw - 4.0f) s = format_value(v, 1);
          if (text_size(f.small, s.c_str()).x > cw - 4.0f && std::abs(v) < 1e-2 * std::max(std::abs(cs.lo), std::abs(cs.hi))) s = "\xE2\x89\x88" "0";
          if (text_size(f.small, s.c_str()).x > cw - 4.0f) continue;
          const Lab lab = srgb_to_lab(h.palette == Palette::Diverging ? diverging(cs.unit(v))
                                                                       : sequential(cs.unit(v)));
          text_at(dl, f.small,
                  ImVec2(p0.x + cw * (static_cast<float>(j) + 0.5f), p0.y + ch * (static_cast<float>(i) + 0.5f)),
                  0.5f, 0.5f, lab.L > 60 ? IM_COL32(20, 20, 24, 255) : IM_COL32(245, 245, 245, 255),
                  s.c_str());
        }
    }
    // Separators and highlights, in source coordinates.
    const auto row_y = [&](long src) {
      const long bin = h.pooled ? h.pooled->row_bin(src) : src;
      return p0.y + ch * static_cast<float>(bin);
    };
    const auto col_x = [&](long src) {
      const long bin = h.pooled ? h.pooled->col_bin(src) : src;
      return p0.x + cw * static_cast<float>(bin);
    };
    const ImU32 sep = colors::kCellSeparator;
    // Separators closer than 6 px would only hatch the map: then they are left out.
    const bool rows_fit = static_cast<float>(h.row_lines.size()) * 6.0f < p1.y - p0.y;
    const bool cols_fit = static_cast<float>(h.col_lines.size()) * 6.0f < p1.x - p0.x;
    const bool blocks_fit = static_cast<float>(h.diagonal_blocks.size()) * 6.0f < p1.x - p0.x;
    for (long r : rows_fit ? h.row_lines : std::vector<long>{})
      if (r > 0 && r < (h.pooled ? h.pooled->src_rows : m.rows))
        dl->AddLine(ImVec2(p0.x, row_y(r)), ImVec2(p1.x, row_y(r)), sep, 1.0f);
    for (long c : cols_fit ? h.col_lines : std::vector<long>{})
      if (c > 0 && c < (h.pooled ? h.pooled->src_cols : m.cols))
        dl->AddLine(ImVec2(col_x(c), p0.y), ImVec2(col_x(c), p1.y), sep, 1.0f);
    if (!h.diagonal_blocks.empty() && blocks_fit) {
      const long n = std::min(h.pooled ? h.pooled->src_rows : m.rows, h.pooled ? h.pooled->src_cols : m.cols);
      for (std::size_t k = 0; k < h.diagonal_blocks.size(); ++k) {
        const long s0 = h.diagonal_blocks[k];
        const long s1 = k + 1 < h.diagonal_blocks.size() ? h.diagonal_blocks[k + 1] : n;
        if (s0 < 0 || s0 >= n || s1 <= s0) continue;
        const float ex = s1 >= n ? p1.x : col_x(s1), ey = s1 >= n ? p1.y : row_y(s1);
        dl->AddRect(ImVec2(col_x(s0), row_y(s0)), ImVec2(ex, ey), colors::kBlockOutline);
      }
    }
    if (h.highlight_row >= 0 && h.highlight_row < (h.pooled ? h.pooled->src_rows : m.rows))
      dl->AddRect(ImVec2(p0.x - 1, row_y(h.highlight_row) - 1),
                  ImVec2(p1.x + 1, row_y(h.highlight_row) + ch + 1), colors::kCursor, 0, 0, 1.5f);
    if (h.highlight_col >= 0 && h.highlight_col < (h.pooled ? h.pooled->src_cols : m.cols))
      dl->AddRect(ImVec2(col_x(h.highlight_col) - 1, p0.y - 1),
                  ImVec2(col_x(h.highlight_col) + cw + 1, p1.y + 1), colors::kCursor, 0, 0, 1.5f);
    dl->AddRect(ImVec2(p0.x - 0.5f, p0.y - 0.5f), ImVec2(p1.x + 0.5f, p1.y + 0.5f), colors::kPlotFrame);
  }

  // Colour bar with ticks.
  if (h.colorbar && !m.empty()) {
    const float bx0 = p1.x + 8.0f, bx1 = bx0 + 10.0f;
    const float by0 = p0.y, by1 = std::max(p1.y, p0.y + 40.0f);
    // Ticks for the bar as drawn (the width above was reserved from an estimate).
    const auto bar_ticks_drawn = bar_labels(by1 - by0);
    const int steps = 48;
    for (int s = 0; s < steps; ++s) {
      const double u1 = 1.0 - s / double(steps), u0 = 1.0 - (s + 1) / double(steps);
      const double um = 0.5 * (u0 + u1);
      const ImU32 c = h.palette == Palette::Diverging ? diverging_u32(2.0 * um - 1.0) : sequential_u32(um);
      const float y0 = by0 + (by1 - by0) * static_cast<float>(s) / steps;
      const float y1 = by0 + (by1 - by0) * static_cast<float>(s + 1) / steps;
      dl->AddRectFilled(ImVec2(bx0, y0), ImVec2(bx1, y1 + 0.5f), c);
    }
    dl->AddRect(ImVec2(bx0 - 0.5f, by0 - 0.5f), ImVec2(bx1 + 0.5f, by1 + 0.5f), colors::kPlotFrame);
    const AxisMap& am = bar_axis;
    for (const auto& t : bar_ticks_drawn) {
      if (!t.major || !am.drawable(t.value)) continue;
      const float y = std::clamp(by1 - static_cast<float>(am.forward(t.value)) * (by1 - by0), by0 + small_h * 0.5f,
                                 by1 - small_h * 0.5f);
      if (y < by0 - 1 || y > by1 + 1) continue;
      dl->AddLine(ImVec2(bx1, y), ImVec2(bx1 + 3.0f, y), colors::kTextDim);
      text_at(dl, f.small, ImVec2(bx1 + 5.0f, y), 0.0f, 0.5f, colors::kTextDim, t.label.c_str());
    }
  }

  // Hover read-out.
  if (hovered && !m.empty() && !capturing) {
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const long bi = std::clamp(static_cast<long>((mouse.y - p0.y) / ch), 0L, m.rows - 1);
    const long bj = std::clamp(static_cast<long>((mouse.x - p0.x) / cw), 0L, m.cols - 1);
    const double v = m.at(bi, bj);
    const float x0 = p0.x + cw * static_cast<float>(bj), y0 = p0.y + ch * static_cast<float>(bi);
    dl->AddRect(ImVec2(x0 - 1, y0 - 1), ImVec2(x0 + cw + 1, y0 + ch + 1), colors::kCellHighlight, 0, 0, 1.5f);
    res.hovered = true;
    ImGui::BeginTooltip();
    ImGui::PushFont(f.bold);
    if (h.pooled) {
      const long r0 = h.pooled->row_begin(static_cast<int>(bi)), r1 = h.pooled->row_begin(static_cast<int>(bi) + 1) - 1;
      const long c0 = h.pooled->col_begin(static_cast<int>(bj)), c1 = h.pooled->col_begin(static_cast<int>(bj) + 1) - 1;
      ImGui::Text("%s %ld–%ld, %s %ld–%ld", h.row_name.c_str(), r0, r1, h.col_name.c_str(), c0, c1);
      ImGui::PopFont();
      ImGui::Text("largest |value| in this bin: %s", format_value(v, 5).c_str());
      res.row = r0;
      res.col = c0;
    } else {
      ImGui::Text("%s %ld%s%s, %s %ld%s%s", h.row_name.c_str(), bi, h.row_label ? "  " : "",
                  h.row_label ? h.row_label(bi).c_str() : "", h.col_name.c_str(), bj,
                  h.col_label ? "  " : "", h.col_label ? h.col_label(bj).c_str() : "");
      ImGui::PopFont();
      ImGui::Text("%s", format_value(v, 6).c_str());
      res.row = bi;
      res.col = bj;
      if (h.tooltip) h.tooltip(bi, bj, v);
    }
    ImGui::EndTooltip();
  }

  ImGui::SetCursorScreenPos(pos);
  ImGui::Dummy(ImVec2(std::max(h.size.x, block_max.x - pos.x), std::max(h.size.y, block_max.y - pos.y)));
  ImGui::PopID();
  return res;
}

}  // namespace tttlab::gui::plot
