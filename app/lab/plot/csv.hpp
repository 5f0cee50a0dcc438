// app/lab/plot/csv.hpp — the data behind a plot as CSV (RFC 4180: comma separated, CRLF-free "\n"
// line ends accepted by every reader, fields quoted when they contain a comma, quote or line break).
//
// Numbers are written in the shortest form that reads back to the same double (std::to_chars), so
// an exported curve is exact, not rounded to what the screen shows. Non-finite values are written as
// "nan", "inf", "-inf" (what numpy.loadtxt / pandas read). Pure functions; no file I/O here.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tttlab::lab::plot {

std::string csv_field(std::string_view text);  // quoted only when needed
std::string csv_number(double v);  // the shortest text that reads back as exactly v
// The same text as std::to_chars(double) (shortest round trip; fixed or scientific, whichever is shorter,
// fixed on a tie), built with snprintf and strtod only: csv_number uses it where the standard library
// declares no floating-point to_chars (emscripten's libc++ 13). For finite v only.
std::string shortest_double_text(double v);

struct CsvColumn {
  std::string header;
  std::vector<double> values;
};

// One row per index; columns may differ in length (missing cells are left empty).
std::string columns_to_csv(std::span<const CsvColumn> columns);

// A matrix, row-major with `row_stride`; first column and header row carry the given labels
// (row_labels / col_labels may be empty, then indices are written).
std::string matrix_to_csv(const double* data, long rows, long cols, long row_stride,
                          std::span<const std::string> row_labels = {},
                          std::span<const std::string> col_labels = {},
                          std::string_view corner = "row");

}  // namespace tttlab::lab::plot
