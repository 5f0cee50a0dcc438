#include "lab/plot/csv.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tttlab::lab::plot {

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string csv_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
#if defined(_LIBCPP_VERSION) && _LIBCPP_VERSION < 14000
  return shortest_double_text(v);
#else
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
#endif
}

std::string shortest_double_text(double v) {
  char sci[64];
  int digits = 1;  // significant digits: the fewest that read back as v (17 always do)
  for (; digits < 17; ++digits) {
    std::snprintf(sci, sizeof sci, "%.*e", digits - 1, v);
    if (std::strtod(sci, nullptr) == v) break;
  }
  std::snprintf(sci, sizeof sci, "%.*e", digits - 1, v);
  // The fixed form with the same digits: as many decimals as the digits reach below the units.
  const int exponent = std::atoi(std::strchr(sci, 'e') + 1);
  char fixed[400];
  std::snprintf(fixed, sizeof fixed, "%.*f", std::max(0, digits - 1 - exponent), v);
  return std::strlen(fixed) <= std::strlen(sci) ? std::string(fixed) : std::string(sci);
}

std::string columns_to_csv(std::span<const CsvColumn> columns) {
  std::string out;
  std::size_t rows = 0;
  for (std::size_t c = 0; c < columns.size(); ++c) {
    if (c) out += ',';
    out += csv_field(columns[c].header);
    rows = std::max(rows, columns[c].values.size());
  }
  out += '\n';
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < columns.size(); ++c) {
      if (c) out += ',';
      if (r < columns[c].values.size()) out += csv_number(columns[c].values[r]);
    }
    out += '\n';
  }
  return out;
}

std::string matrix_to_csv(const double* data, long rows, long cols, long row_stride,
                          std::span<const std::string> row_labels,
                          std::span<const std::string> col_labels, std::string_view corner) {
  std::string out = csv_field(corner);
  for (long j = 0; j < cols; ++j) {
    out += ',';
    out += static_cast<std::size_t>(j) < col_labels.size()
               ? csv_field(col_labels[static_cast<std::size_t>(j)])
               : std::to_string(j);
  }
  out += '\n';
  for (long i = 0; i < rows; ++i) {
    out += static_cast<std::size_t>(i) < row_labels.size()
               ? csv_field(row_labels[static_cast<std::size_t>(i)])
               : std::to_string(i);
    for (long j = 0; j < cols; ++j) {
      out += ',';
      out += csv_number(data[i * row_stride + j]);
    }
    out += '\n';
  }
  return out;
}

}  // namespace tttlab::lab::plot
